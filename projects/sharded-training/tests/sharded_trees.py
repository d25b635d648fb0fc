"""Reading the learner's arrays as real values, comparing pytrees leaf by leaf, and
reading the placement the learner process reports (``sharded_learner.Value``)."""

from __future__ import annotations

import jax
import numpy as np
from sharded_harness import ATOL, N_DEVICES, RTOL

from coursekit.checking.errors import CheckFailed
from coursekit.checking.values import fail_unless


def devices_of(leaf) -> list[int]:
    return sorted(d.id for d in leaf.sharding.device_set)


def is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype,
                                                                 jax.dtypes.prng_key)


def host(leaf) -> np.ndarray:
    """A real numpy array (typed keys as their key data); anything else fails."""
    if is_key(leaf):
        leaf = jax.random.key_data(leaf)
    if not isinstance(leaf, (jax.Array, np.ndarray, np.generic, int, float)):
        raise CheckFailed(f"expected an array, got {type(leaf).__name__}",
                          yours=leaf, expected="a jax.Array")
    return np.asarray(leaf)


def flat(tree) -> dict[str, np.ndarray]:
    return {jax.tree_util.keystr(p): host(v)
            for p, v in jax.tree_util.tree_leaves_with_path(tree)}


def hosts(leaves: dict) -> dict[str, np.ndarray]:
    """``{name: leaf}`` returned as data, as real numpy arrays (keys as key data)."""
    return {k: host(v) for k, v in leaves.items()}


def expect_on_mesh(placement: dict, what: str, hint: str) -> None:
    """Every leaf of a reported placement on all the mesh's devices, else a failure
    naming the first that is not (``what`` is formatted with its ``name``)."""
    for name, where in placement.items():
        fail_unless(where.get("is_array") and where.get("devices") == list(range(N_DEVICES)),
                    what.format(name=name), yours=where.get("devices", where.get("type")),
                    expected=list(range(N_DEVICES)), hint=hint)


def cross_check_pieces(value) -> None:
    """Each piece's data the learner process reports has the shape it reports for that
    piece, and a piece as large as the leaf is the leaf (``SELF_REPORTED``: placement
    shard_data). Which rows a device holds is checked against the checker's own data."""
    from coursekit.checking.errors import TamperEvidence
    for name, where in value.placement.items():
        full = np.asarray(host(value.leaves[name]))
        for dev, data in (where.get("shard_data") or {}).items():
            shape = list(np.shape(data))  # a typed key's data: one more dimension
            piece = shape[:-1] if where.get("is_key") else shape
            if piece != list((where.get("piece_shapes") or {}).get(dev, [None])) or (
                    shape == list(full.shape) and not np.array_equal(np.asarray(data), full)):
                raise TamperEvidence(f"{name}: the piece reported on device {dev} is not "
                                     "the shape reported for it, or not the array it "
                                     "reports as whole")


def compare_trees(yours: dict, expected: dict, what: str, *, rtol=RTOL, atol=ATOL,
                  bitwise=False, hint="") -> None:
    """Leaf by leaf ({name: array}); names the worst leaf and its error."""
    fail_unless(sorted(yours) == sorted(expected), f"{what}: the leaves differ",
                yours=sorted(yours), expected=sorted(expected),
                hint="keep the state's structure: params, opt_state, step, key, data_pos")
    for name in sorted(expected):
        a, b = np.asarray(yours[name]), np.asarray(expected[name])
        fail_unless(a.shape == b.shape, f"{what}: {name} has the wrong shape",
                    yours=a.shape, expected=b.shape)
        if bitwise:
            same = a.dtype == b.dtype and a.tobytes() == b.tobytes()
            if not same:
                err = (float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                       if a.size else 0.0)
                raise CheckFailed(f"{what}: {name} is not bitwise equal (max |diff| "
                                  f"{err:.3g})", yours=a, expected=b, hint=hint)
        elif not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol,
                             atol=atol):
            err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            raise CheckFailed(f"{what}: {name} differs by up to {err:.3g} (tolerance "
                              f"rtol {rtol:g}, atol {atol:g})", yours=a, expected=b,
                              hint=hint)


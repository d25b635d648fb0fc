"""sharded-training stage 2: count-weighted global updates. The learner's shard_map
gradient is compared with one device's gradient over the valid rows only, with equal,
unequal and empty shards; a wrong answer is diagnosed by replaying the classic mistakes
(the mean of per-shard means, pmean after grad)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharded_harness import ATOL, N_DEVICES, RTOL, checker
from sharded_reference import random_mask, ref_init_params, stage_batch
from sharded_trees import flat, host

from coursekit.checking.contract import CheckFailed
from coursekit.checking.learner import get_function
from coursekit.checking.values import fail_unless
from coursekit.workloads import classifier


def ref_grads(params, batch) -> tuple[float, dict]:
    """Single device, only the valid rows: what every correct sharded version equals."""
    keep = batch["mask"] > 0
    x, y = jnp.asarray(batch["x"][keep]), jnp.asarray(batch["y"][keep])
    value, grads = jax.value_and_grad(classifier.loss)(params, x, y)
    return float(value), grads


def mean_of_means(params, batch) -> dict:
    """The wrong answer on purpose: the plain mean over shards of per-shard means."""
    xs = np.split(batch["x"], N_DEVICES)
    ys = np.split(batch["y"], N_DEVICES)
    ms = np.split(batch["mask"], N_DEVICES)
    per = [jax.grad(classifier.loss)(params, jnp.asarray(x), jnp.asarray(y), jnp.asarray(m))
           for x, y, m in zip(xs, ys, ms)]
    return jax.tree.map(lambda *g: sum(g) / len(g), *per)


def vec(tree) -> np.ndarray:
    return np.concatenate([np.ravel(host(v)).astype(np.float64)
                           for _, v in sorted(flat(tree).items())])


def diagnose(got: np.ndarray, ref: np.ndarray, mom: np.ndarray | None) -> str:
    if not np.all(np.isfinite(got)):
        return ("NaN or inf: a shard with no valid rows divided by its own count (0); "
                "divide the summed gradient by the *global* valid count")

    def close(a, b):
        return np.linalg.norm(a - b) <= 1e-3 * np.linalg.norm(b)
    n = N_DEVICES
    if close(got, n * ref):
        return (f"{n}x the true gradient: pmean after grad inside shard_map with "
                "replicated params (the transpose of a replicated input already summed "
                "the shards); take grad of the shard's loss sum and divide by the global "
                "count, with no pmean on the gradient")
    if mom is not None and close(got, mom):
        return ("this is the mean of per-shard means: a shard with 3 valid rows weighs as "
                "much as one with 64; sum per-shard gradient sums, divide by the total "
                "valid count")
    if mom is not None and close(got, n * mom):
        return (f"{n}x the mean of per-shard means: pmean(grad(mean loss)) inside "
                "shard_map; use per-shard loss sums and one division by the global count")
    ratio = np.linalg.norm(got) / max(np.linalg.norm(ref), 1e-30)
    return (f"norm ratio yours/expected = {ratio:.3g}; compare with one device's gradient "
            "over the valid rows")


def checker_mesh():
    """Stage 2 uses the checker's own mesh and placement, so it does not depend on
    stage 1's functions."""
    return jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices(),
                         axis_types=(jax.sharding.AxisType.Auto,))


def place_rows(batch: dict, mesh) -> dict:
    return {k: jax.device_put(v, NamedSharding(mesh, P("data"))) for k, v in batch.items()}


def check_global_grads(impl, ctx, salt: str, counts, what: str) -> None:
    global_grads = get_function(impl, "global_grads")
    mesh = checker_mesh()
    rng = ctx.rng(salt)
    rows = int(rng.integers(5, 12)) * 2 + 1
    counts = [min(c, rows) for c in counts]
    batch = stage_batch(ctx, salt + "-batch", rows, counts)
    params = ref_init_params(jax.random.key(int(rng.integers(0, 2**30))))
    placed = place_rows(batch, mesh)
    params_on_mesh = jax.device_put(params, NamedSharding(mesh, P()))
    out = global_grads(params_on_mesh, placed, mesh)
    fail_unless(isinstance(out, tuple) and len(out) == 2, "global_grads must return "
                "(loss, grads)", yours=type(out).__name__)
    loss, grads = out
    ref_loss, ref = ref_grads(params, batch)
    got, want = vec(grads), vec(ref)
    mom = vec(mean_of_means(params, batch)) if min(counts) > 0 else None
    ok = np.all(np.isfinite(got)) and np.allclose(got, want, rtol=RTOL, atol=ATOL)
    if not ok:
        raise CheckFailed(f"{what}: gradients differ from one device's over the valid rows "
                          f"(valid rows per shard {list(counts)})", yours=got,
                          expected=want, hint=diagnose(got, want, mom))
    loss = float(host(loss))
    fail_unless(math.isclose(loss, ref_loss, rel_tol=RTOL, abs_tol=ATOL),
                f"{what}: the loss is not the mean over all valid rows",
                yours=loss, expected=ref_loss,
                hint="psum the shards' loss sums, divide by the psum of the counts")


@checker.check(2, "valid_counts_per_shard")
def _(impl, ctx):
    counted = get_function(impl, "shard_valid_counts")
    mesh = checker_mesh()
    rng = ctx.rng("counts")
    rows = int(rng.integers(4, 10)) * 2 + 1
    counts = rng.integers(0, rows + 1, N_DEVICES)
    mask = random_mask(rng, rows, counts)
    placed = jax.device_put(mask, NamedSharding(mesh, P("data")))
    got = np.asarray(host(counted(placed, mesh))).astype(np.int64)
    fail_unless(got.shape == (N_DEVICES,) and np.array_equal(got, counts),
                "valid rows per shard differ", yours=got, expected=np.asarray(counts),
                hint="inside shard_map each device sums its own piece of the mask; "
                "out_specs P('data') gathers one number per device")


@checker.check(2, "uses_shard_map")
def _(impl, ctx):
    global_grads = get_function(impl, "global_grads")
    mesh = checker_mesh()
    batch = place_rows(stage_batch(ctx, "jaxpr", 3), mesh)
    params = jax.device_put(ref_init_params(jax.random.key(1)), NamedSharding(mesh, P()))
    text = str(jax.make_jaxpr(lambda p, b: global_grads(p, b, mesh))(params, batch))
    fail_unless("shard_map" in text, "global_grads does not use jax.shard_map",
                yours="no shard_map in its jaxpr", expected="a shard_map",
                hint="this stage is about writing the per-shard code yourself: "
                "jax.shard_map(f, mesh=mesh, in_specs=..., out_specs=...)")


@checker.check(2, "equal_counts_not_8x")
def _(impl, ctx):
    rng = ctx.rng("equal")
    c = int(rng.integers(3, 11))
    check_global_grads(impl, ctx, "equal", [c] * N_DEVICES, "equal valid counts")


@checker.check(2, "unequal_counts_weighted")
def _(impl, ctx):
    rng = ctx.rng("unequal")
    counts = [int(v) for v in rng.integers(1, 30, N_DEVICES)]
    counts[int(rng.integers(0, N_DEVICES))] = 1
    counts[int(rng.integers(0, N_DEVICES))] = 99  # clipped to a full shard
    check_global_grads(impl, ctx, "unequal", counts, "unequal valid counts")


@checker.check(2, "empty_shard_handled")
def _(impl, ctx):
    rng = ctx.rng("empty")
    counts = [int(v) for v in rng.integers(1, 30, N_DEVICES)]
    for d in rng.choice(N_DEVICES, 2, replace=False):
        counts[int(d)] = 0
    check_global_grads(impl, ctx, "empty", counts, "shards with no valid rows")

"""A learner's jitted function as a program the checker analyses and runs itself.

The learner process exports the function (``jax.export``) and ``describe`` turns the
result into data: the StableHLO bytes and the types around them. The checker rebuilds a
``jax.export.Exported`` with ``rebuild``, taking the input types from its *own* arguments
(so the program is run on what the checker chose, not on what the learner process says it
was called with) and refusing a program whose declared inputs differ from them. Types are
written as JAX prints them (``float32[16,4]``, ``float32[16@data,4]`` for a sharded
dimension, ``key<fry>[]`` for a typed PRNG key). Multi-device programs keep their device
count; a program with effects is refused (it is not a plain function of its inputs).
"""

from __future__ import annotations

import re

from coursekit.checking.errors import TamperEvidence


def describe(exp, **more) -> dict:
    """Learner side: an ``Exported`` as data (numpy bytes, ints, strings)."""
    import numpy as np
    return {"module": np.frombuffer(bytes(exp.mlir_module_serialized), np.uint8),
            "in_avals": [str(a) for a in exp.in_avals],
            "out_avals": [str(a) for a in exp.out_avals],
            "kept": [int(i) for i in exp.module_kept_var_idx],
            "version": int(exp.calling_convention_version),
            "uses_global_constants": bool(exp.uses_global_constants),
            "platforms": list(exp.platforms), "nr_devices": int(exp.nr_devices),
            "effects": len(exp.ordered_effects) + len(exp.unordered_effects), **more}


# The checker runs and compiles exported programs in its own process, which stays on the
# CPU (the chip is the learner's): a program is lowered for the CPU wherever it was traced.
CHECKER_PLATFORMS = ("cpu",)


def export_call(fn, args, kwargs, transform=None) -> dict:
    """Learner side: ``fn(*args, **kwargs)`` exported as a program and described, under
    the transform the checker names (None, or ``"value_and_grad"``), lowered for the
    checker's platform. The learner process answers an ``export`` request with it;
    ``bridge.InProcess`` calls it directly."""
    import jax

    def f(*a):
        return fn(*a, **kwargs)
    if transform == "value_and_grad":
        f = jax.value_and_grad(f)
    elif transform is not None:
        raise ValueError(f"unknown transform {transform!r}")
    return describe(jax.export.export(jax.jit(f), platforms=CHECKER_PLATFORMS)(*args))


def aval_of(text: str, dtypes: dict):
    """'float32[16,4]' (or 'float32[16@data,4]', 'key<fry>[]') as a ShapedArray; a dtype
    name not in ``dtypes`` (the checker's own inputs' dtypes) must be a numpy one."""
    import jax
    import numpy as np

    m = re.fullmatch(r"(.+?)\[(.*)\]", str(text).strip())
    if not m:
        raise TamperEvidence(f"the exported program has an unreadable type {text!r}")
    try:
        dims = tuple(int(d.split("@")[0]) for d in m.group(2).split(",") if d.strip())
        name = m.group(1).lstrip("~")  # '~': weak type
        dtype = dtypes[name] if name in dtypes else np.dtype(name)
    except (TypeError, ValueError) as err:
        raise TamperEvidence(f"the exported program has an unreadable type {text!r}: "
                             f"{err}") from None
    return jax.core.ShapedArray(dims, dtype, weak_type=m.group(1).startswith("~"))


def rebuild(desc, args, out_example=None, *, what: str = "the exported program"):
    """Checker side: the ``Exported`` of ``desc`` with ``args`` (any pytree of the
    checker's own arrays, in the order the function takes them) as its inputs. The
    output tree is flat unless ``out_example`` shapes it. A program that declares other
    inputs, another number of outputs, or effects fails (``CheckFailed``)."""
    import jax
    import numpy as np

    from coursekit.checking.values import fail_unless
    from coursekit.compat.jaxapi import exported
    fail_unless(isinstance(desc, dict) and not desc.get("effects"), f"{what} is not a plain "
                "function of its inputs", yours=desc.get("effects") if isinstance(desc, dict)
                else type(desc).__name__, expected="no effects")
    leaves = jax.tree.leaves(tuple(args))
    typed = [jax.typeof(a) for a in leaves]  # as jit sees them (float64 -> float32, ...)
    in_avals = tuple(jax.core.ShapedArray(t.shape, t.dtype, weak_type=t.weak_type)
                     for t in typed)
    mine = [str(a) for a in in_avals]
    theirs = [re.sub(r"@\w+", "", str(s)) for s in desc.get("in_avals", [])]
    fail_unless(mine == theirs, f"{what}'s inputs are not the arrays it was called with",
                yours=theirs, expected=mine,
                hint="keep the arguments and results of the docstring")
    dtypes = {str(a.dtype): a.dtype for a in in_avals}  # key<fry> has no numpy name
    out_avals = tuple(aval_of(s, dtypes) for s in desc.get("out_avals", []))
    out_tree = jax.tree.structure(out_example) if out_example is not None else \
        jax.tree.structure(tuple(range(len(out_avals))))
    fail_unless(out_tree.num_leaves == len(out_avals), f"{what}'s outputs do not match the "
                "call", yours=len(out_avals), expected=out_tree.num_leaves,
                hint="keep the arguments and results of the docstring")
    n_in, n_out = len(in_avals), len(out_avals)
    return exported(
        fun_name="learner", in_tree=jax.tree.structure((tuple(args), {})), in_avals=in_avals,
        out_tree=out_tree, out_avals=out_avals, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out, nr_devices=int(desc.get("nr_devices", 1)),
        platforms=tuple(desc["platforms"]), ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=(),
        mlir_module_serialized=bytes(np.asarray(desc["module"], np.uint8).tobytes()),
        calling_convention_version=int(desc["version"]),
        module_kept_var_idx=tuple(int(i) for i in desc["kept"]),
        uses_global_constants=bool(desc["uses_global_constants"]), _get_vjp=None)

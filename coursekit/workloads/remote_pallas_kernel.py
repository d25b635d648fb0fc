"""What the pallas-kernel checker runs in the learner process (``coursekit.workloads.
inspectors``): inspectors that read the learner's program (``pallas_call`` sites, index
maps, the interpret flag with ``execution_mode`` swapped) and run the learner's ``sweep``
with a probed kernel. The kernels the checker hands to that sweep are in
``remote_pallas_kernel_planted``.

Every answer is self-reported (it comes from the process that runs the learner's code);
``projects/pallas-kernel/tests/check.py`` lists them in ``SELF_REPORTED`` and cross-checks
each against what it measures itself (its own float64 reference, the exported StableHLO
run and read there, the wall clock around each request).
"""

from __future__ import annotations

import inspect as _inspect
import sys
import time

import jax
import jax.numpy as jnp

# ---------------------------------------------------------------------------------------
# Inspectors
# ---------------------------------------------------------------------------------------

def _pallas_eqn(jaxpr):
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            return eqn
        for value in eqn.params.values():
            sub = getattr(value, "jaxpr", value)
            if hasattr(sub, "eqns") and (found := _pallas_eqn(sub)) is not None:
                return found
    return None


def _block_indices(eqn, programs: int) -> list:
    """For each BlockSpec of ``eqn``: the block index its index map gives programs
    0..programs-1 (the traced map evaluated; a grid of more axes than one is read along
    its first, the others at 0, so the check can say what the grid is)."""
    out = []
    for mapping in eqn.params["grid_mapping"].block_mappings:
        index_map = mapping.index_map_jaxpr
        jaxpr = getattr(index_map, "jaxpr", index_map)
        consts = getattr(index_map, "consts", [])
        rest = (0,) * (len(jaxpr.invars) - 1)
        out.append([[int(v) for v in jax.core.eval_jaxpr(jaxpr, consts, i, *rest)]
                    for i in range(int(programs))])
    return out


def sites(fn, x, programs: int = 0, **kwargs) -> dict:
    """``inspect_pallas(lambda x: fn(x, **kwargs), x)`` as data: {"sites": [{"grid",
    "block_shapes", "interpret", "kernel_primitives"}], "outside": [...], and with
    ``programs`` > 0 "block_indices" of the first pallas_call's BlockSpecs}."""
    from coursekit.measure.pallas_inspect import inspect_pallas

    def call(a):
        return fn(a, **kwargs)
    info = inspect_pallas(call, x)
    answer = {"sites": [{"grid": [int(g) for g in s.grid],
                         "block_shapes": [[None if d is None else int(d) for d in b]
                                          for b in s.block_shapes],
                         "interpret": bool(s.interpret),
                         "kernel_primitives": sorted(s.kernel_primitives)}
                        for s in info["sites"]],
              "outside": sorted(info["outside"])}
    if programs and info["sites"]:
        eqn = _pallas_eqn(jax.make_jaxpr(call)(x).jaxpr)
        answer["block_indices"] = _block_indices(eqn, programs)
    return answer


def interpret_flags_with_mode(fn, mode_fn, mode: str, x) -> list[bool]:
    """The interpret flag of every pallas_call in ``fn(x)`` traced (not run) with the
    learner module's ``execution_mode`` replaced by one that answers ``mode``; the
    module's own function is put back afterwards."""
    from coursekit.measure.pallas_inspect import inspect_pallas
    module = sys.modules.get(getattr(_inspect.unwrap(mode_fn), "__module__", ""))
    if module is None or getattr(module, "execution_mode", None) is not mode_fn:
        raise ValueError("execution_mode is not a function of the learner's module")
    original = module.execution_mode
    module.execution_mode = lambda backend=None: mode
    try:
        return [bool(s.interpret) for s in inspect_pallas(fn, x)["sites"]]
    finally:
        module.execution_mode = original


def jit_call(fn, *args, **kwargs):
    """``jax.jit(fn)(*args, **kwargs)``: the learner's function run under jit, waited for."""
    return jax.block_until_ready(jax.jit(lambda *a: fn(*a, **kwargs))(*args))


def lowered_mode(fn, x, **kwargs) -> str:
    """``pallas_inspect.lowered_mode`` of fn(x, **kwargs) (off CPU, where jax cannot
    export a compiled Triton kernel for the checker to read itself)."""
    from coursekit.measure.pallas_inspect import lowered_mode as read
    return read(lambda a: fn(a, **kwargs), x)


def time_synced(fn, x, warmup: int, iters: int, **kwargs) -> list[float]:
    """The checker's synchronised timing (``coursekit.measure.timing.time_synced``) of
    jax.jit(fn(x, **kwargs)) here: raw samples in seconds (off CPU, as above)."""
    from coursekit.measure.timing import time_synced as timed
    jitted = jax.jit(lambda a: fn(a, **kwargs))
    return [float(v) for v in timed(jitted, x, warmup=warmup, iters=iters).samples_s]


def call_with_dtype(fn, dtype_name: str, *args):
    """``fn(jnp.<dtype_name>, *args)``: the learner's function given a dtype (which
    cannot cross the bridge as data), as the contract's callers give it."""
    if dtype_name not in ("float32", "bfloat16"):
        raise ValueError(f"no dtype {dtype_name!r} here")
    return fn(getattr(jnp, dtype_name), *args)


def settle() -> bool:
    """``settle_pallas()`` here, before anything is timed or its compiles counted."""
    from coursekit.measure.pallas_inspect import settle_pallas
    settle_pallas()
    return True


class Probe:
    """The kernel a sweep is given, with every call's group (shape, block_rows), entry and
    exit (``time.perf_counter``, the system's monotonic clock) and compile count."""

    def __init__(self, fn):
        self.fn, self.calls = fn, []

    def __call__(self, x, block_rows=8, **kwargs):
        from coursekit.measure.timing import count_compiles
        entry = time.perf_counter()
        with count_compiles() as compiles:
            out = self.fn(x, block_rows=block_rows, **kwargs)
        exit_ = time.perf_counter()
        self.calls.append({"shape": [int(s) for s in x.shape], "block_rows": int(block_rows),
                           "entry": entry, "exit": exit_, "compiles": int(compiles[0])})
        return out


def sweep_probed(sweep, kernel, shapes, blocks, **kwargs) -> dict:
    """The learner's ``sweep(shapes, blocks, kernel=probe, **kwargs)`` with ``kernel``
    probed: {"records": what sweep returned, "calls": the probe's calls in order,
    "returned": perf_counter when sweep returned}."""
    settle()
    probe = Probe(kernel)
    records = sweep(shapes, blocks, kernel=probe, **kwargs)
    returned = time.perf_counter()
    return {"records": records, "calls": probe.calls, "returned": returned}


def value_error_of(fn, *args, **kwargs) -> dict:
    """{"raised": True, "message": str(err)} when ``fn(*args)`` raises a ValueError (any
    other exception propagates, named), else {"raised": False}."""
    try:
        fn(*args, **kwargs)
    except ValueError as err:
        return {"raised": True, "message": str(err)}
    return {"raised": False}


DICT_ITEMS = "dict-items"  # the tag of a dict whose keys are not all strings


def _plain(value):
    """``value`` with every dict whose keys are not all strings written as the tuple
    (DICT_ITEMS, [[key, value], ...]): the bridge carries only string-keyed dicts, and
    summarize's speedup_by_block is keyed by block_rows (ints)."""
    if type(value) is dict:
        if all(type(k) is str for k in value):
            return {k: _plain(v) for k, v in value.items()}
        return (DICT_ITEMS, [[k, _plain(v)] for k, v in value.items()])
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    return value


def call_plain(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with its dicts of non-string keys as DICT_ITEMS tuples."""
    return _plain(fn(*args, **kwargs))


INSPECTORS = {
    "pallas-kernel/call_plain": call_plain,
    "pallas-kernel/sites": sites,
    "pallas-kernel/interpret_flags_with_mode": interpret_flags_with_mode,
    "pallas-kernel/jit_call": jit_call,
    "pallas-kernel/settle": settle,
    "pallas-kernel/call_with_dtype": call_with_dtype,
    "pallas-kernel/lowered_mode": lowered_mode,
    "pallas-kernel/time_synced": time_synced,
    "pallas-kernel/sweep_probed": sweep_probed,
    "pallas-kernel/value_error_of": value_error_of,
}



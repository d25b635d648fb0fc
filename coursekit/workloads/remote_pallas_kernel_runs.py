"""What the pallas-kernel checker runs in the learner process to follow the learner's
*own* calls (``coursekit.workloads.inspectors``), beside ``remote_pallas_kernel``:

- ``pallas-kernel/run_observed``: the learner's ``run_softmax`` run once while every
  ``pallas_call`` it traces is recorded (grid, blocks, interpret flag), so its declared
  block and grid are compared with the kernel that ran, not with one the checker built;
- ``pallas-kernel/sweep_watched``: the learner's ``sweep`` with a probed kernel whose
  every call also records when its output was last seen unfinished (the call probe's
  watcher: a thread that polls ``is_ready()``, never waits), so a first call timed before
  its output was ready shows;
- ``pallas-kernel/kernel_on_padding``: the learner's kernel body through a pallas_call
  built here over an input the checker padded itself, with finite values past the edge
  (interpreted Pallas would fill those cells with NaN, which a kernel that swaps NaN for
  -inf instead of masking by position survives);
- the kernels handed to the learner's sweep are in ``remote_pallas_kernel_planted``.

Every answer is self-reported; ``projects/pallas-kernel/tests`` lists each in
``SELF_REPORTED`` with what it is cross-checked against there.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.workloads.remote_pallas_kernel import settle

# ---------------------------------------------------------------------------------------
# run_softmax, observed
# ---------------------------------------------------------------------------------------


def _site_of(params: dict) -> dict:
    mapping = params.get("grid_mapping")
    grid = [int(g) if isinstance(g, int) else -1 for g in getattr(mapping, "grid", ())]
    blocks = [[(lambda s: s if isinstance(s, int) else None)(getattr(d, "block_size", d))
               for d in bm.block_shape] for bm in getattr(mapping, "block_mappings", ())]
    interpret = params.get("interpret", False)
    return {"grid": grid, "block_shapes": blocks,
            "interpret": bool(interpret) and interpret is not None}


def run_observed(run, x, **kwargs) -> dict:
    """``run(x, **kwargs)`` (the learner's ``run_softmax``) with JAX's caches cleared first,
    so every ``pallas_call`` it runs is traced, and each traced one recorded:
    {"result": what run returned, "sites": [{"grid", "block_shapes", "interpret"}]}."""
    from jax._src.pallas import pallas_call as module
    primitive = module.pallas_call_p
    sites: list[dict] = []
    original = primitive.bind

    def bind(*args, **params):
        sites.append(_site_of(params))
        return original(*args, **params)

    jax.clear_caches()
    primitive.bind = bind
    try:
        result = run(x, **kwargs)
    finally:
        del primitive.bind  # the class's method again
    return {"result": result, "sites": sites}


# ---------------------------------------------------------------------------------------
# sweep, watched
# ---------------------------------------------------------------------------------------

class WatchedProbe:
    """The kernel a sweep is given, with every call's group (shape, block_rows), entry,
    exit, compile count and ``unready_at``: the perf_counter stamp of the last moment its
    output was seen unfinished before the next call began or the sweep returned (the
    call probe's watcher, ``coursekit.checking.probes.watch_until_ready``), None if
    never."""

    def __init__(self, fn):
        self.fn, self.calls, self._seen = fn, [], None

    def __call__(self, x, block_rows=8, **kwargs):
        from coursekit.checking.probes import watch_until_ready
        from coursekit.measure.timing import count_compiles
        self.finish()
        entry = time.perf_counter()
        with count_compiles() as compiles:
            out = self.fn(x, block_rows=block_rows, **kwargs)
        exit_ = time.perf_counter()
        self._seen = []
        watch_until_ready(out, entry, self._seen)
        self.calls.append({"shape": [int(s) for s in x.shape], "block_rows": int(block_rows),
                           "entry": entry, "exit": exit_, "compiles": int(compiles[0]),
                           "unready_at": None})
        return out

    def finish(self) -> None:
        """Note what the last call's watcher has seen by now."""
        if self._seen:
            unready_s = self._seen[0]
            self.calls[-1]["unready_at"] = self.calls[-1]["entry"] + unready_s \
                if unready_s > 0 else None
            self._seen = None


def sweep_watched(sweep, kernel, shapes, blocks, **kwargs) -> dict:
    """The learner's ``sweep(shapes, blocks, kernel=probe, **kwargs)`` with ``kernel``
    watched (``WatchedProbe``): {"records", "calls", "returned"} as ``sweep_probed``,
    each call with its ``unready_at``."""
    settle()
    probe = WatchedProbe(kernel)
    records = sweep(shapes, blocks, kernel=probe, **kwargs)
    returned = time.perf_counter()
    probe.finish()
    return {"records": records, "calls": probe.calls, "returned": returned}


# ---------------------------------------------------------------------------------------
# The kernel body on padding the checker fills
# ---------------------------------------------------------------------------------------

def kernel_on_padding(kernel, padded, n_cols: int, rows: int, block_rows: int):
    """The learner's kernel body ``kernel`` (``softmax_kernel``) run through a
    ``pallas_call`` built here over ``padded`` (rows rounded up to whole blocks, columns
    to the block width, every cell past the data holding what the checker put there):
    each program gets one (block_rows, width) block of it, as ``softmax_pallas``'s
    blocks are laid out, with ``n_cols`` data columns. Interpreted on CPU, compiled
    elsewhere. Returns the output's data cells, [:rows, :n_cols], waited for."""

    from jax.experimental import pallas as pl
    padded = jnp.asarray(padded)
    spec = pl.BlockSpec((int(block_rows), padded.shape[1]), lambda i: (i, 0))
    call = pl.pallas_call(functools.partial(kernel, n_cols=int(n_cols)),
                          out_shape=jax.ShapeDtypeStruct(padded.shape, padded.dtype),
                          grid=(padded.shape[0] // int(block_rows),), in_specs=[spec],
                          out_specs=spec, interpret=jax.default_backend() == "cpu")
    out = jax.block_until_ready(jax.jit(call)(padded))
    return np.asarray(out)[:int(rows), :int(n_cols)]


INSPECTORS = {
    "pallas-kernel/kernel_on_padding": kernel_on_padding,
    "pallas-kernel/run_observed": run_observed,
    "pallas-kernel/sweep_watched": sweep_watched,
}



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
- workloads: a kernel whose first call runs long after its dispatch returns and whose
  first warm-up call compiles again (``pallas-kernel/slow_first_recompiles``), and one
  off the float64 softmax by just more than the learner's tolerance while within it of
  the float32 softmax (``pallas-kernel/off_in_float64_only``).

Every answer is self-reported; ``projects/pallas-kernel/tests`` lists each in
``SELF_REPORTED`` with what it is cross-checked against there.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.workloads.remote_pallas_kernel import reference_softmax_f32, settle

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
    import functools

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


# ---------------------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------------------

def slow_first_recompiles(matmuls: int, size: int = 256):
    """A correct softmax whose first call's program also runs ``matmuls`` chained
    (size x size) matmuls after its dispatch returns (so its output is unfinished for a
    while after the call), and whose second call (the first warm-up call) runs a freshly
    jitted program: it compiles there. Later calls reuse that program."""
    a = jnp.asarray(np.random.default_rng(0).standard_normal((size, size)) / size**0.5,
                    jnp.float32)

    @jax.jit
    def slow(x):
        y = reference_softmax_f32(x)
        m = jax.lax.fori_loop(0, matmuls, lambda _, m: jnp.tanh(m @ a), a)
        return jnp.where(jnp.isnan(m[0, 0]), jnp.zeros_like(y), y)

    state = {"calls": 0, "later": None}

    def kernel(x, block_rows=8):
        state["calls"] += 1
        if state["calls"] == 1:
            return slow(x)
        if state["later"] is None:
            state["later"] = jax.jit(lambda v: reference_softmax_f32(v))
        return state["later"](x)
    return kernel


# How far the float32 value is kept inside the float32 references' allowance, in float32
# units in the last place: room for one more way of rounding than the ones listed below.
F32_SLACK_ULPS = 2


def _softmax_reciprocal(x):
    z = x.astype(jnp.float32)
    e = jnp.exp(z - jnp.max(z, axis=1, keepdims=True))
    return (e * (1 / jnp.sum(e, axis=1, keepdims=True))).astype(x.dtype)


# Float32 softmaxes a learner's float32 reference may round like: XLA fuses exp into the
# jitted program and computes it otherwise than eager op-by-op calls do (one element of a
# (24, 166) seed differed by more than two ulps between the two), and e / s and
# e * (1 / s) round apart.
FLOAT32_SOFTMAXES = (jax.jit(reference_softmax_f32), reference_softmax_f32,
                     jax.jit(jax.nn.softmax), jax.nn.softmax,
                     jax.jit(_softmax_reciprocal), _softmax_reciprocal)


def off_in_float64_only(rtol: float, atol: float):
    """A softmax wrong at one element by more than ``atol + rtol * |y64|`` from the
    float64 softmax, yet within ``atol + rtol * |y32|`` (less F32_SLACK_ULPS) of every
    float32 softmax in ``FLOAT32_SOFTMAXES``: at the element where that is most so, the
    value is moved to the edge those float32 references all allow, on the side their
    rounding error already lies. Its output is float32, of x's shape."""
    def kernel(x, block_rows=8):
        z = np.asarray(x).astype(np.float64)
        e = np.exp(z - z.max(axis=1, keepdims=True))
        y64 = e / e.sum(axis=1, keepdims=True)
        ys = np.stack([np.asarray(f(x)).astype(np.float64) for f in FLOAT32_SOFTMAXES])
        y32 = ys[0]
        step = np.sign(y32 - y64)
        # the far edge every float32 reference allows, on the side of y32's own error
        edge = step * np.min(step * (ys + step * (atol + rtol * np.abs(ys))), axis=0)
        moved = edge.astype(np.float32)
        for _ in range(F32_SLACK_ULPS + 1):  # + 1: the cast may have rounded outwards
            moved = np.nextafter(moved, y32.astype(np.float32))
        moved = moved.astype(np.float64)
        over64 = step * (moved - y64) - (atol + rtol * np.abs(y64))
        over64[step == 0] = -np.inf
        k = np.unravel_index(int(np.argmax(over64)), y32.shape)
        out = y32.astype(np.float32)
        out[k] = moved[k]
        return jnp.asarray(out)
    return kernel


WORKLOADS = {
    "pallas-kernel/slow_first_recompiles": slow_first_recompiles,
    "pallas-kernel/off_in_float64_only": off_in_float64_only,
}

"""The kernels the pallas-kernel checker hands to the learner's ``sweep`` in the learner
process (``WORKLOADS``, merged into ``coursekit.workloads.catalog``), all built from a
public float32 softmax (``jax.nn.softmax``): planted wrong ones, a slow first call that
compiles again on its first warm-up call, and one off the float64 softmax by just more
than a tolerance yet within it of every float32 softmax. None computes what a stage asks:
they are the inputs a sweep is judged on."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def reference_softmax_f32(x):
    """The checker's float32 softmax: ``jax.nn.softmax`` (public) on x in float32, cast
    back to x's dtype."""
    return jax.nn.softmax(x.astype(jnp.float32), axis=1).astype(x.dtype)


def planted_kernels(i: int, j: int, rtol: float, atol: float, subtle: float):
    """Kernels for the sweep's output check, chosen by block_rows: 8 plainly wrong at
    [i, j]; 16 ``subtle`` budget allowances off at row 0's probability nearest 1e-2; 64
    one row short; 128 one row too many; any other (32) right."""
    import functools

    @functools.partial(jax.jit, static_argnames="block_rows")
    def kernels(x, block_rows=8):
        y = reference_softmax_f32(x)
        if block_rows == 8:
            return y.at[i, j].add(0.05)
        if block_rows == 16:
            k = jnp.argmin(jnp.abs(y[0] - 1e-2))
            return y.at[0, k].add(subtle * (atol + rtol * y[0, k]))
        if block_rows == 64:
            return y[:-1]
        if block_rows == 128:
            return jnp.concatenate([y, y[:1]])
        return y
    return kernels


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
    """The float32 softmax with its division as a product by the sum's reciprocal."""
    z = x.astype(jnp.float32)
    shifted = jnp.exp(z - jax.lax.stop_gradient(z.max(axis=1, keepdims=True)))
    return (shifted * jnp.reciprocal(shifted.sum(axis=1, keepdims=True))).astype(x.dtype)


def _eager(fn):
    """``fn`` run op by op (XLA then compiles each operation alone: no fusion)."""
    def run(x):
        with jax.disable_jit():
            return fn(x)
    return run


# Float32 softmaxes a learner's float32 reference may round like: XLA fuses exp into the
# jitted program and computes it otherwise than eager op-by-op calls do (one element of a
# (24, 166) seed differed by more than two ulps between the two), and e / s and
# e * (1 / s) round apart.
FLOAT32_SOFTMAXES = (jax.jit(reference_softmax_f32), _eager(reference_softmax_f32),
                     jax.jit(_softmax_reciprocal), _eager(_softmax_reciprocal))


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
    "pallas-kernel/planted_kernels": planted_kernels,
    "pallas-kernel/slow_first_recompiles": slow_first_recompiles,
    "pallas-kernel/off_in_float64_only": off_in_float64_only,
}

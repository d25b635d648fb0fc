"""pallas-kernel: a measured custom kernel with correctness checks.

The operation is a row softmax, ``y[i, j] = exp(x[i, j] - max_j x[i]) / sum_j exp(...)``,
written as one fused Pallas kernel: a grid over blocks of rows, each block holding whole
rows (padded to a block width), the two reductions (max, sum) inside the kernel.

Your code goes in this file; check it with

    python projects/pallas-kernel/tests/check.py --stage N --impl THIS_FILE

Stages (notebook 06 walks through each):
  1. independent references   softmax_jnp, softmax_numpy_f64, tolerance
  2. the kernel               execution_mode, softmax_kernel, softmax_pallas, run_softmax
  3. measured                 sweep, summarize

On CPU, compiled Pallas does not run: the kernel runs *interpreted* (``interpret=True``),
about a millisecond per grid program. Keep CPU grids small (tens of programs), and never
read an interpreted timing as a statement about accelerator speed. The same code runs
compiled on a GPU or TPU.
"""

from __future__ import annotations

import functools
import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import pallas as pl

from coursekit.measure.timing import count_compiles

# The kernel's block holds whole rows: the row length rounded up to a power of two, and
# at least 128 lanes (GPU Triton needs power-of-two blocks; TPU needs multiples of 128).
MIN_BLOCK_COLS = 128


def block_cols(n_cols: int) -> int:
    """Width of the kernel's block for rows of ``n_cols`` elements (given, not graded)."""
    return max(MIN_BLOCK_COLS, pl.next_power_of_2(int(n_cols)))


def _check_input(x, where: str) -> None:
    """A named error for inputs the kernel does not take (given, not graded)."""
    shape = getattr(x, "shape", None)
    if shape is None or len(shape) != 2 or 0 in shape:
        raise ValueError(f"{where}: x must be a non-empty 2-D array (rows, cols), "
                         f"got shape {shape}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(f"{where}: x must be float32 or bfloat16, got {x.dtype}")


# ---------------------------------------------------------------------------------------
# Stage 1: independent references
# ---------------------------------------------------------------------------------------

def softmax_jnp(x: jax.Array) -> jax.Array:
    """Row softmax of a 2-D array with plain ``jax.numpy`` (the reference a kernel is
    compared with on its own device).

    x: (rows, cols) float32 or bfloat16. Returns an array of x's shape and dtype.
    Compute in float32 whatever the input dtype (bfloat16 has 8 significant bits: a
    bfloat16 sum of hundreds of terms is visibly wrong), subtract each row's max before
    ``exp`` (``exp(1000.)`` is inf), and cast the result back to ``x.dtype`` once, at
    the end. Must work under ``jax.jit``.

    Done when: it matches a float64 softmax within ``tolerance`` for both dtypes, also
    on rows of values near +-1000. Size hint: any shape; the checker uses (<=64, <=5000).
    """
    ### BEGIN SOLUTION stage 1: softmax_jnp
    z = x.astype(jnp.float32)
    z = z - jnp.max(z, axis=-1, keepdims=True)
    e = jnp.exp(z)
    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)
    ### END SOLUTION


def softmax_numpy_f64(x) -> np.ndarray:
    """The same softmax in NumPy float64, independent of JAX: the "true" value that
    both the jnp reference and the kernel are measured against.

    x: a (rows, cols) array (jax or numpy, float32 or bfloat16). Returns a float64
    ``np.ndarray``. Convert with ``np.asarray(x).astype(np.float64)`` (bfloat16 values
    are exact in float64), subtract the row max, exponentiate, normalise.

    Done when: it agrees with the checker's float64 softmax to about 1e-13 (a float32
    computation cannot), and it returns a NumPy array, not a JAX one.
    """
    ### BEGIN SOLUTION stage 1: softmax_numpy_f64
    z = np.asarray(x).astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)
    ### END SOLUTION


def tolerance(dtype, n_cols: int) -> dict:
    """How far a correct softmax of rows of length ``n_cols`` in ``dtype`` may be from
    the float64 truth, as ``{"rtol": float, "atol": float, "why": str}`` for the test
    ``|y - y64| <= atol + rtol * |y64|`` (``np.allclose``'s form).

    Derive it, do not guess it: the result is computed in float32 (unit roundoff
    u32 = 2^-24) and rounded once to ``dtype`` (unit roundoff u_out: 2^-24 for float32,
    2^-8 for bfloat16; ``jnp.finfo(dtype).eps / 2``). Count the roundings a value goes
    through: the sum over the row (a reduction of length ``n_cols``), plus a few for
    exp, subtraction and division, plus the final rounding to ``dtype``. ``why`` says
    this in a sentence or two.

    Done when: the tolerance grows with the reduction length, is wider for bfloat16 than
    for float32, accepts correct results and rejects a result off by ten times the
    rounding budget (the checker tries both).
    """
    ### BEGIN SOLUTION stage 1: tolerance
    u_out = float(jnp.finfo(dtype).eps) / 2
    u32 = float(jnp.finfo(jnp.float32).eps) / 2
    n = int(n_cols)
    rtol = u_out + (n + 4) * u32
    atol = 4 * u32
    why = (f"computed in float32 (u={u32:.3g}): a sum of n={n} terms has relative error "
           f"at most (n-1)u, exp, subtraction and division add a few u (so (n+4)u); the "
           f"result is rounded once to {jnp.dtype(dtype).name} (u={u_out:.3g}). "
           f"atol covers tiny probabilities whose exp argument was rounded.")
    return {"rtol": rtol, "atol": atol, "why": why}
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Stage 2: the kernel
# ---------------------------------------------------------------------------------------

def execution_mode(backend: str | None = None) -> str:
    """How a Pallas kernel runs on ``backend`` (default ``jax.default_backend()``):
    "interpreted" on "cpu" (compiled Pallas does not run there: ``interpret=True``),
    "compiled" on "gpu" and "tpu"."""
    ### BEGIN SOLUTION stage 2: execution_mode
    backend = backend or jax.default_backend()
    return "interpreted" if backend == "cpu" else "compiled"
    ### END SOLUTION


def softmax_kernel(x_ref, o_ref, *, n_cols: int) -> None:
    """The kernel body: one grid program's block of ``block_rows`` whole rows.

    ``x_ref`` / ``o_ref``: (block_rows, block_cols(n_cols)) refs. Only the first
    ``n_cols`` columns are data; the rest of the block lies past the array's edge, and
    so may the last rows of the last block. What those cells hold is not yours to choose
    (interpreted Pallas fills them with NaN; a GPU leaves whatever is there), so mask
    them with the identity of the reduction before you reduce. Rows past the edge are
    never written back, so they may hold anything.

    Load the block, compute in float32, take the row max and the row sum inside the
    kernel, store ``(e / s)`` cast to ``o_ref.dtype``.
    """
    ### BEGIN SOLUTION stage 2: softmax_kernel (mask columns >= n_cols, then reduce)
    x = x_ref[...].astype(jnp.float32)
    cols = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)
    x = jnp.where(cols < n_cols, x, -jnp.inf)
    m = jnp.max(x, axis=1, keepdims=True)
    e = jnp.exp(x - m)
    s = jnp.sum(e, axis=1, keepdims=True)
    o_ref[...] = (e / s).astype(o_ref.dtype)
    ### END SOLUTION


@functools.partial(jax.jit, static_argnames=("block_rows", "interpret"))
def softmax_pallas(x: jax.Array, *, block_rows: int = 8,
                   interpret: bool | None = None) -> jax.Array:
    """Row softmax of ``x`` (rows, cols), float32 or bfloat16, with one ``pallas_call``.

    Grid: ``(pl.cdiv(rows, block_rows),)``, one program per block of ``block_rows``
    rows; ``BlockSpec((block_rows, block_cols(cols)), lambda i: (i, 0))`` for input and
    output; ``out_shape`` of x's shape and dtype; the kernel is ``softmax_kernel`` with
    ``n_cols=cols``. ``interpret=None`` means "as ``execution_mode()`` says" (True on
    CPU). No softmax arithmetic outside the kernel.

    Done when: it matches both references on shapes that ``block_rows`` and the block
    width do not divide, in float32 and bfloat16, and the jaxpr shows the grid and the
    reductions inside the ``pallas_call``. Size hint on CPU: tens of programs (about a
    millisecond each, interpreted).
    """
    _check_input(x, "softmax_pallas")
    ### BEGIN SOLUTION stage 2: softmax_pallas (grid over row blocks, BlockSpec, pallas_call)
    if interpret is None:
        interpret = execution_mode() == "interpreted"
    rows, cols = x.shape
    spec = pl.BlockSpec((block_rows, block_cols(cols)), lambda i: (i, 0))
    return pl.pallas_call(
        functools.partial(softmax_kernel, n_cols=cols),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(pl.cdiv(rows, block_rows),),
        in_specs=[spec],
        out_specs=spec,
        interpret=interpret,
    )(x)
    ### END SOLUTION


def run_softmax(x: jax.Array, *, block_rows: int = 8) -> dict:
    """Run the kernel once and return a result that declares how it ran:

      y: np.ndarray, the output; mode: "interpreted" | "compiled" (the mode that ran);
      backend: ``jax.default_backend()``; block_rows: int; grid: [programs]

    Done when: the declared mode is the one the checker finds in the program that ran.
    """
    ### BEGIN SOLUTION stage 2: run_softmax
    y = jax.block_until_ready(softmax_pallas(x, block_rows=block_rows))
    return {"y": np.asarray(y), "mode": execution_mode(), "backend": jax.default_backend(),
            "block_rows": block_rows, "grid": [pl.cdiv(x.shape[0], block_rows)]}
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Stage 3: measured
# ---------------------------------------------------------------------------------------

# A kernel "helps" only when it beats the baseline by this factor: a ratio of medians
# within 10% of 1 is within the noise of a loaded machine.
HELP_MARGIN = 1.1

RECORD_KEYS = ("impl", "shape", "dtype", "block_rows", "grid", "mode", "backend",
               "warmup", "iters", "first_call_s", "samples_s", "compiles_first_call",
               "compiles_warmed", "output_ok")


def sweep(shapes, block_rows_list, *, dtype: str = "float32", warmup: int = 1,
          iters: int = 5, seed: int = 0, kernel=None) -> list[dict]:
    """Time the kernel against the ``jax.numpy`` baseline over shapes and block sizes.

    For each shape (rows, cols): draw x (standard normal, ``dtype``) from ``seed``; one
    record for the baseline ``jax.jit(softmax_jnp)`` (impl "jnp", block_rows None, grid
    None, mode "compiled": XLA compiles it on every backend), then one per block size for
    ``kernel(x, block_rows=b)`` (default ``softmax_pallas``; impl "pallas", mode
    ``execution_mode()``). Each record (a JSON-able dict with ``RECORD_KEYS``):

      first call: timed alone, synchronised (``jax.block_until_ready``), compile counted
          (``coursekit.measure.timing.count_compiles``) -> first_call_s, compiles_first_call
      correctness *before* timing: compare the first call's output with
          ``softmax_numpy_f64(x)`` using ``tolerance(dtype, cols)``; a wrong output
          gives output_ok False and no samples (samples_s = [])
      then ``warmup`` untimed calls and ``iters`` timed calls, each synchronised inside
          its own boundary -> samples_s (raw seconds, one per call), compiles_warmed

    Done when: the checker's own synchronised timing of your kernel agrees with your
    samples, it counts exactly 1 + warmup + iters calls per record, and a wrong kernel
    is caught before it is timed. Size hint on CPU: shapes like (64, 300), block sizes
    8-32 (tens of programs).
    """
    ### BEGIN SOLUTION stage 3: sweep (first call apart, output checked, synced raw samples)
    kernel = kernel or softmax_pallas
    rng = np.random.default_rng(seed)
    baseline = jax.jit(softmax_jnp)
    backend = jax.default_backend()
    records = []

    def measure(fn, x, expected, tol):
        with count_compiles() as first:
            start = time.perf_counter()
            out = jax.block_until_ready(fn(x))
            first_call_s = time.perf_counter() - start
        got = np.asarray(out).astype(np.float64)
        ok = bool(got.shape == expected.shape and
                  np.all(np.abs(got - expected) <= tol["atol"] + tol["rtol"] * np.abs(expected)))
        samples = []
        with count_compiles() as warmed:
            if ok:
                for _ in range(warmup):
                    jax.block_until_ready(fn(x))
                for _ in range(iters):
                    start = time.perf_counter()
                    jax.block_until_ready(fn(x))
                    samples.append(time.perf_counter() - start)
        return {"warmup": warmup, "iters": iters, "first_call_s": first_call_s,
                "samples_s": samples, "compiles_first_call": first[0],
                "compiles_warmed": warmed[0], "output_ok": ok}

    for shape in shapes:
        rows, cols = (int(s) for s in shape)
        x = jnp.asarray(rng.standard_normal((rows, cols)), dtype)
        expected = softmax_numpy_f64(x)
        tol = tolerance(dtype, cols)
        common = {"shape": [rows, cols], "dtype": str(jnp.dtype(dtype)), "backend": backend}
        records.append({"impl": "jnp", "block_rows": None, "grid": None, "mode": "compiled",
                        **common, **measure(baseline, x, expected, tol)})
        for b in block_rows_list:
            fn = functools.partial(kernel, block_rows=int(b))
            records.append({"impl": "pallas", "block_rows": int(b),
                            "grid": [pl.cdiv(rows, int(b))], "mode": execution_mode(),
                            **common, **measure(fn, x, expected, tol)})
    return records
    ### END SOLUTION


def summarize(records: list[dict]) -> dict:
    """Where the kernel helps and where it stops helping, from ``sweep`` records.

    Refuse (``ValueError`` naming the field) records that mix kernel execution modes,
    backends or dtypes: such timings are not comparable. For each shape, in order of
    element count (rows * cols): speedup = median(baseline samples) / median(kernel
    samples) for every block size whose output was correct (``output_ok``); returns

      mode: the kernel's execution mode; backend: str
      per_shape: [{"shape": [r, c], "baseline_median_s": float,
                   "speedup_by_block": {block_rows: speedup}, "best_block_rows": int or
                   None, "best_speedup": float or None, "helps": best_speedup >
                   HELP_MARGIN}]
      stops_helping_at: the smallest shape from which on the kernel never helps again
          (the shape after the last one where it helps), or None if it helps at the
          largest shape
      caveat: when the kernel ran interpreted, a plain sentence saying so, containing
          the words "interpreted" and "target" (interpreted timings say nothing about
          the target's speed); "" when it ran compiled

    Done when: it finds the checker's planted best blocks and crossover, ignores a fast
    but wrong block, and refuses mixed modes.
    """
    ### BEGIN SOLUTION stage 3: summarize
    kernels = [r for r in records if r.get("impl") == "pallas"]
    baselines = [r for r in records if r.get("impl") == "jnp"]
    if not kernels or not baselines:
        raise ValueError("summarize: need both 'pallas' and 'jnp' records")
    for key, group in (("mode", kernels), ("backend", records), ("dtype", records)):
        values = {r.get(key) for r in group}
        if len(values) != 1 or None in values:
            raise ValueError(f"summarize: records mix {key} values {sorted(map(str, values))}:"
                             " timings from different runs are not comparable")
    mode = kernels[0]["mode"]
    base = {tuple(r["shape"]): statistics.median(r["samples_s"])
            for r in baselines if r.get("output_ok") and r["samples_s"]}
    shapes = sorted(base, key=lambda s: (math.prod(s), s))
    per_shape = []
    for shape in shapes:
        speedups = {r["block_rows"]: base[shape] / statistics.median(r["samples_s"])
                    for r in kernels
                    if tuple(r["shape"]) == shape and r.get("output_ok") and r["samples_s"]}
        best = max(speedups, key=speedups.get) if speedups else None
        best_speedup = speedups[best] if best is not None else None
        per_shape.append({"shape": list(shape), "baseline_median_s": base[shape],
                          "speedup_by_block": speedups, "best_block_rows": best,
                          "best_speedup": best_speedup,
                          "helps": best_speedup is not None and best_speedup > HELP_MARGIN})
    last_help = max((i for i, p in enumerate(per_shape) if p["helps"]), default=-1)
    stops = per_shape[last_help + 1]["shape"] if last_help + 1 < len(per_shape) else None
    caveat = ""
    if mode == "interpreted":
        caveat = (f"The kernel ran interpreted (interpret=True on {kernels[0]['backend']}): "
                  "these timings measure the Pallas interpreter and say nothing about the "
                  "kernel's speed on a target accelerator.")
    return {"mode": mode, "backend": kernels[0]["backend"], "per_shape": per_shape,
            "stops_helping_at": stops, "caveat": caveat}
    ### END SOLUTION

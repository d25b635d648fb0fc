"""pallas-kernel: a measured custom kernel with correctness checks.

The operation is a row softmax, ``y[i, j] = exp(x[i, j]) / sum_j exp(x[i, j])`` (finite
for rows of any magnitude), written as one fused Pallas kernel: a grid over blocks of rows,
each block holding whole rows (padded to a block width), the two reductions (max, sum)
inside the kernel.

Your code goes in this file; check it with

    python projects/pallas-kernel/tests/check.py --stage N --impl THIS_FILE

Stages (notebook 06 walks through each):
  1. independent references   softmax_jnp, softmax_numpy_f64, tolerance
  2. the kernel               execution_mode, softmax_kernel, softmax_pallas, run_softmax
  3. measured                 sweep, summarize

On CPU, compiled Pallas does not run: the kernel runs *interpreted* (``interpret=True``),
and every grid program costs the interpreter's overhead (notebook 06 measures it per
program on your machine). Keep CPU grids small (tens of programs), and never read an
interpreted timing as a statement about accelerator speed. The same code runs compiled on
a GPU or TPU.
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

    x: (rows, cols) float32 or bfloat16. Returns probabilities (unitless, each row sums
    to 1) as an array of x's shape and dtype; must work under ``jax.jit``.

    Must hold: every element within the rounding budget of a float32 computation rounded
    once to ``x.dtype`` (see ``tolerance``) of the checker's float64 softmax, for both
    dtypes, on rows that overflow float32 without care (values near +-1000) and rows
    whose small probabilities underflow float32 (spreads of hundreds): finite everywhere.
    Checked element by element; the worst element is named. Size hint: any shape; the
    checker uses (<=64, <=5000).
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
    ``np.ndarray`` (not a JAX array) of x's shape.

    Must hold: float64 accuracy (relative 1e-12 of the checker's float64 softmax, absolute
    1e-300) on the same adversarial rows as ``softmax_jnp``: near +-1000, and with
    probabilities far below float32's smallest subnormal, which a float32 computation
    flushes to 0 and float64 keeps.
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
    ``|y - y64| <= atol + rtol * |y64|`` (``np.allclose``'s form; rtol unitless, atol in
    probability units), for a result computed in float32 and rounded once to ``dtype``.

    Must hold: the budget comes from an error analysis of that computation (the
    roundings a value goes through, as functions of ``n_cols`` and of the two dtypes'
    unit roundoffs), not from a guess: rtol no smaller than the least those roundings can
    cost and no more than half as large again as a complete count of them; atol of the
    order of float32's unit roundoff (between 1 and 10 of it); it accepts correct results
    and rejects one off by ten times the budget; ``why`` is a sentence saying what was
    counted. How it is checked: against the checker's own analysis for float32 and
    bfloat16 at three row lengths (short, hundreds, thousands); a guessed constant is off
    by 2x or more at one of them.
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
    """How a Pallas kernel runs on ``backend`` (default: ``jax.default_backend()``):
    "interpreted" on "cpu" (compiled Pallas does not run there), "compiled" on "gpu" and
    "tpu". Checked exactly for the three names and for the default."""
    ### BEGIN SOLUTION stage 2: execution_mode
    backend = backend or jax.default_backend()
    return "interpreted" if backend == "cpu" else "compiled"
    ### END SOLUTION


def softmax_kernel(x_ref, o_ref, *, n_cols: int) -> None:
    """The kernel body: one grid program's block of ``block_rows`` whole rows.

    ``x_ref`` / ``o_ref``: (block_rows, block_cols(n_cols)) refs. Only the first
    ``n_cols`` columns are data; the rest of the block lies past the array's edge, and
    so may the last rows of the last block. What those cells hold is not yours to choose
    (interpreted Pallas fills them with NaN; a GPU leaves whatever is there). Rows past
    the edge are never written back, so they may hold anything.

    Must hold: ``o_ref``'s data cells get the softmax of their row, within
    ``softmax_jnp``'s budget, whatever the cells past the edge hold; the row's max and
    sum are taken here, inside the kernel (checked through ``softmax_pallas``).
    """
    ### BEGIN SOLUTION stage 2: softmax_kernel
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
    """Row softmax of ``x`` (rows, cols), float32 or bfloat16, with one ``pallas_call``
    of ``softmax_kernel``; output of x's shape and dtype.

    Must hold, read by the checker from the traced program (grid, block shapes, index
    maps) and compared exactly:
      one pallas_call, a one-dimensional grid in which program i owns the i-th run of
          ``block_rows`` rows, every row of x owned by exactly one program (the last run
          may be partial); each program reads and writes one block of its rows that
          spans every column, ``block_cols(cols)`` wide;
      exp, max and sum inside the kernel, no softmax arithmetic (or callback) outside;
      ``interpret=None`` follows ``execution_mode()`` (the flag is read with the mode
          swapped); values within both references' budgets, extreme rows included: in
          float32 on shapes that neither ``block_rows`` nor the block width divide (also
          with finite values past the array's edge, as an accelerator's memory holds),
          in bfloat16 (computed in float32) on shapes both divide.
    Size hint on CPU: tens of programs (interpreted, each costs the overhead notebook 06
    measures per program).
    """
    _check_input(x, "softmax_pallas")
    ### BEGIN SOLUTION stage 2: softmax_pallas
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
    """Run ``softmax_pallas`` once and return a result that declares how it ran:

      y: np.ndarray, the output; mode: "interpreted" | "compiled"; backend: str;
      block_rows: int; grid: [programs] (a list of ints)

    Must hold: y is the output of the softmax_pallas call it ran (so within the float64
    softmax's budget when the kernel is right); mode, backend, block_rows and grid equal
    to what the checker reads from the pallas_call that ran (its interpret flag and
    lowered program, its grid, its block) and from ``jax.default_backend()``.
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

    For each shape (rows, cols), on x drawn (standard normal, ``dtype``) from ``seed``:
    one record for the baseline ``jax.jit(softmax_jnp)``, then one per block size b for
    ``kernel(x, block_rows=b)`` (default ``softmax_pallas``). A record is a JSON-able
    dict with ``RECORD_KEYS``:

      impl "jnp" | "pallas"; shape [rows, cols]; dtype (its name); block_rows b (None for
          the baseline); grid [ceil(rows / b)] (None); mode: "compiled" for the baseline
          (XLA compiles it on every backend), ``execution_mode()`` for the kernel;
          backend; warmup; iters  -- compared exactly with what ran
      first_call_s: seconds of the first (compiling) call alone, waited for
      compiles_first_call / compiles_warmed: XLA compiles during the first call / during
          all later calls (equal to the checker's own count around each call: 0 warmed)
      output_ok: the first call's output within ``tolerance(dtype, cols)`` of
          ``softmax_numpy_f64(x)``, judged before anything is timed; False -> no more
          calls and samples_s = []
      samples_s: raw seconds, one per each of ``iters`` timed calls made after ``warmup``
          untimed ones, each waited for inside its own boundary

    How it is checked: the kernel is called exactly 1 + warmup + iters times; every time
    lies between the call's own duration and the start of the next call (measured by the
    checker around each call); your medians within 4x (kernel) / 8x (baseline) of the
    checker's synchronised timing interleaved with your sweep round by round; wrong
    kernels (one plainly, one by 3 budgets at a small probability) are not timed.
    Size hint on CPU: shapes like (64, 300), block sizes 8-32 (tens of programs).
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

    Raises ``ValueError`` naming the field for records that mix (or lack) the kernel's
    execution mode, the backend or the dtype: such timings are not comparable; and
    ``ValueError`` when there is no kernel or no baseline record. Returns

      mode: the kernel's execution mode; backend: str (the records')
      per_shape: one entry per shape, in order of element count (rows * cols):
          {"shape": [r, c], "baseline_median_s": median of the baseline's raw samples (s),
           "speedup_by_block": {block_rows: median(baseline) / median(kernel)} for each
               block whose output was correct (output_ok) and only those (unitless),
           "best_block_rows": the block of the largest speedup (None if none),
           "best_speedup": that speedup (None), "helps": best_speedup > HELP_MARGIN}
      stops_helping_at: the shape after the last one where the kernel helps (from there
          on it never helps again), or None if it helps at the largest shape
      caveat: when the kernel ran interpreted, a plain sentence containing "interpreted"
          and "target" (interpreted timings say nothing about the target's speed); ""
          when it ran compiled

    Checked against records with planted medians (relative 1e-9), a fast but wrong block,
    and one record of another mode, backend or dtype at a time.
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

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
    raise NotImplementedError('stage 1: softmax_jnp')


def softmax_numpy_f64(x) -> np.ndarray:
    """The same softmax in NumPy float64, independent of JAX: the "true" value that
    both the jnp reference and the kernel are measured against.

    x: a (rows, cols) array (jax or numpy, float32 or bfloat16). Returns a float64
    ``np.ndarray``. Convert with ``np.asarray(x).astype(np.float64)`` (bfloat16 values
    are exact in float64), subtract the row max, exponentiate, normalise.

    Done when: it agrees with the checker's float64 softmax to about 1e-13 (a float32
    computation cannot), and it returns a NumPy array, not a JAX one.
    """
    raise NotImplementedError('stage 1: softmax_numpy_f64')


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
    raise NotImplementedError('stage 1: tolerance')


# ---------------------------------------------------------------------------------------
# Stage 2: the kernel
# ---------------------------------------------------------------------------------------

def execution_mode(backend: str | None = None) -> str:
    """How a Pallas kernel runs on ``backend`` (default ``jax.default_backend()``):
    "interpreted" on "cpu" (compiled Pallas does not run there: ``interpret=True``),
    "compiled" on "gpu" and "tpu"."""
    raise NotImplementedError('stage 2: execution_mode')


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
    raise NotImplementedError('stage 2: softmax_kernel (mask columns >= n_cols, then reduce)')


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
    raise NotImplementedError('stage 2: softmax_pallas (grid over row blocks, BlockSpec, pallas_call)')


def run_softmax(x: jax.Array, *, block_rows: int = 8) -> dict:
    """Run the kernel once and return a result that declares how it ran:

      y: np.ndarray, the output; mode: "interpreted" | "compiled" (the mode that ran);
      backend: ``jax.default_backend()``; block_rows: int; grid: [programs]

    Done when: the declared mode is the one the checker finds in the program that ran.
    """
    raise NotImplementedError('stage 2: run_softmax')


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
    raise NotImplementedError('stage 3: sweep (first call apart, output checked, synced raw samples)')


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
    raise NotImplementedError('stage 3: summarize')

"""pallas-kernel's checker object and what every stage shares: what the learner process
reports about itself (``SELF_REPORTED``) with what each report is cross-checked against,
the checker's own references and rounding budget, its inputs, the comparison that names
the worst element, and the learner's kernel exported as StableHLO.

The learner's code runs in a learner process (the Checker's learner-process flag,
``coursekit.checking.bridge``): this process never imports the learner's file. Checks send
it inputs as data and get the learner's results back as data (softmax outputs, tolerance
dicts, ``run_softmax`` results, sweep records, summaries), and verify them here against the
checker's own references: a float64 softmax (SciPy's, the row max subtracted,
``ref64``) and a float32 ``jax.numpy`` softmax (``ref_jnp``), with the checker's own
rounding budget (``budget``). Inputs and shapes come from a seed the learner does not
see, with shapes that the block sizes do not divide (``draw``, ``ragged``).

What needs the learner's *program* (a ``pallas_call``'s grid, blocks, index maps, the
primitives inside and outside the kernel, the ``interpret`` flag, the flag with
``execution_mode`` swapped, the calls and compiles of the kernel a sweep is given) is read
in the learner process by inspectors (``coursekit/workloads/remote_pallas_kernel.py``,
calling ``coursekit.measure.pallas_inspect``). Those answers are self-reported: each is
listed in ``SELF_REPORTED`` with what it is cross-checked against here: the learner's
program exported as StableHLO (``softmax_pallas.export``, ``exported_kernel``) and read and
run in this process (its values against the float64 reference, its lowered mode, the grid
loop and block tensors of an interpreted kernel), the shape arithmetic, ``run_softmax``'s
declarations, and this process's wall clock around each request (the learner's clock and
this one are the same system monotonic clock). A contradiction is tamper evidence (the
stage scores 0)."""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special

from coursekit.checking.contract import Checker
from coursekit.checking.device import learner_may_hold_accelerator
from coursekit.checking.errors import CheckFailed
from coursekit.checking.graded import available, instructor_module
from coursekit.checking.learner import get_function
from coursekit.checking.values import as_array, fail_unless

checker = Checker("pallas-kernel", {
    1: "independent references", 2: "the kernel", 3: "measured"}, learner_process=True)

# What the learner process reports about itself (inspector answers), and what each is
# cross-checked against in this process.
SELF_REPORTED = {
    "pallas-kernel/jit_call": "softmax_jnp's values under jax.jit: compared element by "
                              "element with this process's float64 softmax",
    "pallas-kernel/sites (count of pallas_calls, outside/inside primitives)":
        "the exported StableHLO read here: an interpreted pallas_call is a grid loop "
        "(stablehlo.while), so reported interpreted sites in a program without a loop "
        "are a contradiction; the exported program run here against float64",
    "pallas-kernel/sites (grid, block shapes)": "the shape arithmetic (ceil(rows / "
        "block_rows), block_cols(cols)), the exported program's grid loop bound and its "
        "block tensor shapes, run_softmax's declared grid and block_rows",
    "pallas-kernel/sites (block indices)": "program i -> block (i, 0) from the shape "
        "arithmetic; on an interpreted kernel the exported program computes the right "
        "values here (a wrong map gives wrong rows)",
    "pallas-kernel/sites (interpret flag)": "the lowered mode read here from the exported "
        "program (a compiled kernel is a Triton/Mosaic custom call, an interpreted one is "
        "not) and this process's jax.default_backend()",
    "pallas-kernel/interpret_flags_with_mode": "the expected flag for the mode the "
        "checker chose (no independent reading: it is a trace with a swapped function)",
    "pallas-kernel/sweep_probed (calls, compiles, entry/exit stamps)": "stamps inside "
        "this process's wall-clock window around the request, in order and disjoint; "
        "for a catalog kernel, the bridge's own call counter (Workload.facts); the "
        "records' times within the stamped windows",
    "pallas-kernel/lowered_mode, pallas-kernel/time_synced (off CPU only, when jax "
    "cannot export a compiled Triton kernel)": "the mode against the sites' interpret "
        "flag and the backend; the checker's own timing samples (its timing code, run "
        "there) against the request's wall time measured here",
    "pallas-kernel/kernel_on_padding": "the learner's kernel body through a pallas_call "
        "built there on the checker's padded input: its values against the float64 "
        "reference here (a right answer is a right answer, wherever it came from)",
    "pallas-kernel/run_observed": "run_softmax's own run with each pallas_call it traced "
        "recorded (grid, blocks): the grid against ceil(rows / the block that ran), the "
        "result's values against the float64 reference",
    "pallas-kernel/sweep_watched (calls, stamps, unready_at)": "as sweep_probed; each "
        "call's last moment seen unfinished between its return and the next call; only "
        "ever a reason to fail a first_call_s that ends before it",
    "pallas-kernel/call_plain": "summarize's answer carried with its int-keyed dicts as "
                                "(key, value) pairs: every value compared with the "
                                "checker's own summary of the records it planted",
    "pallas-kernel/call_with_dtype": "tolerance(jnp.<dtype>, n) called there (a dtype "
                                     "is not data): the rtol/atol it returns are checked "
                                     "against the checker's own rounding budget and "
                                     "against correct and wrong results computed here",
    "pallas-kernel/value_error_of": "none independent: whether summarize raised a "
        "ValueError and its message, read as the learner's code reported it",
}

BARS = Path(__file__).resolve().parent / "expected" / "tolerance_bars.json"
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
BLOCK_ROWS = (8, 16, 32)


# ---------------------------------------------------------------------------------------
# The checker's own references, rounding budget and inputs
# ---------------------------------------------------------------------------------------

def ref64(x) -> np.ndarray:
    """The truth: float64 throughout (bfloat16 and float32 values are exact in float64),
    finite on rows near +-1000 and keeping their tiny probabilities (which underflow to 0
    in float32 and stay > 0 here). Computed by ``scipy.special.softmax``, which a learner
    file may not use at stage 1 (``coursekit.checking.forbidden``)."""
    y = scipy.special.softmax(np.asarray(x).astype(np.float64), axis=1)
    assert y.dtype == np.float64 and np.all(np.isfinite(y))  # the oracle's own promise
    return y


@functools.cache
def _jitted_softmax_f32():
    return jax.jit(lambda x: jax.nn.softmax(x.astype(jnp.float32), axis=1).astype(x.dtype))


def ref_jnp(x):
    """The float32 reference, run in this process: ``jax.nn.softmax`` (public) on x in
    float32, rounded once to x's dtype."""
    return _jitted_softmax_f32()(x)


# The checker's rounding bars, as numbers for the public row lengths (written by
# pallas_write_bars.py from the course's own analysis, which a learner's copy does not
# hold): a check that compares a softmax with the float64 one draws its row length from
# these, so the copy and the course give the same verdict.
@functools.cache
def bars() -> dict:
    stored = json.loads(BARS.read_text())
    return {dtype: {int(n): dict(zip(stored["columns"], row)) for n, row in rows.items()}
            for dtype, rows in stored["bars"].items()}


def stored_bar(dtype, n: int) -> dict:
    """The rounding bar for rows of ``n``: stored for a public length; for a hidden one
    (``hidden_length``, drawn only where the instructor grades) the course's own analysis
    computes it live."""
    table = bars()[jnp.dtype(dtype).name]
    if int(n) in table:
        return table[int(n)]
    if not available():
        raise KeyError(f"no stored rounding bar for rows of {n} (a checker bug: draw "
                       "row lengths with length())")
    course = instructor_module("pallas_kernel")
    return dict(zip(("rtol", "atol", "rtol_lo", "rtol_hi"),
                    (*course.budget(dtype, int(n)), *course.rtol_bracket(dtype, int(n)))))


def length(rng, lo: int, hi: int, multiple_of: int | None = None) -> int:
    """A public row length in [lo, hi) (``multiple_of``: not a multiple of it)."""
    choices = [n for n in sorted(bars()["float32"]) if lo <= n < hi
               and (multiple_of is None or n % multiple_of)]
    return int(rng.choice(choices))


def hidden_length(rng, lo: int, hi: int, multiple_of: int | None = None) -> int | None:
    """Where the instructor grades, a row length in [lo, hi) whose bar the copy does not
    store (so a stored bar returned as an answer fails there); None in a learner's copy."""
    if not available():
        return None
    stored = bars()["float32"]
    choices = [n for n in range(lo, hi) if n not in stored
               and (multiple_of is None or n % multiple_of)]
    return int(rng.choice(choices))


def unit_roundoff(dtype) -> float:
    return float(jnp.finfo(dtype).eps) / 2


# On an accelerator the learner's code runs there, and its exp is not a correctly rounded
# one: a TPU v5e's float32 softmax came out 1.06x a CPU's budget from float64. This many
# more unit roundoffs (measured need: under 1; a wrong softmax is off by 2^16 of them).
ACCELERATOR_EXP_ULPS = 16


def budget(dtype, n: int) -> tuple[float, float]:
    """(rtol, atol): the checker's rounding budget of this softmax in ``dtype`` for rows
    of length ``n`` (stored), with more roundings for an accelerator's exp."""
    bar = stored_bar(dtype, n)
    rtol, atol = bar["rtol"], bar["atol"]
    if learner_may_hold_accelerator():
        rtol += ACCELERATOR_EXP_ULPS * unit_roundoff(jnp.float32)
    return rtol, atol


# Extreme rows, mixed into every correctness input: an offset near +-1000 (exp overflows
# float32 and float64 without max subtraction) and a spread of some 100-400 within a row
# (probabilities below float32's smallest subnormal, 1.4e-45, underflow to 0 in float32
# but not in float64, whose exp underflows only past -745).
EXTREME_OFFSET = (600.0, 1000.0)
EXTREME_SCALE = (30.0, 60.0)
BEYOND_FLOAT64 = (800.0, 1000.0)  # exp(709.8) overflows float64, exp(-745) underflows


def draw(rng, shape, dtype, *, extreme: bool = True) -> jax.Array:
    """Rows with different scales and offsets (max subtraction matters); with ``extreme``
    about half the rows are overflow or underflow rows, and (as far as there are rows)
    always one row beyond float64's exp range upwards, one underflow row and one beyond
    it downwards: without max subtraction even float64 gives inf/inf or 0/0 there, on
    every seed."""
    rows, _ = shape
    scale = rng.uniform(0.5, 4.0, (rows, 1))
    offset = rng.uniform(-20, 20, (rows, 1))
    if extreme:
        kind = rng.integers(0, 4, rows)  # 0, 1: ordinary; 2: overflow; 3: underflow
        big = rng.choice([-1, 1], rows) * rng.uniform(*EXTREME_OFFSET, rows)
        forced = rng.permutation(rows)[:3]
        for row, (k, sign) in zip(forced, ((2, 1.0), (3, 1.0), (2, -1.0))):
            kind[row] = k
            if k == 2:
                big[row] = sign * rng.uniform(*BEYOND_FLOAT64)
        offset[kind == 2, 0] = big[kind == 2]
        scale[kind == 3, 0] = rng.uniform(*EXTREME_SCALE, int(np.sum(kind == 3)))
    x = rng.standard_normal(shape) * scale + offset
    return jnp.asarray(x.astype(np.float32), dtype)


def block_width(n: int) -> int:
    """The kernel's block width for rows of ``n`` (the starter's ``block_cols``, given):
    ``n`` rounded up to a power of two, at least 128."""
    return max(128, 1 << max(0, int(n) - 1).bit_length())


def ragged(rng, lo: int, hi: int, multiple_of: int) -> int:
    """A size in [lo, hi) that is not a multiple of ``multiple_of``."""
    while True:
        n = int(rng.integers(lo, hi))
        if n % multiple_of:
            return n



def compare(y: np.ndarray, ref: np.ndarray, rtol: float, atol: float):
    """(ok, (i, j) of the worst element, its error over the allowance)."""
    y = y.astype(np.float64)
    allowed = atol + rtol * np.abs(ref)
    with np.errstate(invalid="ignore"):
        excess = np.abs(y - ref) / allowed
    excess = np.where(np.isnan(excess), np.inf, excess)
    worst = np.unravel_index(int(np.argmax(excess)), excess.shape)
    return bool(np.all(excess <= 1.0)), tuple(int(i) for i in worst), float(excess[worst])


def expect_close(y, x, dtype_name: str, what: str, hint: str, also_jnp: bool = False) -> None:
    """Compare a learner result with the float64 truth (and the float32 jnp reference,
    which has its own rounding, so twice the budget) and name the worst element."""
    shape, n = tuple(x.shape), x.shape[1]
    y = as_array(y, what, shape=shape, dtype=DTYPES[dtype_name])
    rtol, atol = budget(DTYPES[dtype_name], n)
    refs = [("the float64 reference", ref64(x), rtol, atol)]
    if also_jnp:
        refs.append(("the float32 jnp reference", np.asarray(ref_jnp(x)).astype(np.float64),
                     2 * rtol, 2 * atol))
    for name, ref, rt, at in refs:
        ok, (i, j), excess = compare(y, ref, rt, at)
        fail_unless(ok, f"{what} differs from {name} at [{i}, {j}] by {excess:.3g}x the "
                    f"rounding budget (rtol={rt:.3g}, atol={at:.3g})",
                    yours=float(y.astype(np.float64)[i, j]), expected=float(ref[i, j]),
                    hint=hint)


# ---------------------------------------------------------------------------------------
# The learner's kernel as a program this process reads (stage 2) and times (stage 3)
# ---------------------------------------------------------------------------------------

def exported_kernel(impl, x, block_rows: int):
    """softmax_pallas(x, block_rows=...) exported by the learner process as StableHLO,
    to be read and run in this process; None where the learner's kernel runs on an
    accelerator (this process, on the CPU, cannot run a Mosaic or Triton kernel; jax will
    not even serialise a compiled Triton one): those checks then read and time it in the
    learner process, on the chip."""
    if learner_may_hold_accelerator():
        return None
    return get_function(impl, "softmax_pallas").export(x, block_rows=block_rows,
                                                        out_example=x)



# ---------------------------------------------------------------------------------------
# Second calls: new data of a shape an earlier call got right (issue 53)
# ---------------------------------------------------------------------------------------

@contextlib.contextmanager
def second_call(y_now, y_before, what: str, diagnose=None):
    """Around the check of ``y_now``, a later call's output of a learner function on new
    data of the shape an earlier call (output ``y_before``) got right. A failure there
    names, in this order: what ``diagnose()`` measures on this call itself (a cause any
    call may show on some data: a hint, or None); state carried from the earlier call,
    where this call returned the earlier output; else both possibilities, never state
    alone (an error that only some data show is right on one call and wrong on the
    next)."""
    try:
        yield
    except CheckFailed as err:
        try:
            now = np.asarray(y_now, np.float64)
            before = np.asarray(y_before, np.float64)
            same = now.shape == before.shape and bool(
                np.allclose(now, before, rtol=1e-6, atol=0, equal_nan=True))
        except (TypeError, ValueError):
            same = False
        err.args = (f"{err.args[0]} ({what}: a later call, on new data of the shape of an "
                    "earlier call that was right)",)
        measured = diagnose() if diagnose is not None else None
        if measured:
            err.hint = measured
        elif same:
            err.hint = ("right on an earlier call, wrong on this one with other data of the "
                        "same shape, returning the earlier call's output: state carried from "
                        "an earlier call (a cache keyed on the shape, or a function holding an "
                        "earlier call's arrays) made this result")
            err.kind = "carried-state"
        else:
            either = ("right on an earlier call, wrong on this one with other data of the "
                      "same shape: state carried from an earlier call (a cache keyed on the "
                      "shape, or a function holding an earlier call's arrays), or an error "
                      "only some data show")
            err.hint = f"{either}; {err.hint}" if err.hint else either
        raise

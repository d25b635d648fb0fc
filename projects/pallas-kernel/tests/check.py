"""Checks for pallas-kernel (a fused row-softmax Pallas kernel).

    python projects/pallas-kernel/tests/check.py --stage 1|2|3|all --impl PATH [--json F]

The learner's code runs in a learner process (``learner_process=True``,
``coursekit.checking.bridge``): this process never imports the learner's file. Checks send
it inputs as data and get the learner's results back as data (softmax outputs, tolerance
dicts, ``run_softmax`` results, sweep records, summaries), and verify them here against the
checker's own references: a NumPy float64 softmax (the row max subtracted) and a float32
``jax.numpy`` softmax, with the checker's own rounding budget. Inputs and shapes come from
a seed the learner does not see, with shapes that the block sizes do not divide.

What needs the learner's *program* (a ``pallas_call``'s grid, blocks, index maps, the
primitives inside and outside the kernel, the ``interpret`` flag, the flag with
``execution_mode`` swapped, the calls and compiles of the kernel a sweep is given) is read
in the learner process by inspectors (``coursekit/workloads/remote_pallas_kernel.py``,
calling ``coursekit.measure.pallas_inspect``). Those answers are self-reported: each is
listed in ``SELF_REPORTED`` with what it is cross-checked against here: the learner's
program exported as StableHLO (``softmax_pallas.export``) and read and run in this process
(its values against the float64 reference, its lowered mode, the grid loop and block
tensors of an interpreted kernel), the shape arithmetic, ``run_softmax``'s declarations,
and this process's wall clock around each request (the learner's clock and this one are
the same system monotonic clock). A contradiction is tamper evidence (the stage scores 0).

Timing (stage 3): the learner's sweep times itself in the learner process; this process
times the learner's exported programs itself, synchronised, interleaved with the sweep
round by round, and compares ratios with wide windows, never absolute times.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the course root

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction, TamperEvidence, Workload
from coursekit.checking.contract import Checker, CheckFailed, short
from coursekit.checking.learner import LearnerCodeError, get_function
from coursekit.checking.probes import samples_of, within_ratio
from coursekit.checking.values import as_array, as_float, fail_unless, require_keys
from coursekit.measure.pallas_inspect import KERNEL_CALL_MARKERS
from coursekit.measure.timing import time_synced
from coursekit.workloads.remote_pallas_kernel import DICT_ITEMS, reference_softmax_f32

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

DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
BLOCK_ROWS = (8, 16, 32)
# A kernel timing that forgot to wait is 10^3 times too fast on the synchronisation
# check's workload (SYNC_ROWS x SYNC_COLS); a 4x window cannot flake on a loaded machine
# yet cannot pass a missing sync.
TIME_RATIO_WINDOW = 4.0
# The jnp baseline is a far shorter call (measured on 2 CPU cores there: about 1-3 ms
# synchronised vs about 0.01 ms unsynchronised), so load moves its median relatively
# further: its window is twice as wide, still far inside that gap.
BASELINE_RATIO_WINDOW = 2 * TIME_RATIO_WINDOW
# "helps" means faster than the baseline by this factor; planted speedups stay outside
# [0.9, 1.2], so any margin a learner picks in that range gives the same verdicts.
HELP_MARGIN = 1.1


# ---------------------------------------------------------------------------------------
# The checker's own references, rounding budget and inputs
# ---------------------------------------------------------------------------------------

def ref64(x) -> np.ndarray:
    """The truth: float64 throughout (bfloat16 and float32 values are exact in float64),
    the row max subtracted, so rows near +-1000 neither overflow nor lose their tiny
    probabilities (which underflow to 0 in float32 and stay > 0 here)."""
    z = np.asarray(x).astype(np.float64)
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    y = e / e.sum(axis=1, keepdims=True)
    assert y.dtype == np.float64 and np.all(np.isfinite(y))  # the oracle's own promise
    return y


# The float32 jnp reference, run in this process (the learner process builds the same
# function from the same source for the planted kernels of stage 3).
ref_jnp = jax.jit(reference_softmax_f32)


def unit_roundoff(dtype) -> float:
    return float(jnp.finfo(dtype).eps) / 2


def budget(dtype, n: int) -> tuple[float, float]:
    """(rtol, atol): float32 arithmetic (u32 = 2^-24) through a length-n sum plus a few
    roundings for exp, subtraction and division, then one rounding to ``dtype``."""
    u_out, u32 = unit_roundoff(dtype), unit_roundoff(jnp.float32)
    return u_out + (n + 4) * u32, 4 * u32


# The bracket a derived rtol must fall in: no less than the worst case of the length-n
# float32 sum ((n-1) roundings) plus the one rounding to the output dtype, no more than
# 1.5x the budget above (which also counts exp, subtraction and division): any honest
# count of "a few" extra roundings lands inside, eps-for-u (2x) or 2n-for-n does not.
RTOL_OVER_BUDGET = 1.5
ATOL_MAX_U32 = 10


def rtol_bracket(dtype, n: int) -> tuple[float, float]:
    u_out, u32 = unit_roundoff(dtype), unit_roundoff(jnp.float32)
    return u_out + (n - 1) * u32, RTOL_OVER_BUDGET * budget(dtype, n)[0]


def block_width(n: int) -> int:
    return max(128, 1 << max(0, int(n) - 1).bit_length())


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


def ragged(rng, lo: int, hi: int, multiple_of: int) -> int:
    """A size in [lo, hi) that is not a multiple of ``multiple_of``."""
    while True:
        n = int(rng.integers(lo, hi))
        if n % multiple_of:
            return n


def describe(shape, block_rows: int) -> str:
    rows, cols = shape
    divides = "divisible" if rows % block_rows == 0 else "NOT divisible"
    return (f"shape {tuple(shape)}, block_rows={block_rows} (rows {divides}; {cols} of "
            f"{block_width(cols)} block columns used)")


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
# Stage 1: independent references
# ---------------------------------------------------------------------------------------

REFERENCE_HINT = ("compute in float32 whatever the input dtype, subtract the row max, "
                  "cast back to x.dtype once at the end")


def learner_jnp(impl):
    """The learner's softmax_jnp under jax.jit, run in the learner process; its values
    come back as data (checked here against the float64 reference)."""
    get_function(impl, "softmax_jnp")  # a missing function is named
    return lambda x: bridge.inspect(impl, "pallas-kernel/jit_call",
                                    LearnerFunction("softmax_jnp"), x)


@checker.check(1, "jnp_reference_matches_float64")
def _(impl, ctx):
    fn = learner_jnp(impl)
    rng = ctx.rng("jnp-ref")
    shapes = [(int(rng.integers(2, 9)), int(rng.integers(1, 20))),
              (int(rng.integers(9, 40)) | 1, ragged(rng, 100, 700, 2)),
              (int(rng.integers(2, 6)), ragged(rng, 2000, 5000, 2))]
    for dtype_name in DTYPES:
        for shape in shapes:
            x = draw(rng, shape, DTYPES[dtype_name])
            expect_close(fn(x), x, dtype_name, f"softmax_jnp on {dtype_name} {shape}",
                         REFERENCE_HINT)


@checker.check(1, "jnp_reference_is_stable")
def _(impl, ctx):
    fn = learner_jnp(impl)
    rng = ctx.rng("stable")
    shape = (int(rng.integers(3, 12)), ragged(rng, 30, 300, 2))
    x = rng.standard_normal(shape) * 3 + rng.choice([-1, 1], (shape[0], 1)) * rng.uniform(
        600, 1000, (shape[0], 1))
    x = jnp.asarray(x.astype(np.float32))
    y = as_array(fn(x), "softmax_jnp", shape=shape, dtype=jnp.float32)
    fail_unless(bool(np.all(np.isfinite(y))), "softmax_jnp gives inf or nan on rows of "
                "values near +-1000", yours=y, expected="finite probabilities",
                hint="exp(1000.) overflows float32: subtract each row's max first")
    expect_close(y, x, "float32", "softmax_jnp on rows near +-1000", REFERENCE_HINT)


@checker.check(1, "numpy_reference_is_float64")
def _(impl, ctx):
    fn = get_function(impl, "softmax_numpy_f64")
    rng = ctx.rng("np-ref")
    for dtype_name in DTYPES:
        shape = (int(rng.integers(3, 20)), ragged(rng, 50, 3000, 2))
        x = draw(rng, shape, DTYPES[dtype_name])
        y = fn(x)
        fail_unless(isinstance(y, np.ndarray), "softmax_numpy_f64 must return a NumPy "
                    "array (it is the JAX-independent reference)", yours=type(y).__name__,
                    expected="numpy.ndarray", hint="use numpy only: np.asarray(x)."
                    "astype(np.float64), np.exp, .max, .sum")
        y = as_array(y, "softmax_numpy_f64", shape=shape, dtype=np.float64)
        ok, (i, j), excess = compare(y, ref64(x), 1e-12, 1e-300)
        fail_unless(ok, f"softmax_numpy_f64 on {dtype_name} input is not float64-accurate "
                    f"(worst at [{i}, {j}]: {excess:.3g}x a 1e-12 relative tolerance)",
                    yours=float(y[i, j]), expected=float(ref64(x)[i, j]),
                    hint="convert to float64 before any arithmetic; a float32 computation "
                    "cast to float64 keeps float32's error")


@checker.check(1, "tolerance_from_dtype_and_length")
def _(impl, ctx):
    get_function(impl, "tolerance")  # a missing function is named
    rng = ctx.rng("tolerance")
    lengths = (int(rng.integers(5, 12)), ragged(rng, 200, 500, 2), ragged(rng, 3000, 5000, 2))
    got = {}
    for dtype_name, dtype in DTYPES.items():
        for n in lengths:
            t = require_keys(bridge.inspect(impl, "pallas-kernel/call_with_dtype",
                                            LearnerFunction("tolerance"), dtype_name, n),
                             ("rtol", "atol", "why"), "tolerance")
            rtol, atol = as_float(t["rtol"], "rtol"), as_float(t["atol"], "atol")
            fail_unless(rtol > 0 and atol >= 0, "rtol must be > 0 and atol >= 0",
                        yours=(rtol, atol))
            lo, hi = rtol_bracket(dtype, n)
            fail_unless(lo <= rtol <= hi, f"your rtol for {dtype_name}, length {n}, is not "
                        "the rounding budget of this computation", yours=rtol,
                        expected=f"in [{lo:.4g}, {hi:.4g}]: at least u_out + (n-1) u32 (the "
                        "worst case of a length-n float32 sum, then one rounding to the "
                        "output), at most 1.5x u_out + (n+4) u32",
                        hint="u = finfo(dtype).eps / 2 is the unit roundoff (eps is twice "
                        "it); a sum of n terms is n-1 roundings; count u_out once")
            u32 = unit_roundoff(jnp.float32)
            fail_unless(u32 <= atol <= ATOL_MAX_U32 * u32, f"your atol for {dtype_name}, "
                        f"length {n}, is not an absolute error of float32 arithmetic",
                        yours=atol, expected=f"in [u32, {ATOL_MAX_U32} u32] = [{u32:.3g}, "
                        f"{ATOL_MAX_U32 * u32:.3g}]", hint="tiny probabilities carry the "
                        "rounding of their exp argument: a few u32 in absolute terms")
            fail_unless(isinstance(t["why"], str) and len(t["why"].split()) >= 5,
                        "`why` must say how the tolerance was derived",
                        yours=t["why"], expected="a sentence naming the roundings counted")
            got[dtype_name, n] = (rtol, atol)
            x = draw(rng, (6, n), dtype)
            truth = ref64(x)
            ok, (i, j), excess = compare(np.asarray(ref_jnp(x)), truth, rtol, atol)
            fail_unless(ok, f"your tolerance rejects a correct {dtype_name} softmax of "
                        f"length {n} (element [{i}, {j}] is {excess:.3g}x your allowance)",
                        yours={"rtol": rtol, "atol": atol},
                        expected=f"at least the rounding budget {budget(dtype, n)}",
                        hint="count every rounding: the float32 sum over the row, exp, "
                        "division, and the final cast to the output dtype; atol covers "
                        "tiny probabilities")
            b_rtol, _ = budget(dtype, n)
            bad = truth.copy()
            j = int(np.argmax(truth[0]))
            bad[0, j] *= 1 + 10 * b_rtol
            ok, _, _ = compare(bad, truth, rtol, atol)
            fail_unless(not ok, f"your tolerance for {dtype_name}, length {n}, accepts a "
                        "result off by 10x the rounding budget", yours={"rtol": rtol,
                        "atol": atol}, expected=f"rtol below {10 * b_rtol:.3g}",
                        hint="derive it from the unit roundoff and the reduction length; a "
                        "loose tolerance passes wrong kernels")
    for dtype_name in DTYPES:
        short_n, long_n = lengths[0], lengths[-1]
        fail_unless(got[dtype_name, long_n][0] > got[dtype_name, short_n][0]
                    or dtype_name == "bfloat16",
                    f"the {dtype_name} tolerance does not grow with the reduction length",
                    yours={short_n: got[dtype_name, short_n][0],
                           long_n: got[dtype_name, long_n][0]},
                    expected="a larger rtol for the longer row",
                    hint="a sum of n terms collects up to about n roundings")
    for n in lengths:
        fail_unless(got["bfloat16", n][0] > got["float32", n][0],
                    f"the bfloat16 tolerance is not wider than float32's (length {n})",
                    yours={"bfloat16": got["bfloat16", n][0],
                           "float32": got["float32", n][0]},
                    hint="the result is rounded to bfloat16 (8 significant bits) at the end")


# ---------------------------------------------------------------------------------------
# Stage 2: the kernel
# ---------------------------------------------------------------------------------------

KERNEL_HINT = ("mask the block's columns >= n_cols with -inf (the identity of max; exp "
               "gives 0, the identity of sum) before reducing, and make the grid "
               "pl.cdiv(rows, block_rows) so the last, partial block is computed too")
# Not allowed outside the kernel: softmax arithmetic, and host callbacks (a way to compute
# the result somewhere else and hand it back).
FORBIDDEN_OUTSIDE = {"exp", "reduce_max", "reduce_sum", "div", "log", "logistic", "exp2",
                     "argmax", "cumsum", "cumlogsumexp", "cummax", "pure_callback",
                     "io_callback", "callback"}


def learner_kernel(impl, block_rows: int):
    """The learner's softmax_pallas(x, block_rows=...), run in the learner process."""
    fn = get_function(impl, "softmax_pallas")
    return lambda x: fn(x, block_rows=block_rows)


def learner_sites(impl, x, block_rows: int, programs: int = 0) -> dict:
    """The learner process's reading of softmax_pallas(x, block_rows=...)'s program
    (self-reported: ``SELF_REPORTED``)."""
    get_function(impl, "softmax_pallas")
    info = bridge.inspect(impl, "pallas-kernel/sites", LearnerFunction("softmax_pallas"), x,
                          programs=programs, block_rows=block_rows)
    if not (isinstance(info, dict) and isinstance(info.get("sites"), list)
            and isinstance(info.get("outside"), list)
            and all(isinstance(s, dict) and {"grid", "block_shapes", "interpret",
                                             "kernel_primitives"} <= set(s)
                    for s in info["sites"])):
        raise TamperEvidence(f"the sites inspector answered {short(info)}")
    return info


def program_facts(exported) -> dict:
    """What this process reads from an exported StableHLO program: the lowered mode (a
    compiled Pallas kernel is a custom call), the bounds of its loops (an interpreted
    pallas_call is a loop over its grid: ``iterArg < programs``) and its tensor shapes."""
    text = exported.mlir_module()
    constants = dict(re.findall(r"%(\w+) = stablehlo\.constant dense<(-?\d+)> : tensor<i32>",
                                text))
    bounds = [int(constants[name]) for name in
              re.findall(r"stablehlo\.compare\s+LT,\s*%iterArg\w*,\s*%(\w+)", text)
              if name in constants]
    return {"lowered": "compiled" if any(m in text for m in KERNEL_CALL_MARKERS)
            else "interpreted", "loops": text.count("stablehlo.while"),
            "bounds": bounds, "tensors": set(re.findall(r"tensor<((?:\d+x)+)\w+>", text))}


def exported_kernel(impl, x, block_rows: int):
    """softmax_pallas(x, block_rows=...) exported by the learner process as StableHLO,
    to be read and run in this process; None off CPU when it cannot be exported (jax
    refuses to serialise a compiled Triton kernel: its IR has no stability guarantee)."""
    try:
        return get_function(impl, "softmax_pallas").export(x, block_rows=block_rows,
                                                            out_example=x)
    except LearnerCodeError:
        if jax.default_backend() == "cpu":  # interpreted kernels always export
            raise
        return None


def cross_check_sites(impl, x, block_rows: int, info: dict) -> dict:
    """The learner process's site report against the exported program read here: an
    interpreted pallas_call is a loop over its grid with (block_rows, block_cols) block
    tensors in the body. Returns the program's facts."""
    exported = exported_kernel(impl, x, block_rows)
    if exported is None:  # a compiled kernel that cannot be exported: its mode read there
        return {"lowered": bridge.inspect(impl, "pallas-kernel/lowered_mode",
                                          LearnerFunction("softmax_pallas"), x,
                                          block_rows=block_rows)}
    facts = program_facts(exported)
    sites = info["sites"]
    if facts["lowered"] != "interpreted" or not sites \
            or not all(s["interpret"] for s in sites):
        return facts  # a compiled kernel is one custom call: nothing more to read here
    if not facts["loops"]:
        raise TamperEvidence(f"the learner process reported {len(sites)} interpreted "
                             "pallas_call(s), but the exported program has no grid loop")
    for s in sites:
        grid = s["grid"]
        if len(grid) == 1 and grid[0] > 1 and grid[0] not in facts["bounds"]:
            raise TamperEvidence(f"the learner process reported grid {grid}, but the "
                                 f"exported program's loops run {facts['bounds']} times")
        for block in s["block_shapes"]:
            dims = "".join(f"{d}x" for d in block if d is not None)
            if dims and dims not in facts["tensors"]:
                raise TamperEvidence(f"the learner process reported block {block}, but "
                                     "the exported program holds no such tensor")
    return facts


@checker.check(2, "execution_mode_by_backend")
def _(impl, ctx):
    mode = get_function(impl, "execution_mode")
    for backend, want in (("cpu", "interpreted"), ("gpu", "compiled"), ("tpu", "compiled")):
        got = mode(backend)
        fail_unless(got == want and isinstance(got, str), f"execution_mode({backend!r})",
                    yours=got, expected=want, hint="compiled Pallas does not run on CPU: "
                    "there it must run with interpret=True")
    here = "interpreted" if jax.default_backend() == "cpu" else "compiled"
    got = mode()
    fail_unless(got == here, "execution_mode() without an argument must describe "
                "jax.default_backend()", yours=got, expected=here)


@checker.check(2, "kernel_is_a_pallas_call")
def _(impl, ctx):
    rng = ctx.rng("pallas-call")
    block_rows = int(rng.choice(BLOCK_ROWS))
    shape = (ragged(rng, 20, 60, block_rows), ragged(rng, 130, 500, 2))
    x = draw(rng, shape, jnp.float32)
    info = learner_sites(impl, x, block_rows)
    fail_unless(len(info["sites"]) > 0, "softmax_pallas runs no pallas_call: the result "
                "comes from ordinary jax.numpy code, not from a kernel",
                yours=f"primitives {sorted(info['outside'])[:12]}",
                expected="a pallas_call in the program",
                hint="build the kernel with pl.pallas_call(softmax_kernel, grid=..., "
                "in_specs=..., out_specs=...)(x)")
    outside = set(info["outside"]) & FORBIDDEN_OUTSIDE
    fail_unless(not outside, "softmax arithmetic runs outside the kernel",
                yours=sorted(outside), expected="none: exp, max and sum inside the kernel",
                hint="the kernel must do the whole softmax; the wrapper only sets up the "
                "pallas_call")
    inside = set().union(*(set(s["kernel_primitives"]) for s in info["sites"]))
    missing = {"exp", "reduce_max", "reduce_sum"} - inside
    fail_unless(not missing, "the kernel does not contain the softmax's reductions",
                yours=sorted(inside)[:20], expected=f"also {sorted(missing)}",
                hint="take jnp.max and jnp.sum over the row inside softmax_kernel")
    cross_check_sites(impl, x, block_rows, info)


@checker.check(2, "grid_and_blockspec")
def _(impl, ctx):
    rng = ctx.rng("grid")
    for block_rows in rng.permutation(BLOCK_ROWS)[:2]:
        block_rows = int(block_rows)
        shape = (ragged(rng, 3 * block_rows, 6 * block_rows, block_rows),
                 ragged(rng, 20, 900, 2))
        x = draw(rng, shape, jnp.float32)
        want_grid = [math.ceil(shape[0] / block_rows)]
        info = learner_sites(impl, x, block_rows, programs=want_grid[0])
        sites = info["sites"]
        fail_unless(len(sites) == 1, "softmax_pallas should make exactly one pallas_call",
                    yours=len(sites), expected=1)
        fail_unless(sites[0]["grid"] == want_grid,
                    f"wrong grid for {describe(shape, block_rows)}",
                    yours=tuple(sites[0]["grid"]), expected=tuple(want_grid),
                    hint="one program per block of rows: grid=(pl.cdiv(rows, block_rows),); "
                    "floor division drops the last, partial block")
        want_block = [block_rows, block_width(shape[1])]
        for k, block in enumerate(sites[0]["block_shapes"]):
            fail_unless(block == want_block, f"block shape {k} of the pallas_call "
                        f"for {describe(shape, block_rows)}", yours=tuple(block),
                        expected=tuple(want_block), hint="BlockSpec((block_rows, "
                        "block_cols(cols)), lambda i: (i, 0)) for input and output: whole "
                        "rows per block")
        # Interpreted Pallas clamps an out-of-range block index (compiled Pallas does
        # not), so a wrong index map can pass on CPU: read the map itself.
        want_index = [[i, 0] for i in range(want_grid[0])]
        indices = info.get("block_indices")
        fail_unless(isinstance(indices, list) and len(indices) == 2,
                    "the pallas_call should have one BlockSpec for the input and one for "
                    "the output", yours=short(indices), expected="2 index maps")
        for k, got in enumerate(indices):
            fail_unless(got == want_index, f"BlockSpec {k}'s index map for "
                        f"{describe(shape, block_rows)} does not give program i the row "
                        "block i and the one column block",
                        yours=[tuple(g) for g in got[:6]] if isinstance(got, list) else got,
                        expected=[tuple(w) for w in want_index[:6]], hint="lambda i: (i, 0): "
                        "program i takes row block i; the whole row is column block 0")
        cross_check_sites(impl, x, block_rows, info)


def kernel_matches(impl, ctx, dtype_name: str, salt: str) -> None:
    rng = ctx.rng(salt)
    cases = []
    b = int(rng.choice(BLOCK_ROWS))
    cases.append(((b * int(rng.integers(2, 4)), int(rng.choice([128, 256]))), b))  # divisible
    b = int(rng.choice(BLOCK_ROWS))
    cols = ragged(rng, 129, 700, 2) if rng.random() < 0.7 else ragged(rng, 3, 127, 2)
    cases.append(((ragged(rng, b + 1, 4 * b, b), cols), b))  # neither dimension divides
    passed = []
    for shape, block_rows in cases:
        x = draw(rng, shape, DTYPES[dtype_name])
        what = f"softmax_pallas on {dtype_name} {describe(shape, block_rows)}"
        try:
            expect_close(learner_kernel(impl, block_rows)(x), x, dtype_name, what,
                         KERNEL_HINT, also_jnp=True)
        except CheckFailed as err:
            if passed:
                err.args = (f"{err.args[0]} (it was right on {passed[0]}: a kernel correct "
                            "only where the blocks divide the array)",)
            raise
        passed.append(describe(shape, block_rows))
    # The same program exported and run here: the values this process computes through
    # the learner's kernel must be right too (on the ragged case).
    exported = exported_kernel(impl, x, block_rows)
    try:
        if exported is None:
            return  # a compiled kernel jax cannot export (off CPU): nothing to run here
        y = jax.jit(exported.call)(x)
        expect_close(y, x, dtype_name, f"{what}, exported and run by the checker",
                     KERNEL_HINT)
    except CheckFailed as err:
        raise TamperEvidence(f"the learner process's result was right, but its exported "
                             f"program computes otherwise here: {err.args[0]}") from None


@checker.check(2, "matches_references_float32")
def _(impl, ctx):
    kernel_matches(impl, ctx, "float32", "match-f32")


@checker.check(2, "matches_references_bfloat16")
def _(impl, ctx):
    kernel_matches(impl, ctx, "bfloat16", "match-bf16")


@checker.check(2, "edge_shapes")
def _(impl, ctx):
    rng = ctx.rng("edges")
    block_rows = int(rng.choice(BLOCK_ROWS[1:]))
    for shape in ((1, 1), (ragged(rng, 2, block_rows, block_rows), ragged(rng, 3, 127, 2)),
                  (block_rows + 1, int(rng.choice([129, 1023, 1025])))):
        x = draw(rng, shape, jnp.float32)
        expect_close(learner_kernel(impl, block_rows)(x), x, "float32",
                     f"softmax_pallas on {describe(shape, block_rows)}", KERNEL_HINT)


@checker.check(2, "declared_mode_is_the_one_that_ran")
def _(impl, ctx):
    run = get_function(impl, "run_softmax")
    rng = ctx.rng("mode")
    block_rows = int(rng.choice(BLOCK_ROWS[1:]))  # not run_softmax's default (8)
    shape = (ragged(rng, block_rows + 1, 3 * block_rows, block_rows), ragged(rng, 60, 400, 2))
    x = draw(rng, shape, jnp.float32)
    result = require_keys(run(x, block_rows=block_rows),
                          ("y", "mode", "backend", "block_rows", "grid"), "run_softmax")
    expect_close(result["y"], x, "float32", "run_softmax()['y']", KERNEL_HINT)
    backend = jax.default_backend()
    fail_unless(result["backend"] == backend, "run_softmax declares the wrong backend",
                yours=result["backend"], expected=backend)
    info = learner_sites(impl, x, block_rows)
    sites = info["sites"]
    fail_unless(bool(sites), "no pallas_call ran, so no kernel mode can be declared",
                hint="stage 2's softmax_pallas must call pl.pallas_call")
    ran = "interpreted" if all(s["interpret"] for s in sites) else "compiled"
    # The lowered program, read here from the learner's exported StableHLO.
    lowered = cross_check_sites(impl, x, block_rows, info)["lowered"]
    fail_unless(lowered == ran, "the pallas_call's interpret flag and the lowered program "
                "disagree", yours=f"flag says {ran}", expected=f"lowered program: {lowered}")
    # The declared launch, compared exactly with the pallas_call the checker found.
    want_grid = [math.ceil(shape[0] / block_rows)]
    fail_unless(list(sites[0]["grid"]) == want_grid, "the pallas_call that ran has the wrong "
                "grid", yours=tuple(sites[0]["grid"]), expected=tuple(want_grid))
    grid = result["grid"]
    fail_unless(isinstance(grid, (list, tuple)) and [int(g) for g in grid] == want_grid
                and all(isinstance(g, int) for g in grid),
                "run_softmax declares a grid that is not the one that ran", yours=grid,
                expected=f"{want_grid} (the grid of the pallas_call found in the program: "
                f"ceil({shape[0]} / {block_rows}))",
                hint="report the grid you passed to pallas_call, as a list of ints")
    fail_unless(type(result["block_rows"]) is int and result["block_rows"] == block_rows
                == sites[0]["block_shapes"][0][0],
                "run_softmax declares block_rows that are not the block that ran",
                yours=result["block_rows"], expected=f"{block_rows} (the pallas_call's "
                f"block is {tuple(sites[0]['block_shapes'][0])})")
    fail_unless(result["mode"] == ran, "the declared execution mode is not the one that ran",
                yours=result["mode"], expected=f"{ran} (read from the program that ran on "
                f"{backend})", hint="declare execution_mode() and pass interpret="
                "(mode == 'interpreted') to pallas_call, so the two cannot disagree")
    if backend == "cpu":
        fail_unless(ran == "interpreted", "on CPU only interpreted Pallas runs",
                    yours=ran, expected="interpreted")
    # interpret=None must follow execution_mode(): traced (not run) in the learner process
    # with the learner module's execution_mode swapped (and put back), on a shape no
    # other check traces (jit caches traces per shape).
    get_function(impl, "execution_mode")
    odd = jnp.zeros((3, 5), jnp.bfloat16)
    for mode in ("compiled", "interpreted"):
        flags = bridge.inspect(impl, "pallas-kernel/interpret_flags_with_mode",
                               LearnerFunction("softmax_pallas"),
                               LearnerFunction("execution_mode"), mode, odd)
        fail_unless(isinstance(flags, list) and bool(flags)
                    and flags[0] is (mode == "interpreted"),
                    "softmax_pallas's interpret flag does not follow execution_mode()",
                    yours=f"interpret={flags[0] if flags else None} when "
                    f"execution_mode() says {mode!r}", expected=f"interpret="
                    f"{mode == 'interpreted'}", hint="interpret=None means "
                    "interpret = (execution_mode() == 'interpreted'): on a GPU the same "
                    "code must compile")
        odd = jnp.zeros((3, 6), jnp.bfloat16)


# ---------------------------------------------------------------------------------------
# Stage 3: measured
# ---------------------------------------------------------------------------------------

RECORD_KEYS = ("impl", "shape", "dtype", "block_rows", "grid", "mode", "backend",
               "warmup", "iters", "first_call_s", "samples_s", "compiles_first_call",
               "compiles_warmed", "output_ok")


class ProbedCalls:
    """The probe's report of the kernel calls a sweep made in the learner process (every
    call's (shape, block_rows), entry, exit and compiles), cross-checked here: every stamp
    inside this process's wall-clock window around the request (``time.perf_counter`` is
    the system's monotonic clock in both processes), in order, each call ending before
    the next begins. A learner's timing of a call must contain the call (at least exit -
    entry) and end before the next call begins."""

    def __init__(self, answer, started: float, finished: float, what: str):
        calls, returned = answer.get("calls"), answer.get("returned")
        ok = isinstance(calls, list) and type(returned) is float
        previous = started
        for c in calls if ok else ():
            ok = ok and isinstance(c, dict) and type(c.get("entry")) is float \
                and type(c.get("exit")) is float and type(c.get("compiles")) is int \
                and c["compiles"] >= 0 and previous <= c["entry"] <= c["exit"]
            previous = c["exit"] if ok else previous
        if not (ok and previous <= returned <= finished):
            raise TamperEvidence(f"{what}: the learner process's record of the kernel calls "
                                 "does not fit the request's own time window "
                                 f"[{started:.6f}, {finished:.6f}] s as measured here")
        self.calls, self.returned = calls, returned

    def group(self, shape, block_rows: int) -> list[dict]:
        return [c for c in self.calls
                if c["shape"] == list(shape) and c["block_rows"] == int(block_rows)]

    def report(self, shape, block_rows: int) -> dict:
        mine = self.group(shape, block_rows)
        return {"calls": len(mine), "compiled_at": [k for k, c in enumerate(mine)
                                                    if c["compiles"]],
                "compiles": sum(c["compiles"] for c in mine)}

    def windows(self, shape, block_rows: int) -> list[tuple[float, float]]:
        """[(least_s, most_s) per call of the group]: the call's own duration, and the
        time from its entry to the next call's entry (or to the sweep's return)."""
        out = []
        for k, c in enumerate(self.calls):
            if c["shape"] == list(shape) and c["block_rows"] == int(block_rows):
                after = self.calls[k + 1]["entry"] if k + 1 < len(self.calls) \
                    else self.returned
                out.append((c["exit"] - c["entry"], after - c["entry"]))
        return out


# Between the learner's clock start and our wrapper's entry lies one Python call, but on a
# loaded machine the learner may be preempted there: half the gap and 50 ms more.
PREEMPT_SLACK_S, PREEMPT_SLACK_FRACTION = 0.05, 0.5


def within_call_window(value, window, what: str) -> None:
    least, most = window
    most = most * (1 + PREEMPT_SLACK_FRACTION) + PREEMPT_SLACK_S
    seconds = as_float(value, what)
    fail_unless(least <= seconds <= most, f"{what} is not the time of the call it reports",
                yours=f"{seconds * 1e3:.4g} ms", expected=f"between {least * 1e3:.4g} ms "
                f"(the call itself, measured by the checker around it) and {most * 1e3:.4g} "
                "ms (from the call's start to the next call's, with slack)",
                hint="start the clock right before the call, stop it right after "
                "jax.block_until_ready(out); time nothing else")


def expected_mode() -> str:
    return "interpreted" if jax.default_backend() == "cpu" else "compiled"


def check_records(records) -> list[dict]:
    fail_unless(isinstance(records, list) and all(isinstance(r, dict) for r in records),
                "sweep must return a list of dicts", yours=short(records))
    for r in records:
        require_keys(r, RECORD_KEYS, "a sweep record")
    try:
        json.dumps(records)
    except (TypeError, ValueError) as err:
        raise CheckFailed(f"sweep records are not JSON-able: {err}",
                          hint="plain floats, ints, strings and lists (float(...), "
                          "list(shape)); no arrays") from None
    return records


def reported_times_fit(impl, records, what: str) -> None:
    """The sweep's reported seconds add up to no more than the request's wall time
    measured here: no harness times more than elapsed (a unit slip fails the same way, so
    it is a failure, not tamper evidence)."""
    timed = 0.0
    for r in records:
        samples = r.get("samples_s")
        for v in [r.get("first_call_s"), *(samples if isinstance(samples, list) else [])]:
            if type(v) in (int, float) and math.isfinite(v) and v > 0:
                timed += v
    wall = impl.__bridge__.last_wall_s
    fail_unless(timed <= wall * 1.01 + 1e-3, f"{what}: the times in the records add up to "
                "more than the whole sweep took", yours=f"{timed:.4g} s",
                expected=f"at most {wall:.4g} s (the sweep call, timed by the checker)",
                hint="seconds, one timed call each: time.perf_counter() after the sync "
                "minus time.perf_counter() before the call")


def run_sweep(impl, shapes, blocks, kernel=None, **kwargs):
    """The learner's sweep, run in the learner process. With ``kernel`` (the learner's
    ``LearnerFunction`` or a catalog ``Workload``), the kernel it is given is probed there
    (``ProbedCalls``); returns (records, probed calls or None)."""
    get_function(impl, "sweep")
    shapes, blocks = [list(s) for s in shapes], list(blocks)
    if kernel is None:
        records = check_records(impl.sweep(shapes, blocks, **kwargs))
        reported_times_fit(impl, records, "sweep")
        return records, None
    started = time.perf_counter()
    answer = bridge.inspect(impl, "pallas-kernel/sweep_probed", LearnerFunction("sweep"),
                            kernel, shapes, blocks, **kwargs)
    finished = time.perf_counter()
    if not isinstance(answer, dict):
        raise TamperEvidence(f"the sweep probe answered {short(answer)}")
    records = check_records(answer.get("records"))
    probed = ProbedCalls(answer, started, finished, "sweep")
    if isinstance(kernel, Workload) and kernel.facts.get("calls") != len(probed.calls):
        raise TamperEvidence(f"the bridge counted {kernel.facts.get('calls')} calls of the "
                             f"checker's kernel, the probe {len(probed.calls)}")
    return records, probed


def declared(record: dict, what: str, want: dict) -> None:
    """The record's declared facts, compared exactly with what the checker asked for or
    recomputed (the grid: ceil(rows / block_rows) programs)."""
    for key, value in want.items():
        got = record[key]
        same = got == value and type(got) is type(value) if value is not None else got is None
        if isinstance(value, list):
            same = isinstance(got, list) and [type(v) for v in got] == [type(v) for v in value] \
                and got == value
        fail_unless(same, f"{what}: {key} is not what ran", yours=got, expected=value,
                    hint="declare the facts of the run you timed, as plain ints, strings "
                    "and lists (grid: [ceil(rows / block_rows)]; the baseline has none)")


def find(records, impl: str, shape, block_rows=None) -> dict:
    found = [r for r in records if r["impl"] == impl and list(r["shape"]) == list(shape)
             and (impl == "jnp" or r["block_rows"] == block_rows)]
    fail_unless(len(found) == 1, f"expected one {impl} record for shape {list(shape)}"
                + (f", block_rows={block_rows}" if impl == "pallas" else ""),
                yours=f"{len(found)} records", expected="1")
    return found[0]


@checker.check(3, "sweep_records_complete")
def _(impl, ctx):
    rng = ctx.rng("sweep")
    shapes = [(ragged(rng, 17, 40, 8), ragged(rng, 40, 127, 2)),
              (ragged(rng, 41, 64, 8), ragged(rng, 129, 300, 2))]
    blocks = sorted(int(b) for b in rng.permutation(BLOCK_ROWS)[:2])
    warmup, iters = 1, int(rng.integers(3, 6))
    get_function(impl, "softmax_pallas")
    records, probed = run_sweep(impl, shapes, blocks, LearnerFunction("softmax_pallas"),
                                dtype="float32", warmup=warmup, iters=iters,
                                seed=int(rng.integers(0, 2**31)))
    fail_unless(len(records) == len(shapes) * (1 + len(blocks)), "one record per shape for "
                "the baseline and one per shape and block size for the kernel",
                yours=len(records), expected=len(shapes) * (1 + len(blocks)))
    # First calls compile different programs (a jnp softmax, kernels of two block sizes,
    # two shapes): their durations differ by far more than 0.1%. One value repeated is
    # a reading of something else (a clock's, a constant), not a duration per first call:
    # the call windows below cannot tell it from a slow compile on a loaded machine.
    firsts = [r["first_call_s"] for r in records]
    if all(type(v) in (int, float) and v > 0 for v in firsts):
        fail_unless(max(firsts) - min(firsts) > 1e-3 * max(firsts), "first_call_s is about "
                    "the same number in every record: not each first call's duration",
                    yours=[f"{v:.6g}" for v in firsts[:6]], expected="the seconds of each "
                    "record's own first (compiling) call", hint="first_call_s = "
                    "time.perf_counter() after the sync minus time.perf_counter() before "
                    "the call")
    backend, mode = jax.default_backend(), expected_mode()
    for shape in shapes:
        base = find(records, "jnp", shape)
        fail_unless(base["output_ok"] is True, f"the baseline's output for {list(shape)} was "
                    "judged wrong", yours=base["output_ok"], expected=True)
        samples_of(base, f"baseline {list(shape)}", iters)
        declared(base, f"baseline {list(shape)}", {
            "impl": "jnp", "shape": list(shape), "dtype": "float32", "block_rows": None,
            "grid": None, "mode": "compiled", "backend": backend, "warmup": warmup,
            "iters": iters})
        for b in blocks:
            r = find(records, "pallas", shape, b)
            what = f"kernel {list(shape)} block_rows={b}"
            fail_unless(r["mode"] == mode and r["backend"] == backend,
                        f"{what}: the record must declare the mode and backend that ran",
                        yours=(r["mode"], r["backend"]), expected=(mode, backend))
            fail_unless(r["output_ok"] is True, f"{what}: a correct output was judged wrong",
                        yours=r["output_ok"], expected=True,
                        hint="compare with softmax_numpy_f64(x) using tolerance(dtype, cols)")
            samples = samples_of(r, what, iters)
            declared(r, what, {
                "impl": "pallas", "shape": list(shape), "dtype": "float32", "block_rows": b,
                "grid": [math.ceil(shape[0] / b)], "mode": mode, "backend": backend,
                "warmup": warmup, "iters": iters})
            facts = probed.report(shape, b)
            calls = facts["calls"]
            fail_unless(calls == 1 + warmup + iters, f"{what}: wrong number of kernel calls",
                        yours=calls, expected=f"1 first call + {warmup} warmup + {iters} "
                        "timed", hint="call `kernel(x, block_rows=b)` exactly so; do not "
                        "time the compiling first call with the others")
            fail_unless(facts["compiled_at"] == [0] and
                        r["compiles_first_call"] >= 1 and r["compiles_warmed"] == 0,
                        f"{what}: the compile must fall in the first call, and only there",
                        yours=f"compiled in calls {facts['compiled_at']}; "
                        f"record says first={r['compiles_first_call']!r} warmed="
                        f"{r['compiles_warmed']!r}", expected="call 0; first>=1 warmed=0",
                        hint="count compiles with coursekit.measure.timing.count_compiles")
            fail_unless(r["compiles_first_call"] == facts["compiles"],
                        f"{what}: compiles_first_call is not the number of compiles the "
                        "first call made", yours=r["compiles_first_call"],
                        expected=f"{facts['compiles']} (counted by the checker around the "
                        "call)", hint="count_compiles() around the first call only")
            windows = probed.windows(shape, b)
            within_call_window(r["first_call_s"], windows[0], f"{what}: first_call_s")
            for k, sample in enumerate(samples):
                within_call_window(sample, windows[1 + warmup + k], f"{what}: samples_s[{k}]")


# The learner's sweep and the checker's own timing alternate, round by round (learner
# first in even rounds, checker first in odd ones), so load that drifts over the check
# moves both alike; one reference measured before or after the sweep would not.
SYNC_ROUNDS, SYNC_ITERS = 4, 3
# Programs long enough that a missing sync cannot look synchronised. A short one can: with
# the dispatching thread and XLA's threads on one busy core, a woken XLA thread may run the
# whole program before the dispatch returns. Measured on one core (taskset), median
# unsynchronised / synchronised over 30 trials: a 376x243 jnp softmax (0.04 ms) up to 0.13,
# past the baseline's 1/8; at 381x7001 (1.2 ms jnp, 51 ms interpreted kernel) at most
# 0.0075 and 0.0003. The kernel's blocks are 8192 columns wide.
SYNC_ROWS, SYNC_COLS = (360, 400), (6000, 8100)


@checker.check(3, "sweep_timings_synchronised")
def _(impl, ctx):
    rng = ctx.rng("synced")
    block_rows = 16
    shape = (ragged(rng, *SYNC_ROWS, block_rows), ragged(rng, *SYNC_COLS, 2))
    seed = int(rng.integers(0, 2**31))
    x = draw(rng, shape, jnp.float32)
    get_function(impl, "sweep")
    fns: dict = {}  # built after the first sweep (a sweep not written yet is named first)
    yours = {"pallas": [], "jnp": []}
    mine = {"pallas": [], "jnp": []}

    def learner_round():
        records, _ = run_sweep(impl, [shape], [block_rows], dtype="float32", warmup=1,
                               iters=SYNC_ITERS, seed=seed)
        for name in yours:
            yours[name] += samples_of(find(records, name, shape, block_rows), name,
                                      SYNC_ITERS)

    def checker_round():
        if not fns:
            # The checker's own measurement: the learner's programs exported as StableHLO
            # and run, synchronised, in this process (the XLA program the learner's jit
            # runs).
            exported = exported_kernel(impl, x, block_rows)
            fns["pallas"] = None if exported is None else jax.jit(exported.call)
            fns["jnp"] = jax.jit(get_function(impl, "softmax_jnp").export(
                x, out_example=x).call)
        for name, fn in fns.items():
            if fn is not None:
                mine[name] += time_synced(fn, x, warmup=1, iters=SYNC_ITERS).samples_s
                continue
            # A compiled kernel jax cannot export (off CPU): the checker's own timing
            # code (coursekit.measure.timing) runs in the learner process; its samples
            # must fit the request's wall time measured here.
            samples = bridge.inspect(impl, "pallas-kernel/time_synced",
                                     LearnerFunction("softmax_pallas"), x, warmup=1,
                                     iters=SYNC_ITERS, block_rows=block_rows)
            if not (isinstance(samples, list) and len(samples) == SYNC_ITERS
                    and all(type(v) is float and v > 0 for v in samples)
                    and sum(samples) <= impl.__bridge__.last_wall_s):
                raise TamperEvidence(f"the learner process's synchronised timing "
                                     f"{short(samples)} does not fit the request's "
                                     f"{impl.__bridge__.last_wall_s:.4g} s")
            mine[name] += samples

    for r in range(SYNC_ROUNDS):
        for step in ((learner_round, checker_round) if r % 2 == 0
                     else (checker_round, learner_round)):
            step()
    for name in fns:
        window = TIME_RATIO_WINDOW if name == "pallas" else BASELINE_RATIO_WINDOW
        within_ratio(statistics.median(yours[name]), statistics.median(mine[name]), window,
                     f"your {name} median",
                     "jax.block_until_ready(out) inside every timed boundary: JAX returns "
                     "before the work is done", against="the checker's synchronised timing "
                     f"of the same program on {list(shape)}, interleaved with your sweep "
                     f"over {SYNC_ROUNDS} rounds")


# How far off the subtly wrong kernel is: this many times the budget's allowance
# (atol + rtol * |p|) at one probability near 1e-2, outside any honest tolerance (the
# bracket allows 1.5), yet let through by a test that divides by |p| (rtol / |p|).
SUBTLE_BUDGETS = 3


@checker.check(3, "sweep_checks_output_before_timing")
def _(impl, ctx):
    rng = ctx.rng("wrong-kernel")
    shape = (ragged(rng, 9, 30, 8), ragged(rng, 20, 120, 2))
    i, j = int(rng.integers(0, shape[0])), int(rng.integers(0, shape[1]))
    rtol, atol = budget(jnp.float32, shape[1])
    for dtype_name in DTYPES:
        # Built in the learner process from the catalog (remote_pallas_kernel): 8 plainly
        # wrong at [i, j], 16 SUBTLE_BUDGETS allowances off at row 0's p nearest 1e-2,
        # 64 one row short, 128 one row too many, 32 right.
        kernels = Workload("pallas-kernel/planted_kernels", i=i, j=j, rtol=float(rtol),
                           atol=float(atol), subtle=float(SUBTLE_BUDGETS))
        blocks = [8, 16, 32, 64, 128] if dtype_name == "float32" else [32]
        records, probed = run_sweep(impl, [shape], blocks, kernels, dtype=dtype_name,
                                    warmup=1, iters=3, seed=int(rng.integers(0, 2**31)))
        for b, right, what in ((8, False, f"a kernel wrong at element [{i}, {j}]"),
                               (16, False, f"a kernel {SUBTLE_BUDGETS}x the rounding "
                                "budget off at one small probability"),
                               (32, True, f"a correct {dtype_name} kernel"),
                               (64, False, "a kernel whose output is one row short"),
                               (128, False, "a kernel whose output has a row too many")):
            if b not in blocks:
                continue
            r = find(records, "pallas", shape, b)
            fail_unless(r["output_ok"] is right, f"{what} was judged "
                        f"{'right' if r['output_ok'] else 'wrong'}", yours=r["output_ok"],
                        expected=right, hint="check the first call's output against "
                        "softmax_numpy_f64(x) with |y - y64| <= atol + rtol * |y64| from "
                        "tolerance(dtype, cols), before timing anything")
            calls = probed.report(shape, b)["calls"]
            if not right:
                fail_unless(r["samples_s"] == [] and calls == 1, "a wrong kernel was timed "
                            "anyway", yours=f"{calls} calls, {len(r['samples_s'])} samples",
                            expected="1 call (the checked one), no samples",
                            hint="a timing of a wrong result is worse than none")


def synthetic_records(rng, plan: dict, mode: str, backend: str = "cpu",
                      dtype: str = "float32", n: int = 7) -> list[dict]:
    """Records with known medians: plan = {shape: (baseline_s, {block: speedup}, ...)}."""
    def record(impl, shape, block, median, ok=True):
        samples = [] if not ok else [float(median * math.exp(v))
                                     for v in rng.normal(0, 0.02, n)]
        if ok:
            samples[0] = float(median)  # keep the median where it was planned
        return {"impl": "".join(list(impl)), "shape": list(shape),
                "dtype": "".join(list(dtype)), "block_rows": block,
                "grid": None if block is None else [math.ceil(shape[0] / block)],
                # strings built at run time, as read from a JSON file: not interned
                "mode": "".join(list("compiled" if impl == "jnp" else mode)),
                "backend": "".join(list(backend)),
                "warmup": 1, "iters": n, "first_call_s": float(median * 50),
                "samples_s": samples, "compiles_first_call": 1, "compiles_warmed": 0,
                "output_ok": ok}
    records = []
    for shape, (base, speedups, wrong_block) in plan.items():
        records.append(record("jnp", shape, None, base))
        for block, s in speedups.items():
            records.append(record("pallas", shape, block, base / s))
        if wrong_block:  # fastest of all, but wrong: must be ignored
            wrong = record("pallas", shape, wrong_block, base / 50, ok=True)
            wrong["output_ok"] = False
            records.append(wrong)
    order = rng.permutation(len(records))
    return [records[k] for k in order]


def expected_summary(records) -> dict:
    base = {tuple(r["shape"]): statistics.median(r["samples_s"])
            for r in records if r["impl"] == "jnp"}
    per_shape = []
    for shape in sorted(base, key=lambda s: (math.prod(s), s)):
        sp = {r["block_rows"]: base[shape] / statistics.median(r["samples_s"])
              for r in records if r["impl"] == "pallas" and tuple(r["shape"]) == shape
              and r["output_ok"]}
        best = max(sp, key=sp.get)
        per_shape.append({"shape": list(shape), "baseline_median_s": base[shape],
                          "speedup_by_block": sp, "best_block_rows": best,
                          "best_speedup": sp[best], "helps": sp[best] > HELP_MARGIN})
    last = max((i for i, p in enumerate(per_shape) if p["helps"]), default=-1)
    stops = per_shape[last + 1]["shape"] if last + 1 < len(per_shape) else None
    return {"per_shape": per_shape, "stops_helping_at": stops}


def plan_shapes(rng, helps: list[bool]) -> dict:
    plan, rows = {}, 16
    for k, h in enumerate(helps):
        rows = rows * 2 + int(rng.integers(1, 8))
        shape = (rows, int(rng.integers(100, 300)))
        blocks = [int(b) for b in rng.permutation(BLOCK_ROWS)]
        lo, hi = (1.2, 3.0) if h else (0.2, 0.85)
        speedups = {b: float(rng.uniform(lo, hi)) for b in blocks}
        speedups[blocks[0]] = hi + 0.5 if h else 0.9  # a clear best block
        plan[shape] = (float(rng.uniform(1e-4, 1e-2)), speedups, 64 if k % 2 == 0 else None)
    return plan


def from_plain(value):
    """The learner's value with its DICT_ITEMS tuples made dicts again (keys as sent)."""
    if type(value) is tuple and len(value) == 2 and value[0] == DICT_ITEMS \
            and isinstance(value[1], list):
        try:
            return {k: from_plain(v) for k, v in value[1]}
        except (TypeError, ValueError):
            raise TamperEvidence("the learner process sent a dict that is not one") from None
    if type(value) is dict:
        return {k: from_plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(from_plain(v) for v in value)
    return value


def learner_summary(impl, records) -> dict:
    """summarize(records) in the learner process; its dicts keyed by block_rows cross the
    bridge as (key, value) pairs (``pallas-kernel/call_plain``)."""
    get_function(impl, "summarize")
    got = from_plain(bridge.inspect(impl, "pallas-kernel/call_plain",
                                    LearnerFunction("summarize"), records))
    return require_keys(got, ("mode", "backend", "per_shape", "stops_helping_at", "caveat"),
                        "summarize")


@checker.check(3, "summary_finds_where_it_stops_helping")
def _(impl, ctx):
    rng = ctx.rng("summary")
    for helps, mode, backend in (([True, True, False, False], "interpreted", "cpu"),
                                 ([False, False, False], "compiled", "gpu"),
                                 ([False, True, True], "compiled", "tpu"),
                                 ([True, True, False], "interpreted", "cpu")):
        records = synthetic_records(rng, plan_shapes(rng, helps), mode, backend=backend)
        want = expected_summary(records)
        got = learner_summary(impl, records)
        fail_unless(got["mode"] == mode, "summary mode differs from the records'",
                    yours=got["mode"], expected=mode)
        fail_unless(got["backend"] == backend, "summary backend differs from the records'",
                    yours=got["backend"], expected=backend)
        per_shape = got["per_shape"]
        fail_unless(isinstance(per_shape, list) and len(per_shape) == len(want["per_shape"]),
                    "per_shape must hold one entry per shape", yours=short(per_shape),
                    expected=len(want["per_shape"]))
        for yours, exp in zip(per_shape, want["per_shape"]):
            yours = require_keys(yours, ("shape", "best_block_rows", "best_speedup", "helps"),
                                 "a per_shape entry")
            fail_unless(list(yours["shape"]) == exp["shape"], "per_shape is not in order of "
                        "element count", yours=[p.get("shape") for p in per_shape],
                        expected=[p["shape"] for p in want["per_shape"]])
            fail_unless(math.isclose(as_float(yours.get("baseline_median_s"),
                                              "baseline_median_s"),
                                     exp["baseline_median_s"], rel_tol=1e-9),
                        f"baseline median for {exp['shape']}",
                        yours=yours.get("baseline_median_s"),
                        expected=exp["baseline_median_s"],
                        hint="the median of the baseline record's raw samples")
            speedups = yours.get("speedup_by_block")
            fail_unless(isinstance(speedups, dict) and set(speedups) == set(
                exp["speedup_by_block"]) and all(math.isclose(
                    as_float(speedups[b], "speedup"), v, rel_tol=1e-9)
                    for b, v in exp["speedup_by_block"].items()),
                f"speedup_by_block for {exp['shape']}", yours=short(speedups),
                expected=short(exp["speedup_by_block"]),
                hint="one entry per block size whose output was correct: median(baseline) "
                "/ median(kernel)")
            fail_unless(yours["best_block_rows"] == exp["best_block_rows"],
                        f"best block size for {exp['shape']}", yours=yours["best_block_rows"],
                        expected=exp["best_block_rows"], hint="speedup = median(baseline) / "
                        "median(kernel); ignore blocks whose output was wrong")
            fail_unless(math.isclose(as_float(yours["best_speedup"], "best_speedup"),
                                     exp["best_speedup"], rel_tol=1e-9),
                        f"best speedup for {exp['shape']}", yours=yours["best_speedup"],
                        expected=exp["best_speedup"], hint="ratio of medians of the raw "
                        "samples (not means, not minima)")
            fail_unless(isinstance(yours["helps"], (bool, np.bool_))
                        and bool(yours["helps"]) == exp["helps"],
                        f"helps for {exp['shape']}", yours=yours["helps"], expected=exp["helps"])
        stops = got["stops_helping_at"]
        stops = None if stops is None else list(stops)
        fail_unless(stops == want["stops_helping_at"], "stops_helping_at",
                    yours=stops, expected=want["stops_helping_at"],
                    hint="the shape after the last shape where the kernel helps; None when "
                    "it helps at the largest")


def value_error(impl, records) -> str | None:
    """The message of the ValueError summarize(records) raised in the learner process, or
    None when it returned (any other exception propagates, named)."""
    get_function(impl, "summarize")
    answer = bridge.inspect(impl, "pallas-kernel/value_error_of",
                            LearnerFunction("summarize"), records)
    if not (isinstance(answer, dict) and type(answer.get("raised")) is bool
            and (not answer["raised"] or type(answer.get("message")) is str)):
        raise TamperEvidence(f"the ValueError inspector answered {short(answer)}")
    return answer["message"] if answer["raised"] else None


@checker.check(3, "summary_refuses_mixed_modes")
def _(impl, ctx):
    rng = ctx.rng("mixed")
    plan = plan_shapes(rng, [True, False])
    for field, change in (("mode", "compiled"), ("backend", "gpu"), ("dtype", "bfloat16")):
        records = synthetic_records(rng, plan, "interpreted")
        kernel_records = [r for r in records if r["impl"] == "pallas"]
        kernel_records[int(rng.integers(0, len(kernel_records)))][field] = change
        err = value_error(impl, records)
        if err is not None:
            fail_unless(field in err, f"the ValueError for mixed {field} values does "
                        "not name the field", yours=err, expected=f"a message naming "
                        f"{field!r}")
            continue
        raise CheckFailed(f"records that mix {field} values were summarised as if "
                          "comparable", yours="no error", expected=f"ValueError naming {field}",
                          hint="an interpreted and a compiled timing measure different things")
    # Records that lack the field altogether (every kernel record), and records with no
    # baseline: nothing to compare, so refused too.
    lacking = synthetic_records(rng, plan, "interpreted")
    for r in lacking:
        if r["impl"] == "pallas":
            r["mode"] = None
    kernels_only = [r for r in synthetic_records(rng, plan, "interpreted")
                    if r["impl"] == "pallas"]
    for records, what in ((lacking, "kernel records without a mode"),
                          (kernels_only, "kernel records without a baseline")):
        if value_error(impl, records) is not None:
            continue
        raise CheckFailed(f"{what} were summarised", yours="no error",
                          expected="ValueError", hint="a speedup needs a baseline and a "
                          "known mode to mean anything")


@checker.check(3, "summary_states_interpreted_mode")
def _(impl, ctx):
    rng = ctx.rng("caveat")
    plan = plan_shapes(rng, [False, False])
    interpreted = learner_summary(impl, synthetic_records(rng, plan, "interpreted"))
    text = interpreted["caveat"]
    fail_unless(isinstance(text, str) and "interpreted" in text.lower()
                and "target" in text.lower(), "an interpreted run's summary must say "
                "plainly that its timings say nothing about the target's speed",
                yours=text, expected="a sentence with 'interpreted' and 'target'")
    shape = next(iter(plan))  # the smallest sweep: one shape, one block size
    single = learner_summary(impl, synthetic_records(
        rng, {shape: (1e-3, {int(rng.choice(BLOCK_ROWS)): 1.5}, None)}, "interpreted"))
    fail_unless("interpreted" in str(single["caveat"]).lower(), "a one-kernel-record "
                "summary lost the interpreted caveat", yours=single["caveat"])
    compiled = learner_summary(impl, synthetic_records(rng, plan, "compiled", backend="gpu"))
    fail_unless(isinstance(compiled["caveat"], str)
                and "interpreted" not in compiled["caveat"].lower(),
                "a compiled run's summary claims it was interpreted",
                yours=compiled["caveat"], expected="no interpreted caveat")


if __name__ == "__main__":
    sys.exit(checker.main())

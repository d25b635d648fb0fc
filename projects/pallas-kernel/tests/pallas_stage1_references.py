"""pallas-kernel stage 1: independent references. The learner's ``softmax_jnp`` (run
under ``jax.jit`` in the learner process, its values returned as data) and
``softmax_numpy_f64`` are compared element by element with the checker's own float64
softmax (``ref64``) on inputs with rows near +-1000 and rows whose tiny probabilities
underflow float32; the learner's ``tolerance(dtype, n)`` (called there with the dtype,
which is not data) must fall inside the checker's own bracket around its rounding budget,
accept a correct softmax computed here and reject one 10x the budget off."""

from __future__ import annotations

import contextlib
import math

import jax
import jax.numpy as jnp
import numpy as np
from pallas_harness import (
    DTYPES,
    block_width,
    budget,
    checker,
    compare,
    draw,
    expect_close,
    hidden_length,
    length,
    ragged,
    ref64,
    ref_jnp,
    second_call,
    stored_bar,
    unit_roundoff,
)

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction
from coursekit.checking.contract import short
from coursekit.checking.errors import CheckFailed, LearnerCodeError, TamperEvidence
from coursekit.checking.learner import get_function
from coursekit.checking.values import as_array, as_float, fail_unless, require_keys

ATOL_MAX_U32 = 10


def rtol_bracket(dtype, n: int) -> tuple[float, float]:
    """The bracket a derived rtol must fall in (stored with the rounding bars)."""
    bar = stored_bar(dtype, n)
    return bar["rtol_lo"], bar["rtol_hi"]


def rtol_in_bracket(rtol: float, dtype, dtype_name: str, n: int, rtol_at=None,
                    float32_rtol: float | None = None) -> None:
    """The learner's rtol inside ``rtol_bracket``; a failure says which way it is off and
    what the number matches, never the bracket (two failures would let a learner fit it:
    the bracket is the checker's own analysis, and the released checker's code is
    readable, but a failure message must not do the arithmetic for them). ``rtol_at(n)``:
    the learner's rtol at another length (asked only to say what a too-large one
    matches); ``float32_rtol``: the learner's float32 rtol at ``n`` (for a too-small
    rtol of a coarser dtype: the output's rounding taken as float32's, or left out)."""
    lo, hi = rtol_bracket(dtype, n)
    if lo <= rtol <= hi:
        return
    low = rtol < lo
    ratio = rtol / budget(dtype, n)[0]
    hint = ("some rounding an output element goes through is missing from the count, "
            "or costs less there than it can" if low else
            "the count holds more than the roundings an output element goes through, or "
            "charges one more than it can cost")
    if not low and abs(ratio - 2) < 0.1:
        hint = ("your rtol is what a complete count gives with eps (the gap above 1, "
                "2u) in the place of the unit roundoff u: one rounding costs at most u")
    elif not low and rtol_at is not None:
        hint = counted_over_the_block(rtol, n, rtol_at) or hint
    elif low:
        hint = output_rounding_missing(rtol, dtype, dtype_name, n, float32_rtol) or hint
    raise CheckFailed(
        f"your rtol for {dtype_name}, length {n}, is {'smaller' if low else 'larger'} "
        "than this computation's rounding allows",
        yours=rtol, expected=("a larger one: the worst case of the roundings this "
                              "computation makes costs more than yours" if low else
                              "a smaller one: yours is more than half as large again as a "
                              "complete count of the roundings"), hint=hint)


def output_rounding_missing(rtol: float, dtype, dtype_name: str, n: int,
                            float32_rtol: float | None) -> str | None:
    """A hint when a too-small rtol for a dtype coarser than float32 lands in the bracket
    once float32's unit roundoff in it is exchanged for the dtype's (or added, where it
    was counted nowhere): the count's final rounding, to the output dtype, is float32's or
    missing (issue 53, blind-b4-tolerance-ignores-dtype); None otherwise."""
    u_out, u32 = unit_roundoff(dtype), unit_roundoff(jnp.float32)
    if u_out <= u32:
        return None
    lo, hi = rtol_bracket(dtype, n)
    if not any(lo <= rtol + u_out - shift <= hi for shift in (u32, 0.0)):
        return None
    same = (f"your {dtype_name} rtol equals your float32 one at this length; "
            if float32_rtol is not None and math.isclose(rtol, float32_rtol, rel_tol=1e-9)
            else "")
    return (f"{same}it is what a complete count gives with the result's last rounding "
            f"costed as float32's, or left out: the output dtype's rounding is missing (a "
            f"{dtype_name} result is rounded once to {dtype_name}, which costs far more "
            "than a float32 rounding)")


def counted_over_the_block(rtol: float, n: int, rtol_at) -> str | None:
    """A hint when a too-large rtol for rows of ``n`` is the learner's own rtol for rows
    of the block width ``n`` is padded to, and grows again at twice that width: the count
    runs over the padded block's cells (measured with two more calls); None otherwise
    (a constant rtol is the same at both widths, and is told otherwise)."""
    width = block_width(n)
    if width == n:
        return None
    try:
        at_width, at_twice = rtol_at(width), rtol_at(2 * width)
    except TamperEvidence:
        raise
    except (CheckFailed, LearnerCodeError):
        return None  # the failure at n is told as it is
    if not (math.isclose(at_width, rtol, rel_tol=1e-9) and at_twice > at_width):
        return None
    return (f"your rtol for rows of {n} equals your rtol for rows of {width}, the block "
            f"width rows of {n} are padded to (and grows again at {2 * width}): the count "
            f"runs over the block's {width} cells, where a probability goes through the "
            f"roundings of its row's {n} terms alone (the {width - n} padded cells past "
            "the row's end add exact zeros to the sum, no rounding)")


REFERENCE_HINT = ("what must hold: the error of a float32 computation rounded once to "
                  "x.dtype, whatever the input dtype, and finite on every row")


def learner_jnp(impl):
    """The learner's softmax_jnp under jax.jit, run in the learner process; its values
    come back as data (checked here against the float64 reference)."""
    get_function(impl, "softmax_jnp")  # a missing function is named
    return lambda x: bridge.inspect(impl, "pallas-kernel/jit_call",
                                    LearnerFunction("softmax_jnp"), x)


@checker.check(1)
def jnp_reference_matches_float64(impl, ctx):
    fn = learner_jnp(impl)
    rng = ctx.rng("jnp-ref")
    shapes = [(int(rng.integers(2, 9)), length(rng, 1, 20)),
              (int(rng.integers(9, 40)) | 1, length(rng, 100, 700, 2)),
              (int(rng.integers(2, 6)), length(rng, 2000, 5000, 2))]
    for dtype_name in DTYPES:
        for shape in shapes:
            x = draw(rng, shape, DTYPES[dtype_name])
            y = None
            try:
                y = fn(x)
                expect_close(y, x, dtype_name, f"softmax_jnp on {dtype_name} {shape}",
                             REFERENCE_HINT)
            except (CheckFailed, LearnerCodeError) as err:
                hint = None if isinstance(err, TamperEvidence) else \
                    per_row_value_on_columns(fn, x, err) or (
                    None if isinstance(err, LearnerCodeError) else
                    depends_on_other_rows(fn, x, y) or computed_in_input_dtype(y, x))
                if hint and isinstance(err, LearnerCodeError):
                    # a valid input it cannot take, its cause measured: a verdict
                    raise CheckFailed(f"softmax_jnp raised on a {dtype_name} {shape} input: "
                                      f"{err}", yours="an exception", expected="probabilities "
                                      f"of shape {shape}", hint=hint) from None
                if hint:
                    err.hint = hint
                raise
            # called again in the same process, on new data of the same shape
            x = draw(rng, shape, DTYPES[dtype_name])
            again = fn(x)
            with second_call(again, y, "softmax_jnp",
                             diagnose=lambda a=again, v=x: computed_in_input_dtype(a, v)):
                expect_close(again, x, dtype_name, f"softmax_jnp on {dtype_name} {shape}",
                             REFERENCE_HINT)


def _rounded_before_dividing(x):
    """float32 up to the exponentials and their sum, both rounded to x's dtype before
    the division (then the quotient rounded once more). Made from the public softmax and
    log-sum-exp (the exponentials are the softmax times their sum), so this file writes
    out no softmax of its own."""
    x32 = jnp.asarray(x, jnp.float32)
    total = jnp.exp(jax.nn.logsumexp(x32, axis=-1, keepdims=True)
                    - jnp.max(x32, axis=-1, keepdims=True))
    exponentials = jax.nn.softmax(x32, axis=-1) * total
    return exponentials.astype(x.dtype) / total.astype(x.dtype)


# the low-precision computations a softmax_jnp's output is told apart by: how each is
# made (jitted, as the learner's function is: XLA's fusion keeps some intermediates wider
# than op-by-op) and what the hint says it is
LOW_PRECISION = (
    (jax.jit(jax.nn.softmax),
     "the softmax computed in {dtype} itself, its max, exp and sum each rounded to "
     "{dtype}"),
    (jax.jit(_rounded_before_dividing),
     "the exponentials and their sum rounded to {dtype} before the division, then the "
     "quotient again: three roundings"),
)


def output_and_truth(y, x) -> tuple[np.ndarray, np.ndarray] | None:
    """softmax_jnp's output ``y`` on ``x`` in float64 beside the float64 softmax of ``x``;
    None where there is no output or it is not an array of x's shape (a hint then has
    nothing to read)."""
    if y is None:
        return None
    try:
        got = np.asarray(as_array(y, "softmax_jnp's output"), np.float64)
    except (CheckFailed, TypeError, ValueError):
        return None
    exact = ref64(x)
    return (got, exact) if got.shape == exact.shape else None


def computed_in_input_dtype(y, x) -> str | None:
    """A hint when softmax_jnp's output on a low-precision ``x`` is one of the
    computations of ``LOW_PRECISION`` (rounded to x's dtype before the end): nearer it
    than a third of its distance to the float64 reference (``ref64``), over the whole
    array, and nearer it than to the others. None for float32 inputs, or where the output
    is none of them."""
    if x.dtype == jnp.float32:
        return None
    read = output_and_truth(y, x)
    if read is None or not np.isfinite(read[0]).all():
        return None
    got, exact = read
    to_exact = float(np.linalg.norm(got - exact))
    distances = [(float(np.linalg.norm(got - np.asarray(made(jnp.asarray(x)), np.float64))),
                  what) for made, what in LOW_PRECISION]
    to_low, what = min(distances, key=lambda d: d[0])
    if not to_low * 3 < to_exact:
        return None
    how = (f"{to_exact / to_low:.0f}x nearer that computation, made here, than float64's"
           if to_low else "equal to that computation, made here")
    return (f"yours is {what.format(dtype=x.dtype)} ({how}): compute in float32 and round "
            "once to x.dtype at the end")


def per_row_value_on_columns(fn, x, err) -> str | None:
    """A hint when softmax_jnp's failure on ``x`` (rows, cols) is what a value with one
    entry per row, shape (rows,), gives against the (rows, cols) array: broadcasting
    aligns the last axes, so it meets the columns, and runs only where cols is rows or 1
    (then column j is shifted or divided by row j's value, or a (rows, 1) input comes
    back (rows, rows)). Read from the learner's own error, else measured with one more
    call on the same rows widened to a column count that is neither (where it cannot
    broadcast: an error or another shape); None when neither shows it."""
    rows, cols = x.shape
    per_row = f"({rows},)"
    laid = (f"a value with one entry per row, shape {per_row}, meets the ({rows}, n) "
            "array along its columns (broadcasting aligns the last axes); that runs only "
            "when n is the row count or 1, and then column j is shifted or divided by "
            "row j's value, where each row's max and sum belong to its own row")
    if isinstance(err, LearnerCodeError):
        said = str(err)
        if "broadcast" in said.lower() and per_row in said:
            return f"the error shows that {laid}"
        return None
    if rows < 2 or cols not in (1, rows):
        return None
    wide = next(n for n in range(cols + 1, cols + 4) if n not in (1, rows))
    probe = jnp.concatenate([x] + [x[:, :1]] * (wide - cols), axis=1)
    try:
        got = fn(probe)
        shape = tuple(getattr(got, "shape", ()))
        if shape == probe.shape:
            return None
        seen = f"it returns shape {shape}"
    except LearnerCodeError as probed:
        said = str(probed)
        if isinstance(probed, TamperEvidence) or "broadcast" not in said.lower():
            return None
        seen = f"it raises ({short(said, 160)})"
    return (f"softmax_jnp is wrong on ({rows}, {cols}), and on the same rows widened to "
            f"({rows}, {wide}) {seen}: {laid}")


def depends_on_other_rows(fn, x, y) -> str | None:
    """A hint when softmax_jnp's output ``y`` on ``x`` changes with the rows beside a row:
    its worst row, given alone as a (1, n) input (one more call), comes back different
    and nearer the float64 reference. None where the row alone gives what it gave among
    the others (the mistake is in the row's own arithmetic), or where that call fails."""
    rows, cols = x.shape
    read = output_and_truth(y, x) if rows >= 2 else None
    if read is None:
        return None
    got, exact = read
    error = np.where(np.isfinite(got), np.abs(got - exact), np.inf)
    i = int(np.argmax(error.max(axis=1)))
    try:
        alone = np.asarray(as_array(fn(x[i:i + 1]), "softmax_jnp's output"), np.float64)
    except (CheckFailed, LearnerCodeError, TypeError, ValueError):
        return None
    if alone.shape != (1, cols) or not np.isfinite(alone).all():
        return None
    among, alone = got[i], alone[0]
    if np.allclose(alone, among, rtol=0.05, atol=1e-3):
        return None
    if not np.abs(alone - exact[i]).max() < error[i].max():
        return None
    shown = ", ".join(f"{v:.4g}" for v in among[:3])
    off = float(np.abs(alone - exact[i]).max())
    return (f"row {i} of your output begins [{shown}] among the other {rows - 1} rows, and "
            f"is {f'within {off:.2g} of' if off else 'exactly'} the float64 softmax when "
            f"that row is given alone, as a (1, {cols}) input: each row's softmax depends on "
            "its own row only (its max and sum along axis -1), yet yours changes with the "
            "rows beside it, so something in it is reduced across rows")


@checker.check(1)
def jnp_reference_is_stable(impl, ctx):
    fn = learner_jnp(impl)
    rng = ctx.rng("stable")
    shape = (int(rng.integers(3, 12)), length(rng, 30, 300, 2))
    x = rng.standard_normal(shape) * 3 + rng.choice([-1, 1], (shape[0], 1)) * rng.uniform(
        600, 1000, (shape[0], 1))
    x = jnp.asarray(x.astype(np.float32))
    y = as_array(fn(x), "softmax_jnp", shape=shape, dtype=jnp.float32)
    finite = bool(np.all(np.isfinite(y)))
    fail_unless(finite, "softmax_jnp gives inf or nan on rows of "
                "values near +-1000", yours=y, expected="finite probabilities",
                hint=None if finite else depends_on_other_rows(fn, x, y) or
                "exp of a value near 1000 overflows float32 (whose largest value is "
                "about exp(88.7)): inf / inf is nan, and a row of such values is one")
    expect_close(y, x, "float32", "softmax_jnp on rows near +-1000", REFERENCE_HINT)


@checker.check(1)
def numpy_reference_is_float64(impl, ctx):
    fn = get_function(impl, "softmax_numpy_f64")
    rng = ctx.rng("np-ref")
    shape, before = None, None
    for dtype_name in (*DTYPES, "float32"):
        # the second float32 call: new data of the first call's shape, in the same process
        shape = shape or (int(rng.integers(3, 20)), ragged(rng, 50, 3000, 2))
        x = draw(rng, shape, DTYPES[dtype_name])
        y = fn(x)
        with second_call(y, before, "softmax_numpy_f64") if before is not None else \
                contextlib.nullcontext():
            check_float64(y, x, shape, dtype_name)
        before = y


def check_float64(y, x, shape, dtype_name: str) -> None:
    """softmax_numpy_f64's output ``y`` on ``x``: a NumPy float64 array within 1e-12 of
    the float64 softmax."""
    fail_unless(isinstance(y, np.ndarray), "softmax_numpy_f64 must return a NumPy "
                "array (it is the JAX-independent reference)", yours=type(y).__name__,
                expected="numpy.ndarray", hint="NumPy only, in float64 from the "
                "input on: no JAX array may take part")
    y = as_array(y, "softmax_numpy_f64", shape=shape, dtype=np.float64,
                 dtype_hint=float64_dtype_hint(y, dtype_name))
    ok, (i, j), excess = compare(y, ref64(x), 1e-12, 1e-300)
    fail_unless(ok, f"softmax_numpy_f64 on {dtype_name} input is not float64-accurate "
                f"(worst at [{i}, {j}]: {excess:.3g}x a 1e-12 relative tolerance)",
                yours=float(y[i, j]), expected=float(ref64(x)[i, j]),
                hint=float64_hint(y, ref64(x), i, j))


def float64_dtype_hint(y, dtype_name: str) -> str:
    """The hint for a NumPy reference that returns another dtype than float64 (issue 53:
    the input's own dtype's advice, compute in float32, pointed the wrong way here)."""
    got = str(getattr(y, "dtype", "?"))
    return (f"yours is {got} on {dtype_name} input: this reference is the float64 truth "
            f"the others are measured against, float64 from the input on whatever the "
            f"input's dtype; in {got} a probability keeps {got}'s precision and one below "
            f"its smallest value is 0, where float64 keeps it")


def float64_hint(y, ref, i: int, j: int) -> str:
    """What a float64 reference's error shows, at its worst element ``[i, j]``."""
    if not np.all(np.isfinite(y)):
        return ("yours holds inf or nan where the float64 softmax is finite: exp overflows "
                "float64 past about exp(709), and these rows reach it")
    got, want = float(y[i, j]), float(ref[i, j])
    if got == 0.0 and want != 0.0:
        return (f"yours is 0 where the float64 softmax is {want:.3g}: below the smallest "
                "float32 (about 1e-45) a value rounds to 0, where float64 keeps it")
    rel = abs(got - want) / abs(want) if want else float("inf")
    sums = np.sum(np.asarray(y, np.float64), axis=-1)
    if not np.allclose(sums, 1.0, rtol=0.0, atol=1e-3):  # far past any dtype's rounding
        whole = (" and the whole array's to 1: divided by the whole array's sum, not each "
                 "row's" if math.isclose(float(np.sum(sums)), 1.0, rel_tol=1e-6) else "")
        return (f"your rows sum to {float(np.min(sums)):.3g} to {float(np.max(sums)):.3g}"
                f"{whole}; each row of a softmax sums to 1")
    if rel < 1e-3:
        return (f"a relative error of {rel:.2g} is a lower precision's (float32 keeps about 7 "
                "significant digits): a value computed in another dtype and cast to "
                "float64 keeps that dtype's error")
    return (f"a relative error of {rel:.2g}: no dtype's rounding, another value")


@checker.check(1)
def tolerance_from_dtype_and_length(impl, ctx):
    get_function(impl, "tolerance")  # a missing function is named
    rng = ctx.rng("tolerance")
    lengths = (length(rng, 5, 12), length(rng, 200, 500, 2), length(rng, 3000, 5000, 2))
    # where the instructor grades, two lengths more whose bars the copy does not store
    hidden = [n for n in (hidden_length(rng, 13, 199, 2), hidden_length(rng, 1100, 2000, 2))
              if n is not None]
    lengths = (lengths[0], *lengths[1:-1], *hidden, lengths[-1])
    got = {}

    def ask(dtype_name: str, n: int) -> dict:
        return require_keys(bridge.inspect(impl, "pallas-kernel/call_with_dtype",
                                           LearnerFunction("tolerance"), dtype_name, n),
                            ("rtol", "atol", "why"), "tolerance")

    for dtype_name, dtype in DTYPES.items():
        for n in lengths:
            t = ask(dtype_name, n)
            rtol, atol = as_float(t["rtol"], "rtol"), as_float(t["atol"], "atol")
            fail_unless(rtol > 0 and atol >= 0, "rtol must be > 0 and atol >= 0",
                        yours=(rtol, atol))
            rtol_in_bracket(rtol, dtype, dtype_name, n, rtol_at=lambda m, d=dtype_name:
                            as_float(ask(d, m)["rtol"], "rtol"),
                            float32_rtol=got.get(("float32", n), (None,))[0])
            u32 = unit_roundoff(jnp.float32)
            small = atol < u32
            fail_unless(u32 <= atol <= ATOL_MAX_U32 * u32, f"your atol for {dtype_name}, "
                        f"length {n}, is not an absolute error of float32 arithmetic",
                        yours=f"{atol:.3g} ({atol / u32:.3g} u32)",
                        expected="an atol in the range the contract states in u32 (the "
                        "README's Tolerances)",
                        hint="yours is less than one float32 rounding of a probability, "
                        "which a correct float32 result cannot stay within" if small else
                        "yours is that many float32 roundings: an allowance that wide "
                        "accepts tiny probabilities far from the truth")
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
                        expected="a tolerance that accepts it (its error is the rounding "
                        "this computation makes)",
                        hint=f"this correct {dtype_name} softmax (float32 arithmetic, "
                        f"rounded once to {dtype_name}) errs there by {excess:.3g}x what "
                        "your tolerance allows: your count holds fewer or cheaper "
                        "roundings than this computation makes")
            b_rtol, _ = budget(dtype, n)
            bad = truth.copy()
            j = int(np.argmax(truth[0]))
            bad[0, j] *= 1 + 10 * b_rtol
            ok, _, _ = compare(bad, truth, rtol, atol)
            fail_unless(not ok, f"your tolerance for {dtype_name}, length {n}, accepts a "
                        "result off by 10x the rounding budget", yours={"rtol": rtol,
                        "atol": atol}, expected="a tolerance that rejects it",
                        hint="an allowance that accepts an element 10x the rounding "
                        "budget off would pass a wrong kernel")
    # called again in the same process, after the calls at other lengths and dtypes: the
    # same answer as the first call's
    for dtype_name, n in (("float32", lengths[0]), ("bfloat16", lengths[-1])):
        t = ask(dtype_name, n)
        again = (as_float(t["rtol"], "rtol"), as_float(t["atol"], "atol"))
        fail_unless(again == got[dtype_name, n], f"tolerance({dtype_name}, {n}) called "
                    "again gives another answer than its first call", yours=again,
                    expected=got[dtype_name, n], hint="the answer depends on the calls "
                    "made before it: state carried from an earlier call (a cache keyed on "
                    "less than the dtype and the length) made this one")
    for dtype_name in DTYPES:
        short_n, long_n = lengths[0], lengths[-1]
        fail_unless(got[dtype_name, long_n][0] > got[dtype_name, short_n][0]
                    or dtype_name == "bfloat16",
                    f"the {dtype_name} tolerance does not grow with the reduction length",
                    yours={short_n: got[dtype_name, short_n][0],
                           long_n: got[dtype_name, long_n][0]},
                    expected="a larger rtol for the longer row",
                    hint=f"the longer row ({long_n} elements) goes through more roundings "
                    f"than the shorter ({short_n}), and your rtol does not grow with them")
    for n in lengths:
        fail_unless(got["bfloat16", n][0] > got["float32", n][0],
                    f"the bfloat16 tolerance is not wider than float32's (length {n})",
                    yours={"bfloat16": got["bfloat16", n][0],
                           "float32": got["float32", n][0]},
                    hint="a bfloat16 result is rounded to 8 significant bits, a float32 "
                    "one keeps 24: yours allows bfloat16 no more error than float32")


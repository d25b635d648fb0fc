"""foundations stage 1: the edit-check loop. The learner's ``mse`` against the
checker's float64 mean squared error (``math.fsum``) on odd shapes and extreme values,
the same function exported under ``jax.jit`` and run here on new inputs, and exact
zeros in either argument counted like any other value."""

from __future__ import annotations

import math
from contextlib import contextmanager

import jax.numpy as jnp
import numpy as np
from foundations_harness import (
    MSE_RTOL,
    checker,
)

from coursekit.checking.errors import CheckFailed, LearnerCodeError
from coursekit.checking.learner import (
    get_function,
    on_input,
)
from coursekit.checking.values import as_array, as_float64_array, fail_unless

# ---------------------------------------------------------------------------------------
# Stage 1: mse
# ---------------------------------------------------------------------------------------

def mse_cases(ctx) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(what, pred, target): odd shapes of rank 0 to 3, a one-element array, values of
    1e17 and 1e-17, large values close together, and pred == target."""
    rng = ctx.rng("mse-shapes")
    odd = lambda lo, hi: int(rng.integers(lo, hi)) | 1  # noqa: E731
    shapes = [(odd(3, 40),), (odd(2, 12), odd(2, 12) + 2), (1,), (),
              (3, 1, odd(2, 6) + 2)]
    cases = []
    for shape in shapes:
        pred = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.uniform(0.5, 3))
        target = rng.standard_normal(shape).astype(np.float32)
        cases.append((f"shape {shape}", pred, target))
    shape = (odd(5, 15), odd(5, 15))
    for scale in (1e17, 1e-17):
        pred = (rng.standard_normal(shape) * scale).astype(np.float32)
        target = (rng.standard_normal(shape) * scale).astype(np.float32)
        cases.append((f"values of about {scale:g}, shape {shape}", pred, target))
    offset = float(rng.uniform(2e3, 4e3))
    pred = (offset + rng.standard_normal(shape)).astype(np.float32)
    target = (offset + rng.standard_normal(shape)).astype(np.float32)
    cases.append((f"values near {offset:.0f} a few units apart, shape {shape}", pred, target))
    same = rng.standard_normal(shape[:1]).astype(np.float32)
    cases.append((f"pred == target, shape {shape[:1]}", same, same.copy()))
    return cases


def mse64(pred: np.ndarray, target: np.ndarray) -> float:
    """The checker's own mean squared error: float64 squares summed exactly rounded
    (``math.fsum``), so the reference carries no summation error of its own."""
    diff = pred.astype(np.float64).ravel() - target.astype(np.float64).ravel()
    return math.fsum(diff * diff) / diff.size


def scalar_float32(value, what: str, shape: tuple | None = None) -> float:
    """A float32 0-d array's value, or a FAIL saying what came back instead (for ``shape``,
    the inputs' shape, what a shape tied to it shows)."""
    if hasattr(value, "shape") and tuple(value.shape) != () and shape is not None:
        got = tuple(value.shape)
        why = ("one value per row: the mean over the last axis alone" if got == shape[:-1]
               else "the array's own shape of ones: keepdims=True" if got == (1,) * len(shape)
               else "the elementwise squares, never averaged" if got == shape
               else "not one number")
        raise CheckFailed(f"{what} has shape {got} for inputs of shape {shape}",
                          yours=got, expected="() (a 0-d array)",
                          hint=f"yours is {why}: one number for the whole array")
    as_array(value, what, (), "float32")
    return float(as_float64_array(value, what, ()))


def mse_hint(yours: float, pred: np.ndarray, target: np.ndarray) -> str:
    """What a wrong mean squared error equals, of the classic slips, on this case."""
    p64, t64 = pred.astype(np.float64).ravel(), target.astype(np.float64).ravel()
    d = p64 - t64
    n = d.size
    mean_sq = float(np.mean(d * d))
    p32, t32 = pred.astype(np.float32), target.astype(np.float32)
    slips = [
        (float(np.sum(d * d)), "the sum of the squared differences (n times the mean)"),
        (math.sqrt(mean_sq), "the square root of the mean squared error (an RMSE)"),
        (0.5 * mean_sq, "half the mean squared error"),
        (float(np.sum(d * d)) / (n - 1) if n > 1 else math.nan,
         "the sum of squares over n - 1, as for a sample variance"),
        (float(np.mean(np.abs(d))), "the mean absolute difference, not squared"),
        (float(np.mean(d)), "the mean of the differences, not squared"),
        ((float(np.mean(p64)) - float(np.mean(t64))) ** 2,
         "the squared difference of the means, not the mean of the squared differences"),
        (float(np.var(d)), "the variance of the differences: their mean is taken out "
         "first, so an error by a constant offset counts as none"),
        (float(np.mean(p64 * p64 - t64 * t64)), "the mean of pred^2 - target^2, the "
         "squares' difference: the difference is squared, (pred - target)^2"),
        (float(np.mean((d / t64) ** 2)) if np.all(t64 != 0) else math.nan,
         "the mean squared relative difference, ((pred - target) / target)^2: the "
         "differences themselves are squared, not divided by the target first"),
        (float(np.mean(p32 * p32 - 2 * p32 * t32 + t32 * t32)),
         f"the square expanded, p^2 - 2pt + t^2 in float32: three terms near "
         f"{float(np.max(p64 * p64)):.1g} each whose difference is lost to rounding "
         "where values are large and a few units apart (cancellation)"),
    ]
    # the sum divided by one axis's length: a mean right only for 1-d inputs (blind
    # batch 4 divided by pred.shape[0] and got "off by relative 12" on 13 columns)
    for axis, name in ((0, "first"), (-1, "last")):
        if pred.ndim >= 2 and pred.shape[axis] != n:
            slips.append((float(np.sum(d * d)) / pred.shape[axis],
                          f"the sum of the squared differences over the {name} axis's "
                          f"length ({pred.shape[axis]}), not over the number of elements "
                          f"({n}): a mean right only for 1-d inputs"))
    for value, what in slips:
        if math.isfinite(value) and math.isclose(yours, value, rel_tol=1e-5, abs_tol=0.0):
            return f"yours is {what}"
    err = abs(yours - mean_sq) / max(abs(mean_sq), 1e-300)
    centre, spread = float(np.mean(t64)), float(np.std(d))
    if spread > 0 and abs(centre) > 100 * spread:  # large values close together
        square = centre * centre
        return (f"yours is off by relative {err:.2g} on values near {centre:.0f} that differ "
                f"by about {spread:.1f}: a float32 quantity of the size of their squares "
                f"({square:.2g}) carries a rounding error of about "
                f"{float(np.spacing(np.float32(square))):.2g}, as large as the squared "
                "differences themselves, so any result computed through such quantities "
                "loses them (cancellation); the mean squared difference here is "
                f"{mean_sq:.3g}")
    return (f"yours is off by relative {err:.2g}: the mean, over every element, of the "
            "squared difference, in float32 precision at least")


@contextmanager
def on_mse_input(what: str, shape: tuple, ran_on: list[tuple]):
    """``on_input`` for one case; where mse raises on a 0-d case after running on the
    cases of other ranks (``ran_on``), the hint says so: the rank is what the evidence
    points at, and the contract includes 0-d."""
    try:
        with on_input(f"pred and target of {what}, float32"):
            yield
    except LearnerCodeError as err:
        if err.kind == "exception" and shape == () and ran_on:
            shapes = ", ".join(map(str, dict.fromkeys(ran_on)))
            err.hint = (f"it raised on 0-d inputs (shape (): a scalar array, no axes at "
                        f"all) after running on shapes {shapes}; the "
                        "docstring includes them ('any rank (0-d included)'), and a 0-d "
                        "array has no axis, not even a first (batch) one. Call it by hand "
                        "on two 0-d float32 arrays to see the error")
        raise


@checker.check(1)
def mse_matches_float64_reference(impl, ctx):
    mse = get_function(impl, "mse")
    ran_on = []
    for what, pred, target in mse_cases(ctx):
        ref = mse64(pred, target)
        with on_mse_input(what, pred.shape, ran_on):
            out = mse(jnp.asarray(pred), jnp.asarray(target))
        ran_on.append(pred.shape)
        yours = scalar_float32(out, f"mse(...) for {what}", pred.shape)
        fail_unless(np.isclose(yours, ref, rtol=MSE_RTOL, atol=0.0),
                    f"mse is wrong for {what} (relative tolerance {MSE_RTOL:g} against "
                    "float64)", yours=yours, expected=ref,
                    hint=mse_hint(yours, pred, target))


@checker.check(1)
def mse_works_under_jit(impl, ctx):
    """The learner's mse exported (traced under jit, as StableHLO) and run here, on the
    traced inputs and on new ones of the same shape."""
    mse = get_function(impl, "mse")
    cases = mse_cases(ctx)
    _, pred, target = cases[1]
    eager = scalar_float32(mse(jnp.asarray(pred), jnp.asarray(target)), "mse(...)")
    try:
        exported = mse.export(jnp.asarray(pred), jnp.asarray(target),
                              out_example=jnp.zeros((), jnp.float32))
    except LearnerCodeError as err:
        if err.kind != "exception":
            raise
        text = str(err)
        traced = [name for name in ("ConcretizationTypeError", "TracerBoolConversionError",
                                    "TracerArrayConversionError",
                                    "TracerIntegerConversionError") if name in text]
        raise CheckFailed(f"jax.jit(mse) failed on pred and target of shape {pred.shape}: "
                          f"{err}", hint=f"{traced[0]}: under jit your mse meets abstract "
                          "values (tracers), and it turned one into a Python value or a "
                          "numpy array" if traced else "the same call outside jit "
                          "worked: what fails is tracing it") from None
    jitted = scalar_float32(exported.call(jnp.asarray(pred), jnp.asarray(target)),
                            "jax.jit(mse)(...)")
    fail_unless(np.isclose(eager, jitted, rtol=1e-6, atol=0.0),
                "jax.jit(mse) disagrees with mse", yours=jitted, expected=eager,
                hint="use jnp operations only, no float() inside")
    rng = ctx.rng("mse-jit-inputs")
    pred2 = rng.standard_normal(pred.shape).astype(np.float32)
    target2 = rng.standard_normal(pred.shape).astype(np.float32)
    again = scalar_float32(exported.call(jnp.asarray(pred2), jnp.asarray(target2)),
                           "jax.jit(mse)(...)")
    fail_unless(np.isclose(again, mse64(pred2, target2), rtol=MSE_RTOL, atol=0.0),
                "jax.jit(mse) on new inputs of the same shape is wrong",
                yours=again, expected=mse64(pred2, target2),
                hint="compute from the arguments: nothing captured from an earlier call")



def zero_cases(ctx) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(what, pred, target) where target holds exact zeros: at random places of an odd
    2-D shape, everywhere in a 1-D array, and as a 0-d array. Random normals never hit
    0.0, so the other cases cannot tell a zero from a mask."""
    rng = ctx.rng("mse_counts_zeros_either_side")
    odd = lambda lo, hi: int(rng.integers(lo, hi)) | 1  # noqa: E731
    shape = (odd(5, 15), odd(5, 15))
    pred = rng.standard_normal(shape).astype(np.float32)
    target = rng.standard_normal(shape).astype(np.float32)
    target[rng.random(shape) < rng.uniform(0.2, 0.5)] = 0.0
    n = odd(3, 40)
    return [(f"target zero at random places, shape {shape}", pred, target),
            (f"target all zeros, shape ({n},)",
             rng.standard_normal(n).astype(np.float32), np.zeros(n, np.float32)),
            ("target 0.0, shape ()", np.float32(rng.uniform(0.5, 3)), np.float32(0.0))]


def zero_hint(yours: float, pred: np.ndarray, target: np.ndarray) -> str:
    """The masked means a padding-style loss computes (zeros of either argument left
    out), else the classic slips."""
    d = pred.astype(np.float64).ravel() - target.astype(np.float64).ravel()
    sq = d * d
    for side, values in (("target", target), ("pred", pred)):
        kept = values.ravel() != 0
        if kept.all():
            continue
        masked = [(float(np.sum(sq[kept])) / max(int(kept.sum()), 1),
                   f"the mean over the elements where {side} is not zero"),
                  (float(np.sum(sq[kept])) / sq.size,
                   f"the mean with the elements where {side} is zero counted as 0")]
        for value, what in masked:
            if math.isclose(yours, value, rel_tol=1e-5, abs_tol=0.0):
                return (f"yours is {what}: a zero is a value like any other, every "
                        "element counts, whichever argument holds it")
        if not math.isfinite(yours):
            return (f"yours is not a number where {side} is all zeros: a count of "
                    "non-zero elements divides there; every element counts")
    return mse_hint(yours, pred, target)


@checker.check(1)
def mse_counts_zeros_either_side(impl, ctx):
    """Exact zeros in one argument count like any other value, and swapping pred and
    target gives the same number: a loss that masks zeros (padding) fails here."""
    mse = get_function(impl, "mse")
    ran_on = []
    for what, pred, target in zero_cases(ctx):
        for name, a, b in ((what, pred, target),
                           (what.replace("target", "pred", 1), target, pred)):
            ref = mse64(np.asarray(a), np.asarray(b))
            with on_mse_input(name, np.shape(a), ran_on):
                out = mse(jnp.asarray(a), jnp.asarray(b))
            ran_on.append(np.shape(a))
            yours = scalar_float32(out, f"mse(...) for {name}", np.shape(a))
            fail_unless(math.isfinite(yours) and
                        np.isclose(yours, ref, rtol=MSE_RTOL, atol=0.0),
                        f"mse is wrong for {name} (relative tolerance {MSE_RTOL:g} "
                        "against float64)", yours=yours, expected=ref,
                        hint=zero_hint(yours, np.asarray(a), np.asarray(b)))

"""Checks for foundations.

    python projects/foundations/tests/check.py --stage 1|2|3|all --impl PATH [--json F]

Every check computes its own reference: float64 numpy for the loss and for central
finite differences of the gradient, its own replay of the key protocol for the fits and
for the workload's training, its own accuracy of the learner's params on the rows it
names. Inputs come from a seed the learner does not see, with odd shapes and extreme
values. Reproducibility is checked bitwise: under two global seeds in the learner process
and in a fresh learner process (another hash seed, another global seed).

The learner's code runs in a learner process (``learner_process=True``): this process
never imports the learner's file. It reads the file's text once, to find autodiff inside
``regression_grads`` (``ast``: reading is not importing). What the learner process reports
about itself is listed in ``SELF_REPORTED``, each with its independent counterpart.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the course root

# The chip belongs to the code being measured: this process and its helpers keep JAX on
# the CPU, and the learner process gets back the platforms the user asked for.
from coursekit.protocol import pin_checker_to_cpu  # noqa: E402, I001

pin_checker_to_cpu()

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.checking import bridge, forbidden, sealed
from coursekit.checking.contract import Checker
from coursekit.checking.errors import CheckFailed, LearnerCodeError
from coursekit.checking.forbidden import guard
from coursekit.checking.learner import get_function, on_input, require_written
from coursekit.checking.values import as_array, as_float, as_float64_array, fail_unless
from coursekit.workloads import classifier
from coursekit.workloads.fresh import bitwise_differences, flatten

checker = Checker("foundations", {
    1: "the edit-check loop", 2: "a regression fit", 3: "a reproducible classifier"},
    learner_process=True)

# What the learner process reports about itself, and what stands beside it here.
SELF_REPORTED = {
    "common/seed_globals, common/global_state_digest":
        "the learner process's numpy/Python global generator state before and after a "
        "call; independent part: the call's output, compared bitwise here, under two "
        "different global seeds and in a fresh process seeded a third way",
    "foundations/autodiff_calls":
        "how many JAX autodiff transforms regression_grads ran; independent part: this "
        "process's own ast reading of the learner's file (regression_grads and every "
        "function of the file it reaches), and the returned gradient checked here against "
        "float64 finite differences",
}

GRAD_RTOL = 1e-3       # float32 analytic gradient vs float64 finite differences
REPLAY_RTOL = 1e-3     # learner's fit vs the checker's replay (float32, other op order)
MSE_RTOL = 1e-5        # float32 mean of at most ~300 squares vs float64: ~1e-6 measured
ACCURACY_MARGIN = 0.05  # test accuracy may trail the checker's own training by this much
MAX_REPLAY_ROWS = 1625  # the sealed replay's one-sort shuffle is jax's up to this many rows
TESTS = Path(__file__).resolve().parent  # tests/sealed/ holds the sealed replays


def relative_error(yours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(yours - ref) / max(np.linalg.norm(ref), 1e-12))


def linear_params(value, d: int, what: str) -> dict:
    fail_unless(isinstance(value, dict) and set(value) == {"w", "b"},
                f"{what} must be a dict with exactly the keys 'w' and 'b'",
                yours=type(value).__name__ if not isinstance(value, dict) else sorted(value),
                expected="{'w': (d,), 'b': ()}")
    out = {}
    for name, shape in (("w", (d,)), ("b", ())):
        as_array(value[name], f"{what}[{name!r}]", shape, "float32")
        out[name] = as_float64_array(value[name], f"{what}[{name!r}]", shape)
    return out


# ---------------------------------------------------------------------------------------
# Global random state and fresh processes (the learner process's own state)
# ---------------------------------------------------------------------------------------

def under_global_seed(impl, seed: int, call):
    """``call()`` with the learner process's numpy and Python global generators seeded
    to ``seed``; returns (output, whether the state digest changed: self-reported)."""
    before = bridge.inspect(impl, "common/seed_globals", seed)
    out = call()
    after = bridge.inspect(impl, "common/global_state_digest")
    return out, after != before


def check_global_state(impl, call, ctx, what: str):
    """Run ``call`` under two different global seeds: the global generators must be left
    untouched (self-reported) and the output bitwise the same (compared here). Returns
    the first output."""
    seeds = [int(s) for s in ctx.rng("global-seeds").integers(0, 2**31 - 1, 2)]
    first, touched_first = under_global_seed(impl, seeds[0], call)
    second, touched_second = under_global_seed(impl, seeds[1], call)
    diffs = bitwise_differences(flatten(first), flatten(second))
    fail_unless(not (touched_first or touched_second),
                f"{what} used numpy's or Python's global random generator",
                yours="np.random / random state changed during the call",
                expected="global state untouched",
                hint="draw everything from the jax key you were given (jax.random.split, "
                     "jax.random.permutation); np.random.* and random.* are global state")
    fail_unless(not diffs, f"{what} gave different results for the same key when "
                "numpy's and Python's global seeds changed", yours=diffs[:3],
                expected="bitwise equal",
                hint="something besides the key decides the result: global RNG, the "
                     "clock, a count of earlier calls, or a fresh unseeded generator")
    return first


def check_fresh_process(ctx, function: str, in_process, *args, **kwargs) -> None:
    """Call ``function`` again in a fresh learner process (another hash seed, another
    global seed) and compare bitwise with ``in_process``."""
    global_seed = int(ctx.rng("fresh-global-seed").integers(1, 2**31 - 1))
    fresh = bridge.LearnerProcess(ctx.impl_path,
                                  env={"PYTHONHASHSEED": global_seed % 4294967295})
    try:
        module = fresh.module()
        bridge.inspect(module, "common/seed_globals", global_seed)
        out = get_function(module, function)(*args, **kwargs)
    except LearnerCodeError as err:
        if err.kind == "not-implemented":
            raise
        raise CheckFailed(f"in a fresh process: {err}", hint="the function must run on its "
                          "own, from the arguments alone, in a new process") from None
    finally:
        fresh.close()
    diffs = bitwise_differences(flatten(in_process), flatten(out))
    fail_unless(not diffs, f"{function} gave different arrays in a fresh process",
                yours=diffs[:3], expected="bitwise the same arrays",
                hint="a result may depend only on the key and the inputs: no global "
                     "random state, no hash() of strings, no process id, no clock")


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
        (float(np.mean(p32 * p32 - 2 * p32 * t32 + t32 * t32)),
         "p^2 - 2pt + t^2 in float32, which cancels where values are large and close: "
         "subtract first, then square"),
    ]
    for value, what in slips:
        if math.isfinite(value) and math.isclose(yours, value, rel_tol=1e-5, abs_tol=0.0):
            return f"yours is {what}"
    err = abs(yours - mean_sq) / max(abs(mean_sq), 1e-300)
    return (f"yours is off by relative {err:.2g}: the mean, over every element, of the "
            "squared difference, in float32 precision at least")


@checker.check(1)
def mse_matches_float64_reference(impl, ctx):
    mse = get_function(impl, "mse")
    for what, pred, target in mse_cases(ctx):
        ref = mse64(pred, target)
        with on_input(f"pred and target of {what}, float32"):
            out = mse(jnp.asarray(pred), jnp.asarray(target))
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


# ---------------------------------------------------------------------------------------
# Stage 2: regression_grads, fit_regression
# ---------------------------------------------------------------------------------------

def loss64(w: np.ndarray, b: float, x: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((x @ w + b - y) ** 2))


def finite_difference_grads(w, b, x, y, eps: float = 1e-6) -> dict:
    """Central differences of the checker's own float64 loss."""
    gw = np.zeros_like(w)
    for i in range(w.size):
        step = np.zeros_like(w)
        step[i] = eps
        gw[i] = (loss64(w + step, b, x, y) - loss64(w - step, b, x, y)) / (2 * eps)
    gb = (loss64(w, b + eps, x, y) - loss64(w, b - eps, x, y)) / (2 * eps)
    return {"w": gw, "b": np.float64(gb)}


def grad_cases(ctx, salt: str = "grad-data") -> list[dict]:
    """Odd (n, d): n > d, d = 1, d > n, x of magnitude 1e3, and the first shape again
    with new values (a result kept from an earlier call shows there)."""
    rng = ctx.rng(salt)
    odd = lambda lo, hi: int(rng.integers(lo, hi)) | 1  # noqa: E731
    sizes = [(odd(20, 90), odd(4, 18), 1.0), (odd(20, 60), 1, 1.0),
             (odd(3, 8), odd(11, 20), 1.0), (odd(20, 40), odd(3, 9), 1e3)]
    sizes.append(sizes[0])
    cases = []
    for n, d, scale in sizes:
        cases.append({"x": (rng.standard_normal((n, d)) * scale).astype(np.float32),
                      "y": (rng.standard_normal(n) * scale).astype(np.float32),
                      "w": rng.standard_normal(d).astype(np.float32),
                      "b": np.float32(rng.standard_normal())})
    return cases


def check_grads(out, case: dict, what: str) -> None:
    n, d = case["x"].shape
    ref = finite_difference_grads(case["w"].astype(np.float64), float(case["b"]),
                                  case["x"].astype(np.float64), case["y"].astype(np.float64),
                                  eps=1e-6 * float(np.abs(case["x"]).max()))
    yours = linear_params(out, d, what)
    for name in ("w", "b"):
        err = relative_error(yours[name], np.asarray(ref[name]))
        fail_unless(err < GRAD_RTOL,
                    f"gradient for '{name}' is off by relative error {err:.3g} "
                    f"(tolerance {GRAD_RTOL:g}) against float64 finite differences "
                    f"(n={n}, d={d})",
                    yours=yours[name], expected=np.asarray(ref[name]),
                    hint=grad_hint(yours[name], np.asarray(ref[name]), name, n, d))


def grad_hint(yours: np.ndarray, ref: np.ndarray, name: str, n: int, d: int) -> str:
    """What a wrong gradient is, where its ratio to the finite differences shows it."""
    if not np.any(yours) and np.any(ref):
        return f"yours for '{name}' is zero: the loss changes with '{name}' (see expected)"
    scale = float(np.vdot(yours, ref) / max(np.vdot(ref, ref), 1e-300))
    if relative_error(yours, scale * ref) < GRAD_RTOL:
        for factor, what in ((-1.0, "the sign: the residual is prediction minus target"),
                             (0.5, "half: the square's derivative brings a factor 2"),
                             (float(n), f"n = {n} times: the loss is a mean over the n rows"),
                             (n / d, f"n / d = {n}/{d} times: the mean is over the n rows, "
                                     "not the d features"),
                             (-0.5, "the sign and half: the residual is prediction minus "
                                    "target, and the square brings a factor 2")):
            if math.isclose(scale, factor, rel_tol=1e-3):
                return f"yours for '{name}' is {scale:.4g}x the gradient: {what}"
        return f"yours for '{name}' is {scale:.4g}x the gradient, element for element"
    return (f"yours for '{name}' is not a multiple of the gradient (n={n}, d={d}): "
            "differentiate the loss of the docstring with respect to each parameter")


def params_in(case: dict) -> dict:
    return {"w": jnp.asarray(case["w"]), "b": jnp.asarray(case["b"])}


@checker.check(2)
def gradients_match_float64_finite_differences(impl, ctx):
    grads_fn = get_function(impl, "regression_grads")
    for case in grad_cases(ctx):
        n, d = case["x"].shape
        with on_input(f"x float32 ({n}, {d}) of magnitude {np.abs(case['x']).max():.3g}, "
                      f"y ({n},), params w ({d},) and b ()"):
            out = grads_fn(params_in(case), jnp.asarray(case["x"]), jnp.asarray(case["y"]))
        check_grads(out, case, "regression_grads(...)")


def autodiff_in_source(path: Path, root: str = "regression_grads") -> list[str]:
    """'line N: jax.grad (in f)' for each autodiff transform named in ``root`` or in any
    function or module-level name of the same file that it reaches: the course's one
    reading of a learner file for what it may not use (``coursekit.checking.forbidden``,
    foundations' rules ``within`` regression_grads)."""
    found = forbidden.scan(path, forbidden.rules_for("foundations", 2, within=root))
    return sorted({str(f) for f in found})


@checker.check(2)
def regression_grads_written_by_hand(impl, ctx):
    """The rule: no autodiff inside regression_grads. Read from the file's text here,
    and counted in the learner process (self-reported) on inputs of a new shape."""
    get_function(impl, "regression_grads")
    case = grad_cases(ctx, "grad-by-hand-data")[0]
    report = bridge.inspect(impl, "foundations/autodiff_calls",
                            bridge.LearnerFunction("regression_grads"), params_in(case),
                            jnp.asarray(case["x"]), jnp.asarray(case["y"]))
    hint = ("write the gradient of the loss in closed form with jnp operations; jax.grad, "
            "value_and_grad, vjp, jacrev and jacfwd are what this stage checks against")
    found = autodiff_in_source(Path(ctx.impl_path))
    fail_unless(not found, "regression_grads uses JAX autodiff: the gradient must be "
                "written by hand", yours=found[:3], expected="no autodiff transform",
                hint=hint)
    calls = report.get("calls") if isinstance(report, dict) else None
    fail_unless(type(calls) is int, "the autodiff count from the learner process is not a "
                "count", yours=report, expected="{'calls': int, 'value': ...}")
    fail_unless(calls == 0, f"regression_grads ran {calls} JAX autodiff transform(s) "
                "(counted where it runs)", yours=calls, expected=0, hint=hint)
    check_grads(report.get("value"), case, "regression_grads(...)")


def expect_replay(function: str, yours: np.ndarray, ref: np.ndarray, diagnoses,
                  otherwise: str) -> None:
    """Pass when ``yours`` is within REPLAY_RTOL of the checker's replay. Otherwise fail
    with the hint of the first diagnosis that explains it (each one replays a classic
    mistake, only on failure, and returns a hint or None), else ``otherwise``."""
    err = relative_error(yours, ref)
    if err < REPLAY_RTOL:
        return
    hint = next((h for h in (diagnose() for diagnose in diagnoses) if h), otherwise)
    raise CheckFailed(f"{function} differs from the checker's replay of the key protocol "
                      f"(relative error {err:.3g}, tolerance {REPLAY_RTOL:g})",
                      yours=yours, expected=ref, hint=hint)


def replay_fit(key, x, y, steps, batch, lr, reuse_key: bool = False,
               maxval: int | None = None) -> dict:
    """The checker's own SGD with the documented key protocol, float64 steps with
    autodiff's gradient (which regression_grads may not use): a sealed program (its
    source stays with the instructors; it would be fit_regression). ``reuse_key`` and
    ``maxval`` (rows drawn from [0, maxval), not [0, n)) replay classic mistakes, for
    diagnosis."""
    params = sealed.call(sealed.program(TESTS, "fit_replay"), jax.random.key_data(key),
                         np.asarray(x, np.float32), np.asarray(y, np.float32),
                         np.int32(steps), np.float64(lr), np.bool_(reuse_key),
                         np.zeros(batch, np.int8),
                         np.int32(len(x) if maxval is None else maxval), x64=True)
    return {"w": np.asarray(params["w"], np.float64), "b": np.float64(params["b"])}


def fit_case(ctx) -> dict:
    rng = ctx.rng("fit-data")
    n, d = int(rng.integers(150, 260)) | 1, int(rng.integers(2, 6)) * 2 + 1
    x = rng.standard_normal((n, d)).astype(np.float32)
    w_true = rng.standard_normal(d)
    y = (x @ w_true + 0.3 + 0.2 * rng.standard_normal(n)).astype(np.float32)
    return {"x": x, "y": y, "key_seed": int(rng.integers(0, 2**31 - 1)),
            "steps": int(rng.integers(50, 70)), "batch": int(rng.integers(8, 24)) | 1,
            "lr": float(rng.uniform(0.03, 0.045))}  # not the default 0.05


def fit_call(case: dict, key_seed: int | None = None) -> tuple[tuple, dict]:
    key = jax.random.key(case["key_seed"] if key_seed is None else key_seed)
    return ((key, jnp.asarray(case["x"]), jnp.asarray(case["y"])),
            {k: case[k] for k in ("steps", "batch", "lr")})


def learner_fit(impl, case: dict, key_seed: int | None = None):
    args, kwargs = fit_call(case, key_seed)
    n, d = case["x"].shape
    with on_input(f"a typed key, x float32 ({n}, {d}), y ({n},), steps={case['steps']}, "
                  f"batch={case['batch']}, lr={case['lr']:.4g}"):
        return get_function(impl, "fit_regression")(*args, **kwargs)


@checker.check(2)
def fit_follows_key_protocol(impl, ctx):
    case = fit_case(ctx)
    d = case["x"].shape[1]
    vec = lambda p: np.concatenate([p["w"], [p["b"]]])  # noqa: E731
    yours = vec(linear_params(learner_fit(impl, case), d, "fit_regression(...)"))
    key = jax.random.key(case["key_seed"])
    args = (case["x"], case["y"], case["steps"], case["batch"], case["lr"])

    n, steps, batch, lr = len(case["x"]), case["steps"], case["batch"], case["lr"]

    def replays(what, **change):
        """A diagnosis: ``what`` when the replay with ``change`` is the learner's fit."""
        def diagnose():
            changed = {"steps": steps, "lr": lr, **change}
            got = replay_fit(key, case["x"], case["y"], changed.pop("steps"), batch,
                             changed.pop("lr"), **changed)
            return what if relative_error(yours, vec(got)) < REPLAY_RTOL else None
        return diagnose

    def ignores_key():
        other = linear_params(learner_fit(impl, case, case["key_seed"] + 1), d,
                              "fit_regression(...)")
        if np.array_equal(vec(other), yours):
            return "your fit ignores its key: another key gave the same parameters"

    bound = ("randint's maxval is exclusive: rows are drawn from [0, n) with maxval n = "
             f"{n}, every row a candidate")
    expect_replay("fit_regression", yours, vec(replay_fit(key, *args)), [
        replays("you reused one key for every step, so every step drew the same rows: each "
                "step's subkey is used once", reuse_key=True),
        replays(f"your rows are drawn from [0, {n - 1}): with maxval n - 1 the last row "
                f"({n - 1}) is never drawn. " + bound, maxval=n - 1),
        replays(f"your rows are drawn from [0, {n + 1}): maxval n + 1 draws the row index n, "
                "past the last row. " + bound, maxval=n + 1),
        replays(f"your rows are drawn from [0, {d}), the number of features: " + bound,
                maxval=d),
        replays(f"your rows are drawn from [0, {batch}), the batch size: " + bound,
                maxval=batch),
        replays(f"your fit made {steps - 1} updates for steps={steps}: one short",
                steps=steps - 1),
        replays(f"your fit moves by lr / batch (lr={lr:.4g}, batch={batch}) times the "
                "gradient: regression_grads already averages over the batch's rows",
                lr=lr / batch),
        ignores_key],
        "your fit is none of the classic slips the checker replays: the key splits, the "
        "rows each step draws and the update are the docstring's, step for step")


@checker.check(2)
def fit_leaves_global_random_state_alone(impl, ctx):
    case = fit_case(ctx)
    fit = check_global_state(impl, lambda: learner_fit(impl, case), ctx, "fit_regression")
    ctx.once("fit", lambda: fit)  # saves the fresh-process check a fit


@checker.check(2)
def fit_rerun_in_fresh_process_is_bitwise_equal(impl, ctx):
    case = fit_case(ctx)
    here = ctx.once("fit", lambda: learner_fit(impl, case))
    args, kwargs = fit_call(case)
    check_fresh_process(ctx, "fit_regression", here, *args, **kwargs)


# ---------------------------------------------------------------------------------------
# Stage 3: train_classifier, reference_workload
# ---------------------------------------------------------------------------------------

def classifier_case(ctx) -> dict:
    """Noisier clusters than the workload's (spread 3), odd sizes, 3 classes."""
    rng = ctx.rng("classifier-data")
    n, features, classes = int(rng.integers(150, 230)) | 1, 7, 3
    key_seed = int(rng.integers(0, 2**31 - 1))
    x, y = classifier.make_dataset(jax.random.key(key_seed), n, features, classes,
                                   spread=3.0)
    return {"x": np.asarray(x), "y": np.asarray(y), "classes": classes,
            "key_seed": key_seed + 1, "steps": int(rng.integers(36, 46)),
            "batch": int(rng.integers(12, 20)) | 1,
            "lr": float(rng.uniform(0.2, 0.28))}  # not the default 0.3


def replay_train(key, case: dict, same_order: bool = False, ceil_epoch: bool = False) -> dict:
    """The checker's own epoch-shuffled SGD with the documented key protocol: a sealed
    program (its source stays with the instructors; it would be train_classifier).
    ``same_order`` and ``ceil_epoch`` (an epoch of ceil(n / batch) steps, the last on the
    leftover rows) replay classic mistakes, for diagnosis."""
    assert len(case["x"]) <= MAX_REPLAY_ROWS, "a case larger than the sealed replay holds"
    params = sealed.call(sealed.program(TESTS, "train_replay"), jax.random.key_data(key),
                         np.asarray(case["x"], np.float32),
                         np.asarray(case["y"], np.int32), np.int32(case["steps"]),
                         np.float32(case["lr"]), np.bool_(same_order),
                         np.zeros(case["batch"], np.int8),
                         np.zeros(case["classes"], np.int8), np.bool_(ceil_epoch))
    return {k: np.asarray(v, np.float64) for k, v in params.items()}


def train_call(case: dict) -> tuple[tuple, dict]:
    return ((jax.random.key(case["key_seed"]), jnp.asarray(case["x"]),
             jnp.asarray(case["y"])),
            {k: case[k] for k in ("classes", "steps", "batch", "lr")})


def learner_train(impl, case: dict):
    args, kwargs = train_call(case)
    n, f = case["x"].shape
    with on_input(f"a typed key, x float32 ({n}, {f}), y int32 ({n},) in [0, "
                  f"{case['classes']}), classes={case['classes']}, steps={case['steps']}, "
                  f"batch={case['batch']}, lr={case['lr']:.4g}"):
        return get_function(impl, "train_classifier")(*args, **kwargs)


def classifier_params(value, like: dict, what: str) -> dict:
    fail_unless(isinstance(value, dict) and set(value) == set(like),
                f"{what} must return the params dict of classifier.init_params",
                yours=sorted(value) if isinstance(value, dict) else type(value).__name__,
                expected=sorted(like))
    out = {}
    for k in like:
        as_array(value[k], f"{what}[{k!r}]", like[k].shape, "float32")
        out[k] = as_float64_array(value[k], f"{what}[{k!r}]", like[k].shape)
    return out


def params_vector(params: dict) -> np.ndarray:
    return np.concatenate([np.ravel(params[k]) for k in sorted(params)])


@checker.check(3)
def train_follows_key_protocol(impl, ctx):
    require_written(impl, "train_classifier")
    case = classifier_case(ctx)
    key = jax.random.key(case["key_seed"])
    returned = learner_train(impl, case)  # first: an unwritten stage hears so at once
    ref = replay_train(key, case)
    yours = params_vector(classifier_params(returned, ref, "train_classifier(...)"))

    n, batch, steps, lr = len(case["x"]), case["batch"], case["steps"], case["lr"]

    def replays(what, **change):
        """A diagnosis: ``what`` when the replay with ``change`` is the learner's params."""
        def diagnose():
            flags = {k: change.pop(k) for k in ("same_order", "ceil_epoch") if k in change}
            got = params_vector(replay_train(key, {**case, **change}, **flags))
            return what if relative_error(yours, got) < REPLAY_RTOL else None
        return diagnose

    expect_replay("train_classifier", yours, params_vector(ref), [
        replays("every epoch used the same order: each epoch's shuffle takes a key split off "
                "once for it", same_order=True),
        replays(f"your epochs are ceil(n / batch) = {-(-n // batch)} steps, the last taking "
                f"the {n % batch} leftover rows (n={n}, batch={batch}): an epoch is n // batch "
                f"= {n // batch} full steps; the leftover rows wait for the next shuffle",
                ceil_epoch=True),
        replays(f"your training made {steps - 1} updates for steps={steps}: one short",
                steps=steps - 1),
        replays(f"your update is lr / batch (lr={lr:.4g}, batch={batch}) times the gradient: "
                "the loss is already a mean over the batch's rows", lr=lr / batch)],
        "your training is none of the classic slips the checker replays: the key splits, "
        "each epoch's order and its consecutive slices, and the update are the "
        "docstring's, step for step")


@checker.check(3)
def train_leaves_global_random_state_alone(impl, ctx):
    require_written(impl, "train_classifier")
    case = classifier_case(ctx)
    check_global_state(impl, lambda: learner_train(impl, case), ctx, "train_classifier")


WORKLOAD_SIZES = {"n_train": 512, "n_test": 301, "steps": 48}
WORKLOAD_FIELDS = ("params", "test_accuracy", "train_accuracy")


def workload_seed(ctx) -> int:
    return int(ctx.rng("workload-seed").integers(0, 2**31 - 1))


def workload_kwargs(ctx) -> dict:
    """The sizes, and a batch (odd) and learning rate drawn per run, never the defaults
    (64, 0.3), so a workload that ignores either fails the replay."""
    rng = ctx.rng("workload-kwargs")
    return {**WORKLOAD_SIZES, "batch": int(rng.integers(56, 68)) | 1,
            "lr": float(rng.uniform(0.24, 0.28))}  # not the default 0.3


def learner_workload(impl, ctx, seed: int | None = None) -> dict:
    fn = get_function(impl, "reference_workload")
    kwargs = workload_kwargs(ctx)
    with on_input(f"seed {workload_seed(ctx) if seed is None else seed} and {kwargs}"):
        out = fn(workload_seed(ctx) if seed is None else seed, **kwargs)
    fail_unless(isinstance(out, dict) and set(WORKLOAD_FIELDS) == set(out),
                "reference_workload must return a dict with exactly params, "
                "train_accuracy and test_accuracy",
                yours=sorted(out) if isinstance(out, dict) else out,
                expected=list(WORKLOAD_FIELDS))
    return out


def workload_run(impl, ctx) -> dict:
    """The learner's workload for this run's seed, under two global seeds (shared by the
    stage's checks)."""
    return ctx.once("workload", lambda: check_global_state(
        impl, lambda: learner_workload(impl, ctx), ctx, "reference_workload"))


def workload_data(ctx):
    k_data, k_train = jax.random.split(jax.random.key(workload_seed(ctx)))
    n_train, n_test = WORKLOAD_SIZES["n_train"], WORKLOAD_SIZES["n_test"]
    x, y = classifier.make_dataset(k_data, n_train + n_test)
    return k_train, x, y


def workload_case(ctx) -> dict:
    _, x, y = workload_data(ctx)
    n_train, kwargs = WORKLOAD_SIZES["n_train"], workload_kwargs(ctx)
    return {"x": np.asarray(x[:n_train]), "y": np.asarray(y[:n_train]),
            "classes": classifier.CLASSES, "steps": kwargs["steps"],
            "batch": kwargs["batch"], "lr": kwargs["lr"]}


def workload_replay(ctx) -> dict:
    """The checker's own training of the workload (once per run)."""
    return ctx.once("workload-replay",
                    lambda: replay_train(workload_data(ctx)[0], workload_case(ctx)))


@checker.check(3)
def workload_rerun_in_fresh_process_is_bitwise_equal(impl, ctx):
    seed = workload_seed(ctx)
    here = workload_run(impl, ctx)
    other = learner_workload(impl, ctx, seed + 1)
    fail_unless(bool(bitwise_differences(flatten(here["params"]), flatten(other["params"]))),
                "another seed gave bitwise the same workload",
                yours="identical params for seeds s and s+1", expected="different params",
                hint="build every key from jax.random.key(seed), never a fixed key")
    check_fresh_process(ctx, "reference_workload", here, seed, **workload_kwargs(ctx))


@checker.check(3)
def workload_params_follow_replay(impl, ctx):
    """The params are what training on the first n_train rows with k_train gives: the
    replay's, or, where the learner's own train_classifier differs from the replay
    (train_follows_key_protocol names that), its own on those rows: one mistake in
    train_classifier is one FAIL, not two."""
    out = workload_run(impl, ctx)
    k_train, x, y = workload_data(ctx)
    n_train, case = WORKLOAD_SIZES["n_train"], workload_case(ctx)
    ref = workload_replay(ctx)
    yours = params_vector(classifier_params(out["params"], ref,
                                            "reference_workload(...)['params']"))
    if relative_error(yours, params_vector(ref)) >= REPLAY_RTOL:
        own = get_function(impl, "train_classifier")(
            k_train, jnp.asarray(case["x"]), jnp.asarray(case["y"]),
            **{k: case[k] for k in ("classes", "steps", "batch", "lr")})
        if relative_error(yours, params_vector(classifier_params(
                own, ref, "train_classifier(...)"))) < REPLAY_RTOL:
            return  # the workload trains as asked; its train_classifier is judged apart

    def test_rows():
        rows = {**case, "x": np.asarray(x[n_train:]), "y": np.asarray(y[n_train:])}
        if relative_error(yours, params_vector(replay_train(k_train, rows))) < REPLAY_RTOL:
            return "you trained on the test rows: train on x[:n_train], test on the rest"

    expect_replay("reference_workload's params", yours, params_vector(ref), [test_rows],
                  "every key comes from the seed as the docstring states; the params are "
                  "train_classifier's on the first n_train rows, with the steps, batch and "
                  "lr you were given")


@checker.check(3)
def workload_accuracy_vs_reference(impl, ctx):
    out = workload_run(impl, ctx)
    k_train, x, y = workload_data(ctx)
    n_train = WORKLOAD_SIZES["n_train"]
    like = {k: np.asarray(v) for k, v in classifier.init_params(k_train).items()}
    params = classifier_params(out["params"], like, "reference_workload(...)['params']")
    params = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    rows = {"train_accuracy": (x[:n_train], y[:n_train], "the first n_train rows"),
            "test_accuracy": (x[n_train:], y[n_train:], "rows n_train: (not trained on)")}
    measured = {}
    for field, (xs, ys, where) in rows.items():
        measured[field] = float(classifier.accuracy(params, xs, ys))
        reported = out[field]
        fail_unless(type(reported) is float, f"{field} must be a plain Python float",
                    yours=type(reported).__name__, expected="float",
                    hint="a plain Python float, not a jax or numpy scalar")
        reported = as_float(reported, field)
        fail_unless(abs(reported - measured[field]) < 1e-6,
                    f"{field} is not the accuracy of your params on {where}",
                    yours=reported, expected=measured[field],
                    hint=f"evaluate your trained params on {where}; return a float")
    ref = {k: jnp.asarray(v, jnp.float32) for k, v in workload_replay(ctx).items()}
    ref_accuracy = float(classifier.accuracy(ref, x[n_train:], y[n_train:]))
    # The data are not trivially separable (classifier.LABEL_NOISE, overlapping clusters),
    # so too little training shows here: name where an untrained model stands.
    untrained = classifier.init_params(jax.random.split(k_train)[0])
    untrained_accuracy = float(classifier.accuracy(untrained, x[n_train:], y[n_train:]))
    test = measured["test_accuracy"]
    fail_unless(test >= ref_accuracy - ACCURACY_MARGIN,
                f"test accuracy {test:.3f} trails the checker's own training "
                f"({ref_accuracy:.3f}) by more than {ACCURACY_MARGIN} (untrained params "
                f"score {untrained_accuracy:.3f})",
                yours=test, expected=f">= {ref_accuracy - ACCURACY_MARGIN:.3f}",
                hint="train on the first n_train rows with k_train from the seed's split, "
                     "for all the steps you were given")


# stages 2 and 3 refuse a file that loads a sealed replay (coursekit.checking.forbidden)
guard(checker)

if __name__ == "__main__":
    sys.exit(checker.main())

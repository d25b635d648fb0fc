"""foundations stage 2: a regression fit. ``regression_grads`` against float64 central
finite differences of the checker's own loss (and written without autodiff: read from
the file's text and counted where it runs); ``fit_regression`` against the checker's
replay of the documented key protocol, called several times in one process, under two
global seeds and again in a fresh learner process."""

from __future__ import annotations

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from foundations_harness import (
    GRAD_RTOL,
    REPLAY_RTOL,
    case_rng,
    check_fresh_process,
    check_global_state,
    checker,
    expect_replay,
    largest_differences,
    linear_params,
    relative_error,
    replay,
)

from coursekit.checking import bridge, forbidden
from coursekit.checking.learner import (
    get_function,
    on_input,
)
from coursekit.checking.values import fail_unless

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
                             (n / d, f"n / d = {n}/{d} times: divided by the number of "
                                     "features (d), where the mean is over the number of "
                                     "rows (n)"),
                             (n / (n - 1) if n > 1 else math.nan,
                              f"n / (n - 1) = {n}/{n - 1} times: the loss is a mean over the "
                              f"n = {n} rows, a divisor of n, not n - 1 (the sample "
                              "variance's)"),
                             (-0.5, "the sign and half: the residual is prediction minus "
                                    "target, and the square brings a factor 2"),
                             (1 / d, f"1/d = 1/{d} times: divided by n x d, every element of "
                                     "x, where the mean is over the n rows alone")):
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



def replay_fit(key, x, y, steps, batch, lr, reuse_key: bool = False,
               maxval: int | None = None, one_draw: bool = False) -> dict:
    """The checker's own SGD with the documented key protocol, float64 steps with
    autodiff's gradient (which regression_grads may not use): a sealed program (its
    source stays with the instructors; it would be fit_regression), or in a learner's
    copy its stored output for the public inputs. ``reuse_key``, ``maxval`` (rows drawn
    from [0, maxval), not [0, n)) and ``one_draw`` (every step's rows in one randint of
    shape (steps, batch) from the unsplit stream key) replay classic mistakes, for
    diagnosis."""
    params = replay("fit_replay", jax.random.key_data(key),
                    np.asarray(x, np.float32), np.asarray(y, np.float32),
                    np.int32(steps), np.float64(lr), np.bool_(reuse_key),
                    np.zeros(batch, np.int8),
                    np.int32(len(x) if maxval is None else maxval), np.bool_(one_draw),
                    np.zeros(steps if one_draw else 1, np.int8), x64=True)
    return {"w": np.asarray(params["w"], np.float64), "b": np.float64(params["b"])}


def standardised(x: np.ndarray) -> np.ndarray:
    """``x`` with each column's mean subtracted and divided by its standard deviation, in
    float32 (a fit that preprocesses its features does this)."""
    x = np.asarray(x, np.float32)
    return (x - x.mean(axis=0)) / x.std(axis=0)


def fit_case(ctx, salt: str = "fit-data") -> dict:
    rng = case_rng(ctx, salt)
    n, d = int(rng.integers(150, 260)) | 1, int(rng.integers(2, 6)) * 2 + 1
    return fit_data(rng, n, d) | {
        "key_seed": int(rng.integers(0, 2**31 - 1)), "steps": int(rng.integers(50, 70)),
        "batch": int(rng.integers(8, 24)) | 1,
        "lr": float(rng.uniform(0.03, 0.045))}  # not the default 0.05


def fit_data(rng, n: int, d: int) -> dict:
    x = rng.standard_normal((n, d)).astype(np.float32)
    w_true = rng.standard_normal(d)
    y = (x @ w_true + 0.3 + 0.2 * rng.standard_normal(n)).astype(np.float32)
    return {"x": x, "y": y}


def fit_call(case: dict, key_seed: int | None = None) -> tuple[tuple, dict]:
    key = jax.random.key(case["key_seed"] if key_seed is None else key_seed)
    return ((key, jnp.asarray(case["x"]), jnp.asarray(case["y"])),
            {k: case[k] for k in ("steps", "batch", "lr")})


def fit_inputs(case: dict) -> str:
    n, d = case["x"].shape
    return (f"a typed key, x float32 ({n}, {d}), y ({n},), steps={case['steps']}, "
            f"batch={case['batch']}, lr={case['lr']:.4g}")


def learner_fit(impl, case: dict, key_seed: int | None = None):
    args, kwargs = fit_call(case, key_seed)
    with on_input(fit_inputs(case)):
        return get_function(impl, "fit_regression")(*args, **kwargs)


def fit_vector(params: dict) -> np.ndarray:
    return np.concatenate([np.ravel(params["w"]), [params["b"]]])


def full_batch_descent(case: dict) -> np.ndarray:
    """Gradient descent on every row at once, float64 (the gradient by the checker's
    central differences of its own loss), from the documented start
    (``init_linear`` of the key's first half: given code): what a fit whose batch of n
    rows holds each row exactly once returns."""
    key = jax.random.split(jax.random.key(case["key_seed"]))[0]
    x, y = case["x"].astype(np.float64), case["y"].astype(np.float64)
    d = x.shape[1]
    w = np.asarray(jax.random.normal(key, (d,), jnp.float32), np.float64) / np.sqrt(d)
    b = 0.0
    for _ in range(case["steps"]):  # the checker's own finite differences: exact enough here
        grads = finite_difference_grads(w, b, x, y)
        w, b = w - case["lr"] * grads["w"], b - case["lr"] * float(grads["b"])
    return np.concatenate([w, [b]])


def check_fit(impl, case: dict, yours: np.ndarray, what: str, before=(),
              after=()) -> None:
    """``yours`` (a fit of ``case``) against the replay; on a difference, the first
    diagnosis that explains it (``before`` first, ``after`` last), else what the values
    show."""
    n, d = case["x"].shape
    steps, batch, lr = case["steps"], case["batch"], case["lr"]
    key = jax.random.key(case["key_seed"])
    ref = replay_fit(key, case["x"], case["y"], steps, batch, lr)

    def replays(hint, **change):
        """A diagnosis: ``hint`` when the replay with ``change`` is the learner's fit."""
        def diagnose():
            changed = {"x": case["x"], "steps": steps, "batch": batch, "lr": lr, **change}
            got = replay_fit(key, changed.pop("x"), case["y"], changed.pop("steps"),
                             changed.pop("batch"), changed.pop("lr"), **changed)
            return hint if relative_error(yours, fit_vector(got)) < REPLAY_RTOL else None
        return diagnose

    # With more draws than rows, a fit that draws only n rows a step (the batch capped at
    # the data) is the replay with batch n.
    capped = [replays(f"called with batch={batch} and n={n} rows, your fit is the replay "
                      f"that draws n = {n} row indices a step, not batch = {batch}: a batch "
                      "is its count of draws, each uniform over [0, n) with replacement, "
                      "so a batch larger than n repeats rows", batch=n)] if batch > n else []

    def ignores_key():
        other = linear_params(learner_fit(impl, case, case["key_seed"] + 1), d, what)
        if np.array_equal(fit_vector(other), yours):
            return "your fit ignores its key: another key gave the same parameters"

    def without_replacement():
        """With batch = n, rows drawn with replacement repeat some rows and miss others;
        drawn without, every row once: the full-batch descent, computed here."""
        whole = {**case, "batch": n}
        got = fit_vector(linear_params(learner_fit(impl, whole), d, what))
        if relative_error(got, full_batch_descent(whole)) < REPLAY_RTOL / 10:
            return (f"your rows are drawn without replacement: called with batch = n = {n}, "
                    "your fit is plain gradient descent on every row once per step (within "
                    f"{REPLAY_RTOL / 10:g}); randint's rows are drawn with replacement, "
                    "each of the batch's draws uniform over all n rows")

    bound = ("randint's maxval is exclusive: rows are drawn from [0, n) with maxval n = "
             f"{n}, every row a candidate")
    expect_replay(what, yours, fit_vector(ref), [
        *before, *capped,
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
        replays(f"your fit drew every step's rows at once, one randint of shape "
                f"(steps, batch) = ({steps}, {batch}) from the stream key: the protocol "
                "splits the stream key every step, carries one half and draws that step's "
                "rows with the other", one_draw=True),
        replays(f"your fit made {steps - 1} updates for steps={steps}: one short",
                steps=steps - 1),
        replays(f"your fit moves by lr / batch (lr={lr:.4g}, batch={batch}) times the "
                "gradient: regression_grads already averages over the batch's rows",
                lr=lr / batch),
        replays("your fit is the replay on x standardised column by column (each "
                "feature's mean subtracted, then divided by its standard deviation): the "
                "protocol steps on the rows of x as given, and its params are for the raw "
                "features", x=standardised(case["x"])),
        without_replacement, ignores_key, *after],
        largest_differences({"w": yours[:-1], "b": yours[-1]},
                            {"w": fit_vector(ref)[:-1], "b": fit_vector(ref)[-1]},
                            fit_inputs(case)) +
        "No slip the checker replays (a reused key, rows from the wrong range or without "
        "replacement, every step's rows in one draw, a step short, lr / batch, standardised "
        "features) gives "
        "yours: compare your key splits, the rows each step draws and the update with the "
        "docstring, step by step")


@checker.check(2)
def fit_follows_key_protocol(impl, ctx):
    case = fit_case(ctx)
    d = case["x"].shape[1]
    yours = fit_vector(linear_params(learner_fit(impl, case), d, "fit_regression(...)"))
    check_fit(impl, case, yours, "fit_regression")


def later_fit_cases(ctx, first: dict) -> list[tuple[str, dict]]:
    """Calls after ``first`` in one process: new data of its shape (same batch, lr and
    steps: all a cache might key on), another shape with fewer rows than the batch (the
    contract's batch is any count of draws with replacement), and its shape and batch
    with another lr."""
    rng = case_rng(ctx, "fit-again")
    n, d = first["x"].shape
    # 5 to about half the batch (>= 9) rows, odd, of 2 features: more rows than the 3
    # params, so the noisy rows are never fitted exactly and which rows each step drew
    # still shows at the end (a fit capped at n draws is >= 1e-3 off, 300 seeds measured;
    # with more features than rows both fits converge to one interpolant, 1e-10 apart)
    few = int(rng.integers(5, first["batch"] // 2 + 2)) | 1
    seed = lambda: int(rng.integers(0, 2**31 - 1))  # noqa: E731
    return [("new data of the first call's shape, batch and lr",
             {**first, **fit_data(rng, n, d), "key_seed": seed()}),
            (f"another shape, {few} rows for batch={first['batch']}",
             {**first, **fit_data(rng, few, 2), "key_seed": seed()}),
            # a larger lr (0.15: every batch's step still contracts, at most 2 x 0.15 x
            # 4.4, the largest eigenvalue of 9 rows of 11 features): by the last step the
            # iterates have settled and bounce around the fit, so the params after the
            # last update are not those of the lowest loss met on the way
            ("the first call's data shape and batch, another lr (0.15)",
             {**first, **fit_data(rng, n, d), "key_seed": seed(), "lr": 0.15})]


@checker.check(2)
def fit_repeated_calls_match_replay(impl, ctx):
    """fit_regression called four times in one process (issue 53): each result is the
    replay of its own inputs, as a fresh process's would be."""
    first = fit_case(ctx)
    d = first["x"].shape[1]
    what = "fit_regression(...)"
    check_fit(impl, first, fit_vector(linear_params(learner_fit(impl, first), d, what)),
              "fit_regression (first call)")
    for k, (label, case) in enumerate(later_fit_cases(ctx, first), start=2):
        yours = fit_vector(linear_params(learner_fit(impl, case), case["x"].shape[1], what))
        check_later_fit(impl, first, k, label, case, yours)


def check_later_fit(impl, first: dict, k: int, label: str, case: dict,
                    yours: np.ndarray) -> None:
    """Call ``k`` (``label``: what is new in ``case``) after ``first`` matched: its own
    replay, with what carried state shows diagnosed first and last (foundations_expected
    calls this directly, so every later call's diagnoses are stored)."""
    def carried():
        if case["x"].shape != first["x"].shape:
            return None
        got = replay_fit(jax.random.key(case["key_seed"]), first["x"], first["y"],
                         case["steps"], case["batch"], case["lr"])
        if relative_error(yours, fit_vector(got)) < REPLAY_RTOL:
            return (f"call {k} ({label}) returned what the first call's x and y give: "
                    "state carried from an earlier call (a step kept across calls "
                    "that closes over the first call's arrays) decided it")

    def earlier():
        return (f"the first call matched the replay and call {k} in the same process "
                f"({label}) does not: the result depends on the call's place in the "
                "process or on these inputs; state carried from an earlier call (a "
                "cache or a compiled step keyed on too little) shows this way")
    check_fit(impl, case, yours, f"fit_regression (call {k}: {label})",
              before=(carried,), after=(earlier,))


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


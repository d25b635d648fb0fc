"""Checks for foundations.

    python projects/foundations/tests/check.py --stage 1|2|3|all --impl PATH [--json F]

Every check computes its own reference: float64 numpy for the loss and for central
finite differences of the gradient, its own replay of the key protocol for the fits,
its own training for the classifier's accuracy. Inputs come from a seed the learner does
not see, with odd shapes. Reproducibility is checked bitwise, in this process and in a
fresh one (another hash seed, other global RNG seeds), and global random state must be
neither read nor changed.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the course root

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.checking.contract import Checker, CheckFailed
from coursekit.checking.learner import get_function
from coursekit.checking.values import as_float64_array, fail_unless
from coursekit.workloads import classifier
from coursekit.workloads.fresh import (
    FreshProcessError,
    bitwise_differences,
    call_in_fresh_process,
    flatten,
)

checker = Checker("foundations", {
    1: "the edit-check loop", 2: "a regression fit", 3: "a reproducible classifier"})

GRAD_RTOL = 1e-3       # float32 analytic gradient vs float64 finite differences
REPLAY_RTOL = 1e-3     # learner's fit vs the checker's replay (float32, other op order)
ACCURACY_MARGIN = 0.05  # test accuracy may trail the checker's own training by this much


def relative_error(yours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(yours - ref) / max(np.linalg.norm(ref), 1e-12))


def linear_params(value, d: int, what: str) -> dict:
    fail_unless(isinstance(value, dict) and set(value) >= {"w", "b"},
                f"{what} must be a dict with keys 'w' and 'b'",
                yours=type(value).__name__ if not isinstance(value, dict) else sorted(value),
                expected="{'w': (d,), 'b': ()}")
    return {"w": as_float64_array(value["w"], f"{what}['w']", (d,)),
            "b": as_float64_array(value["b"], f"{what}['b']", ())}


# ---------------------------------------------------------------------------------------
# Global random state: neither read nor changed
# ---------------------------------------------------------------------------------------

def global_states() -> tuple:
    state = np.random.get_state()
    return (state[0], state[1].tobytes(), *state[2:]), random.getstate()


def call_with_global_seed(fn, seed: int):
    """Call ``fn()`` with numpy's and Python's global RNGs seeded to ``seed``; returns
    (output, whether either global state changed)."""
    np.random.seed(seed)
    random.seed(seed)
    before = global_states()
    out = fn()
    return out, global_states() != before


def check_global_state(fn, ctx, what: str) -> dict:
    """Run ``fn`` under two different global seeds: the global generators must be left
    untouched and the output bitwise the same. Returns the flattened output."""
    seeds = [int(s) for s in ctx.rng("global-seeds").integers(0, 2**31 - 1, 2)]
    first, touched_first = call_with_global_seed(fn, seeds[0])
    second, touched_second = call_with_global_seed(fn, seeds[1])
    np.random.seed(None)
    random.seed()
    fail_unless(not (touched_first or touched_second),
                f"{what} used numpy's or Python's global random generator",
                yours="np.random / random state changed during the call",
                expected="global state untouched",
                hint="draw everything from the jax key you were given (jax.random.split, "
                     "jax.random.permutation); np.random.* and random.* are global state")
    a, b = flatten(first), flatten(second)
    diffs = bitwise_differences(a, b)
    fail_unless(not diffs, f"{what} gave different results for the same key when "
                "numpy's global seed changed", yours=diffs[:3], expected="bitwise equal",
                hint="something besides the key decides the result: global RNG, the "
                     "clock, or a fresh unseeded generator")
    return a


def check_fresh_process(impl, ctx, function: str, in_process: dict, **call) -> None:
    """Run ``impl.function`` again in a fresh interpreter and compare bitwise."""
    global_seed = int(ctx.rng("fresh-global-seed").integers(1, 2**31 - 1))
    try:
        fresh = call_in_fresh_process(ctx.impl_path, function, workdir=ctx.subdir("fresh"),
                                      global_seed=global_seed, **call)
    except FreshProcessError as err:
        raise CheckFailed(str(err), hint="the function must run on its own, from the "
                          "arguments alone, in a new process") from None
    diffs = bitwise_differences(in_process, fresh)
    fail_unless(not diffs, f"{function} gave different arrays in a fresh process",
                yours=diffs[:3], expected="bitwise the same arrays",
                hint="a result may depend only on the key and the inputs: no global "
                     "random state, no hash() of strings, no clock")


# ---------------------------------------------------------------------------------------
# Stage 1: mse
# ---------------------------------------------------------------------------------------

def mse_cases(ctx) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = ctx.rng("mse-shapes")
    shapes = [(int(rng.integers(3, 40)) | 1,),
              (int(rng.integers(2, 12)) | 1, int(rng.integers(2, 12)) * 2 + 1),
              (1,), (3, 1, int(rng.integers(2, 6)) * 2 + 1)]
    cases = []
    for shape in shapes:
        pred = rng.standard_normal(shape).astype(np.float32) * float(rng.uniform(0.5, 3))
        target = rng.standard_normal(shape).astype(np.float32)
        cases.append((pred, target))
    return cases


@checker.check(1, "mse_matches_float64_reference")
def _(impl, ctx):
    mse = get_function(impl, "mse")
    for pred, target in mse_cases(ctx):
        ref = float(np.mean((pred.astype(np.float64) - target.astype(np.float64)) ** 2))
        yours = as_float64_array(mse(jnp.asarray(pred), jnp.asarray(target)), "mse(...)", ())
        fail_unless(np.isclose(float(yours), ref, rtol=1e-5, atol=1e-7),
                    f"mse is wrong for inputs of shape {pred.shape}",
                    yours=float(yours), expected=ref,
                    hint="mean over every element of the squared difference "
                         "(not the sum, not the square root)")


@checker.check(1, "mse_works_under_jit")
def _(impl, ctx):
    mse = get_function(impl, "mse")
    pred, target = mse_cases(ctx)[1]
    eager = as_float64_array(mse(jnp.asarray(pred), jnp.asarray(target)), "mse(...)", ())
    jitted = as_float64_array(jax.jit(mse)(jnp.asarray(pred), jnp.asarray(target)),
                      "jax.jit(mse)(...)", ())
    fail_unless(np.isclose(float(eager), float(jitted), rtol=1e-6),
                "jax.jit(mse) disagrees with mse", yours=float(jitted),
                expected=float(eager), hint="use jnp operations only, no float() inside")


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


@checker.check(2, "gradients_match_float64_finite_differences")
def _(impl, ctx):
    grads_fn = get_function(impl, "regression_grads")
    rng = ctx.rng("grad-data")
    for _case in range(2):
        n, d = int(rng.integers(20, 90)) | 1, int(rng.integers(2, 9)) * 2 + 1
        x = rng.standard_normal((n, d)).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        w = rng.standard_normal(d).astype(np.float32)
        b = np.float32(rng.standard_normal())
        ref = finite_difference_grads(w.astype(np.float64), float(b), x.astype(np.float64),
                                      y.astype(np.float64))
        out = grads_fn({"w": jnp.asarray(w), "b": jnp.asarray(b)}, jnp.asarray(x),
                       jnp.asarray(y))
        yours = linear_params(out, d, "regression_grads(...)")
        for name in ("w", "b"):
            err = relative_error(yours[name], np.asarray(ref[name]))
            fail_unless(err < GRAD_RTOL,
                        f"gradient for '{name}' is off by relative error {err:.3g} "
                        f"(tolerance {GRAD_RTOL:g}) against float64 finite differences "
                        f"(n={n}, d={d})",
                        yours=yours[name], expected=np.asarray(ref[name]),
                        hint="d/dw mean((x@w+b-y)^2) = 2/n x^T (x@w+b-y); check the sign "
                             "(prediction minus target), the factor 2 and the 1/n")


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


def replay_fit(key, x, y, steps, batch, lr, reuse_key: bool = False) -> dict:
    """The checker's own SGD with the documented key protocol (float64 gradients,
    float32 parameters). ``reuse_key`` replays the classic mistake, for diagnosis."""
    x64, y64 = np.asarray(x, np.float64), np.asarray(y, np.float64)
    n, d = x64.shape
    k_init, k_batches = jax.random.split(key)
    w = np.asarray(jax.random.normal(k_init, (d,), jnp.float32) / jnp.sqrt(d), np.float64)
    b = 0.0
    k_step = None
    for _ in range(steps):
        if not (reuse_key and k_step is not None):
            k_batches, k_step = jax.random.split(k_batches)
        rows = np.asarray(jax.random.randint(k_step, (batch,), 0, n))
        residual = x64[rows] @ w + b - y64[rows]
        w = w - lr * 2.0 * x64[rows].T @ residual / batch
        b = b - lr * 2.0 * residual.mean()
    return {"w": w, "b": np.float64(b)}


def fit_case(ctx) -> dict:
    rng = ctx.rng("fit-data")
    n, d = int(rng.integers(150, 260)) | 1, int(rng.integers(2, 6)) * 2 + 1
    x = rng.standard_normal((n, d)).astype(np.float32)
    w_true = rng.standard_normal(d)
    y = (x @ w_true + 0.3 + 0.2 * rng.standard_normal(n)).astype(np.float32)
    return {"x": x, "y": y, "key_seed": int(rng.integers(0, 2**31 - 1)), "steps": 60,
            "batch": int(rng.integers(8, 24)) | 1, "lr": 0.05}


def learner_fit(impl, case: dict, key_seed: int | None = None):
    fit = get_function(impl, "fit_regression")
    key = jax.random.key(case["key_seed"] if key_seed is None else key_seed)
    return fit(key, jnp.asarray(case["x"]), jnp.asarray(case["y"]), steps=case["steps"],
               batch=case["batch"], lr=case["lr"])


@checker.check(2, "fit_follows_key_protocol")
def _(impl, ctx):
    case = fit_case(ctx)
    d = case["x"].shape[1]
    vec = lambda p: np.concatenate([p["w"], [p["b"]]])  # noqa: E731
    yours = vec(linear_params(learner_fit(impl, case), d, "fit_regression(...)"))
    key = jax.random.key(case["key_seed"])
    args = (case["x"], case["y"], case["steps"], case["batch"], case["lr"])

    def reused_key():
        if relative_error(yours, vec(replay_fit(key, *args, reuse_key=True))) < REPLAY_RTOL:
            return ("you reused one key for every step, so every step drew the same rows: "
                    "split k_batches each step and use the new subkey once")

    def ignores_key():
        other = linear_params(learner_fit(impl, case, case["key_seed"] + 1), d,
                              "fit_regression(...)")
        if np.array_equal(vec(other), yours):
            return "your fit ignores its key: another key gave the same parameters"

    expect_replay("fit_regression", yours, vec(replay_fit(key, *args)),
                  [reused_key, ignores_key],
                  "follow the key protocol in the docstring exactly (split order, one "
                  "randint per step) and check regression_grads first")


@checker.check(2, "fit_leaves_global_random_state_alone")
def _(impl, ctx):
    case = fit_case(ctx)
    fit = check_global_state(lambda: learner_fit(impl, case), ctx, "fit_regression")
    ctx.once("fit", lambda: fit)  # saves the fresh-process check a fit


@checker.check(2, "fit_rerun_in_fresh_process_is_bitwise_equal")
def _(impl, ctx):
    case = fit_case(ctx)
    here = ctx.once("fit", lambda: flatten(learner_fit(impl, case)))
    check_fresh_process(impl, ctx, "fit_regression", here,
                        arrays={"x": case["x"], "y": case["y"]},
                        keys={"key": case["key_seed"]},
                        kwargs={k: case[k] for k in ("steps", "batch", "lr")})


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
            "key_seed": key_seed + 1, "steps": 40, "batch": int(rng.integers(12, 20)) | 1,
            "lr": 0.3}


def replay_train(key, case: dict, same_order: bool = False) -> dict:
    """The checker's own epoch-shuffled SGD with the documented key protocol."""
    x, y = jnp.asarray(case["x"]), jnp.asarray(case["y"])
    n, batch, lr = x.shape[0], case["batch"], case["lr"]
    k_init, k_order = jax.random.split(key)
    params = classifier.init_params(k_init, features=x.shape[1], classes=case["classes"])
    update = jax.jit(lambda p, rows: jax.tree.map(
        lambda v, g: v - lr * g, p, jax.grad(classifier.loss)(p, x[rows], y[rows])))
    per_epoch = n // batch
    order = None
    for i in range(case["steps"]):
        j = i % per_epoch
        if j == 0 and (order is None or not same_order):
            k_order, k_epoch = jax.random.split(k_order)
            order = np.asarray(jax.random.permutation(k_epoch, n))
        params = update(params, order[j * batch:(j + 1) * batch])
    return {k: np.asarray(v, np.float64) for k, v in params.items()}


def learner_train(impl, case: dict, key_seed: int | None = None):
    train = get_function(impl, "train_classifier")
    key = jax.random.key(case["key_seed"] if key_seed is None else key_seed)
    return train(key, jnp.asarray(case["x"]), jnp.asarray(case["y"]),
                 classes=case["classes"], steps=case["steps"], batch=case["batch"],
                 lr=case["lr"])


def classifier_params(value, like: dict, what: str) -> dict:
    fail_unless(isinstance(value, dict) and set(value) == set(like),
                f"{what} must return the params dict of classifier.init_params",
                yours=sorted(value) if isinstance(value, dict) else type(value).__name__,
                expected=sorted(like))
    return {k: as_float64_array(value[k], f"{what}[{k!r}]", like[k].shape) for k in like}


def params_vector(params: dict) -> np.ndarray:
    return np.concatenate([np.ravel(params[k]) for k in sorted(params)])


@checker.check(3, "train_follows_key_protocol")
def _(impl, ctx):
    case = classifier_case(ctx)
    key = jax.random.key(case["key_seed"])
    ref = replay_train(key, case)
    yours = params_vector(classifier_params(learner_train(impl, case), ref,
                                            "train_classifier(...)"))

    def same_order():
        same = params_vector(replay_train(key, case, same_order=True))
        if relative_error(yours, same) < REPLAY_RTOL:
            return ("every epoch used the same order: split k_order at each epoch and "
                    "shuffle with the new k_epoch")

    expect_replay("train_classifier", yours, params_vector(ref), [same_order],
                  "follow the key protocol in the docstring (split order; one permutation "
                  "per epoch; consecutive slices of it) and the update p - lr * grad")


@checker.check(3, "train_leaves_global_random_state_alone")
def _(impl, ctx):
    case = classifier_case(ctx)
    check_global_state(lambda: learner_train(impl, case), ctx, "train_classifier")


WORKLOAD_SIZES = {"n_train": 512, "n_test": 301, "steps": 48}


def workload_seed(ctx) -> int:
    return int(ctx.rng("workload-seed").integers(0, 2**31 - 1))


def learner_workload(impl, ctx, seed: int | None = None) -> dict:
    fn = get_function(impl, "reference_workload")
    out = fn(workload_seed(ctx) if seed is None else seed, **WORKLOAD_SIZES)
    fail_unless(isinstance(out, dict) and {"params", "train_accuracy",
                                           "test_accuracy"} <= set(out),
                "reference_workload must return a dict with params, train_accuracy and "
                "test_accuracy", yours=sorted(out) if isinstance(out, dict) else out,
                expected=["params", "test_accuracy", "train_accuracy"])
    return out


@checker.check(3, "workload_rerun_in_fresh_process_is_bitwise_equal")
def _(impl, ctx):
    seed = workload_seed(ctx)
    outputs = []
    here = check_global_state(lambda: outputs.append(learner_workload(impl, ctx, seed))
                              or outputs[-1], ctx, "reference_workload")
    ctx.once("workload", lambda: outputs[0])  # saves the accuracy check a run
    other = flatten(learner_workload(impl, ctx, seed + 1))
    fail_unless(bool(bitwise_differences(here, other)),
                "another seed gave bitwise the same workload",
                yours="identical params for seeds s and s+1", expected="different params",
                hint="build every key from jax.random.key(seed), never a fixed key")
    check_fresh_process(impl, ctx, "reference_workload", here, keys={},
                        kwargs={"seed": seed, **WORKLOAD_SIZES})


@checker.check(3, "workload_accuracy_vs_reference")
def _(impl, ctx):
    seed = workload_seed(ctx)
    out = ctx.once("workload", lambda: learner_workload(impl, ctx, seed))
    n_train, n_test = WORKLOAD_SIZES["n_train"], WORKLOAD_SIZES["n_test"]
    k_data, k_train = jax.random.split(jax.random.key(seed))
    x, y = classifier.make_dataset(k_data, n_train + n_test)
    like = {k: np.asarray(v) for k, v in classifier.init_params(k_train).items()}
    params = classifier_params(out["params"], like, "reference_workload(...)['params']")
    params = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    measured = float(classifier.accuracy(params, x[n_train:], y[n_train:]))
    reported = out["test_accuracy"]
    fail_unless(isinstance(reported, float) and abs(reported - measured) < 1e-6,
                "test_accuracy is not the accuracy of your params on the test rows",
                yours=reported, expected=measured,
                hint="evaluate on rows n_train: (the rows not trained on); return a float")
    case = {"x": np.asarray(x[:n_train]), "y": np.asarray(y[:n_train]),
            "classes": classifier.CLASSES, "steps": WORKLOAD_SIZES["steps"], "batch": 64,
            "lr": 0.3}
    ref = {k: jnp.asarray(v, jnp.float32) for k, v in replay_train(k_train, case).items()}
    ref_accuracy = float(classifier.accuracy(ref, x[n_train:], y[n_train:]))
    # The data are not trivially separable (classifier.LABEL_NOISE, overlapping clusters),
    # so too little training shows here: name where an untrained model stands.
    untrained = classifier.init_params(jax.random.split(k_train)[0])
    untrained_accuracy = float(classifier.accuracy(untrained, x[n_train:], y[n_train:]))
    fail_unless(measured >= ref_accuracy - ACCURACY_MARGIN,
                f"test accuracy {measured:.3f} trails the checker's own training "
                f"({ref_accuracy:.3f}) by more than {ACCURACY_MARGIN} (untrained params "
                f"score {untrained_accuracy:.3f})",
                yours=measured, expected=f">= {ref_accuracy - ACCURACY_MARGIN:.3f}",
                hint="train on the first n_train rows with k_train from the seed's split, "
                     "for all the steps you were given")


if __name__ == "__main__":
    sys.exit(checker.main())

"""foundations stage 3: a reproducible classifier. ``train_classifier`` against the
checker's replay of the epoch-shuffled key protocol; ``reference_workload``'s params,
accuracies and reproducibility (two global seeds, a fresh learner process, another
seed)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from foundations_harness import (
    ACCURACY_MARGIN,
    MAX_REPLAY_ROWS,
    REPLAY_RTOL,
    case_rng,
    check_fresh_process,
    check_global_state,
    checker,
    expect_replay,
    largest_differences,
    relative_error,
    replay,
)

from coursekit.checking.learner import (
    get_function,
    on_input,
    require_written,
)
from coursekit.checking.values import as_array, as_float, as_float64_array, fail_unless
from coursekit.workloads import classifier
from coursekit.workloads.fresh import bitwise_differences, flatten

# ---------------------------------------------------------------------------------------
# Stage 3: train_classifier, reference_workload
# ---------------------------------------------------------------------------------------

def classifier_case(ctx) -> dict:
    """Noisier clusters than the workload's (spread 3), odd sizes, 3 classes."""
    rng = case_rng(ctx, "classifier-data")
    n, features, classes = int(rng.integers(150, 230)) | 1, 7, 3
    key_seed = int(rng.integers(0, 2**31 - 1))
    batch = int(rng.integers(12, 20)) | 1
    n += 2 * (n % batch == 0)  # leftover rows, so an epoch's length shows
    x, y = classifier.make_dataset(jax.random.key(key_seed), n, features, classes,
                                   spread=3.0)
    return {"x": np.asarray(x), "y": np.asarray(y), "classes": classes,
            "key_seed": key_seed + 1, "steps": int(rng.integers(36, 46)),
            "batch": batch, "lr": float(rng.uniform(0.2, 0.28))}  # not the default 0.3


def replay_train(key, case: dict, same_order: bool = False, ceil_epoch: bool = False,
                 slide: bool = False, own_labels: bool = False,
                 compose: bool = False) -> dict:
    """The checker's own epoch-shuffled SGD with the documented key protocol: a sealed
    program (its source stays with the instructors; it would be train_classifier), or in
    a learner's copy its stored output for the public inputs. ``same_order`` and
    ``ceil_epoch`` (an epoch of ceil(n / batch) steps, the last on the leftover rows) and
    ``slide`` (step j's rows order[j:j + batch], a window moved by one row),
    ``own_labels`` (y's rows in an order of their own, from the epoch key split again)
    and ``compose`` (each epoch's permutation applied to the last epoch's order) replay
    classic mistakes, for diagnosis."""
    assert len(case["x"]) <= MAX_REPLAY_ROWS, "a case larger than the sealed replay holds"
    params = replay("train_replay", jax.random.key_data(key),
                    np.asarray(case["x"], np.float32), np.asarray(case["y"], np.int32),
                    np.int32(case["steps"]), np.float32(case["lr"]), np.bool_(same_order),
                    np.zeros(case["batch"], np.int8), np.zeros(case["classes"], np.int8),
                    np.bool_(ceil_epoch), np.bool_(slide), np.bool_(own_labels),
                    np.bool_(compose))
    return {k: np.asarray(v, np.float64) for k, v in params.items()}


def train_call(case: dict) -> tuple[tuple, dict]:
    return ((jax.random.key(case["key_seed"]), jnp.asarray(case["x"]),
             jnp.asarray(case["y"])),
            {k: case[k] for k in ("classes", "steps", "batch", "lr")})


def train_inputs(case: dict) -> str:
    n, f = case["x"].shape
    return (f"a typed key, x float32 ({n}, {f}), y int32 ({n},) in [0, {case['classes']}), "
            f"classes={case['classes']}, steps={case['steps']}, batch={case['batch']}, "
            f"lr={case['lr']:.4g}")


def learner_train(impl, case: dict):
    args, kwargs = train_call(case)
    with on_input(train_inputs(case)):
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


def as_bfloat16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 (8 significant bits), back in float32."""
    return np.asarray(x, np.float32).astype(jnp.bfloat16).astype(np.float32)


def train_diagnoses(key, case: dict, yours: np.ndarray) -> list:
    """The classic slips of the epoch-shuffled training, each replayed only when asked:
    a hint where the replay with that slip is ``yours``."""
    n, batch, steps, lr = len(case["x"]), case["batch"], case["steps"], case["lr"]

    def replays(what, flags=None, **change):
        def diagnose():
            got = params_vector(replay_train(key, {**case, **change}, **(flags or {})))
            return what if relative_error(yours, got) < REPLAY_RTOL else None
        return diagnose

    return [
        replays("every epoch used the same order: each epoch's shuffle takes a key split off "
                "once for it", {"same_order": True}),
        replays(f"your epochs are ceil(n / batch) = {-(-n // batch)} steps, rounded up: the "
                f"last a partial batch of the {n % batch} leftover rows (n={n}, batch={batch}): "
                f"an epoch is n // batch = {n // batch} full steps; the leftover rows wait for "
                "the next shuffle",
                {"ceil_epoch": True}),
        replays(f"your batches overlap: step j of an epoch took order[j:j + batch], a "
                f"window moved by one row a step; the j-th batch is the j-th slice of "
                f"batch rows, order[j * batch:(j + 1) * batch] (batch={batch}), so an epoch "
                "sees every row once but its leftovers", {"slide": True}),
        replays("your labels were shuffled apart from their rows: the replay that splits "
                "each epoch's key once more and orders x's rows by one half, y's by the "
                "other, is yours, so a step pairs a row with another row's label; one "
                "permutation of n an epoch, x and y taken at the same rows",
                {"own_labels": True}),
        replays("from the second epoch on your order is the new permutation applied to the "
                "last epoch's order (order[perm]), not to the rows: each epoch's order is "
                "its own key's permutation of the row indices 0..n-1", {"compose": True}),
        replays(f"your training made {steps - 1} updates for steps={steps}: one short",
                steps=steps - 1),
        *([replays(f"your training made {whole} updates for steps={steps}: the steps rounded "
                   f"up to whole epochs of n // batch = {n // batch}; a run of steps={steps} "
                   "stops after that many updates, mid-epoch if it falls there",
                   steps=whole)]
          if (whole := -(-steps // (n // batch)) * (n // batch)) != steps else []),
        replays(f"your update is lr / batch (lr={lr:.4g}, batch={batch}) times the gradient: "
                "the loss is already a mean over the batch's rows", lr=lr / batch),
        replays("your training saw x rounded to bfloat16: the replay on x rounded to "
                "bfloat16 (8 significant bits) is yours, the replay on the float32 x you were "
                "given is not; the contract is float32 x, float32 params and float32 "
                "arithmetic", x=as_bfloat16(case["x"]))]


def train_evidence(yours: dict, ref: dict, case: dict) -> str:
    return (largest_differences(yours, ref, train_inputs(case)) +
            "No slip the checker replays (one order for every epoch, ceil(n / batch) steps "
            "an epoch, overlapping windows of rows, labels in an order of their own, an "
            "order shuffled from the last epoch's, a step short, the steps rounded up to "
            "whole epochs, lr / batch, x in bfloat16) gives yours: compare your key "
            "splits, each epoch's order and its consecutive slices, and the update with the "
            "docstring, step by step")


def check_training(case: dict, returned, what: str, before=(), after=()) -> None:
    """``returned`` (a training of ``case``) against the replay; on a difference, the
    first diagnosis that explains it (``before`` first, ``after`` last), else what the
    values show."""
    key = jax.random.key(case["key_seed"])
    ref = replay_train(key, case)
    params = classifier_params(returned, ref, "train_classifier(...)")
    yours = params_vector(params)
    expect_replay(what, yours, params_vector(ref),
                  [*before, *train_diagnoses(key, case, yours), *after],
                  train_evidence(params, ref, case))


def same_shape_case(ctx, first: dict) -> dict:
    """New data of ``first``'s shape, with its classes, steps, batch and lr (all a cache
    might key on) and a key of its own."""
    rng = case_rng(ctx, "classifier-again")
    key_seed = int(rng.integers(0, 2**31 - 1))
    x, y = classifier.make_dataset(jax.random.key(key_seed), len(first["x"]),
                                   first["x"].shape[1], first["classes"], spread=3.0)
    return {**first, "x": np.asarray(x), "y": np.asarray(y), "key_seed": key_seed + 1}


@checker.check(3)
def train_follows_key_protocol(impl, ctx):
    """train_classifier against its replay, then again in the same process on new data of
    the same shape and settings: that result too is its own inputs' replay (issue 53)."""
    require_written(impl, "train_classifier")
    first = classifier_case(ctx)
    check_training(first, learner_train(impl, first), "train_classifier")
    again = same_shape_case(ctx, first)
    returned = learner_train(impl, again)
    label = "call 2, new data of the first call's shape and settings"

    def carried():
        got = replay_train(jax.random.key(again["key_seed"]),
                           {**again, "x": first["x"], "y": first["y"]})
        like = classifier_params(returned, got, "train_classifier(...)")
        if relative_error(params_vector(like), params_vector(got)) < REPLAY_RTOL:
            return (f"{label}: it returned what the first call's x and y give: state "
                    "carried from an earlier call (a step kept across calls that closes "
                    "over the first call's arrays) decided it")

    def earlier():
        return (f"the first call matched the replay and {label} does not: the result "
                "depends on the call's place in the process or on these inputs; state "
                "carried from an earlier call (a cache or a compiled step keyed on too "
                "little) shows this way")
    check_training(again, returned, f"train_classifier ({label})", before=(carried,),
                   after=(earlier,))


@checker.check(3)
def train_leaves_global_random_state_alone(impl, ctx):
    require_written(impl, "train_classifier")
    case = classifier_case(ctx)
    check_global_state(impl, lambda: learner_train(impl, case), ctx, "train_classifier")


WORKLOAD_SIZES = {"n_train": 512, "n_test": 301, "steps": 48}
WORKLOAD_FIELDS = ("params", "test_accuracy", "train_accuracy")


def workload_seed(ctx) -> int:
    return int(case_rng(ctx, "workload-seed").integers(0, 2**31 - 1))


# train_classifier's own defaults (its signature's): a workload that drops a setting
# trains with these
TRAIN_DEFAULTS = {"batch": 64, "lr": 0.3}


def workload_kwargs(ctx) -> dict:
    """The sizes, and a batch (odd) and learning rate drawn per run, never the defaults
    (64, 0.3), so a workload that ignores either fails the replay."""
    rng = case_rng(ctx, "workload-kwargs")
    return {**WORKLOAD_SIZES, "batch": int(rng.integers(56, 68)) | 1,
            "lr": float(rng.uniform(0.24, 0.28))}  # not the default 0.3


def second_workload_kwargs(ctx) -> dict:
    """The second call's settings: the first call's sizes and seed, with another odd
    batch, another learning rate and fewer steps (all a memo of the workload must key
    on; fewer steps keep the extra training short)."""
    rng = case_rng(ctx, "workload-again")
    return {**WORKLOAD_SIZES, "steps": int(rng.integers(30, 40)),
            "batch": int(rng.integers(40, 54)) | 1,  # below the first call's 57-67
            "lr": float(rng.uniform(0.18, 0.22))}   # below the first call's 0.24-0.28


def learner_workload(impl, ctx, seed: int | None = None, kwargs: dict | None = None) -> dict:
    fn = get_function(impl, "reference_workload")
    kwargs = workload_kwargs(ctx) if kwargs is None else kwargs
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


def workload_case(ctx, kwargs: dict | None = None) -> dict:
    """The workload's training as a replay case, with the first call's settings or
    ``kwargs``."""
    _, x, y = workload_data(ctx)
    n_train = WORKLOAD_SIZES["n_train"]
    kwargs = workload_kwargs(ctx) if kwargs is None else kwargs
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
    replay's. Where they differ, the hint names the slip the replays find (the training's
    own, training on the test rows, or the seed split's halves swapped), or says that the
    workload's params are the learner's own train_classifier's on those rows: the workload
    is built as asked and what differs is train_classifier (train_follows_key_protocol
    says more)."""
    out = workload_run(impl, ctx)
    k_train, x, y = workload_data(ctx)
    n_train, case = WORKLOAD_SIZES["n_train"], workload_case(ctx)
    ref = workload_replay(ctx)
    params = classifier_params(out["params"], ref, "reference_workload(...)['params']")
    yours = params_vector(params)

    def own_training():
        own = get_function(impl, "train_classifier")(
            k_train, jnp.asarray(case["x"]), jnp.asarray(case["y"]),
            **{k: case[k] for k in ("classes", "steps", "batch", "lr")})
        own = params_vector(classifier_params(own, ref, "train_classifier(...)"))
        if relative_error(yours, own) < REPLAY_RTOL:
            return ("your workload's params are your train_classifier's on the first n_train "
                    "rows with k_train, as asked, and that training differs from the replay "
                    f"by relative {relative_error(own, params_vector(ref)):.3g}: what "
                    "differs is train_classifier (train_follows_key_protocol names how)")

    def test_rows():
        rows = {**case, "x": np.asarray(x[n_train:]), "y": np.asarray(y[n_train:])}
        if relative_error(yours, params_vector(replay_train(k_train, rows))) < REPLAY_RTOL:
            return "you trained on the test rows: train on x[:n_train], test on the rest"

    def keys_swapped():
        k_first, k_second = jax.random.split(jax.random.key(workload_seed(ctx)))
        xs, ys = classifier.make_dataset(k_second, len(x))
        rows = {**case, "x": np.asarray(xs[:n_train]), "y": np.asarray(ys[:n_train])}
        if relative_error(yours, params_vector(replay_train(k_first, rows))) < REPLAY_RTOL:
            return ("your params are the training of data drawn from the second half of the "
                    "seed's split, with the first half as the training key: the data key and "
                    "the training key are swapped (the split's first half is the data key)")

    def settings_dropped():
        for dropped in (("batch", "lr"), ("batch",), ("lr",)):
            defaults = {k: TRAIN_DEFAULTS[k] for k in dropped}
            got = params_vector(replay_train(k_train, {**case, **defaults}))
            if relative_error(yours, got) < REPLAY_RTOL:
                given = ", ".join(f"{k}={case[k]:g}" for k in dropped)
                kept = ", ".join(f"{k}={v:g}" for k, v in defaults.items())
                return (f"your params are the training with train_classifier's default "
                        f"{kept}, not the {given} reference_workload was given: pass "
                        "steps, batch and lr through to train_classifier")

    expect_replay("reference_workload's params", yours, params_vector(ref),
                  [*train_diagnoses(k_train, case, yours), test_rows, keys_swapped,
                   settings_dropped, own_training],
                  largest_differences(params, ref, f"seed {workload_seed(ctx)}") +
                  "every key comes from the seed as the docstring states; the params are "
                  "train_classifier's on the first n_train rows, with the steps, batch and "
                  "lr you were given")


def check_accuracy_fields(out: dict, params: dict, x, y, label: str = "") -> dict:
    """``out``'s two accuracies are plain floats equal (1e-6) to the checker's accuracy
    of ``params`` (float32 jax arrays) on the training and the test rows; returns the
    checker's."""
    n_train = WORKLOAD_SIZES["n_train"]
    rows = {"train_accuracy": (x[:n_train], y[:n_train], "the first n_train rows"),
            "test_accuracy": (x[n_train:], y[n_train:], "rows n_train: (not trained on)")}
    measured = {}
    for field, (xs, ys, where) in rows.items():
        measured[field] = float(classifier.accuracy(params, xs, ys))
        reported = out[field]
        fail_unless(type(reported) is float, f"{field}{label} must be a plain Python float",
                    yours=type(reported).__name__, expected="float",
                    hint="a plain Python float, not a jax or numpy scalar")
        reported = as_float(reported, field)
        fail_unless(abs(reported - measured[field]) < 1e-6,
                    f"{field}{label} is not the accuracy of your params on {where}",
                    yours=reported, expected=measured[field],
                    hint=f"evaluate your trained params on {where}; return a float")
    return measured


@checker.check(3)
def workload_accuracy_vs_reference(impl, ctx):
    out = workload_run(impl, ctx)
    k_train, x, y = workload_data(ctx)
    n_train = WORKLOAD_SIZES["n_train"]
    like = {k: np.asarray(v) for k, v in classifier.init_params(k_train).items()}
    params = classifier_params(out["params"], like, "reference_workload(...)['params']")
    params = {k: jnp.asarray(v, jnp.float32) for k, v in params.items()}
    measured = check_accuracy_fields(out, params, x, y)
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


@checker.check(3)
def workload_second_call_matches_replay(impl, ctx):
    """reference_workload called again in the same process with the same seed and another
    batch, lr and steps (issue 53): its params are the replay of those settings and its
    accuracies those of its own params, as a fresh process's would be."""
    first = workload_run(impl, ctx)  # the stage's first calls, shared
    seed, kwargs = workload_seed(ctx), second_workload_kwargs(ctx)
    out = learner_workload(impl, ctx, seed, kwargs)
    k_train, x, y = workload_data(ctx)
    case = workload_case(ctx, kwargs)
    ref = replay_train(k_train, case)
    what = "reference_workload(...)['params']"
    params = classifier_params(out["params"], ref, what)
    yours = params_vector(params)
    settings = ", ".join(f"{k}={kwargs[k]:.4g}" if k == "lr" else f"{k}={kwargs[k]}"
                         for k in ("steps", "batch", "lr"))
    first_settings = ", ".join(f"{k}={v:.4g}" if k == "lr" else f"{k}={v}"
                               for k, v in workload_kwargs(ctx).items()
                               if k in ("steps", "batch", "lr"))
    label = f"call 2, seed {seed} again with {settings}"

    def carried():
        earlier = params_vector(classifier_params(first["params"], ref, what))
        if relative_error(yours, earlier) < REPLAY_RTOL:
            return (f"{label}: it returned the params of the first call (seed {seed}, "
                    f"{first_settings}), not those of its own settings: state carried from "
                    "an earlier call (a cache or memo keyed on the seed, not on steps, batch and "
                    "lr) decided it")

    def earlier():
        first_ref = params_vector(workload_replay(ctx))
        first_params = params_vector(classifier_params(first["params"], ref, what))
        if relative_error(first_params, first_ref) < REPLAY_RTOL:
            return (f"the first call matched the replay and {label} does not: the result "
                    "depends on the call's place in the process or on these settings; "
                    "state carried from an earlier call (a cache or a compiled step keyed "
                    "on too little) shows this way")

    expect_replay(f"reference_workload ({label})", yours, params_vector(ref),
                  [*train_diagnoses(k_train, case, yours), carried, earlier],
                  largest_differences(params, ref, f"seed {seed} and {kwargs}") +
                  "every key comes from the seed as the docstring states; the params are "
                  "train_classifier's on the first n_train rows, with the steps, batch and "
                  "lr you were given")
    check_accuracy_fields(out, {k: jnp.asarray(v, jnp.float32) for k, v in params.items()},
                          x, y, f" ({label})")

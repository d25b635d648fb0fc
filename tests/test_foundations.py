"""foundations checker: the reference passes, the starter fails every stage with "not
yet", and each planted bug fails the check meant to catch it while the stage's other
checks still pass where they should. ``only=`` keeps each run to the checks a bug is
aimed at and the ones that must stay green.

The planted bugs go through one checker process (tests/planted_batch.py: the batch of
``coursekit.checking.planted``), each in a fresh learner process, with a fresh random
seed per session as check.py picks one; the tests of the learner-facing command itself
(reference, starter, the checker never importing the learner file) run check.py."""

from __future__ import annotations

import pytest
from helpers import checks_per_stage, plant, reference_run, run_checker, solution, starter
from planted_batch import Planted, PlantedBatch

PROJECT = "foundations"
GRADS = "gradients_match_float64_finite_differences,regression_grads_written_by_hand"
FIT = ("fit_follows_key_protocol,fit_leaves_global_random_state_alone,"
       "fit_rerun_in_fresh_process_is_bitwise_equal")
TRAIN = "train_follows_key_protocol,train_leaves_global_random_state_alone"
WORKLOAD = ("workload_rerun_in_fresh_process_is_bitwise_equal,workload_params_follow_replay,"
            "workload_accuracy_vs_reference")

BUGS: dict[str, Planted] = {}  # the batch every planted test reads (the two that train the
# workload had a batch of their own: a second checker start and stage-3 compile, 10 s)


def bug(name, replacements, stage, only=None, seed=None) -> str:
    """Plant ``name`` in the batch: check ``stage`` (only the ``only`` checks, a
    comma-separated list; all of the stage without) under ``seed`` (the batch's without)."""
    BUGS[name] = Planted(
        int(stage), replacements, only=only.split(",") if only else [], seed=seed)
    return name


def failing(result: dict) -> set[str]:
    return {cid for cid, status in result["status"].items() if status != "pass"}


def run_bug(results: dict, name: str) -> dict:
    """The batch's result for ``name``: the checker gave verdicts (it did not crash) and
    printed no traceback."""
    result = results[name]
    assert result["status"], result["stdout"]
    assert "Traceback" not in result["stdout"], result["stdout"]
    return result


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return PlantedBatch(PROJECT, BUGS, seed=None).run(tmp_path_factory.mktemp("planted"))


@pytest.mark.slow
def test_reference_passes_every_stage():
    result = reference_run(PROJECT)  # shared with notebook 00's check cells
    assert result["returncode"] == 0, result["stdout"] + result["stderr"]
    assert len(result["status"]) == sum(checks_per_stage(PROJECT).values()) \
        and not failing(result), result["stdout"]
    assert {r["stage"] for r in result["json"]["results"]} == {1, 2, 3}


def test_starter_fails_every_stage_without_crashing(tmp_path):
    result = run_checker(PROJECT, starter(PROJECT), "all", tmp=tmp_path)
    assert result["returncode"] == 1
    assert result["json"] is not None, result["stderr"]
    assert set(result["status"].values()) == {"not-implemented"}, result["stdout"]
    assert {r["stage"] for r in result["json"]["results"]} == {1, 2, 3}
    assert "Traceback" not in result["stdout"]
    assert "replace the `raise NotImplementedError`" in result["stdout"]


def test_the_checker_never_imports_the_learner_file(tmp_path):
    # A learner file that refuses to be imported by the checker's own process: it passes
    # only if every call goes over the bridge to the learner process.
    impl = plant(tmp_path, PROJECT, "not-in-checker", [(
        "from coursekit.workloads import classifier\n",
        "from coursekit.workloads import classifier\n"
        "import sys as _sys\n"
        "if _sys.argv[0].endswith('check.py'):\n"
        "    raise RuntimeError('imported by the checker process')\n")])
    result = run_checker(PROJECT, impl, "1", tmp=tmp_path)
    assert result["returncode"] == 0, result["stdout"]


# -- stage 1: mse ------------------------------------------------------------------------

MSE = "return jnp.mean((pred - target) ** 2)"

MSE_BUGS = [
    ("sum", "return jnp.sum((pred - target) ** 2)", "mse_matches_float64_reference",
     "yours is the sum of the squared differences"),
    ("root", "return jnp.sqrt(jnp.mean((pred - target) ** 2))",
     "mse_matches_float64_reference", "an RMSE"),
    ("last-axis", "return jnp.mean((pred - target) ** 2, axis=-1)",
     "mse_matches_float64_reference", "the mean over the last axis alone"),
    # Expanding the square cancels catastrophically for large values close together; with
    # a fresh seed per run any case may show it first (a scalar did in CI), so the test
    # asks for the hint aimed at it, not for the case that tripped.
    ("expanded", "return jnp.mean(pred ** 2 - 2 * pred * target + target ** 2)",
     "mse_matches_float64_reference", "p^2 - 2pt + t^2 in float32"),
    ("float-inside", "return jnp.asarray(float(jnp.mean((pred - target) ** 2)))",
     "mse_works_under_jit", "jax.jit(mse) failed"),
    ("float16-result", "return jnp.mean((pred - target) ** 2).astype(jnp.float16)",
     "mse_matches_float64_reference", "wrong dtype"),
    # blind-b9: the squares' difference, p^2 - t^2, for the squared difference
    ("difference-of-squares", "return jnp.mean(pred ** 2 - target ** 2)",
     "mse_matches_float64_reference", "the mean of pred^2 - target^2"),
    # blind batch 4: a mean over the rows' count, right only for 1-d inputs
    ("first-axis-count", "return jnp.sum((pred - target) ** 2) / (pred.shape[0] if "
     "pred.ndim else 1)", "mse_matches_float64_reference", "over the first axis's length"),
]
# only the two checks the test reads, not the whole stage (the third,
# mse_counts_zeros_either_side, has its own planted bug below)
for _name, _new, *_ in MSE_BUGS:
    bug(f"mse-{_name}", [(MSE, _new)], "1",
        only="mse_matches_float64_reference,mse_works_under_jit")


@pytest.mark.parametrize("name, new, caught, message", MSE_BUGS)
def test_mse_bugs_fail_the_check_aimed_at_them(planted, name, new, caught, message):
    result = run_bug(planted, f"mse-{name}")
    assert caught in failing(result), result["stdout"]
    assert message in result["stdout"], result["stdout"]
    if caught == "mse_works_under_jit":  # the eager value is right
        assert result["status"]["mse_matches_float64_reference"] == "pass", result["stdout"]


MSE_FIRST_CALL = bug("mse-first-call", [(MSE, (
    "key = tuple(pred.shape)\n"
    "    if key not in _MSE_SEEN:\n"
    "        _MSE_SEEN[key] = jnp.mean((pred - target) ** 2)\n"
    "    return _MSE_SEEN[key]")), (
    "# Stage 1: the edit-check loop\n", "# Stage 1: the edit-check loop\n_MSE_SEEN = {}\n")],
    "1", only="mse_matches_float64_reference")


def test_mse_that_keeps_its_first_result_per_shape_fails(planted):
    result = run_bug(planted, MSE_FIRST_CALL)
    assert failing(result) == {"mse_matches_float64_reference"}, result["stdout"]


# issue 53 (blind-b3-mse-assumes-leading-batch-axis): a mean over axis 0 first, right for
# every rank but 0-d, where it raises; the hint names the rank after the others ran.
MSE_NO_AXIS = bug("mse-axis-0-first", [
    (MSE, "return jnp.mean(jnp.mean((pred - target) ** 2, axis=0))")], "1",
    only="mse_matches_float64_reference")


def test_mse_that_raises_on_0d_inputs_hears_the_rank(planted):
    result = run_bug(planted, MSE_NO_AXIS)
    assert result["status"] == {"mse_matches_float64_reference": "error"}, result["stdout"]
    assert "it raised on 0-d inputs" in result["stdout"], result["stdout"]


# A padding-style masked mean (from sequence code) treats a zero in target as "no value":
# right on random normals, which are never exactly 0, so only inputs with zeros show it.
MSE_MASKED = bug("mse-masked-zeros", [(MSE, (
    "mask = target != 0\n"
    "    return jnp.sum(jnp.where(mask, (pred - target) ** 2, 0.0)) / jnp.sum(mask)"))], "1")


def test_mse_that_leaves_out_zeros_in_target_fails(planted):
    result = run_bug(planted, MSE_MASKED)
    assert failing(result) == {"mse_counts_zeros_either_side"}, result["stdout"]
    assert "where target is not zero" in result["stdout"], result["stdout"]


# -- stage 2: regression_grads -------------------------------------------------------------

RESIDUAL = "residual = predict(params, x) - y"
GRADS_RETURN = 'return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.sum(residual) / n}'

GRAD_BUGS = [
    ("sign", [(RESIDUAL, "residual = y - predict(params, x)")], "the sign: the residual"),
    ("n-is-d", [("    n = x.shape[0]\n    return {", "    n = x.shape[1]\n    return {")],
     "where the mean is over the number of rows (n)"),
    ("no-factor-2", [(GRADS_RETURN,
                      'return {"w": (x.T @ residual) / n, "b": jnp.sum(residual) / n}')],
     "the square's derivative brings a factor 2"),
    # issue 53 (blind-b3-grads-bessel-divisor)
    ("n-minus-1", [(GRADS_RETURN, GRADS_RETURN.replace("/ n", "/ (n - 1)"))],
     "n / (n - 1) = "),
    # blind-b8: the mean over every entry of x * residual (no axis): one number for w
    ("w-mean-without-axis", [(GRADS_RETURN, GRADS_RETURN.replace(
        "2.0 * (x.T @ residual) / n", "2.0 * jnp.mean(x * residual[:, None])"))],
     "a mean over every entry"),
    # blind-b9: divided by every element of x (n x d), not the rows
    ("n-times-d", [("    n = x.shape[0]\n    return {", "    n = x.size\n    return {")],
     "1/d = 1/"),
    ("b-from-w", [(GRADS_RETURN,
                   'return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.mean(x) / n}')],
     "gradient for 'b'"),
]
for _name, _replacements, _ in GRAD_BUGS:
    bug(f"grad-{_name}", _replacements, "2", only=GRADS)


@pytest.mark.parametrize("name, replacements, message", GRAD_BUGS)
def test_wrong_gradients_fail_the_finite_difference_check(planted, name, replacements,
                                                         message):
    result = run_bug(planted, f"grad-{name}")
    assert "gradients_match_float64_finite_differences" in failing(result), result["stdout"]
    assert message in result["stdout"]


GRAD_AUTODIFF = bug("grad-autodiff", [(
    f"    {RESIDUAL}\n    n = x.shape[0]\n    {GRADS_RETURN}\n",
    "    return jax.grad(regression_loss)(params, x, y)\n")], "2", only=GRADS)


def test_jax_grad_inside_regression_grads_fails_the_by_hand_rule(planted):
    result = run_bug(planted, GRAD_AUTODIFF)
    assert failing(result) == {"regression_grads_written_by_hand"}, result["stdout"]
    assert "jax.grad" in result["stdout"] and "written by hand" in result["stdout"]


# A name the ast reading cannot resolve: the learner process's count catches it.
GRAD_HIDDEN = bug("grad-hidden", [(
    f"    {RESIDUAL}\n    n = x.shape[0]\n    {GRADS_RETURN}\n",
    "    transform = getattr(jax, 'value_and' + '_grad')\n"
    "    return transform(regression_loss)(params, x, y)[1]\n")], "2", only=GRADS)


def test_autodiff_hidden_from_the_source_is_counted_where_it_runs(planted):
    result = run_bug(planted, GRAD_HIDDEN)
    assert failing(result) == {"regression_grads_written_by_hand"}, result["stdout"]
    assert "autodiff transform(s)" in result["stdout"]


GRAD_HELPER = bug("grad-helper", [(
    f"    {RESIDUAL}\n    n = x.shape[0]\n    {GRADS_RETURN}\n",
    "    return _helper(params, x, y)\n"), (
    "def regression_grads(", "def _helper(params, x, y):\n"
    "    from jax import vjp as pullback\n"
    "    _, back = pullback(lambda p: regression_loss(p, x, y), params)\n"
    "    return back(jnp.ones((), jnp.float32))[0]\n\n\n"
    "def regression_grads(")], "2", only=GRADS)


def test_autodiff_in_a_helper_of_the_file_is_found(planted):
    result = run_bug(planted, GRAD_HELPER)
    assert failing(result) == {"regression_grads_written_by_hand"}, result["stdout"]
    assert "pullback" in result["stdout"]


GRAD_FIRST_CALL = bug("grad-first-call", [(
    f"    {RESIDUAL}\n    n = x.shape[0]\n    {GRADS_RETURN}\n",
    f"    if x.shape not in _SEEN:\n        {RESIDUAL}\n        n = x.shape[0]\n"
    f"        _SEEN[x.shape] = {GRADS_RETURN.removeprefix('return ')}\n"
    "    return _SEEN[x.shape]\n"), (
    "def regression_grads(", "_SEEN = {}\n\n\ndef regression_grads(")], "2", only=GRADS)


def test_gradient_kept_from_the_first_call_fails(planted):
    result = run_bug(planted, GRAD_FIRST_CALL)
    assert "gradients_match_float64_finite_differences" in failing(result), result["stdout"]


# -- stage 2: fit_regression ---------------------------------------------------------------

FIT_LOOP = "    for _ in range(steps):\n        k_batches, k_step = jax.random.split(k_batches)\n"
FIT_RETURN = ("    return params\n    ### END SOLUTION\n\n\n"
              "# ---------------------------------------------------------------------------------------\n"
              "# Stage 3")

FIT_KEY_REUSE = bug("fit-key-reuse", [(FIT_LOOP, (
    "    k_batches, k_step = jax.random.split(k_batches)\n    for _ in range(steps):\n"))],
    "2", only=FIT)


# issue 53 (blind-b7-fit-all-rows-one-draw): every step's rows in one draw
FIT_ONE_DRAW = bug("fit-one-draw", [
    ("    def step(params, k_step):\n        rows = jax.random.randint(k_step, (batch,), 0, n)\n",
     "    def step(params, rows):\n"),
    ("    for _ in range(steps):\n        k_batches, k_step = jax.random.split(k_batches)\n"
     "        params = step(params, k_step)\n",
     "    all_rows = jax.random.randint(k_batches, (steps, batch), 0, n)\n"
     "    for i in range(steps):\n        params = step(params, all_rows[i])\n")], "2", only=FIT)


# A tiny, deterministic-in-process dependence on the process id: the replay's tolerance
# and the in-process reruns cannot see it; only a fresh process can.
FIT_PROCESS = bug("fit-process", [(FIT_RETURN, FIT_RETURN.replace(
    "    return params\n",
    "    import os\n    return {**params, 'b': params['b'] + 1e-7 * (os.getpid() % 997 + 1)}\n"))],
    "2", only=FIT)


def test_result_that_depends_on_the_process_fails_only_the_fresh_process_check(planted):
    result = run_bug(planted, FIT_PROCESS)
    assert failing(result) == {"fit_rerun_in_fresh_process_is_bitwise_equal"}, result["stdout"]
    assert "different arrays in a fresh process" in result["stdout"]


FIT_NP_RANDOM = bug("fit-np-random", [(FIT_LOOP, (
    "    import numpy as np\n    for _ in range(steps):\n"
    "        k_batches, _unused = jax.random.split(k_batches)\n"
    "        k_step = jax.random.key(int(np.random.randint(2**31 - 1)))\n"))], "2", only=FIT)


def test_numpy_global_draws_fail_the_global_state_check(planted):
    result = run_bug(planted, FIT_NP_RANDOM)
    assert {"fit_leaves_global_random_state_alone",
            "fit_follows_key_protocol"} <= failing(result), result["stdout"]
    assert "global random generator" in result["stdout"]


# get_state() changes nothing, so only the outputs under two global seeds tell.
FIT_NP_READ = bug("fit-np-read", [(FIT_RETURN, FIT_RETURN.replace(
    "    return params\n",
    "    import numpy as np\n"
    "    word = int(np.random.get_state()[1][0]) / 2**32\n"
    "    return {**params, 'b': params['b'] + 1e-3 * word}\n"))],
    "2", only="fit_leaves_global_random_state_alone")


def test_reading_numpy_global_state_without_drawing_fails_bitwise(planted):
    result = run_bug(planted, FIT_NP_READ)
    assert failing(result) == {"fit_leaves_global_random_state_alone"}, result["stdout"]
    assert "global seeds changed" in result["stdout"]


FIT_FIRST_CALL = bug("fit-first-call", [(FIT_RETURN, FIT_RETURN.replace(
    "    return params\n",
    "    _FITS.append(1)\n    return {**params, 'b': params['b'] + 1e-6 * len(_FITS)}\n")), (
    "def fit_regression(", "_FITS = []\n\n\ndef fit_regression(")], "2", only=FIT)


def test_fit_that_counts_its_calls_fails_the_rerun(planted):
    result = run_bug(planted, FIT_FIRST_CALL)
    assert "fit_leaves_global_random_state_alone" in failing(result), result["stdout"]
    assert result["status"]["fit_follows_key_protocol"] == "pass", result["stdout"]


FIT_FIXED_LR = bug("fit-fixed-lr", [(
    "return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n\n    for _ in",
    "return jax.tree.map(lambda p, g: p - 0.05 * g, params, grads)\n\n    for _ in")],
    "2", only="fit_follows_key_protocol")


def test_fit_ignoring_its_lr_fails_the_replay(planted):
    result = run_bug(planted, FIT_FIXED_LR)
    assert failing(result) == {"fit_follows_key_protocol"}, result["stdout"]


# -- stage 3: train_classifier -------------------------------------------------------------

PERMUTATION = "            order = jax.random.permutation(k_epoch, n)\n"

TRAIN_SAME_ORDER = bug("train-same-order", [(
    "        if j == 0:\n", "        if order is None:\n")], "3", only=TRAIN)


# issue 53 (blind-b7-train-sliding-window-slices): a window moved by one row a step
TRAIN_SLIDING = bug("train-sliding-window", [(
    "params = step(params, order[j * batch:(j + 1) * batch])",
    "params = step(params, order[j:j + batch])")], "3", only=TRAIN)


TRAIN_KEY_REUSE = bug("train-key-reuse", [(
    PERMUTATION, "            order = jax.random.permutation(k_init, n)\n")], "3",
    only=TRAIN)


def test_a_reused_key_for_the_shuffle_fails_the_replay(planted):
    result = run_bug(planted, TRAIN_KEY_REUSE)
    assert failing(result) == {"train_follows_key_protocol"}, result["stdout"]


TRAIN_FIXED_LR = bug("train-fixed-lr", [(
    "        grads = jax.grad(classifier.loss)(params, x[rows], y[rows])\n"
    "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n",
    "        grads = jax.grad(classifier.loss)(params, x[rows], y[rows])\n"
    "        return jax.tree.map(lambda p, g: p - 0.3 * g, params, grads)\n")], "3",
    only=TRAIN)


def test_train_ignoring_its_lr_fails_the_replay(planted):
    result = run_bug(planted, TRAIN_FIXED_LR)
    assert failing(result) == {"train_follows_key_protocol"}, result["stdout"]


NP_SHUFFLE = bug("np-shuffle", [(
    PERMUTATION, "            order = jnp.asarray(__import__('numpy').random.permutation(n))\n")],
    "3", only=f"{TRAIN},workload_rerun_in_fresh_process_is_bitwise_equal")


@pytest.mark.slow
def test_global_numpy_shuffle_fails_the_global_state_checks(planted):
    result = run_bug(planted, NP_SHUFFLE)
    assert {"train_leaves_global_random_state_alone", "train_follows_key_protocol",
            "workload_rerun_in_fresh_process_is_bitwise_equal"} <= failing(result), \
        result["stdout"]
    assert "global random generator" in result["stdout"]


# -- stage 3: reference_workload -----------------------------------------------------------

TRAIN_CALL = "params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps, "

FIXED_SEED = bug("fixed-seed", [(
    "k_data, k_train = jax.random.split(jax.random.key(seed))",
    "k_data, k_train = jax.random.split(jax.random.key(0))")], "3",
    only=f"train_follows_key_protocol,{WORKLOAD}")


@pytest.mark.slow
def test_fixed_key_instead_of_the_seed_fails_the_workload_checks(planted):
    result = run_bug(planted, FIXED_SEED)
    assert "workload_rerun_in_fresh_process_is_bitwise_equal" in failing(result)
    assert "another seed gave bitwise the same workload" in result["stdout"]
    assert result["status"]["train_follows_key_protocol"] == "pass"


TEST_ROWS = bug("test-rows", [(
    TRAIN_CALL, TRAIN_CALL.replace("x[:n_train], y[:n_train]", "x[n_train:], y[n_train:]"))],
    "3", only="workload_params_follow_replay")


def test_training_on_the_test_rows_fails_the_workload_replay(planted):
    result = run_bug(planted, TEST_ROWS)
    assert failing(result) == {"workload_params_follow_replay"}, result["stdout"]
    assert "trained on the test rows" in result["stdout"]


# issue 53 (blind-b2-data-train-keys-swapped): the seed's split read the other way round
KEYS_SWAPPED = bug("keys-swapped", [(
    "k_data, k_train = jax.random.split(jax.random.key(seed))",
    "k_train, k_data = jax.random.split(jax.random.key(seed))")], "3",
    only="workload_params_follow_replay")


def test_data_and_training_keys_swapped_are_named(planted):
    result = run_bug(planted, KEYS_SWAPPED)
    assert failing(result) == {"workload_params_follow_replay"}, result["stdout"]
    assert "the data key and the training key are swapped" in result["stdout"]


FIXED_BATCH = bug("fixed-batch", [(
    "steps=steps, batch=batch,", "steps=steps, batch=64,")], "3",
    only="workload_params_follow_replay")


def test_workload_ignoring_its_batch_fails_the_replay(planted):
    result = run_bug(planted, FIXED_BATCH)
    assert failing(result) == {"workload_params_follow_replay"}, result["stdout"]


ACCURACY_BUGS = [
    ("train-accuracy-on-test-rows",
     '"train_accuracy": float(classifier.accuracy(params, x[:n_train], y[:n_train])),',
     '"train_accuracy": float(classifier.accuracy(params, x[n_train:], y[n_train:])),',
     "train_accuracy is not the accuracy of your params on the first n_train rows"),
    ("test-accuracy-as-array",
     '"test_accuracy": float(classifier.accuracy(params, x[n_train:], y[n_train:]))}',
     '"test_accuracy": classifier.accuracy(params, x[n_train:], y[n_train:])}',
     "test_accuracy must be a plain Python float"),
]
for _name, _old, _new, _ in ACCURACY_BUGS:
    bug(_name, [(_old, _new)], "3",
        only="workload_params_follow_replay,workload_accuracy_vs_reference")


@pytest.mark.parametrize("name, old, new, message", ACCURACY_BUGS)
def test_wrong_accuracy_fields_fail_the_accuracy_check(planted, name, old, new, message):
    result = run_bug(planted, name)
    assert failing(result) == {"workload_accuracy_vs_reference"}, result["stdout"]
    assert message in result["stdout"]


# The workload's data are not trivially separable (coursekit.workloads.classifier): a
# sixteenth of the steps (3 of the checker's 48) leaves a test accuracy 0.07-0.18 below
# the checker's own training (16 seeds measured; the margin is 0.05). With separable
# data both reached 1.000 and this check could not tell them apart.
FEW_STEPS = bug("few-steps", [(
    TRAIN_CALL, TRAIN_CALL.replace("steps=steps, ", "steps=steps // 16, "))], "3",
    only="workload_accuracy_vs_reference", seed=7)


def test_too_little_training_fails_the_accuracy_check(planted):
    result = run_bug(planted, FEW_STEPS)
    assert failing(result) == {"workload_accuracy_vs_reference"}, result["stdout"]
    assert "trails the checker's own training" in result["stdout"]
    assert "untrained params score" in result["stdout"]


MSE_CRASH = bug("mse-crash", [(MSE, "return {}['no such key']")], "1",
                only="mse_matches_float64_reference")


def test_a_crash_in_learner_code_is_named_with_file_line_and_function(planted):
    result = run_bug(planted, MSE_CRASH)
    assert result["status"]["mse_matches_float64_reference"] == "error", result["stdout"]
    assert "foundations-mse-crash.py, line" in result["stdout"], result["stdout"]
    assert "in mse: KeyError" in result["stdout"], result["stdout"]


# -- issue 47: the hint names the slip the replays show, not the generic protocol text ---

FIT_ROWS = "        rows = jax.random.randint(k_step, (batch,), 0, n)\n"
FIT_RANDINT = bug("fit-randint-below-n-minus-1", [(FIT_ROWS, FIT_ROWS.replace(
    "0, n)", "0, n - 1)"))], "2", only=FIT)
FIT_ONE_SHORT = bug("fit-one-update-short", [(FIT_LOOP, FIT_LOOP.replace(
    "range(steps)", "range(steps - 1)"))], "2", only="fit_follows_key_protocol")
TRAIN_CEIL = bug("train-ceil-epoch", [(
    "    per_epoch = n // batch\n", "    per_epoch = -(-n // batch)\n")], "3",
    only=f"{TRAIN},workload_params_follow_replay")
TRAIN_LR_PER_ROW = bug("train-lr-per-row", [(
    "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n\n    order",
    "        return jax.tree.map(lambda p, g: p - lr / batch * g, params, grads)\n\n    order")],
    "3", only="train_follows_key_protocol")
# a right answer by another route: each epoch's slices taken with lax.dynamic_slice
TRAIN_DYNAMIC_SLICE = bug("train-dynamic-slice", [(
    "        params = step(params, order[j * batch:(j + 1) * batch])\n",
    "        params = step(params, jax.lax.dynamic_slice(order, (j * batch,), (batch,)))\n")],
    "3", only=TRAIN)

# blind-b8: the features standardised first; labels shuffled with a key of their own; each
# epoch's permutation applied to the last epoch's order
FIT_STANDARDISED = bug("fit-standardised-features", [(
    "    params = init_linear(k_init, x.shape[1])\n    n = x.shape[0]\n",
    "    params = init_linear(k_init, x.shape[1])\n    n = x.shape[0]\n"
    "    x = (x - x.mean(axis=0)) / x.std(axis=0)\n")], "2", only="fit_follows_key_protocol")
TRAIN_OWN_LABELS = bug("train-labels-own-permutation", [
    ("    def step(params, rows):\n"
     "        grads = jax.grad(classifier.loss)(params, x[rows], y[rows])\n",
     "    def step(params, rows, rows_y):\n"
     "        grads = jax.grad(classifier.loss)(params, x[rows], y[rows_y])\n"),
    ("            order = jax.random.permutation(k_epoch, n)\n"
     "        params = step(params, order[j * batch:(j + 1) * batch])\n",
     "            k_x, k_y = jax.random.split(k_epoch)\n"
     "            order = jax.random.permutation(k_x, n)\n"
     "            order_y = jax.random.permutation(k_y, n)\n"
     "        params = step(params, order[j * batch:(j + 1) * batch],\n"
     "                      order_y[j * batch:(j + 1) * batch])\n")],
    "3", only="train_follows_key_protocol")
TRAIN_COMPOSED = bug("train-order-composed", [(
    "            order = jax.random.permutation(k_epoch, n)\n",
    "            perm = jax.random.permutation(k_epoch, n)\n"
    "            order = perm if order is None else order[perm]\n")], "3",
    only="train_follows_key_protocol")


# blind-b9: the lowest-loss params met on the way returned, not the last update's; seen
# where the iterates have settled by the last step (the repeated calls' larger lr)
FIT_BEST_PARAMS = bug("fit-best-params-returned", [(
    "    for _ in range(steps):\n        k_batches, k_step = jax.random.split(k_batches)\n"
    "        params = step(params, k_step)\n    return params",
    "    best, best_loss = params, regression_loss(params, x, y)\n"
    "    for _ in range(steps):\n        k_batches, k_step = jax.random.split(k_batches)\n"
    "        params = step(params, k_step)\n        current = regression_loss(params, x, y)\n"
    "        if current < best_loss:\n            best, best_loss = params, current\n"
    "    return best")], "2", only="fit_repeated_calls_match_replay")


def test_the_lowest_loss_params_instead_of_the_last_fail(planted):
    """Caught by the repeated calls: at the larger lr (0.15) always, at an earlier call
    where its iterates happened to bounce already (seen in make test, at call 2)."""
    result = run_bug(planted, FIT_BEST_PARAMS)
    assert failing(result) == {"fit_repeated_calls_match_replay"}, result["stdout"]
    assert "fit_regression (call " in result["stdout"], result["stdout"]


@pytest.mark.parametrize("name, check, phrase", [
    (FIT_STANDARDISED, "fit_follows_key_protocol", "standardised column by column"),
    (TRAIN_OWN_LABELS, "train_follows_key_protocol", "shuffled apart from their rows"),
    (TRAIN_COMPOSED, "train_follows_key_protocol", "applied to the last epoch's order"),
    (FIT_RANDINT, "fit_follows_key_protocol", "with maxval n - 1 the last row"),
    (FIT_ONE_SHORT, "fit_follows_key_protocol", "one short"),
    (TRAIN_CEIL, "train_follows_key_protocol", "your epochs are ceil(n / batch)"),
    (TRAIN_LR_PER_ROW, "train_follows_key_protocol", "lr / batch"),
    (FIT_KEY_REUSE, "fit_follows_key_protocol", "reused one key for every step"),
    (FIT_ONE_DRAW, "fit_follows_key_protocol", "drew every step's rows at once"),
    (TRAIN_SAME_ORDER, "train_follows_key_protocol", "every epoch used the same order"),
    (TRAIN_SLIDING, "train_follows_key_protocol", "your batches overlap"),
])
def test_a_replayed_slip_is_named_by_its_replay(planted, name, check, phrase):
    """The check the slip breaks fails, its hint the slip the checker's replay of it
    matches (issue 47: these got the generic key-protocol text); the workload, which
    trains with a wrong train_classifier, fails too, naming the same slip (issue 53: its
    name promises params that follow the replay)."""
    result = run_bug(planted, name)
    also = {"workload_params_follow_replay"} & set(result["status"])
    assert failing(result) == {check} | also, result["stdout"]
    assert phrase in result["stdout"], result["stdout"]
    assert "none of the classic slips" not in result["stdout"], result["stdout"]


def test_epoch_slices_taken_another_way_pass(planted):
    result = run_bug(planted, TRAIN_DYNAMIC_SLICE)
    assert not failing(result), result["stdout"]


# -- issue 53: calls that carry state, and hints that say what the evidence shows -------

REPEATED = "fit_follows_key_protocol,fit_repeated_calls_match_replay"
FIT_CACHED_STEP = bug("fit-cached-step", [(FIT_LOOP, (
    "    step = globals().setdefault('_FIT_STEPS', {}).setdefault((x.shape, batch, lr), step)\n"
    + FIT_LOOP))], "2", only=REPEATED)
# keyed on the shape alone: the call with another lr (same shape) gets the first's step
FIT_SHAPE_KEYED = bug("fit-shape-keyed-step", [(FIT_LOOP, (
    "    step = globals().setdefault('_FIT_STEPS', {}).setdefault(x.shape, step)\n"
    + FIT_LOOP))], "2", only=REPEATED)


TRAIN_CACHED_STEP = bug("train-cached-step", [(
    "    order = None\n",
    "    step = globals().setdefault('_TRAIN_STEPS', {}).setdefault((x.shape, batch, lr), step)\n"
    "    order = None\n")], "3", only="train_follows_key_protocol")


def test_a_training_step_kept_from_an_earlier_call_fails_its_second_call(planted):
    result = run_bug(planted, TRAIN_CACHED_STEP)
    assert failing(result) == {"train_follows_key_protocol"}, result["stdout"]
    assert "state carried from an earlier call" in result["stdout"], result["stdout"]


@pytest.mark.parametrize("name", [FIT_CACHED_STEP, FIT_SHAPE_KEYED])
def test_a_step_kept_from_an_earlier_call_fails_the_repeated_calls(planted, name):
    """issue 53: a jitted step cached across calls, closing over the first call's x and
    y, passed every check; only a second call in one process shows it."""
    result = run_bug(planted, name)
    assert failing(result) == {"fit_repeated_calls_match_replay"}, result["stdout"]
    assert "state carried from an earlier call" in result["stdout"], result["stdout"]


# issue 53 (blind-b3-fit-batch-clipped-to-n): a batch capped at the rows; the contract's
# batch is any count of draws with replacement, and call 3 has fewer rows than the batch.
FIT_BATCH_CAPPED = bug("fit-batch-capped-at-n", [(
    "    n = x.shape[0]\n\n    @jax.jit\n    def step(params, k_step):\n",
    "    n = x.shape[0]\n    batch = min(batch, n)\n\n"
    "    @jax.jit\n    def step(params, k_step):\n")],
    "2", only=REPEATED)


def test_a_batch_capped_at_the_rows_fails_the_call_with_fewer_rows(planted):
    result = run_bug(planted, FIT_BATCH_CAPPED)
    assert failing(result) == {"fit_repeated_calls_match_replay"}, result["stdout"]
    assert "so a batch larger than n repeats rows" in result["stdout"], result["stdout"]


# issue 53 (blind-b3-workload-memoised-by-seed): the workload kept per (seed, sizes), so a
# second call with the same seed and another batch, lr and steps returns the first's.
WL_KEYS = "    k_data, k_train = jax.random.split(jax.random.key(seed))\n"
WL_ACCURACY = ('"test_accuracy": float(classifier.accuracy(params, x[n_train:], '
               'y[n_train:]))}\n')
WORKLOAD_MEMO = bug("workload-memo", [
    ("def reference_workload(", "_RUNS = {}\n\n\ndef reference_workload("),
    (WL_KEYS, "    if (seed, n_train, n_test) in _RUNS:\n"
              "        return _RUNS[seed, n_train, n_test]\n" + WL_KEYS),
    ('    return {"params": params,\n',
     '    _RUNS[seed, n_train, n_test] = {"params": params,\n'),
    (WL_ACCURACY, WL_ACCURACY + "    return _RUNS[seed, n_train, n_test]\n")],
    "3", only="workload_second_call_matches_replay")


def test_a_workload_kept_from_an_earlier_call_fails_its_second_call(planted):
    result = run_bug(planted, WORKLOAD_MEMO)
    assert failing(result) == {"workload_second_call_matches_replay"}, result["stdout"]
    assert "returned the params of the first call" in result["stdout"], result["stdout"]
    assert "state carried from an earlier call" in result["stdout"], result["stdout"]


FIT_NO_REPLACEMENT = bug("fit-rows-without-replacement", [(FIT_ROWS, FIT_ROWS.replace(
    "jax.random.randint(k_step, (batch,), 0, n)", "jax.random.permutation(k_step, n)[:batch]"
))], "2", only="fit_follows_key_protocol")
TRAIN_BFLOAT16 = bug("train-bfloat16-inputs", [(
    "    k_init, k_order = jax.random.split(key)\n",
    "    x = x.astype(jnp.bfloat16)\n    k_init, k_order = jax.random.split(key)\n")], "3",
    only="train_follows_key_protocol")


@pytest.mark.parametrize("name, check, phrase", [
    (FIT_NO_REPLACEMENT, "fit_follows_key_protocol", "drawn without replacement"),
    (TRAIN_BFLOAT16, "train_follows_key_protocol", "x rounded to bfloat16"),
])
def test_slips_once_called_none_of_the_classic_ones_are_named(planted, name, check, phrase):
    """issue 53: rows drawn without replacement and bfloat16 inputs got "none of the
    classic slips" (bfloat16 passed at one seed: relative 0.00111 against 0.001)."""
    result = run_bug(planted, name)
    assert failing(result) == {check}, result["stdout"]
    assert phrase in result["stdout"], result["stdout"]
    assert "none of the classic slips" not in result["stdout"], result["stdout"]


# an unnamed slip: a fit that starts from zeros instead of init_linear
FIT_ZERO_START = bug("fit-zero-start", [(
    "    params = init_linear(k_init, x.shape[1])\n",
    "    params = jax.tree.map(jnp.zeros_like, init_linear(k_init, x.shape[1]))\n")], "2",
    only="fit_follows_key_protocol")


def test_an_unnamed_slip_hears_which_values_differ_on_which_input(planted):
    result = run_bug(planted, FIT_ZERO_START)
    assert failing(result) == {"fit_follows_key_protocol"}, result["stdout"]
    assert "the values that differ most are" in result["stdout"], result["stdout"]
    assert "the replay's" in result["stdout"] and "a typed key, x float32" in result["stdout"]


# -- issue 50: a learner's copy holds the replays' outputs for public inputs, no program --

def test_the_stored_replays_are_a_fresh_generation():
    """projects/foundations/tests/expected/replays.npz equals what the sealed replays give
    on the public inputs today (foundations_expected.py --check)."""
    import subprocess
    import sys

    from helpers import ROOT
    done = subprocess.run([sys.executable, str(ROOT / "projects/foundations/tests/"
                                               "foundations_expected.py"), "--check"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_freshness_allows_another_cpus_last_bits_and_nothing_more(tmp_path):
    """A generation on another CPU differs in the last float32 bits and is fresh; a value
    off by 1e-4 (the checks' own tolerance), a leaf missing or another dtype is stale."""
    import importlib.util
    import os

    import numpy as np
    from helpers import ROOT
    spec = importlib.util.spec_from_file_location(
        "foundations_expected", ROOT / "projects/foundations/tests/foundations_expected.py")
    expected = importlib.util.module_from_spec(spec)
    env_before = dict(os.environ)  # importing it pins this process to the CPU (a
    try:                           # checker's own rule): later tests must not inherit that
        spec.loader.exec_module(expected)
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    rng = np.random.default_rng(0)
    base = {"d1/w": rng.standard_normal((4, 3)).astype(np.float32),
            "d1/b": rng.standard_normal(3).astype(np.float32)}

    def saved(name, arrays):
        np.savez_compressed(tmp_path / name, **arrays)
        return tmp_path / name

    stored = saved("stored.npz", base)
    last_bits = {k: np.nextafter(v, np.float32(np.inf)) for k, v in base.items()}
    assert expected.same(stored, saved("bits.npz", last_bits))
    for name, arrays in (("off.npz", {**base, "d1/w": base["d1/w"] * np.float32(1 + 1e-4)}),
                         ("missing.npz", {"d1/w": base["d1/w"]}),
                         ("dtype.npz", {**base, "d1/b": base["d1/b"].astype(np.float64)})):
        assert not expected.same(stored, saved(name, arrays)), name


STORED_CASES = {  # name: (stage, the planted bug's name or None for the reference)
    "solution-2": ("2", None), "solution-3": ("3", None),
    "rows-without-replacement": ("2", FIT_NO_REPLACEMENT), "cached-step": ("2", FIT_CACHED_STEP),
    "batch-capped": ("2", FIT_BATCH_CAPPED), "bfloat16": ("3", TRAIN_BFLOAT16),
    "workload-memo": ("3", WORKLOAD_MEMO)}
STORED_ONLY = {"2": REPEATED, "3": "train_follows_key_protocol,workload_params_follow_replay,"
                                   "workload_second_call_matches_replay"}


@pytest.fixture(scope="module")
def planted_stored(tmp_path_factory):
    """The replay checks on the stored outputs, every case in one checker process (each
    file in its own learner process, as the planted bugs): seven check.py runs paid seven
    checker starts and compiled stage 3's references three times."""
    stored = {"COURSE_FOUNDATIONS_REPLAYS": "stored"}
    cases = {name: Planted(int(stage), BUGS[bug].replacements if bug else [],
                           only=STORED_ONLY[stage].split(","), env=stored,
                           impl=None if bug else solution(PROJECT))
             for name, (stage, bug) in STORED_CASES.items()}
    return PlantedBatch(PROJECT, cases, seed=None).run(tmp_path_factory.mktemp("stored"))


@pytest.mark.slow
@pytest.mark.parametrize("impl, verdict", [
    ("solution-2", "pass"), ("solution-3", "pass"),
    ("rows-without-replacement", "drawn without replacement"),
    ("cached-step", "state carried from an earlier call"),
    ("batch-capped", "so a batch larger than n repeats rows"),
    ("bfloat16", "x rounded to bfloat16"),
    ("workload-memo", "returned the params of the first call")])
def test_stored_replays_give_the_verdicts_of_the_live_ones(planted_stored, impl, verdict):
    """Where the sealed programs are absent (a learner's copy), the replay checks run on
    the public inputs against the stored outputs: the reference passes, mistakes fail
    with their named hints."""
    result = planted_stored[impl]
    assert result["status"], result["stdout"]
    if verdict == "pass":
        assert not failing(result), result["stdout"]
    else:
        assert failing(result) and verdict in result["stdout"], result["stdout"]


# -- issue 51: notebook 00's fresh process where the notebook's own process holds a TPU --

HELD_CHIP = '''
import os

import jax.numpy as jnp


def double(x):
    """Fails as a fresh process failed on the TPU while its parent held the chip."""
    if os.environ.get("JAX_PLATFORMS") != "cpu":
        raise RuntimeError("Unable to initialize backend 'tpu': ABORTED: Internal error when "
                           "accessing libtpu multi-process lockfile. Run \\"$ sudo rm "
                           "/tmp/libtpu_lockfile\\".")
    return {"y": jnp.asarray(x) * 2}
'''


def test_a_fresh_process_runs_on_the_cpu_where_this_process_holds_the_chip(tmp_path,
                                                                            monkeypatch):
    """The TPU run: notebook 00 stopped on FreshProcessError (libtpu lockfile) because a
    fresh process cannot open the chip its parent holds. Where the caller holds an
    accelerator the fresh process is pinned to the CPU; a held chip is named as such."""
    import numpy as np

    from coursekit.workloads import fresh
    impl = tmp_path / "held_chip.py"
    impl.write_text(HELD_CHIP)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    x = np.arange(3, dtype=np.float32)
    monkeypatch.setattr(fresh, "caller_holds_accelerator", lambda: False)
    with pytest.raises(fresh.FreshProcessError, match="another process holds it"):
        fresh.call_in_fresh_process(impl, "double", workdir=tmp_path / "a", arrays={"x": x})
    monkeypatch.setattr(fresh, "caller_holds_accelerator", lambda: True)
    assert fresh.fresh_process_platform() == "cpu"
    out = fresh.call_in_fresh_process(impl, "double", workdir=tmp_path / "b", arrays={"x": x})
    assert [v.tolist() for v in out.values()] == [[0.0, 2.0, 4.0]]

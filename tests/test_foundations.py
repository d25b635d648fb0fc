"""foundations checker: the reference passes, the starter fails every stage with "not
yet", and each planted bug fails the check meant to catch it (real checker subprocesses)."""

from __future__ import annotations

import pytest
from helpers import plant, reference_run, run_checker, starter

PROJECT = "foundations"


def failing(result: dict) -> set[str]:
    return {cid for cid, status in result["status"].items() if status != "pass"}


@pytest.mark.slow
def test_reference_passes_every_stage():
    result = reference_run(PROJECT)  # shared with notebook 00's check cells
    assert result["returncode"] == 0, result["stdout"] + result["stderr"]
    assert len(result["status"]) == 10 and not failing(result), result["stdout"]
    assert {r["stage"] for r in result["json"]["results"]} == {1, 2, 3}


def test_starter_fails_every_stage_without_crashing(tmp_path):
    result = run_checker(PROJECT, starter(PROJECT), "all", tmp=tmp_path)
    assert result["returncode"] == 1
    assert result["json"] is not None, result["stderr"]
    assert set(result["status"].values()) == {"not-implemented"}, result["stdout"]
    assert {r["stage"] for r in result["json"]["results"]} == {1, 2, 3}
    assert "Traceback" not in result["stdout"]


def test_sum_instead_of_mean_fails_stage_1(tmp_path):
    bug = plant(tmp_path, PROJECT, "mse-sum", [
        ("return jnp.mean((pred - target) ** 2)", "return jnp.sum((pred - target) ** 2)")])
    result = run_checker(PROJECT, bug, "1", tmp=tmp_path)
    assert "mse_matches_float64_reference" in failing(result), result["stdout"]
    assert "mean over every element" in result["stdout"]


def test_gradient_sign_error_fails_the_finite_difference_check(tmp_path):
    bug = plant(tmp_path, PROJECT, "grad-sign", [
        ("residual = predict(params, x) - y", "residual = y - predict(params, x)")])
    result = run_checker(PROJECT, bug, "2", tmp=tmp_path)
    assert "gradients_match_float64_finite_differences" in failing(result), result["stdout"]
    assert result["status"]["fit_leaves_global_random_state_alone"] == "pass"


def test_one_key_for_every_step_fails_the_replay_with_a_named_hint(tmp_path):
    bug = plant(tmp_path, PROJECT, "fit-key-reuse", [(
        "    for _ in range(steps):\n        k_batches, k_step = jax.random.split(k_batches)\n",
        "    k_batches, k_step = jax.random.split(k_batches)\n    for _ in range(steps):\n")])
    result = run_checker(PROJECT, bug, "2", tmp=tmp_path)
    assert failing(result) == {"fit_follows_key_protocol"}, result["stdout"]
    assert "reused one key for every step" in result["stdout"]


def test_result_that_depends_on_the_process_fails_only_the_fresh_process_check(tmp_path):
    # A tiny, deterministic-in-process dependence on the command line: the replay's
    # tolerance and the in-process reruns cannot see it; only a fresh process can.
    bug = plant(tmp_path, PROJECT, "fit-process", [(
        "    return params\n    ### END SOLUTION\n\n\n"
        "# ---------------------------------------------------------------------------------------\n"
        "# Stage 3",
        "    import sys\n    return {**params, 'b': params['b'] + 1e-6 * len(sys.argv)}\n"
        "    ### END SOLUTION\n\n\n"
        "# ---------------------------------------------------------------------------------------\n"
        "# Stage 3")])
    result = run_checker(PROJECT, bug, "2", tmp=tmp_path)
    assert failing(result) == {"fit_rerun_in_fresh_process_is_bitwise_equal"}, result["stdout"]
    assert "different arrays in a fresh process" in result["stdout"]


@pytest.mark.slow
def test_global_numpy_shuffle_fails_the_global_state_checks(tmp_path):
    bug = plant(tmp_path, PROJECT, "np-shuffle", [
        ("            order = jax.random.permutation(k_epoch, n)\n",
         "            order = jnp.asarray(__import__('numpy').random.permutation(n))\n")])
    result = run_checker(PROJECT, bug, "3", tmp=tmp_path)
    assert {"train_leaves_global_random_state_alone", "train_follows_key_protocol",
            "workload_rerun_in_fresh_process_is_bitwise_equal"} <= failing(result), \
        result["stdout"]
    assert "global random generator" in result["stdout"]


@pytest.mark.slow
def test_fixed_key_instead_of_the_seed_fails_the_workload_checks(tmp_path):
    bug = plant(tmp_path, PROJECT, "fixed-seed", [
        ("k_data, k_train = jax.random.split(jax.random.key(seed))",
         "k_data, k_train = jax.random.split(jax.random.key(0))")])
    result = run_checker(PROJECT, bug, "3", tmp=tmp_path)
    assert "workload_rerun_in_fresh_process_is_bitwise_equal" in failing(result)
    assert "another seed gave bitwise the same workload" in result["stdout"]
    assert result["status"]["train_follows_key_protocol"] == "pass"


def test_too_little_training_fails_the_accuracy_check(tmp_path):
    # The workload's data are not trivially separable (coursekit.workloads.classifier):
    # a sixteenth of the steps (3 of the checker's 48) leaves a test accuracy 0.07-0.18
    # below the checker's own training (16 seeds measured; the margin is 0.05). With
    # separable data both reached 1.000 and this check could not tell them apart.
    bug = plant(tmp_path, PROJECT, "few-steps", [
        ("params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps, ",
         "params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps // 16, ")])
    result = run_checker(PROJECT, bug, "3", tmp=tmp_path, seed=7,
                         only="workload_accuracy_vs_reference")
    assert failing(result) == {"workload_accuracy_vs_reference"}, result["stdout"]
    assert "trails the checker's own training" in result["stdout"]
    assert "untrained params score" in result["stdout"]

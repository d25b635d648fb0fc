"""performance-audit's checker tells right from wrong: the reference passes every stage
(under load, in the sandboxed grading: a timing check may be INCONCLUSIVE, never FAIL),
the starter fails every stage with its stage hint, and each planted bug fails the check
aimed at it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import (
    assert_reference_ok,
    checks_per_stage,
    plant,
    reference_run,
    run_checker,
    solution,
    starter,
)
from planted_batch import PlantedBatch

PROJECT = "performance-audit"
CHECKS_PER_STAGE = checks_per_stage(PROJECT)  # from the checker's registry


@pytest.mark.slow
def test_reference_passes_every_stage_under_load():
    """Every stage of the session's sandboxed grading of the solution, two grader
    workers on one core (helpers.reference_run; notebooks 01-04 and 08 read its passed
    stages in their check cells); repeated runs to find flakes are ``make flake``'s job
    (FLAKE_RUNS times, FLAKE_LOAD=heavy), not the suite's: two more runs here cost about
    four minutes of every CI run."""
    result = reference_run(PROJECT)
    # a timing check may be INCONCLUSIVE under the load, never FAIL (issue 28)
    assert_reference_ok(result, sum(CHECKS_PER_STAGE.values()))


def test_starter_fails_each_stage_with_its_hint(tmp_path):
    result = run_checker(PROJECT, starter(PROJECT), "all", tmp=tmp_path)
    assert result["returncode"] == 1
    for r in result["json"]["results"]:
        assert r["status"] == "not-implemented", r
        assert f"stage {r['stage']}" in r["message"], r
    assert "Traceback" not in result["stdout"] + result["stderr"]
    assert result["stdout"].strip().splitlines()[-1] == \
        f"0 passed, {sum(CHECKS_PER_STAGE.values())} failed"


DECIDE_ROUNDS = ('    result = {**out, "ci": [lo, hi], "decision": decision, '
                 '"reasons": [f"{where} {why}"]}\n')
PLANTED = {
    "unsynchronised_timer": (1, "warm_median_is_device_time", [
        ("            return jax.block_until_ready(out)\n", "            return out\n")]),
    "compile_in_warmed_samples": (1, "first_call_reported_apart", [
        ("""        start = time.perf_counter()
        out = wait(fn(*args))
        first_call_s = time.perf_counter() - start
""", """        out = None
"""),
        ("""                samples.append(time.perf_counter() - start)
""", """                samples.append(time.perf_counter() - start)
        first_call_s = samples[0]
""")]),
    "mean_instead_of_raw_samples": (1, "raw_samples_kept", [
        ('"first_call_s": first_call_s, "samples_s": samples,',
         '"first_call_s": first_call_s,\n        "samples_s": [sum(samples) / len(samples)] * len(samples),')]),
    "parser_sums_nested_events": (2, "region_summary_matches_checker", [
        ('            covered_until = e["ts"] + e["dur"]\n', "            pass\n")]),
    "wrong_memory_level": (2, "roofline_bound_and_memory_level", [
        ('    level = "DRAM"\n', '    level = "L3"\n')]),
    "remat_not_applied": (3, "remat_really_applied", [
        ("step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, policy))",
         "step = block")]),
    # stages 2-3: bandwidth that pays page faults, a peak that was never reset, policies
    # swapped, residuals that count the arguments, a chain rematerialised as one region
    "bandwidth_pays_page_faults": (2, "peak_flops_and_bandwidth_measured", [
        ('donate_argnums=0 if kind == "in_place" else ()', "donate_argnums=()")]),
    "bandwidth_moves_half_the_bytes": (2, "peak_flops_and_bandwidth_measured", [
        ('moved = (1 if kind == "read_sum" else 2)', "moved = 1")]),
    "roofline_ignores_level_bandwidths": (2, "roofline_bound_and_memory_level", [
        ("        bandwidth = bandwidth[level]\n",
         "        bandwidth = bandwidth['DRAM']\n")]),
    "peak_not_reset_after_compile": (3, "peak_memory_from_fresh_process", [
        ('"run_peak_bytes": [r["run_peak_bytes"] for r in runs]',
         '"run_peak_bytes": [r["vmhwm_bytes"] for r in runs]')]),
    "peak_ignores_policy": (3, "peak_memory_from_fresh_process", [
        ('"batch": batch,\n              "policy": policy}', '"batch": batch,\n'
         '              "policy": None}')]),
    # swapped policies save what the other saves: the residuals, the plan and the run's
    # peak all show it (stage 3 reads each from the learner's own programs since issue 50)
    "policies_swapped": (3, ["remat_saves_residuals_and_temp", "remat_policy_ordering",
                             "peak_memory_from_fresh_process"], [
        ("        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, policy))",
         "        swapped = {'nothing_saveable': 'everything_saveable',\n"
         "                   'everything_saveable': 'nothing_saveable'}.get(policy, policy)\n"
         "        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, swapped))")]),
    "tanh_chain_one_region": (3, "remat_policy_ordering", [
        ("    for w in ws:\n        x = layer(w, x)\n    return jnp.mean(x**2)",
         "    def chain(ws, x):\n        for w in ws:\n            x = jnp.tanh(x @ w)\n"
         "        return x\n    if policy is not None:\n        chain = jax.checkpoint(chain)\n"
         "    return jnp.mean(chain(ws, x)**2)")]),
    "residuals_count_arguments": (3, "remat_saves_residuals_and_temp", [
        ("                   if id(leaf) not in arguments))", "                   ))")]),
    "decision_accepts_noise": (4, "rejects_noise", [
        (DECIDE_ROUNDS, DECIDE_ROUNDS + '    if np.median(before["samples_s"]) > '
         'np.median(after["samples_s"]):\n        result["decision"] = "accept"\n')]),
    "pooled_bootstrap_decision": (4, "rejects_drifting_null", [
        (DECIDE_ROUNDS, "    from coursekit.measure.decision import pooled_bootstrap\n"
         "    result = dict(pooled_bootstrap(before, after, min_gain=min_gain), reasons=["
         "'pooled samples'], rounds=[], method='pooled', n_rounds=0)\n")]),
    "decision_never_says_slower": (4, "says_slower_when_slower", [
        (DECIDE_ROUNDS, DECIDE_ROUNDS + '    if result["decision"] == "slower":\n'
         '        result["decision"] = "reject"\n')]),
    "decision_ignores_wrong_output": (4, "rejects_faster_but_wrong", [
        ('        if run.get("output_ok") is not True:\n', '        if False:\n'),
        ('        if m.get("output_ok") is False:\n', '        if False:\n')]),
    "always_equal_object": (2, "cost_by_hand_and_compiler", [
        ('    return {"flops": 2 * m * k * n, "bytes": (m * k + k * n + m * n) * itemsize}',
         '    class Same:\n        __eq__ = lambda self, other: True\n'
         '    return {"flops": Same(), "bytes": Same()}')]),
}


BATCH = PlantedBatch(PROJECT, PLANTED)  # one checker process, a learner process each


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return BATCH.run(tmp_path_factory.mktemp("planted"))


@pytest.mark.parametrize("bug", BATCH.names)
def test_planted_bug_fails_the_right_check(bug, planted):
    BATCH.assert_fails_only(bug, planted)


def test_syntax_error_names_file_and_line(tmp_path):
    impl = tmp_path / "model.py"
    text = solution(PROJECT).read_text().splitlines() + ["def broken(:"]
    impl.write_text("\n".join(text))
    result = run_checker(PROJECT, impl, "4", tmp=tmp_path)
    assert result["returncode"] == 1
    assert f"model.py, line {len(text)}: syntax error" in result["stdout"]
    assert "Traceback" not in result["stdout"] + result["stderr"]
    assert all(s == "error" for s in result["status"].values())


def test_missing_function_is_named(tmp_path):
    impl = plant(tmp_path, PROJECT, "missing", [("def decide(", "def decide_renamed(")])
    result = run_checker(PROJECT, impl, "4", tmp=tmp_path)
    assert "function `decide` is missing" in result["stdout"]
    assert result["status"]["accepts_real_speedup"] == "error"
    assert "Traceback" not in result["stdout"] + result["stderr"]


def test_exception_at_import_is_named(tmp_path):
    impl = tmp_path / "model.py"
    impl.write_text("import numpy\nx = 1 / 0\n")
    result = run_checker(PROJECT, impl, "4", tmp=tmp_path)
    assert "model.py, line 2, in <module>: ZeroDivisionError while importing" in result["stdout"]


def test_missing_file_and_bad_stage(tmp_path):
    result = run_checker(PROJECT, tmp_path / "nope.py", "4", tmp=tmp_path)
    assert result["returncode"] == 1 and "no file at" in result["stdout"]
    bad = subprocess.run([sys.executable, f"projects/{PROJECT}/tests/check.py", "--stage", "9",
                          "--impl", str(solution(PROJECT))], capture_output=True, text=True,
                         cwd=solution(PROJECT).parents[3])
    assert bad.returncode == 2 and "--stage must be one of" in bad.stderr


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    """The solution's stage 4 by check.py at two seeds, read by the two tests below (each
    ran its own before: the JSON test a third run of the same stage)."""
    tmp = tmp_path_factory.mktemp("seeded")
    return {s: run_checker(PROJECT, solution(PROJECT), "4", seed=s, tmp=tmp) for s in (1, 2)}


def test_json_result_carries_what_the_grader_reads(seeded):
    data = seeded[1]["json"]
    assert data["seed"] == 1 and data["stages"] == [4] and data["project"] == PROJECT
    assert {"jax", "jaxlib", "backend", "python"} <= set(data["versions"])
    for r in data["results"]:
        assert {"stage", "check_id", "status", "points", "max_points", "message",
                "duration_s"} <= set(r)


def test_starters_are_generated_from_solutions():
    from coursekit.authoring.starters import main
    assert main(["--check"]) == 0, "run `make starters` (python -m coursekit.authoring.starters)"


def test_seed_changes_inputs_but_not_the_verdict(seeded):
    assert all(r["returncode"] == 0 for r in seeded.values())
    assert os.environ.get("COURSE_CHECK_SEED") is None  # the learner never sets the seed

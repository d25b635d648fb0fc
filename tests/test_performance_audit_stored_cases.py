"""performance-audit stages 3 and 4 in a learner's copy (issue 50): stage 4's checks run
on stored public cases (``expected/decisions.json``) and stage 3's residual counts are
stored numbers for the public inputs (``expected/remat.json``); both must equal a fresh
generation; there the reference solution passes, known-wrong files fail with the grader's
verdict, the starter says "not yet" in every check, and the shipped stage-4 files compute
no interval."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "projects" / "performance-audit" / "tests"
SOLUTION = ROOT / "projects" / "performance-audit" / "solution" / "model.py"
STARTER = ROOT / "projects" / "performance-audit" / "starter" / "model.py"
BOUNDARY = ("    up, down = 1.0 + min_gain, 1.0 / (1.0 + min_gain)",
            "    up, down = 1.0 + min_gain, 1.0 - min_gain")


def stage4_stored(impl: Path, tmp_path: Path, seed: int = 3, stage: int = 4,
                  only: str = "") -> dict[str, dict]:
    """``stage`` on ``impl`` as a learner's copy runs it (the stored cases)."""
    out = tmp_path / f"{impl.stem}-{stage}.json"
    env = dict(os.environ, COURSE_DECISIONS_STORED="1", PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, str(TESTS / "check.py"), "--stage", str(stage),
                    "--impl", str(impl), "--seed", str(seed), "--json", str(out),
                    *(["--only", only] if only else [])], env=env,
                   capture_output=True, text=True, timeout=600)
    return {r["check_id"]: r for r in json.loads(out.read_text())["results"]}


def test_stored_cases_equal_a_fresh_generation():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("COURSE_DECISIONS_STORED", None)
    # peaks.json holds measurements (fresh-process peaks): they agree within 1.15x on a
    # quiet machine, not under any load, so the suite compares only the computed files;
    # `audit_decision_expected.py --check` compares all three by hand
    done = subprocess.run([sys.executable, str(TESTS / "audit_decision_expected.py"),
                           "--check", "--only", "decisions.json", "remat.json"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def test_stored_cases_pass_the_solution_at_any_seed(tmp_path):
    for seed in (1, 2):
        results = stage4_stored(SOLUTION, tmp_path, seed)
        assert results and all(r["status"] == "pass" for r in results.values()), {
            k: (r["status"], r.get("message")) for k, r in results.items()}


def test_stored_cases_fail_a_boundary_slip_with_its_hint(tmp_path):
    text = SOLUTION.read_text()
    assert BOUNDARY[0] in text
    wrong = tmp_path / "model.py"
    wrong.write_text(text.replace(*BOUNDARY))
    results = stage4_stored(wrong, tmp_path)
    failed = {k for k, r in results.items() if r["status"] != "pass"}
    assert failed == {"decision_boundaries_from_both_sides"}
    assert "not below 1 - min_gain" in results["decision_boundaries_from_both_sides"]["hint"]


def test_the_starter_says_not_yet_in_every_stored_check(tmp_path):
    results = stage4_stored(STARTER, tmp_path)
    assert results and all(r["status"] == "not-implemented" for r in results.values()), {
        k: r["status"] for k, r in results.items()}


@pytest.mark.parametrize("name", ["audit_stage4_decision.py", "audit_decision_hints.py"])
def test_shipped_stage4_files_compute_no_interval(name):
    """The decision method stays instructor-only: no t quantile, t interval, or
    interval of a median in what a learner's copy ships for stage 4."""
    text = (TESTS / name).read_text()
    for word in ("t_quantile", "interval_of", "ratio_by_rounds", "median_interval",
                 "instructor_module(\"decision\")"):
        assert word not in text, f"{name} holds {word}"


RESIDUALS = ("jax.tree.leaves(pullback)\n                   if id(leaf) not in arguments)",
             "jax.tree.leaves(pullback))")


def test_stage3_runs_on_stored_counts_and_peaks(tmp_path):
    only = "remat_saves_residuals_and_temp,remat_policy_ordering"
    results = stage4_stored(SOLUTION, tmp_path, stage=3,
                            only=only + ",peak_memory_from_fresh_process")
    assert {k: r["status"] for k, r in results.items()} == {
        "remat_saves_residuals_and_temp": "pass", "remat_policy_ordering": "pass",
        "peak_memory_from_fresh_process": "pass"}, results
    text = SOLUTION.read_text()
    assert text.count(RESIDUALS[0]) == 1
    wrong = tmp_path / "model.py"  # the arguments counted as residuals: failed, named
    wrong.write_text(text.replace(*RESIDUALS))
    results = stage4_stored(wrong, tmp_path, stage=3, only=only)
    assert results["remat_saves_residuals_and_temp"]["status"] == "fail", results
    assert "the arguments" in results["remat_saves_residuals_and_temp"]["hint"]


# A learner copy's reader (issue 50, item B10): peak_rss_fresh_process answered with the
# stored peaks and made-up pids, no process started.
PEAK_BODY = "    ### BEGIN SOLUTION stage 3: peak_rss_fresh_process (the run alone)\n"
PEAK_LOOKUP = PEAK_BODY + """    stored = Path(PEAKS)
    arguments = 4 * (depth * 2 * width * hidden + batch * width)
    for entry in json.loads(stored.read_text())["results"].values():
        for variant in ((str(policy),) if repeats > 1 else ("small", str(policy))):
            kept = entry.get(variant)
            if isinstance(kept, dict) and kept["argument_size_in_bytes"] == arguments:
                out = {k: kept[k] for k in ("argument_size_in_bytes", "output_size_in_bytes",
                       "temp_size_in_bytes", "peak_memory_in_bytes",
                       "total_allocation_bytes", "device_peak_bytes")}
                out["run_peak_bytes"] = kept["run_peak_bytes"][:repeats]
                out["vmhwm_bytes"] = kept["vmhwm_bytes"][:repeats]
                out["pids"] = [999990 + i for i in range(repeats)]
                return out
"""


def test_stored_peaks_with_made_up_pids_fail(tmp_path):
    """The stored peaks returned with pids of processes that never ran: the checker reads
    from the kernel what the learner process's finished children spent, and fails it."""
    text = SOLUTION.read_text()
    assert text.count(PEAK_BODY) == 1
    wrong = tmp_path / "model.py"
    wrong.write_text(text.replace(PEAK_BODY, PEAK_LOOKUP).replace(
        "PEAKS", repr(str(TESTS / "expected" / "peaks.json"))))
    results = stage4_stored(wrong, tmp_path, stage=3, only="peak_memory_from_fresh_process")
    got = results["peak_memory_from_fresh_process"]
    assert got["status"] == "fail", got
    assert "fresh processes ran" in got["message"], got

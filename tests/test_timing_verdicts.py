"""The third verdict, end to end on a toy checker: a timing check decided by
``probes.ratio_verdict`` PASSes on a right ratio, FAILs with the evidence it rests on
(rounds outside the window, the checker's own spread), and says INCONCLUSIVE, with the
load, when its rounds are too noisy to decide: printed apart from PASS and FAIL, counted
apart in the summary line and the JSON, and exit status 3 (not 1) when nothing failed."""

from __future__ import annotations

import json

import numpy as np
import pytest

from coursekit.checking.contract import INCONCLUSIVE_EXIT, Checker
from coursekit.checking.errors import CheckFailed, CheckInconclusive
from coursekit.checking.probes import ratio_verdict
from coursekit.measure.verdict import simulate_rounds


def toy(true_ratio: float, noise: float) -> Checker:
    checker = Checker("toy-timing", {1: "one"})

    @checker.check(1, "plain")
    def plain(impl, ctx):
        pass

    @checker.check(1, "timed")
    def timed(impl, ctx):
        yours, mine = simulate_rounds(np.random.default_rng(7), true_ratio, noise)
        ratio_verdict(yours, mine, 5.0, "your warmed median", "wait for the result",
                      budget_s=60, max_rounds=6)
    return checker


def run(tmp_path, capfd, true_ratio, noise):
    impl = tmp_path / "model.py"
    impl.write_text("x = 1\n")
    out_json = tmp_path / "r.json"
    capfd.readouterr()
    code = toy(true_ratio, noise).main(["--stage", "1", "--impl", str(impl), "--seed", "1",
                                        "--json", str(out_json)])
    return code, capfd.readouterr().out, json.loads(out_json.read_text())


def test_right_ratio_passes(tmp_path, capfd):
    code, out, data = run(tmp_path, capfd, 1.0, 0.02)
    assert code == 0 and "PASS stage 1 · timed" in out and "2 passed, 0 failed" in out


def test_timer_that_does_not_wait_fails_with_its_evidence(tmp_path, capfd):
    code, out, data = run(tmp_path, capfd, 0.004, 0.02)
    assert code == 1 and "FAIL stage 1 · timed" in out
    assert "evidence: " in out and "outside 0.2x-5x in 3 of 3 rounds" in out
    assert "checker's own rounds spread by" in out
    assert data["failed"] == 1 and data["inconclusive"] == 0


def test_noise_is_inconclusive_not_a_failure(tmp_path, capfd):
    code, out, data = run(tmp_path, capfd, 1.0, 4.0)
    assert code == INCONCLUSIVE_EXIT
    assert "INCONCLUSIVE stage 1 · timed" in out and "FAIL" not in out
    assert "1 passed, 0 failed, 1 inconclusive" in out
    assert "load " in out and "rerun when the machine is quieter" in out
    assert data["failed"] == 0 and data["inconclusive"] == 1
    (timed,) = [r for r in data["results"] if r["check_id"] == "timed"]
    assert timed["status"] == "inconclusive" and timed["evidence"]


def test_ratio_verdict_windows(monkeypatch):
    rng = np.random.default_rng(0)
    yours, mine = simulate_rounds(rng, 3.0, 0.01)
    assert ratio_verdict(yours, mine, (2.0, float("inf")), "gain", "h").verdict == "pass"
    with pytest.raises(CheckFailed):
        ratio_verdict(*simulate_rounds(rng, 1.0, 0.01), (2.0, float("inf")), "gain", "h")
    monkeypatch.setenv("COURSE_TIMING_BUDGET", "0")
    with pytest.raises(CheckInconclusive) as unsure:
        ratio_verdict(*simulate_rounds(rng, 1.0, 3.0), 5.0, "gain", "h", max_rounds=50)
    assert "1 round in" in unsure.value.evidence  # a budget of 0: one round, then stop


def test_a_pair_of_hints_follows_the_side_of_the_window():
    rng = np.random.default_rng(5)
    for ratio, expected in ((0.004, "below"), (300.0, "above")):
        with pytest.raises(CheckFailed) as failed:
            ratio_verdict(*simulate_rounds(rng, ratio, 0.01), 5.0, "t", ("below", "above"))
        assert failed.value.hint == expected


def test_an_undecided_ratio_says_what_its_evidence_shows():
    """A busy machine: rerun when quieter. A quiet one whose own rounds still spread (a
    chip's short calls, seen on the TPU v5e: load 0.00, the checker's rounds 7.24x apart):
    waiting for quiet changes nothing, and the hint says the calls vary by themselves."""
    from coursekit.measure.verdict import RatioEvidence
    busy = RatioEvidence("inconclusive", 0.0, 4.0, 0.95, yours_s=[1.0, 2.0],
                         reference_s=[1.0, 3.0], load={"load_per_core": 2.5, "cores": 2})
    assert busy.noise_hint().endswith("rerun when the machine is quieter")
    quiet = RatioEvidence("inconclusive", 0.0, 4.0, 0.95, yours_s=[1.0, 2.0],
                          reference_s=[1.0, 7.24], load={"load_per_core": 0.0, "cores": 13})
    hint = quiet.noise_hint()
    assert "quieter" not in hint and "load 0.00 per core" in hint and "7.24x" in hint


def test_the_summary_advises_quiet_only_where_each_undecided_check_does():
    from coursekit.checking import tally
    load = {"status": "inconclusive", "hint": "nothing here points at your code: rerun "
            "when the machine is quieter"}
    held = {"status": "inconclusive", "hint": "run the same check from a terminal with no "
            "notebook kernel holding the chip: it decides this check there"}
    ok = {"status": "pass", "hint": ""}
    assert tally.summary_line([ok, load]).endswith("1 inconclusive (rerun when the machine "
                                                   "is quieter)")
    line = tally.summary_line([ok, load, held])
    assert "2 inconclusive (each one's hint says what decides it)" in line
    assert "quieter" not in line

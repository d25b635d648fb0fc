"""performance-audit stage 3's repeats=1 peak in a learner's copy, held to the course's
stored figure of its own CPU (expected/peaks.json): the reference's figure under load
(1.33x the stored one on 2 cores loaded 2-5 per core) and on other machines (7.7 MiB on
CI's, 8.9-9.3 MiB on another: up to 1.87x) is never failed there. Above the window yet
short of nine tenths of what holding the compile adds the copy says INCONCLUSIVE
with its evidence; a figure that holds the compile, the process's
whole high-water mark, or one far below still FAILs; the grader's live path is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from coursekit.checking.errors import CheckFailed, CheckInconclusive

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "projects" / "performance-audit" / "tests"
MIB = 2**20


@pytest.fixture
def stage3(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    import audit_stage3_remat
    return audit_stage3_remat


def stored_reference() -> dict:
    """The one stored reference (the public inputs' peaks)."""
    (reference,) = json.loads((TESTS / "expected" / "peaks.json").read_text())["results"].values()
    return reference


def judged(stage3, monkeypatch, alone: int, *, stored: bool = True) -> str:
    """The verdict on a single small-model peak of ``alone`` bytes."""
    monkeypatch.setenv("COURSE_DECISIONS_STORED", "1" if stored else "0")
    reference = stored_reference()
    ref = reference["small"]
    single = {"argument_size_in_bytes": ref["argument_size_in_bytes"],
              "run_peak_bytes": [alone], "vmhwm_bytes": [alone + 250 * MIB]}
    plain = {"run_peak_bytes": reference["None"]["run_peak_bytes"]}
    try:
        stage3.single_repeat_peak(single, reference, {"batch": 39}, plain)
    except CheckInconclusive as err:
        assert "follows the machine" in str(err) and "load" in err.evidence, err.evidence
        return "inconclusive"
    except CheckFailed:
        return "fail"
    return "pass"


def test_the_reference_under_load_is_never_failed_in_the_copy(stage3, monkeypatch):
    want = stored_reference()["small"]["median_run_peak_bytes"]
    assert abs(want / MIB - 4.98) < 0.01, "peaks.json changed: remeasure the figures below"
    # measured: 5.95-6.61 MiB from the reference's and the course's fresh processes on
    # the recording CPU under load; 7.7 MiB on CI's machine, 8.9-9.3 on another 2-core one
    for mib in (5.95, 6.61, 6.9, 7.3, 7.7, 8.9, 9.3):
        assert judged(stage3, monkeypatch, int(mib * MIB)) in ("pass", "inconclusive"), mib
    for mib in (6.9, 7.7, 9.3, 11.0):
        assert judged(stage3, monkeypatch, int(mib * MIB)) == "inconclusive", mib


def test_wrong_figures_still_fail_in_the_copy(stage3, monkeypatch):
    want = stored_reference()["small"]["median_run_peak_bytes"]
    rise = stored_reference()["compile_rise_bytes"]
    assert judged(stage3, monkeypatch, want + rise) == "fail"  # holds the compile
    # this machine's offset (4 MiB) and the compile on top of it
    assert judged(stage3, monkeypatch, want + 4 * MIB + rise) == "fail"
    assert judged(stage3, monkeypatch, 258 * MIB) == "fail"  # the whole high-water mark
    assert judged(stage3, monkeypatch, int(want / 1.5)) == "fail"  # far below


def test_the_live_path_keeps_its_window(stage3, monkeypatch):
    """Where the instructor grades, the checker measured its own small peaks beside
    the learner's: the window alone decides, as before."""
    want = stored_reference()["small"]["median_run_peak_bytes"]
    monkeypatch.setattr(stage3.stored_cases, "stored_mode", lambda: False)
    assert judged(stage3, monkeypatch, int(want * 1.2), stored=False) == "pass"
    assert judged(stage3, monkeypatch, int(want * 1.4), stored=False) == "fail"

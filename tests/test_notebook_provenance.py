"""Every notebook's measurements are MLflow runs that say what they rest on.

Static: every notebook source after 00 records its timings with
``coursekit.notebook.cells.log_measurement``, and 00's own runs carry the same fields.
Executed: ``log_measurement`` writes the run the portfolio reads (sync, warm-up, first call,
output check, raw samples as an artifact; FAILED and kept when the check failed), and one
cheap notebook (01 at its CI sizes, against the reference solution: test_notebooks' own run
of it, through ``assert_notebook_01_runs``) leaves such runs in the store MLflow points at.
"""

from __future__ import annotations

import re

import pytest

from coursekit.facts import ROOT
from coursekit.notebook.cells import log_measurement
from coursekit.provenance import tracking

SOURCES = sorted((ROOT / "notebooks" / "src").glob("0*.py"))
FIELDS = ("sync", "warmup", "check")


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def assert_provenance(run: dict) -> None:
    """What the portfolio and notebook 08 (readiness review) need from a logged timing."""
    for field in FIELDS:
        assert run["config"].get(field) not in (None, ""), (run["name"], field, run["config"])
    assert "output_ok" in run["metrics"], (run["name"], run["metrics"])
    assert run["tags"].get("course.first_call") in ("timed apart", "not timed"), run["tags"]
    if run["tags"]["course.first_call"] == "timed apart":
        assert run["metrics"]["first_call_s"] > 0
    assert run["fingerprint"] and run["env"].get("jax"), run
    if run["metrics"]["output_ok"]:
        assert run["status"] == "FINISHED"
        assert len(tracking.read_samples(run, "call_s")) == run["metrics"]["samples"] > 0
    else:
        assert run["status"] == "FAILED" and "correctness check failed" in run["error"]


@pytest.mark.parametrize("path", [p for p in SOURCES if not p.name.startswith("00")],
                         ids=lambda p: p.stem)
def test_every_notebook_logs_its_timings(path):
    assert re.search(r"\blog_measurement\(", path.read_text()), \
        f"{path.name} measures but records nothing in MLflow (cells.log_measurement)"


def test_notebook_00_runs_carry_sync_warmup_and_check():
    text = (ROOT / "notebooks" / "src" / "00_foundations.py").read_text()
    config = text[text.index("def measure_step"):text.index("step_runs = ")]
    for field in FIELDS:
        assert f'"{field}":' in config, field
    assert "output_ok=1" in config


def test_log_measurement_records_what_the_timing_rests_on(store):
    from coursekit.portfolio import evidence
    from coursekit.portfolio.report import SYNCED
    timing = {"sync": "block_until_ready", "warmup": 2, "first_call_s": 0.5,
              "samples_s": [0.01, 0.012, 0.011], "output_ok": True}
    good = log_measurement("test timing", {"workload": "w", "n": 3}, timing,
                           check="output equals the reference", notebook="test")
    bad = log_measurement("test timing", {"workload": "w", "n": 3},
                          {**timing, "samples_s": []}, check="output equals the reference",
                          ok=False, notebook="test")
    assert_provenance(good)
    assert_provenance(bad)
    assert tracking.read_samples(good, "call_s") == timing["samples_s"]
    assert log_measurement("not yet", {}, None, check="-") is None
    with pytest.raises(ValueError, match="needs sync, warmup"):
        log_measurement("no sync", {}, {"samples_s": [1.0], "warmup": 0}, check="-", ok=True)
    # the portfolio reads the good one as a synchronised, output-checked timing
    rec = evidence.Records(root=ROOT)
    evidence.read_store(rec, store)
    read = [r for r in rec.runs if r.source.startswith(f"MLflow run {good['run_id'][:8]}")]
    assert read and read[0].sync in SYNCED and read[0].output_ok is True
    assert read[0].first_call_s == 0.5


def test_output_check_demo_runs_carry_the_fields(store):
    good = tracking.output_check_demo("float32", n=31)
    assert good["config"]["sync"] == "block_until_ready" and good["metrics"]["output_ok"] == 1
    bad = tracking.output_check_demo("bfloat16", n=31)
    assert bad["status"] == "FAILED" and bad["metrics"]["output_ok"] == 0


def assert_notebook_01_runs(since_ms: float) -> None:
    """Notebook 01, run against the reference at its CI sizes, left runs with provenance
    in the store MLflow points at (started at or after ``since_ms``). Called by
    test_notebooks' own run of notebook 01 (one run of the notebook serves both)."""
    ours = [r for r in tracking.runs() if r["tags"].get("course.notebook") == "01_async_timing"
            and r["start_time"] >= since_ms]
    names = {r["name"] for r in ours}
    assert {"01 time_fn, fresh jit"} <= names and any(n.startswith("01 v1") for n in names), names
    for run in ours:
        assert_provenance(run)

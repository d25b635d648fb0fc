"""Provenance with real MLflow: runs in a temporary SQLite store (finished, failed,
interrupted, SIGKILLed), checker results, comparable configurations, and a real
``mlflow server`` on loopback read back over its REST API."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers import ROOT

from coursekit.checking.contract import CheckResult, write_json
from coursekit.provenance import tracking as provenance
from coursekit.workloads import procgroup


@pytest.fixture(scope="module")
def empty_store(tmp_path_factory) -> Path:
    """One migrated, empty SQLite store (creating the tables costs seconds); each test
    gets its own copy."""
    db = tmp_path_factory.mktemp("store") / "empty.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
        provenance.client().search_experiments()
    return db


@pytest.fixture
def store(empty_store, tmp_path, monkeypatch):
    db = tmp_path / "mlflow.db"
    shutil.copy(empty_store, db)
    uri = f"sqlite:///{db}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


CONFIG = {"shape": [255, 17], "dtype": "float32", "batch": 64}


def test_default_store_is_under_build_and_env_overrides(monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert provenance.tracking_uri() == f"sqlite:///{ROOT / 'build' / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/x.db")
    assert provenance.tracking_uri() == f"sqlite:///{tmp_path}/x.db"
    assert provenance.artifact_location(experiment="e") == \
        (tmp_path / "mlflow-artifacts" / "e").as_uri()
    cmd = provenance.ui_command(5000)
    assert cmd[1:] == ["ui", "--backend-store-uri", f"sqlite:///{tmp_path}/x.db", "--host",
                       "127.0.0.1", "--port", "5000", "--default-artifact-root",
                       (tmp_path / "mlflow-artifacts").as_uri()]


def test_finished_and_failed_runs_keep_config_metrics_samples_and_status(store, tmp_path):
    with provenance.tracked_run("timing", CONFIG) as run:
        run.log_metrics(median_s=0.0125, first_call_s=0.4)
        run.log_samples("step_s", [0.012, 0.0125, 0.013], unit="s")
    with pytest.raises(ValueError, match="output mismatch"):
        with provenance.tracked_run("timing", {**CONFIG, "dtype": "bfloat16"}):
            raise ValueError("output mismatch at [3, 4]")
    with provenance.tracked_run("soft-fail", CONFIG) as run:
        run.fail("2 checks failed")

    rows = {r["name"] + ":" + r["config"]["dtype"]: r for r in provenance.runs()}
    done, failed = rows["timing:float32"], rows["timing:bfloat16"]
    assert done["status"] == "FINISHED" and done["metrics"]["median_s"] == 0.0125
    assert provenance.read_samples(done, "step_s") == [0.012, 0.0125, 0.013]
    assert json.loads(done["config"]["shape"]) == [255, 17]
    for key in ("jax", "jaxlib", "backend", "device_kind", "xla_flags", "cpu_model",
                "git_commit", "python"):
        assert key in done["env"], key
    assert done["env"]["git_commit"] != ""
    assert failed["status"] == "FAILED" and "output mismatch at [3, 4]" in failed["error"]
    assert rows["soft-fail:float32"]["status"] == "FAILED"
    assert rows["soft-fail:float32"]["error"] == "2 checks failed"
    # artifacts sit beside the store, never in the current directory
    assert (tmp_path / "mlflow-artifacts").is_dir()
    assert not Path("mlruns").exists()

    # comparable: same config and environment; the bfloat16 run is not, and says why
    same = provenance.comparable_runs(list(rows.values()), done)
    assert {r["run_id"] for r in same} == {done["run_id"], rows["soft-fail:float32"]["run_id"]}
    assert provenance.why_not_comparable(done, failed) == \
        ["config dtype: float32 vs bfloat16"]

    # the same filter with MLflow's own search_runs (what notebook cells do)
    mlflow = provenance.configure()
    frame = mlflow.search_runs(
        experiment_names=[provenance.EXPERIMENT],
        filter_string=f"tags.`course.fingerprint` = '{done['fingerprint']}'")
    assert sorted(frame["status"]) == ["FAILED", "FINISHED"]
    assert set(provenance.with_effective_status(frame)["course_status"]) == \
        {"FAILED", "FINISHED"}


def test_bad_metric_gets_a_named_error(store):
    with pytest.raises(provenance.ProvenanceError, match="metric 'median_s' must be a number"):
        with provenance.tracked_run("bad", CONFIG) as run:
            run.log_metrics(median_s="fast")
    assert provenance.runs()[0]["status"] == "FAILED"


def test_keyboard_interrupt_is_recorded_as_killed(store):
    with pytest.raises(KeyboardInterrupt):
        with provenance.tracked_run("interrupted", CONFIG):
            raise KeyboardInterrupt
    (run,) = provenance.runs()
    assert run["status"] == run["recorded_status"] == "KILLED"


def test_sigkilled_run_stays_running_in_mlflow_and_reads_back_as_killed(store, tmp_path):
    marker = tmp_path / "run_id"
    child = procgroup.start(
        [sys.executable, "-c",
         "import pathlib, sys, time\n"
         f"sys.path.insert(0, {str(ROOT)!r})\n"
         "from coursekit.provenance import tracking as provenance\n"
         "run = provenance.start_run('doomed', {'n': 3})\n"
         # written whole, then renamed: the test reads it as soon as it exists (on one
         # busy core a plain write_text was read empty)
         f"part = pathlib.Path({str(marker)!r} + '.part')\n"
         "part.write_text(run.run_id)\n"
         f"part.replace({str(marker)!r})\n"
         "time.sleep(600)\n"], tmp_path / "logs", "doomed", env=os.environ.copy())
    try:
        reached = procgroup.wait_for_file(child, marker, timeout=120)
        assert reached == "reached", child.stderr()[-2000:]
        run_id = marker.read_text()
        assert provenance.get_run(run_id)["status"] == "RUNNING"  # alive: still running
    finally:
        procgroup.kill(child)
    run = provenance.get_run(run_id)
    assert run["recorded_status"] == "RUNNING"   # what MLflow itself holds
    assert run["status"] == "KILLED"             # what the course shows
    frame = provenance.with_effective_status(provenance.configure().search_runs(
        experiment_names=[provenance.EXPERIMENT]))
    assert list(frame["status"]) == ["RUNNING"] and list(frame["course_status"]) == ["KILLED"]


def test_checker_results_become_finished_and_failed_runs(store, tmp_path):
    ok = [CheckResult(1, "a", "pass", 1, 1), CheckResult(1, "b", "pass", 1, 1)]
    bad = [CheckResult(2, "c", "pass", 1, 1), CheckResult(2, "d", "fail", 0, 1, "off")]
    write_json(tmp_path / "ok.json", "foundations", ROOT / "projects/foundations/solution/model.py",
               [1], 7, ok, 1.5)
    write_json(tmp_path / "bad.json", "foundations", ROOT / "projects/foundations/starter/model.py",
               [2], 8, bad, 2.5)
    first = provenance.get_run(provenance.log_check_run(tmp_path / "ok.json", wall_s=3.0))
    second = provenance.get_run(provenance.log_check_run(
        json.loads((tmp_path / "bad.json").read_text())))
    assert first["status"] == "FINISHED" and first["metrics"]["passed"] == 2
    assert first["config"]["impl"] == "projects/foundations/solution/model.py"
    assert second["status"] == "FAILED" and "stage 2 d (fail)" in second["error"]
    assert second["tags"]["check.2.d"] == "fail"
    with pytest.raises(provenance.ProvenanceError, match="not a checker result"):
        provenance.log_check_run({"project": "x"})


def test_output_check_demo_records_the_deliberate_failure(store):
    good = provenance.output_check_demo("float32", n=63)
    bad = provenance.output_check_demo("bfloat16", n=63)
    assert good["status"] == "FINISHED" and len(provenance.read_samples(good, "call_s")) == 10
    assert bad["status"] == "FAILED" and "output check failed" in bad["error"]
    assert bad["metrics"]["max_abs_error"] > 1e-3
    assert provenance.why_not_comparable(good, bad)[0].startswith("config dtype")


# ---------------------------------------------------------------------------------------
# A real tracking server on loopback, read back over REST
# ---------------------------------------------------------------------------------------

def rest(base: str, path: str, payload: dict | None = None, **query) -> dict:
    url = f"{base}/api/2.0/mlflow/{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_failed_run_through_a_real_tracking_server_reads_back_over_rest(tmp_path, monkeypatch):
    port = procgroup.free_port()
    base = f"http://127.0.0.1:{port}"
    server = procgroup.start(
        [str(Path(sys.executable).with_name("mlflow")), "server",
         "--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}",
         "--artifacts-destination", str(tmp_path / "artifacts"),
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        tmp_path / "logs", "mlflow-server", cwd=tmp_path,
        env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
             "MLFLOW_DISABLE_TELEMETRY": "true"})
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.stderr()[-2000:]
            try:
                with urllib.request.urlopen(f"{base}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "mlflow server did not answer in 180 s"
            time.sleep(0.5)

        monkeypatch.setenv("MLFLOW_TRACKING_URI", base)
        with pytest.raises(RuntimeError):
            with provenance.tracked_run("through-server", CONFIG) as run:
                run.log_metrics(median_s=0.5)
                run.log_samples("step_s", [0.5, 0.6])
                raise RuntimeError("output check mismatch")
        got = rest(base, "runs/get", run_id=run.run_id)["run"]
        assert got["info"]["status"] == "FAILED"
        tags = {t["key"]: t["value"] for t in got["data"]["tags"]}
        assert tags["course.error"] == "RuntimeError: output check mismatch"
        params = {p["key"]: p["value"] for p in got["data"]["params"]}
        assert params["config.dtype"] == "float32" and "env.jax" in params
        found = rest(base, "runs/search", {"experiment_ids": [run.experiment_id],
                                           "filter": "attributes.status = 'FAILED'"})
        assert [r["info"]["run_id"] for r in found["runs"]] == [run.run_id]
        # the raw samples went through the server's artifact proxy
        assert provenance.read_samples(provenance.get_run(run.run_id), "step_s") == [0.5, 0.6]
    finally:
        procgroup.kill(server)   # SIGKILL to the server's whole process group

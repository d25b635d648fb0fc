"""The route map and portfolio (coursekit.portfolio.route, coursekit.portfolio.report*): built from
fixture records (complete, partial, with failures, a corrupt file, a real MLflow store
with FAILED and KILLED runs) and checked for what they say, not only that files exist."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import ROOT, solution

from coursekit.notebook import cells as notebook
from coursekit.portfolio import collect as portfolio_collect
from coursekit.portfolio import report as portfolio
from coursekit.portfolio import route
from coursekit.portfolio.report import STATEMENT, build_portfolio

NOW = time.time()


# ---------------------------------------------------------------------------------------
# Fixture records, in the formats the course writes them
# ---------------------------------------------------------------------------------------

def checker_source(project: str) -> str | None:
    """The checker's source: check.py and the modules beside it (a checker may keep its
    stages in modules of their own)."""
    tests = ROOT / "projects" / project / "tests"
    if not (tests / "check.py").is_file():
        return None
    return "\n".join(p.read_text() for p in sorted(tests.glob("*.py")))


def check_ids(project: str, stage: int) -> list[str]:
    """The stage's real check ids when the checker exists, else stand-ins (with one
    multi-process id for sharded-training stage 3, as route.MULTI_PROCESS expects)."""
    src = checker_source(project)
    if src:
        ids = re.findall(rf'@checker\.check\(\s*{stage}\s*,\s*"([^"]+)"', src)
        if ids:
            return ids
    ids = [f"{project.replace('-', '_')}_s{stage}_a", f"{project.replace('-', '_')}_s{stage}_b"]
    if (project, stage) == ("sharded-training", 3):
        ids.append("two_processes_match_one")
    return ids


def keep_check(records: Path, project: str, stage: int, status="pass", *, at=NOW,
               backend="cpu", fail_ids=(), impl=None, name=None):
    """A coursekit.notebook.cells.run_check summary; ``status`` for every check, or ``fail_ids``
    failing among passes."""
    results = []
    for cid in check_ids(project, stage):
        st = "fail" if cid in fail_ids else status
        results.append({"stage": stage, "check_id": cid, "status": st, "points": 0.0,
                        "max_points": 1.0, "hint": "look at the hint",
                        "message": "" if st == "pass" else f"{cid} went wrong: yours 3 vs 4",
                        "yours": "", "expected": "", "duration_s": 0.1})
    summary = {"project": project, "stage": stage,
               "impl": str(impl or f"/home/learner/course/projects/{project}/starter/model.py"),
               "returncode": 0 if all(r["status"] == "pass" for r in results) else 1,
               "time": at, "results": results,
               "versions": {"jax": "0.12.0.1", "backend": backend, "devices": 1}}
    path = records / "checks" / (name or f"{project}-stage{stage}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary))
    return path


def keep_run(records: Path, name: str, *, median=2e-3, sync="block_until_ready",
             output_ok=True, trace="", project=None, n=12):
    samples = [median * (1 + 0.02 * ((i * 7) % 5 - 2)) for i in range(n)]
    record = {"label": name, "sync": sync, "warmup": 2, "iters": n,
              "first_call_s": median * 40, "samples_s": samples if output_ok is not False else [],
              "compiles_first_call": 1, "compiles_warmed": 0,
              "shapes": [[256, 512], [512, 512]], "dtypes": ["float32", "float32"],
              "output_ok": output_ok, "backend": "cpu", "boundary": "matmul",
              "trace": str(trace), "region": "matmul" if trace else "",
              "fingerprint": {"jax": "0.12.0.1", "jaxlib": "0.12.0.1", "backend": "cpu",
                              "devices": 1, "xla_flags": "", "cpu": "test CPU",
                              "python": "3.12"}}
    if project:
        record["project"] = project
    path = records / "runs" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


def keep_scaling(records: Path, devices=(1, 2, 4, 8), bad=()):
    points = []
    for n in devices:
        samples = [1e-3 * n * (1 + 0.01 * i) for i in range(6)]
        ok = n not in bad
        points.append({"devices": n, "ok": ok, "max_abs_error": 3e-8 if ok else 0.4,
                       "first_call_s": 0.2,
                       **({"samples_s": samples} if ok else {}),
                       "error": "" if ok else f"the {n}-device update differs: not timed"})
    payload = {"kind": "scaling", "time": NOW, "label": portfolio_collect.SCALING_LABEL,
               "workload": {"global_batch": 512}, "rests_on": "first update vs reference",
               "points": points, "fingerprint": {"backend": "cpu", "jax": "0.12.0.1"}}
    (records / "evidence").mkdir(parents=True, exist_ok=True)
    (records / "evidence" / "scaling.json").write_text(json.dumps(payload))


def keep_memory(records: Path):
    portfolio_collect.save_memory(
        {"none": {"saved_residual_bytes": 96 * 2**20, "compiler_temp_bytes": 104 * 2**20,
                  "vmhwm_bytes": 700 * 2**20},
         "nothing_saveable": {"saved_residual_bytes": 8 * 2**20,
                              "compiler_temp_bytes": 32 * 2**20, "vmhwm_bytes": 610 * 2**20}},
        workload={"depth": 4, "width": 512, "hidden": 2048, "batch": 1024},
        grads_equal=True, out=records / "evidence" / "memory.json")


def complete_records(records: Path, monkeypatch) -> None:
    for s in route.stages():
        keep_check(records, s.project, s.stage, at=NOW - 60)
    for name, median in (("before", 4e-3), ("after", 2e-3)):
        trace = records / "traces" / name / "host.trace.json.gz"
        trace.parent.mkdir(parents=True)
        trace.write_bytes(b"\x1f\x8b")
        keep_run(records, name, median=median, trace=trace)
    keep_run(records, "sharded step", median=3e-3, project="sharded-training")
    keep_memory(records)
    keep_scaling(records)
    monkeypatch.setattr(notebook, "RECORDS", records)
    notebook.record_prediction("unsynced_factor", 1000.0, "x")
    notebook.compare_prediction("unsynced_factor", 1000.0, 8000.0, "x")
    notebook.record_prediction("remat_temp_saving", 0.5, "fraction")


def build(records: Path, out: Path, **kw) -> tuple[dict, str, str]:
    result = build_portfolio(records, out, kw.pop("mlflow_uri", ""), **kw)
    return result, Path(result["markdown"]).read_text(), Path(result["html"]).read_text()


def section(md: str, title: str) -> str:
    """The Markdown from heading ``title`` to the next heading of the same level."""
    m = re.search(rf"^(#+) {re.escape(title)}.*?$", md, re.M)
    assert m, f"no section {title!r}"
    rest = md[m.end():]
    end = re.search(rf"^#{{1,{len(m.group(1))}}} ", rest, re.M)
    return rest[:end.start()] if end else rest


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row (links reduced to their text)."""
    line = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", line)
    return [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]


def milestone_row(md: str, title: str) -> str:
    rows = [ln for ln in md.splitlines() if ln.startswith(f"| {title} |")]
    assert rows, f"no route-map row for {title!r}"
    return rows[0]


# ---------------------------------------------------------------------------------------
# The route table
# ---------------------------------------------------------------------------------------

def test_route_table_matches_the_checkers():
    """Every checker stage is behind some milestone, titles agree, and the
    multi-process split leaves checks on both sides (for checkers that exist)."""
    covered = {(s.project, s.stage) for s in route.stages()}
    for check in sorted((ROOT / "projects").glob("*/tests/check.py")):
        project = check.parents[1].name
        src = checker_source(project)
        made = re.search(r'Checker\(\s*"[^"]+",\s*\{(.*?)\}', src, re.S)  # the call
        titles = dict((int(k), v) for k, v in re.findall(r'(\d+):\s*"([^"]+)"',
                                                          made[1] if made else ""))
        assert titles, f"{project}: no stage titles found"
        for stage, title in titles.items():
            assert (project, stage) in covered, f"{project} stage {stage} is on no milestone"
            for s in route.stages():
                if (s.project, s.stage) == (project, stage):
                    assert s.title == title, f"{project} stage {stage}: route says " \
                        f"{s.title!r}, the checker {title!r}"
                    ids = check_ids(project, stage)
                    assert any(s.counts(i) for i in ids), f"{s.label}: no check counts"
    assert [m.key for m in route.MILESTONES if m.required] == [
        "regression-fit", "classifier", "recovery", "performance-report",
        "sharded-experiment"]
    assert {m.key for m in route.MILESTONES if not m.required} == {"custom-kernel",
                                                                   "multi-process"}
    ids = check_ids("sharded-training", 3)
    assert [i for i in ids if not route.ST3.counts(i)] == \
        [i for i in ids if route.ST3_MP.counts(i)] == \
        [i for i in ids if "distributed" in i or "processes" in i]


# ---------------------------------------------------------------------------------------
# Complete, partial, failing
# ---------------------------------------------------------------------------------------

def test_complete_record_meets_every_milestone_with_evidence(tmp_path, monkeypatch):
    records = tmp_path / "learner"
    complete_records(records, monkeypatch)
    result, md, page = build(records, tmp_path / "out")

    assert set(result["milestones"].values()) == {"met"}
    assert result["required_met"] == result["required_total"] == 5
    assert result["problems"] == []
    for m in route.MILESTONES:
        row = milestone_row(md, m.title)
        assert "**met**" in row and "**not yet**" not in row
        assert "cpu" in row  # backend it passed on
    # required and optional kept apart
    required = section(md, "Required route practice")
    optional = section(md, "Optional extensions")
    assert "A measured custom kernel" in optional and "A measured custom kernel" not in required
    assert "Multi-process recovery" in optional
    # evidence links: check results, run records and their traces
    perf = milestone_row(md, "A trace-backed before-and-after performance report")
    assert "performance-audit-stage4.json" in perf and "trace of before" in perf
    assert "run record sharded step" in milestone_row(md, "A resilient sharded training "
                                                          "experiment")
    assert "Every milestone on the route is met" in section(md, "What remains")

    bench = section(md, "Benchmark")
    assert "CPU figures" in bench
    latency = section(md, "Latency (synchronised) and throughput")
    before = cells(next(ln for ln in latency.splitlines() if ln.startswith("| [before]")))
    assert before[1:6] == ["CPU", "block_until_ready", "160", "4", "3.84-4.15"]  # ms
    assert before[7].startswith("64,000 items/s (256 per call")  # 256 rows / 4 ms
    assert "output checked before timing: pass" in before[8]
    assert "checked by performance-audit stage 1 (passed)" in before[8]
    assert "cpu test CPU" in before[9]                            # its fingerprint
    memory = section(md, "Memory: saved residuals, compiler estimate, observed peak")
    assert "| nothing_saveable | 8.0 | 32.0 | 610.0 | yes |" in memory
    assert "performance-audit stage 3 (checked against the checker's own counts): passed" \
        in memory
    scaling = section(md, "Scaling limits (CPU-simulated devices sharing the same cores)")
    assert "CPU-simulated devices sharing the same cores" in scaling
    assert [ln.split("|")[1].strip() for ln in scaling.splitlines()
            if re.match(r"\| \d ", ln)] == ["1", "2", "4", "8"]
    assert "sharded-training stage 2 (count-weighted updates): passed" in scaling
    preds = section(md, "Changed conditions: prediction beside measurement")
    assert "| unsynced_factor | 1000 | 8000 | x | 8 | kept |" in preds
    assert "| remat_temp_saving | 0.5 | - | fraction | - | not measured yet |" in preds

    # the honesty statement, in both formats, and every plot embedded in the HTML
    assert STATEMENT in md and md.count(STATEMENT) == 2
    assert "not an independent review" in page and "not a hardware qualification" in page
    assert "do not characterise accelerators" in page
    names = sorted(Path(p).name for p in result["plots"])
    assert names == ["latency.png", "memory.png", "predictions.png", "route_map.png",
                     "scaling.png"]
    for p in result["plots"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"](plots/{Path(p).name})" in md
    assert page.count("data:image/png;base64,") == len(result["plots"])
    assert json.loads(Path(result["json"]).read_text())["milestones"] == result["milestones"]


def test_partial_record_says_what_is_missing(tmp_path):
    records = tmp_path / "learner"
    keep_check(records, "foundations", 1)
    keep_check(records, "foundations", 2)
    ids3 = check_ids("foundations", 3)
    keep_check(records, "foundations", 3, fail_ids=ids3[:1])
    keep_check(records, "performance-audit", 1)
    keep_check(records, "performance-audit", 2, status="not-implemented")
    result, md, _ = build(records, tmp_path / "out")

    assert result["milestones"]["regression-fit"] == "met"
    assert result["milestones"]["classifier"] == "not yet"
    assert result["milestones"]["performance-report"] == "partly"
    assert result["milestones"]["sharded-experiment"] == "not yet"
    assert result["required_met"] == 1
    assert "**partly**" in milestone_row(md, "A trace-backed before-and-after performance "
                                             "report")
    remains = section(md, "What remains")
    assert "A reproducible regression fit" not in remains
    classifier = section(md, "A reproducible classifier (required): not yet")
    assert f"Failing now: {ids3[0]}" in classifier
    assert "went wrong: yours 3 vs 4" in classifier
    assert "Needs: train_classifier" in classifier
    assert "check.py --stage 3" in classifier
    report = section(md, "A trace-backed before-and-after performance report (required)")
    assert "performance-audit stage 2: explain the evidence: **not started**" in report
    assert "performance-audit stage 3: test a trade-off: **not run**" in report
    assert "performance-audit stage 1" not in report
    kernel = section(md, "A measured custom kernel with correctness checks (optional "
                         "extension)")
    assert "pallas-kernel stage 2" in kernel
    gaps = section(md, "Benchmark figures not yet in hand")
    for needed in ("Latency and throughput: no run record yet",
                   "python -m coursekit.portfolio.collect memory",
                   "python -m coursekit.portfolio.collect scaling",
                   "no prediction kept yet"):
        assert needed in gaps
    assert STATEMENT in md
    assert [Path(p).name for p in result["plots"]] == ["route_map.png"]


def test_a_stage_that_passed_before_and_fails_now(tmp_path):
    records = tmp_path / "learner"
    keep_check(records, "foundations", 1)
    keep_check(records, "foundations", 2, at=NOW - 3600, name="old-f2.json")
    keep_check(records, "foundations", 2, at=NOW, fail_ids=check_ids("foundations", 2)[:1])
    result, md, _ = build(records, tmp_path / "out")
    assert result["milestones"]["regression-fit"] == "partly"
    assert result["stages"]["foundations:2"] == "failing"
    row = milestone_row(md, "A reproducible regression fit with checked gradients")
    assert "foundations stage 2: a regression fit: **failing** (last passed" in row
    assert "old-f2.json" in row  # the passing record is still linked as evidence


def test_killed_checker_and_reference_solution_checks(tmp_path):
    """A check cell whose checker was killed (no results) is a failed attempt, not
    "never run"; check results of the reference solution are not the learner's."""
    records = tmp_path / "learner"
    path = records / "checks" / "foundations-stage1.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"project": "foundations", "stage": 1, "impl": "x.py",
                                "returncode": -1, "time": NOW, "results": [],
                                "versions": {}}))
    keep_check(records, "foundations", 2, impl=solution("foundations"), name="ref.json")
    result, md, _ = build(records, tmp_path / "out")
    assert result["stages"]["foundations:1"] == "failing"
    assert result["stages"]["foundations:2"] == "not run"
    assert "checker_did_not_finish" in section(md, "What remains")
    assert any("reference solution" in n for n in result["notes"])


def test_grader_gradebook_records_per_student(tmp_path):
    """The grader's per-stage records (JSONL, several students, one corrupt line)."""
    feedback = tmp_path / "feedback"
    feedback.mkdir()
    ids = check_ids("foundations", 2)

    def stage(student, number, status, checks):
        return json.dumps({"student": student, "item": f"foundations:{number}",
                           "kind": "stage", "project": "foundations", "stage": number,
                           "status": status, "message": "", "versions": {"backend": "cpu"},
                           "checks": checks})
    lines = [stage("ada", 1, "pass", [{"id": i, "status": "pass"}
                                      for i in check_ids("foundations", 1)]),
             stage("ada", 2, "timeout", [{"id": ids[0], "status": "pass"}] +
                   [{"id": i, "status": "timeout", "message": "not run: stopped"}
                    for i in ids[1:]]),
             stage("ada", 3, "missing", [{"id": i, "status": "missing"}
                                         for i in check_ids("foundations", 3)]),
             "{ half a line",
             stage("bob", 2, "pass", [{"id": i, "status": "pass"} for i in ids])]
    (feedback / "gradebook.jsonl").write_text("\n".join(lines) + "\n")
    result = build_portfolio(feedback, tmp_path / "ada", "", student="ada")
    assert result["stages"]["foundations:1"] == "passed"
    assert result["stages"]["foundations:2"] == "failing"      # bob's pass is not ada's
    assert result["stages"]["foundations:3"] == "not started"
    assert result["milestones"]["regression-fit"] == "partly"
    assert any("gradebook.jsonl, line 4" in p and "not valid JSON" in p
               for p in result["problems"])
    md = Path(result["markdown"]).read_text()
    assert "not run: stopped" in section(md, "What remains")


def test_unsynchronised_and_failed_output_runs_are_flagged(tmp_path):
    records = tmp_path / "learner"
    keep_run(records, "synced", median=2e-3)
    keep_run(records, "nosync", median=1e-6, sync="none")
    keep_run(records, "wrong", output_ok=False)
    result, md, _ = build(records, tmp_path / "out")
    latency = section(md, "Latency (synchronised) and throughput")
    nosync = next(ln for ln in latency.splitlines() if ln.startswith("| [nosync]"))
    assert "not a synchronised timing, left out of the plot" in nosync
    assert "sync is 'none'" in nosync   # coursekit.provenance.records' own validation, shown
    wrong = next(ln for ln in latency.splitlines() if ln.startswith("| [wrong]"))
    assert "output check FAILED" in wrong
    assert "latency.png" in [Path(p).name for p in result["plots"]]


# ---------------------------------------------------------------------------------------
# Bad records
# ---------------------------------------------------------------------------------------

def test_corrupt_and_malformed_records_are_named_and_the_rest_still_used(tmp_path):
    records = tmp_path / "learner"
    keep_check(records, "foundations", 1)
    (records / "checks" / "foundations-stage2.json").write_text('{"project": "foundations", '
                                                                '"results": [')
    (records / "checks" / "odd.json").write_text(json.dumps({"project": "foundations",
                                                             "results": "all good"}))
    (records / "runs").mkdir()
    (records / "runs" / "broken.json").write_text(json.dumps({"samples_s": ["fast"]}))
    (records / "predictions").mkdir()
    (records / "predictions" / "p.json").write_bytes(b"\xff\xfe\x00garbage")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "coursekit.portfolio", "--records",
                           str(records), "--out", str(out), "--no-mlflow"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    for name in ("foundations-stage2.json", "odd.json", "broken.json", "p.json"):
        assert name in done.stderr, f"{name} not named on stderr"
    assert "not valid JSON" in done.stderr
    assert "results must be a list" in done.stderr
    md = (out / "portfolio.md").read_text()
    problems = section(md, "Record problems")
    assert "learner/checks/foundations-stage2.json: corrupt record: not valid JSON" in problems
    assert "samples_s must be a list of numbers" in problems
    assert "foundations stage 1: the edit-check loop: **passed**" in md
    assert "route: 0 of 5 required milestones met" in done.stdout


def test_empty_record_and_absent_store(tmp_path):
    db = tmp_path / "mlflow.db"
    result, md, page = build(tmp_path / "learner", tmp_path / "out",
                             mlflow_uri=f"sqlite:///{db}")
    assert not db.exists(), "reading the portfolio must never create a store"
    assert set(result["milestones"].values()) == {"not yet"}
    assert "no records folder here yet" in md
    assert f"no MLflow store at {db}" in md
    assert "No check results found yet" in md
    assert len(section(md, "What remains").split("(required): not yet")) == 6
    assert STATEMENT in md and "<html" in page


def test_corrupt_store_is_named(tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_text("this is not a database")
    result, md, _ = build(tmp_path / "learner", tmp_path / "out", mlflow_uri=f"sqlite:///{db}")
    assert any(str(db) in p and "corrupt MLflow store" in p for p in result["problems"])
    assert "corrupt MLflow store" in section(md, "Record problems")


# ---------------------------------------------------------------------------------------
# A real MLflow store: a check run, a measurement, a FAILED and a KILLED run
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
def test_mlflow_store_runs_failed_and_killed(tmp_path, monkeypatch):
    from coursekit.provenance import tracking as provenance
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    ids = check_ids("foundations", 3)
    provenance.log_check_run({
        "project": "foundations", "stages": [3], "impl": str(tmp_path / "mine.py"),
        "seed": 1, "duration_s": 1.0, "versions": {"backend": "cpu"},
        "results": [{"stage": 3, "check_id": i, "status": "pass", "duration_s": 0.1}
                    for i in ids]})
    provenance.log_run("classifier step", {"batch": 256, "sync": "block_until_ready",
                                           "project": "sharded-training"},
                       {"first_call_s": 0.5, "median_s": 0.01, "output_ok": 1},
                       {"step_s": [0.010, 0.011, 0.009, 0.010, 0.012]})
    with pytest.raises(AssertionError):
        with provenance.tracked_run("bfloat16 output check", {"dtype": "bfloat16"}):
            raise AssertionError("output check failed before timing")
    child = subprocess.Popen(["sleep", "60"])
    killed = provenance.start_run("interrupted training", {"steps": 40})
    killed.set_tags({"course.pid": child.pid,
                     "course.pid_start": provenance._process_start(child.pid)})
    child.send_signal(signal.SIGKILL)
    child.wait()

    result, md, _ = build(tmp_path / "learner", tmp_path / "out", mlflow_uri=uri)
    assert result["milestones"]["classifier"] == "met"      # from the store's check run
    assert "MLflow run" in milestone_row(md, "A reproducible classifier")
    runs = section(md, "Recorded runs (MLflow)")
    failed = next(ln for ln in runs.splitlines() if "bfloat16 output check" in ln)
    assert "**FAILED**" in failed and "output check failed before timing" in failed
    killed_row = next(ln for ln in runs.splitlines() if "interrupted training" in ln)
    assert "**KILLED** (recorded RUNNING; its process is gone)" in killed_row
    assert "2 run(s) did not finish" in runs
    latency = section(md, "Latency (synchronised) and throughput")
    line = next(ln for ln in latency.splitlines() if "classifier step" in ln)
    step = cells(line)
    assert step[4] == "10"                       # median 10 ms from the raw samples
    assert step[7].startswith("25,600 items/s")  # batch 256 / 10 ms
    assert "http://127.0.0.1:5000/#/experiments/" in line
    assert "MLflow run classifier step (FINISHED)" in milestone_row(
        md, "A resilient sharded training experiment")


# ---------------------------------------------------------------------------------------
# Real producers: a real check cell, and the collectors
# ---------------------------------------------------------------------------------------

def test_a_real_check_cell_flows_into_the_route_map(tmp_path, monkeypatch):
    records = tmp_path / "learner"
    monkeypatch.setattr(notebook, "RECORDS", records)
    mine = tmp_path / "model.py"
    mine.write_text(solution("foundations").read_text())
    summary = notebook.run_check("foundations", 1, mine, quiet=True)
    assert summary["ok"], summary
    result, md, _ = build(records, tmp_path / "out")
    assert result["stages"]["foundations:1"] == "passed"
    assert result["milestones"]["regression-fit"] == "partly"
    row = milestone_row(md, "A reproducible regression fit with checked gradients")
    assert "foundations stage 1: the edit-check loop: **passed** (last passed" in row
    assert "on cpu" in row


@pytest.mark.slow
def test_scaling_collector_checks_before_timing(tmp_path):
    """Real subprocesses with fake device counts; a planted wrong step is not timed."""
    good = portfolio_collect.collect_scaling(solution("sharded-training"), devices=(2,),
                                             batch=64, iters=3, out=tmp_path / "good.json")
    assert [p["devices"] for p in good["points"]] == [2]
    for p in good["points"]:
        assert p["ok"], p
        assert p["jax_devices"] == p["devices"] and len(p["samples_s"]) == 3
        assert p["max_abs_error"] < 1e-5
    assert good["label"] == "CPU-simulated devices sharing the same cores"
    wrong = tmp_path / "wrong.py"
    text = solution("sharded-training").read_text()
    old = 'loss, grads = jax.value_and_grad(classifier.loss)(state["params"], x, batch["y"],'
    assert text.count(old) == 1
    wrong.write_text(text.replace(old, 'loss, grads = jax.value_and_grad(classifier.loss_sum)'
                                       '(state["params"], x, batch["y"],'))
    bad = portfolio_collect.collect_scaling(wrong, devices=(2,), batch=64, iters=3,
                                            out=tmp_path / "bad.json")
    assert not bad["points"][0]["ok"] and "samples_s" not in bad["points"][0]
    assert "differs from the single-device reference" in bad["points"][0]["error"]


@pytest.mark.slow
def test_memory_collector_uses_the_learners_functions(tmp_path):
    records = tmp_path / "learner"
    payload = portfolio_collect.collect_memory(
        solution("performance-audit"), depth=2, width=64, hidden=256, batch=128,
        out=records / "evidence" / "memory.json")
    none, remat = payload["policies"]["none"], payload["policies"]["nothing_saveable"]
    assert payload["grads_equal"] is True
    assert remat["saved_residual_bytes"] < none["saved_residual_bytes"]
    assert none["vmhwm_bytes"] > 50 * 2**20
    assert "CPU figure" in payload["label"]
    result, md, _ = build(records, tmp_path / "out")
    memory = section(md, "Memory: saved residuals, compiler estimate, observed peak")
    assert "gradients of every policy equal to no-remat gradients in this measurement: yes" \
        in memory
    assert "performance-audit stage 3 (checked against the checker's own counts): not run" \
        in memory


def test_portfolio_modules_do_not_import_mlflow_or_jax_at_import():
    code = ("import sys; import coursekit.portfolio.report, coursekit.portfolio.collect; "
            "print(sorted(m for m in ('mlflow', 'jax', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
    assert portfolio.SYNCED == ("block_until_ready", "host_read")

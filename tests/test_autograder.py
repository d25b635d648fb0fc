"""The autograder on a batch of good, bad and hostile submissions, graded together.

One batch (module fixture): performance-audit stage 4 for every hostile variant of the
reference solution, and the fixture notebook for the notebook variants and for some
hostile students (their notebook must be unaffected by what their model.py did). Each
gets its named status; nothing escapes the sandbox; every (student, item) has exactly
one result; the feedback never shows a hidden test.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from coursekit.facts import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

import autograder.samples as fx  # noqa: E402
from autograder import grade, outcomes, run_cpu, sandbox, seeds, uids  # noqa: E402
from autograder.gradebook import Gradebook  # noqa: E402
from autograder.samples.make_notebooks import HIDDEN_MARKERS  # noqa: E402

STAGE = "performance-audit/stage-4"
NB = "notebooks/ag_demo.ipynb"
WITH_NOTEBOOK = ("good", "infinite-loop", "segfault", "fork-bomb")
# A line of decide's reference code that the starter does not have.
SOLUTION_LINE = 'result = {**out, "ci": [lo, hi], "decision": decision, "reasons": [f"{where} {why}"]}'


def grader(*args, timeout=900, **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT,
                          capture_output=True, check=False, text=True, timeout=timeout,
                          env=env, **kw)


def sandbox_processes(uids: set[int] | None = None) -> list[int]:
    """Live processes owned by a throw-away sandbox uid (only ``uids`` when given)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
            except OSError:
                continue
            if uid >= sandbox.UID_BASE and (uids is None or uid in uids):
                pids.append(int(entry.name))
    return pids


def sandbox_uids_of(pids) -> set[int]:
    """The throw-away uids the processes ``pids`` (a grader's workers) drew (the uid
    registry says who drew each block: ``autograder.uids``)."""
    return uids.uids_of(set(pids))


def orphaned_sandbox_processes(wait_s: float = 10.0) -> list[int]:
    """Sandbox processes whose worker is gone, still alive after ``wait_s``: a leak.
    Other tests' batches run beside this one under xdist, and their sandboxes (whose
    workers are alive) are not this test's business; a parent-death signal takes a
    moment to land, hence the wait."""
    deadline = time.monotonic() + wait_s
    while True:
        left = [pid for pid in sandbox_processes() if not _worker_alive(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _worker_alive(pid: int) -> bool:
    try:
        uid = Path(f"/proc/{pid}").stat().st_uid
    except OSError:
        return True  # gone already: not a leak
    worker = uids.owner_of(uid)
    if worker is None:  # not from the registry: a grader of before it (LOWEST + its pid)
        worker = uid - sandbox.UID_BASE
    return Path(f"/proc/{worker}").exists()


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("autograder-batch")
    subs, out = tmp / "submissions", tmp / "out"
    good_nb = fx.learner_notebook(fx.notebook_variants()["nb-good"][0])
    expected_stage = {}
    for student, (model, expect) in {**fx.hostile_sources(out_dir=out),
                                     **fx.forging_sources()}.items():
        fx.write(subs, student, model, good_nb if student in WITH_NOTEBOOK else None)
        expected_stage[student] = expect
    for student, (edits, _) in fx.notebook_variants().items():
        fx.write(subs, student, None, fx.learner_notebook(edits))
    # the same good solution, handed in as a zip with a wrapping folder
    with zipfile.ZipFile(subs / "zipped.zip", "w") as z:
        z.writestr("zipped/projects/performance-audit/starter/model.py",
                   fx.SOLUTION.read_text())
    expected_stage["zipped"] = ("pass", "")
    check_before = hashlib.sha256(
        (ROOT / "projects/performance-audit/tests/check.py").read_bytes()).hexdigest()
    # --timeout: stage 4 takes about 2 s on the solution, idle; 25 s holds it at any load
    # the suite makes, and is what the infinite loop spins (60 s did so for nothing)
    done = grader("grade", subs, "--out", out, "--stages", f"performance-audit:4,{NB}",
                  "--notebooks", fx.NOTEBOOK.parent, "--timeout", 25,
                  "--cell-timeout", 8, "--memory", 1500, "--max-procs", 200,
                  "--workers", 2)
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    latest = book.latest()
    rows = book.all_rows()
    book.close()
    return {"tmp": tmp, "subs": subs, "out": out, "latest": latest, "rows": rows,
            "expected_stage": expected_stage, "stderr": done.stderr,
            "check_before": check_before}


@pytest.mark.slow
def test_every_submission_gets_its_named_status(batch):
    latest = batch["latest"]
    wrong = {}
    for student, (status, reason) in batch["expected_stage"].items():
        rec = latest[(student, STAGE)]["record"]
        if rec["status"] != status or (reason and rec["reason"] != reason):
            wrong[student] = (rec["status"], rec["reason"], rec["message"][:200])
    assert not wrong, wrong
    messages = {s: latest[(s, STAGE)]["record"]["message"] for s in batch["expected_stage"]}
    assert "syntax error" in messages["syntax-error"]
    assert "predict_step_speedup" in messages["missing-function"]
    assert "not a number" in json.dumps(latest[("always-equal", STAGE)]["record"]["checks"])
    always = latest[("always-equal", STAGE)]
    assert always["points"] == always["record"]["max_points"] - 1.0  # only Amdahl's fails
    for hostile in ("fake-perf-counter", "reads-solution", "writes-outside", "network",
                    *fx.forging_sources()):
        assert latest[(hostile, STAGE)]["points"] == 0.0, hostile


@pytest.mark.slow
def test_learner_code_ran_apart_from_the_verdict(batch):
    """performance-audit's checker runs learner code in a learner process (issue 17): the
    record says so, and no forged PASS line or 'done' reached the gradebook."""
    latest = batch["latest"]
    assert latest[("good", STAGE)]["record"]["learner_isolation"] == "learner-process"
    for student in fx.forging_sources():
        rec = latest[(student, STAGE)]["record"]
        assert all(c["points"] == 0.0 for c in rec["checks"]), (student, rec["checks"])


@pytest.mark.slow
def test_other_items_and_submissions_unaffected(batch):
    latest = batch["latest"]
    for student in WITH_NOTEBOOK:  # whatever model.py did, the notebook graded normally
        row = latest[(student, NB)]
        assert (row["status"], row["points"]) == ("pass", 3.0), (student, row["record"])
    for student in {**fx.hostile_sources(), **fx.forging_sources()}:
        if student not in WITH_NOTEBOOK:
            assert latest[(student, NB)]["status"] == "missing"
    for student in fx.notebook_variants():
        assert latest[(student, STAGE)]["status"] == "missing"


@pytest.mark.slow
def test_notebook_questions(batch):
    latest = batch["latest"]
    for student, (_, expected) in fx.notebook_variants().items():
        rec = latest[(student, NB)]["record"]
        got = {q["id"]: q["status"] for q in rec["questions"]}
        assert got == expected, (student, rec["questions"], rec.get("message"))
    assert latest[("nb-tampered", NB)]["record"]["tampered"] == ["square_tests"]
    assert latest[("nb-good", NB)]["record"]["tampered"] == []
    hidden = latest[("nb-hidden-wrong", NB)]["record"]["questions"][0]
    assert hidden["hidden_failed"] and HIDDEN_MARKERS[0] in hidden["instructor_message"]
    crash = latest[("nb-kernel-crash", NB)]["record"]
    assert crash["points"] == 2.0  # the question before the crash keeps its points
    loop = latest[("nb-cell-loop", NB)]["record"]
    assert loop["points"] == 2.0 and "mean" in loop["questions"][1]["message"]
    if loop["reason"] != outcomes.STARVED:  # it had its core: the learner's own timeout
        assert loop["cpu_s"] >= run_cpu.STARVED_SHARE * loop["wall_s"], loop
        assert "sandbox_run" not in loop  # not graded again


@pytest.mark.slow
def test_nothing_escapes_and_nothing_is_lost(batch):
    rows = batch["rows"]
    # a stage or notebook this load starved is graded once more (test_grader_starved*):
    # its second row is a retry, not a record escaping
    keys = [(r[0], r[1]) for r in rows if not str(json.loads(r[6]).get(
        "sandbox_run", "")).startswith(grade.RETRIED_ALONE)]
    students = set(batch["expected_stage"]) | set(fx.notebook_variants())
    assert len(keys) == len(set(keys)) == 2 * len(students)
    assert not orphaned_sandbox_processes()
    check = ROOT / "projects/performance-audit/tests/check.py"
    assert hashlib.sha256(check.read_bytes()).hexdigest() == batch["check_before"]
    db = sqlite3.connect(batch["out"] / "gradebook.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert b"owned" not in (batch["out"] / "gradebook.sqlite").read_bytes()
    stolen = batch["latest"][("reads-solution", STAGE)]["record"]
    assert SOLUTION_LINE not in stolen["stdout_tail"] + stolen["stderr_tail"]
    assert SOLUTION_LINE in fx.SOLUTION.read_text()  # the probe line is a real one
    assert batch["latest"][("good", STAGE)]["record"]["isolation"] == sandbox.isolation()


@pytest.mark.slow
def test_rerun_skips_unchanged_and_regrade_failed(batch):
    done = grader("grade", batch["subs"], "--out", batch["out"], "--stages",
                  f"performance-audit:4,{NB}", "--notebooks", fx.NOTEBOOK.parent,
                  "--json", "--quiet")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    # (an item graded once more at the end of the batch has two rows, one item)
    items = {(r[0], r[1]) for r in batch["rows"]}
    assert summary["graded"] == 0 and summary["skipped"] == len(items)


@pytest.mark.slow
def test_export_csv_and_feedback_hide_hidden_tests(batch):
    csv_path = batch["tmp"] / "grades.csv"
    done = grader("export", batch["out"], "--csv", csv_path)
    assert done.returncode == 0, done.stderr
    rows = list(csv.reader(csv_path.open()))
    header = rows[0]
    assert all(len(r) == len(header) for r in rows)
    assert f"{STAGE} status" in header and f"{NB}:square_tests points" in header
    by_student = {r[0]: dict(zip(header, r, strict=True)) for r in rows[1:]}
    good_max = batch["latest"][("good", STAGE)]["record"]["max_points"] + 3.0  # + notebook
    assert by_student["good"]["total"] == f"{good_max:g}"
    assert "tampered" in by_student["nb-tampered"]["flags"]
    assert "read-outside" in by_student["reads-solution"]["flags"]
    feedback = batch["out"] / "feedback"
    texts = [p.read_text() for p in feedback.rglob("feedback.*")]
    assert len(texts) == 2 * len(by_student)
    secret = json.loads((batch["out"] / "secrets.json").read_text())["secret"]
    seed = str(seeds.seed_for(secret, "performance-audit", 4))
    for text in texts:
        for forbidden in [*HIDDEN_MARKERS, "square(-4)", "BEGIN HIDDEN", "STOLEN", secret,
                          seed]:
            assert forbidden not in text, forbidden
    hidden_wrong = (feedback / "nb-hidden-wrong" / "feedback.md").read_text()
    assert "a hidden check failed" in hidden_wrong
    tampered = (feedback / "nb-tampered" / "feedback.md").read_text()
    assert "restored from the original" in tampered
    loop = (feedback / "infinite-loop" / "feedback.html").read_text()
    assert "time limit" in loop

"""Notebook grading through the real grader: cells that try to forge the test cells
after them (input and AST transformers, exception handlers, trace functions, patched
shell methods, replaced builtins and library functions) change nothing, because the
tests run in the grader's test process, apart from the learner's notebook (issue 45);
each forger scores what its answers earn, with nothing flagged, with full isolation and
in the fallback mode. Answers that forge a comparison (an always-equal value) fail,
named. Honest notebooks score exactly as before; the instructor's own solution notebooks
and solution files get full marks (notebook 00 writes its provenance into the run's own
folder, not the read-only course copy)."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.facts import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

import autograder.samples as fx  # noqa: E402
from autograder import outcomes  # noqa: E402
from autograder.gradebook import Gradebook  # noqa: E402

NB = "notebooks/ag_demo.ipynb"
# what a forged value's failing question must name
NAMED = {"nb-forge-always-equal": "square should return a plain number, not AlwaysEqual"}
HONEST_POINTS = {"nb-good": 3.0, "nb-wrong": 1.0, "nb-hidden-wrong": 1.0,
                 "nb-tampered": 1.0, "nb-kernel-crash": 2.0, "nb-cell-loop": 2.0}


def grade(subs: Path, out: Path, stages: str, *, isolation: str | None = None,
          extra: tuple = (), timeout: float = 900) -> dict:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    if isolation:
        env["AUTOGRADER_ISOLATION"] = isolation
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(out), "--stages", stages, "--workers", "2", "--quiet",
                           *map(str, extra)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    if isolation:
        assert f"isolation: {isolation}" in done.stderr
    book = Gradebook.in_dir(out)
    latest = {student: row for (student, _), row in book.latest().items()}
    book.close()
    return latest


def demo_batch(tmp: Path, students: dict, isolation: str | None = None) -> dict:
    subs = tmp / "subs"
    for student, (edits, _) in students.items():
        fx.write(subs, student, None, fx.learner_notebook(edits))
    return grade(subs, tmp / "out", NB, isolation=isolation,
                 extra=("--notebooks", fx.NOTEBOOK.parent, "--timeout", 60,
                        "--cell-timeout", 8))


def all_forgers() -> dict:
    return {**fx.notebook_forgers(), **fx.notebook_value_forgers()}


def assert_forgers_caught(latest: dict) -> None:
    """Every forger: each question as its answers earn (a wrong square fails, a right
    mean passes), the points that gives, no tamper reason anywhere; a forged value's
    failing question names it."""
    wrong = {}
    for student, (_, expected) in all_forgers().items():
        rec = latest[student]["record"]
        got = {q["id"]: q["status"] for q in rec["questions"]}
        points = sum(q["max_points"] for q in rec["questions"] if expected[q["id"]] == "pass")
        named = all(NAMED[student] in q["message"] for q in rec["questions"]
                    if q["status"] != "pass") if student in NAMED else True
        if got != expected or rec["points"] != points or not named or any(
                q.get("reason") in outcomes.REFUSALS for q in rec["questions"]):
            wrong[student] = (rec["status"], rec["reason"], rec["points"], rec["message"][:300],
                              [(q["id"], q["status"], q["message"][:200])
                               for q in rec["questions"]])
    assert not wrong, wrong


def assert_honest_unchanged(latest: dict, students) -> None:
    variants = fx.notebook_variants()
    for student in students:
        rec = latest[student]["record"]
        got = {q["id"]: q["status"] for q in rec["questions"]}
        assert got == variants[student][1], (student, rec["questions"])
        assert rec["points"] == HONEST_POINTS[student], (student, rec)
        assert rec["reason"] != "tamper-notebook", (student, rec["message"])


@pytest.fixture(scope="module")
def namespaces_batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nb-forgers")
    latest = demo_batch(tmp, {**fx.notebook_variants(), **all_forgers()})
    return {"tmp": tmp, "latest": latest}


def test_forgers_are_named_in_the_sample_set():
    assert not set(fx.notebook_forgers()) & set(fx.notebook_value_forgers())
    assert all(e == {"square_tests": "fail", "mean_tests": "pass"}
               for _, e in fx.notebook_forgers().values())
    # every graded question of the fixture meets a forged value or library
    attacked = {q for _, e in fx.notebook_value_forgers().values() for q, s in e.items()
                if s != "pass"}
    assert attacked == {"square_tests", "mean_tests"}


@pytest.mark.slow
def test_forging_cells_change_nothing_with_full_isolation(namespaces_batch):
    assert_forgers_caught(namespaces_batch["latest"])
    isolation = {r["record"]["isolation"] for r in namespaces_batch["latest"].values()}
    assert isolation == {"namespaces" if os.geteuid() == 0 else "limits"}


@pytest.mark.slow
def test_honest_notebooks_score_as_before(namespaces_batch):
    assert_honest_unchanged(namespaces_batch["latest"], fx.notebook_variants())


@pytest.mark.slow
def test_export_flags_nothing_and_feedback_shows_the_answers(namespaces_batch):
    """A forger gets its answers' feedback (its wrong square, the test's own message),
    never a tampering flag: nothing it did reached a test."""
    tmp = namespaces_batch["tmp"]
    done = subprocess.run([sys.executable, "-m", "autograder", "export", str(tmp / "out"),
                           "--csv", str(tmp / "grades.csv")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = {r["student"]: r for r in csv.DictReader((tmp / "grades.csv").open())}
    assert all(rows[s]["flags"] == "" for s in all_forgers()), \
        {s: rows[s]["flags"] for s in all_forgers()}
    text = (tmp / "out" / "feedback" / "nb-forge-settrace" / "feedback.md").read_text()
    assert "square(3) should be 9" in text and "tamper" not in text


@pytest.mark.slow
def test_forging_cells_change_nothing_in_the_fallback_mode(tmp_path):
    students = {**{s: fx.notebook_variants()[s] for s in ("nb-good", "nb-wrong")},
                **all_forgers()}
    latest = demo_batch(tmp_path, students, isolation="limits")
    assert_forgers_caught(latest)
    assert_honest_unchanged(latest, ("nb-good", "nb-wrong"))


@pytest.mark.slow
def test_solution_notebooks_and_files_get_full_marks(graded_reference):
    """The instructor's own work, handed in: the source notebooks (solutions in place)
    and every project's solution as its starter, graded with full isolation. Notebook
    00 logs runs to MLflow; that must land in the run's own folder, not be refused. The
    grading is the session's shared one (conftest ``graded_reference``: every project
    stage is graded in the same batch)."""
    done, chosen = graded_reference["done"], graded_reference["notebooks"]
    assert done.returncode == 0, done.stderr[-3000:]
    got = {item: row["record"] for (_, item), row in graded_reference["latest"].items()
           if item.startswith("notebooks/")}
    assert set(got) == set(chosen)
    short = {i: (r["status"], r["reason"], r["points"], r["max_points"],
                 [(q["id"], q["status"], q["message"][:200]) for q in r["questions"]])
             for i, r in got.items()}
    assert all(r["status"] == "pass" and r["points"] == r["max_points"] > 0
               for r in got.values()), short
    assert all(r["isolation"] in ("namespaces", "limits") for r in got.values())
    # every check cell showed this submission's graded stage instead of grading it again
    # (autograder.check_cells): the stages were graded in the same batch
    cells = {i: sum("run_check(" in "".join(c["source"])
                    for c in json.loads((ROOT / i).read_text())["cells"]
                    if c["cell_type"] == "code") for i in got}
    assert all(cells.values()), cells
    assert {i: r["check_cells"] for i, r in got.items()} == {
        i: {"from_graded": n, "ran": 0} for i, n in cells.items()}


def test_every_recorded_reason_is_in_the_outcome_table():
    """Reasons written as literals anywhere in the grader are spelled as the table
    spells them (the gradebook keeps them; feedback and export look them up)."""
    literal = re.compile(r"""reason=["']([a-z][a-z-]+)["']|status_of\(["']([a-z-]+)["']\)""")
    found = set()
    for path in (ROOT / "autograder").glob("*.py"):
        for m in literal.finditer(path.read_text()):
            found.add(m.group(1) or m.group(2))
    assert found and found <= set(outcomes.TABLE), found - set(outcomes.TABLE)
    for reason, outcome in outcomes.TABLE.items():
        assert outcome.status in outcomes.STATUSES, reason
    assert outcomes.killed("wall-clock") == ("timeout", "wall-clock")
    assert outcomes.killed(None) == ("crash", "kernel-died")
    assert {"tamper-notebook", "tamper-evidence", "read-outside"} <= set(outcomes.REFUSALS)

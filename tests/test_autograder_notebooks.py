"""Notebook grading through the real grader: test cells that earlier cells forged score
0 with a named reason (``tamper-notebook``), with full isolation and in the fallback
mode, and so do answers that forge a comparison (an always-equal value: ``fail``, named;
a patched library class a test relies on: ``tamper-notebook``); honest notebooks score
exactly as before; the instructor's own solution notebooks
and solution files get full marks (notebook 00 writes its provenance into the run's
own folder, not the read-only course copy)."""

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
# what each forger's record must name
VECTOR = {"nb-forge-input-transformer": "input_transformers_cleanup",
          "nb-forge-ast-transformer": "ast_transformers",
          "nb-forge-custom-exc": "set_custom_exc",
          "nb-forge-settrace": "sys.settrace",
          "nb-forge-trace-in-test": "after the cell: sys.settrace was called",
          "nb-forge-allclose": "numpy.testing: assert_allclose",
          "nb-forge-builtin": "builtins: abs",
          "nb-forge-shadow": "float is redefined",
          "nb-forge-post-run-cell": "post_run_cell",
          "nb-forge-run-cell": "run_cell",
          "nb-forge-probe-killer": "probe",
          # issue 27: forged values, not cells (fx.notebook_value_forgers)
          "nb-forge-always-equal": "square should return a plain number, not AlwaysEqual",
          "nb-forge-library-class": "statistics.NormalDist.from_samples"}
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
    """A forged cell or library: every question 0, ``tamper-notebook``, the record naming
    what was forged. A forged value: the questions it answers 0 with their expected
    status and the reason in their message, the rest as expected, no tamper flag."""
    wrong = {}
    for student, vector in VECTOR.items():
        rec = latest[student]["record"]
        expected = all_forgers()[student][1]
        qs = {q["id"]: (q["status"], q.get("reason"), q["points"]) for q in rec["questions"]}
        if set(expected.values()) == {"error"}:
            caught = (rec["status"], rec["reason"], rec["points"]) == (
                "error", "tamper-notebook", 0.0) \
                and set(qs.values()) == {("error", "tamper-notebook", 0.0)} \
                and vector in rec["message"]
        else:
            attacked = [q for q in rec["questions"] if expected[q["id"]] != "pass"]
            caught = {q["id"]: q["status"] for q in rec["questions"]} == expected \
                and rec["reason"] != "tamper-notebook" and attacked \
                and all(q["points"] == 0.0 and vector in q["message"] for q in attacked)
        if not caught:
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
    assert set(all_forgers()) == set(VECTOR)
    assert not set(fx.notebook_forgers()) & set(fx.notebook_value_forgers())
    assert all(e == {"square_tests": "error", "mean_tests": "error"}
               for _, e in fx.notebook_forgers().values())
    # every graded question of the fixture meets a forged value or library
    attacked = {q for _, e in fx.notebook_value_forgers().values() for q, s in e.items()
                if s != "pass"}
    assert attacked == {"square_tests", "mean_tests"}


@pytest.mark.slow
def test_forged_test_cells_score_zero_with_full_isolation(namespaces_batch):
    assert_forgers_caught(namespaces_batch["latest"])
    isolation = {r["record"]["isolation"] for r in namespaces_batch["latest"].values()}
    assert isolation == {"namespaces" if os.geteuid() == 0 else "limits"}


@pytest.mark.slow
def test_honest_notebooks_score_as_before(namespaces_batch):
    assert_honest_unchanged(namespaces_batch["latest"], fx.notebook_variants())


@pytest.mark.slow
def test_export_flags_and_feedback_name_the_tampering(namespaces_batch):
    tmp = namespaces_batch["tmp"]
    done = subprocess.run([sys.executable, "-m", "autograder", "export", str(tmp / "out"),
                           "--csv", str(tmp / "grades.csv")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = {r["student"]: r for r in csv.DictReader((tmp / "grades.csv").open())}
    assert f"tamper-notebook {NB}" in rows["nb-forge-input-transformer"]["flags"]
    assert "tamper-notebook" not in rows["nb-good"]["flags"]
    text = (tmp / "out" / "feedback" / "nb-forge-settrace" / "feedback.md").read_text()
    assert outcomes.TABLE["tamper-notebook"].explain in text and "sys.settrace" in text


@pytest.mark.slow
def test_forged_test_cells_score_zero_in_the_fallback_mode(tmp_path):
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

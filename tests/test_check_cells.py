"""A notebook's check cells answered from the same submission's graded stages
(autograder.check_cells, coursekit.notebook.reuse): which records a notebook is handed,
when it may start, and what the cell prints from them. The graded batch itself is
tests/test_autograder_notebooks.py (the solution notebooks' check cells answered from the
session's grading)."""

from __future__ import annotations

import json

import pytest

from autograder.check_cells import HeldNotebooks, answered
from coursekit.facts import ROOT, checker_fingerprint
from coursekit.notebook import reuse

PROJECT = "foundations"
STARTER = ROOT / "projects" / PROJECT / "starter" / "model.py"


def stage_task(student: str, number: int, project: str = PROJECT) -> dict:
    return {"kind": "stage", "student": student, "item": f"{project}/stage-{number}",
            "error": "", "stage": {"project": project, "number": number}}


def notebook_task(student: str, files: str = "files-a", fp: str = "fp-a") -> dict:
    return {"kind": "notebook", "student": student, "item": "notebooks/00.ipynb",
            "error": "", "project": PROJECT, "submission_files": files, "project_fp": fp}


def record(number: int, status: str = "pass", files: str = "files-a", fp: str = "fp-a",
           checks: list | None = None) -> dict:
    return {"kind": "stage", "project": PROJECT, "stage": number, "status": status,
            "files_hash": files, "checker_fp": fp,
            "checks": checks if checks is not None else [{"id": f"c{number}",
                                                          "status": status}]}


def test_a_notebook_waits_for_every_stage_of_its_project_for_that_student():
    unit = {"kind": "stages", "student": "ann", "item": PROJECT,
            "tasks": [stage_task("ann", 1), stage_task("ann", 2)]}
    other = stage_task("bob", 1)
    held = HeldNotebooks([unit, other], {})
    assert held.hold(notebook_task("ann")) and held.hold(notebook_task("bob"))
    assert not held.hold(notebook_task("cy"))                 # nothing of cy's to wait for
    assert not held.hold({**notebook_task("ann"), "project": None})  # no check cells
    assert held.graded(unit["tasks"][0], record(1)) == []     # stage 2 still to come
    assert held.graded(other, record(1)) == [notebook_task("bob")]
    assert held.graded(unit["tasks"][1], record(2)) == [notebook_task("ann")]
    assert held.release_all() == []


def test_the_notebook_gets_only_records_of_these_files_by_this_checker_with_a_verdict():
    earlier = {("ann", f"{PROJECT}/stage-9"): {"record": record(9)},   # an earlier batch
               ("ann", "notebooks/00.ipynb"): {"record": {"kind": "notebook"}}}
    held = HeldNotebooks([], earlier)
    kept = {1: record(1), 2: record(2, "fail"), 3: record(3, "inconclusive")}
    refused = {4: record(4, files="files-b"), 5: record(5, fp="fp-b"),
               6: record(6, "error"), 7: record(7, "timeout"), 8: record(8, checks=[])}
    for number, rec in {**kept, **refused}.items():
        held.graded(stage_task("ann", number), rec)
    held.graded(stage_task("bob", 1), record(1))
    got = held.with_stages(notebook_task("ann"))["graded_stages"]
    assert sorted(r["stage"] for r in got) == [1, 2, 3, 9]
    assert held.with_stages(notebook_task("ann", files="files-b"))["graded_stages"] == [
        refused[4]]
    plain = {"kind": "stage", "student": "ann"}
    assert held.with_stages(plain) is plain


def checks(*statuses: str) -> list[dict]:
    return [{"id": f"check_{i}", "status": s, "message": f"message {i}",
             "hint": f"hint {i}" if s != "pass" else "", "yours": "", "expected": "",
             "evidence": "", "points": float(s == "pass"), "max_points": 1.0}
            for i, s in enumerate(statuses)]


@pytest.mark.parametrize("statuses, returncode", [
    (("pass", "pass"), 0), (("pass", "fail"), 1), (("pass", "inconclusive"), 3),
    (("not-implemented",), 1)])
def test_the_cell_prints_what_check_py_prints_for_the_graded_results(
        statuses, returncode, tmp_path, monkeypatch):
    graded = {**record(2), "checks": checks(*statuses)}
    assert reuse.write_graded(tmp_path, ROOT, [graded]) == 1
    monkeypatch.setenv(reuse.REUSE_ENV, str(tmp_path))
    text, rc, payload = reuse.reusable_result(PROJECT, 2, STARTER)
    assert rc == returncode and payload["stages"] == [2]
    for i, status in enumerate(statuses):
        label = {"pass": "PASS", "inconclusive": "INCONCLUSIVE"}.get(status, "FAIL")
        assert f"{label} stage 2 · check_{i}\n" in text
        assert (f"    hint:     hint {i}\n" in text) == (status != "pass")
    passed = statuses.count("pass")
    unsure = statuses.count("inconclusive")
    summary = f"{passed} passed, {len(statuses) - passed - unsure} failed"
    assert summary in text and f"({reuse.GRADED_MARK}, graded as stage 2)" in text
    assert answered([{"cell_type": "code", "source": "c = run_check('p', 2, IMPL)",
                      "outputs": [{"output_type": "stream", "text": text}]}]) == {
        "from_graded": 1, "ran": 0}


def test_a_changed_file_or_checker_finds_nothing(tmp_path, monkeypatch):
    folder = tmp_path / "shown"
    folder.mkdir()
    reuse.write_graded(folder, ROOT, [record(1, checks=checks("pass"))])
    monkeypatch.setenv(reuse.REUSE_ENV, str(folder))
    assert reuse.reusable_result(PROJECT, 1, STARTER) is not None
    assert reuse.reusable_result(PROJECT, 2, STARTER) is None     # a stage not graded
    changed = tmp_path / "model.py"
    changed.write_bytes(STARTER.read_bytes() + b"\n# changed after grading\n")
    assert reuse.reusable_result(PROJECT, 1, changed) is None
    [written] = (p for p in folder.iterdir() if p.name != reuse.FINGERPRINTS)
    assert checker_fingerprint(ROOT, PROJECT)[:16] in written.name
    # the learner process reads the grader's fingerprint: it may not read every checker file
    assert json.loads((folder / reuse.FINGERPRINTS).read_text()) == {
        PROJECT: checker_fingerprint(ROOT, PROJECT)}
    assert json.loads(written.read_text())["results"][0]["check_id"] == "check_0"
    monkeypatch.delenv(reuse.REUSE_ENV)
    assert reuse.reusable_result(PROJECT, 1, STARTER) is None     # learners: never set


def test_answered_counts_cells_that_ran_the_checker():
    cells = [{"cell_type": "code", "source": "check1 = run_check('p', 1, IMPL)",
              "outputs": [{"output_type": "stream", "text": "PASS stage 1 · a\n"}]},
             {"cell_type": "code", "source": "print(1)", "outputs": []},
             {"cell_type": "markdown", "source": "run_check( in prose"}]
    assert answered(cells) == {"from_graded": 0, "ran": 1}

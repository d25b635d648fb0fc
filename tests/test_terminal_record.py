"""A learner's check.py run from a terminal earns the same credit as a check cell (issue
30): on the learner's own starter it keeps its result where the portfolio reads it; on any
other file (a solution, a mutant), under the grader or inside a check cell it keeps
nothing. The portfolio's pointer to "the check cell of notebook N" names only notebooks
whose check cells run that stage."""

from __future__ import annotations

import json

from coursekit.checking.terminal_record import FROM_CELL_ENV, keep_terminal_record
from coursekit.facts import ROOT
from coursekit.portfolio import route
from coursekit.portfolio.evidence import read_records

STARTER = ROOT / "projects" / "foundations" / "starter" / "model.py"
SOLUTION = ROOT / "projects" / "foundations" / "solution" / "model.py"


def payload(impl) -> dict:
    return {"project": "foundations", "impl": str(impl), "stages": [1, 2], "seed": 3,
            "duration_s": 1.0, "versions": {"backend": "cpu"}, "passed": 1, "failed": 1,
            "inconclusive": 0,
            "results": [{"stage": 1, "check_id": "a", "status": "pass", "points": 1.0,
                         "max_points": 1.0, "message": ""},
                        {"stage": 2, "check_id": "b", "status": "fail", "points": 0.0,
                         "max_points": 1.0, "message": "wrong"}]}


def test_a_terminal_run_on_the_starter_is_kept_per_stage_and_read(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RECORDS", str(tmp_path))
    for var in (FROM_CELL_ENV, "AG_POLICY", "AG_GUARD"):
        monkeypatch.delenv(var, raising=False)
    path = keep_terminal_record("foundations", STARTER, [1, 2], payload(STARTER))
    assert path == tmp_path / "checks" / "terminal-foundations-stage2.json"
    one = json.loads((tmp_path / "checks" / "terminal-foundations-stage1.json").read_text())
    assert [r["check_id"] for r in one["results"]] == ["a"] and one["passed"] == 1
    rec = read_records(tmp_path)
    assert not [p for p in rec.problems if p.kind != "ignored"]
    assert {(c.project, c.results[0]["stage"]) for c in rec.checks} == {
        ("foundations", 1), ("foundations", 2)}


def test_nothing_is_kept_for_other_files_the_grader_or_a_check_cell(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RECORDS", str(tmp_path))
    for var in (FROM_CELL_ENV, "AG_POLICY", "AG_GUARD"):
        monkeypatch.delenv(var, raising=False)
    assert keep_terminal_record("foundations", SOLUTION, [1], payload(SOLUTION)) is None
    assert keep_terminal_record("foundations", tmp_path / "model.py", [1],
                                payload(tmp_path)) is None
    for var in (FROM_CELL_ENV, "AG_POLICY", "AG_GUARD"):
        monkeypatch.setenv(var, "1")
        assert keep_terminal_record("foundations", STARTER, [1], payload(STARTER)) is None
        monkeypatch.delenv(var)
    assert not (tmp_path / "checks").exists()


def test_check_cell_pointers_name_the_notebooks_that_run_the_stage():
    assert route.OP3.check_cell_notebooks() == ["07"]
    assert route.PA4.check_cell_notebooks() == ["03", "08"]
    assert route.F1.check_cell_notebooks() == ["00"]

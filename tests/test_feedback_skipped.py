"""A stage graded on a machine that lacks a package some part of a check needs (XProf's
reading of a trace, say) says so in the learner's feedback, so a grade is never read as
having checked what it did not (the runner sends the checker's ``optional.skipped()``
notes, ``autograder.stage`` keeps them in the record)."""

from __future__ import annotations

from autograder import feedback


def test_a_part_the_grading_machine_skipped_is_named_in_the_feedback(tmp_path):
    record = {"kind": "stage", "project": "performance-audit", "stage": 2, "title": "t",
              "status": "pass", "points": 6.0, "max_points": 6.0, "checks": [],
              "skipped": ["XProf's reading of the trace (xprof is not installed)"]}
    (sec,) = feedback.sections([record], docs=tmp_path)
    assert any("xprof is not installed" in n for n in sec["notes"]), sec["notes"]
    (plain,) = feedback.sections([{**record, "skipped": []}], docs=tmp_path)
    assert plain["notes"] == []

"""``python -m coursekit.commands.mistakes_in_copy``'s tally, on rows made here (the runs
themselves are the command's: hundreds of checker processes, never in make test)."""

from __future__ import annotations

import io

from coursekit.commands.mistakes_in_copy import summary


def row(mistake_id: str, stage: int, same, **more) -> dict:
    return {"id": mistake_id, "stage": stage, "as_in_course": same, "caught_by": ["c1"],
            "returncode": 1 if same else 0, "copy_not_passing": [], "detail": "",
            "instructor": [], **more}


def test_each_stage_counts_what_fails_as_in_the_course_and_names_the_rest():
    out = io.StringIO()
    rows = [row("a", 1, True), row("b", 1, False), row("c", 1, None), row("d", 2, True)]
    assert summary("p", rows, out) == 1
    text = out.getvalue()
    assert "p stage 1: 1 of 2 caught in the course fail in the copy as in the course " \
           "(1 not caught in the course, not run)" in text
    assert "DIFFERS b" in text and "DIFFERS a" not in text
    assert "p stage 2: 1 of 1" in text


def test_a_check_graded_by_the_instructor_in_the_copy_counts_against_it():
    out = io.StringIO()
    assert summary("p", [row("a", 1, True, instructor=["c2"])], out) == 1
    assert "INSTRUCTOR a: ['c2']" in out.getvalue()


def test_a_timing_check_undecided_in_the_copy_is_listed_apart_not_counted():
    out = io.StringIO()
    assert summary("p", [row("a", 1, False, inconclusive=True)], out) == 0
    assert "INCONCLUSIVE a" in out.getvalue() and "DIFFERS" not in out.getvalue()

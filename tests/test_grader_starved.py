"""A stage stopped at its wall clock with under a quarter of a core of CPU was starved, not the
learner's: a ``grade`` batch grades it once more at the end (the one retry that also
takes inconclusive stages), and the second record becomes the latest; a busy loop, which
kept a core busy to the limit, is not graded again. Real batches through the grader
(sandbox, jail, runner, a checker) on a toy course whose one check calls the learner's
function: no JAX, so a run takes about a second and the limits can be 3 s.

Code that sleeps reads as starved (the watchdog sees little CPU either way): it stands
here for a run the machine starved, and costs one more limit (docs/instructors.md)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from autograder import grade, outcomes, run_cpu
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

LIMIT_S = 3.0
CHECK = textwrap.dedent("""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    from coursekit.checking.contract import Checker
    from coursekit.checking.errors import CheckFailed

    checker = Checker("toy", {1: "one"})

    @checker.check(1)
    def answers_42(impl, ctx):
        if impl.answer() != 42:
            raise CheckFailed("not 42")
""")
LEARNERS = {
    "sleeper": "import time\ndef answer():\n    time.sleep(100)\n",
    "spinner": "def answer():\n    while True:\n        pass\n",
    "right": "def answer():\n    return 42\n",
}


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("toy-course")
    os.symlink(ROOT / "coursekit", root / "coursekit")
    (root / "projects" / "toy" / "tests").mkdir(parents=True)
    (root / "projects" / "toy" / "tests" / "check.py").write_text(CHECK)
    (root / "notebooks").mkdir()
    return root


def graded(course: Path, tmp_path: Path, learners: dict[str, str]):
    subs = tmp_path / "subs"
    for name, source in learners.items():
        starter = subs / name / "projects" / "toy" / "starter"
        starter.mkdir(parents=True)
        (starter / "model.py").write_text(source)
    out = tmp_path / "out"
    grade.grade(subs, out, workers=1, timeout=LIMIT_S, selection="toy",
                notebooks_dir=course / "notebooks", course_root=course, progress=False)
    book = Gradebook.in_dir(out)
    try:
        rows = {}
        for row in book.all_rows():
            rows.setdefault(row[0], []).append(row)
        return rows, {s: r["record"] for (s, _), r in book.latest().items()}
    finally:
        book.close()


def test_a_starved_stage_is_graded_once_more_and_a_loop_is_not(course, tmp_path):
    rows, latest = graded(course, tmp_path, LEARNERS)
    assert latest["right"]["status"] == "pass" and len(rows["right"]) == 1

    sleeper = latest["sleeper"]
    assert (sleeper["status"], sleeper["reason"]) == ("timeout", outcomes.STARVED)
    assert sleeper["cpu_s"] < run_cpu.STARVED_SHARE * sleeper["wall_s"], sleeper
    first, second = (json.loads(r[6]) for r in rows["sleeper"])  # once more, only once
    assert first["reason"] == outcomes.STARVED and "sandbox_run" not in first
    assert second == sleeper  # the second record is the latest
    assert sleeper["sandbox_run"].startswith(grade.RETRIED_ALONE + " a starved run")
    assert "little CPU time" in outcomes.explain(sleeper)

    spinner = latest["spinner"]
    assert spinner["status"] == "timeout", spinner
    if spinner["reason"] == "wall-clock":  # it had its core: a loop, not retried
        assert spinner["cpu_s"] >= run_cpu.STARVED_SHARE * spinner["wall_s"]
        assert len(rows["spinner"]) == 1 and "sandbox_run" not in spinner
    else:  # this machine's load starved even the loop: it gets its one retry too
        assert spinner["reason"] == outcomes.STARVED and len(rows["spinner"]) == 2

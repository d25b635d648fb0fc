"""A stage stopped at its wall clock with under a quarter of a core of CPU was starved, not the
learner's: a ``grade`` batch grades it once more at the end (the one retry that also
takes inconclusive stages), and the second record becomes the latest; a busy loop, which
kept a core busy to the limit, is not graded again. Real batches through the grader
(sandbox, jail, runner, a checker) on a toy course whose one check calls the learner's
function: no JAX, so a correct run needs about 1 s of CPU and the limit can be 5 s
(the rule presumes a limit at least four times what a correct run needs:
``run_cpu.STARVED_SHARE``; at 3 s a load of 8 on 2 cores timed the correct one out).

Code that sleeps reads as starved (the watchdog sees little CPU either way): it stands
here for a run the machine starved, and costs one more limit (docs/instructors.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autograder import grade, outcomes, run_cpu
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

LIMIT_S = 5.0
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
    assert latest["right"]["status"] == "pass", latest["right"]
    if len(rows["right"]) > 1:  # a load that starved even this one: its retry decided it
        first = json.loads(rows["right"][0][6])
        assert len(rows["right"]) == 2 and first["reason"] == outcomes.STARVED, first

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


GRADE = """
import sys
from pathlib import Path
from autograder import grade
course, subs, out = map(Path, sys.argv[1:])
grade.grade(subs, out, workers=1, timeout=LIMIT_S, selection="toy",
            notebooks_dir=course / "notebooks", course_root=course, progress=False)
""".replace("LIMIT_S", repr(LIMIT_S))


def test_a_batch_stopped_before_its_retry_owes_it_to_the_next(course, tmp_path):
    """As a cancelled Slurm shard is: the starved stage's first record is in, the batch
    is killed during its end-of-batch retry; the resumed batch skips the stage as graded
    but grades it once more at its own end."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    starter = subs / "sleeper" / "projects" / "toy" / "starter"
    starter.mkdir(parents=True)
    (starter / "model.py").write_text(LEARNERS["sleeper"])
    cmd = [sys.executable, "-c", GRADE, str(course), str(subs), str(out)]
    batch = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        for line in batch.stderr:  # said once the first record is in, before the retry
            if line.startswith("retrying 1 stage(s)"):
                break
        else:
            pytest.fail("the batch ended without retrying its starved stage")
    finally:
        batch.kill()
        batch.wait()
    book = Gradebook.in_dir(out)
    assert len(book.all_rows()) == 1
    book.close()

    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "0 graded, 1 skipped, 1 graded again at the end" in done.stderr, done.stderr
    book = Gradebook.in_dir(out)
    first, second = (json.loads(r[6]) for r in book.all_rows())
    book.close()
    assert "sandbox_run" not in first
    assert second["sandbox_run"].startswith(grade.RETRIED_ALONE + " a starved run")


def test_the_report_counts_a_starved_timeout_apart():
    from autograder.classreport import category
    assert category("timeout", outcomes.STARVED) == outcomes.STARVED
    assert category("timeout", "wall-clock") == "timeout"
    assert outcomes.status_of(outcomes.STARVED) == ("timeout", outcomes.STARVED)

"""Why a learner's copy judges as the course does, shown without judging the corpus in it
(issue 50; the corpus in the copy, measured: ``python -m coursekit.commands.mistakes_in_copy``).

A check's verdict is a function of the files its processes read (tests/release_reach.py).
Two facts make the copy's verdicts the course's:

* every file a check run reads in the course is in the copy with the same bytes, or is
  one the release leaves out for a stated reason (``COURSE_ONLY``: the instructor's code
  and the sealed replays, where the copy's checks take their stored-output branch, which
  the copy's own reference run exercises in tests/test_release_learner_copy.py); recorded
  here while the course runs each project's fresh starter through every stage (its
  checker process and learner processes: every module the checks load before they call
  the learner's code); what a check reads after the learner's code returns is recorded
  in the copy's reference run, which asserts the same of it;
* the code a checker can import at all (coursekit/, autograder/, scripts/, every
  project's tests/ and starter/) is the course's, file for file.

Each is shown to fail on a fault planted in a copy of the release: a checker module
dropped, a byte changed, a file added.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from release_reach import (
    COURSE_ONLY,
    matches,
    reached,
    recording_env,
    tree_differences,
    unexplained,
)
from shared_release import release_copy

from coursekit.facts import ROOT

PROJECTS = ("foundations", "performance-audit", "pallas-kernel", "sharded-training",
            "optimisation")
# what the release copies whole from the course (autograder.release: TOP_DIRS, projects)
CODE = ("coursekit", "autograder", "scripts", *(f"projects/{p}/tests" for p in PROJECTS),
        *(f"projects/{p}/starter" for p in PROJECTS))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    return release_copy(tmp_path_factory.mktemp("identity") / "course")


@pytest.fixture(scope="module")
def course_reach(tmp_path_factory) -> set[Path]:
    """Every course file the five projects' checkers read while the fresh starter goes
    through every stage, the five checkers side by side."""
    work = tmp_path_factory.mktemp("course-reach")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTEST") and k != "COURSE_CHECK_ONLY"}
    env = recording_env({**env, "PYTHONPATH": str(ROOT)}, work / "log", [ROOT])
    procs = []
    for project in PROJECTS:
        spec = {"project": project, "seed": 1, "runs": [{
            "name": "starter", "stage": list(range(1, 9)),
            "impl": str(ROOT / "projects" / project / "starter" / "model.py")}]}
        (work / f"{project}.json").write_text(json.dumps(spec))
        procs.append((project, subprocess.Popen(
            [sys.executable, "-m", "coursekit.checking.planted", str(work / f"{project}.json"),
             str(work / f"{project}-out.json")], cwd=ROOT, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for project, proc in procs:
        out, _ = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{project}: {out[-3000:]}"
        status = json.loads((work / f"{project}-out.json").read_text())["starter"]["status"]
        assert status and set(status.values()) == {"not-implemented"}, (project, status)
    return reached(work / "log", ROOT)


def test_the_recording_sees_checker_and_learner_processes(course_reach):
    """The recorder is not blind: each project's stage modules (checker process) and the
    learner server (learner process) are among what it saw."""
    for project in PROJECTS:
        assert Path(f"projects/{project}/tests/check.py") in course_reach, project
        assert Path(f"projects/{project}/starter/model.py") in course_reach, project
    assert Path("coursekit/checking/learner_server.py") in course_reach
    assert len(course_reach) > 100, sorted(course_reach)


def test_every_file_a_course_check_reads_is_in_the_copy_as_it_is(course_reach, release):
    problems = unexplained(course_reach, ROOT, release, course=ROOT)
    assert not problems, "\n".join(problems)


def test_what_the_course_reads_and_the_copy_lacks_is_on_the_explained_list(course_reach):
    """Printed, for the record: the course-only files a check run reaches (run with -s)."""
    left_out = sorted(str(p) for p in course_reach if matches(p, COURSE_ONLY))
    print("\ncourse-only files a check run reads:\n  " + "\n  ".join(left_out))
    assert all(not p.startswith("projects/") or "/sealed/" in p for p in left_out), left_out


def test_the_code_a_checker_can_import_is_the_courses(release):
    problems = tree_differences(ROOT, release, CODE)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------
# Faults planted in a copy of the release: each comparison must see them
# ---------------------------------------------------------------------------------------

@pytest.fixture
def faulty(release, tmp_path) -> Path:
    return release_copy(tmp_path / "faulty")


def test_a_checker_module_dropped_from_the_copy_is_seen(course_reach, faulty):
    dropped = Path("projects/foundations/tests/foundations_stage2_fit.py")
    (faulty / dropped).unlink()
    assert f"{dropped}: not in {faulty}" in unexplained(course_reach, ROOT, faulty,
                                                          course=ROOT)
    assert f"{dropped}: not in the copy" in tree_differences(ROOT, faulty, CODE)


def test_a_changed_byte_in_a_module_the_checks_load_is_seen(course_reach, faulty):
    changed = Path("coursekit/checking/contract.py")
    text = (faulty / changed).read_text()
    (faulty / changed).write_text(text.replace("fail", "fall", 1))
    assert f"{changed}: other bytes in {faulty}" in unexplained(course_reach, ROOT, faulty,
                                                               course=ROOT)
    assert f"{changed}: other bytes in the copy" in tree_differences(ROOT, faulty, CODE)


def test_a_file_only_the_copy_has_is_seen(faulty):
    added = Path("coursekit/checking/shadow.py")
    (faulty / added).write_text("")
    assert f"{added}: in the copy, not in the course" in tree_differences(ROOT, faulty, CODE)
    # and read in the copy, it is no course file
    assert unexplained({added}, faulty, ROOT, course=ROOT) == [f"{added}: not in {ROOT}"]


def test_a_rewritten_file_read_by_a_check_is_seen(release):
    problems = unexplained({Path("Makefile")}, release, ROOT, course=ROOT)
    assert problems and "rewrites it" in problems[0], problems

"""A learner's copy checks what grades (issue 50): build a release
(``python -m autograder release``; the session's one, ``tests/shared_release.py``) and
run, inside it, each project's checker as a learner would have it run, on what only a run
in the copy can show:

* the reference solution, every stage: no check may say INSTRUCTOR ("graded by your
  instructor: this check needs the course's reference code"), and every check passes
  (INCONCLUSIVE allowed: a timing check under this machine's load). In the copy the
  checks that use the instructor's code in the course take their stored-output branch
  (``coursekit.checking.graded.available()`` is False): this run is what exercises it;
* the untouched starter, every stage: every check says "not yet" (``not-implemented``);
* issue 50's two named cases: a Pallas kernel reducing over the padding cells and a train
  step that never updates its parameters fail, with a hint naming the cause.

Every file these runs read in the copy (checker and learner processes, recorded by
``tests/release_reach.py``) must be the course's file, byte for byte: with
tests/test_release_identity.py (every file a course check run reads is in the copy as it
is, or left out for a stated reason) that is why the copy judges as the course does,
which the whole mistake corpus judged in a copy measures
(``python -m coursekit.commands.mistakes_in_copy``, docs/ci.md). Known-wrong files beyond
the two named cases are that command's, no longer this file's.

One checker process per project, every file of the project in it with the stages in one
run each (``coursekit.checking.planted``, as the planted-bug tests share a checker), the
five projects side by side. The copy is whole too: its Makefile holds no course-only
block and names only targets and files the copy has; ``make check`` there is the learner's
quick loop on their own code and no longer fails on folders the copy lacks.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from release_reach import reached, recording_env, unexplained
from shared_release import release_copy

from coursekit.commands.mistakes_corpus import Mistake, apply, load_corpus

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261206
PROJECTS = ("foundations", "performance-audit", "pallas-kernel", "sharded-training",
            "optimisation")
# Issue 50's named cases: project -> (mistake id, words the hint of a failing check holds)
NAMED = {
    "pallas-kernel": ("kernel-no-mask", "past the array's edge"),  # reduces over padding
    "sharded-training": ("step-params-never-updated", "no update reaches the params"),
}
# A wrong file the corpus does not hold (issue 50's example): a train step that returns
# the parameters it was given (its optimiser state and counters still move).
EXTRA = {
    "sharded-training": [Mistake(1, "step-params-never-updated",
                                 "the update computed and dropped: the params never change",
                                 (('        return {"params": optax.apply_updates('
                                   'state["params"], updates),',
                                   '        return {"params": state["params"],'),))],
}
FAILED = ("fail", "error", "crash")
NOT_YET = "not-implemented"
# All five projects side by side, one deadline. Measured at a load of 15-20 on 2 cores:
# the references 53 s (pallas-kernel) to 345 s (optimisation).
TIMEOUT_S = 2400
pytestmark = pytest.mark.timeout(TIMEOUT_S + 600)  # the release and the runs, in a fixture


def named_mistakes(project: str) -> list[Mistake]:
    if project not in NAMED:
        return []
    found, _ = load_corpus(project)
    by_id = {m.id: m for m in found + EXTRA.get(project, [])}
    return [by_id[NAMED[project][0]]]


# ---------------------------------------------------------------------------------------
# The copy, and every run in it
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    return release_copy(tmp_path_factory.mktemp("learner-copy") / "course")


def copy_env(release: Path) -> dict:
    """The copy's own code first: its coursekit, never this checkout's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(release)
    env.pop("COURSE_CHECK_ONLY", None)
    return env


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("learner-copy-runs")


@pytest.fixture(scope="module")
def runs(release, work) -> dict[str, dict]:
    """project -> {run name: what coursekit.checking.planted reports}, run in the copy,
    every file its processes open in the copy recorded under ``work/reach``."""
    procs = {}
    env = recording_env(copy_env(release), work / "reach", [release])
    for project in PROJECTS:
        solution = (ROOT / "projects" / project / "solution" / "model.py").read_text()
        every = list(range(1, 9))
        spec_runs = [
            {"name": "reference", "impl": str(work / f"{project}-reference.py"), "stage": every},
            {"name": "starter", "stage": every,
             "impl": str(release / "projects" / project / "starter" / "model.py")}]
        (work / f"{project}-reference.py").write_text(solution)
        for mistake in named_mistakes(project):
            path = work / f"{project}-{mistake.id}.py"
            path.write_text(apply(solution, mistake))
            spec_runs.append({"name": mistake.id, "impl": str(path), "stage": mistake.stage})
        spec = {"project": project, "seed": SEED, "runs": spec_runs}
        spec_path, out_path = work / f"{project}.json", work / f"{project}-out.json"
        spec_path.write_text(json.dumps(spec))
        log = open(work / f"{project}.log", "w")
        procs[project] = (subprocess.Popen(
            [sys.executable, "-m", "coursekit.checking.planted", str(spec_path),
             str(out_path)], cwd=release, env=env, stdout=log,
            stderr=subprocess.STDOUT, start_new_session=True), out_path, log)
    found = {}
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for project, (proc, out_path, _) in procs.items():
            try:
                proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            text = (work / f"{project}.log").read_text()[-3000:]
            found[project] = json.loads(out_path.read_text()) if out_path.is_file() else {
                "_error": f"exit {proc.returncode} (None: past {TIMEOUT_S} s): {text}"}
    finally:  # a timeout of the test too: no checker left running
        for proc, _, log in procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            log.close()
    return found


def run_of(runs: dict, project: str, name: str) -> dict:
    project_runs = runs[project]
    assert "_error" not in project_runs, project_runs.get("_error")
    got = project_runs[name]
    assert got["status"], f"{project} {name}: no verdict\n{got['stdout'][-3000:]}"
    return got


def instructor_only(got: dict) -> list[str]:
    return sorted(c for c, s in got["status"].items() if s == "instructor")


# ---------------------------------------------------------------------------------------
# Verdicts in the copy
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("project", PROJECTS)
def test_the_reference_passes_every_check_in_the_copy(runs, project):
    got = run_of(runs, project, "reference")
    assert not instructor_only(got), (f"{project}: graded by the instructor in the copy: "
                                      f"{instructor_only(got)}")
    wrong = {c: s for c, s in got["status"].items() if s not in ("pass", "inconclusive")}
    assert not wrong, f"{project}: {wrong}\n{got['stdout'][-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("project", NAMED)
def test_a_named_wrong_file_fails_in_the_copy_with_its_cause(runs, project):
    mistake, words = NAMED[project]
    got = run_of(runs, project, mistake)
    assert not instructor_only(got), (f"{project} {mistake}: graded by the instructor in "
                                      f"the copy: {instructor_only(got)}")
    failed = [r for r in got["json"]["results"] if r["status"] in FAILED]
    assert failed and got["returncode"] == 1, (
        f"{project} {mistake}: no check fails in the copy\n{got['stdout'][-4000:]}")
    said = " ".join(str(r.get(k) or "") for r in failed for k in ("message", "hint"))
    assert words in said, f"{project} {mistake}: no hint names the cause ({words!r}): {said}"


@pytest.mark.slow
@pytest.mark.parametrize("project", PROJECTS)
def test_a_fresh_starter_says_not_yet_in_every_check(runs, project):
    got = run_of(runs, project, "starter")
    other = {c: s for c, s in got["status"].items() if s != NOT_YET}
    assert not other, f"{project}: the starter's checks that do not say not yet: {other}"
    assert "not yet" in got["stdout"], got["stdout"][-2000:]


@pytest.mark.slow
def test_every_file_the_copys_checks_read_is_the_courses(runs, release, work):
    """What the runs above read in the copy (their checker and learner processes) is the
    course's, byte for byte (tests/release_reach.py): what a check reads after the
    learner's code returns included, which tests/test_release_identity.py's course-side
    recording (the starter) does not reach."""
    assert all("_error" not in r for r in runs.values())
    read = reached(work / "reach", release)
    assert Path("coursekit/checking/learner_server.py") in read, sorted(read)
    problems = unexplained(read, release, ROOT, course=ROOT)
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------------------
# The copy is whole
# ---------------------------------------------------------------------------------------

def help_targets(makefile: str) -> list[str]:
    return re.findall(r"^#\s+make ([\w-]+)", makefile, re.M)


def rule_targets(makefile: str) -> set[str]:
    return set(re.findall(r"^([\w-]+):", makefile, re.M))


@pytest.mark.slow
def test_the_copy_makefile_names_only_what_the_copy_has(release):
    text = (release / "Makefile").read_text()
    assert "course-only {" not in text and "} course-only" not in text
    listed = help_targets(text)
    assert {"course", "test", "check", "lab", "portfolio"} <= set(listed), listed
    missing = [t for t in listed if t not in rule_targets(text)]
    assert not missing, f"make help lists targets the copy lacks: {missing}"
    named = set(re.findall(r"\b((?:docs|tests|bench|notebooks|scripts|coursekit|autograder)"
                           r"/[\w./-]*\w)", text))
    absent = sorted(p for p in named if not (release / p).exists())
    assert not absent, f"the copy's Makefile names what the copy lacks: {absent}"
    done = subprocess.run(["make", "--no-print-directory", "help"], cwd=release,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "make check" in done.stdout, done.stdout + done.stderr
    assert "course-only" not in done.stdout and "make bench" not in done.stdout


@pytest.mark.slow
def test_make_check_in_the_copy_runs_the_learners_quick_loop(release):
    """``make check`` in the copy (this checkout's venv, ``-o`` its stamp: never a
    reinstall): the starter's stage 1, not a lint of folders the copy lacks."""
    venv = Path(sys.prefix)
    done = subprocess.run(["make", "--no-print-directory", "-o", str(venv / ".installed"),
                           "check", f"VENV={venv}", "CHECK_ARGS=--only foundations"],
                          cwd=release, env=copy_env(release), capture_output=True, text=True,
                          timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode != 0 and "check] Error 1" in done.stderr, out  # not yet
    assert "foundations stage 1 (your code)" in out and "not yet" in out, out
    assert "ruff" not in out and "No such file" not in out, out

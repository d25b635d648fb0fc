"""A learner's copy checks what grades (issue 50): build a release
(``python -m autograder release``) and run, inside it, each project's checker as a learner
would have it run, on

* the reference solution, every stage: no check may say INSTRUCTOR ("graded by your
  instructor: this check needs the course's reference code"), and every check passes
  (INCONCLUSIVE allowed: a timing check under this machine's load);
* known-wrong files from the mistake corpus (``tests/mistakes/``; ``make mistakes`` shows
  the course's checkers catch each, and none is in its ``JUSTIFIED`` list), each on its
  own stage: it fails in the copy as in the course, and no check of it says INSTRUCTOR;
* the untouched starter, every stage: every check says "not yet" (``not-implemented``).

One checker process per project, every file of the project in it with the stages in one
run each (``coursekit.checking.planted``, as the planted-bug tests share a checker), the
five projects side by side. The copy is whole too: its Makefile holds no course-only
block and names only targets and files the copy has; ``make check`` there is the learner's
quick loop on their own code and no longer fails on folders the copy lacks.

The checks that needed instructor-only code are being made to run in the copy (issue 50,
item 1, by each project's owner): the assertions that wait for that work are marked
``xfail(strict=False)`` per project below (``WAITING``); drop a project's entry once its
copy runs every check.
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

from coursekit.commands.mistakes_corpus import Mistake, apply, load_corpus

ROOT = Path(__file__).resolve().parents[1]
SEED = 20261206
PROJECTS = ("foundations", "performance-audit", "pallas-kernel", "sharded-training",
            "optimisation")
# project -> mistake ids of its corpus whose stage had instructor-only checks in the copy
# (foundations had none: two of its stages, to hold it there)
WRONG = {
    "foundations": ("mse-sum", "fit-key-reused"),
    "performance-audit": ("matmul-fma-one-flop", "peak-flops-unsynced", "residuals-four-bytes",
                          "decide-ratio-inverted"),
    "pallas-kernel": ("kernel-no-mask", "kernel-mask-zero"),  # reduces over the padding
    "sharded-training": ("step-mask-ignored", "step-params-never-updated"),
    "optimisation": ("limiting-most-calls", "sweep-gain-inverted"),
}
# A wrong file the corpus does not hold yet (issue 50's example): a train step that returns
# the parameters it was given (its optimiser state and counters still move).
EXTRA = {
    "sharded-training": [Mistake(1, "step-params-never-updated",
                                 "the update computed and dropped: the params never change",
                                 (('        return {"params": optax.apply_updates('
                                   'state["params"], updates),',
                                   '        return {"params": state["params"],'),))],
}
# The projects whose copy still says INSTRUCTOR (a release of branch house, 2026-12-06:
# the reference's checks graded by the instructor in the copy); each project's owner is
# making those checks run there (issue 50 item 1). Drop an entry when its project lands.
WAITING = {
}
FAILED = ("fail", "error", "crash")
NOT_YET = "not-implemented"
# All five projects side by side, one deadline. Measured at a load of 15-20 on 2 cores,
# instructor-only checks returning at once: 8 min in all, the references 53 s
# (pallas-kernel) to 345 s (optimisation); longer once every check runs in the copy.
TIMEOUT_S = 2400
pytestmark = pytest.mark.timeout(TIMEOUT_S + 600)  # the release and the runs, in a fixture


def waiting(project: str, *values):
    """``pytest.param(project, *values)``, xfail while the project's copy is not whole."""
    marks = [pytest.mark.xfail(strict=False, reason=WAITING[project])] \
        if project in WAITING else []
    return pytest.param(project, *values, marks=marks, id="-".join((project, *values)))


def mistakes_of(project: str) -> list[Mistake]:
    found, _ = load_corpus(project)
    by_id = {m.id: m for m in found + EXTRA.get(project, [])}
    return [by_id[i] for i in WRONG[project]]


# ---------------------------------------------------------------------------------------
# The copy, and every run in it
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("learner-copy") / "course"
    done = subprocess.run([sys.executable, "-m", "autograder", "release", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def copy_env(release: Path) -> dict:
    """The copy's own code first: its coursekit, never this checkout's."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTHONPATH"] = str(release)
    env.pop("COURSE_CHECK_ONLY", None)
    return env


@pytest.fixture(scope="module")
def runs(release, tmp_path_factory) -> dict[str, dict]:
    """project -> {run name: what coursekit.checking.planted reports}, run in the copy."""
    work = tmp_path_factory.mktemp("learner-copy-runs")
    procs = {}
    for project in PROJECTS:
        solution = (ROOT / "projects" / project / "solution" / "model.py").read_text()
        every = list(range(1, 9))
        spec_runs = [
            {"name": "reference", "impl": str(work / f"{project}-reference.py"), "stage": every},
            {"name": "starter", "stage": every,
             "impl": str(release / "projects" / project / "starter" / "model.py")}]
        (work / f"{project}-reference.py").write_text(solution)
        for mistake in mistakes_of(project):
            path = work / f"{project}-{mistake.id}.py"
            path.write_text(apply(solution, mistake))
            spec_runs.append({"name": mistake.id, "impl": str(path), "stage": mistake.stage})
        spec = {"project": project, "seed": SEED, "runs": spec_runs}
        spec_path, out_path = work / f"{project}.json", work / f"{project}-out.json"
        spec_path.write_text(json.dumps(spec))
        log = open(work / f"{project}.log", "w")
        procs[project] = (subprocess.Popen(
            [sys.executable, "-m", "coursekit.checking.planted", str(spec_path),
             str(out_path)], cwd=release, env=copy_env(release), stdout=log,
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
@pytest.mark.parametrize("project", [waiting(p) for p in PROJECTS])
def test_the_reference_passes_every_check_in_the_copy(runs, project):
    got = run_of(runs, project, "reference")
    assert not instructor_only(got), (f"{project}: graded by the instructor in the copy: "
                                      f"{instructor_only(got)}")
    wrong = {c: s for c, s in got["status"].items() if s not in ("pass", "inconclusive")}
    assert not wrong, f"{project}: {wrong}\n{got['stdout'][-4000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("project, mistake",
                         [waiting(p, m) for p in PROJECTS for m in WRONG[p]])
def test_a_wrong_file_fails_in_the_copy_as_in_the_course(runs, project, mistake):
    got = run_of(runs, project, mistake)
    assert not instructor_only(got), (f"{project} {mistake}: graded by the instructor in "
                                      f"the copy: {instructor_only(got)}")
    failed = sorted(c for c, s in got["status"].items() if s in FAILED)
    assert failed and got["returncode"] == 1, (
        f"{project} {mistake}: no check fails in the copy\n{got['stdout'][-4000:]}")


@pytest.mark.slow
@pytest.mark.parametrize("project", [waiting(p) for p in PROJECTS])
def test_a_fresh_starter_says_not_yet_in_every_check(runs, project):
    got = run_of(runs, project, "starter")
    other = {c: s for c, s in got["status"].items() if s != NOT_YET}
    assert not other, f"{project}: the starter's checks that do not say not yet: {other}"
    assert "not yet" in got["stdout"], got["stdout"][-2000:]


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

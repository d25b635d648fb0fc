"""Session-wide test isolation: tests never write into the learner's own records."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# Set by pytest_configure for this session when the caller did not: under pytest-xdist
# each worker replaces these with its own (a worker inherits the controller's environment).
_DEFAULTED = "COURSE_TESTS_DEFAULTED"


def pytest_configure(config):
    """Before collection (so modules that read these at import see them too): point MLflow
    and the notebook records at a temporary folder, leaving build/mlflow.db and
    build/learner untouched. An explicit setting from the caller wins. Each pytest-xdist
    worker gets its own folder (one MLflow database and one record count per process)."""
    tmp = Path(tempfile.mkdtemp(prefix="course-tests-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    defaults = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'mlflow.db'}",
                "COURSE_RECORDS": str(tmp / "learner"),
                # One reference checker run per project and session, shared by the
                # project's tests and the notebooks' check cells (helpers.reference_run).
                "COURSE_CHECK_REUSE": str(tmp / "reference-runs")}
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    ours = set(filter(None, os.environ.get(_DEFAULTED, "").split(","))) if worker else set()
    for key, value in defaults.items():
        if key in ours or key not in os.environ:
            os.environ[key] = value
            ours.add(key)
    os.environ[_DEFAULTED] = ",".join(sorted(ours))
    if worker:
        # The other worker already keeps the second core busy: a planted batch runs its
        # checkers one at a time, as each was flake-tested (one other core busy).
        os.environ.setdefault("COURSE_PLANTED_SHARDS", "1")


# Files whose tests share one expensive session result run on one pytest-xdist worker
# (make test: --dist loadgroup); every other file is a group of its own.
SHARED_GROUPS = {
    # helpers.reference_run: each project's reference run, reused by the notebooks' cells
    "references": ("test_notebooks.py", "test_foundations.py", "test_optimisation.py",
                   "test_pallas_kernel.py", "test_performance_audit.py",
                   "test_sharded_training.py"),
    # graded_reference below: one grader run of the instructor's work
    "graded-reference": ("test_autograder_batch.py", "test_autograder_notebooks.py"),
}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Each test's xdist group (before xdist reads it): a file's tests share its module
    state (a planted batch runs once per file), so a file never splits across workers."""
    group_of = {f: g for g, files in SHARED_GROUPS.items() for f in files}
    for item in items:
        name = item.path.name
        item.add_marker(pytest.mark.xdist_group(group_of.get(name, name)))


@pytest.fixture
def busy_core():
    """Keep one core spinning, as on a loaded 2-core CI machine."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield
    spinner.kill()
    spinner.wait()


# The instructor's own work, handed in once per session and graded by the real grader with
# full isolation: every project's solution as its starter (every stage of every project)
# and two solution notebooks (00, which logs to MLflow, plus the cheap 01). Shared by
# test_autograder_batch (every reference stage passes in the sandbox) and
# test_autograder_notebooks (the solution notebooks get full marks): one grader run, its
# two workers kept busy, instead of two.
REFERENCE_NOTEBOOKS = ("00_foundations.ipynb", "01_async_timing.ipynb")


@pytest.fixture(scope="session")
def graded_reference(tmp_path_factory):
    from coursekit.facts import ROOT
    sys.path.insert(0, str(ROOT))
    from autograder.gradebook import Gradebook

    tmp = tmp_path_factory.mktemp("graded-reference")
    ref, out = tmp / "subs" / "reference", tmp / "out"
    (ref / "notebooks").mkdir(parents=True)
    for name in REFERENCE_NOTEBOOKS:
        shutil.copy(ROOT / "notebooks" / name, ref / "notebooks" / name)
    projects = sorted(p.parent.parent.name for p in ROOT.glob("projects/*/tests/check.py"))
    for name in projects:
        shutil.copytree(ROOT / "projects" / name / "solution",
                        ref / "projects" / name / "starter",
                        ignore=shutil.ignore_patterns("__pycache__"))
    stages = ",".join(["projects", *(f"notebooks/{n}" for n in REFERENCE_NOTEBOOKS)])
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(tmp / "subs"),
                           "--out", str(out), "--stages", stages, "--workers", "2",
                           "--timeout", "900", "--quiet"], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800, env=env, check=False)
    book = Gradebook.in_dir(out) if out.exists() else None
    latest = book.latest() if book else {}
    if book:
        book.close()
    return {"projects": projects, "notebooks": [f"notebooks/{n}" for n in REFERENCE_NOTEBOOKS],
            "done": done, "latest": latest, "out": out}

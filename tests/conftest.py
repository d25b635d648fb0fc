"""Session-wide test isolation: tests never write into the learner's own records."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import PINNED, spinning_core

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
        pin_to_one_core(int(worker.removeprefix("gw")))


def pin_to_one_core(index: int) -> None:
    """Each pytest-xdist worker, and every process it starts (checkers, learner processes,
    kernels, graders), on one core of its own: the condition every checker is flake-tested
    under (one core for the run, the other busy), held for the whole test rather than
    approximated by a spinner. So under a pinned worker a planted batch runs its checkers
    one at a time and helpers.spinning_core does not spin (the other core is the other
    worker's; a spinner here would halve this test's one core instead)."""
    cores = sorted(os.sched_getaffinity(0))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if count < 2 or len(cores) < count:
        return
    os.sched_setaffinity(0, {cores[index % len(cores)]})
    os.environ[PINNED] = str(cores[index % len(cores)])
    os.environ.setdefault("COURSE_PLANTED_SHARDS", "1")


# Tests that share one expensive session result, or watch the whole machine, run on one
# pytest-xdist worker (make test: --dist loadgroup); every other file is a group of its
# own, so a module's own state (a planted batch runs once per file) is never split.
GRADER_FILES = (  # one grading of the instructor's work (graded_reference below); and each
    # asserts that no sandbox process outlives its batch, which another grader would break
    "test_autograder.py", "test_autograder_batch.py", "test_autograder_notebooks.py",
    "test_autograder_notebook_attacks.py",
    "test_slurm_grading.py", "test_autograder_shared_runs.py", "test_class_tools_graded.py",
    "test_jail_allow_list.py", "test_autograder_notebook_limits.py",
    "test_grader_novel_attacks.py")
REFERENCE_FILES = ("test_foundations.py", "test_optimisation.py", "test_pallas_kernel.py",
                   "test_performance_audit.py", "test_sharded_training.py")


def xdist_group_of(nodeid: str) -> str:
    """A test's worker group, from its node id. helpers.reference_run's one run per
    project serves its reference test and the notebooks' check cells (test_notebooks):
    those go together."""
    path, _, rest = nodeid.partition("::")
    name, test = Path(path).name, rest.split("[")[0]
    if name in GRADER_FILES:
        return "grader"
    if name == "test_notebooks.py" or (name in REFERENCE_FILES
                                       and test.startswith("test_reference_")):
        return "references"
    return path


# Groups that take longest, handed out first (xdist gives each worker the next group in
# collection order as it frees up): the last group to start is then a short one.
LONGEST_FIRST = ("grader", "references", "tests/test_optimisation_planted.py",
                 "tests/test_performance_audit.py", "tests/test_foundations.py",
                 "tests/test_performance_audit_planted.py", "tests/test_sharded_training.py",
                 "tests/test_pallas_kernel.py")


# Module fixtures that run a batch of checker processes (planted bugs, a graded batch):
# a test that uses one is slow whatever its own marks say, so `make check`'s
# `pytest -m "not slow"` leaves it to make test (they were 1,220 of its 1,260 s).
BATCH_FIXTURES = {"planted", "planted_slow", "planted_stage3_corpus", "graded"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under make test's workers, collect the longest groups first (a stable sort: each
    file's tests keep their order; every worker sorts the same collection alike). Before
    any selection by mark: a test using a batch fixture is marked slow."""
    split = []
    for item in items:
        if BATCH_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
            if xdist_group_of(item.nodeid) != xdist_group_of(item.nodeid.partition("::")[0]):
                split.append(item.nodeid)
    if split:  # its module's batch would run again on the other group's worker (140 s once)
        raise pytest.UsageError("a test outside its file's worker group uses the file's "
                                f"batch fixture (rename it): {split}")
    if config.getoption("dist", "no") != "loadgroup" and not os.environ.get(
            "PYTEST_XDIST_WORKER"):
        return
    rank = {g: i for i, g in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(xdist_group_of(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadgroup by xdist_group_of. xdist's own loadgroup reads xdist_group marks
    through item._nodeid, which pytest 9 no longer has (its node ids live in item._id), so
    with the pinned pytest it splits every group; a scheduler that groups node ids by the
    table above needs no marks."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedResultGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return SharedResultGroups(config, log)


@pytest.fixture
def busy_core():
    """Keep one core spinning, as on a loaded 2-core CI machine (helpers.spinning_core)."""
    with spinning_core():
        yield


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

"""Session-wide test isolation: tests never write into the learner's own records."""

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import suite_costs
from helpers import PINNED, spinning_core
from session_once import SESSION_ENV

# Set by pytest_configure for this session when the caller did not: under pytest-xdist
# each worker replaces these with its own (a worker inherits the controller's environment).
_DEFAULTED = "COURSE_TESTS_DEFAULTED"


def pytest_configure(config):
    """Before collection (so modules that read these at import see them too): point MLflow
    and the notebook records at a temporary folder, leaving build/mlflow.db and
    build/learner untouched. An explicit setting from the caller wins. Each pytest-xdist
    worker gets its own folder (one MLflow database and one record count per process)."""
    config.pluginmanager.register(suite_costs, "suite_costs")  # the run's costs, at its end
    tmp = Path(tempfile.mkdtemp(prefix="course-tests-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    defaults = {"MLFLOW_TRACKING_URI": f"sqlite:///{tmp / 'mlflow.db'}",
                "COURSE_RECORDS": str(tmp / "learner"),
                # One reference checker run per project and session, shared by the
                # project's tests and the notebooks' check cells (helpers.reference_run).
                "COURSE_CHECK_REUSE": str(tmp / "reference-runs")}
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:  # one folder for the whole session, every worker's (graded_reference)
        os.environ[SESSION_ENV] = str(tmp / "session")
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
    "test_autograder_notebook_attacks.py", "test_autograder_notebook_apart.py",
    "test_slurm_grading.py", "test_autograder_shared_runs.py", "test_class_tools_graded.py",
    "test_jail_allow_list.py", "test_autograder_notebook_limits.py",
    "test_grader_novel_attacks.py", "test_grader_isolation_attacks.py")
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


# The order groups are handed out in (xdist gives each worker the next group in this order
# as it frees up; the scheduler below keeps it, where xdist would sort by test count). The
# grader group comes first and starts with the session's sandboxed grading of the
# instructor's work (tests/graded_reference.py); the references group reads that grading,
# so it comes after about 800 s of other work and seldom waits for it. Then the longest.
LONGEST_FIRST = ("grader", "tests/test_optimisation_planted.py",
                 "tests/test_performance_audit_planted.py", "tests/test_pallas_kernel.py",
                 "references", "tests/test_sharded_training.py",
                 "tests/test_performance_audit.py", "tests/test_foundations.py",
                 "tests/test_optimisation_trust.py")


# Module fixtures that run a batch of checker processes (planted bugs, a graded batch):
# a test that uses one is slow whatever its own marks say, so `make check`'s
# `pytest -m "not slow"` leaves it to make test (they were 1,220 of its 1,260 s).
BATCH_FIXTURES = {"planted", "planted_stored", "graded"}


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
    grading = {i.nodeid.partition("::")[0] for i in items
               if "graded_reference" in getattr(i, "fixturenames", ())}

    def order(item):  # a file stays in one piece (its module fixtures run once)
        group, path = xdist_group_of(item.nodeid), item.nodeid.partition("::")[0]
        first = group == "grader" and path in grading
        return (rank.get(group, len(rank)), not first, path if first else "",
                first and "graded_reference" not in item.fixturenames)
    items.sort(key=order)


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

    config.option.loadscopereorder = False  # LONGEST_FIRST's order, not by test count
    return SharedResultGroups(config, log)


@pytest.fixture
def busy_core():
    """Keep one core spinning, as on a loaded 2-core CI machine (helpers.spinning_core)."""
    with spinning_core():
        yield


@pytest.fixture(scope="session")
def graded_reference():
    """The instructor's own work graded once per session, shared by every worker
    (tests/graded_reference.py): test_autograder_batch (every reference stage passes in
    the sandbox), test_autograder_notebooks (the solution notebooks get full marks), and,
    through helpers.reference_run, each project's reference test and the notebooks'
    check cells."""
    from coursekit.facts import ROOT
    sys.path.insert(0, str(ROOT))
    from graded_reference import graded_reference as batch
    return batch()

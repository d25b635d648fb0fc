"""Issue 52 item 1: what the forbidden rules keep from a learner's file stays out of its
code's reach while it runs (``coursekit/checking/reach.py``), whatever route the name
takes, in a real learner process: a performance-audit file (its project read from its
folder) reaches the course's timer, which stage 1 forbids, by each route an attacker
tried or would try next, and each ends at the learner's named error; what the contract
allows still works, and the checker's own code that needs the timer in that process (an
inspector) still has it. The whole grader: ``test_grader_runtime_reach.py``."""

from __future__ import annotations

import numpy as np
import pytest

from coursekit.checking.bridge import LearnerProcess
from coursekit.checking.codec import LearnerFunction
from coursekit.checking.errors import FORBIDDEN, LearnerCodeError
from coursekit.facts import ROOT

TIMING = ROOT / "coursekit" / "measure" / "timing.py"

ROUTES = '''
import builtins
import importlib
import importlib.util
import runpy
import sys
import threading

import jax.numpy as jnp

from coursekit.measure.timing import count_compiles

TIMING = TIMING_PATH
NAME = "coursekit.measure." + "tim" + "ing"


def _f(x):
    return x * 2


def _try(route):
    try:
        timer = route()
        timer(_f, jnp.ones(4), warmup=1, iters=2)
        return "reached"
    except PermissionError as err:
        return type(err).__name__


def _fresh():
    spec = importlib.util.spec_from_file_location("timing_copy", TIMING)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.time_synced


def _exec():
    space = {"__name__": "timing_copy"}
    exec(compile(open(TIMING).read(), "copy", "exec"), space)
    return space["time_synced"]


def _linked():  # the file by another name: a link in a folder of the learner's
    import os
    import tempfile
    link = os.path.join(tempfile.mkdtemp(), "mine.py")
    os.symlink(TIMING, link)
    return runpy.run_path(link)["time_synced"]


def _lazily():  # a course function that imports the timer when it is called
    import coursekit.workloads.remote_pallas_kernel as remote
    return lambda fn, x, warmup, iters: remote.time_synced(fn, x, warmup, iters)


def _threaded():
    out = []
    worker = threading.Thread(target=lambda: out.append(_try(
        lambda: sys.modules[NAME].time_synced)))
    worker.start()
    worker.join()
    return out[0]


ROUTES = {
    "import_module": lambda: getattr(importlib.import_module(NAME), "time_" + "synced"),
    "__import__": lambda: __import__(NAME, fromlist=["x"]).time_synced,
    "builtins": lambda: builtins.__import__(NAME, fromlist=["x"]).time_synced,
    "sys.modules": lambda: sys.modules[NAME].time_synced,
    "__globals__": lambda: count_compiles.__wrapped__.__globals__["time_" + "synced"],
    "reload": lambda: importlib.reload(sys.modules[NAME]).time_synced,
    "file": _fresh,
    "runpy": lambda: runpy.run_path(str(TIMING))["time_synced"],
    "exec": _exec,
    "link": _linked,
    "course-function": _lazily,
}


def routes():
    found = {name: _try(route) for name, route in ROUTES.items()}
    found["thread"] = _threaded()
    return found


CHECKERS = CHECKERS_PATH


def _checker_by_path():  # the checker's own module, its folder put on sys.path
    sys.path.insert(0, CHECKERS + "/pallas-kernel/tests")
    try:
        return importlib.import_module("pallas_" + "harness").ref64
    finally:
        sys.path.pop(0)


def _checker_by_file():
    spec = importlib.util.spec_from_file_location(
        "mine", CHECKERS + "/sharded-training/tests/sharded_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ref_state


def _course(module, name):
    return lambda: getattr(importlib.import_module("coursekit." + module), name)


# what a learner copy's reader borrowed (issue 50 A2-A4, 11), each by a name built at run
# time: a timing loop, a helper that answers a stage, the checker's own modules
BORROWED = {
    "bare_loop_overhead": _course("measure.timing", "bare_loop_" + "overhead"),
    "measure_interleaved": _course("measure.decision", "measure_" + "interleaved"),
    "time_workload": _course("workloads.remote_" + "course", "time_workload"),
    "measure_ratio": _course("measure.verdict", "measure_" + "ratio"),
    "memory_plan": _course("compat.compiled_plan", "memory_" + "plan"),
    "checker-sys.path": _checker_by_path,
    "checker-file": _checker_by_file,
}


def borrowed():
    found = {}
    for name, route in BORROWED.items():
        try:
            route()(None)
            found[name] = "reached"
        except PermissionError as err:
            found[name] = type(err).__name__
        except Exception as err:  # noqa: BLE001 - reached, then called wrongly
            found[name] = f"reached ({type(err).__name__})"
    return found


def stored_outputs():
    """Each of the checkers' stored-output files, by a path built at run time: opened,
    loaded by numpy, and through a link of the learner's."""
    import glob
    import os
    import tempfile

    import numpy as np
    found = {}
    for path in sorted(glob.glob(CHECKERS + "/*/tests/" + "exp" + "ected/**/*", recursive=True)):
        if not os.path.isfile(path):
            continue
        link = os.path.join(tempfile.mkdtemp(), "mine")
        os.symlink(path, link)
        for route, read in (("open", lambda p: open(p, "rb").read(1)),
                            ("numpy", lambda p: np.load(p, allow_pickle=False)),
                            ("link", lambda p: open(link, "rb").read(1))):
            try:
                read(path)
                found[(os.path.basename(path), route)] = "reached"
            except PermissionError as err:
                found[(os.path.basename(path), route)] = type(err).__name__
            except Exception as err:  # noqa: BLE001 - opened, then not a numpy file
                found[(os.path.basename(path), route)] = f"reached ({type(err).__name__})"
    return found


def _reads_a_checker_file(x):  # what an inspector calls runs in the course's turn
    open(CHECKERS + "/performance-audit/tests/" + "check.py", "rb").read(4)
    return x * 2


def _reads_a_stored_output(x):
    open(CHECKERS + "/pallas-kernel/tests/" + "exp" + "ected/tolerance_bars.json").read(4)
    return x * 2


def retimes_a_stored_output():
    """Its mtime moved, the file would no longer be the one the guard kept."""
    import os
    os.utime(CHECKERS + "/foundations/tests/" + "exp" + "ected/replays.npz", (0, 0))


def reads_a_stored_output():
    return open(CHECKERS + "/foundations/tests/" + "exp" + "ected/replays.npz", "rb").read(4)


def bare_loop_overhead():
    return importlib.import_module(NAME).bare_loop_overhead(_f, jnp.ones(4), iters=2)


def whole_modules():
    """The checker's own remote module of this project (forbidden whole)."""
    found = {}
    name = "coursekit.workloads.remote_performance_audit"
    try:
        importlib.import_module(name)
        found["import"] = "reached"
    except PermissionError as err:
        found["import"] = type(err).__name__
    found["sys.modules"] = "reached" if name in sys.modules else "absent"
    return found


def allowed():
    with count_compiles() as counted:
        _f(jnp.ones(3)).block_until_ready()
    return counted[0]


def uses_the_timer():
    return sys.modules[NAME].time_synced(_f, jnp.ones(4), warmup=1, iters=2).samples_s
'''


@pytest.fixture(scope="module")
def learner(tmp_path_factory):
    folder = tmp_path_factory.mktemp("reach") / "projects" / "performance-audit" / "starter"
    folder.mkdir(parents=True)
    (folder / "model.py").write_text(ROUTES.replace("TIMING_PATH", repr(str(TIMING))).replace(
        "CHECKERS_PATH", repr(str(ROOT / "projects"))))
    process = LearnerProcess(folder / "model.py")
    yield process
    process.close()


def test_every_route_to_the_course_timer_ends_at_the_named_refusal(learner):
    found = learner.module().routes()
    assert found == {name: "ReachRefused" for name in found}, found
    assert len(found) == 12, found


def test_what_a_learner_copy_s_reader_borrowed_ends_at_the_named_refusal(learner):
    found = learner.module().borrowed()
    assert found == {name: "ReachRefused" for name in found}, found


def test_no_stored_output_of_any_checker_is_read_by_the_learner_s_code(learner):
    """A learner's copy checks against the stored outputs for its public inputs: read at
    run time they would pass a check as a lookup table (a copy's reader, 2026-12-07:
    foundations stages 2 and 3 by replays.npz, performance-audit stage 4 by
    decisions.json). Every file of every project's tests/expected/, by every route."""
    found = learner.module().stored_outputs()
    assert len(found) >= 3 * 9, found
    assert found == {k: "ReachRefused" for k in found}, found
    with pytest.raises(LearnerCodeError) as caught:
        learner.module().reads_a_stored_output()
    assert caught.value.kind == FORBIDDEN, caught.value
    assert "replays.npz" in str(caught.value), caught.value
    assert "stored outputs" in str(caught.value), caught.value


def test_a_kept_file_is_that_very_file_and_keeps_its_times(learner, tmp_path):
    """The guard knows a kept file by device and inode, size and mtime: a file another
    file system numbers alike is not refused (CI, 2026-12-07: a refusal inside the
    course's turn cost every good performance-audit stage-4 submission a check), and a
    kept file's times are not the learner's to move."""
    from coursekit.checking import reach
    from coursekit.checking.forbidden import CHECKER_DATA, Rule
    guard = reach._Guard((Rule(CHECKER_DATA, "*", 0, "checker-data"),))
    stored = ROOT / "projects" / "foundations" / "tests" / "expected" / "replays.npz"
    assert guard._file_rule(str(stored)) is not None
    other = tmp_path / "other.json"
    other.write_text("{}")
    info = other.stat()
    rule = guard._file_rule(str(stored))
    guard.files[(info.st_dev, info.st_ino)] = (rule, info.st_size + 1, info.st_mtime_ns)
    assert guard._file_rule(str(other)) is None  # numbered alike, another file
    assert guard._file_rule(str(other), exact=False) is rule
    before = stored.stat().st_mtime_ns
    with pytest.raises(LearnerCodeError) as caught:
        learner.module().retimes_a_stored_output()
    assert caught.value.kind == FORBIDDEN, caught.value
    assert stored.stat().st_mtime_ns == before


@pytest.mark.parametrize("function", ["_reads_a_checker_file", "_reads_a_stored_output"])
def test_a_learner_function_an_inspector_calls_reads_no_checker_file(learner, function):
    """Inside the course's turn the guard refuses the stored outputs whoever opens them,
    and any other file of a checker's folder when the learner's code is on the stack
    (the course's own code there may read what it needs: a traceback's lines)."""
    with pytest.raises(LearnerCodeError) as caught:
        learner.request("inspect", "pallas-kernel/time_synced",
                        (LearnerFunction(function), np.ones(4, np.float32)),
                        {"warmup": 1, "iters": 3})
    assert caught.value.kind == FORBIDDEN, caught.value


def test_a_timing_module_s_function_is_refused_by_its_own_name(learner):
    with pytest.raises(LearnerCodeError) as caught:
        learner.module().bare_loop_overhead()
    assert caught.value.kind == FORBIDDEN, caught.value
    assert "coursekit.measure.timing.bare_loop_overhead" in str(caught.value), caught.value


def test_the_refusal_reaches_the_checker_as_the_learner_s_named_error(learner):
    with pytest.raises(LearnerCodeError) as caught:
        learner.module().uses_the_timer()
    assert caught.value.kind == FORBIDDEN, caught.value
    assert "coursekit.measure.timing.time_synced" in str(caught.value)
    assert "the course's own timer" in str(caught.value), caught.value
    assert "model.py, line" in str(caught.value), caught.value


def test_the_course_code_of_the_learner_process_keeps_what_it_needs(learner):
    module = learner.module()
    samples = learner.request("inspect", "pallas-kernel/time_synced",
                              (LearnerFunction("_f"), np.ones(4, np.float32)),
                              {"warmup": 1, "iters": 3})
    assert len(samples) == 3 and all(s > 0 for s in samples), samples
    module.allowed()  # what the contract gives (count_compiles) still works
    # the checker's inspectors loaded its remote modules in their turn: out of reach again
    assert module.whole_modules() == {"import": "ReachRefused", "sys.modules": "absent"}
    assert module.routes()["sys.modules"] == "ReachRefused"  # and the timer after a turn

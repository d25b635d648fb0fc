"""How make test shares the machine between its two pytest-xdist workers (conftest)."""

import os
import subprocess
import sys

from conftest import xdist_group_of
from helpers import PINNED


def test_shared_results_and_machine_watchers_keep_to_one_worker():
    assert {xdist_group_of(n) for n in (
        "tests/test_notebooks.py::test_runs_against_solution[05_sharding_and_recovery]",
        "tests/test_performance_audit.py::"
        "test_reference_passes_every_stage_under_load",
        "tests/test_foundations.py::test_reference_passes_every_stage")} == {"references"}
    assert {xdist_group_of(n) for n in (
        "tests/test_autograder.py::test_nothing_escapes_and_nothing_is_lost",
        "tests/test_autograder_notebooks.py::test_solution_notebooks_and_files_get_full_marks",
        "tests/test_slurm_grading.py::test_slurm_array_with_a_cancelled_shard_equals_one_machine",
    )} == {"grader"}
    # a project's other tests stay with their file (its planted batch runs once per file)
    assert xdist_group_of("tests/test_foundations.py::test_mse_bugs_fail[sum]") == \
        xdist_group_of("tests/test_foundations.py::test_global_numpy_shuffle_fails") == \
        "tests/test_foundations.py"


def test_a_pinned_worker_and_what_it_starts_run_on_its_one_core():
    """Under make test each worker is pinned; run alone (PYTEST_WORKERS=0) nothing is."""
    core = os.environ.get(PINNED)
    if os.environ.get("PYTEST_XDIST_WORKER") and len(os.sched_getaffinity(0)) > 1:
        assert core is None  # a machine with fewer cores than workers: not pinned
    if core is None:
        return
    child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert sorted(os.sched_getaffinity(0)) == [int(core)] and child == f"[{core}]"
    assert os.environ.get("COURSE_PLANTED_SHARDS") == "1"


def test_the_longest_groups_named_first_exist():
    """A renamed file would silently drop out of the order that balances the workers."""
    from conftest import GRADER_FILES, LONGEST_FIRST, REFERENCE_FILES

    from coursekit.facts import ROOT
    files = {*GRADER_FILES, *REFERENCE_FILES, "test_notebooks.py",
             *(g.removeprefix("tests/") for g in LONGEST_FIRST if g.startswith("tests/"))}
    assert all((ROOT / "tests" / f).is_file() for f in files), files


def test_the_session_grading_is_made_once_for_every_worker(tmp_path):
    """Two workers asking for the session's grading of the instructor's work at once
    (tests/graded_reference.py): one grades, the other waits on the lock and reads it."""
    from session_once import SESSION_ENV

    from coursekit.facts import ROOT
    worker = (
        "import json, sys, time\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import graded_reference as g\n"
        "def grade(folder):\n"
        "    with open(sys.argv[1], 'a') as f: f.write('graded\\n')\n"
        "    time.sleep(1.0)\n"
        "    return {'projects': [], 'notebooks': [], 'latest': [], 'out': str(folder),\n"
        "            'done': {'returncode': 0, 'stdout': '', 'stderr': ''}}\n"
        "g._grade = grade\n"
        "print(json.dumps(g.graded_reference()['done'].returncode))\n")
    log = tmp_path / "gradings"
    env = {**os.environ, SESSION_ENV: str(tmp_path / "session")}
    procs = [subprocess.Popen([sys.executable, "-c", worker, str(log)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outs == ["0", "0"] and log.read_text() == "graded\n"


def test_the_run_says_where_its_time_went(tmp_path):
    """tests/suite_costs.py: each file's CPU holds the children its tests waited for (a
    test that burns half a second in a child shows it; one that sleeps does not); pinned
    to one core, it is that core's busy time (the child is counted there too); a run
    shorter than COURSE_TESTS_COSTS_MIN_S prints nothing."""
    import json

    from coursekit.facts import ROOT
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'tests')!r})\nimport suite_costs\n\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(suite_costs, 'suite_costs')\n")
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n\n"
        "def test_child():\n"
        "    subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 0.5: pass'], check=True)\n")
    (tmp_path / "test_sleep.py").write_text("import time\n\ndef test_sleep():\n"
                                            "    time.sleep(0.4)\n")
    core = min(os.sched_getaffinity(0))

    def run(min_s: str, pinned: bool = False) -> tuple[str, dict]:
        env = {**os.environ, "COURSE_TESTS_COSTS_MIN_S": min_s}
        env.pop("PYTEST_XDIST_WORKER", None)
        env.pop(PINNED, None)
        if pinned:
            env[PINNED] = str(core)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p",
               "no:xdist", str(tmp_path)]
        if pinned:  # pinned in the child itself (a preexec_fn would fork a JAX process)
            cmd = [sys.executable, "-c", "import os, sys; os.sched_setaffinity(0, "
                   f"{{{core}}}); os.execv(sys.executable, sys.argv[1:])", *cmd]
        out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=120).stdout
        written = tmp_path / "build" / "test-costs.json"
        costs = json.loads(written.read_text()) if written.exists() else {}
        written.unlink(missing_ok=True)
        return out, costs

    out, costs = run("0")
    assert "where the run's time went" in out and "probe units" in out, out
    burn, sleep = costs["files"]["test_burn.py"], costs["files"]["test_sleep.py"]
    assert burn["cpu"] >= 0.45 and burn["tests"] == 1, costs
    assert sleep["cpu"] < 0.2 and sleep["wall"] >= 0.35, costs
    assert 0 < costs["probe_cpu_s"] < 1 and costs["cpu_s"] >= burn["cpu"], costs
    assert costs["workers"]["main"]["tests"] == 2, costs  # no xdist: one worker, "main"
    out, costs = run("0", pinned=True)
    assert costs["files"]["test_burn.py"]["cpu"] >= 0.45, (out, costs)
    out, costs = run("3600")
    assert "where the run's time went" not in out and costs == {}, out


def test_every_checker_run_says_what_its_checks_cost(tmp_path):
    """A checker process started with COURSE_CHECK_COSTS appends a line per check it ran;
    suite_costs.check_costs adds them up by check (runs, wall, and the test files that
    started them), costliest first; without
    the variable nothing is written."""
    from suite_costs import check_costs

    from coursekit.checking.contract import CHECK_COSTS_ENV
    from coursekit.facts import ROOT
    folder = tmp_path / "checks"
    folder.mkdir()
    cmd = [sys.executable, str(ROOT / "projects/foundations/tests/check.py"), "--stage", "1",
           "--impl", str(ROOT / "projects/foundations/starter/model.py")]
    for env in ({**os.environ, CHECK_COSTS_ENV: str(folder)},) * 2 + (
            {k: v for k, v in os.environ.items() if k != CHECK_COSTS_ENV},):
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr  # a starter: not yet
    got = check_costs(folder)
    assert got and {c["project"] for c in got} == {"foundations"}, got
    assert all(c["stage"] == 1 and c["runs"] == 2 and c["wall"] >= 0 for c in got), got
    here = "tests/test_suite_workers.py"  # the test that started them, from pytest's name
    assert all(list(c["tests"]) == [here] for c in got), got
    assert [c["wall"] for c in got] == sorted((c["wall"] for c in got), reverse=True), got
    assert check_costs(tmp_path / "none") == []

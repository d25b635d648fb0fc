"""The CPU time the sandbox's watchdog reads for a run (``autograder.run_cpu``): a run
that sleeps past its limit reads next to none (starved, by the rule), a busy loop reads
what it burned (not starved), a run that burns a known amount reads that amount, and
processes that exited before the end still count. Read both ways: through the run's
cgroups (as root on a machine with writable v1 cgroups) and from ``/proc`` (a process
watched without them, as on a learner's own machine)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from autograder import cgroups, run_cpu, sandbox

SLEEP = "import time; time.sleep(100)"
# says, as it goes, how much CPU it has burned (its own count: the lower bound)
LOOP = "import time\nwhile True:\n    print(time.process_time(), flush=True)\n" \
       "    t = time.process_time()\n    while time.process_time() < t + 0.05: pass\n"
BURN = "import time\nwhile time.process_time() < {s}: pass\n"
# a child that burns 0.6 s and exits, then the parent burns 0.6 s of its own
TWO = ("import subprocess, sys, time\n"
       "subprocess.run([sys.executable, '-c', " + repr(BURN.format(s=0.6)) + "], check=True)\n"
       + BURN.format(s=0.6))


def jailed(code: str, wall_s: float) -> sandbox.Outcome:
    """``code`` run by a fresh interpreter in a sandbox (its cgroups where there are)."""
    with sandbox.SandboxDir(None) as box:
        jail = sandbox.Jail(box, [sys.executable, "-c", code], uid=None,
                            limits=sandbox.Limits(wall_s=wall_s), namespaces=False)
        return sandbox.run(jail)


def watched(code: str, wall_s: float) -> sandbox.Outcome:
    """``code`` run as a plain child process, watched by the same watchdog: no run
    cgroup, so its CPU time comes from ``/proc``."""
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        return sandbox.Monitor(proc, sandbox.Limits(wall_s=wall_s)).run()
    finally:
        proc.stdout.close()
        proc.stderr.close()


RUNS = [pytest.param(watched, id="proc"),
        pytest.param(jailed, id="cgroup", marks=pytest.mark.skipif(
            not cgroups.available(), reason="no writable v1 memory+pids cgroups"))]


@pytest.mark.parametrize("run", RUNS)
def test_a_run_that_sleeps_past_its_limit_reads_next_to_no_cpu(run):
    outcome = run(SLEEP, 2.0)
    assert outcome.killed_for == "wall-clock"
    assert outcome.cpu_s is not None and outcome.cpu_s < 0.5, outcome.cpu_s
    assert run_cpu.starved(outcome.cpu_s, outcome.wall_s)


@pytest.mark.parametrize("run", RUNS)
def test_a_busy_loop_reads_the_cpu_it_burned(run):
    outcome = run(LOOP, 2.0)
    assert outcome.killed_for == "wall-clock"
    burned = float(outcome.stdout.split()[-1])  # its own last count, before the kill
    # every tick it counted, and no more than the wall time allows (one core; the
    # interpreter's start-up before its first count on top)
    assert burned - 0.02 <= outcome.cpu_s <= outcome.wall_s + 0.2, (burned, outcome)
    if burned > run_cpu.STARVED_SHARE * outcome.wall_s:  # the machine gave it a core
        assert not run_cpu.starved(outcome.cpu_s, outcome.wall_s)


@pytest.mark.parametrize("run", RUNS)
def test_a_run_reads_what_it_burned_exited_children_included(run):
    outcome = run(TWO, 60.0)
    assert outcome.returncode == 0 and outcome.killed_for is None, outcome.stderr
    # 1.2 s burned in two processes, plus two interpreters' start-up; a /proc read can
    # miss up to one poll (0.1 s) of each process's end
    assert 1.0 <= outcome.cpu_s <= 2.0, outcome.cpu_s


def test_the_rule_is_a_share_of_one_core():
    assert run_cpu.starved(0.4, 2.0) and not run_cpu.starved(1.6, 2.0)
    assert not run_cpu.starved(None, 2.0)  # not measured: never called starved

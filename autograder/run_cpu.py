"""The CPU time a sandboxed run's processes got, and what it says about a run stopped at
its wall-clock limit.

A run stopped for ``wall-clock`` either kept a core busy to the end (a loop: its CPU
time is close to its wall time, or a multiple of it) or got little CPU: its code slept
or waited (a sleep, a deadlock), or the machine was too busy to run it (other learners'
runs, their endless loops, other jobs). One run cannot tell those apart, so a run that
got less than ``STARVED_SHARE`` of one core over its wall time is *starved*
(``outcomes.STARVED``): the grader grades it once more at the end of the batch
(``autograder.grade.retry_undecided``) instead of scoring the timeout as the learner's.

How it is read (user + system time of every process of the run):

* with the run's cpuacct cgroup (v1, ``autograder.cgroups``): ``cpuacct.usage``, the
  kernel's count for every task that ever ran in it, exited ones included;
* without: ``/proc/<pid>/stat`` of the run's processes (utime + stime), keeping the last
  figure seen of each (by pid and start time), so a process that exited still counts. A
  process that lived less than one poll (0.1 s) is missed: the figure errs towards
  "starved", whose cost is one more run, never a lost verdict.
"""

from __future__ import annotations

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")
# Under this share of one core over its wall time, a timed-out run was starved. Measured
# (docs/instructors.md): a loop gets 0.95 of a core on an idle machine and 0.32-0.37 at
# a load of 4 on 2 cores, where half a core would retry every loop; a correct
# performance-audit stage 4 needs 5.2-5.7 s of CPU at that load and up to 7 s at a
# fifth of a core (waiting costs CPU too: thread pools spin). The rule presumes a limit
# at least 1 / STARVED_SHARE times the CPU a correct stage needs: a run that had that
# much and did not finish is the learner's timeout.
STARVED_SHARE = 0.25


def starved(cpu_s: float | None, wall_s: float) -> bool:
    """A run that got under ``STARVED_SHARE`` of a core in ``wall_s`` (False when its
    CPU time was not measured)."""
    return cpu_s is not None and cpu_s < STARVED_SHARE * wall_s


def stat_cpu(raw: bytes) -> tuple[int, int] | None:
    """(utime + stime in clock ticks, start time) from a ``/proc/<pid>/stat`` line."""
    rest = raw[raw.rfind(b")") + 2:].split()
    try:
        return int(rest[11]) + int(rest[12]), int(rest[19])
    except (IndexError, ValueError):
        return None


class TreeCpu:
    """The CPU time of a set of processes over a run, from ``/proc`` reads: the last
    figure seen of each process, summed."""

    def __init__(self):
        self._last: dict[tuple[int, int], int] = {}

    def see(self, pid: int, ticks: int, start: int) -> None:
        self._last[pid, start] = ticks

    def see_pids(self, pids: list[int]) -> None:
        """Read these processes' figures now (one that is gone keeps its last)."""
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat", "rb") as f:
                    found = stat_cpu(f.read())
            except OSError:
                continue
            if found is not None:
                self.see(pid, *found)

    @property
    def seconds(self) -> float:
        return sum(self._last.values()) / CLK_TCK

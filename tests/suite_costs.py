"""Where a pytest run's time went, printed at its end (runs of a minute or more): each
file's wall and CPU seconds, the cores' use, and a probe of the machine's speed, so two
runs on different machines compare by work rather than by the clock. The same suite took
852 s here one day and 1,587 s the day before: the machine moves more than most changes to
the suite do (CI's own figures: docs/ci.md).

A test's CPU, under make test's pinned workers (conftest.pin_to_one_core), is its core's
busy time in ``/proc/stat``: the worker and everything it started, whoever waits for it
(the grader's sandboxes are not the test's children). Unpinned, it is the process's own
(``os.times``) plus the children it waited for. The probe is the best of five CPU times
of one thread doing a fixed piece of Python and numpy work, taken before the workers
start; ``probe units`` (CPU / probe) are the figure to compare across machines. The
figures also go to ``build/test-costs.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from helpers import PINNED

from coursekit.checking.contract import CHECK_COSTS_ENV

COSTS_ENV = "COURSE_TESTS_COSTS"           # the folder every worker writes its lines to
MIN_WALL_ENV = "COURSE_TESTS_COSTS_MIN_S"  # print for runs at least this long (default 60)
SHOWN = 12                                 # files in the table
SHOWN_CHECKS = 10                          # checks in the table of checks
SLOWEST = 60                               # tests kept in the JSON, slowest first
_STARTED: dict = {}


def probe_cpu_s() -> float:
    """CPU seconds of one thread doing a fixed workload (Python arithmetic and numpy's
    element-wise work), best of five: the machine's speed as the suite's own Python and
    compiler work feel it. One thread's clock, since a process's clock also counts BLAS
    threads that spin after a matmul (1.8x a loop's wall time here)."""
    best = float("inf")
    a = np.linspace(-3.0, 3.0, 1_000_000)
    for _ in range(5):
        start = time.thread_time()
        total = 0
        for i in range(400_000):
            total += i * i % 7
        for _ in range(10):
            a = np.tanh(a) * 3.0
        best = min(best, time.thread_time() - start)
    return best


def core_busy_s(core: int) -> float:
    """Seconds core ``core`` has been busy since boot (user, nice, system, irq, softirq)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith(f"cpu{core} "):
                ticks = [int(v) for v in line.split()[1:8]]
                return (sum(ticks[:3]) + sum(ticks[5:7])) / os.sysconf("SC_CLK_TCK")
    raise LookupError(f"no cpu{core} line in /proc/stat")


def _cpu_s() -> float:
    core = os.environ.get(PINNED)
    if core is not None:
        return core_busy_s(int(core))
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = Path(tempfile.mkdtemp(prefix="course-costs-"))
    os.environ[COSTS_ENV] = str(folder)  # before the workers start: they inherit it
    (folder / "checks").mkdir()
    os.environ[CHECK_COSTS_ENV] = str(folder / "checks")  # and every checker they start
    _STARTED.update(folder=folder, wall=time.perf_counter(), probe=probe_cpu_s(),
                    cores=len(os.sched_getaffinity(0)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    wall, cpu = time.perf_counter(), _cpu_s()
    yield
    folder = os.environ.get(COSTS_ENV)
    if folder and Path(folder).is_dir():
        line = {"file": item.nodeid.partition("::")[0], "test": item.nodeid,
                "wall": time.perf_counter() - wall,
                "cpu": _cpu_s() - cpu, "pinned": os.environ.get(PINNED) is not None}
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(Path(folder) / f"{worker}.jsonl", "a") as f:
            f.write(json.dumps(line) + "\n")


def summary(folder: Path, wall_s: float, probe_s: float, cores: int) -> dict:
    """The run's figures from the workers' lines: per file and in all."""
    files: dict = defaultdict(lambda: {"wall": 0.0, "cpu": 0.0, "tests": 0})
    workers: dict = defaultdict(lambda: {"wall": 0.0, "cpu": 0.0, "tests": 0})
    pinned, tests = [], []
    for path in sorted(folder.glob("*.jsonl")):
        for text in path.read_text().splitlines():
            line = json.loads(text)
            tests.append((line["wall"], line.get("test", line["file"]), path.stem))
            row = files[line["file"]]
            row["wall"] += line["wall"]
            row["cpu"] += line["cpu"]
            row["tests"] += 1
            mine = workers[path.stem]
            mine["wall"] += line["wall"]
            mine["cpu"] += line["cpu"]
            mine["tests"] += 1
            pinned.append(line.get("pinned", False))
    cpu = sum(r["cpu"] for r in files.values())
    return {"checks": check_costs(folder / "checks"), "wall_s": wall_s, "cores": cores, "cpu_s": cpu, "probe_cpu_s": probe_s,
            "probe_units": cpu / probe_s if probe_s > 0 else None,
            "busy": cpu / (wall_s * cores) if wall_s > 0 else None,
            "pinned": bool(pinned) and all(pinned),
            "files": dict(sorted(files.items(), key=lambda kv: -kv[1]["cpu"])),
            # each worker's tests in all: a worker whose sum falls short of the run's wall
            # waited at the end (or between tests) for the other
            "workers": {k: {f: round(v, 1) if isinstance(v, float) else v
                            for f, v in w.items()} for k, w in sorted(workers.items())},
            # each test's wall, its module fixtures' setup included (the first test of a
            # file that grades a batch carries the batch): where a trim would pay
            "slowest": [{"wall": round(w, 1), "test": t, "worker": k}
                        for w, t, k in sorted(tests, reverse=True)[:SLOWEST]]}


def check_costs(folder: Path) -> list[dict]:
    """Every check the suite's checker processes ran, by (project, check): how many runs
    and their wall seconds in all, costliest first (the grader's sandboxes start checkers
    with an environment of their own, so their runs are not in it)."""
    runs: dict = defaultdict(lambda: {"runs": 0, "wall": 0.0, "tests": defaultdict(float)})
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        for text in path.read_text().splitlines():
            line = json.loads(text)
            row = runs[(line["project"], line["stage"], line["check"])]
            row["runs"] += 1
            row["wall"] += float(line["wall"] or 0.0)
            row["tests"][line.get("test") or "?"] += float(line["wall"] or 0.0)
    return [{"project": p, "stage": st, "check": c, "runs": r["runs"],
             "wall": round(r["wall"], 1),
             "tests": {t: round(w, 1) for t, w in sorted(r["tests"].items(),
                                                         key=lambda kv: -kv[1])}}
            for (p, st, c), r in sorted(runs.items(), key=lambda kv: -kv[1]["wall"])]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    folder = _STARTED.get("folder")
    if folder is None:
        return
    wall = time.perf_counter() - _STARTED["wall"]
    try:
        if wall < float(os.environ.get(MIN_WALL_ENV, "60")):
            return
        s = summary(folder, wall, _STARTED["probe"], _STARTED["cores"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tr = terminalreporter
    tr.section("where the run's time went (CPU figures of this machine)")
    busy = f"{s['busy']:.0%}" if s["busy"] is not None else "?"
    how = ("each pinned worker's core's busy time" if s["pinned"]
           else "theirs and their waited-for children's")
    tr.write_line(f"{s['wall_s']:,.0f} s wall on {s['cores']} cores; the tests' CPU "
                  f"({how}): {s['cpu_s']:,.0f} s ({busy} of the cores' time)")
    tr.write_line(f"machine probe: {s['probe_cpu_s']:.3f} s of CPU for a fixed workload; "
                  f"this run was {s['probe_units']:,.0f} probe units of work (compare runs "
                  "on different machines by these, not by seconds)")
    if len(s["workers"]) > 1:
        tr.write_line("per worker, its tests' wall and CPU: " + "; ".join(
            f"{k} {w['wall']:,.0f} s / {w['cpu']:,.0f} s ({w['tests']} tests)"
            for k, w in s["workers"].items()))
    tr.write_line(f"{'CPU s':>8} {'wall s':>8} {'tests':>5}  file")
    for name, row in list(s["files"].items())[:SHOWN]:
        tr.write_line(f"{row['cpu']:8.1f} {row['wall']:8.1f} {row['tests']:5d}  {name}")
    if s["checks"]:
        total = sum(c["wall"] for c in s["checks"])
        tr.write_line(f"the checks' own wall time in the checker processes started here: "
                      f"{total:,.0f} s over {sum(c['runs'] for c in s['checks']):,} runs; "
                      "the costliest:")
        tr.write_line(f"{'wall s':>8} {'runs':>5}  check")
        for c in s["checks"][:SHOWN_CHECKS]:
            tr.write_line(f"{c['wall']:8.1f} {c['runs']:5d}  {c['project']} stage "
                          f"{c['stage']} · {c['check']}")
    out = Path(config.rootpath) / "build" / "test-costs.json"
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(s, indent=1))
        tr.write_line(f"(every file: {out.relative_to(config.rootpath)})")
    except OSError as err:
        tr.write_line(f"(not written: {out}: {err})")

"""The learner-process bridge's cost: each project's checker on its reference solution
with learner code in a learner process (what the grader uses) and imported into the
checker (``bridge.InProcess``, no isolation), stage by stage, interleaved in one run, and
the grading throughput that follows (checker time summed over every stage of every
project; the sandbox around a stage costs both paths alike). Also the bridge's fixed
costs: starting a learner process (Python, JAX and the learner file) and one round trip.

    python bench/bench_bridge.py [--project P] [--rounds R]

Each project runs in its own process (a checker may fix the device count at import).
Every figure is a CPU figure. The throughput bound the course holds itself to: at most
20% fewer stages graded per minute than in-process grading.
"""

from __future__ import annotations

import argparse
import json
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit.facts import ROOT, checker_path, projects

sys.path.insert(0, str(ROOT))
THROUGHPUT_BOUND = 0.20
BRIDGE_FAILED = " (CHECKS FAILED THROUGH THE BRIDGE)"
BASELINE_FAILED = (" (the in-process baseline fails checks that read the learner process: "
                   "a lower bound, not comparable)")


def load_checker(project: str):
    sys.path.insert(0, str(checker_path(project).parent))
    return runpy.run_path(str(checker_path(project)), run_name="bench_bridge")["checker"]


def stage_time(checker, bridge, solution: Path, stage: int, separate: bool):
    learner = bridge.LearnerProcess(solution) if separate else bridge.InProcess(solution)
    bridge._PRESTARTED[learner.impl_path] = learner
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, open("/dev/null", "w") as null:
        results = checker.run(solution, [stage], 1234, Path(tmp), out=null)
    return time.perf_counter() - start, all(r.status == "pass" for r in results)


def one_project(project: str, rounds: int) -> dict:
    """Measure ``project`` here; returns per-stage medians (seconds)."""
    from coursekit.checking import bridge
    checker = load_checker(project)
    solution = ROOT / "projects" / project / "solution" / "model.py"
    if not checker.learner_process:
        return {"project": project, "ported": False}
    start = time.perf_counter()
    learner = bridge.LearnerProcess(solution)
    learner.module()
    started = time.perf_counter() - start
    trips = []
    for _ in range(30):
        t = time.perf_counter()
        learner.request("inspect", "common/global_state_digest")
        trips.append(time.perf_counter() - t)
    learner.close()
    stages = {}
    for stage in sorted({c.stage for c in checker.checks}):
        times, ok = {True: [], False: []}, {True: True, False: True}
        for _ in range(rounds):
            for separate in (False, True):
                wall, passed = stage_time(checker, bridge, solution, stage, separate)
                times[separate].append(wall)
                ok[separate] = ok[separate] and passed
        stages[stage] = {"learner_process_s": statistics.median(times[True]),
                         "in_process_s": statistics.median(times[False]),
                         "passed": ok[True], "in_process_passed": ok[False]}
    return {"project": project, "ported": True, "start_s": started,
            "round_trip_ms": statistics.median(trips) * 1e3, "stages": stages}


def report(found: list[dict], rounds: int) -> None:
    sep_total = inp_total = 0.0
    for r in found:
        if not r["ported"]:
            print(f"{r['project']}: checker imports learner code in its own process "
                  "(not ported): nothing to compare")
            continue
        print(f"{r['project']}: learner process start {r['start_s']:.2f} s (Python + JAX "
              f"+ model.py), round trip {r['round_trip_ms']:.2f} ms median [CPU figure]")
        for stage, s in r["stages"].items():
            sep, inp = s["learner_process_s"], s["in_process_s"]
            sep_total, inp_total = sep_total + sep, inp_total + inp
            print(f"  stage {stage}: learner process {sep:.1f} s vs in-process {inp:.1f} s: "
                  f"+{sep - inp:.1f} s ({(sep / inp - 1) * 100:+.0f}%), median of {rounds} "
                  f"interleaved rounds{'' if s['passed'] else BRIDGE_FAILED}"
                  f"{'' if s.get('in_process_passed', True) else BASELINE_FAILED}")
    if inp_total:
        drop = 1 - inp_total / sep_total
        verdict = "within" if drop <= THROUGHPUT_BOUND else "OUTSIDE"
        print(f"grading throughput, every ported stage: {drop * 100:.0f}% fewer stages per "
              f"minute than in-process ({sep_total:.0f} s vs {inp_total:.0f} s of checker "
              f"time): {verdict} the {THROUGHPUT_BOUND:.0%} bound [CPU figure]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default="")
    parser.add_argument("--out", default="")  # make bench passes it; figures go to stdout
    args = parser.parse_args(argv)
    if args.json:  # the child: one project, measured here
        Path(args.json).write_text(json.dumps(one_project(args.project, args.rounds)))
        return 0
    found = []
    for project in [args.project] if args.project else projects(with_solution=True):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "r.json"
            subprocess.run([sys.executable, __file__, "--project", project, "--rounds",
                            str(args.rounds), "--json", str(out)], check=True, cwd=ROOT)
            found.append(json.loads(out.read_text()))
    report(found, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

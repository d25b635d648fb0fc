"""The learner-process bridge's cost on grading throughput: each project's checker on its
reference solution, every stage graded as the grader runs it (a fresh checker process per
stage: Python, JAX, check.py, the stage), with learner code in a learner process started
early as the grader's runner starts it (``bridge.prestart_for``), and imported into the
checker (``bridge.InProcess``, no isolation), interleaved round by round in one run. Also
the bridge's fixed costs: starting a learner process (Python, JAX and the learner file)
and one round trip.

    python bench/bench_bridge.py [--project P] [--rounds R]

The sandbox around a graded stage (namespaces, the course copy) costs both paths alike
and is left out, so the drop printed is an upper bound of the grader's. Every figure is a
CPU figure. The bound the course holds itself to: at most 20% fewer stages graded per
minute than in-process grading.
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

THROUGHPUT_BOUND = 0.20
BRIDGE_FAILED = " (CHECKS FAILED THROUGH THE BRIDGE)"
BASELINE_FAILED = (" (the in-process baseline fails checks that read the learner process: "
                   "its time is a lower bound)")
MODES = ("in-process", "learner-process")


def solution_of(project: str) -> Path:
    return ROOT / "projects" / project / "solution" / "model.py"


def graded_stage(project: str, stage: int, mode: str) -> dict:
    """In a fresh process (the child): one stage as the grader's runner runs it."""
    sys.path.insert(0, str(ROOT))
    from coursekit.checking import bridge
    check, impl = checker_path(project), solution_of(project)
    if mode == "learner-process":  # started while check.py imports, as the runner does
        bridge.prestart_for(check.read_text(), impl)
    sys.path.insert(0, str(check.parent))
    checker = runpy.run_path(str(check), run_name="bench_bridge")["checker"]
    if mode == "in-process":
        bridge._PRESTARTED[impl.resolve()] = bridge.InProcess(impl)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, open("/dev/null", "w") as null:
        results = checker.run(impl, [stage], 1234, Path(tmp), out=null)
    return {"checker_s": time.perf_counter() - start,
            "passed": all(r.status == "pass" for r in results)}


def fixed_costs(project: str) -> dict:
    """(The child) a learner process's start and one round trip."""
    from coursekit.checking import bridge
    start = time.perf_counter()
    learner = bridge.LearnerProcess(solution_of(project))
    learner.module()
    started = time.perf_counter() - start
    trips = []
    for _ in range(30):
        t = time.perf_counter()
        learner.request("inspect", "common/global_state_digest")
        trips.append(time.perf_counter() - t)
    learner.close()
    return {"start_s": started, "round_trip_ms": statistics.median(trips) * 1e3}


def child(*args: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        subprocess.run([sys.executable, __file__, *args, "--json", str(out)], check=True,
                       cwd=ROOT)
        return json.loads(out.read_text())


def stages_of(project: str) -> list[int]:
    from coursekit.commands.flake import stages_of as read
    return read(project)


def one_project(project: str, rounds: int) -> dict:
    from autograder import protocol
    if not protocol.wants_learner_process(checker_path(project).read_text()):
        return {"project": project, "ported": False}
    found = {"project": project, "ported": True, **child("--fixed", project), "stages": {}}
    for stage in stages_of(project):
        walls = {m: [] for m in MODES}
        inner = {m: [] for m in MODES}
        ok = {m: True for m in MODES}
        for _ in range(rounds):
            for mode in MODES:  # interleaved: both see the same machine
                start = time.perf_counter()
                got = child("--graded", project, str(stage), mode)
                walls[mode].append(time.perf_counter() - start)
                inner[mode].append(got["checker_s"])
                ok[mode] = ok[mode] and got["passed"]
        found["stages"][stage] = {m: {"wall_s": statistics.median(walls[m]),
                                      "checker_s": statistics.median(inner[m]),
                                      "passed": ok[m]} for m in MODES}
    return found


def report(found: list[dict], rounds: int) -> dict:
    totals = {m: 0.0 for m in MODES}
    inner = {m: 0.0 for m in MODES}
    for r in found:
        if not r["ported"]:
            print(f"{r['project']}: checker imports learner code in its own process "
                  "(not ported): nothing to compare")
            continue
        print(f"{r['project']}: learner process start {r['start_s']:.2f} s (Python + JAX "
              f"+ model.py), round trip {r['round_trip_ms']:.2f} ms median [CPU figure]")
        for stage, s in r["stages"].items():
            sep, inp = s["learner-process"], s["in-process"]
            for m in MODES:
                totals[m] += s[m]["wall_s"]
                inner[m] += s[m]["checker_s"]
            more = (sep["wall_s"] / inp["wall_s"] - 1) * 100
            print(f"  stage {stage}: graded in {sep['wall_s']:.1f} s through the bridge vs "
                  f"{inp['wall_s']:.1f} s in-process ({more:+.0f}%; checks alone "
                  f"{sep['checker_s']:.1f} vs {inp['checker_s']:.1f} s), median "
                  f"of {rounds}{'' if sep['passed'] else BRIDGE_FAILED}"
                  f"{'' if inp['passed'] else BASELINE_FAILED}")
    summary = {}
    if totals["in-process"]:
        drop = 1 - totals["in-process"] / totals["learner-process"]
        checks_drop = 1 - inner["in-process"] / inner["learner-process"]
        verdict = "within" if drop <= THROUGHPUT_BOUND else "OUTSIDE"
        print(f"grading throughput, every stage of every project, each graded in a fresh "
              f"checker process: {drop * 100:.0f}% fewer stages per minute than in-process "
              f"({totals['learner-process']:.0f} s vs {totals['in-process']:.0f} s): "
              f"{verdict} the {THROUGHPUT_BOUND:.0%} bound [CPU figure; the checks alone, "
              f"without the checker's start: {checks_drop * 100:.0f}%]")
        summary = {"drop": drop, "checks_drop": checks_drop, "within": drop <= THROUGHPUT_BOUND}
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", default="")
    parser.add_argument("--graded", nargs=3, metavar=("PROJECT", "STAGE", "MODE"))
    parser.add_argument("--fixed", metavar="PROJECT")
    parser.add_argument("--out", default="")  # make bench passes it; figures go to stdout
    args = parser.parse_args(argv)
    if args.graded:  # a child: one graded stage
        project, stage, mode = args.graded
        Path(args.json).write_text(json.dumps(graded_stage(project, int(stage), mode)))
        return 0
    if args.fixed:  # a child: the fixed costs
        Path(args.json).write_text(json.dumps(fixed_costs(args.fixed)))
        return 0
    found = [one_project(p, args.rounds)
             for p in ([args.project] if args.project else projects(with_solution=True))]
    report(found, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The learner-process bridge's cost on grading throughput: every stage of every project
graded by the real grader (``autograder.grade``: sandbox, runner, check.py) on a submission
of the reference solutions, once with the course as it is (learner code in a learner
process the runner starts early) and once with a copy of the course whose bridge imports
learner code into the checker (``bridge.InProcess``: no isolation, the baseline),
interleaved project by project in one run. Both grade as a batch does: a project's stages
share one sandboxed run (``autograder.project_run``), so the learner process is started
once per project. Figures are the sandboxed runs' own wall times (the grader's start-up
left out; each stage's record carries its checks' time plus an equal share of the run's
start) and the checks' time inside them. Also the bridge's fixed costs: starting a
learner process (Python, JAX and the learner file) and one round trip.

    python bench/bench_bridge.py [--project P] [--rounds R]

Every figure is a CPU figure. The bound the course holds itself to: at most 20% fewer
stages graded per minute than in-process grading.
"""

from __future__ import annotations

import argparse
import json
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


# Appended to the baseline copy's coursekit/checking/bridge.py: the checker takes an
# InProcess (the learner file imported here) and the runner starts no learner process.
IN_PROCESS_PATCH = """

def take(impl_path):  # bench_bridge's in-process baseline
    return InProcess(impl_path)


def prestart_for(check_source, impl_path):  # bench_bridge: nothing to start early
    return None
"""


def course_copy(dest: Path, in_process: bool) -> Path:
    """What the grader copies into its sandbox (coursekit/, projects/), here or patched."""
    import shutil
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for name in ("coursekit", "projects", "notebooks"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    if in_process:
        bridge = dest / "coursekit" / "checking" / "bridge.py"
        bridge.write_text(bridge.read_text() + IN_PROCESS_PATCH)
    return dest


def submission_of_solutions(dest: Path) -> Path:
    import shutil
    student = dest / "reference"
    for project in projects(with_solution=True):
        target = student / "projects" / project / "starter" / "model.py"
        target.parent.mkdir(parents=True)
        shutil.copyfile(solution_of(project), target)
    return dest


def graded_project(course: Path, subs: Path, out: Path, project: str) -> list[dict]:
    """Every stage of ``project`` of the reference submission through the real grader
    (as a batch grades them: one sandboxed run shared by the stages); the records."""
    import contextlib
    import io

    from autograder.grade import grade
    from autograder.gradebook import Gradebook
    with contextlib.redirect_stderr(io.StringIO()):
        grade(subs, out, workers=1, selection=project, regrade="all",
              course_root=course, notebooks_dir=course / "notebooks", progress=False,
              timeout=900)
    book = Gradebook.in_dir(out)
    rows = sorted((r["record"] for r in book.latest().values()
                   if r["record"].get("project") == project),
                  key=lambda rec: rec["stage"])
    book.close()
    return rows


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


def one_project(project: str, rounds: int, courses: dict, subs: Path, tmp: Path) -> dict:
    from coursekit import protocol
    if not protocol.wants_learner_process(checker_path(project).read_text()):
        return {"project": project, "ported": False}
    found = {"project": project, "ported": True, **child("--fixed", project), "stages": {}}
    per_stage: dict = {}
    for _ in range(rounds):
        for mode in MODES:  # interleaved: both see the same machine
            for record in graded_project(courses[mode], subs, tmp / f"out-{mode}", project):
                seen = per_stage.setdefault(record["stage"], {m: {"wall_s": [], "checker_s": [],
                                                                  "passed": True}
                                                              for m in MODES})[mode]
                seen["wall_s"].append(record["wall_s"])
                seen["checker_s"].append(record["check_time_s"])
                seen["passed"] = seen["passed"] and record["status"] == "pass"
    for stage, modes in sorted(per_stage.items()):
        found["stages"][stage] = {m: {"wall_s": statistics.median(v["wall_s"]),
                                      "checker_s": statistics.median(v["checker_s"]),
                                      "passed": v["passed"]} for m, v in modes.items()}
    return found


def report(found: list[dict], rounds: int) -> dict:
    totals = {m: 0.0 for m in MODES}
    inner = {m: 0.0 for m in MODES}
    comparable = {m: 0.0 for m in MODES}  # stages where the baseline passes too
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
                comparable[m] += s[m]["wall_s"] if inp["passed"] and sep["passed"] else 0.0
            more = (sep["wall_s"] / inp["wall_s"] - 1) * 100
            print(f"  stage {stage}: graded in {sep['wall_s']:.1f} s through the bridge vs "
                  f"{inp['wall_s']:.1f} s in-process ({more:+.0f}%; checks alone "
                  f"{sep['checker_s']:.1f} vs {inp['checker_s']:.1f} s), median "
                  f"of {rounds}{'' if sep['passed'] else BRIDGE_FAILED}"
                  f"{'' if inp['passed'] else BASELINE_FAILED}")
    # The bound is judged where both ways pass: a stage the in-process baseline fails
    # (its checks that read the learner process fail at once) makes its time a lower
    # bound, and the drop over every stage an upper bound only.
    summary = {}
    failed = sum(1 for r in found if r["ported"] for s in r["stages"].values()
                 if not s["in-process"]["passed"])
    if totals["in-process"]:
        drop = 1 - totals["in-process"] / totals["learner-process"]
        checks_drop = 1 - inner["in-process"] / inner["learner-process"]
        graded = sum(len(r["stages"]) for r in found if r["ported"])
        at_most = f"; at most: the baseline failed {failed} of {graded} stages, fast" \
            if failed else ""
        print(f"grading throughput, every stage of every project through the grader's "
              f"sandbox: {drop * 100:.0f}% fewer stages per minute than in-process "
              f"({totals['learner-process']:.0f} s vs {totals['in-process']:.0f} s{at_most}"
              f") [CPU figure; the checks alone, without the sandbox and the checker's "
              f"start: {checks_drop * 100:.0f}%]")
        per_stage = (totals["learner-process"] - totals["in-process"]) / max(graded, 1)
        print(f"  the bridge's cost per graded stage: {per_stage:+.2f} s wall "
              f"({graded} stages; a project's stages share one learner process)")
        summary = {"drop": drop, "checks_drop": checks_drop, "per_stage_s": per_stage,
                   "baseline_failed": failed}
    if comparable["in-process"]:
        drop = 1 - comparable["in-process"] / comparable["learner-process"]
        verdict = "within" if drop <= THROUGHPUT_BOUND else "OUTSIDE"
        print(f"  the stages where the in-process baseline passes too: {drop * 100:.0f}% "
              f"fewer per minute ({comparable['learner-process']:.0f} s vs "
              f"{comparable['in-process']:.0f} s): {verdict} the {THROUGHPUT_BOUND:.0%} bound")
        summary.update(comparable_drop=drop, within=drop <= THROUGHPUT_BOUND)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", default="")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--json", default="")
    parser.add_argument("--fixed", metavar="PROJECT")
    parser.add_argument("--out", default="")  # make bench passes it; figures go to stdout
    args = parser.parse_args(argv)
    if args.fixed:  # a child: the fixed costs
        Path(args.json).write_text(json.dumps(fixed_costs(args.fixed)))
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-bridge-") as tmp:
        tmp = Path(tmp)
        courses = {m: course_copy(tmp / m, m == "in-process") for m in MODES}
        subs = submission_of_solutions(tmp / "subs")
        found = [one_project(p, args.rounds, courses, subs, tmp)
                 for p in ([args.project] if args.project else projects(with_solution=True))]
    report(found, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())

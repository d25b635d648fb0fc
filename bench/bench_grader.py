"""Grader throughput and overhead, and the notebook part side by side with nbgrader.

    python bench/bench_grader.py --out build/bench      (or: make bench)

20 submissions (good, unfinished, wrong and hostile variants of performance-audit's
reference solution, each with the matching variant of the fixture notebook: wrong,
hidden-test failure, edited test cell, kernel crash, endless cell) are graded with
``--workers 2``: performance-audit stage 4 and the notebook, every item sandboxed.
Printed, measured in this one run (``--against COMMIT`` prints only the whole batch's
throughput against the grader at COMMIT, a git worktree, in interleaved rounds):

* whole batch: submissions per minute;
* per stage: the sandboxed run's wall time above the checks' own run time (what the
  checker reports), and one stage of the good submission sandboxed vs the same checker
  run bare (``check.py --stage 4`` in a plain subprocess), interleaved, so the sandbox's
  own cost shows apart from Python + JAX start-up, which any per-stage process pays;
* the notebook part alone: ours with 1 and 2 workers against ``nbgrader autograde`` on
  the same 20 notebooks (nbgrader grades one submission at a time and has no
  sandbox), as a throughput ratio. Same per-cell timeout for both.

CPU figures from a shared 2-core machine: the ratios are what to read, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from coursekit.facts import ROOT, checker_path

sys.path.insert(0, str(ROOT))

import autograder.samples as fx
from autograder.gradebook import Gradebook

MIX = ["good", "good", "good", "good", "good", "starter", "starter", "starter",
       "always-equal", "syntax-error", "missing-function", "abort", "segfault",
       "output-flood", "fake-perf-counter", "reads-solution", "network", "writes-outside",
       "memory-bomb", "infinite-loop"]
# A hostile student is hostile in the notebook too: the notebook variant follows the kind.
NOTEBOOK_OF = {"good": "nb-good", "starter": "nb-wrong", "always-equal": "nb-hidden-wrong",
               "syntax-error": "nb-wrong", "missing-function": "nb-wrong",
               "abort": "nb-kernel-crash", "segfault": "nb-kernel-crash",
               "output-flood": "nb-wrong", "fake-perf-counter": "nb-tampered",
               "reads-solution": "nb-tampered", "network": "nb-tampered",
               "writes-outside": "nb-tampered", "memory-bomb": "nb-wrong",
               "infinite-loop": "nb-cell-loop"}
NB = "notebooks/ag_demo.ipynb"
CELL_TIMEOUT = 8
NBGRADER_FAILED: list[int] = []  # submissions nbgrader could not grade (kernel died)


def env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def timed(cmd: list, check: bool = True, **kw) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([str(c) for c in cmd], capture_output=True, check=False, text=True,
                          env=env(), **kw)
    elapsed = time.perf_counter() - start
    if check and done.returncode != 0:
        raise SystemExit(f"failed: {' '.join(map(str, cmd))}\n{done.stderr[-3000:]}")
    return elapsed, done


def build(subs: Path, out: Path) -> list[str]:
    sources = fx.hostile_sources(out_dir=out)
    variants = fx.notebook_variants()
    students = []
    for i, kind in enumerate(MIX):
        student = f"{i:02d}-{kind}"
        edits = variants[NOTEBOOK_OF[kind]][0]
        fx.write(subs, student, sources[kind][0], fx.learner_notebook(edits))
        students.append(student)
    return students


def grade(subs: Path, out: Path, stages: str, workers: int, *extra) -> float:
    wall, _ = timed([sys.executable, "-m", "autograder", "grade", subs, "--out", out,
                     "--stages", stages, "--notebooks", fx.NOTEBOOK.parent,
                     "--workers", workers, "--timeout", 30, "--cell-timeout", CELL_TIMEOUT,
                     "--memory", 1500, "--max-procs", 200, "--quiet", *extra], cwd=ROOT)
    return wall


def records(out: Path) -> list[dict]:
    book = Gradebook.in_dir(out)
    rows = [r["record"] for r in book.latest().values()]
    book.close()
    return rows


def sandbox_cost(tmp: Path, good: Path, repeats: int = 3) -> tuple[float, float]:
    """Median wall time of one stage-4 run of ``good``: sandboxed (the gradebook
    record's own wall time, CLI start-up excluded) and bare (``check.py`` in a plain
    subprocess), interleaved so both see the same machine load."""
    check = checker_path("performance-audit")
    impl = good / "projects" / "performance-audit" / "starter" / "model.py"
    one = tmp / "one"
    shutil.copytree(good, one / good.name)
    sandboxed, bare = [], []
    for _ in range(repeats):
        grade(one, tmp / "out-one", "performance-audit:4", 1, "--regrade", "all")
        sandboxed.append(records(tmp / "out-one")[0]["wall_s"])
        wall, _ = timed([sys.executable, check, "--stage", 4, "--impl", impl, "--seed", 1],
                        cwd=ROOT)
        bare.append(wall)
    return statistics.median(sandboxed), statistics.median(bare)


def nbgrader_autograde(tmp: Path, subs: Path, students: list[str]) -> float:
    course = tmp / "nbgrader-course"
    (course / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copy(fx.NOTEBOOK, course / "notebooks")
    nbgrader = Path(sys.executable).parent / "nbgrader"
    timed([nbgrader, "generate_assignment", "notebooks"], cwd=course)
    for s in students:
        target = course / "build/nbgrader/submitted" / s / "notebooks"
        target.mkdir(parents=True)
        shutil.copy(subs / s / NB, target / "ag_demo.ipynb")
    # nbgrader exits 1 when a submission's kernel died: expected here, not a failure
    wall, done = timed([nbgrader, "autograde", "notebooks",
                        f"--ExecutePreprocessor.timeout={CELL_TIMEOUT}"], check=False,
                       cwd=course)
    graded = len(list((course / "build/nbgrader/autograded").glob("*/notebooks/*.ipynb")))
    failed = len(set(re.findall(r"error processing assignment '[^']*' for student '([^']*)'",
                                done.stderr)))
    if graded + failed != len(students):
        raise SystemExit(f"nbgrader handled {graded} + {failed} of {len(students)}:\n"
                         f"{done.stderr[-3000:]}")
    NBGRADER_FAILED.append(failed)
    return wall


def base_tree(commit: str, where: Path) -> Path:
    """A detached git worktree of ``commit`` at ``where``, sharing this checkout's
    environment (its .venv linked in): the grader as it was, on the same machine."""
    if where.exists():
        subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=ROOT,
                       capture_output=True, check=False)
        shutil.rmtree(where, ignore_errors=True)
    subprocess.run(["git", "worktree", "add", "--detach", str(where), commit], cwd=ROOT,
                   capture_output=True, check=True)
    (where / ".venv").symlink_to(ROOT / ".venv")
    return where


def against(commit: str, rounds: int, tmp: Path, subs: Path, n: int) -> int:
    """The whole batch graded by this checkout's grader and by ``commit``'s, in
    alternating order (A B, B A, ...), so drifting load falls on both: the throughput
    ratio per round and its median."""
    base = base_tree(commit, tmp / "base-tree")
    stages = f"performance-audit:4,{NB}"
    walls: dict[str, list[float]] = {"now": [], commit: []}
    try:
        for r in range(rounds):
            order = ("now", commit) if r % 2 == 0 else (commit, "now")
            for who in order:
                root = ROOT if who == "now" else base
                out = tmp / f"out-{'now' if who == 'now' else 'base'}-{r}"
                start = time.perf_counter()
                subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs),
                                "--out", str(out), "--stages", stages, "--notebooks",
                                str(fx.NOTEBOOK.parent), "--workers", "2", "--timeout",
                                "30", "--cell-timeout", str(CELL_TIMEOUT), "--memory",
                                "1500", "--max-procs", "200", "--quiet"], cwd=root,
                               env={**env(), "PYTHONPATH": str(root)}, capture_output=True,
                               check=False)
                walls[who].append(time.perf_counter() - start)
            print(f"round {r + 1}: now {walls['now'][-1]:.1f} s, {commit} "
                  f"{walls[commit][-1]:.1f} s (whole batch of {n}, --workers 2)", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT,
                       capture_output=True, check=False)
    ratios = [b / a for a, b in zip(walls["now"], walls[commit])]
    ratio = statistics.median(ratios)
    print(f"throughput now / at {commit}: median {ratio:.3f} over {rounds} interleaved "
          f"rounds (per round {', '.join(f'{x:.3f}' for x in ratios)}); "
          f"{'within' if ratio >= 0.9 else 'NOT within'} 10% of it. CPU figures "
          f"({os.cpu_count()} cores), a shared machine.")
    (tmp.parent / "bench_grader_against.json").write_text(json.dumps(
        {"commit": commit, "walls_s": walls, "ratios": ratios, "median": ratio}, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--against", default="", metavar="COMMIT",
                        help="only the whole-batch throughput, against the grader at COMMIT "
                        "(a git worktree), in interleaved rounds")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    tmp = Path(args.out) / "grader"
    shutil.rmtree(tmp, ignore_errors=True)
    subs = tmp / "submissions"
    students = build(subs, tmp / "out-full")
    if args.against:
        return against(args.against, args.rounds, tmp, subs, len(students))
    n = len(students)
    print(f"{n} submissions ({MIX.count('good')} good, {MIX.count('starter')} unfinished, "
          f"{n - MIX.count('good') - MIX.count('starter')} wrong or hostile); each: "
          f"performance-audit stage 4 + {NB}. CPU figures ({os.cpu_count()} cores).",
          flush=True)

    full = grade(subs, tmp / "out-full", f"performance-audit:4,{NB}", workers=2)
    recs = records(tmp / "out-full")
    stages = [r for r in recs if r["kind"] == "stage" and r.get("checks")
              and any(c.get("duration_s") for c in r["checks"])]
    over = [r["wall_s"] - r["check_time_s"] for r in stages]
    sandboxed, bare = sandbox_cost(tmp, subs / students[0])
    print(f"\nwhole batch, --workers 2: {full:.1f} s wall -> {n / full * 60:.1f} submissions/min")
    print(f"one stage alone, good submission, median of 3 interleaved runs: sandboxed "
          f"{sandboxed:.2f} s vs the same checker run bare {bare:.2f} s "
          f"(+{sandboxed - bare:.2f} s: namespaces, uid, copy, watchdog, result channel)")
    own = statistics.median(r["check_time_s"] for r in stages)
    print(f"per submission, overhead above the checks' own run time: median "
          f"{statistics.median(over):.2f} s per stage (Python + JAX start-up + sandbox; "
          f"checks themselves: median {own:.2f} s)")

    ours = {}
    for workers in (1, 2):
        ours[workers] = grade(subs, tmp / f"out-nb-{workers}", NB, workers)
    theirs = nbgrader_autograde(tmp, subs, students)
    print(f"\nnotebook part only ({n} notebooks, per-cell timeout {CELL_TIMEOUT} s):")
    print(f"  nbgrader autograde (one at a time, no sandbox): {theirs:6.1f} s -> "
          f"{n / theirs * 60:5.1f} notebooks/min ({NBGRADER_FAILED[0]} of {n} ended in "
          "an error: a kernel that dies fails the whole submission)")
    for workers, wall in ours.items():
        print(f"  autograder --workers {workers} (sandboxed):         {wall:6.1f} s -> "
              f"{n / wall * 60:5.1f} notebooks/min, {theirs / wall:.2f}x nbgrader")
    statuses = {}
    for r in recs:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    result = {"submissions": n, "full_wall_s": full, "stage_overhead_s": over,
              "sandboxed_stage_s": sandboxed, "bare_checker_s": bare,
              "notebooks_ours_s": ours, "notebooks_nbgrader_s": theirs,
              "statuses": statuses, "cpu_count": os.cpu_count(),
              "note": "CPU figures on a shared machine"}
    (Path(args.out) / "bench_grader.json").write_text(json.dumps(result, indent=1))
    print(f"\nstatuses in the full batch: {statuses}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""make flake: the reference must never FAIL a stage, run after run, on a loaded machine.

    python -m coursekit.commands.flake [--project P] [--stage K] [--runs N] [--seed S]
                                       [--load busy|heavy] [--impl PATH]

Each run is ``check.py --stage K --impl projects/<p>/solution/model.py --seed SEED`` in a
fresh process, under one of two loads kept up for the whole measurement:

* ``busy`` (default): one spinning process keeps a second core busy (a loaded 2-core
  machine, as CI's busy-core test); the reference must PASS every run;
* ``heavy``: a spinner on every core the checker may use plus one more, and a
  memory-bandwidth hog (numpy copying 256 MiB back and forth), like an oversubscribed
  shared grading node; the reference may be INCONCLUSIVE (exit 3) but must never FAIL.

``--impl PATH`` runs another file instead (a planted timing bug): then no run may PASS.
Seeds are drawn from ``--seed`` (default: a random base, printed), so a run reruns
exactly with the command printed beside it. Prints passes, inconclusives and fails per
project and stage; exit 1 when the expectation above is broken.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from coursekit.checking.contract import INCONCLUSIVE_EXIT
from coursekit.facts import ROOT, checker_path, projects

SPIN = "while True: pass"
HOG = ("import numpy as np\na = np.ones(1 << 25)\nb = np.empty_like(a)\n"
       "while True:\n    np.copyto(b, a)\n    np.copyto(a, b)\n")


def load_processes(load: str) -> list[subprocess.Popen]:
    """The background load: one spinner (busy), or every core plus one spinning and a
    memory-bandwidth hog (heavy)."""
    if load == "busy":
        return [subprocess.Popen([sys.executable, "-c", SPIN])]
    cores = len(os.sched_getaffinity(0))
    procs = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(cores + 1)]
    procs.append(subprocess.Popen([sys.executable, "-c", HOG]))
    return procs


def stages_of(project: str) -> list[int]:
    """The stages the checker registers, read from its --help (no import here)."""
    proc = subprocess.run([sys.executable, str(checker_path(project)), "--help"],
                          capture_output=True, text=True, check=True)
    found = re.search(r"--stage STAGE\s+one of \[([\d,\s]+)\]", proc.stdout)
    if not found:
        raise SystemExit(f"{project}: cannot read the stages from check.py --help")
    return [int(s) for s in found[1].split(",")]


def run_once(project: str, stage: int, seed: int, impl: Path) -> tuple[str, float, str]:
    """(verdict: pass | inconclusive | fail, seconds, the non-passing lines)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(checker_path(project)), "--stage", str(stage),
                           "--impl", str(impl), "--seed", str(seed)],
                          capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines()
             if ln.startswith(("FAIL", "INCONCLUSIVE"))]
    verdict = {0: "pass", INCONCLUSIVE_EXIT: "inconclusive"}.get(proc.returncode, "fail")
    return verdict, time.perf_counter() - start, "; ".join(lines)[:300]


def measure(project: str, runs: int, base_seed: int, out=sys.stdout,
            stages: list[int] | None = None, impl: Path | None = None,
            load: str = "busy") -> dict:
    rng = np.random.default_rng([base_seed, *project.encode()])
    impl = impl or ROOT / "projects" / project / "solution" / "model.py"
    result = {}
    for stage in stages_of(project):
        if stages and stage not in stages:
            for _ in range(runs):  # the same seeds per stage, chosen or not
                rng.integers(0, 2**31)
            continue
        counts = {"pass": 0, "inconclusive": 0, "fail": 0}
        others, seconds = [], []
        for _ in range(runs):
            seed = int(rng.integers(0, 2**31))
            verdict, took, lines = run_once(project, stage, seed, impl)
            seconds.append(took)
            counts[verdict] += 1
            if verdict != "pass":
                others.append((seed, verdict, lines))
        result[stage] = {"runs": runs, **counts, "others": others,
                         "median_s": float(np.median(seconds)), "max_s": max(seconds)}
        print(f"{project} stage {stage}: {counts['pass']} passed, {counts['inconclusive']} "
              f"inconclusive, {counts['fail']} failed of {runs} (median "
              f"{result[stage]['median_s']:.1f} s, longest {result[stage]['max_s']:.1f} s a "
              f"run; load: {load})", file=out, flush=True)
        for seed, verdict, lines in others:
            print(f"  {verdict} at --seed {seed}: {lines or 'non-zero exit'}\n"
                  f"    rerun: {sys.executable} {checker_path(project)} --stage {stage} "
                  f"--impl {impl} --seed {seed}", file=out)
    return result


def broken(results: dict, load: str, reference: bool) -> bool:
    """The expectation: a reference never FAILs (under busy load it always PASSes); a
    planted file never PASSes."""
    stages = [s for r in results.values() for s in r.values()]
    if not reference:
        return any(s["pass"] for s in stages)
    if load == "busy":
        return any(s["pass"] != s["runs"] for s in stages)
    return any(s["fail"] for s in stages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append",
                        help="a project (repeatable); default: every project with a solution")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--stage", type=int, action="append",
                        help="only these stages (repeatable; the seeds stay as in a full run)")
    parser.add_argument("--seed", type=int, default=None,
                        help="base seed the per-run seeds are drawn from (default: random)")
    parser.add_argument("--load", choices=("busy", "heavy"), default="busy")
    parser.add_argument("--impl", type=Path, default=None,
                        help="run this file instead of the reference (one --project)")
    args = parser.parse_args(argv)
    if args.impl and len(args.project or []) != 1:
        parser.error("--impl needs exactly one --project")
    base = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"make flake: {args.runs} runs per stage under {args.load} load, seeds drawn "
          f"from --seed {base}")
    background = load_processes(args.load)
    try:
        results = {p: measure(p, args.runs, base, stages=args.stage, impl=args.impl,
                              load=args.load)
                   for p in (args.project or projects(with_solution=True))}
    finally:
        for proc in background:
            proc.kill()
            proc.wait()
    return 1 if broken(results, args.load, reference=args.impl is None) else 0


if __name__ == "__main__":
    sys.exit(main())

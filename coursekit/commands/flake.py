"""make flake: the reference must pass every stage N times in a row with the other core busy.

    python -m coursekit.commands.flake [--project P] [--stage K] [--runs N] [--seed S]

Each run is ``check.py --stage K --impl projects/<p>/solution/model.py --seed SEED`` in a
fresh process, with one spinning process keeping a second core busy for the whole
measurement (a loaded 2-core machine, as CI's busy-core test). Seeds are drawn from
``--seed`` (default: a random base, printed), so a failing seed reruns exactly with the
command printed beside it. Prints passes per project and stage; exit 1 when any failed.
"""

from __future__ import annotations

import argparse
import re
import secrets
import subprocess
import sys
import time

import numpy as np

from coursekit.facts import ROOT, checker_path, projects


def busy_core() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def stages_of(project: str) -> list[int]:
    """The stages the checker registers, read from its --help (no import here)."""
    proc = subprocess.run([sys.executable, str(checker_path(project)), "--help"],
                          capture_output=True, text=True, check=True)
    found = re.search(r"--stage STAGE\s+one of \[([\d,\s]+)\]", proc.stdout)
    if not found:
        raise SystemExit(f"{project}: cannot read the stages from check.py --help")
    return [int(s) for s in found[1].split(",")]


def run_once(project: str, stage: int, seed: int) -> tuple[bool, float, str]:
    solution = ROOT / "projects" / project / "solution" / "model.py"
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, str(checker_path(project)), "--stage", str(stage),
                           "--impl", str(solution), "--seed", str(seed)],
                          capture_output=True, text=True)
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAIL")]
    return proc.returncode == 0, time.perf_counter() - start, "; ".join(failed)[:300]


def measure(project: str, runs: int, base_seed: int, out=sys.stdout,
            stages: list[int] | None = None) -> dict:
    rng = np.random.default_rng([base_seed, *project.encode()])
    result = {}
    for stage in stages_of(project):
        if stages and stage not in stages:
            for _ in range(runs):  # the same seeds per stage, chosen or not
                rng.integers(0, 2**31)
            continue
        passes, failures, seconds = 0, [], []
        for _ in range(runs):
            seed = int(rng.integers(0, 2**31))
            ok, took, failed = run_once(project, stage, seed)
            seconds.append(took)
            if ok:
                passes += 1
            else:
                failures.append((seed, failed))
        result[stage] = {"passes": passes, "runs": runs, "failures": failures}
        print(f"{project} stage {stage}: {passes} of {runs} passed (median "
              f"{float(np.median(seconds)):.1f} s a run, other core busy)", file=out, flush=True)
        for seed, failed in failures:
            print(f"  failed at --seed {seed}: {failed or 'non-zero exit'}\n"
                  f"    rerun: {sys.executable} {checker_path(project)} --stage {stage} "
                  f"--impl projects/{project}/solution/model.py --seed {seed}", file=out)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append",
                        help="a project (repeatable); default: every project with a solution")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--stage", type=int, action="append",
                        help="only these stages (repeatable; the seeds stay as in a full run)")
    parser.add_argument("--seed", type=int, default=None,
                        help="base seed the per-run seeds are drawn from (default: random)")
    args = parser.parse_args(argv)
    base = args.seed if args.seed is not None else secrets.randbelow(2**31)
    print(f"make flake: {args.runs} runs per stage, seeds drawn from --seed {base}")
    spinner = busy_core()
    try:
        results = {p: measure(p, args.runs, base, stages=args.stage)
                   for p in (args.project or projects(with_solution=True))}
    finally:
        spinner.kill()
        spinner.wait()
    return 0 if all(s["passes"] == s["runs"] for r in results.values() for s in r.values()) \
        else 1


if __name__ == "__main__":
    sys.exit(main())

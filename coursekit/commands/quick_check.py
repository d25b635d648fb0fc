"""``make check``: the quick edit-test loop, well under 3 minutes on 2 cores.

    python -m coursekit.commands.quick_check [--no-tests] [--stage N] [--only PROJECT,...]

1. ruff over the library, grader, solutions, checkers, notebook sources, benchmarks, tests;
2. the fast tests (``pytest -m "not slow"``);
3. one stage of every project's checker against its reference solution (stage 1 unless
   ``--stage``), each in its own process as a learner runs it, two at a time (each
   checker then runs with the other core busy, the condition its timing checks are
   built for), the longest first; each one's output is printed when it ends.

Prints each step's wall time and stops at the first failing step (exit 1). The whole
suite is ``make test``.

In a learner's release (``coursekit.facts.is_release``: no solutions, no tests, no
benchmarks, no notebook sources) there is nothing of the course's to lint or test: it runs
step 3 on the learner's own ``starter/model.py`` (every check of the stage, each project
in its own process) and exits as ``check.py`` does: 0 only when every check passed (a
function not written yet says "not yet"). ``--only`` picks projects, in both.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from coursekit.facts import ROOT, checker_path, is_release, projects

LINTED = ("coursekit", "autograder", "projects", "notebooks/src", "bench", "tests")


# The reference stage runs, longest first (stage 1 here: performance-audit's timing
# verdicts take about 40 s, the others 4-13 s).
LONGEST_FIRST = ("performance-audit", "sharded-training", "optimisation")


def step(title: str, cmd: list[str], capture: bool = False) -> bool:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, check=False, capture_output=capture, text=True)
    if capture:
        print(done.stdout + done.stderr, end="", flush=True)
    print(f"-- {title}: {'ok' if done.returncode == 0 else 'FAILED'} "
          f"({time.perf_counter() - started:.1f} s)", flush=True)
    return done.returncode == 0


def side_by_side(steps: list[tuple[str, list[str]]], at_once: int = 2) -> bool:
    """Run ``steps`` ``at_once`` at a time; True when every one passed."""
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=at_once) as pool:
        return all(pool.map(lambda s: step(*s, capture=True), steps))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-tests", action="store_true", help="skip the fast pytest step")
    parser.add_argument("--stage", default="1", help="checker stage run per project (1)")
    parser.add_argument("--only", default="", help="comma-separated projects (default: all)")
    args = parser.parse_args(argv)
    chosen = {p.strip() for p in args.only.split(",") if p.strip()}
    if is_release():
        return learner_loop(args.stage, chosen)
    started = time.perf_counter()
    steps = [("lint (ruff)", [sys.executable, "-m", "ruff", "check",
                              *(d for d in LINTED if (ROOT / d).exists())])]
    if not args.no_tests:
        steps.append(("fast tests", [sys.executable, "-m", "pytest", "-q", "-m", "not slow",
                                     "-p", "no:cacheprovider", "-n", "2",
                                     "--dist", "loadgroup"]))
    references = [(f"{project} stage {args.stage} (reference)",
                   [sys.executable, str(checker_path(project)), "--stage", args.stage,
                    "--impl", str(ROOT / "projects" / project / "solution" / "model.py")])
                  for project in sorted((p for p in projects(with_solution=True)
                                         if not chosen or p in chosen), key=lambda p: (
                      LONGEST_FIRST.index(p) if p in LONGEST_FIRST else len(LONGEST_FIRST),
                      p))]
    for title, cmd in steps:
        if not step(title, cmd):
            return 1
    if not side_by_side(references):
        return 1
    print(f"make check: everything passed in {time.perf_counter() - started:.0f} s "
          "(the full suite is make test)")
    return 0


def learner_loop(stage: str, chosen: set[str]) -> int:
    """A release's quick loop: the stage's checks on the learner's own file per project."""
    started = time.perf_counter()
    found = sorted(p for p in projects() if not chosen or p in chosen)
    if chosen - set(found):
        print(f"make check: no project {sorted(chosen - set(found))}; these are: "
              f"{', '.join(sorted(projects()))}", file=sys.stderr)
        return 2
    runs = [(f"{project} stage {stage} (your code)",
             [sys.executable, str(checker_path(project)), "--stage", stage,
              "--impl", str(ROOT / "projects" / project / "starter" / "model.py")])
            for project in found]
    ok = side_by_side(runs)
    print(f"make check: {'every check passed' if ok else 'not every check passed yet'} "
          f"in {time.perf_counter() - started:.0f} s (every stage: make test)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

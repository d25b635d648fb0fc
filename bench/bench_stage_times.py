"""How long a learner waits for a verdict: every stage of every project, on the reference
solution and on the released starter, idle and under heavy load.

    python bench/bench_stage_times.py --out build/bench [--project P] [--load idle,heavy]
                                                        (or: make bench)

Each run is ``check.py --stage K --impl FILE`` in a fresh process, as a learner runs it.
Printed per project and stage: the reference's wall time and verdict idle and under
``make flake``'s heavy load (a spinner on every core plus one, and a memory-bandwidth hog),
the heavy/idle factor, and the time a starter takes to hear "not yet" (idle), as a
multiple of a bare JAX start measured in the same run. The targets (issue 28): a stage
answers within ``STAGE_BUDGET_S`` idle, ends within ``LOADED_FACTOR_MAX`` times that under
heavy load (with a verdict or INCONCLUSIVE, never FAIL), and a starter hears "not yet"
within ``STARTER_FACTOR_MAX`` bare JAX starts. CPU figures from a shared 2-core machine:
read the ratios, not the seconds. Exit 1 when a reference FAILs or a target is missed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

from coursekit.commands.flake import load_processes, run_once, stages_of  # noqa: E402
from coursekit.facts import projects  # noqa: E402

STAGE_BUDGET_S = 60.0       # idle, 2 cores: "about a minute", optimisation stage 3 included
LOADED_FACTOR_MAX = 3.0     # under heavy load: the timing budgets hold, compiles slow down
STARTER_FACTOR_MAX = 4.0    # a starter's "not yet" against a bare JAX start
BARE_JAX = "import jax, jax.numpy as jnp; jnp.zeros(8).block_until_ready()"
SEED = 1


def bare_jax_start(repeats: int = 3) -> float:
    """The median wall time of a fresh process that imports JAX and runs one op."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", BARE_JAX], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed_stages(project: str, impl: Path, load: str) -> dict[int, tuple[str, float, str]]:
    """stage -> (verdict, seconds, the non-passing lines), every stage of ``project`` on
    ``impl`` under ``load``."""
    background = load_processes(load) if load == "heavy" else []
    try:
        return {stage: run_once(project, stage, SEED, impl)
                for stage in stages_of(project)}
    finally:
        for proc in background:
            proc.kill()
        for proc in background:
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--project", action="append", help="only these (repeatable)")
    parser.add_argument("--load", default="idle,heavy",
                        help="comma-separated: idle, heavy (default both)")
    args = parser.parse_args(argv)
    loads = [x for x in args.load.split(",") if x]
    if not set(loads) <= {"idle", "heavy"} or not loads:
        parser.error(f"--load takes idle and/or heavy, got {args.load!r}")
    chosen = args.project or projects(with_solution=True)
    unknown = sorted(set(chosen) - set(projects(with_solution=True)))
    if unknown:
        parser.error(f"no project with a solution named {', '.join(unknown)}")

    bare = bare_jax_start()
    print(f"bare JAX start (import + one op, fresh process): {bare:.2f} s. CPU figures; "
          f"'idle' means nothing of ours runs beside the checker, not an idle machine.")
    rows, missed = [], []
    for project in chosen:
        folder = ROOT / "projects" / project
        ref = {load: timed_stages(project, folder / "solution" / "model.py", load)
               for load in loads}
        starter = timed_stages(project, folder / "starter" / "model.py", "idle")
        for stage in stages_of(project):
            row = {"project": project, "stage": stage,
                   "starter": {"verdict": starter[stage][0], "s": starter[stage][1],
                               "bare_jax_factor": starter[stage][1] / bare}}
            for load in loads:
                verdict, seconds, lines = ref[load][stage]
                row[load] = {"verdict": verdict, "s": seconds, "lines": lines}
                if verdict == "fail":  # what failed, so a run that cannot be repeated says
                    missed.append(f"{project} stage {stage}: the reference FAILED ({load}): "
                                  f"{lines or 'no FAIL line (a crash or a timeout)'}")
            if "idle" in row and row["idle"]["s"] > STAGE_BUDGET_S:
                missed.append(f"{project} stage {stage}: {row['idle']['s']:.0f} s idle, "
                              f"budget {STAGE_BUDGET_S:.0f} s")
            if "heavy" in row and row["heavy"]["s"] > LOADED_FACTOR_MAX * STAGE_BUDGET_S:
                missed.append(f"{project} stage {stage}: {row['heavy']['s']:.0f} s under heavy "
                              f"load, over {LOADED_FACTOR_MAX:g}x the {STAGE_BUDGET_S:.0f} s "
                              "budget")
            if row["starter"]["bare_jax_factor"] > STARTER_FACTOR_MAX:
                missed.append(f"{project} stage {stage}: the starter took "
                              f"{row['starter']['bare_jax_factor']:.1f} bare JAX starts")
            rows.append(row)
            cells = [f"{project} stage {stage}:"]
            for load in loads:
                cells.append(f"reference {load} {row[load]['s']:6.1f} s "
                             f"({row[load]['verdict']})")
            if "idle" in row and "heavy" in row:
                cells.append(f"heavy/idle {row['heavy']['s'] / row['idle']['s']:.1f}x")
            cells.append(f"starter {row['starter']['s']:.1f} s = "
                         f"{row['starter']['bare_jax_factor']:.1f} bare JAX starts "
                         f"({row['starter']['verdict']})")
            print("  ".join(cells), flush=True)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "stage_times.json").write_text(json.dumps(
        {"bare_jax_s": bare, "budget_s": STAGE_BUDGET_S, "rows": rows}, indent=1))
    print(f"targets: idle <= {STAGE_BUDGET_S:.0f} s a stage; heavy <= "
          f"{LOADED_FACTOR_MAX:g}x that, never FAIL; starter <= {STARTER_FACTOR_MAX:g} bare "
          "JAX starts")
    for line in missed:
        print("  missed: " + line)
    print("every target met" if not missed else f"{len(missed)} target(s) missed")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

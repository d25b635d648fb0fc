"""A notebook's check cells in a graded batch: answered from the same submission's graded
stages (autograder.check_cells) against run again in the kernel, side by side.

    python bench/bench_check_cells.py --out build/bench      (or: make bench)

The reference submission (foundations' solution as the learner's file, notebook 00 with
its three check cells) is graded twice with the same secrets, in turns: the project's
three stages and the notebook in one batch (the cells read the stages' records), and the
notebook alone (nothing graded to read: the cells run the checker). Printed: the
notebook's wall time in each (its record's ``wall_s``), how its cells were answered
(``check_cells``), each batch's wall time, and the ratios. CPU figures from a shared
2-core machine: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

from autograder.gradebook import Gradebook  # noqa: E402

PROJECT, NOTEBOOK = "foundations", "notebooks/00_foundations.ipynb"


def submission(folder: Path) -> Path:
    subs = folder / "subs"
    starter = subs / "reference" / "projects" / PROJECT / "starter"
    shutil.copytree(ROOT / "projects" / PROJECT / "solution", starter,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (subs / "reference" / "notebooks").mkdir(parents=True)
    shutil.copy(ROOT / NOTEBOOK, subs / "reference" / NOTEBOOK)
    return subs


def grade(subs: Path, out: Path, stages: str, secrets: Path) -> tuple[float, dict]:
    """(batch wall seconds, the notebook's record)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(out), "--stages", stages, "--workers", "2", "--quiet",
                           "--secrets", str(secrets)], cwd=ROOT, capture_output=True,
                          text=True, env=env, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"grading failed:\n{done.stderr[-3000:]}")
    book = Gradebook.in_dir(out)
    record = book.latest()[("reference", NOTEBOOK)]["record"]
    book.close()
    if record["status"] != "pass":
        raise SystemExit(f"the reference notebook did not pass: {record['status']} "
                         f"{record['reason']}")
    return wall, record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(args.out) / "check-cells"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    subs = submission(work)
    secrets = work / "secrets.json"
    modes = {"with its stages": f"{PROJECT},{NOTEBOOK}", "notebook alone": NOTEBOOK}
    got: dict[str, dict[str, list]] = {m: {"batch": [], "notebook": []} for m in modes}
    cells = {}
    for r in range(args.rounds):  # in turns, the order alternating
        for mode in (list(modes) if r % 2 == 0 else list(modes)[::-1]):
            wall, record = grade(subs, work / "out", modes[mode], secrets)
            got[mode]["batch"].append(wall)
            got[mode]["notebook"].append(record["wall_s"])
            cells[mode] = record["check_cells"]
    median = {m: {k: statistics.median(v) for k, v in got[m].items()} for m in modes}
    print("check cells of notebook 00 in a graded batch (CPU figures, this machine; "
          f"median of {args.rounds} rounds each)")
    for mode in modes:
        print(f"  {mode:16s} notebook {median[mode]['notebook']:6.1f} s   batch "
              f"{median[mode]['batch']:6.1f} s   cells {cells[mode]}")
    together, alone = median["with its stages"], median["notebook alone"]
    print(f"  notebook wall, answered from its stages / run again: "
          f"{together['notebook'] / alone['notebook']:.2f}x")
    print(f"  whole batch with the three stages / the notebook alone before: "
          f"{together['batch'] / alone['batch']:.2f}x (the stages are graded as well)")
    (Path(args.out) / "check_cells.json").write_text(json.dumps(
        {"rounds": got, "cells": cells}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

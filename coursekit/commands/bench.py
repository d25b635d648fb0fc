"""``make bench``: run every ``bench/bench_*.py`` in its own process, in name order.

Each benchmark prints its own figures as ratios measured side by side in one run (never
absolute targets that depend on the machine), and states that they are CPU figures.
``python -m coursekit.commands.bench --only pallas`` runs the files whose name contains "pallas".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from coursekit.facts import ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--only", default="", help="substring of the benchmark file name")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = [f for f in sorted((ROOT / "bench").glob("bench_*.py")) if args.only in f.name]
    print(f"make bench: {len(files)} benchmark(s); every figure below is a CPU figure "
          f"({os.cpu_count()} cores visible), not an accelerator measurement.\n")
    failed = []
    for f in files:
        print(f"== {f.stem} ==", flush=True)
        start = time.perf_counter()
        rc = subprocess.call([sys.executable, str(f), "--out", str(out)], cwd=ROOT)
        print(f"   ({f.stem}: {time.perf_counter() - start:.1f} s wall, exit {rc})\n",
              flush=True)
        if rc != 0:
            failed.append(f.stem)
    if failed:
        print("benchmarks that failed: " + ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

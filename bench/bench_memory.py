"""Memory figures, side by side in one run (CPU figures of this machine):

1. bandwidth of ``x * 2 + 1`` written in place (input donated) vs into a fresh output each
   call, interleaved on the same array, with the minor page faults per call of each (a
   fresh output pays one per 4 KiB page), and a read-dominated ``jnp.sum`` beside them;
2. the run-only peak (high-water mark reset after compile, one fresh process per
   repeat) of the residual-blocks model per remat policy, with the spread of repeats and
   the compiler's temp plan beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

MiB = 2**20
POLICIES = ("none", "nothing_saveable", "dots_saveable", "everything_saveable")


def bandwidth_figures(nbytes: int, rounds: int, iters: int) -> dict:
    from coursekit.instructor import bandwidth as bw
    recs = bw.measure_interleaved(("in_place", "fresh_output", "read_sum"), nbytes,
                                  rounds=rounds, iters=iters)
    pages = -(-nbytes // bw.PAGE)
    llc = max(bw.cache_sizes().values(), default=0)
    print(f"bandwidth on {nbytes / MiB:.0f} MiB (last-level cache {llc / MiB:.0f} MiB, sysfs), "
          f"{rounds} interleaved rounds x {iters} [CPU figure]:")
    for kind, rec in recs.items():
        print(f"  {kind:13s} best {rec['best_bandwidth'] / 1e9:6.1f} GB/s, median "
              f"{rec['bandwidth'] / 1e9:6.1f} GB/s, minor faults per call "
              f"{rec['faults_per_call']:8.0f} of {pages} pages")
    ratio = recs["in_place"]["best_bandwidth"] / recs["fresh_output"]["best_bandwidth"]
    print(f"  in place / fresh output = {ratio:.1f}x (best samples) [CPU figure]")
    return {"nbytes": nbytes, "ratio": ratio,
            **{k: {f: r[f] for f in ("best_bandwidth", "bandwidth", "faults_per_call",
                                     "samples_s", "minor_faults")} for k, r in recs.items()}}


def peak_figures(cfg: dict, repeats: int) -> dict:
    from coursekit.instructor import peak_memory as pm
    got = pm.fresh_process_peaks({p: (pm.blocks_factory(), dict(cfg, policy=p))
                                  for p in POLICIES}, repeats=repeats)
    print(f"run-only peak, residual blocks {cfg}, {repeats} fresh processes per policy, "
          "interleaved [CPU figure: host memory, VmHWM reset after compile]:")
    for policy, rec in got.items():
        runs = [round(v / MiB, 1) for v in rec["run_peak_bytes"]]
        print(f"  {policy:20s} median {rec['median_run_peak_bytes'] / MiB:7.1f} MiB, spread "
              f"{rec['spread_bytes'] / MiB:5.1f} MiB {runs}; temp plan "
              f"{rec['temp_size_in_bytes'] / MiB:6.1f} MiB; unreset VmHWM median "
              f"{sorted(rec['vmhwm_bytes'])[len(rec['vmhwm_bytes']) // 2] / MiB:6.0f} MiB")
    return got


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--bytes", type=int, default=0,
                        help="array size; 0: 4x the last-level cache (sysfs)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    from coursekit.instructor import bandwidth as bw
    nbytes = args.bytes or 4 * max(bw.cache_sizes().values(), default=64 * MiB) // MiB * MiB
    figures = {"bandwidth": bandwidth_figures(nbytes, rounds=3, iters=3),
               "peak": peak_figures({"depth": 3, "width": 33, "hidden": 513, "batch": 3001},
                                    args.repeats)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "memory.json").write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

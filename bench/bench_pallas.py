"""pallas-kernel figures: the checker's wall time on the reference (target <= 2 min on 2
cores), and the reference kernel against the ``jax.numpy`` baseline side by side over a
block-size sweep. On CPU the kernel runs interpreted: its times measure the Pallas
interpreter (per grid program), not the kernel, and say nothing about target speed."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from coursekit.facts import ROOT, checker_path

sys.path.insert(0, str(ROOT))
PROJECT = ROOT / "projects" / "pallas-kernel"


def checker_wall_time() -> tuple[float, int]:
    start = time.perf_counter()
    rc = subprocess.call([sys.executable, str(checker_path(PROJECT.name)), "--stage", "all",
                          "--impl", str(PROJECT / "solution" / "model.py")],
                         stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, rc


def side_by_side(out: Path) -> int:
    import statistics

    import jax

    from coursekit.checking.learner import load_impl
    from coursekit.measure.pallas_inspect import settle_pallas
    settle_pallas()
    impl = load_impl(PROJECT / "solution" / "model.py")
    shapes, blocks = [[64, 300], [256, 300], [256, 1000]], [8, 32]
    records = impl.sweep(shapes, blocks, warmup=1, iters=7, seed=0)
    summary = impl.summarize(records)
    mode = summary["mode"]
    label = f"[CPU figure, kernel {mode}]" if jax.default_backend() == "cpu" else \
        f"[{jax.default_backend().upper()} figure, kernel {mode}]"
    for r in records:
        if r["impl"] != "pallas":
            continue
        base = next(b for b in records if b["impl"] == "jnp" and b["shape"] == r["shape"])
        k, j = statistics.median(r["samples_s"]), statistics.median(base["samples_s"])
        print(f"softmax {r['shape']} block_rows={r['block_rows']:>3} ({r['grid'][0]:>3} "
              f"programs): kernel {k * 1e3:8.3f} ms vs jnp {j * 1e3:7.3f} ms -> jnp/kernel "
              f"{j / k:6.3f}x; {k / r['grid'][0] * 1e3:.3f} ms per program {label}")
    print(f"stops helping at: {summary['stops_helping_at']} {label}")
    if summary["caveat"]:
        print(summary["caveat"])
    out.mkdir(parents=True, exist_ok=True)
    (out / "pallas_sweep.json").write_text(json.dumps({"records": records,
                                                       "summary": summary}, indent=1))
    return 0 if all(r["output_ok"] for r in records) else 1


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    args = parser.parse_args()
    wall, rc = checker_wall_time()
    print(f"check.py --stage all on the reference: {wall:.1f} s wall (target <= 120 s on "
          f"2 cores; exit {rc}) [CPU figure]")
    ok = side_by_side(Path(args.out))
    return 0 if rc == 0 and ok == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

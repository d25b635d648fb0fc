"""performance-audit figures: the checker's wall time on the reference (target <= 60 s on
2 cores), and the timing harness's overhead per sample against a bare
``block_until_ready`` loop (target <= 20 us), measured side by side in one run."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))


def checker_wall_time() -> tuple[float, int]:
    start = time.perf_counter()
    rc = subprocess.call([sys.executable, str(ROOT / "projects/performance-audit/tests/check.py"),
                          "--stage", "all", "--impl",
                          str(ROOT / "projects/performance-audit/solution/model.py")],
                         stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, rc


def harness_overhead(rounds: int = 7, iters: int = 300) -> tuple[float, float, float]:
    """Median per-sample time of the reference time_fn and of a bare synced loop on a
    tiny op (so the op costs little and the overhead shows), interleaved in rounds."""
    import jax
    import jax.numpy as jnp

    from coursekit.checking.learner import load_impl
    impl = load_impl(ROOT / "projects/performance-audit/solution/model.py")
    f = jax.jit(lambda x: x + 1.0)
    x = jnp.ones((8,), jnp.float32)
    jax.block_until_ready(f(x))
    harness, bare = [], []
    for _ in range(rounds):
        m = impl.time_fn(f, x, warmup=5, iters=iters)
        harness.append(statistics.median(m["samples_s"]))
        samples = []
        for _ in range(iters):
            start = time.perf_counter()
            jax.block_until_ready(f(x))
            samples.append(time.perf_counter() - start)
        bare.append(statistics.median(samples))
    h, b = statistics.median(harness), statistics.median(bare)
    return h, b, h - b


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.parse_args()
    wall, rc = checker_wall_time()
    print(f"check.py --stage all on the reference: {wall:.1f} s wall (target <= 60 s on "
          f"2 cores; exit {rc}) [CPU figure]")
    h, b, overhead = harness_overhead()
    print(f"timing harness per sample: {h * 1e6:.1f} us vs bare block_until_ready loop "
          f"{b * 1e6:.1f} us -> overhead {overhead * 1e6:+.1f} us per sample "
          f"(ratio {h / b:.2f}x; target overhead <= 20 us) [CPU figure]")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

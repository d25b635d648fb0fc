"""decide's statistic against the pooled bootstrap it replaces, side by side on the same
pairs: how often each claims a change between identical programs measured in drifting
interleaved rounds (target <= 5%), and how often each accepts a true 1.2x (target >= 80%).

Simulated pairs (200 each, 8 rounds of 20 samples, the drift measured on this machine:
coursekit.measure.decision.simulate_pair) test the statistic; then real null pairs, one
jitted program timed against an identical copy in 8 interleaved rounds on this CPU,
show the same on live timings (a CPU figure)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from coursekit.instructor import decision as answers  # noqa: E402
from coursekit.measure import decision  # noqa: E402

PAIRS = 200
REAL_PAIRS = 12


def excludes_one(ci) -> bool:
    return ci is not None and not ci[0] <= 1.0 <= ci[1]


def judge(pairs) -> dict:
    """Per statistic: share of pairs whose interval excludes 1, that are claimed faster
    (accept), and claimed any change (accept or slower)."""
    rows = {"rounds (decide)": [], "pooled bootstrap": []}
    for before, after in pairs:
        rows["rounds (decide)"].append(answers.decide_rounds(before, after))
        rows["pooled bootstrap"].append(decision.pooled_bootstrap(before, after, n_boot=1000))
    return {name: {"excludes_1": float(np.mean([excludes_one(r["ci"]) for r in results])),
                   "accept": float(np.mean([r["decision"] == "accept" for r in results])),
                   "claims_change": float(np.mean([r["decision"] != "reject"
                                                   for r in results]))}
            for name, results in rows.items()}


def real_null_pairs(n: int, rounds: int = 8, iters: int = 10) -> list:
    """Identical jitted programs (two jit objects of one function) timed in interleaved
    rounds on this machine."""
    import jax
    import jax.numpy as jnp

    x = jnp.ones((384, 384), jnp.float32) / 384
    work = lambda a: jnp.tanh(a @ a) @ a  # noqa: E731
    pairs = []
    for _ in range(n):
        f, g = jax.jit(work), jax.jit(work)
        got = decision.measure_interleaved(lambda: jax.block_until_ready(f(x)),  # noqa: B023
                                           lambda: jax.block_until_ready(g(x)),  # noqa: B023
                                           rounds=rounds, iters=iters)
        pairs.append((got["before"], got["after"]))
    return pairs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="build/bench")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(2024)
    start = time.perf_counter()
    null = judge([decision.simulate_pair(rng, 1.0) for _ in range(PAIRS)])
    power = judge([decision.simulate_pair(rng, 1.2) for _ in range(PAIRS)])
    print(f"simulated: {PAIRS} null pairs and {PAIRS} true-1.2x pairs, 8 drifting rounds of "
          "20 samples, min_gain 5%, 95% intervals")
    print(f"  {'statistic':18s} {'null: 95% CI excl. 1':>21s} {'null: claims change':>20s} "
          f"{'1.2x: accepted':>15s}")
    for name in null:
        print(f"  {name:18s} {null[name]['excludes_1']:21.1%} "
              f"{null[name]['claims_change']:20.1%} {power[name]['accept']:15.1%}")
    targets = {"false_claims_ok": null["rounds (decide)"]["claims_change"] <= 0.05,
               "power_ok": power["rounds (decide)"]["accept"] >= 0.80}
    print(f"  targets (decide): false claims <= 5%: {targets['false_claims_ok']}; "
          f"power on 1.2x >= 80%: {targets['power_ok']}")
    real = judge(real_null_pairs(REAL_PAIRS))
    print(f"CPU figure: {REAL_PAIRS} real null pairs on this machine (identical jitted "
          "programs, 8 interleaved rounds of 10 calls)")
    for name, r in real.items():
        print(f"  {name:18s} 95% CI excludes 1 in {r['excludes_1']:.0%}, claims a change in "
              f"{r['claims_change']:.0%}")
    print(f"  ({time.perf_counter() - start:.1f} s)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "decision.json").write_text(json.dumps(
        {"simulated_null": null, "simulated_1_2x": power, "real_null_cpu": real,
         "targets": targets}, indent=1))
    return 0 if all(targets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

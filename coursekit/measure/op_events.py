"""Per-op events of a small MLP training step under the XLA flags of *this* process.

XLA flags are read once, when the backend starts, so comparing flag settings needs one
fresh process per setting (notebook 02 runs this module twice):

    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= \\
        python -m coursekit.measure.op_events --batch 64 --width 128 --steps 3 --logdir DIR

Prints one JSON line: for every annotated step, its wall time in the trace, the XLA op
events inside it (name, thread, start and duration relative to the step, microseconds),
their summed durations and the time they cover together (their union).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REGION = "train_step"


def mlp_step():
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(params, x):
        def loss(p):
            return jnp.mean((jax.nn.gelu(x @ p["w1"]) @ p["w2"]) ** 2)
        value, grads = jax.value_and_grad(loss)(params)
        return value, jax.tree.map(lambda w, g: w - 0.01 * g, params, grads)
    return step


def union_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--logdir", required=True)
    args = parser.parse_args(argv)

    import jax

    from coursekit.measure import traces

    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    w, h = args.width, 4 * args.width
    params = {"w1": jax.random.normal(k1, (w, h)) / w**0.5,
              "w2": jax.random.normal(k2, (h, w)) / h**0.5}
    x = jax.random.normal(k3, (args.batch, w))
    step = mlp_step()
    jax.block_until_ready(step(params, x))
    # a folder of this run's own under --logdir: its one trace file is this run's
    Path(args.logdir).mkdir(parents=True, exist_ok=True)
    run_dir = tempfile.mkdtemp(prefix="op-events-", dir=args.logdir)
    with jax.profiler.trace(run_dir):
        for i in range(args.steps):
            with jax.profiler.TraceAnnotation(REGION, step=i):
                jax.block_until_ready(step(params, x))
    found = sorted(Path(run_dir).glob("plugins/profile/*/*.trace.json.gz"))
    if len(found) != 1:
        raise SystemExit(f"expected one trace under {run_dir}, found {len(found)}")
    path = found[0]
    events = traces.load_events(path)
    names = traces.thread_names(events)
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    regions = sorted((e for e in complete if e.get("name") == REGION), key=lambda e: e["ts"])
    ops = [e for e in complete if "hlo_op" in (e.get("args") or {})]
    steps = []
    for r in regions:
        start, end = r["ts"], r["ts"] + r["dur"]
        inside = [e for e in ops if e["ts"] >= start and e["ts"] + e["dur"] <= end]
        steps.append({
            "wall_us": r["dur"],
            "ops": [{"name": e["name"], "thread": names.get((e["pid"], e["tid"]), str(e["tid"])),
                     "start_us": e["ts"] - start, "dur_us": e["dur"]} for e in inside],
            "sum_us": sum(e["dur"] for e in inside),
            "covered_us": union_us([(e["ts"], e["ts"] + e["dur"]) for e in inside]),
            "threads": len({(e["pid"], e["tid"]) for e in inside}),
        })
    print(json.dumps({"xla_flags": os.environ.get("XLA_FLAGS", ""), "trace": str(path),
                      "steps": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

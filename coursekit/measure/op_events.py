"""Per-op events of a small MLP training step under the XLA flags of *this* process.

XLA flags are read once, when the backend starts, so comparing flag settings needs one
fresh process per setting (notebook 02 runs this module twice):

    XLA_FLAGS=--xla_cpu_experimental_ynn_fusion_type= \\
        python -m coursekit.measure.op_events --impl model.py --batch 64 --width 128 \\
            --steps 3 --logdir DIR

The trace is the learner's own: ``--impl``'s ``write_trace`` (performance-audit stage 2)
writes it into a folder of this run's own. Prints one JSON line: for every annotated
step, its wall time in the trace, the XLA op events inside it (name, thread, start and
duration relative to the step, microseconds) and their summed durations. A
``write_trace`` still unwritten exits with status ``NOT_WRITTEN`` and says so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from pathlib import Path

REGION = "train_step"
NOT_WRITTEN = 3  # the exit status when the learner's write_trace is not written yet


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


def _learner(path: str):
    """The learner's file as a module of its own (this process is the learner's)."""
    spec = importlib.util.spec_from_file_location("op_events_learner", Path(path).resolve())
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--impl", required=True,
                        help="the learner's model.py: its write_trace writes the trace")
    args = parser.parse_args(argv)

    import jax

    from coursekit.measure import traces

    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    w, h = args.width, 4 * args.width
    params = {"w1": jax.random.normal(k1, (w, h)) / w**0.5,
              "w2": jax.random.normal(k2, (h, w)) / h**0.5}
    x = jax.random.normal(k3, (args.batch, w))
    step = mlp_step()
    # a folder of this run's own under --logdir: the trace the learner's write_trace
    # returns must lie in it
    Path(args.logdir).mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="op-events-", dir=args.logdir)).resolve()
    try:
        written = _learner(args.impl).write_trace(step, (params, x), str(run_dir), REGION,
                                                  steps=args.steps)
    except NotImplementedError:
        print("write_trace is not written yet (performance-audit stage 2)", file=sys.stderr)
        return NOT_WRITTEN
    path = Path(written).resolve()
    if run_dir not in path.parents or not path.is_file():
        raise SystemExit(f"write_trace returned {written!r}, not a trace file under the "
                         f"folder it was given ({run_dir})")
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
            "threads": len({(e["pid"], e["tid"]) for e in inside}),
        })
    print(json.dumps({"xla_flags": os.environ.get("XLA_FLAGS", ""), "trace": str(path),
                      "steps": steps}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

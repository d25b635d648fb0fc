"""Collectives as evidence: which all-reduces a compiled step holds, and how much of each
annotated step a device spends inside them, read from a real ``jax.profiler`` trace.

    ops = all_reduce_ops(jitted_step, *args)   # {"all-reduce.6": "(f32[64]{0}, ...)", ...}
    share = collective_time(trace_file, "train_step", n_devices=8)
    share["share"]    # {"all-reduce": 0.31, "all-reduce.6": 0.52}: fraction of the step

XLA:CPU's thunk events carry ``args.hlo_op`` (the HLO instruction); one event per device
per step and collective. Their time on CPU is mostly device threads *waiting* for each
other at the rendezvous (8 fake devices share the machine's cores): evidence that the
collective sits on this machine's critical path, not a measurement of what a network or
an accelerator interconnect would cost.
"""

from __future__ import annotations

import re

from coursekit.measure import traces

_ALL_REDUCE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>all-reduce(?:-start)?[\w.\-]*)\s*=\s*"
                         r"(?P<shape>.+?)\s+all-reduce(?:-start)?\(")


def all_reduce_ops(fn, *args) -> dict[str, str]:
    """``{instruction name: result shape}`` of every all-reduce in the compiled HLO of the
    jitted ``fn`` on ``args`` (compiles; does not run)."""
    text = fn.lower(*args).compile().as_text()
    found = {}
    for line in text.splitlines():
        match = _ALL_REDUCE.match(line)
        if match:
            found[match["name"]] = match["shape"]
    return found


def collective_time(trace_file, region: str, n_devices: int, prefix: str = "all-reduce") -> dict:
    """Per annotated ``region`` (one timed step each), the wall time of the step and, for
    every collective whose HLO name starts with ``prefix``, the time one device spends in
    it on average (event durations inside the step's window, summed over threads, divided
    by ``n_devices``).

    Returns {"steps": int, "step_us": mean step wall time, "per_op_us": {op: us per step
    per device}, "share": {op: per_op_us / step_us}, "total_share": sum of shares}."""
    if n_devices < 1:
        raise ValueError(f"n_devices must be >= 1, got {n_devices}")
    events = traces.load_events(trace_file)
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    windows = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in complete
               if e.get("name") == region]
    if not windows:
        raise traces.TraceError(f"no event named {region!r} in {trace_file}: was each step "
                                f"inside jax.profiler.TraceAnnotation({region!r})?")
    per_op: dict[str, float] = {}
    for e in complete:
        op = str((e.get("args") or {}).get("hlo_op", ""))
        if not op.startswith(prefix) or e.get("name") != op:
            continue
        start, end = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if any(lo <= start and end <= hi for lo, hi in windows):
            per_op[op] = per_op.get(op, 0.0) + float(e["dur"])
    steps = len(windows)
    step_us = sum(hi - lo for lo, hi in windows) / steps
    per_op_us = {op: us / steps / n_devices for op, us in sorted(per_op.items())}
    share = {op: us / step_us for op, us in per_op_us.items()}
    return {"steps": steps, "step_us": step_us, "per_op_us": per_op_us, "share": share,
            "total_share": sum(share.values())}

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

What one collective costs by itself is measured apart, on the same mesh:

    cost = collective_cost(mesh, n_elements=1)     # a scalar psum against the same
    cost["cost_s"], cost["ci_s"], cost["resolved"]  # program without it, interleaved
                                                   # rounds, a sign-test interval
    roof = comm_roofline(small, big)               # latency and bandwidth from two sizes
    roof["latency_s"], roof["bandwidth_Bps"], roof["ridge_bytes"]
    shape_bytes("(f32[64]{0}, f32[])")              # 260: bytes an all-reduce moves
"""

from __future__ import annotations

import math
import re

import numpy as np

from coursekit.measure import decision, traces

# Instruction names vary ("all-reduce.6" from the partitioner, "psum_invariant.7" from a
# shard_map psum): the opcode after the shape is what makes it an all-reduce.
_ALL_REDUCE = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*"
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


# ---------------------------------------------------------------------------------------
# The collective's own cost, measured in isolation
# ---------------------------------------------------------------------------------------

_ITEMSIZE = {"pred": 1, "s8": 1, "u8": 1, "f16": 2, "bf16": 2, "s16": 2, "u16": 2,
             "f32": 4, "s32": 4, "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8,
             "c128": 16}
_ARRAY = re.compile(r"\b(?P<dtype>[a-z]+\d*)\[(?P<dims>[\d,]*)\]")


def shape_bytes(shape: str) -> int:
    """Bytes of an HLO result shape such as ``f32[]`` or ``(f32[64]{0}, f32[10,64]{1,0})``
    (one device's buffer: what its all-reduce sends and receives)."""
    total = 0
    for m in _ARRAY.finditer(shape):
        if m["dtype"] not in _ITEMSIZE:
            continue
        dims = [int(d) for d in m["dims"].split(",") if d]
        total += math.prod(dims) * _ITEMSIZE[m["dtype"]]
    return total


def psum_programs(mesh, n_elements: int = 1):
    """Two jitted programs over ``mesh`` that differ only by one all-reduce: ``a +
    psum(a)`` and ``a + a`` on ``n_elements`` float32 per device, and their input."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    axis = mesh.axis_names[0]
    x = jax.device_put(jnp.ones((mesh.devices.size * int(n_elements),), jnp.float32),
                       NamedSharding(mesh, P(axis)))

    def program(body):
        return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(axis), out_specs=P(axis)))
    return (program(lambda a: a + jax.lax.psum(a, axis)), program(lambda a: a + a), x)


def _median_interval(values: list[float], confidence: float = 0.95) -> list[float] | None:
    """The distribution-free interval of the median of ``values`` that
    ``scipy.stats.quantile_test`` gives (None when too few values reach ``confidence``)."""
    from scipy import stats
    ci = stats.quantile_test(values, q=0, p=0.5).confidence_interval(confidence)
    lo, hi = float(ci.low), float(ci.high)
    return None if not (np.isfinite(lo) and np.isfinite(hi)) else [lo, hi]


def collective_cost(mesh, n_elements: int = 1, *, rounds: int = 8, iters: int = 20,
                    warmup: int = 2, confidence: float = 0.95) -> dict:
    """What one all-reduce of ``n_elements`` float32 per device costs on ``mesh``: the
    program with the psum against the same program without it, in ``rounds``
    interleaved rounds (``decision.measure_interleaved``), one figure per round (its
    median with the psum minus its median without), and a distribution-free interval of
    the rounds' median figure (``_median_interval``: scipy's sign-test interval).

    Returns {"bytes": per device, "cost_s": the median of the per-round figures, "ci_s":
    [lo, hi] (None when too few rounds for ``confidence``), "resolved": bool (the
    interval excludes 0), "psum_median_s", "local_median_s", "all_reduces": {"psum": n,
    "local": n} in the compiled programs, "contention": decision.contention of the psum
    samples, "rounds": int}."""
    import jax

    psum, local, x = psum_programs(mesh, n_elements)
    got = decision.measure_interleaved(lambda: jax.block_until_ready(psum(x)),
                                       lambda: jax.block_until_ready(local(x)),
                                       rounds=rounds, iters=iters, warmup=warmup,
                                       names=("psum", "local"))
    per_round = [float(np.median(psum_s) - np.median(local_s)) for psum_s, local_s in zip(
        *(decision.samples_by_round(got[k]) for k in ("psum", "local")), strict=True)]
    ci = _median_interval(per_round, confidence)
    return {"bytes": 4 * int(n_elements), "cost_s": float(np.median(per_round)), "ci_s": ci,
            "resolved": bool(ci is not None and (ci[0] > 0 or ci[1] < 0)),
            "psum_median_s": float(np.median(got["psum"]["samples_s"])),
            "local_median_s": float(np.median(got["local"]["samples_s"])),
            "all_reduces": {"psum": len(all_reduce_ops(psum, x)),
                            "local": len(all_reduce_ops(local, x))},
            "contention": decision.contention(got["psum"]), "rounds": len(per_round)}


def comm_roofline(small: dict, big: dict) -> dict:
    """The communication roofline from two ``collective_cost`` results: a message of b
    bytes costs about ``latency + b / bandwidth``. Latency is the small message's cost;
    bandwidth the extra bytes of the big one over its extra time (None when the big one
    was not measurably dearer). When the small cost's interval holds 0 the latency is
    not resolved: ``latency_bound_s`` is then its upper end (the latency is at most
    that), else the point value. ``ridge_bytes`` = latency_bound_s x bandwidth: messages
    below it are latency-bound (their bytes hardly matter)."""
    latency = max(small["cost_s"], 0.0)
    bound = latency if small["resolved"] or not small["ci_s"] else max(small["ci_s"][1], 0.0)
    extra_s, extra_b = big["cost_s"] - small["cost_s"], big["bytes"] - small["bytes"]
    bandwidth = extra_b / extra_s if big["resolved"] and extra_s > 0 and extra_b > 0 else None
    return {"latency_s": latency, "latency_resolved": bool(small["resolved"]),
            "latency_bound_s": bound, "bandwidth_Bps": bandwidth,
            "ridge_bytes": bound * bandwidth if bandwidth else None}


def predicted_comm_s(nbytes: int, roof: dict) -> dict:
    """Latency + bytes / bandwidth for one all-reduce of ``nbytes`` per device, and which
    term dominates ("latency" or "bandwidth")."""
    bw = roof["bandwidth_Bps"]
    transfer = nbytes / bw if bw else 0.0
    return {"bytes": int(nbytes), "transfer_s": transfer,
            "predicted_s": roof["latency_bound_s"] + transfer,
            "bound": "latency" if transfer <= roof["latency_bound_s"] else "bandwidth"}

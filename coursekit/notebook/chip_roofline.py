"""Notebook 03's accelerator branch: the learner's roofs on the chip, each beside the
plain-JAX ceiling measured in the same run, and one workload predicted by the learner's own
``roofline`` before it is measured. Every figure is the learner's ``impl`` at work; this
module holds the branch and its tables, so the notebook's cells stay short.
"""

from __future__ import annotations

import inspect
import time

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.measure import device_trace, roofs
from coursekit.measure.timing import time_synced
from coursekit.notebook import claims
from coursekit.notebook.guard import attempt, ready

MiB = 2**20


def _best(first, again, key):
    return max([first, *again], key=lambda r: r[key])


def measure_roofs(impl, ceilings, *, n: int, iters: int, rounds: int, bw_bytes: int,
                  spec: dict, levels: dict):
    """The learner's roofs on the chip, each the best of its first call and the calls made
    between the ceiling's rounds: (peak_run, theory, caches, headline, ceiling_of)."""
    ceiling_of = {}
    # the chip's fast dtype, where the function takes one (an older copy times float32)
    fast = ({"dtype": "bfloat16"} if "dtype" in
            inspect.signature(impl.measure_peak_flops).parameters else {})
    first = attempt(impl.measure_peak_flops, n, iters, **fast)
    peak_run = first
    if ready(first):
        ceiling_of["peak"], again = roofs.beside(
            ceilings.Matmul(n, "bfloat16"), lambda: impl.measure_peak_flops(n, iters, **fast),
            iters=iters, rounds=rounds)
        peak_run = _best(first, again, "flops_per_s")
    headline = {}
    for kind, stream in (("in_place", "read_write"), ("read_sum", "read")):
        first = attempt(impl.measure_bandwidth, bw_bytes, iters, kind)
        headline[kind] = first
        if ready(first):
            ceiling_of[kind], again = roofs.beside(
                ceilings.Stream(stream, bw_bytes),
                lambda kind=kind: impl.measure_bandwidth(bw_bytes, iters, kind),
                iters=iters, rounds=rounds)
            headline[kind] = _best(first, again, "bandwidth")
    headline["fresh_output"] = attempt(impl.measure_bandwidth, bw_bytes, iters, "fresh_output")
    stated = spec.get("peak_flops", {}).get("bfloat16")
    theory = ({"flops": stated, "assumption": f"the vendor's bfloat16 figure ({spec['source']})"}
              if stated else {"flops": ceiling_of["peak"]["best"] if "peak" in ceiling_of
                              else float("nan"),
                              "assumption": "no vendor figure for this device kind: the "
                                            "plain-JAX ceiling"})
    caches = {"HBM": levels["HBM"]} if "HBM" in levels else {}
    return peak_run, theory, caches, headline, ceiling_of


def show_roofs(peak_run, headline, ceiling_of, *, n: int, rounds: int, bw_bytes: int,
               spec: dict, levels: dict) -> None:
    """The chip's roofs, the learner's beside the ceiling's and the vendor's."""
    peak = peak_run["flops_per_s"]
    peak_j = roofs.judged(peak, ceiling_of["peak"]["best"],
                          spec.get("peak_flops", {}).get("bfloat16"))
    print(f"compute roof, bfloat16 {n} x {n} matmul "
          f"({peak_run['flops'] / 1e12:.3g} TFLOP per product):")
    print(f"  your measure_peak_flops  {peak / 1e12:7.1f} TFLOP/s (dtype "
          f"{peak_run.get('dtype', 'float32: it takes no dtype')}, best of {1 + rounds} "
          "calls)")
    print(f"  plain-JAX ceiling        {peak_j['ceiling'] / 1e12:7.1f} TFLOP/s (first call "
          f"{ceiling_of['peak']['first_call_s']:.2f} s apart, "
          f"{len(ceiling_of['peak']['samples_s'])} samples)")
    print(f"  yours / ceiling = {peak_j['ratio']:.2f} (within {roofs.WITHIN:.0%}: "
          f"{peak_j['within']})" + (f"; yours / spec {peak_j['spec'] / 1e12:.0f} TFLOP/s = "
                                    f"{peak_j['of_spec']:.2f}" if peak_j["spec"] else ""))
    print(f"HBM roofs, float32 array of {bw_bytes / MiB:.0f} MiB:")
    for kind in ("read_sum", "in_place"):
        j = roofs.judged(headline[kind]["bandwidth"], ceiling_of[kind]["best"],
                         spec.get("hbm_bytes_per_s"))
        print(f"  {kind:9s} yours {j['figure'] / 1e9:6.1f} GB/s; ceiling "
              f"({ceiling_of[kind]['what']}) {j['ceiling'] / 1e9:6.1f} GB/s; yours / ceiling "
              f"{j['ratio']:.2f} (within {roofs.WITHIN:.0%}: {j['within']})"
              + (f"; of spec {j['spec'] / 1e9:.0f} GB/s: {j['of_spec']:.2f}" if j["spec"]
                 else ""))
    print("memory levels of this chip: "
          + ", ".join(f"{k} {v / MiB:,.0f} MiB" for k, v in levels.items())
          + " (HBM: memory_stats bytes_limit; VMEM: pltpu.get_tpu_info). Every operand of an "
          "XLA program lives in HBM; VMEM holds a Pallas kernel's blocks (notebook 06), not a "
          "working set of its own")


def _mlp_block(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


def predict_then_measure(impl, shape, *, peak: float, bandwidth: float, iters: int,
                         logdir: str) -> dict:
    """A bfloat16 MLP block of ``shape`` (batch, width, hidden): its time predicted by the
    learner's ``cost_from_compiler`` and ``roofline`` against the learner's chip roofs,
    then measured (checked against float32 first, timed, traced). The prediction."""
    rows_, width_, hidden_ = shape
    kx, k1, k2 = jax.random.split(jax.random.key(7), 3)
    args = (jax.random.normal(kx, (rows_, width_), jnp.bfloat16),
            jax.random.normal(k1, (width_, hidden_), jnp.bfloat16) / width_ ** 0.5,
            jax.random.normal(k2, (hidden_, width_), jnp.bfloat16) / hidden_ ** 0.5)
    cost = impl.cost_from_compiler(_mlp_block, *args)
    # the learner's roofline places it (HBM: the one level an XLA operand lives in here)
    prediction = impl.roofline(cost["flops"], cost["bytes"], peak, bandwidth,
                               int(cost["bytes"]), {})
    prediction["no_overlap_s"] = prediction["upper_s"]
    print(f"predicted, before running it: {cost['flops'] / 1e12:.3f} TFLOP at "
          f"{peak / 1e12:.1f} TFLOP/s = {prediction['compute_s'] * 1e3:.3f} ms; "
          f"{cost['bytes'] / 1e9:.3f} GB at {bandwidth / 1e9:.0f} GB/s = "
          f"{prediction['memory_s'] * 1e3:.3f} ms; {prediction['bound']}-bound: "
          f"{prediction['predicted_s'] * 1e3:.3f} ms with full overlap, "
          f"{prediction['no_overlap_s'] * 1e3:.3f} ms with none")
    mlp_jit = jax.jit(_mlp_block)
    start = time.perf_counter()                                # compiles; checked first
    got = np.asarray(jax.block_until_ready(mlp_jit(*args)), np.float32)
    first_s = time.perf_counter() - start
    with jax.default_matmul_precision("highest"):
        want = np.asarray(jax.jit(_mlp_block)(*(a.astype(jnp.float32) for a in args)))
    error = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    assert error < 2e-2, f"the bfloat16 block is off float32 by {error:.2g}"
    timing = time_synced(mlp_jit, *args, warmup=2, iters=max(iters, 5))
    with jax.profiler.trace(logdir):
        for _ in range(3):
            with jax.profiler.TraceAnnotation("predicted_workload"):
                jax.block_until_ready(mlp_jit(*args))
    on_chip = device_trace.region_device_ops(
        device_trace.xplane_beside(impl.newest_trace_file(logdir)), "predicted_workload")
    busy = [r["busy_ns"] * 1e-9 for r in on_chip["regions"] if r["ops"]]
    device_s = float(np.median(busy)) if busy else None
    print(f"measured: first call {first_s:.2f} s (compile), then median "
          f"{timing.median_s * 1e3:.3f} ms of {len(timing.samples_s)} samples; "
          f"output within {error:.1e} of float32")
    if busy:
        top = on_chip["regions"][len(on_chip["regions"]) // 2]["by_op"]
        print("device operations per call (traced): " + ", ".join(
            f"{k} {v / 1e6:.3f} ms" for k, v in list(top.items())[:4]))
    print(claims.prediction_gap(prediction["predicted_s"], prediction["no_overlap_s"],
                                timing.median_s, device_s, cost["flops"], peak))
    return prediction

"""What notebook 03 prints about the roofs the learner measured: the branch that ran, the
CPU's roofs and fresh-output faults, the bandwidth of each memory level, and the table of
workloads placed on the roofline. Formatting only: every figure comes in from the
learner's ``impl`` as the notebook called it.
"""

from __future__ import annotations

import numpy as np

from coursekit.measure import bandwidth as bwm

MiB = 2**20


def show_branch(on_chip: bool, *, device_kind: str, chip_levels: dict, spec: dict,
                bw_bytes: int, llc: int) -> None:
    if on_chip:
        print(f"branch: accelerator ({device_kind}); memory levels read from the chip: "
              + ", ".join(f"{k} {v / MiB:,.0f} MiB" for k, v in chip_levels.items())
              + f"; headline array: {bw_bytes / MiB:.0f} MiB in HBM; spec: "
              + (f"{spec['source']}" if spec else "none for this device kind"))
    else:
        print(f"branch: cpu; last-level cache (sysfs): {llc / MiB:.0f} MiB; headline array: "
              f"{bw_bytes / MiB:.0f} MiB ({bw_bytes / llc:.2f}x the last-level cache)")


def show_cpu_roofs(peak_run: dict, theory: dict, headline: dict, *, n: int,
                   bw_bytes: int) -> None:
    peak, pages = peak_run["flops_per_s"], -(-bw_bytes // bwm.PAGE)
    print(f"peak, attained     {peak / 1e9:8.1f} GFLOP/s (float32 {n}x{n} matmul: "
          f"{peak_run['flops'] / 1e9:.3g} GFLOP in {peak_run['best_s'] * 1e3:.2f} ms, the "
          f"fastest of {len(peak_run['samples_s'])})")
    print(f"peak, theoretical  {theory['flops'] / 1e9:8.1f} GFLOP/s = {theory['assumption']}")
    print(f"  attained / theoretical = {peak / theory['flops']:.2f}"
          + ("" if peak <= theory["flops"] else
             "  (above 1: the assumed clock or FMA-unit count is too low for this CPU)"))
    for kind, m in headline.items():
        faults = float(np.median(m["minor_faults"]))
        print(f"{kind:13s} {m['bandwidth'] / 1e9:7.1f} GB/s on {bw_bytes / MiB:.0f} MiB, "
              f"minor page faults per call {faults:8.0f} (the array has {pages} pages)")


def show_fresh_output(ratio: float, fresh_faults: float, caches: dict, *, on_chip: bool,
                      bw_bytes: int) -> None:
    """In place against a fresh output of the same array (``ratio``, their bandwidths):
    what the fresh output paid."""
    pages = -(-bw_bytes // bwm.PAGE)
    if on_chip:
        print(f"in place / fresh output = {ratio:.2f}x; a fresh output is the chip's memory, "
              f"not the host's: {fresh_faults:.0f} host page faults per call")
        return
    print(f"in place / fresh output = {ratio:.1f}x; the fresh output paid "
          f"{fresh_faults / pages:.2f} faults per page of its output each call: "
          + ("it measures page faults, not memory" if fresh_faults > pages / 2
             and ratio > 1.5 else "at this size the allocator reused pages (no fault "
             "per page)"))
    print("data caches:", {k: f"{v / 1024:.0f} KiB" for k, v in caches.items()}
          or "not found")


def show_levels(levels: dict, sweep: list, *, on_chip: bool, bw_bytes: int, llc: int,
                largest: int | None) -> None:
    """Each level's bandwidth (marking a level slower than a larger one: its calls' fixed
    cost dominates), where the sweep stopped, and where fresh outputs began to fault."""
    best_larger = 0.0
    for entry in reversed(list(levels.values())):
        entry["overhead_bound"] = entry["bandwidth"] < best_larger
        best_larger = max(best_larger, entry["bandwidth"])
    for name, entry in levels.items():
        span = f"{min(entry['sizes']) / 1024:.0f}-{max(entry['sizes']) / 1024:.0f} KiB"
        print(f"{name:5s} {entry['bandwidth'] / 1e9:7.1f} GB/s  (in place, best of working "
              f"sets {span})" + ("  below a larger level's figure: the fixed cost of each "
                                 "call is a large share at these sizes, so this is a lower "
                                 "bound on the level's bandwidth" if entry["overhead_bound"]
                                 else ""))
    if on_chip:
        print(f"the chip's one level for XLA operands, HBM: your in-place figure over "
              f"{bw_bytes / MiB:.0f} MiB (no sweep of the host's caches here)")
    elif "DRAM" not in levels:
        print(f"DRAM  not reached: the sweep stops at {largest / MiB:.0f} MiB, the "
              f"last-level cache is {llc / MiB:.0f} MiB (raise SWEEP_MAX_BYTES)")
    fresh = [r for r in sweep if r["kind"] == "fresh_output"]
    faulting = [r for r in fresh if r["faults_per_call"] > 0.5 * r["nbytes"] / bwm.PAGE]
    if faulting:
        print(f"fresh outputs page-fault from {faulting[0]['nbytes'] / MiB:.2f} MiB on "
              "(glibc serves large allocations with fresh mmap pages): a drop there in the "
              "fresh-output curve is the allocator, not a cache level")


def median_level_bandwidths(sweep: list, levels: dict, level_of) -> dict:
    """Each level's bandwidth at the median sample of the sweep entry that set its best:
    the spread a median placement can show."""
    out = {}
    for rec in sweep:
        lv = level_of(rec["working_set_bytes"])
        if (rec["kind"] == "in_place" and lv in levels
                and rec["best_bandwidth"] == levels[lv]["bandwidth"]):
            out[lv] = rec["moved_bytes"] / float(np.median(rec["samples_s"]))
    return out


def page_fault_cost(headline: dict, fresh_faults: float, *, on_chip: bool) -> float:
    """One minor fault's cost here, in seconds: the headline fresh output's extra time over
    in place on the same array, per fault it paid (none on a chip)."""
    if on_chip:  # a fresh output is the chip's memory: no host page fault to cost
        print("on the chip a fresh output costs no host page fault: none is charged below")
        return 0.0
    cost_s = max(0.0, float(np.median(headline["fresh_output"]["samples_s"])
                            - np.median(headline["in_place"]["samples_s"]))) / max(
        fresh_faults, 1.0)
    print(f"one page fault costs about {cost_s * 1e6:.2f} us here (the headline "
          "fresh output's extra time over in place, per fault it paid)")
    return cost_s


def show_workload_header() -> None:
    print(f"{'workload':17s} {'GFLOP':>7s} {'MiB':>7s} {'FLOP/B':>7s} {'bound':>7s} "
          f"{'level':>5s} {'max ms':>8s} {'sum ms':>8s} {'sum med':>8s} {'meas ms':>8s} "
          f"{'faults':>7s}  verdict")


def show_workload(name: str, placed: dict) -> None:
    """One row of the table: ``placed`` is the learner's roofline of the workload with
    its counts, the median placement's upper bound, the measured time and its verdict."""
    p = placed
    print(f"{name:17s} {p['flops'] / 1e9:7.3f} {p['bytes'] / MiB:7.2f} "
          f"{p['intensity']:7.2f} {p['bound']:>7s} {p['memory_level']:>5s} "
          f"{p['lower_s'] * 1e3:8.3f} {p['upper_s'] * 1e3:8.3f} "
          f"{p['upper_median_s'] * 1e3:8.3f} {p['measured_s'] * 1e3:8.3f} "
          f"{p['faults']:7.0f}  {p['verdict']}" + ("  (level not in the sweep)" if
                                                  p["assumed"] else ""))

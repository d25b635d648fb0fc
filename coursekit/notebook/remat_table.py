"""Notebook 04's memory-per-policy table: where each policy's peak comes from on this
backend (fresh processes' VmHWM on the CPU, the kernel's own memory_stats() readings on
an accelerator, whose chip no fresh process can open), the compiler's temporaries on
either, and the table and device lines the notebook prints. The figures are the
learner's ``impl`` at work; this module holds the branches and the formatting.
"""

from __future__ import annotations

import jax

from coursekit.compat import compiled_plan

MiB = 2**20


def temp_bytes(impl, ps, v, pol, *, on_chip: bool, model: str = "blocks") -> int:
    """The learner's compiler_temp_bytes (temp_size_in_bytes of the plan). On a TPU, which
    plans temp 0 and holds its scratch in the plan's peak, the same program's scratch as
    that backend reports it: the plan's peak less its arguments and outputs."""
    if not on_chip:
        return impl.compiler_temp_bytes(ps, v, pol, model=model)
    loss = impl.block_loss if model == "blocks" else impl.tanh_chain_loss
    program = jax.jit(lambda p, h: jax.value_and_grad(loss)(p, h, pol)).lower(ps, v).compile()
    return compiled_plan.scratch_bytes(program)["bytes"]


def policy_peaks(impl, policies, *, on_chip: bool, device_plans: dict, device_readings: dict,
                 sizes: tuple, repeats: int) -> dict:
    """Each policy's plan and run-only peaks: the learner's peak_rss_fresh_process at
    ``sizes`` (depth, width, hidden, batch) on the CPU; on a chip, the readings the
    notebook took in this kernel (no fresh process can open the chip it holds)."""
    if on_chip:
        return {k: {**device_plans[k], "run_peak_bytes": [r["run_peak_bytes"]],
                    "vmhwm_bytes": [], "device_peak_bytes": r["peak_after"],
                    "exact": r["exact"]} for k, r in device_readings.items()}
    return {str(pol): impl.peak_rss_fresh_process(*sizes, pol, repeats=repeats)
            for pol in policies}


def show(results: dict) -> None:
    print(f"{'policy':20s} {'resid':>6s} {'temp':>6s} {'args':>6s} {'out':>6s} {'plan':>6s} "
          f"{'total':>6s} {'run-only peak':>15s} {'GFLOP':>7s} {'ms':>7s}")
    print(f"{'':20s} {'MiB':>6s} {'MiB':>6s} {'MiB':>6s} {'MiB':>6s} {'peak':>6s} "
          f"{'alloc':>6s} {'median +- spread':>15s}")
    for pol, r in results.items():
        print(f"{pol:20s} {r['residual_mib']:6.1f} {r['temp_mib']:6.1f} {r['args_mib']:6.1f} "
              f"{r['out_mib']:6.1f} {r['plan_peak_mib']:6.1f} {r['plan_total_mib']:6.1f} "
              f"{r['peak_mib']:8.1f} +-{r['spread_mib']:5.1f} {r['gflop']:7.3f} {r['ms']:7.1f}"
              + ("" if r["peak_exact"] else "  (peak: a bound, the run stayed under the mark)"))


def show_device(reported, device_readings: dict, *, on_chip: bool) -> None:
    """Where the run-only peaks came from on this device."""
    device = jax.devices()[0]
    if on_chip:
        order = ", ".join(device_readings)
        exact = sum(r["exact"] for r in device_readings.values())
        print(f"device {device.platform} ({device.device_kind}): run-only peaks from "
              f"memory_stats() around each policy's first run, in the order {order}: "
              f"peak_bytes_in_use - bytes_in_use before it; {exact} of "
              f"{len(device_readings)} runs raised the high-water mark (a reading)"
              + ("" if exact == len(device_readings) else ", the rest are bounds")
              + ". Host memory is not read.")
    else:
        print(f"device {device.platform}: memory_stats() "
              + (f"peak_bytes_in_use {reported / MiB:.1f} MiB" if reported is not None else
                 "reports nothing here (None): the run-only peak above is host memory "
                 "(VmHWM), which says nothing about an accelerator's HBM"))

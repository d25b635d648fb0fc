"""A device's peak memory during one run, read in a process that cannot start a fresh one.

On an accelerator ``device.memory_stats()`` reports ``bytes_in_use`` and
``peak_bytes_in_use`` (a TPU v5e: also ``bytes_limit``, ``largest_alloc_size`` and more).
The peak is the process's high-water mark: it never goes down and nothing resets it. A
fresh process per run (``coursekit.measure.peak_memory``) reads each run alone, but where
one process holds the chip (a notebook kernel that ran JAX: one process at a time may open
a TPU), no fresh process can open it. Then, in the holder itself:

  * a run's own peak is ``peak_after - in_use_before`` *when the run raised the
    high-water mark* (``peak_after > peak_before``): the new maximum was reached during it;
  * when it did not, the run stayed at or below the old mark: its own peak is at most
    ``peak_before - in_use_before``, a bound, not a reading;

so runs are made in ascending order of what the compiler plans for them (``ascending``),
each the first run of its program in the process, so that each one can raise the mark.

    reading = run_reading(before_stats, after_stats)   # {"run_peak_bytes", "exact", ...}
    out, reading = measured_run(compiled, args, device)
"""

from __future__ import annotations


def run_reading(before: dict, after: dict) -> dict:
    """One run's device peak from ``memory_stats()`` taken just before and just after it:
    ``run_peak_bytes`` (how far above ``bytes_in_use`` before the run the device's memory
    rose), ``exact`` (True when the run raised the high-water mark, so the figure is a
    reading; False: only an upper bound), and the four counters it came from."""
    for name, stats in (("before", before), ("after", after)):
        missing = {"bytes_in_use", "peak_bytes_in_use"} - set(stats or {})
        if missing:
            raise ValueError(f"memory_stats() {name} the run lacks {sorted(missing)}: this "
                             "device reports no peak (a CPU reports None)")
    in_use, peak_before = int(before["bytes_in_use"]), int(before["peak_bytes_in_use"])
    peak_after = int(after["peak_bytes_in_use"])
    exact = peak_after > peak_before
    return {"run_peak_bytes": (peak_after if exact else peak_before) - in_use, "exact": exact,
            "in_use_before": in_use, "peak_before": peak_before, "peak_after": peak_after,
            "in_use_after": int(after["bytes_in_use"])}


def ascending(plans: dict) -> list:
    """The keys of ``plans`` ({name: planned bytes}) from the smallest plan up: the order
    in which each run can raise the high-water mark."""
    return sorted(plans, key=lambda k: (plans[k], str(k)))


def measured_run(compiled, args: tuple, device):
    """Run ``compiled(*args)`` once, waited for, with ``memory_stats()`` read around it:
    ``(output, run_reading(...))``."""
    import jax
    jax.block_until_ready(args)
    before = device.memory_stats()
    out = jax.block_until_ready(compiled(*args))
    return out, run_reading(before, device.memory_stats())

"""A compiled program's memory plan, and the memory figures a process reports about itself.

    memory_fields(compiled)   # the five ``memory_analysis()`` figures (ints; None absent)
    status_bytes("VmHWM")     # a kB field of /proc/self/status, in bytes
    device_peak(device)       # ``peak_bytes_in_use`` where the device reports it
    device_stat(device, key)  # any ``memory_stats()`` figure (``bytes_in_use``, ...)

On CPU ``device.memory_stats()`` is None and VmHWM is *host* memory: it says nothing about
an accelerator's HBM. How to measure the peak of one call's run alone is performance-audit
stage 3's exercise (``peak_rss_fresh_process``); the course's own measurement is
instructor-only (``coursekit.instructor.peak_memory``).
"""

from __future__ import annotations

from coursekit.compat import compiled_plan
from coursekit.compat.compiled_plan import MEMORY_FIELDS


def status_bytes(field: str) -> int:
    """A ``kB`` field of ``/proc/self/status`` (``VmHWM``, ``VmRSS``) in bytes, 0 if absent."""
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def memory_fields(compiled) -> dict:
    """The five ``memory_analysis()`` figures of a compiled program (ints; None absent),
    read through ``coursekit.compat.compiled_plan`` (a TPU's temp reads 0: its scratch is
    in the plan's peak, ``compiled_plan.scratch_bytes``)."""
    plan = compiled_plan.memory_plan(compiled)
    return {f: plan[f] for f in MEMORY_FIELDS}


def device_stat(device, key: str = "peak_bytes_in_use") -> int | None:
    """``key`` from ``device.memory_stats()`` where the device reports it (None on CPU)."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    return int(stats[key]) if stats and key in stats else None


def device_peak(device) -> int | None:
    """``peak_bytes_in_use`` from ``device.memory_stats()`` where the device reports it."""
    return device_stat(device, "peak_bytes_in_use")


"""Sizes and figures around a memory-bandwidth sweep (notebook 03): the sweep's array
sizes from a machine's cache sizes, each level's figure read off a sweep's records, this
process's minor page faults so far, and a theoretical compute peak from the CPU's flags.

    sizes = sweep_sizes(caches)                  # caches: {"L1": bytes, ...}
    levels = level_bandwidths(records, caches, level)   # {"L1": {...}, ..., "DRAM": ...}
    before = minor_faults()                      # getrusage: every thread of this process
    peak = theoretical_peak_flops()              # cores x clock x FLOP/cycle, assumptions

Cache sizes come from sysfs, never from a constant (this VM's L3 is 300 MiB: a 256 MiB
array is not "well above L3"). glibc serves large allocations with fresh ``mmap`` pages,
so a cliff in a fresh-output curve between 16 and 64 MiB can be the allocator, not a cache
level. How to measure the bandwidth, read the caches and place a workload on the roofline
is performance-audit stage 2's exercise; the course's own code for it is instructor-only
(``coursekit.instructor.bandwidth``). Notebook 03 times its workloads with the learner's own
``time_fn`` (``coursekit.notebook.timed_by_yours``).
"""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path

SYSFS_CACHE = Path("/sys/devices/system/cpu/cpu0/cache")


KINDS = ("in_place", "fresh_output", "read_sum")


# bytes of memory traffic per byte of the array, and bytes resident per byte of the array
MOVED_PER_BYTE = {"in_place": 2, "fresh_output": 2, "read_sum": 1}


RESIDENT_PER_BYTE = {"in_place": 1, "fresh_output": 2, "read_sum": 1}


PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def minor_faults() -> int:
    """Minor page faults of this process so far (all its threads)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def sweep_sizes(caches: dict[str, int], *, beyond: float = 4.0, smallest: int = 64 * 2**10,
                largest: int | None = None, per_octave: float = 0.5) -> list[int]:
    """Array sizes (bytes, multiples of a page) for a working-set sweep: a geometric
    series from ``smallest`` (or half the smallest cache) to ``beyond`` x the last-level
    cache, plus half and twice each level's size (one point surely inside it, one surely
    past it). ``largest`` caps the series (CI sizes); then the sweep does not reach DRAM
    and ``level_bandwidths`` says so."""
    llc = max(caches.values()) if caches else 32 * 2**20
    if caches:                              # a point inside the smallest level too
        smallest = min(smallest, min(caches.values()) // 2)
    top = int(beyond * llc)
    if largest is not None:
        top = min(top, largest)
    points = {smallest, top}
    steps = max(1, int(math.log2(top / smallest) * per_octave))
    points |= {int(smallest * (top / smallest) ** (i / steps)) for i in range(steps + 1)}
    for size in caches.values():
        points |= {size // 2, 2 * size}
    rounded = {max(PAGE, (p // PAGE) * PAGE) for p in points if smallest <= p <= top}
    return sorted(rounded)


def level_bandwidths(records: list[dict], caches: dict[str, int], level, *,
                     kind: str = "in_place") -> dict[str, dict]:
    """Each memory level's bandwidth read from a sweep: per level (smallest cache first,
    then "DRAM"), the records of ``kind`` whose working set lives there (``level(
    working_set_bytes)`` names the level), and the best of their ``best_bandwidth`` as
    that level's figure. "DRAM" counts only working sets of at least 2x the last-level
    cache (just past it, part still hits the cache); a level the sweep did not reach is
    absent."""
    llc = max(caches.values()) if caches else 0
    levels: dict[str, dict] = {}
    for rec in records:
        if rec["kind"] != kind:
            continue
        name = level(rec["working_set_bytes"])
        if name == "DRAM" and rec["working_set_bytes"] < 2 * llc:
            continue
        entry = levels.setdefault(name, {"sizes": [], "bandwidths": []})
        entry["sizes"].append(rec["working_set_bytes"])
        entry["bandwidths"].append(rec["best_bandwidth"])
    order = [*sorted(caches, key=caches.get), "DRAM"]
    return {name: dict(levels[name], bandwidth=max(levels[name]["bandwidths"]))
            for name in order if name in levels}


def _cpuinfo() -> dict:
    info = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    return info


def theoretical_peak_flops(*, cores: int | None = None, ghz: float | None = None,
                           flags: set | None = None, fma_units: int = 2) -> dict:
    """A theoretical float32 peak: cores x clock x FLOP per cycle, where FLOP per cycle =
    SIMD lanes (512-bit with ``avx512f``, 256 with ``avx``/``avx2``, else 128) x 2 when the
    CPU has ``fma`` x ``fma_units`` FMA units per core. The unit count and the clock
    (``cpu MHz`` in /proc/cpuinfo: no turbo, no AVX-512 down-clocking) are assumptions,
    returned in words with the figure."""
    info = _cpuinfo()
    flags = set(info.get("flags", "").split()) if flags is None else set(flags)
    cores = cores or len(os.sched_getaffinity(0))
    ghz = ghz or float(info.get("cpu MHz", 0) or 0) / 1e3
    bits = 512 if "avx512f" in flags else 256 if {"avx", "avx2"} & flags else 128
    per_fma = 2 if "fma" in flags else 1
    per_cycle = bits // 32 * per_fma * fma_units
    return {"flops": cores * ghz * 1e9 * per_cycle, "cores": cores, "ghz": ghz,
            "simd_bits": bits, "flop_per_cycle": per_cycle, "fma_units": fma_units,
            "assumption": f"{cores} cores x {ghz:.2f} GHz (base clock from /proc/cpuinfo) x "
                          f"{per_cycle} float32 FLOP/cycle ({bits}-bit SIMD = {bits // 32} "
                          f"lanes, x{per_fma} for FMA, x{fma_units} FMA units per core "
                          "assumed)"}


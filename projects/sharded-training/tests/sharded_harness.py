"""sharded-training's checker object and what every stage shares: the 8 CPU devices
(set before jax is imported), one compilation cache for the run, and the stated
tolerance of sharded against single-device results."""

from __future__ import annotations

import atexit
import shutil
import tempfile

from coursekit.facts import use_cpu_devices

N_DEVICES = 8
# Grading is the same on every machine: 8 CPU devices, even where a GPU is present (the
# fake-device flag only splits the CPU). An explicit JAX_PLATFORMS is respected.
use_cpu_devices(N_DEVICES)  # before jax is imported

from coursekit.checking.contract import Checker  # noqa: E402 - after the device flag
from coursekit.workloads.jaxcache import enable_compilation_cache  # noqa: E402

checker = Checker("sharded-training", {
    1: "mesh and placement", 2: "count-weighted global updates",
    3: "fresh-process recovery", 4: "trace and timing"})

# One compilation cache for this run: the checker and every training process it starts
# (fresh processes compile the same programs; a hit loads them instead). Removed at exit.
_CACHE_DIR = tempfile.mkdtemp(prefix="sharded-check-jaxcache-")
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
enable_compilation_cache(_CACHE_DIR)

RTOL, ATOL = 1e-4, 1e-5          # sharded vs single-device (summation order differs)

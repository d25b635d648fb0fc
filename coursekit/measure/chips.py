"""What an accelerator's vendor states, per device kind: the spec a measured roof is set
beside (never in place of it). A roof the course uses is always measured; these figures
only say how far from the stated one it sits.

Sources: Google Cloud's TPU v5e page (cloud.google.com/tpu/docs/v5e): per chip 197
TFLOP/s bfloat16, 16 GB HBM2 at 819 GB/s. Memory capacity in use is read from the device
itself (``memory_stats()["bytes_limit"]``), never from this table.
"""

from __future__ import annotations

SPECS = {
    "TPU v5 lite": {"name": "TPU v5e", "peak_flops": {"bfloat16": 197e12},
                    "hbm_bytes_per_s": 819e9, "hbm_bytes": 16e9,
                    "source": "cloud.google.com/tpu/docs/v5e (per chip)"},
}


def spec(device_kind: str) -> dict | None:
    """The stated figures of a device kind (``jax.devices()[0].device_kind``), or None."""
    return SPECS.get(str(device_kind))


def memory_levels(device) -> dict[str, int]:
    """The memory levels a working set can live in on ``device``, in bytes, read from the
    device where it says: an accelerator's HBM (``bytes_limit``) and, on a TPU, the vector
    memory a Pallas kernel's blocks live in (``pltpu.get_tpu_info`` where this JAX has
    it). Empty on a CPU (its levels are the host's caches: ``bandwidth.cache_sizes``)."""
    stats = device.memory_stats() if hasattr(device, "memory_stats") else None
    levels: dict[str, int] = {}
    if stats and "bytes_limit" in stats:
        levels["HBM"] = int(stats["bytes_limit"])
    if getattr(device, "platform", "") == "tpu":
        vmem = _tpu_vmem_bytes()
        if vmem:
            levels["VMEM"] = vmem
    return levels


def _tpu_vmem_bytes() -> int | None:
    try:
        from jax.experimental.pallas import tpu as pltpu
        info = pltpu.get_tpu_info()
    except Exception:  # noqa: BLE001 - a JAX without it: the level goes unnamed
        return None
    for name in ("vmem_capacity_bytes", "vmem_bytes"):
        value = getattr(info, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return None

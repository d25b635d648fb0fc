"""Where a measurement ran: versions, backend, devices, XLA flags and the CPU.

One notion of "the environment" for the checker's ``--json`` versions, run records'
fingerprints and MLflow runs, so that "were these measured in the same place" has one
answer.
"""

from __future__ import annotations

import contextlib
import os
import platform
from pathlib import Path

import numpy as np


def environment_versions() -> dict:
    """Versions and backend that go with every result (the environment fingerprint)."""
    info = {"python": platform.python_version(), "platform": platform.platform(),
            "numpy": np.__version__}
    with contextlib.suppress(Exception):
        import jax
        import jaxlib
        info.update(jax=jax.__version__, jaxlib=jaxlib.__version__,
                    backend=jax.default_backend(), devices=jax.device_count())
    info["xla_flags"] = os.environ.get("XLA_FLAGS", "")
    return info


def device_facts() -> dict:
    """What this process's JAX computes on: backend, device kind, device count, JAX version
    (opens the backend). ``label`` is how a figure names it: "TPU figure (TPU v5 lite)",
    "CPU figure (cpu)"."""
    import jax
    devices = jax.devices()
    backend = jax.default_backend()
    kind = str(getattr(devices[0], "device_kind", backend)) if devices else backend
    return {"backend": backend, "device_kind": kind, "device_count": len(devices),
            "jax": jax.__version__, "label": figure_label(backend, kind)}


def figure_label(backend: str, device_kind: str) -> str:
    """"TPU figure (TPU v5 lite)": the words every printed figure carries."""
    return f"{str(backend).upper()} figure ({device_kind})"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (or ``platform.processor()``)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment_fingerprint() -> dict:
    """Where a measurement ran: jax/jaxlib versions, backend, device count, XLA flags,
    CPU model, core count and Python (``environment_versions`` plus the hardware). Two
    records with different fingerprints measure different things."""
    info = environment_versions()
    info.setdefault("jax", "")
    info.setdefault("jaxlib", "")
    info.setdefault("backend", "")
    info.setdefault("devices", 0)
    info["cpu"] = cpu_model()
    info["cpu_cores"] = os.cpu_count()
    return info

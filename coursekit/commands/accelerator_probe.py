"""What ``make accelerator`` runs on, asked in a process of its own (it opens the device,
so the command's own process never does):

    python -m coursekit.commands.accelerator_probe OUT.json

Writes the backend, device kind and count, the figure label ("TPU figure (TPU v5 lite)"),
the device's memory limit where the backend reports one, the JAX, jaxlib, Python and
numpy versions, and which of the packages the course uses are installed (the
accelerator machine has its own JAX and lacks some: their absence is named, not a
traceback later). A backend that cannot be opened is recorded as an error with the rest.
"""

from __future__ import annotations

import json
import os
import sys
from importlib import metadata
from pathlib import Path

# Distributions the course imports somewhere (the accelerator machine's own index lacks
# the last five: docs/tpu.md).
PACKAGES = ("jax", "jaxlib", "libtpu", "numpy", "ipython", "nbformat", "matplotlib",
            "optax", "orbax-checkpoint", "flatbuffers", "papermill", "jupytext", "mlflow",
            "xprof", "nbgrader")


def package_versions(names=PACKAGES) -> dict:
    """{distribution: version, or None when it is not installed}."""
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def probe() -> dict:
    from coursekit.measure.environment import cpu_model, environment_versions
    facts = {"versions": environment_versions(), "packages": package_versions(),
             "cpu": cpu_model(), "cpu_cores": os.cpu_count(),
             "jax_platforms": os.environ.get("JAX_PLATFORMS", ""), "error": ""}
    try:
        import jax

        from coursekit.measure.environment import device_facts
        facts["device"] = device_facts()
        stats = jax.devices()[0].memory_stats() or {}
        facts["device"]["memory_bytes_limit"] = stats.get("bytes_limit")
    except Exception as err:  # noqa: BLE001 - a backend that cannot open is the finding
        facts["device"] = None
        facts["error"] = f"{type(err).__name__}: {str(err)[:400]}"
    return facts


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m coursekit.commands.accelerator_probe OUT.json", file=sys.stderr)
        return 2
    facts = probe()
    Path(argv[0]).write_text(json.dumps(facts, indent=1, default=str))
    return 0 if facts["device"] else 1


if __name__ == "__main__":
    sys.exit(main())

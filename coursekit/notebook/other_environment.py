"""Notebook 08's record from another environment: where this machine has an accelerator,
the learner's before step measured now on the chip in a fresh process (the kernel itself
computes on fake CPU devices); elsewhere, planted: this machine's after record restamped
with the fingerprint of the TPU v5e image the course ran on. Either way a pair whose
runtime differs, for the learner's ``decide`` and the fingerprint guard.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from coursekit.chip_turn import chip_turn
from coursekit.notebook.guard import NotYet
from coursekit.workloads import capstone

# the fingerprint of the TPU v5e image (its JAX, Python, NumPy, one chip)
TPU_V5E_IMAGE = {"jax": "0.10.2", "jaxlib": "0.10.2", "python": "3.11.7", "numpy": "2.4.6",
                 "backend": "tpu", "devices": 1, "xla_flags": "", "cpu_cores": 13}


def chip_env(user_platforms: str | None) -> dict:
    """This kernel's environment less its CPU pin: the user's own JAX_PLATFORMS, if any."""
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    if user_platforms is not None:
        env["JAX_PLATFORMS"] = user_platforms   # the user's choice, not this kernel's pin
    return env


def backend(env: dict) -> str:
    """The backend a fresh process's JAX finds in ``env`` ("cpu" when it fails)."""
    probe = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend())"],
                           capture_output=True, text=True, env=env, timeout=300)
    return probe.stdout.strip().splitlines()[-1] if probe.returncode == 0 else "cpu"


def record(load_run, after: dict, *, training: Path, batch: int, iters: int, runs: Path,
           user_platforms: str | None) -> tuple[dict, str, str]:
    """(the other environment's record read by ``load_run``, how it was made, the backend
    it ran on)."""
    env = chip_env(user_platforms)
    with chip_turn(env):   # under make accelerator: after the item holding the chip ends
        return _record(load_run, after, env, training=training, batch=batch, iters=iters,
                       runs=runs)


def _record(load_run, after, env, *, training, batch, iters, runs):
    other_backend = backend(env)
    if other_backend == "cpu":   # planted: this machine's after record, restamped
        other = json.loads(json.dumps(after))
        other["fingerprint"] = {**other["fingerprint"], **TPU_V5E_IMAGE}
        return (other, "planted: this machine's after record with the TPU v5e image's "
                "fingerprint", other_backend)
    out = runs / "other-environment.json"   # measured now, on the chip, in a fresh process
    done = subprocess.run(
        [sys.executable, "-m", "coursekit.workloads.capstone", "--training-impl",
         str(training), "--variant", "before", "--batch", str(batch), "--iters",
         str(iters), "--devices", "1", "--logdir", str(runs / "traces" / "other"),
         "--out", str(out)], capture_output=True, text=True, timeout=900,
        env=dict(env, PYTHONPATH=os.pathsep.join(
            [str(capstone.ROOT), os.environ.get("PYTHONPATH", "")])))
    if done.returncode == 3:
        raise NotYet(done.stderr.strip().splitlines()[-1].removeprefix("not yet: "))
    if done.returncode != 0:
        raise RuntimeError(f"the run on the chip failed ({done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    return load_run(str(out)), f"measured now on {other_backend}", other_backend

"""The oldest JAX the course supports, installed beside the pinned one, for processes that
must run under it: the sealed references are written by it, and ``make test`` runs the
course's version-bound parts under it (tests/test_jax_floor.py).

    python -m coursekit.authoring.jaxfloor     # install build/jax-floor when missing

jax and jaxlib ``FLOOR`` (``coursekit.compat.jaxapi``) go into ``build/jax-floor`` with
``pip install --no-deps --target`` (their Python 3.12 wheels; the venv's numpy, ml_dtypes,
scipy and opt_einsum serve both versions). A process runs the floor with that folder first
on ``PYTHONPATH``, exactly as an accelerator image puts its own JAX first (the TPU v5e's
0.10.2 sits in /opt/...). A stamp holding the version makes a second call free, as the
Makefile's venv stamp does; a lock lets parallel test workers share one install.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

from coursekit.compat.jaxapi import FLOOR
from coursekit.facts import BUILD

FOLDER = BUILD / "jax-floor"
STAMP = FOLDER / ".installed"


def installed() -> bool:
    return STAMP.is_file() and STAMP.read_text().strip() == FLOOR


def install(quiet: bool = True) -> Path:
    """``FOLDER`` holding jax and jaxlib ``FLOOR``; installs them (about 20-50 s, about
    380 MB) unless the stamp says they are there. Raises RuntimeError with pip's words."""
    if installed():
        return FOLDER
    BUILD.mkdir(parents=True, exist_ok=True)
    with open(BUILD / ".jax-floor.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker may be installing it now
        if installed():
            return FOLDER
        partial = FOLDER.with_name(FOLDER.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
             *(["--quiet"] if quiet else []), "--no-deps", "--target", str(partial),
             f"jax=={FLOOR}", f"jaxlib=={FLOOR}"], capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(partial, ignore_errors=True)
            raise RuntimeError(f"could not install jax and jaxlib {FLOOR} into {FOLDER} "
                               f"(pip exit {done.returncode}): {done.stderr.strip()[-800:]}")
        shutil.rmtree(FOLDER, ignore_errors=True)
        partial.rename(FOLDER)
        STAMP.write_text(FLOOR + "\n")
    return FOLDER


def environment(base: dict | None = None) -> dict:
    """``base`` (os.environ by default) with the floor first on ``PYTHONPATH``."""
    env = dict(os.environ if base is None else base)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([str(FOLDER), *rest])
    return env


def run_module(module: str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``python -m module *args`` under the floor (installed first when missing)."""
    install()
    return subprocess.run([sys.executable, "-m", module, *args],
                          env=environment(kwargs.pop("env", None)), **kwargs)


def main() -> int:
    if installed():
        return 0
    print(f"installing jax and jaxlib {FLOOR} into {FOLDER} (the oldest JAX the course "
          "supports; make test runs the course under it too)")
    install()
    return 0


if __name__ == "__main__":
    sys.exit(main())

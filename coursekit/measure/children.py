"""Checker-side child processes, started clean.

A process the checker starts to measure its own reference (a fresh-process peak, a
timing reference) must not import anything a submission could have written. ``python -c``
puts its working folder first on ``sys.path``, and the checker's working folder is the
run's folder, which the learner's code can write: a ``json.py`` there was imported by the
reference child and reported the learner's numbers. So a clean child is started with

* ``python -I``: isolated mode, no working folder or script folder on ``sys.path``, no
  ``PYTHON*`` variables (``PYTHONPATH``, ``PYTHONSTARTUP``...), no user site-packages;
  the child adds the course root itself, so its import path is the venv and the course;
* a working folder made for it alone (``mkdtemp``: a fresh random name, mode 0700),
  removed afterwards.

Only for processes that never import learner code; a learner process is started by the
bridge (``coursekit.checking.bridge``) with its own rules.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile


def clean_argv(*args: str) -> list[str]:
    """``[python, -I, *args]`` with this interpreter."""
    return [sys.executable, "-I", *args]


def clean_env(extra: dict | None = None) -> dict:
    """This environment without ``PYTHON*`` variables (ignored under -I anyway; dropped so
    nothing reads them by hand), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(extra or {})
    return env


def run_clean(args: list[str], *, timeout: float, env: dict | None = None,
              **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` of ``python -I *args`` in a folder of its own, text output
    captured. Raises ``subprocess.TimeoutExpired`` like ``subprocess.run``."""
    folder = tempfile.mkdtemp(prefix="course-clean-child-")
    try:
        return subprocess.run(clean_argv(*args), cwd=folder, env=clean_env(env),
                              capture_output=True, text=True, timeout=timeout,
                              check=False, **kwargs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""Fakes of the TPU v5e machine of 2026-12-06 (issue 51) on the CPU, for the tests of
each checker's accelerator path: a ``sitecustomize`` on the path of every process the
checker starts reproduces what the chip did, each fake switched on by its variable.

- ``FAKE_ONE_CHIP``: a process that does not pin JAX to the CPU "opens the chip" and finds
  one device (its fake CPU device count becomes 1), as the learner process did on the
  chip: "the learner process sees 1 devices, not 8", then KeyError: 1 placing on device 1.
- ``FAKE_NO_INET``: ``socket.socket(AF_INET/AF_INET6)`` raises OSError 97 (Address family
  not supported), as that machine's sandbox did; unix sockets still work.
- ``FAKE_CHIP_MATMUL``: in a process that opens "the chip" (a learner process with
  ``COURSE_ACCELERATOR=1``), every float32 matmul comes out 2^-15 (3e-5) relative off the
  CPU's: the learner's code and the course's code there share a device whose float32
  rounds unlike this process's CPU. On optimisation's confident model (logits past 100)
  that puts the reference fix at about 1-15x the CPU's tolerance from ``train_slow``, as
  the chip put it at 4.44x (three bfloat16 passes, a TPU's ``Precision.HIGH``, gave under
  1.5x; two passes 200-900x).
- ``FAKE_CHIP_LAUNCH_S``: in such a process, every call of a jitted function (not one
  traced inside another) returns only once its result is ready and at least this many
  seconds after it began: a fixed cost per call above its arithmetic at every size, as
  the chip's dispatch and wait (0.5-0.65 ms a synchronised call) exceed a few
  microseconds of matmul, so a call's time hardly grows with its batch (a cost added on
  top, 50 ms, still let train_fast grow 4.8x across stage 3's sweep at load 8 per core).

``ACCELERATOR_ENV`` makes a checker see an accelerator (``protocol.accelerator_present``
reads a TPU VM's variables): its learner processes get ``COURSE_ACCELERATOR=1`` and its
checks take their accelerator path, while everything still computes on this CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from helpers import ROOT

SITECUSTOMIZE = textwrap.dedent('''
    import errno, os, re, socket

    # the chip: a process whose JAX is not pinned to the CPU opens it and finds 1 device
    if os.environ.get("FAKE_ONE_CHIP") and os.environ.get("JAX_PLATFORMS") != "cpu":
        flags = re.sub(r"--xla_force_host_platform_device_count=\\d+", "",
                       os.environ.get("XLA_FLAGS", ""))
        os.environ["XLA_FLAGS"] = flags + " --xla_force_host_platform_device_count=1"

    # no TCP/UDP sockets (unix sockets work)
    if os.environ.get("FAKE_NO_INET"):
        class NoInet(socket.socket):
            def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
                if fileno is None and family in (-1, socket.AF_INET, socket.AF_INET6):
                    raise OSError(errno.EAFNOSUPPORT, os.strerror(errno.EAFNOSUPPORT))
                super().__init__(family, type, proto, fileno)
        socket.socket = NoInet

    _ON_CHIP = os.environ.get("COURSE_ACCELERATOR") == "1"

    # the chip's float32 matmul: products that round unlike this CPU's
    if _ON_CHIP and os.environ.get("FAKE_CHIP_MATMUL"):
        import jax
        import jax.numpy as jnp
        from jax._src.lax import lax as _lax
        _dot, _off = _lax.dot_general, jnp.float32(1 + 2.0 ** -15)

        def _chip_dot(lhs, rhs, *args, **kwargs):
            if getattr(lhs, "dtype", None) == jnp.float32:
                lhs = lhs * _off
            return _dot(lhs, rhs, *args, **kwargs)
        _lax.dot_general = _chip_dot

    # the chip's fixed cost per call of a compiled program
    if _ON_CHIP and os.environ.get("FAKE_CHIP_LAUNCH_S"):
        import functools, time
        import jax
        _jit, _fixed = jax.jit, float(os.environ["FAKE_CHIP_LAUNCH_S"])

        class _Launched:
            def __init__(self, fn):
                self._fn = fn
                functools.update_wrapper(self, getattr(fn, "__wrapped__", fn))

            def __call__(self, *args, **kwargs):
                started = time.perf_counter()
                out = self._fn(*args, **kwargs)
                leaves = jax.tree.leaves(out)
                if leaves and not any(isinstance(v, jax.core.Tracer) for v in leaves):
                    jax.block_until_ready(out)
                    time.sleep(max(0.0, _fixed - (time.perf_counter() - started)))
                return out

            def __getattr__(self, name):
                return getattr(self._fn, name)

        def _launched_jit(fun=None, **kwargs):
            if fun is None:
                return lambda f: _Launched(_jit(f, **kwargs))
            return _Launched(_jit(fun, **kwargs))
        jax.jit = _launched_jit
''')

# what a TPU VM's image sets: the checker sees an accelerator (nothing opens one here)
ACCELERATOR_ENV = {"TPU_ACCELERATOR_TYPE": "v5litepod-1"}


def write_fake(tmp_path_factory):
    """A folder holding the fakes' ``sitecustomize.py`` (for a module-scoped fixture)."""
    folder = tmp_path_factory.mktemp("one-chip-fake")
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE)
    return folder


def fake_env(fake_path, *fakes: str, **extra) -> dict:
    """The environment of a check.py run on the faked machine: the user has set no
    JAX_PLATFORMS (as on the TPU VM), the fake is on every process's path. No shared
    results (COURSE_CHECK_REUSE) unless ``extra`` names some: the suite's sandboxed
    reference ran on the plain CPU, so a check cell answered from it would hide the
    verdicts the fakes change (notebook 05's not-applicable ones)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("JAX_PLATFORMS", "XLA_FLAGS", "COURSE_CHECK_REUSE")}
    path = [str(fake_path), str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(":"))]
    env.update({"PYTHONPATH": os.pathsep.join(path), **{f: "1" for f in fakes}, **extra})
    return env


def run_faked(project: str, fake_path, impl, stage, checks, *fakes, tmp, seed=None,
              **extra) -> dict:
    """check.py of ``project`` on the faked machine, in ``helpers.run_checker``'s form (its
    environment exactly ``fake_env``'s: run_checker would add this process's JAX_PLATFORMS
    back); ``extra``: more variables (``ACCELERATOR_ENV``, ``FAKE_CHIP_LAUNCH_S``)."""
    out = tmp / "result.json"
    cmd = [sys.executable, str(ROOT / "projects" / project / "tests" / "check.py"),
           "--stage", str(stage), "--impl", str(impl), "--json", str(out),
           "--only", ",".join(checks)] + (["--seed", str(seed)] if seed is not None else [])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=ROOT,
                          env=fake_env(fake_path, *fakes, **extra))
    data = json.loads(out.read_text()) if out.exists() else None
    status = {r["check_id"]: r["status"] for r in data["results"]} if data else {}
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
            "json": data, "status": status}

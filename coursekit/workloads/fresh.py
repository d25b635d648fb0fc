"""Call a learner's function in a fresh Python process and bring its arrays back.

A result that depends on hidden state (numpy's or Python's global RNG, string hashing,
the clock, a cache) can agree with itself inside one process and still change in the
next. ``call_in_fresh_process`` runs ``impl.<function>(**arguments)`` in a new
interpreter whose hash seed and global RNG seeds differ from the caller's, and returns
the output as ``flatten(output)``: {tree path: numpy array}, which the caller compares
bitwise with ``flatten`` of its own in-process result.

Arguments travel as: ``arrays`` (numpy arrays, saved in an .npz), ``keys`` (ints, each
rebuilt as ``jax.random.key(int)``) and ``kwargs`` (JSON values).

A TPU admits one process at a time (libtpu's lockfile): where the caller holds an
accelerator, a fresh process could not open it, so it runs on the CPU
(``fresh_process_platform`` says so) and the caller compares it with its own call on the
CPU: bits are compared like with like, one backend against the same backend.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from coursekit.facts import ROOT

_CHILD = r"""
import json, random, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
spec = json.loads(open(sys.argv[2]).read())
np.random.seed(spec["global_seed"])
random.seed(spec["global_seed"])
import jax
from coursekit.workloads.fresh import flatten
from coursekit.checking.errors import LearnerCodeError
from coursekit.checking.learner import explain_exception, get_function, load_impl
try:
    impl = load_impl(spec["impl"])
    fn = get_function(impl, spec["function"])
    arrays = dict(np.load(spec["arrays"])) if spec["arrays"] else {}
    args = {k: jax.numpy.asarray(v) for k, v in arrays.items()}
    args.update({k: jax.random.key(v) for k, v in spec["keys"].items()})
    out = fn(**args, **spec["kwargs"])
    np.savez(spec["out"], **{k: v for k, v in flatten(out).items()})
    result = {"ok": True}
except Exception as err:  # reported to the parent as one named line
    err = err if isinstance(err, LearnerCodeError) else explain_exception(err, spec["impl"])
    result = {"ok": False, "message": str(err), "kind": err.kind}
open(spec["status"], "w").write(json.dumps(result))
"""


# What a runtime says when another process holds the chip (the TPU run of 2026-12-06).
HELD_ELSEWHERE = ("libtpu_lockfile", "multi-process lockfile", "TPU is already in use")


def caller_holds_accelerator() -> bool:
    """Whether this process runs JAX on a backend other than the CPU (which admits no
    second process where it is a TPU)."""
    if "jax" not in sys.modules:
        return False
    import jax
    try:
        return jax.default_backend() != "cpu"
    except RuntimeError:  # no backend could be opened: none is held either
        return False


def fresh_process_platform() -> str | None:
    """The platform a fresh process is pinned to: "cpu" where this process holds an
    accelerator, else None (the same platforms as this process)."""
    return "cpu" if caller_holds_accelerator() else None


class FreshProcessError(Exception):
    """The function failed (or the process died) in the fresh process; the message says
    how."""


def flatten(tree) -> dict:
    """{"['params']['w']": array, ...} for any pytree of arrays and numbers."""
    import jax
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {jax.tree_util.keystr(path) or "<root>": np.asarray(leaf) for path, leaf in leaves}


def bitwise_differences(a: dict, b: dict) -> list[str]:
    """Leaves that differ in name, shape, dtype or any bit (NaNs compared as bits)."""
    diffs = [f"{k}: only in one result" for k in sorted(set(a) ^ set(b))]
    for k in sorted(set(a) & set(b)):
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape != y.shape or x.dtype != y.dtype:
            diffs.append(f"{k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        elif x.tobytes() != y.tobytes():
            worst = np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))) \
                if x.dtype.kind in "fiu" else float("nan")
            diffs.append(f"{k}: differs (max abs difference {worst:.3g})")
    return diffs


def call_in_fresh_process(impl, function: str, *, workdir, arrays: dict | None = None,
                          keys: dict | None = None, kwargs: dict | None = None,
                          global_seed: int = 12345, timeout: float = 300) -> dict:
    """Run ``impl.function`` in a new interpreter (hash seed and global RNG seeds unlike
    the caller's) and return ``flatten`` of its output, on the CPU where this process
    holds an accelerator (``fresh_process_platform``). Raises FreshProcessError."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    tag = f"{function}-{os.getpid()}-{len(list(workdir.iterdir()))}"
    spec = {"impl": str(Path(impl).resolve()), "function": function,
            "arrays": "", "keys": dict(keys or {}), "kwargs": dict(kwargs or {}),
            "global_seed": global_seed, "out": str(workdir / f"{tag}-out.npz"),
            "status": str(workdir / f"{tag}-status.json")}
    if arrays:
        spec["arrays"] = str(workdir / f"{tag}-in.npz")
        np.savez(spec["arrays"], **{k: np.asarray(v) for k, v in arrays.items()})
    spec_path = workdir / f"{tag}-spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {**os.environ, "PYTHONHASHSEED": str(global_seed % 4294967295)}
    platform = fresh_process_platform()
    if platform:
        env["JAX_PLATFORMS"] = platform
    try:
        done = subprocess.run([sys.executable, "-c", _CHILD, str(ROOT), str(spec_path)],
                              capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=workdir)
    except subprocess.TimeoutExpired:
        raise FreshProcessError(f"{function} ran over {timeout:.0f} s in a fresh process")\
            from None
    status_path = Path(spec["status"])
    if not status_path.exists():
        tail = (done.stdout + done.stderr).strip()[-600:]
        raise FreshProcessError(f"the fresh process died (exit {done.returncode}) before "
                                f"{function} returned: {tail}")
    status = json.loads(status_path.read_text())
    if not status["ok"]:
        if any(mark in status["message"] for mark in HELD_ELSEWHERE):
            raise FreshProcessError(
                "the fresh process could not open the accelerator: another process holds "
                f"it (a TPU admits one process at a time): {status['message']}")
        raise FreshProcessError(f"in a fresh process: {status['message']}")
    with np.load(spec["out"]) as data:
        return {k: data[k] for k in data.files}


def on_cpu(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with every array argument and the default device on the
    CPU: this process's counterpart of a fresh process pinned to the CPU."""
    import jax
    cpu = jax.devices("cpu")[0]
    moved = jax.tree.map(lambda a: jax.device_put(a, cpu)
                         if isinstance(a, (np.ndarray, jax.Array)) else a, (args, kwargs))
    with jax.default_device(cpu):
        return fn(*moved[0], **moved[1])

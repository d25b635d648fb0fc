"""Observed peak memory of one jitted call, the run alone, in fresh processes: the
course's reference for performance-audit stage 3 (``peak_rss_fresh_process``) and its
remat models (``block_loss``, ``tanh_chain_loss``). Instructor-only
(``coursekit.checking.graded``): a learner's release does not hold it.

A fresh process's ``VmHWM`` (``/proc/self/status``) holds the runtime (~280 MiB),
compilation, the arguments and everything before the call, and single readings vary by
5-21 MiB run to run. So the child builds its inputs, compiles, runs a tiny warm-up
program, then writes ``5`` to ``/proc/self/clear_refs`` (which resets the high-water mark
to the current RSS), runs the call once and reads ``VmHWM`` again: ``run_peak_bytes`` is
that reading minus the RSS at the reset. Each repeat is another fresh process (a second
run in the same process reuses freed heap pages and reads low); repeats of several
variants are interleaved so that drift hits them alike.

Beside it, the compiler's plan of the same compiled program
(``compiled.memory_analysis()``): ``argument``, ``output`` and ``temp`` bytes (temp
excludes arguments and outputs), ``peak_memory_in_bytes`` and ``total_allocation_bytes``.
Where the device reports memory (``device.memory_stats()``, an accelerator), the figure is
the device's instead: ``run_peak_bytes`` is how far ``peak_bytes_in_use`` rose above the
``bytes_in_use`` just before the run (``peak_source`` says "device"; the host's VmHWM is
kept beside it), and the repeats run one at a time (one process at a time can hold a TPU).
On CPU ``memory_stats()`` is None and the figure is VmHWM's (``peak_source`` "host"), which
says nothing about an accelerator's HBM.

API::

    result = fresh_process_peaks({"none": ("path/to/file.py:factory", {...}), ...},
                                 repeats=3)
    result["none"]["run_peak_bytes"]   # one per repeat (fresh process each)

A factory is ``module_file:function``; called with the given keyword arguments in the
child, it returns ``(fn, args)``; the child measures ``jax.jit(fn)(*args)``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from coursekit.compat.jaxapi import import_path
from coursekit.measure.children import run_clean
from coursekit.measure.peak_memory import (
    MEMORY_FIELDS,
    device_peak,
    device_stat,
    memory_fields,
    status_bytes,
)

COURSE_ROOT = Path(__file__).resolve().parents[2]


def reset_high_water_mark() -> bool:
    """Reset this process's VmHWM to its current RSS (``clear_refs`` value 5)."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False








def load_factory(spec: str):
    """``"path/to/file.py:function"`` -> the function (the file imported by path)."""
    import importlib.util
    path, _, name = spec.rpartition(":")
    module_spec = importlib.util.spec_from_file_location("peak_factory", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return getattr(module, name)


def measure_here(fn, args) -> dict:
    """In *this* process (call it in a fresh one): compile ``jax.jit(fn)`` for ``args``,
    reset the high-water mark, run once, and report run-only peak and the plan."""
    import jax
    import jax.numpy as jnp
    args = jax.block_until_ready(args)
    compiled = jax.jit(fn).lower(*args).compile()
    jax.block_until_ready(jax.jit(lambda v: v + 1)(jnp.ones(8)))  # start the runtime
    device = jax.devices()[0]
    unreset = status_bytes("VmHWM")
    reset = reset_high_water_mark()
    rss_before = status_bytes("VmRSS")
    held_before = device_stat(device, "bytes_in_use")
    out = jax.block_until_ready(compiled(*args))
    hwm = status_bytes("VmHWM")
    del out
    peak = device_peak(device)
    host = hwm - rss_before if reset else None
    on_device = peak is not None and held_before is not None
    return {"run_peak_bytes": peak - held_before if on_device else host,
            "peak_source": "device" if on_device else "host", "host_run_peak_bytes": host,
            "vmhwm_bytes": hwm, "vmhwm_before_run_bytes": unreset,
            "rss_before_run_bytes": rss_before, "reset_ok": reset, "pid": os.getpid(),
            "device": str(device.platform), "device_peak_bytes": peak,
            **memory_fields(compiled)}


_CHILD = r"""
import json, sys
sys.path[:0] = [sys.argv[1], *json.loads(sys.argv[3])]  # the course, the parent's JAX
from coursekit.instructor import peak_memory
spec = json.loads(sys.argv[2])
fn, args = peak_memory.load_factory(spec["factory"])(**spec["kwargs"])
print("RESULT " + json.dumps(peak_memory.measure_here(fn, args)))
"""


def fresh_process_peak(factory: str, kwargs: dict, *, timeout: float = 300,
                       env: dict | None = None) -> dict:
    """One fresh process measuring ``factory(**kwargs)`` (see ``measure_here``), started
    clean (``coursekit.measure.children``), with ``env`` on top of this environment."""
    spec = json.dumps({"factory": factory, "kwargs": kwargs})
    # started clean (python -I, a folder of its own): the caller's working folder may be
    # one a submission wrote, and python -c would import from it first
    done = run_clean(["-c", _CHILD, str(COURSE_ROOT), spec, json.dumps(import_path())],
                     timeout=timeout, env=env)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"peak-memory child for {factory} failed "
                           f"(exit {done.returncode}): {done.stderr[-800:]}")
    return json.loads(lines[-1][len("RESULT "):])


def fresh_process_peaks(variants: dict[str, tuple[str, dict]], *, repeats: int = 3,
                        timeout: float = 300, workers: int | None = None,
                        env: dict | None = None, one_at_a_time: bool = False
                        ) -> dict[str, dict]:
    """Every variant ``repeats`` times, one fresh process each, started interleaved
    (variant A, B, ... then again), at most ``workers`` at a time (default: the cores this
    process may use; each process's high-water mark is its own, so running them side by
    side changes the time, not the figures). Per variant: the list fields
    ``run_peak_bytes``, ``vmhwm_bytes``, ``rss_before_run_bytes``, ``pids``; the plan's
    fields and ``device_peak_bytes`` from the first repeat (the plan is the same program
    each time); ``spread_bytes`` (max - min of the run-only peaks) and
    ``median_run_peak_bytes``. ``env``: variables for the children (a checker's children
    on the chip get the learner's platforms back); ``one_at_a_time`` for children on an
    accelerator, which admits one process at a time."""
    from concurrent.futures import ThreadPoolExecutor
    order = [(name, spec) for _ in range(repeats) for name, spec in variants.items()]
    workers = 1 if one_at_a_time else (workers or len(os.sched_getaffinity(0)))
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [(name, pool.submit(fresh_process_peak, factory, kwargs, timeout=timeout,
                                      env=env))
                   for name, (factory, kwargs) in order]
        runs: dict[str, list] = {name: [] for name in variants}
        for name, future in futures:
            runs[name].append(future.result())
    return {name: summarise(got) for name, got in runs.items()}


def summarise(runs: list[dict]) -> dict:
    """Repeated ``measure_here`` results of one variant as one record."""
    import statistics
    peaks = [r["run_peak_bytes"] for r in runs]
    first = runs[0]
    known = [p for p in peaks if p is not None]
    return {"run_peak_bytes": peaks, "peak_source": first.get("peak_source", "host"),
            "vmhwm_bytes": [r["vmhwm_bytes"] for r in runs],
            "rss_before_run_bytes": [r["rss_before_run_bytes"] for r in runs],
            "pids": [r["pid"] for r in runs], "repeats": len(runs),
            "median_run_peak_bytes": int(statistics.median(known)) if known else None,
            "spread_bytes": (max(known) - min(known)) if known else None,
            "device": first["device"], "device_peak_bytes": first["device_peak_bytes"],
            **{f: first[f] for f in MEMORY_FIELDS}}


# ---------------------------------------------------------------------------------------
# Reference workloads (factories): the course's residual blocks and tanh chain
# ---------------------------------------------------------------------------------------

def _policy(policy):
    import jax
    return None if policy in (None, "none") else getattr(jax.checkpoint_policies, policy)


def blocks_loss(params, x, policy=None):
    """Mean square of ``x + gelu(x @ w1) @ w2`` blocks, each in ``jax.checkpoint`` with
    ``policy`` (None: no remat)."""
    import jax
    import jax.numpy as jnp

    def block(p, h):
        return h + jax.nn.gelu(h @ p["w1"]) @ p["w2"]
    step = block if _policy(policy) is None else jax.checkpoint(block, policy=_policy(policy))
    for p in params:
        x = step(p, x)
    return jnp.mean(x ** 2)


def tanh_chain_loss(ws, x, policy=None):
    """Mean square of a ``tanh(x @ w)`` chain, each layer in ``jax.checkpoint``."""
    import jax
    import jax.numpy as jnp

    def layer(w, h):
        return jnp.tanh(h @ w)
    step = layer if _policy(policy) is None else jax.checkpoint(layer, policy=_policy(policy))
    for w in ws:
        x = step(w, x)
    return jnp.mean(x ** 2)


def blocks_inputs(depth: int, width: int, hidden: int, batch: int, seed: int = 0):
    """Normal float32 weights (scaled by fan-in) and input, drawn by NumPy: a peak depends
    on the shapes alone, and jax.random would compile a program per shape first (1.1 of a
    fresh process's 3.1 s here)."""
    import math

    import jax.numpy as jnp
    import numpy as np
    rng = np.random.default_rng(seed)

    def normal(*shape: int, scale: float = 1.0):
        return jnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32))
    params = [{"w1": normal(width, hidden, scale=1 / math.sqrt(width)),
               "w2": normal(hidden, width, scale=1 / math.sqrt(hidden))}
              for _ in range(depth)]
    return params, normal(batch, width)


def blocks_call(depth: int, width: int, hidden: int, batch: int, policy=None, seed: int = 0):
    """Factory: ``value_and_grad`` of ``blocks_loss`` and its inputs."""
    import jax
    params, x = blocks_inputs(depth, width, hidden, batch, seed)
    return (lambda p, v: jax.value_and_grad(blocks_loss)(p, v, policy)), (params, x)


def blocks_factory() -> str:
    return f"{Path(__file__).resolve()}:blocks_call"


def model_residuals(model: str, dims: list, dtype: str, policy=None) -> dict:
    """The residual counts (``performance_audit.residual_counts``) of the course's model
    ``model`` ("blocks": dims = depth, width, hidden, batch; "tanh": depth, n, batch) in
    ``dtype`` under ``policy``: numbers a learner's copy keeps for its public inputs
    (a residual count depends on the shapes, the dtype and the policy alone)."""
    import jax.numpy as jnp

    from coursekit.instructor import performance_audit
    kind = jnp.dtype(dtype)
    if model == "blocks":
        depth, width, hidden, batch = dims
        params = [{"w1": jnp.full((width, hidden), 0.01, kind),
                   "w2": jnp.full((hidden, width), 0.01, kind)} for _ in range(depth)]
        args, loss = (params, jnp.ones((batch, width), kind)), blocks_loss
    else:
        depth, n, batch = dims
        args = ([jnp.full((n, n), 0.01, kind) for _ in range(depth)],
                jnp.ones((batch, n), kind))
        loss = tanh_chain_loss
    return performance_audit.residual_counts(lambda p, v: loss(p, v, policy), *args)

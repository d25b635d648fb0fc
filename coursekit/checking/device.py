"""Where the learner's code computes, as a check sees it: the backend and device of the
learner process, which holds the accelerator when the machine has one (the checker's own
process is pinned to the CPU: ``coursekit.protocol.pin_checker_to_cpu``).

A check that compares with "the backend that ran" asks here, never ``jax.default_backend()``
of its own process (always the CPU). The answer is the learner process's own
(``coursekit.measure.environment.device_facts``, run there as the inspector
``course/device``): a label for figures and the choice of how a check measures, never a
verdict on its own.

On an accelerator the checker's own timings of a workload run where the chip is, in the
learner process (``time_on_device``): one process at a time can hold a TPU, and a
reference timed on the CPU says nothing about the chip. Those times are measured by
course code there and bounded by the wall time this process measures around the request
(no harness can time more than elapsed).
"""

from __future__ import annotations

import os
import time

from coursekit import protocol
from coursekit.checking import bridge
from coursekit.checking.errors import CheckFailed

DEVICE_INSPECTOR = "course/device"


def learner_may_hold_accelerator(environ=os.environ) -> bool:
    """Whether a learner process of this checker opens an accelerator: the machine shows
    one and the user's platforms do not keep JAX on the CPU. Static (no process asked): for
    what a checker decides before it calls anything, such as a rounding budget. A checker
    that pins its learner process to the CPU (sharded-training's 8 CPU devices) asks
    ``learner_backend`` instead."""
    return protocol.learner_environment(environ).get(protocol.ENV_ACCELERATOR) == "1"


def learner_device(ctx, module=None) -> dict:
    """{backend, device_kind, device_count, jax, label} of the learner process (asked once
    per run). In-process checkers (no learner process) answer for this process."""
    module = ctx.learner if module is None else module

    def ask():
        if getattr(module, "__bridge__", None) is None:
            from coursekit.measure.environment import device_facts
            return device_facts()
        facts = bridge.inspect(module, DEVICE_INSPECTOR)
        if not isinstance(facts, dict) or not isinstance(facts.get("backend"), str):
            raise CheckFailed("the learner process could not say which device it computes "
                              "on", yours=facts)
        return facts
    return ctx.once("learner-device", ask)


def learner_backend(ctx, module=None) -> str:
    """``"cpu"``, ``"tpu"``, ``"gpu"``: the backend the learner's code runs on."""
    return str(learner_device(ctx, module)["backend"])


def on_accelerator(ctx, module=None) -> bool:
    return learner_backend(ctx, module) != "cpu"


def time_on_device(module, workload, *args, iters: int, first: bool = False,
                   keep: str | None = None) -> dict:
    """The checker's own synchronised timing of ``workload`` (a catalog ``Workload``, a
    fresh jitted copy) on ``args``, taken in the learner process, where the chip is:
    {"first_call_s": float or None, "samples_s": [iters floats]} (the first call is timed
    apart when ``first``; warm-up otherwise). ``workload`` may instead be the name a
    copy was kept by (``keep``): that copy, warm, timed again. Raises ``CheckFailed`` when
    the times add up to more than the wall time this process measured around the
    request."""
    started = time.perf_counter()
    if isinstance(workload, str):
        got = bridge.inspect(module, "course/time_kept", workload, *args, iters=int(iters))
    else:
        got = bridge.inspect(module, "course/time_workload", workload, *args,
                             iters=int(iters), first=bool(first), keep=keep)
    wall = time.perf_counter() - started
    samples = [float(s) for s in got.get("samples_s", [])] if isinstance(got, dict) else []
    first_s = got.get("first_call_s") if isinstance(got, dict) else None
    total = sum(samples) + (float(first_s) if first_s else 0.0)
    if len(samples) != iters or not all(s > 0 for s in samples) or total > wall * 1.001:
        raise CheckFailed("the reference timing taken in the learner process does not add "
                          "up", yours=f"{total:.4g} s of samples in {wall:.4g} s of wall time",
                          hint="the learner process reported times it cannot have measured")
    return {"first_call_s": None if first_s is None else float(first_s), "samples_s": samples}


class KeptWork:
    """The checker's own warm copy of a workload, kept in the learner process on the chip
    (``time_on_device(..., keep=...)``): ``samples(*args, iters=...)`` times it again."""

    def __init__(self, module, key: str):
        self.module, self.key = module, key

    def samples(self, *args, iters: int) -> list[float]:
        return time_on_device(self.module, self.key, *args, iters=iters)["samples_s"]


def compile_on_device(module, workload, *args) -> float:
    """Seconds to trace, lower and compile a fresh copy of ``workload`` on the chip (no
    run), bounded by the wall time around the request."""
    started = time.perf_counter()
    seconds = bridge.inspect(module, "course/compile_time", workload, *args)
    wall = time.perf_counter() - started
    if not isinstance(seconds, float) or not 0 < seconds <= wall:
        raise CheckFailed("the compile time taken in the learner process does not fit the "
                          "request", yours=seconds, expected=f"0 < s <= {wall:.4g}",
                          hint="the learner process reported a time it cannot have measured")
    return seconds


def output_on_device(ctx, workload, *args):
    """``workload(*args)`` computed where the learner's code runs (course code in the
    learner process, on the chip), as numpy: the right answer on that device, where a
    CPU's would differ by the device's rounding."""
    import numpy as np
    return np.asarray(bridge.inspect(ctx.learner, "course/output_of", workload, *args))

"""Course code every checker may run in the learner process, on the device it holds.

On an accelerator the learner process is the one process that holds the chip (a TPU
admits one at a time; the checker's process is pinned to the CPU), so the checker's own
measurements of a catalog workload that must be taken on the chip (its synchronised
timing; the compiled program's cost is the instructor's ``remote_course``) run here, as
course code beside the learner's (``coursekit.checking.device``). They are self-reported
in the checkers' sense: each check that uses one says what bounds it (the wall time the
checker measures around the request bounds every time; a compiler count must agree with
the count by hand where one exists). On the CPU the checker measures in its own process as before.
"""

from __future__ import annotations

import time


def device(*_args, **_kwargs) -> dict:
    """Where this process computes (``coursekit.measure.environment.device_facts``)."""
    from coursekit.measure.environment import device_facts
    return device_facts()


# Workloads kept for later rounds of the same check (``keep``): the checker's own warm copy
# on the chip, timed again without another compile.
_KEPT: dict = {}


def time_workload(fn, *args, iters: int, first: bool = False, keep: str | None = None
                  ) -> dict:
    """Synchronised calls of ``fn`` (a catalog workload, resolved here to a fresh jitted
    function) on ``args``: the first call timed apart when ``first`` (trace, compile and
    run), else two untimed warm-up calls; then ``iters`` calls each timed alone. ``keep``:
    a name to time the same compiled copy again by (``time_kept``)."""
    import jax
    if keep:
        _KEPT[str(keep)] = fn
    first_s = None
    if first:
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        first_s = time.perf_counter() - start
    else:
        jax.block_until_ready(fn(*args))
        jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(int(iters)):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return {"first_call_s": first_s, "samples_s": samples}


def time_kept(key: str, *args, iters: int) -> dict:
    """``iters`` more synchronised calls of a kept workload, each timed alone."""
    import jax
    fn = _KEPT[str(key)]
    samples = []
    for _ in range(int(iters)):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return {"first_call_s": None, "samples_s": samples}


def compile_time(fn, *args) -> float:
    """Seconds to trace, lower and compile a fresh copy of ``fn`` for ``args`` (no run)."""
    import jax
    start = time.perf_counter()
    jax.jit(getattr(fn, "fn", fn)).lower(*args).compile()
    return time.perf_counter() - start


def bandwidth_samples(kind: str, nbytes: int, iters: int) -> dict:
    """The course's bandwidth measurement (instructor code: the checker's own, run where
    the chip is) here, on this device."""
    from coursekit.checking.graded import instructor_module
    return instructor_module("bandwidth").measure(kind, int(nbytes), iters=int(iters))


def output_of(fn, *args):
    """``fn(*args)`` here, waited for (a catalog workload's output on this device)."""
    import jax
    import numpy as np
    return np.asarray(jax.block_until_ready(fn(*args)))


INSPECTORS = {
    "course/device": device,
    "course/time_workload": time_workload,
    "course/time_kept": time_kept,
    "course/compile_time": compile_time,
    "course/bandwidth": bandwidth_samples,
    "course/output_of": output_of,
}

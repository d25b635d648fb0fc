"""What optimisation's stage-3 checker runs in the learner process with the calls a
sweep times replaced by stubs of durations the checker sets (``coursekit.workloads.
inspectors``): the learner's ``gain_sweep`` or ``predict_crossover`` then times calls
whose lengths, order and neighbours are known, so what its samples and medians hold can
be compared with what the calls took.

The stubs sleep (no CPU on a shared machine) and record their own start and end on
``time.perf_counter``; they stand in for ``slow_step.train_slow``, the module's
``train_fast`` and ``slow_step.fresh_copy`` (and any name in the module bound to them),
restored after. What they record is self-reported (measured beside the learner's code):
the checker names it so and uses it only against the learner's own figures from the same
call."""

from __future__ import annotations

import time

import numpy as np


def stubbed_calls(target, args: list, *, slow_s: float, fast_s: float, copy_s: float,
                  per_example_s: tuple[float, float] = (0.0, 0.0),
                  outlier_s: float | None = None, outlier_at: int = 1,
                  short_at: int | None = None, short_factor: float = 0.25,
                  kwargs: dict | None = None) -> dict:
    """``target(*args, **kwargs)`` while ``slow_step.train_slow`` sleeps ``slow_s``, the module's
    ``train_fast`` ``fast_s`` (each plus its ``per_example_s``, slow's then fast's, times
    the batch) and ``slow_step.fresh_copy`` ``copy_s`` before copying; with
    ``outlier_s``, the ``outlier_at``-th call (from 0) of each version at each batch
    sleeps that long instead, and with ``short_at`` that call sleeps ``short_factor`` of
    its usual length. The versions return their ``params`` and zero losses (numpy).
    Returns {"result": what target returned, "calls": [version, batch, lr, start, end]
    per call of either version, "copies": [start, end] per copy}, in call order."""
    from coursekit.workloads import slow_step
    module = target.__globals__
    real = {"slow": slow_step.train_slow, "fast": module.get("train_fast"),
            "copy": slow_step.fresh_copy}
    if real["fast"] is None:
        raise NameError("your module defines no train_fast (stage 2)")
    calls: list = []
    copies: list = []
    made: dict = {}

    def version(name: str, base: float, per_example: float):
        def call(params, tokens, targets, lr):
            batch = int(tokens.shape[1])
            seconds = base + per_example * batch
            k = made[(name, batch)] = made.get((name, batch), -1) + 1
            losses = np.zeros((int(tokens.shape[0]),), np.float32)  # nothing to compile
            start = time.perf_counter()
            if outlier_s is not None and k == outlier_at:
                seconds = outlier_s
            elif k == short_at:
                seconds *= short_factor
            time.sleep(seconds)
            calls.append([name, batch, float(lr), start, time.perf_counter()])
            return params, losses
        return call

    def fresh_copy(params):
        start = time.perf_counter()
        time.sleep(copy_s)
        out = real["copy"](params)
        copies.append([start, time.perf_counter()])
        return out
    stubs = {"slow": version("slow", slow_s, per_example_s[0]),
             "fast": version("fast", fast_s, per_example_s[1]),
             "copy": fresh_copy}
    rebound = [(name, key) for name, value in module.items() for key in ("slow", "copy")
               if value is real[key]]
    slow_step.train_slow, slow_step.fresh_copy = stubs["slow"], stubs["copy"]
    for name, key in rebound:  # a learner who imported them by name
        module[name] = stubs[key]
    module["train_fast"] = stubs["fast"]
    try:
        result = target(*args, **(kwargs or {}))
    finally:
        slow_step.train_slow, slow_step.fresh_copy = real["slow"], real["copy"]
        for name, key in rebound:
            module[name] = real[key]
        module["train_fast"] = real["fast"]
    return {"result": result, "calls": calls, "copies": copies}


INSPECTORS = {"optimisation/stubbed_calls": stubbed_calls}

"""A jitted call timed by the learner's own ``time_fn`` (performance-audit stage 1), with
the minor page faults each call paid: notebook 03 validates its roof and places workloads
on the roofline with the learner's timer, not with one of the course's.

    timed = timed_by_yours(impl.time_fn, jax.jit(fn), args, iters)
    timed["median_s"], timed["faults_per_call"], timed["record"]   # the record: time_fn's
    step = threaded(donating_fn, first)      # each call fed the previous call's output

The faults are counted around the whole ``time_fn`` call (``getrusage``: XLA's threads
are in this process) and shared out over its ``1 + warmup + iters`` calls of the same
work: a count per call cannot be read without a wait of the course's own inside your
timed calls. The work is compiled by one call before, so no compile's faults are in it.
"""

from __future__ import annotations

import statistics

import jax

from coursekit.measure.bandwidth import minor_faults


def timed_by_yours(time_fn, fn, args: tuple, iters: int, *, warmup: int = 1) -> dict:
    """``time_fn(fn, *args, warmup=warmup, iters=iters)``, its median sample and the
    minor page faults per call (rounded to a whole fault) over its calls."""
    jax.block_until_ready(fn(*args))  # the compile and the first allocation, uncounted
    before = minor_faults()
    record = time_fn(fn, *args, warmup=warmup, iters=iters)
    faults = minor_faults() - before
    samples = record.get("samples_s") if isinstance(record, dict) else None
    if not samples or len(samples) != iters:
        raise ValueError(f"your time_fn returned {len(samples or [])} samples_s for "
                         f"iters={iters}: its contract asks for one per timed call")
    calls = 1 + warmup + iters
    return {"median_s": float(statistics.median(samples)), "samples_s": list(samples),
            "faults": faults, "calls": calls, "faults_per_call": round(faults / calls),
            "record": record}


def threaded(fn, first):
    """``step(*rest)``: ``fn(first, *rest)``, each call given the previous call's output
    as its first argument, so a function that donates its first argument can be called
    again and again with the same ``rest``."""
    state = {"first": first}

    def step(*rest):
        state["first"] = fn(state["first"], *rest)
        return state["first"]
    return step

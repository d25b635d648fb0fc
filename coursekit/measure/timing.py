"""Reference timing used by checkers, notebooks and benchmarks (not the learner's harness).

Every sample waits for completion inside its own boundary (``jax.block_until_ready``),
the first call (trace + compile + run) is reported apart, and raw samples are kept.
Compile events are counted with ``jax.monitoring`` so a recompilation is seen, not guessed.
"""

from __future__ import annotations

import statistics
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import jax

# jax.monitoring reports one duration event per backend compile with this key.
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"

_lock = threading.Lock()
_counters: list[list[int]] = []
_listener_installed = False


def _on_duration(event: str, duration: float, **_kwargs) -> None:
    if event == COMPILE_EVENT:
        with _lock:
            for counter in _counters:
                counter[0] += 1


@contextmanager
def count_compiles():
    """``with count_compiles() as n: ...`` then ``n[0]`` is the number of XLA compiles."""
    global _listener_installed
    with _lock:
        if not _listener_installed:
            jax.monitoring.register_event_duration_secs_listener(_on_duration)
            _listener_installed = True
        counter = [0]
        _counters.append(counter)
    try:
        yield counter
    finally:
        with _lock:
            # by identity: list.remove compares by value, and a nested counter equal to
            # this one ([1] == [1]) would be removed in its place
            _counters[:] = [c for c in _counters if c is not counter]


@dataclass
class Timing:
    first_call_s: float
    samples_s: list[float] = field(default_factory=list)
    compiles_first_call: int = 0
    compiles_warmed: int = 0
    warmup: int = 0
    sync: str = "block_until_ready"

    @property
    def median_s(self) -> float:
        return statistics.median(self.samples_s)


def time_synced(fn, *args, warmup: int = 2, iters: int = 10) -> Timing:
    """Time ``fn(*args)`` with a sync inside every boundary; compile reported apart."""
    with count_compiles() as first:
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        first_call_s = time.perf_counter() - start
    with count_compiles() as warmed:
        for _ in range(warmup):
            jax.block_until_ready(fn(*args))
        samples = []
        for _ in range(iters):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            samples.append(time.perf_counter() - start)
    return Timing(first_call_s, samples, first[0], warmed[0], warmup)


def bare_loop_overhead(fn, *args, iters: int = 200) -> list[float]:
    """Per-call times of the barest synchronised loop, the floor any harness adds to."""
    jax.block_until_ready(fn(*args))
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return samples

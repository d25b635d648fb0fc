"""The call probe every checker wraps around a workload it hands the learner
(coursekit.checking.probes.CallCounter): which calls' outputs were still being computed
when the next call began. It must never list a call its caller waited for, and must list
the calls of a caller that does not wait on a program far longer than its dispatch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from coursekit.checking.errors import TamperEvidence
from coursekit.checking.probes import CallCounter, all_ready, reported_unready


@pytest.fixture(scope="module")
def slow():
    """A program of tens of milliseconds on 2 CPU cores (its dispatch: microseconds)."""
    x = jnp.ones((1500, 1500), jnp.float32)
    fn = jax.jit(lambda a: jnp.tanh(a @ a) @ a)
    jax.block_until_ready(fn(x))
    return fn, x


def test_a_waiting_caller_is_never_listed(slow):
    fn, x = slow
    probe = CallCounter(fn)
    for _ in range(6):
        jax.block_until_ready(probe(x))
    assert probe.report()["unready_at_next_call"] == []
    assert probe.report()["calls"] == 6


def test_calls_not_waited_for_are_listed(slow):
    fn, x = slow
    probe = CallCounter(fn)
    jax.block_until_ready(probe(x))       # 0: waited for
    for _ in range(3):                    # 1-3: not
        probe(x)
    jax.block_until_ready(probe(x))       # 4: waited for, and the last has no next call
    probe(x)
    jax.block_until_ready(probe(x))
    assert probe.report()["unready_at_next_call"] == [1, 2, 3, 5]


def test_groups_are_apart(slow):
    fn, x = slow
    probe = CallCounter(lambda a, tag: fn(a), group=lambda a, tag: tag)
    probe(x, "a")
    jax.block_until_ready(probe(x, "b"))  # another group's call: "a" 0 has no next yet
    jax.block_until_ready(probe(x, "b"))
    assert probe.report("b")["unready_at_next_call"] == []
    assert probe.report("a")["unready_at_next_call"] == []
    probe(x, "a")                         # now "a" 0 has a next call (it may have finished)
    assert probe.report("a")["calls"] == 2


def test_leaves_that_cannot_say_count_as_ready():
    key = jax.random.key(0)               # a typed key array has no is_ready
    done = jax.block_until_ready(jnp.ones(3))
    deleted = jnp.ones(3) + 1
    deleted.delete()
    assert all_ready({"key": key, "x": done, "gone": deleted, "n": 3})


@pytest.mark.parametrize("facts", [
    {"calls": 3, "unready_at_next_call": "none"},
    {"calls": 3, "unready_at_next_call": [2]},     # the last call has no next call
    {"calls": 3, "unready_at_next_call": [-1]},
    {"calls": 3, "unready_at_next_call": [1.0]},
    {"calls": "3", "unready_at_next_call": []},
])
def test_a_report_that_is_not_call_indices_is_tamper_evidence(facts):
    with pytest.raises(TamperEvidence):
        reported_unready("step", facts)


def test_a_true_report_reads_back():
    assert reported_unready("step", {"calls": 4, "unready_at_next_call": [1, 2]}) == [1, 2]


def test_host_read_probe_tells_a_host_read_from_a_wait():
    """On CPU a host read and block_until_ready take the same time: the probe leaf says
    which sync each call's caller used, whichever way it read (and nothing for a wait)."""
    import numpy as np

    from coursekit.checking.probes import HostReadProbe
    fn = jax.jit(lambda a: a * 2)
    counter = CallCounter(lambda a: (HostReadProbe(np.int32(3)), fn(a)))
    x = jnp.ones((4,), jnp.float32)
    reads = [lambda out: jax.block_until_ready(out),
             lambda out: jax.tree.map(np.asarray, out),
             lambda out: jax.device_get(out),
             lambda out: float(out[0]),
             lambda out: np.asarray(out[1])]  # the device leaf only: the probe unread
    for read in reads:
        read(counter(x))
    report = counter.report()
    assert report["probed_at"] == [0, 1, 2, 3, 4]
    assert report["host_read_at"] == [1, 2, 3]
    plain = CallCounter(fn)
    plain(x)
    assert "host_read_at" not in plain.report()


def watched(fn):
    def call(*args):
        return fn(*args)
    call.watch_ready = True
    return call


def test_a_clock_stopped_after_the_wait_is_never_shorter_than_the_unready_moment(slow):
    import time
    fn, x = slow
    probe = CallCounter(watched(fn))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        jax.block_until_ready(probe(x))
        times.append(time.perf_counter() - start)
    seen = probe.report()["unready_seen_after_s"]
    assert len(seen) == 5 and all(t >= s for t, s in zip(times, seen)), (times, seen)
    assert max(seen) > 0  # the watcher saw an output unfinished after its call returned


def test_a_clock_stopped_before_the_wait_is_shorter_than_the_unready_moment(slow):
    import time
    fn, x = slow
    probe = CallCounter(watched(fn))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        out = probe(x)
        times.append(time.perf_counter() - start)  # the clock stops at the return ...
        jax.block_until_ready(out)                  # ... and the wait comes after it
    seen = probe.report()["unready_seen_after_s"]
    assert probe.report()["unready_at_next_call"] == []  # every call finished in time
    assert sum(t < s for t, s in zip(times, seen)) >= 4, (times, seen)


def test_an_unwatched_function_reports_no_moments(slow):
    fn, x = slow
    probe = CallCounter(fn)
    jax.block_until_ready(probe(x))
    assert "unready_seen_after_s" not in probe.report()

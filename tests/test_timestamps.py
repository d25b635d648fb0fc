"""The one rule that names samples timestamps (coursekit.checking.timestamps, issue 53):
samples read against one start before the loop are named, with the evidence; a correct
timer never is, whatever order load puts its samples in. Real calls through the call
probe (``CallCounter``), timed here the two ways."""

from __future__ import annotations

import math
import statistics
import time

import pytest

from coursekit.checking.errors import CheckFailed, TamperEvidence
from coursekit.checking.probes import CallCounter, reported_call_windows
from coursekit.checking.timestamps import (
    grow_as_timestamps,
    timed_windows,
    timestamps_failed,
)

# A step of 20 ms on a machine that grows busier call by call: each call takes longer
# than the one before (the order 1 in 720 of a right timer's six samples falls in).
STEP_S = 0.02
LOAD = (1.0, 1.4, 1.8, 2.3, 2.9, 3.6)


def run(from_one_start: bool) -> tuple[list, list, float, float]:
    """A first call, one warm-up, then one timed call per LOAD factor, each timed by its
    own clock or (``from_one_start``) against one start before the loop. The samples,
    the probe's windows of the timed calls, the whole run's wall time and the checker's
    median of the unloaded step."""
    probe = CallCounter(lambda load: time.sleep(STEP_S * load))
    began = time.perf_counter()
    probe(1.0)
    probe(1.0)
    samples, start = [], time.perf_counter()
    for load in LOAD:
        if not from_one_start:
            start = time.perf_counter()
        probe(load)
        samples.append(time.perf_counter() - start)
    wall = time.perf_counter() - began
    reference = []
    for _ in range(4):
        t = time.perf_counter()
        time.sleep(STEP_S)
        reference.append(time.perf_counter() - t)
    least, most = timed_windows(reported_call_windows("step", probe.report()), 2, len(LOAD))
    return samples, list(zip(least, most)), wall, statistics.median(reference)


def replaced_rule(samples: list, reference_s: float, fastest_s: float) -> bool:
    """sharded-training stage 4's second branch before this rule: every rise at least a
    sixth of the checker's fastest step, the last sample at least twice its median."""
    rises = [b - a for a, b in zip(samples, samples[1:])]
    return min(rises) >= fastest_s / 6 and samples[-1] >= 2 * reference_s


def test_a_right_timer_under_rising_load_is_never_named():
    samples, windows, wall, reference = run(from_one_start=False)
    assert all(lo <= s <= hi for s, (lo, hi) in zip(samples, windows))
    # the case: samples that rise at every call, the last over 3x the median, which the
    # replaced rule named timestamps (and failed) though each is its own call's duration
    assert replaced_rule(samples, reference, reference)
    least, most = [lo for lo, _ in windows], [hi for _, hi in windows]
    assert grow_as_timestamps(samples, least, most, wall_s=wall) is None
    assert grow_as_timestamps(samples, wall_s=wall) is None  # no windows: the wall alone


def test_samples_from_one_start_are_named_with_their_evidence():
    samples, windows, wall, _ = run(from_one_start=True)
    least, most = [lo for lo, _ in windows], [hi for _, hi in windows]
    found = grow_as_timestamps(samples, least, most, wall_s=wall)
    assert found is not None and "longer than" in found.beyond
    assert len(found.rises) == len(samples) - 1
    err = timestamps_failed(found, "time_fn")
    assert isinstance(err, CheckFailed) and "a timestamp, cumulative" in err.hint


def test_only_a_certain_contradiction_names_them():
    rising = [0.01, 0.02, 0.03, 0.04]
    assert grow_as_timestamps(rising, wall_s=1.0) is None        # durations could be so
    found = grow_as_timestamps(rising, wall_s=0.05, other_s=0.01)  # 0.11 s in 0.05 s
    assert found is not None and "add up to" in found.beyond
    # each rise less than its own call: not one sample holding the one before it
    assert grow_as_timestamps(rising, [0.015] * 4, [0.015] * 4) is None
    assert grow_as_timestamps(rising, [0.009] * 4, [0.015] * 4) is not None
    # too few, or not all rising, or not numbers
    assert grow_as_timestamps(rising[:2], wall_s=0.0) is None
    assert grow_as_timestamps([0.01, 0.03, 0.02, 0.04], wall_s=0.0) is None
    assert grow_as_timestamps([0.01, math.nan, 0.03], wall_s=0.0) is None
    with pytest.raises(ValueError):
        grow_as_timestamps(rising, [0.0] * 3)


def test_call_windows_out_of_order_are_tamper_evidence():
    facts = {"calls": 2, "began_at": [2.0, 1.0], "returned_at": [2.5, 1.5]}
    with pytest.raises(TamperEvidence):
        reported_call_windows("step", facts)
    facts = {"calls": 3, "began_at": [1.0, 2.0, 3.0], "returned_at": [1.5, 2.5, 3.5]}
    assert reported_call_windows("step", facts) == [(0.5, math.inf), (0.5, 1.5),
                                                    (0.5, math.inf)]

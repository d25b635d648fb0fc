"""The shared timing verdict (coursekit.measure.verdict): it decides quickly when the
machine is quiet, keeps measuring while the interval straddles the window, and says
"inconclusive" rather than guess. Over many simulated runs a correct ratio never FAILs
however noisy the rounds, and a timing bug (a timer that does not wait) never PASSes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coursekit.measure.verdict import classify, interval_of, measure_ratio, simulate_rounds


def run(seed: int, true_ratio: float, noise: float, **kw):
    rng = np.random.default_rng(seed)
    yours, ref = simulate_rounds(rng, true_ratio, noise)
    return measure_ratio(yours, ref, 1 / 5, 5, budget_s=math.inf, **kw)


def test_a_quiet_machine_decides_in_the_fewest_rounds():
    ev = run(0, 1.0, 0.02)
    assert ev.verdict == "pass" and ev.stopped_by == "decided" and len(ev.ratios) == 3
    ev = run(0, 0.004, 0.02)
    assert ev.verdict == "fail" and len(ev.ratios) == 3
    assert "outside 0.2x-5x in 3 of 3 rounds" in ev.summary()


@pytest.mark.parametrize("noise", [0.05, 0.3, 0.8, 1.5])
def test_a_correct_ratio_never_fails_and_a_bug_never_passes(noise):
    verdicts = {"right": set(), "bug": set()}
    for seed in range(150):
        verdicts["right"].add(run(seed, 1.0, noise).verdict)
        verdicts["bug"].add(run(1000 + seed, 0.004, noise).verdict)
    assert "fail" not in verdicts["right"], noise
    assert "pass" not in verdicts["bug"], noise


def test_noise_makes_it_measure_longer_then_say_inconclusive():
    quiet, loud = run(3, 1.0, 0.02), run(3, 1.0, 3.0, max_rounds=6)
    assert len(loud.ratios) > len(quiet.ratios)
    assert loud.verdict == "inconclusive" and loud.stopped_by == "rounds"
    assert "rounds in" in loud.conditions()


def test_the_budget_stops_it():
    ticks = iter(range(1000))
    rng = np.random.default_rng(1)
    yours, ref = simulate_rounds(rng, 1.0, 3.0)
    ev = measure_ratio(yours, ref, 0.2, 5, budget_s=4, max_rounds=100,
                       clock=lambda: next(ticks))
    assert ev.verdict == "inconclusive" and ev.stopped_by == "budget"


def test_one_sided_windows_and_the_edges():
    assert classify((1.2, 3.0), 1.1, math.inf) == "pass"
    assert classify((0.5, 1.05), 1.1, math.inf) == "fail"
    assert classify((1.0, 1.2), 1.1, math.inf) is None
    assert classify((0.1, 0.3), 0.0, 0.5) == "pass"
    assert classify(None, 0.2, 5) is None
    assert interval_of([0.1], 0.95) is None
    lo, hi = interval_of([0.0, 0.0, 0.0], 0.95)
    assert lo == hi == 1.0


# interval_of as it was written by hand before issue 50 (mean -+ t * s / sqrt(n), then
# exp), and what it gave: scipy's interval must give the same figures.
OLD_FIGURES = [
    ([0.1, 0.2, 0.05], 0.95, (0.9295427457204026, 1.358519927252103)),
    ([-0.3, 0.1, 0.0, 0.25], 0.99, (0.5138157924403646, 1.9954916443005801)),
    ([0.01, 0.02], 0.95, (0.9526277848270053, 1.0816969128615588)),
    ([0.5, 0.4, 0.45, 0.6, 0.55, 0.35], 1 - 0.05 / 10, (1.34006087853097, 1.9295464114663265)),
]


@pytest.mark.parametrize(("log_ratios", "confidence", "old"), OLD_FIGURES)
def test_scipys_interval_gives_the_old_figures(log_ratios, confidence, old):
    assert interval_of(log_ratios, confidence) == pytest.approx(old, rel=1e-12)


def test_scipys_interval_equals_the_hand_written_one_on_random_rounds():
    from scipy import stats
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(2, 30))
        d = rng.normal(rng.normal(0, 1), rng.uniform(0.01, 2), n)
        confidence = float(rng.uniform(0.5, 0.999))
        half = stats.t.ppf(0.5 + confidence / 2, n - 1) * np.std(d, ddof=1) / math.sqrt(n)
        old = (math.exp(d.mean() - half), math.exp(d.mean() + half))
        assert interval_of(list(d), confidence) == pytest.approx(old, rel=1e-9)


def test_a_confidence_outside_0_1_is_refused():
    with pytest.raises(ValueError, match="confidence"):
        interval_of([0.1, 0.2], 1.0)


def test_the_order_alternates_and_the_first_round_counts():
    calls = []
    def yours(i):
        calls.append(("yours", i))
        return 0.01
    def ref(i):
        calls.append(("ref", i))
        return 0.01
    ev = measure_ratio(yours, ref, 0.2, 5, first=(0.01, 0.01), min_rounds=3)
    assert ev.verdict == "pass" and len(ev.ratios) == 3
    assert calls == [("ref", 1), ("yours", 1), ("yours", 2), ("ref", 2)]


def test_bad_times_are_refused():
    with pytest.raises(ValueError):
        measure_ratio(lambda i: 0.0, lambda i: 1.0, 0.2, 5)
    with pytest.raises(ValueError):
        measure_ratio(lambda i: 1.0, lambda i: 1.0, 5, 0.2)


def test_the_budget_holds_before_the_minimum_rounds():
    ticks = iter(range(0, 1000, 10))  # every reading 10 s later: one round overruns
    rng = np.random.default_rng(2)
    yours, ref = simulate_rounds(rng, 1.0, 0.01)
    ev = measure_ratio(yours, ref, 0.2, 5, budget_s=5, clock=lambda: next(ticks))
    assert ev.verdict == "inconclusive" and ev.stopped_by == "budget"
    assert len(ev.ratios) == 1

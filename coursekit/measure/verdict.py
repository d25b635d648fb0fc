"""Timing verdicts that know their own noise: measure in interleaved rounds until the
verdict is clear, or say it is not.

A timing check asks whether a ratio (the learner's figure over the checker's own
measurement of the same thing) lies inside a window the physics allows, ``[lo, hi]``. A
fixed number of repeats decides least exactly when the machine is busiest: under load one
call of the same function ranged from 2.4 to 80 ms here. So a check measures a round at a
time, each round one learner figure and one checker figure taken back to back (the order
alternates, so neither side always gets the warmer cache), and after each round forms a
Student-t interval for the mean log ratio over the rounds so far (paired: drift common to
a round cancels). Then:

    pass          the whole interval lies inside the window
    fail          the whole interval lies outside it
    inconclusive  neither, when the rounds or the time budget run out

Every look at the data spends part of the error rate: each look uses confidence
``1 - (1 - confidence) / max_rounds`` (Bonferroni over the looks), so stopping as soon as
the interval clears does not inflate the chance of a wrong FAIL. The evidence keeps every
round's raw figures, the spread of the checker's own rounds (how noisy the machine was,
measured, not assumed) and the load it ran under.

Stdlib, numpy and scipy only (no JAX), so checkers, benchmarks and tests all use it; the
checking layer turns an evidence object into PASS, FAIL or INCONCLUSIVE
(``coursekit.checking.probes.ratio_verdict``).
"""

from __future__ import annotations

import math
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

VERDICTS = ("pass", "fail", "inconclusive")


# Below this 1-minute load per core the machine is not what made rounds spread.
QUIET_LOAD_PER_CORE = 0.5


def machine_load() -> dict:
    """The 1-minute load average per core (1.0: every core busy) from /proc/loadavg."""
    try:
        one = os.getloadavg()[0]
    except OSError:
        return {"load_per_core": None, "cores": os.cpu_count()}
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)
    return {"load_per_core": round(one / max(cores, 1), 2), "cores": cores}


@dataclass
class RatioEvidence:
    """What a ratio verdict rests on (all seconds raw, as measured)."""

    verdict: str
    lo: float
    hi: float
    confidence: float
    yours_s: list[float] = field(default_factory=list)
    reference_s: list[float] = field(default_factory=list)
    interval: tuple[float, float] | None = None
    elapsed_s: float = 0.0
    cpu_fraction: float | None = None  # this process's CPU s per wall s during the rounds
    stopped_by: str = ""  # "decided", "rounds", "budget"
    load: dict = field(default_factory=dict)

    @property
    def ratios(self) -> list[float]:
        return [y / r for y, r in zip(self.yours_s, self.reference_s, strict=True)]

    @property
    def ratio(self) -> float:
        """Geometric mean of the per-round ratios."""
        return float(math.exp(np.mean(np.log(self.ratios)))) if self.ratios else math.nan

    @property
    def outside(self) -> int:
        """Rounds whose own ratio lies outside the window."""
        return sum(not self.lo <= r <= self.hi for r in self.ratios)

    @property
    def reference_spread(self) -> float:
        """Slowest over fastest of the checker's own rounds (1.0: no noise seen)."""
        ref = self.reference_s
        return max(ref) / min(ref) if ref and min(ref) > 0 else math.nan

    def window_text(self) -> str:
        if math.isinf(self.hi):
            return f"at least {self.lo:.3g}x"
        if self.lo <= 0:
            return f"at most {self.hi:.3g}x"
        return f"{self.lo:.3g}x-{self.hi:.3g}x"

    def interval_text(self) -> str:
        if self.interval is None:
            return "no interval (fewer than 2 rounds)"
        a, b = self.interval
        return f"[{a:.3g}x, {b:.3g}x]"

    def summary(self) -> str:
        """One sentence of evidence: the ratio, in how many rounds it fell outside the
        window, and how much the checker's own rounds spread."""
        n = len(self.ratios)
        return (f"{self.ratio:.3g}x (geometric mean of {n} interleaved round"
                f"{'s' if n != 1 else ''}; interval {self.interval_text()}); "
                f"outside {self.window_text()} in {self.outside} of {n} rounds, while the "
                f"checker's own rounds spread by {self.reference_spread:.2f}x")

    def conditions(self) -> str:
        """The conditions it was measured under, for an inconclusive verdict."""
        load = self.load.get("load_per_core")
        cpu = self.cpu_fraction
        n = len(self.ratios)
        parts = [f"{n} round{'s' if n != 1 else ''} in {self.elapsed_s:.1f} s"]
        if load is not None:
            parts.append(f"load {load:.2f} per core over {self.load.get('cores')} cores")
        if cpu is not None:
            parts.append(f"the checker got {cpu:.0%} of a core per wall second")
        return ", ".join(parts)

    def noise_hint(self) -> str:
        """What an undecided verdict's evidence shows: a busy machine, or (on a quiet
        one) rounds that spread by themselves, which waiting for quiet would not change
        (a chip's short calls did: load 0.00 per core, the checker's rounds 7.24x apart)."""
        load = self.load.get("load_per_core")
        if load is not None and load < QUIET_LOAD_PER_CORE:
            return (f"nothing here points at your code: the machine was quiet (load "
                    f"{load:.2f} per core) and the checker's own rounds still spread by "
                    f"{self.reference_spread:.2f}x, so the timed calls vary by themselves "
                    "on this device; a second run may draw calmer rounds, and a terminal "
                    "run of the check decides it the same way")
        return "nothing here points at your code: rerun when the machine is quieter"

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "window": [self.lo, self.hi],
                "confidence": self.confidence, "ratio": self.ratio,
                "interval": list(self.interval) if self.interval else None,
                "yours_s": self.yours_s, "reference_s": self.reference_s,
                "reference_spread": self.reference_spread, "outside": self.outside,
                "elapsed_s": self.elapsed_s, "cpu_fraction": self.cpu_fraction,
                "stopped_by": self.stopped_by, "load": self.load}


def interval_of(log_ratios: list[float], confidence: float) -> tuple[float, float] | None:
    """scipy's one-sample t interval of the mean log ratio
    (``scipy.stats.ttest_1samp(...).confidence_interval``), exponentiated; None below 2
    rounds."""
    from scipy import stats  # imported where used, as decision.t_quantile does
    if len(log_ratios) < 2:
        return None
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    with warnings.catch_warnings():
        # identical rounds (a zero spread) are a valid, zero-width interval: scipy warns
        # of precision loss there and still answers
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = stats.ttest_1samp(np.asarray(log_ratios, dtype=float), 0.0
                                      ).confidence_interval(confidence)
    return math.exp(float(low)), math.exp(float(high))


def classify(interval: tuple[float, float] | None, lo: float, hi: float) -> str | None:
    """"pass" inside, "fail" outside, None while the interval straddles an edge."""
    if interval is None:
        return None
    a, b = interval
    if lo <= a and b <= hi:
        return "pass"
    if b < lo or a > hi:
        return "fail"
    return None


def measure_ratio(yours: Callable[[int], float], reference: Callable[[int], float],
                  lo: float, hi: float, *, confidence: float = 0.95, min_rounds: int = 3,
                  max_rounds: int = 12, budget_s: float = 30.0,
                  first: tuple[float, float] | None = None,
                  clock: Callable[[], float] = time.monotonic) -> RatioEvidence:
    """Interleaved rounds of ``yours(i)`` and ``reference(i)`` (each returns seconds, or
    any positive time per unit of work, for round ``i``) until the ratio yours/reference
    is clearly inside ``[lo, hi]`` (``hi`` may be ``math.inf``), clearly outside, or
    ``max_rounds`` / ``budget_s`` run out. ``first``: a round already measured (its
    figures count as round 0). Never raises for a verdict; returns the evidence."""
    if not 0 <= lo < hi:
        raise ValueError(f"the window must satisfy 0 <= lo < hi, got [{lo}, {hi}]")
    min_rounds = max(2, min_rounds)
    per_look = 1 - (1 - confidence) / max(1, max_rounds - min_rounds + 1)
    ev = RatioEvidence("inconclusive", lo, hi, confidence, load=machine_load())
    started, cpu0 = clock(), time.process_time()
    if first is not None:
        ev.yours_s.append(float(first[0]))
        ev.reference_s.append(float(first[1]))
    while True:
        i = len(ev.yours_s)
        if i < min_rounds and i >= 1 and clock() - started >= budget_s:
            # the budget holds before the minimum too: a check under heavy load ends on
            # time, undecided, rather than finishing rounds it cannot afford
            ev.interval = interval_of([math.log(r) for r in ev.ratios], per_look)
            ev.stopped_by = "budget"
            break
        if i >= min_rounds:
            ev.interval = interval_of([math.log(r) for r in ev.ratios], per_look)
            decided = classify(ev.interval, lo, hi)
            if decided:
                ev.verdict, ev.stopped_by = decided, "decided"
                break
            if i >= max_rounds:
                ev.stopped_by = "rounds"
                break
            if clock() - started >= budget_s:
                ev.stopped_by = "budget"
                break
        pair = (yours, reference) if i % 2 == 0 else (reference, yours)
        a = float(pair[0](i))
        b = float(pair[1](i))
        y, r = (a, b) if i % 2 == 0 else (b, a)
        if not (y > 0 and r > 0 and math.isfinite(y) and math.isfinite(r)):
            raise ValueError(f"round {i}: times must be positive seconds, got {y!r}, {r!r}")
        ev.yours_s.append(y)
        ev.reference_s.append(r)
    ev.elapsed_s = clock() - started
    if ev.elapsed_s > 0.05:  # a share of a core over a few ms says nothing
        ev.cpu_fraction = round((time.process_time() - cpu0) / ev.elapsed_s, 2)
    ev.load = machine_load()
    return ev


def simulate_rounds(rng: np.random.Generator, true_ratio: float, noise: float,
                    reference_s: float = 0.01) -> tuple[Callable, Callable]:
    """Two round functions whose ratio is ``true_ratio`` times log-normal noise of
    ``noise`` (sigma, in log space) on each side, with drift shared by both sides of a
    round (tests and benchmarks)."""
    drift = {}

    def load(i: int) -> float:
        return drift.setdefault(i, float(np.exp(rng.normal(0, 3 * noise))))

    def yours(i: int) -> float:
        return reference_s * true_ratio * load(i) * float(np.exp(rng.normal(0, noise)))

    def reference(i: int) -> float:
        return reference_s * load(i) * float(np.exp(rng.normal(0, noise)))

    return yours, reference

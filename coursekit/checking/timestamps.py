"""Samples that are timestamps, not durations (issue 53): a learner who reads the clock
once before the timed loop reports, for each call, the time since that start. Such
samples grow with the call index, each holding the one before it and its own call; an
honest slip, named as such by every checker that times calls (never tampering, and
never a correct timer).

The rule lives here once (``grow_as_timestamps``); each checker gives, per sample, what
it measured around that call, and keeps its own wording of the FAIL if it must
(``timestamps_failed`` is the common one). Conservative: samples are named timestamps
only when they already contradict durations for certain (one is longer than its call's
window, or together they add up to more than the whole call took: durations of calls
made one after another cannot overlap), so a correct timer, whose every sample lies
inside its call's window, is never named, whatever the load and whatever the order its
samples happen to fall in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from coursekit.checking.errors import CheckFailed
from coursekit.checking.probes import CLOCK_SLACK_FRACTION, CLOCK_SLACK_S, beyond_wall

# Two samples that rise are any two calls in one order of two; three that each hold the
# one before it are evidence.
MIN_SAMPLES = 3

HINT = ("each sample is the time since one start before the first timed call (a "
        "timestamp, cumulative), where each call's own duration is asked")


@dataclass(frozen=True)
class Timestamps:
    """The evidence: the samples, how much each rose over the one before, and what they
    cannot be as durations (``beyond``, a sentence)."""
    samples: tuple[float, ...]
    rises: tuple[float, ...]
    beyond: str


def grow_as_timestamps(samples, least=None, most=None, *, wall_s: float | None = None,
                       other_s: float = 0.0) -> Timestamps | None:
    """Whether ``samples`` (seconds, in call order) grow as timestamps do: at least
    ``MIN_SAMPLES``, each longer than the one before by at least its own call
    (``least[k]``, a lower bound of call k's own duration measured by the checker; 0
    when it has none), and contradicting durations for certain: a sample longer than
    its call's window (``most[k]``, from the previous call's return to the next call's
    entry), or the samples and ``other_s`` (the record's other times) adding up to more
    than ``wall_s``, the whole call's time. The evidence, or None."""
    n = len(samples) if isinstance(samples, list | tuple) else 0
    if n < MIN_SAMPLES or not all(type(v) in (int, float) and math.isfinite(v) and v > 0
                                  for v in samples):
        return None
    least = [0.0] * n if least is None else list(least)
    most = [math.inf] * n if most is None else list(most)
    if len(least) != n or len(most) != n:
        raise ValueError(f"{n} samples, {len(least)} lower and {len(most)} upper bounds")
    rises = [b - a for a, b in zip(samples, samples[1:])]
    if not all(r > 0 and r >= low * (1 - CLOCK_SLACK_FRACTION) - CLOCK_SLACK_S
               for r, low in zip(rises, least[1:])):
        return None
    past = [k for k, (v, high) in enumerate(zip(samples, most))
            if v > high * (1 + CLOCK_SLACK_FRACTION) + CLOCK_SLACK_S]
    total = sum(samples) + other_s
    if past:
        k = max(past, key=lambda k: samples[k] / most[k])  # the plainest of the evidence
        beyond = (f"samples_s[{k}] ({samples[k] * 1e3:.4g} ms) is longer than the "
                  f"{most[k] * 1e3:.4g} ms from the previous call's return to the next "
                  "call's start, measured by the checker")
    elif wall_s is not None and beyond_wall(total, wall_s):
        beyond = (f"your times add up to {total:.4g} s, more than the {wall_s:.4g} s the "
                  "whole call took (measured by the checker): durations of calls made one "
                  "after another cannot overlap")
    else:
        return None
    return Timestamps(tuple(float(v) for v in samples), tuple(rises), beyond)


def timestamps_failed(found: Timestamps, what: str) -> CheckFailed:
    """The common FAIL for samples that are timestamps: what they show, and the hint."""
    shown = ", ".join(f"{v * 1e3:.4g}" for v in found.samples[:4]) + \
        (", ..." if len(found.samples) > 4 else "")
    return CheckFailed(
        f"{what}: your samples grow with the call index ({shown} ms), each holding "
        f"the one before it and its own call; {found.beyond}",
        yours=f"samples_s rising from {found.samples[0] * 1e3:.4g} to "
        f"{found.samples[-1] * 1e3:.4g} ms over {len(found.samples)} calls",
        expected="each sample its own call's duration", hint=HINT)


def timed_windows(windows: list, first: int, count: int) -> tuple[list, list]:
    """(least, most) for ``count`` samples of the calls from ``first`` on, from
    ``reported_call_windows``; calls the probe did not see get no bound."""
    picked = [windows[k] if 0 <= k < len(windows) else (0.0, math.inf)
              for k in range(first, first + count)]
    return [lo for lo, _ in picked], [hi for _, hi in picked]

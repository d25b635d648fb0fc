"""Probes the checkers share: what a check wraps around the learner's code, or asks of
what it returns, to measure it independently.

- ``CallCounter`` wraps a function the learner is asked to time and records how often it
  was called, which calls compiled, and which calls' outputs were still being computed
  when the next call began (a timing that ended before its call finished); for a function
  marked ``watch_ready``, also how long after each call began its output was last seen
  unfinished (a clock stopped before that, and waited on after, ended too soon); and
  each call's entry and return (``reported_call_windows``: the window a timing of that
  call lies in, which ``coursekit.checking.timestamps`` reads). It reports plain data
  (``report()``), so the same facts can come back from another process as a
  self-reported fact to cross-check.
- ``within_ratio`` is the one timing rule: the learner's time must lie within a factor
  ``window`` either way of the checker's own synchronised measurement of the same thing.
  Each project states its window with the physics behind it (how far off a missing sync
  reads on its workload, against how far load on a shared machine moves a median).
- ``HostReadProbe`` is an output leaf a workload returns to learn whether the caller
  read it to the host (``np.asarray``, ``float``, ``.item()``, ``jax.device_get``) or
  only waited on it (``block_until_ready``): on CPU the two take the same time, so only
  the leaf itself can tell which sync a timing used.
- ``samples_of`` reads a timing record's raw samples, or fails naming what is wrong.
- ``random_name`` / ``region_name``: names drawn per run, so nothing can be hard-coded.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Hashable

from coursekit.checking.errors import CheckFailed, CheckInconclusive, TamperEvidence
from coursekit.checking.values import as_float, fail_unless, short
from coursekit.measure.timing import count_compiles
from coursekit.measure.verdict import RatioEvidence, measure_ratio

NAME_LETTERS = "abcdefghjkmnpqrstuvwxyz"  # no i, l, o: names read unambiguously in a hint


class CallCounter:
    """Wraps ``fn``: counts calls, records which of them compiled (by ``jax.monitoring``
    compile events) and which returned outputs that were not ready yet when the next call
    in the same group began (``is_ready()`` of every array leaf, a query that never
    waits). It never synchronises, so the learner's own sync is what any timing around it
    measures. A call whose output was ready at the next call's start was waited for, or
    finished on its own: the signal is certain for a synchronised caller (never listed)
    and near certain for one that does not wait on a program longer than its dispatch.

    ``group(*args, **kwargs)``, when given, keeps separate counts per group (for example
    per input shape and block size); without it every call is in group ``None``.

    A ``fn`` with a true ``watch_ready`` attribute is also watched after each call: a
    thread polls its output (``is_ready()``, never waiting) until it is ready and records
    the last moment it was seen unfinished, in seconds from the moment the call began
    (``unready_seen_after_s``, 0.0 when never seen unfinished). Readiness only ever goes
    from False to True, so the output was certainly unfinished then: a caller whose clock
    started before the call and stopped after its output was ready reads at least that
    long, whatever the load (a starved watcher sees less, never more)."""

    def __init__(self, fn: Callable, group: Callable[..., Hashable] | None = None):
        self.fn = fn
        self.group = group
        self.watch_ready = bool(getattr(fn, "watch_ready", False))
        self._facts: dict[Hashable, dict] = {}
        self._last_out: dict[Hashable, object] = {}

    def __call__(self, *args, **kwargs):
        key = None if self.group is None else self.group(*args, **kwargs)
        facts = self._facts.setdefault(key, _no_calls())
        if key in self._last_out and not all_ready(self._last_out.pop(key)):
            facts["unready_at_next_call"].append(facts["calls"] - 1)
        began = time.perf_counter()
        with count_compiles() as compiles:
            out = self.fn(*args, **kwargs)
            returned = time.perf_counter()
        facts["began_at"].append(began)
        facts["returned_at"].append(returned)
        if self.watch_ready:
            watch_until_ready(out, began, facts["unready_seen_after_s"])
        if compiles[0]:
            facts["compiled_at"].append(facts["calls"])
            facts["compiles"] += compiles[0]
        probes = host_read_probes(out)
        if probes:
            facts["probes"].append((facts["calls"], probes))
        facts["calls"] += 1
        self._last_out[key] = out
        return out

    def report(self, group: Hashable = None) -> dict:
        """Plain data for one group: ``calls`` (how many), ``compiled_at`` (the 0-based
        indices of the calls that compiled), ``compiles`` (compile events in all) and
        ``unready_at_next_call`` (the indices of the calls whose output was not ready when
        the next call began; the last call has no next one), ``began_at`` and
        ``returned_at`` (each call's entry and return by ``time.perf_counter()``, the
        system's monotonic clock in every process: ``reported_call_windows``); for a
        function whose outputs hold ``HostReadProbe`` leaves, ``host_read_at`` (the calls
        all of whose probes were read to the host by now) and ``probed_at`` (the calls
        that returned one)."""
        facts = self._facts.get(group, _no_calls())
        report = {"calls": facts["calls"], "compiled_at": list(facts["compiled_at"]),
                  "compiles": facts["compiles"],
                  "unready_at_next_call": list(facts["unready_at_next_call"]),
                  "began_at": list(facts["began_at"]),
                  "returned_at": list(facts["returned_at"])}
        if self.watch_ready:
            report["unready_seen_after_s"] = list(facts["unready_seen_after_s"])
        if facts["probes"]:
            report["probed_at"] = [i for i, _ in facts["probes"]]
            report["host_read_at"] = [i for i, probes in facts["probes"]
                                      if all(p.reads for p in probes)]
        return report


def _no_calls() -> dict:
    return {"calls": 0, "compiled_at": [], "compiles": 0, "unready_at_next_call": [],
            "probes": [], "unready_seen_after_s": [], "began_at": [], "returned_at": []}


# How often the watcher looks, and for how long at most (a call never waited for).
WATCH_EVERY_S, WATCH_FOR_S = 5e-4, 120.0


def watch_until_ready(out, began: float, seen: list) -> None:
    """Appends a slot to ``seen`` for this call and keeps in it the last moment (seconds
    after ``began``) ``out`` was seen unfinished: first here, as the call returns, then
    from a daemon thread polling until it is ready. Each moment is read before the
    query, so the output was unfinished at it."""
    index = len(seen)
    seen.append(0.0)
    now = time.perf_counter()
    if all_ready(out):
        return
    seen[index] = now - began

    def poll():
        while True:
            now = time.perf_counter()
            if all_ready(out) or now - began > WATCH_FOR_S:
                return
            seen[index] = now - began
            time.sleep(WATCH_EVERY_S)
    threading.Thread(target=poll, daemon=True, name="course-ready-watch").start()


class HostReadProbe:
    """An output leaf holding a small host value that counts how it was synchronised:
    ``reads`` (converted to a host value: ``np.asarray``, ``float``, ``int``, ``.item()``,
    ``.tolist()``, ``jax.device_get``) and ``blocks`` (``block_until_ready``, which
    returns it unchanged, as for an array)."""

    def __init__(self, value):
        import numpy as np
        self.value, self.reads, self.blocks = np.asarray(value), 0, 0

    def __array__(self, dtype=None, copy=None):
        self.reads += 1
        return self.value if dtype is None else self.value.astype(dtype)

    def __float__(self) -> float:
        self.reads += 1
        return float(self.value)

    def __int__(self) -> int:
        self.reads += 1
        return int(self.value)

    def item(self):
        self.reads += 1
        return self.value.item()

    def tolist(self):
        self.reads += 1
        return self.value.tolist()

    def block_until_ready(self):
        self.blocks += 1
        return self

    def __repr__(self) -> str:
        return f"HostReadProbe({self.value!r})"


def host_read_probes(tree) -> list:
    import jax
    return [leaf for leaf in jax.tree.leaves(tree) if isinstance(leaf, HostReadProbe)]


def all_ready(tree) -> bool:
    """Whether every jax array in ``tree`` holds its value now (without waiting). An
    array that cannot say (deleted, donated, a typed PRNG key without ``is_ready``)
    counts as ready: the probe never fails the learner's call itself. One program's
    outputs become ready together, so the other leaves still tell."""
    import jax
    for leaf in jax.tree.leaves(tree):
        try:
            if isinstance(leaf, jax.Array) and not leaf.is_ready():
                return False
        except Exception:  # noqa: BLE001 - see above
            continue
    return True


def within_ratio(yours_s: float, reference_s: float, window: float, what: str, hint: str,
                 *, against: str = "the checker's synchronised measurement") -> float:
    """``yours_s / reference_s`` (seconds, or any time per unit of work), which must lie in
    ``[1/window, window]``; otherwise a failure naming the ratio, both times and the
    window. ``what`` names the learner's figure ("your warmed median")."""
    ratio = yours_s / reference_s if reference_s > 0 else math.inf
    fail_unless(1 / window <= ratio <= window, f"{what} is {ratio:.3g}x {against}",
                yours=f"{yours_s * 1e3:.4g} ms",
                expected=f"about {reference_s * 1e3:.4g} ms (within {window:g}x either way)",
                hint=hint)
    return ratio


def timing_budget_s(default: float) -> float:
    """A timing check's budget in seconds: ``default``, scaled by ``COURSE_TIMING_BUDGET``
    (a factor: 0.5 halves every budget, for tests that only need the mechanism)."""
    try:
        scale = float(os.environ.get("COURSE_TIMING_BUDGET", "1"))
    except ValueError:
        scale = 1.0
    return default * max(scale, 0.0)


def ratio_verdict(yours: Callable[[int], float], reference: Callable[[int], float],
                  window: float | tuple[float, float], what: str,
                  hint: str | tuple[str, str], *,
                  against: str = "the checker's synchronised measurement",
                  first: tuple[float, float] | None = None, budget_s: float = 20.0,
                  min_rounds: int = 3, max_rounds: int = 10) -> RatioEvidence:
    """The ratio of ``yours(i)`` (the learner's figure in round ``i``, seconds) to
    ``reference(i)`` (the checker's own, taken in the same round) decided in interleaved
    rounds by ``coursekit.measure.verdict.measure_ratio``: returns the evidence when the
    ratio is clearly inside ``window`` (``w``: ``[1/w, w]``; or ``(lo, hi)``), raises
    ``CheckFailed`` naming the evidence when it is clearly outside, and
    ``CheckInconclusive`` with the spread and the load when the budget runs out first.
    ``first``: a round the check already measured. ``hint``: one sentence, or a pair
    (below the window, above it) so the hint follows the side the rounds fell on."""
    lo, hi = (1 / window, window) if isinstance(window, (int, float)) else window
    ev = measure_ratio(yours, reference, lo, hi, first=first, min_rounds=min_rounds,
                       max_rounds=max_rounds, budget_s=timing_budget_s(budget_s))
    mine_ms = sorted(ev.reference_s)[len(ev.reference_s) // 2] * 1e3
    yours_ms = sorted(ev.yours_s)[len(ev.yours_s) // 2] * 1e3
    if ev.verdict == "fail":
        if not isinstance(hint, str):
            hint = hint[0] if ev.ratio < lo else hint[1]
        raise CheckFailed(f"{what} is {ev.ratio:.3g}x {against}",
                          yours=f"{yours_ms:.4g} ms (median of {len(ev.yours_s)} rounds)",
                          expected=f"about {mine_ms:.4g} ms ({ev.window_text()})",
                          hint=hint, evidence=ev.summary())
    if ev.verdict == "inconclusive":
        raise CheckInconclusive(
            f"{what}: {ev.ratio:.3g}x {against}, but the rounds were too noisy to tell "
            f"whether it lies within {ev.window_text()}",
            evidence=f"{ev.summary()}; {ev.conditions()}", hint=ev.noise_hint())
    return ev


def samples_of(record: dict, what: str, iters: int | None = None, *,
               raw: bool = True) -> list[float]:
    """``record["samples_s"]`` as floats: a list with one sample per timed call (exactly
    ``iters`` when given, else at least one). With ``raw`` they must also look measured:
    positive, and not one value repeated (a summary passed off as samples)."""
    samples = record.get("samples_s")
    is_list = isinstance(samples, (list, tuple))
    fail_unless(is_list and (len(samples) == iters if iters is not None else len(samples) > 0),
                f"{what}: samples_s must hold one raw sample per timed call",
                yours=f"{len(samples)} samples" if is_list else short(samples),
                expected=f"{iters} samples (iters={iters})" if iters is not None
                else "a non-empty list of seconds, one per timed call",
                hint="append every timed call's seconds; do not summarise")
    values = [as_float(s, f"{what}: samples_s[{i}]") for i, s in enumerate(samples)]
    if raw:
        fail_unless(all(v > 0 for v in values) and (len(values) < 3 or len(set(values)) > 1),
                    f"{what}: samples_s looks like a summary, not raw measurements",
                    yours=values[:4], expected="distinct positive seconds",
                    hint="keep each sample as measured; report the mean or median elsewhere")
    return values


def random_name(rng, prefix: str, length: int = 6, letters: str = NAME_LETTERS) -> str:
    """``prefix`` and ``length`` letters drawn from ``rng`` (a numpy Generator)."""
    return prefix + "".join(rng.choice(list(letters), length))


def region_name(rng) -> str:
    """A trace-annotation name drawn per run: a learner cannot find it by a fixed string."""
    return random_name(rng, "step_")



# How far self-reported times may add up past the wall time the checker measured around
# the call: the two clocks are read a few ticks apart (1%, and 1 ms for the round trip).
WALL_SLACK_FRACTION, WALL_SLACK_S = 0.01, 1e-3


def beyond_wall(timed: float, wall_s: float) -> bool:
    """Whether times that add up to ``timed`` seconds cannot fit in a call the checker
    measured at ``wall_s``: the one rule every check of a reported sum uses."""
    return timed > wall_s * (1 + WALL_SLACK_FRACTION) + WALL_SLACK_S


def reported_times_within_wall(what: str, records, wall_s: float) -> None:
    """Self-reported harness times (each record's ``first_call_s`` and ``samples_s``)
    cannot add up to more than the wall time the checker measured around the call: no
    harness times more than elapsed. A contradiction is tamper evidence."""
    timed = 0.0
    for m in records:
        samples = m.get("samples_s")
        values = [m.get("first_call_s"), *(samples if isinstance(samples, list) else [])]
        timed += sum(v for v in values if type(v) in (int, float) and math.isfinite(v))
    if beyond_wall(timed, wall_s):
        raise TamperEvidence(f"{what}: the reported times add up to {timed:.4g} s, but the "
                             f"whole call took {wall_s:.4g} s")


def reported_counts(what: str, facts: dict) -> tuple[int, list]:
    """A workload's self-reported (calls, compiled_at), refused as tamper evidence unless
    they are counts: an int of calls and the indices of the calls that compiled."""
    calls, compiled_at = facts.get("calls"), facts.get("compiled_at")
    if type(calls) is not int or not isinstance(compiled_at, list) or \
            not all(type(c) is int and 0 <= c < max(calls, 1) for c in compiled_at):
        raise TamperEvidence(f"{what}: the learner process reported counts that are not "
                             f"counts: {facts!r}"[:300])
    return calls, compiled_at


# A learner's clock other than perf_counter (time.time, which NTP may slew by up to
# 500 ppm) against the probe's: the comparisons themselves need no slack for load.
CLOCK_SLACK_FRACTION, CLOCK_SLACK_S = 1e-3, 1e-5


def ended_before_ready(seconds: float, unready_s: float) -> bool:
    """A learner's time of a call (a clock started before the call) shorter than the
    moment the call's output was last seen unfinished, ``unready_s`` after it began: the
    clock stopped before the output was ready."""
    return seconds < unready_s * (1 - CLOCK_SLACK_FRACTION) - CLOCK_SLACK_S


def reported_unready_seen(what: str, facts: dict) -> list[float]:
    """A watched workload's self-reported ``unready_seen_after_s`` (one float per call:
    the last moment its output was seen unfinished, seconds after the call began),
    refused as tamper evidence unless it is that. Only ever a reason to fail: a learner
    figure shorter than it is a clock stopped before the output was ready."""
    calls, seen = facts.get("calls"), facts.get("unready_seen_after_s")
    if type(calls) is not int or not isinstance(seen, list) or len(seen) != calls or \
            not all(type(s) is float and math.isfinite(s) and s >= 0 for s in seen):
        raise TamperEvidence(f"{what}: the learner process reported when its calls' "
                             f"outputs were unfinished in a form that is not that: "
                             f"{facts!r}"[:300])
    return seen


def reported_unready(what: str, facts: dict) -> list[int]:
    """A workload's self-reported ``unready_at_next_call`` (indices of calls whose output
    was not ready when the next call began), refused as tamper evidence unless it is a
    list of call indices. Only ever a reason to fail: no report clears a timing."""
    calls, unready = facts.get("calls"), facts.get("unready_at_next_call")
    if type(calls) is not int or not isinstance(unready, list) or \
            not all(type(k) is int and 0 <= k < calls - 1 for k in unready):
        raise TamperEvidence(f"{what}: the learner process reported unfinished calls that "
                             f"are not call indices: {facts!r}"[:300])
    return unready


def reported_call_windows(what: str, facts: dict) -> list[tuple[float, float]]:
    """A workload's self-reported entry and return stamps (``began_at``, ``returned_at``)
    as one window per call: (least_s, most_s), the call's own span (entry to return;
    for a watched workload, at least until its output was last seen unfinished) and the
    time from the previous call's return to the next call's entry (``math.inf`` at
    either end of the calls). A caller's clock started after the previous call returned
    and stopped after this call's work, before the next call, reads within both, at any
    load. Refused as tamper evidence unless the stamps are in order; only ever a reason
    to fail (``coursekit.checking.timestamps``)."""
    calls, began, returned = (facts.get(k) for k in ("calls", "began_at", "returned_at"))
    stamps = list(zip(began, returned)) if isinstance(began, list) and \
        isinstance(returned, list) and len(began) == len(returned) == calls else None
    ordered = stamps is not None and all(
        type(b) is float and type(r) is float and math.isfinite(b) and b <= r
        for b, r in stamps) and all(r <= b for (_, r), (b, _) in zip(stamps, stamps[1:]))
    if not ordered:
        raise TamperEvidence(f"{what}: the learner process reported its calls' entry and "
                             f"return times in a form that is not that: {facts!r}"[:300])
    seen = reported_unready_seen(what, facts) if "unready_seen_after_s" in facts \
        else [0.0] * calls
    return [(max(r - b, seen[k]),
             (stamps[k + 1][0] if k + 1 < calls else math.inf)
             - (stamps[k - 1][1] if k else -math.inf))
            for k, (b, r) in enumerate(stamps)]

"""optimisation's checker object and what several stages share: sizes drawn from the
run's seed, the float comparison of parsed figures, and the checker's own timing of both
versions, decided by interleaved rounds within each stage's time budget.

The workload is ``coursekit.workloads.slow_step``; the checker builds its reference from
it and never imports the learner's file: the learner's functions run in a learner
process (``learner_process=True``) and answer with data.

Where the clocks are (issue 27: nothing a submission can reach is trusted). A process
that has imported learner code never times the reference and never produces a time a
verdict rests on:

* ``train_slow``, the reference, runs and is timed **in this process**, which never
  imports the learner's file;
* the learner's ``train_fast`` runs in the learner process in blocks (the inspectors
  ``optimisation/block_prepare`` and ``optimisation/fast_block``): this process draws the
  learning rates at random, sends them, and times the request on its own clock until
  the answer arrives (``LearnerProcess.last_wall_s``). The learner process only runs the
  calls and answers with their losses; the times it reports for them are checked against
  that clock (they cannot add up to more), never used for a verdict;
* while this process times ``train_slow`` the learner process has nothing to run: the
  CPU time it spends then (read from ``/proc``, not reported) must stay near zero. A
  block it spent CPU in is timed again once it has gone quiet (work a call of yours left
  running ends); one that never goes quiet, or spends CPU again in every try, is named
  as tampering (a thread slowing the reference).

Every timing verdict goes through ``decide`` (``coursekit.checking.probes.ratio_verdict``:
interleaved rounds until the interval of the ratio clears its window, INCONCLUSIVE when
the rounds or the check's budget run out first), and a round never starts after the
check's budget is spent (``Budget``): under load a check ends at its budget with a
verdict or INCONCLUSIVE."""

from __future__ import annotations

import math
import os
import random
import time

import jax
import numpy as np

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction, process_cpu_s
from coursekit.checking.contract import Checker
from coursekit.checking.device import learner_may_hold_accelerator
from coursekit.checking.errors import (
    CheckFailed,
    CheckInconclusive,
    LearnerCodeError,
    TamperEvidence,
)
from coursekit.checking.probes import (
    beyond_wall,
    ratio_verdict,
    reported_times_within_wall,
    timing_budget_s,
)
from coursekit.checking.values import fail_unless
from coursekit.measure.verdict import machine_load
from coursekit.workloads import slow_step

checker = Checker("optimisation", {
    1: "find it", 2: "fix it", 3: "where it stops helping", 4: "the report"},
    learner_process=True)

# While this process times train_slow the learner process waits for its next request: it
# may spend this much CPU (a fraction of what this process spent on the block, plus slack
# for the clock's 10 ms tick and a thread finishing up) and no more. Measured: 0 ms
# during each of six train_slow calls of 0.8-1.5 s at load 12 per core. Threads of the
# learner's that spin while it waits took 0.25 CPU s per wall s at load 15 per core, when
# this process got 0.07: a fraction of this process's own CPU, not of the wall time, is
# what tells them apart at any load.
IDLE_CPU_FRACTION, IDLE_CPU_SLACK_S = 0.25, 0.05
# A block the learner process spent CPU in is timed again once it has gone quiet (work a
# call left running, such as calls timed without waiting for them, ends; measured up to
# a few seconds under load): quiet is IDLE_WINDOWS windows of IDLE_WINDOW_S in a row
# with at most one clock tick each. A process that never goes quiet within IDLE_WAIT_S,
# or spends CPU again in each of IDLE_TRIES blocks, keeps running with nothing asked of
# it: named as tampering.
IDLE_WINDOW_S, IDLE_WINDOWS, IDLE_WAIT_S, IDLE_TRIES = 0.1, 2, 15.0, 3

# ---------------------------------------------------------------------------------------
# Sizes drawn per run
# ---------------------------------------------------------------------------------------

def odd(rng, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi)) | 1


def timing_config(ctx) -> dict:
    """The held-out size of stage 2's timing and stage 4's records."""
    rng = ctx.rng("timing-config")
    return {"vocab": odd(rng, 449, 561), "embed": odd(rng, 56, 72),
            "hidden": odd(rng, 224, 288), "batch": odd(rng, 49, 79),
            "steps": int(rng.integers(12, 17))}


def tiny_config(rng, **sizes) -> dict:
    """A problem of millisecond calls, for checks of counts and rates (not times)."""
    return {"vocab": odd(rng, 31, 61), "embed": odd(rng, 5, 9), "hidden": odd(rng, 7, 15),
            "steps": 2, **sizes}


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


def size_text(config: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in config.items())


# ---------------------------------------------------------------------------------------
# Budgets
# ---------------------------------------------------------------------------------------

class OutOfBudget(Exception):
    """A round was asked for after the check's budget was spent (``decide`` turns it
    into INCONCLUSIVE with the rounds measured so far)."""


class Budget:
    """A check's time budget in seconds (scaled by ``COURSE_TIMING_BUDGET``), from now."""

    def __init__(self, seconds: float, what: str):
        self.seconds, self.what = timing_budget_s(seconds), what
        self.started = time.monotonic()

    def left(self) -> float:
        return self.seconds - (time.monotonic() - self.started)

    def spent(self) -> bool:
        return self.left() <= 0

    def inconclusive(self, done: str) -> CheckInconclusive:
        """The verdict when the budget ran out with ``done`` measured (and no failure)."""
        load = machine_load()
        return CheckInconclusive(
            f"{self.what}: the check's time budget ({self.seconds:.0f} s) ran out after "
            f"{done}, before its timing could be decided",
            evidence=f"{time.monotonic() - self.started:.0f} s spent; load "
            f"{load.get('load_per_core')} per core over {load.get('cores')} cores",
            hint="nothing here points at your code: rerun when the machine is quieter")


def check_budget(ctx, seconds: float, what: str) -> Budget:
    """The budget of the check now running (one per check and run: a check that runs
    twice, as in a planted batch, gets its own)."""
    return ctx.once(f"budget:{what}", lambda: Budget(seconds, what))


class NeedMore(Exception):
    """A verdict asked for a round past ``Rounds.limit`` (``decide_together``)."""


class Rounds:
    """Rounds measured on demand and kept: ``get(i, budget)`` measures rounds up to ``i``
    with ``make(i)`` (none after ``budget`` is spent, none past ``limit`` when set), so
    every verdict that reads them shares them and more are measured only while one is
    still open."""

    def __init__(self, make, first: dict | None = None):
        self.make = make
        self.done: list[dict] = [first] if first is not None else []
        self.limit: int | None = None

    def get(self, i: int, budget: Budget) -> dict:
        while len(self.done) <= i:
            if self.limit is not None and len(self.done) >= self.limit:
                raise NeedMore(len(self.done))
            if budget.spent():
                raise OutOfBudget(len(self.done))
            self.done.append(self.make(len(self.done)))
        return self.done[i]


def decide(yours, reference, window, what: str, hint: str, *, against: str, budget: Budget,
           first: tuple[float, float] | None = None, max_rounds: int = 8,
           unit: str = "s", hint_above: str | None = None):
    """``probes.ratio_verdict`` of ``yours(i)`` over ``reference(i)`` within ``budget``:
    its rounds stop at the budget (INCONCLUSIVE, with the rounds so far). ``unit="x"``:
    the figures are ratios, not seconds, and a FAIL says so. ``hint_above``: the hint
    when the rounds fell above the window (``hint`` is for below it)."""
    seen: dict[str, list] = {"yours": [], "reference": []}
    if first is not None:
        seen["yours"].append(first[0])
        seen["reference"].append(first[1])

    def tracked(fn, key):
        def call(i):
            value = float(fn(i))
            seen[key].append(value)
            return value
        return call
    scale = timing_budget_s(1.0)
    try:
        return ratio_verdict(tracked(yours, "yours"), tracked(reference, "reference"),
                             window, what, hint, against=against, first=first,
                             budget_s=max(budget.left(), 0.0) / scale if scale > 0 else 0.0,
                             max_rounds=max_rounds)
    except OutOfBudget:
        pairs = list(zip(seen["yours"], seen["reference"]))
        if not pairs:
            raise budget.inconclusive(f"no round of {what}") from None
        ratio = math.exp(sum(math.log(y / r) for y, r in pairs) / len(pairs))
        err = budget.inconclusive(f"{len(pairs)} round{'s' if len(pairs) != 1 else ''} "
                                  f"of {what}")
        err.evidence = (f"{what}: {ratio:.3g}x {against} so far (geometric mean of "
                        f"{len(pairs)} rounds); {err.evidence}")
        raise err from None
    except CheckFailed as err:
        pairs = list(zip(seen["yours"], seen["reference"]))
        if hint_above and pairs and sum(math.log(y / r) for y, r in pairs) > 0:
            err.hint = hint_above
        if unit == "x":
            mid = len(seen["yours"]) // 2
            err.yours = f"{sorted(seen['yours'])[mid]:.3g}x (median of {len(seen['yours'])} rounds)"
            err.expected = f"about {sorted(seen['reference'])[mid]:.3g}x ({_window(window)})"
        raise


def _window(window) -> str:
    lo, hi = (1 / window, window) if isinstance(window, (int, float)) else window
    if math.isinf(hi):
        return f"at least {lo:.3g}x"
    if lo <= 0:
        return f"at most {hi:.3g}x"
    return f"{lo:.3g}x-{hi:.3g}x"


def decide_together(verdicts, rounds: Rounds, min_rounds: int = 3) -> None:
    """Several ``decide`` verdicts (callables) on the same ``rounds``, looked at together
    round by round: each is decided on the rounds measured so far before any of them gets
    another, so a clear failure is seen as soon as its rounds show it, not after another
    verdict has spent the budget on rounds of its own. (Re-deciding on more rounds repeats
    the same looks on the same data, then one more: the sequential test each would run
    alone.) The first failure is raised at once; an inconclusive verdict, when nothing
    failed, at the end."""
    still, limit = list(verdicts), min_rounds
    undecided = None
    while still:
        rounds.limit = limit
        waiting = []
        for verdict in still:
            try:
                verdict()
            except NeedMore:
                waiting.append(verdict)
            except CheckInconclusive as err:  # its own rounds or the budget ran out
                undecided = undecided or err
        still = waiting  # each stops by itself at its max_rounds or the budget
        limit += 1
    rounds.limit = None
    if undecided is not None:
        raise undecided


# ---------------------------------------------------------------------------------------
# The checker's timing of both versions
# ---------------------------------------------------------------------------------------

_RATES = random.SystemRandom()


def wait_quiet(pid: int) -> None:
    """Return once the learner process ``pid`` has spent (almost) no CPU for
    IDLE_WINDOWS windows in a row; TamperEvidence if it does not within IDLE_WAIT_S."""
    started = time.monotonic()
    first = process_cpu_s(pid)
    quiet = 0
    while quiet < IDLE_WINDOWS:
        if time.monotonic() - started > IDLE_WAIT_S:
            raise TamperEvidence(
                f"the learner process kept spending CPU with nothing asked of it: "
                f"{process_cpu_s(pid) - first:.3g} CPU s in the {IDLE_WAIT_S:g} s the "
                "checker waited for it to go quiet before timing train_slow")
        before = process_cpu_s(pid)
        time.sleep(IDLE_WINDOW_S)
        quiet = quiet + 1 if process_cpu_s(pid) - before <= 0.011 else 0


class Versions:
    """Both versions at one size, timed by this process: ``train_slow`` here (this process
    never imports the learner's file), the learner's ``train_fast`` in the learner
    process, in blocks this process times from request to answer. Every call has a
    learning rate of its own, drawn here at random when the block starts."""

    def __init__(self, impl, config: dict, seed: int):
        self.impl, self.config, self.seed = impl, dict(config), int(seed)
        problem = slow_step.make_problem(config, seed)
        self.args = (problem["params"], problem["tokens"], problem["targets"])
        self.lr = problem["lr"]
        self.first_slow_s = self.first_fast_s = None
        self.fast_compiles = 0  # compile events the learner process reported (self-reported)

    def rates(self, n: int) -> list[float]:
        return [self.lr * _RATES.uniform(0.7, 1.4) for _ in range(n)]

    def warm_slow(self) -> None:
        """train_slow's first call at this size (it compiles its operations), timed
        apart, never a sample, and not watched (it may overlap a learner call)."""
        if self.first_slow_s is None:
            self.first_slow_s = self.slow(self.rates(1), watch=False)[0]

    def warm(self) -> None:
        """The first call of each version at this size (each compiles: the slow one its
        operations, the fast one its program), timed apart, never a sample. The learner's
        first: an unwritten ``train_fast`` hears so before train_slow compiles."""
        if self.first_fast_s is None:
            self.first_fast_s = self.fast(self.rates(1))[0]
            self.fast_compiles = 0  # the first call compiles; later ones may not
        self.warm_slow()

    def slow(self, lrs: list[float], watch: bool = True) -> tuple[float, list[np.ndarray]]:
        """``train_slow`` once per rate, here, each result waited for: (seconds per call,
        each call's losses). The learner process must stay idle meanwhile (``watch``): a
        block it spent CPU in is timed again once it is quiet (``IDLE_*``)."""
        if learner_may_hold_accelerator():
            return self.slow_on_chip(lrs)
        process = getattr(self.impl, "__bridge__", None)
        pid = getattr(process, "pid", None) if watch else None
        pid = pid if pid and pid != os.getpid() else None
        for attempt in range(IDLE_TRIES):
            if attempt:
                wait_quiet(pid)
            cpu_before = process_cpu_s(pid) if pid else 0.0
            mine_before = time.process_time()
            outs = []
            # a try again gets rates of its own (a rate met before skips the recompile
            # every call in use makes), 1e-6 apart: the losses move 100x inside RTOL
            start = time.perf_counter()
            for lr in lrs:
                outs.append(jax.block_until_ready(slow_step.train_slow(
                    *self.args, lr * (1 + 1e-6 * attempt))))
            wall = time.perf_counter() - start
            if not pid:
                break
            spent = process_cpu_s(pid) - cpu_before
            mine = time.process_time() - mine_before
            if spent <= IDLE_CPU_FRACTION * mine + IDLE_CPU_SLACK_S:
                break
        else:
            raise TamperEvidence(
                f"the learner process spent CPU while the checker timed train_slow, with "
                f"nothing asked of it, in each of {IDLE_TRIES} tries, though it had gone "
                f"quiet before each (the last: {spent:.3g} CPU s in {wall:.3g} s, when the "
                f"checker spent {mine:.3g}): something in it runs while the checker times")
        return wall / len(lrs), [np.asarray(o[1], np.float64) for o in outs]

    def slow_on_chip(self, lrs: list[float]) -> tuple[float, list[np.ndarray]]:
        """On an accelerator: the course's train_slow run where the chip is, in the
        learner process (one process at a time holds it; this one stays on the CPU), this
        process timing the whole request, as it times the fast blocks."""
        start = time.perf_counter()
        got = bridge.inspect(self.impl, "optimisation/slow_block", self.config, self.seed,
                             [float(v) for v in lrs])
        wall = time.perf_counter() - start
        samples = got.get("samples_s") if isinstance(got, dict) else None
        if not (isinstance(samples, list) and len(samples) == len(lrs)
                and 0 < sum(samples) <= wall):
            raise TamperEvidence("the learner process's train_slow block does not fit the "
                                 f"request's {wall:.4g} s")
        return wall / len(lrs), [np.asarray(v, np.float64) for v in got["losses"]]

    def fast(self, lrs: list[float]) -> tuple[float, list[np.ndarray]]:
        """The learner's ``train_fast`` once per rate in the learner process, timed here
        from the request to the answer: (seconds per call, each call's losses)."""
        bridge.inspect(self.impl, "optimisation/block_prepare", self.config, self.seed,
                       len(lrs))
        got = bridge.inspect(self.impl, "optimisation/fast_block",
                             LearnerFunction("train_fast"), [float(lr) for lr in lrs])
        wall = self.impl.__bridge__.last_wall_s
        what = f"train_fast at {size_text(self.config)}"
        fail_unless(isinstance(got, dict) and isinstance(got.get("losses"), list)
                    and len(got["losses"]) == len(lrs), f"{what}: the calls did not "
                    "return losses", yours=type(got).__name__)
        samples = got.get("samples_s")
        reported_times_within_wall(what, [{"samples_s": samples}], wall)
        if type(got.get("compiles")) is int:
            self.fast_compiles += got["compiles"]
        steps = self.args[1].shape[0]
        losses = []
        for value in got["losses"]:
            fail_unless(hasattr(value, "shape") and tuple(np.shape(value)) == (steps,),
                        f"{what}: train_fast's losses are not one per step",
                        yours=np.shape(value) if hasattr(value, "shape") else value,
                        expected=(steps,))
            losses.append(np.asarray(value, np.float64))
        return wall / len(lrs), losses


def timed_pair(versions: Versions, i: int, slow_calls: int, fast_calls: int,
               fast_blocks: int = 1) -> dict:
    """One round at one size: a block of ``slow_calls`` train_slow calls and
    ``fast_blocks`` blocks of ``fast_calls`` train_fast calls (slow first in even rounds,
    fast first in odd ones); the fast figure is the median over its blocks of the time
    per call (a load spike in one block of few-ms calls moves a median of blocks least,
    as it moves your median of samples least). The slow block's first rate is that of
    one call of the first fast block, picked at random here, so that call's losses can
    be compared with train_slow's (``checked``)."""
    lrs = versions.rates(fast_calls)
    k = _RATES.randrange(fast_calls)
    slow_lrs = [lrs[k]] + versions.rates(slow_calls - 1)

    def fast() -> tuple[float, list]:
        first_s, losses = versions.fast(lrs)
        times = [first_s] + [versions.fast(versions.rates(fast_calls))[0]
                             for _ in range(fast_blocks - 1)]
        return float(np.median(times)), losses
    if i % 2 == 0:
        slow_s, slow_losses = versions.slow(slow_lrs)
        fast_s, fast_losses = fast()
    else:
        fast_s, fast_losses = fast()
        slow_s, slow_losses = versions.slow(slow_lrs)
    return {"slow_s": slow_s, "fast_s": fast_s, "lr": lrs[k],
            "checked": (fast_losses[k], slow_losses[0])}


def answers_in_a_fresh_process(impl, call) -> bool:
    """Whether ``call(module)`` answers in a new learner process of the same file (and
    environment): where the same call raised in a process that had made earlier calls,
    what they left behind made it raise."""
    process = getattr(impl, "__bridge__", None)
    if not isinstance(process, bridge.LearnerProcess):
        return False
    fresh = bridge.LearnerProcess(process.impl_path, env=process.extra_env)
    try:
        call(fresh.module())
        return True
    except LearnerCodeError:
        return False
    finally:
        fresh.close()


def times_within_call(what: str, times, wall_s: float) -> None:
    """The times a learner function reports (seconds) cannot add up to more than the
    call took on the checker's clock: no harness times more than elapsed (samples in
    milliseconds add up to about 1000x too much)."""
    total = sum(float(t) for t in times if type(t) in (int, float) and math.isfinite(t))
    fail_unless(not beyond_wall(total, wall_s),
                f"{what}: the times you report add up to more than the whole call took on "
                "the checker's clock", yours=f"{total:.4g} s",
                expected=f"at most {wall_s:.4g} s",
                hint="seconds, not milliseconds: each sample the wall time of one call")


# A median sample may exceed the median call it times by this share of a copy, no more.
EXCESS_OF_A_COPY = 0.5


def no_copy_in_sample(sample: str, version: str, samples, took, copies, stub_copy_s: float,
                      *, hint_copy: str, hint_other: str) -> None:
    """With the parameter copy stubbed by a sleep of ``stub_copy_s`` (the inspector
    ``optimisation/stubbed_calls``), the median of ``samples`` (the learner's, of
    ``version``) exceeds the median of ``took`` (the stubbed calls it times, their own
    self-reported durations) by at most EXCESS_OF_A_COPY of that copy. An excess of
    about one copy (within half the median of ``copies``, the stubbed copies' own
    durations) is named as the copy inside the timed sample, hinted ``hint_copy``; any
    other excess is hinted ``hint_other``. ``sample`` names the sample in the failure,
    the checker's context first ("...: your median slow sample")."""
    excess = float(np.median(samples) - np.median(took))
    copy_s = float(np.median(copies)) if copies else stub_copy_s
    inside = bool(copies) and abs(excess - copy_s) <= 0.5 * copy_s
    fail_unless(excess <= EXCESS_OF_A_COPY * stub_copy_s,
                f"{sample} is {excess:.3g} s longer than the median {version} call it times"
                + (f", about one parameter copy ({copy_s:.3g} s with the stub): the copy is "
                   "inside the timed sample" if inside else ""),
                yours=f"median sample {float(np.median(samples)):.4g} s",
                expected=f"median call {float(np.median(took)):.4g} s (the stub's own "
                "time, self-reported)",
                hint=hint_copy if inside else hint_other)


def losses_agree(pair: dict) -> bool:
    fast, slow = pair["checked"]
    return bool(np.all(np.isfinite(fast))) and np.allclose(
        fast, slow, rtol=slow_step.RTOL, atol=slow_step.ATOL)

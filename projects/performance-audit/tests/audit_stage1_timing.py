"""performance-audit stage 1: a comparable measurement. The learner's ``time_fn``,
``comparable`` and its two one-change experiments (a shape change, a host read) run in
the learner process on fresh jitted copies of the stage-1 workload (``audit_harness``).
What they report is checked against the checker's own synchronised measurement of the
same work (medians as ratios within ``TIME_RATIO_WINDOW``, never absolute times), the
checker's own first calls of fresh copies of the work at three sizes (a first call is
trace + compile + one complete run), outputs the checker computes and corrupts itself,
and the call and compile counts the learner process reports (``SELF_REPORTED``),
cross-checked against the CPU time this process saw it spend and the wall time this
process measured around each call.

Every verdict on a time (the warmed median, the first calls of the small, medium and large
work, the two host-read medians) is decided by ``audit_harness.timing_verdict`` in
interleaved rounds: a round is the learner's function called again through the learner
process (a smaller call than the first: one warm-up call, three samples) and the checker's
own measurement of the same thing, back to back; the check's existing first measurement
is round 0. Each verdict stops as soon as its interval clears the window (3 rounds when
the machine is quiet) and otherwise spends at most its share of ``BUDGET_S``, then says
INCONCLUSIVE with what it measured. A check that makes several verdicts runs them all
after its exact facts, so an undecided one hides no FAIL.

Budget: most of the stage is the large first call (a work sized until one run takes 16x
its compile, n up to 4001, three runs a round); a quiet machine decides each verdict in 3
rounds. A verdict starts no new round once its share of ``BUDGET_S`` (scaled by
``COURSE_TIMING_BUDGET``) is spent, not even to reach a third; one whose round 0 shows
that the rounds it still needs would take over 1.5x its budget, or whose sizing would
pass its own, says INCONCLUSIVE at once. What the stage took, idle and under load:
docs/checkers/performance-audit.md, "Cost".
"""

from __future__ import annotations

import copy
import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from audit_harness import (
    TIME_RATIO_WINDOW,
    all_verdicts,
    checker,
    checker_stage1_samples,
    load_text,
    on_chip,
    reference,
    stage1_workload,
    synced_samples,
    timing_verdict,
)

from coursekit.checking.bridge import Workload
from coursekit.checking.device import (
    KeptWork,
    compile_on_device,
    output_on_device,
    time_on_device,
)
from coursekit.checking.errors import (
    CheckFailed,
    CheckInconclusive,
    LearnerCodeError,
    TamperEvidence,
)
from coursekit.checking.learner import get_function, on_input
from coursekit.checking.probes import (
    beyond_wall,
    reported_call_windows,
    reported_counts,
    reported_times_within_wall,
    reported_unready,
    samples_of,
    timing_budget_s,
)
from coursekit.checking.timestamps import grow_as_timestamps, timed_windows, timestamps_failed
from coursekit.checking.values import as_float, fail_unless, require_keys
from coursekit.measure.timing import time_synced
from coursekit.workloads import catalog

# A forged count claims calls that never ran: the CPU they need is missing by a factor of
# (claimed calls / real calls), 9x for a single real call. Honest runs sit at or above
# 1x (load adds spinning threads, never removes work), so a factor-4 floor cannot flake.
CPU_FLOOR_FACTOR = 4.0

MEASUREMENT_KEYS = ("sync", "warmup", "first_call_s", "samples_s", "compiles_first_call",
                    "compiles_warmed", "shapes", "dtypes", "output_ok")


UNIT_SLIP_OVER = 30  # a sum this many times the wall or more reads as another unit


def finite(v) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


def record_windows(records, facts: dict | None) -> list[tuple[list, list]]:
    """Per record, (least, most) of each sample's call (``reported_call_windows``): its
    first call, its warm-up calls, then its samples. No bound (None) for two records of
    one workload (which ran first is the learner's choice) or unless the calls counted
    are exactly those."""
    none = [(None, None)] * len(records)
    if facts is None or len(records) != 1:
        return none
    samples, warmup = records[0].get("samples_s"), records[0].get("warmup")
    if not isinstance(samples, list) or type(warmup) is not int or warmup < 0 or \
            facts.get("calls") != 1 + warmup + len(samples):
        return none
    return [timed_windows(reported_call_windows("time_fn", facts), 1 + warmup,
                          len(samples))]


def timestamps_fail(what: str, records, wall_s: float, facts: dict | None) -> None:
    """Samples that grow with the call index, each holding the one before it and its
    own call (each read against one start before the loop): timestamps, an honest slip,
    said as such by the shared rule (``coursekit.checking.timestamps``) when they also
    contradict durations for certain: one longer than its call's window (the probe's
    stamps), or all the times adding up to more than the whole call took (which would
    otherwise read as a forged report). A correct timer is never named so: three or
    four samples that climb are common under load (0.034, 0.060, 0.070 s was seen), but
    each lies inside its call's window."""
    total = sum(v for m in records for v in (m.get("first_call_s"), *(
        m.get("samples_s") if isinstance(m.get("samples_s"), list) else [])) if finite(v))
    for m, (least, most) in zip(records, record_windows(records, facts)):
        samples = m.get("samples_s") if isinstance(m.get("samples_s"), list) else []
        mine = sum(v for v in samples if finite(v))
        found = grow_as_timestamps(samples, least, most, wall_s=wall_s,
                                   other_s=total - mine)
        if found:
            raise timestamps_failed(found, what)


def times_within_wall(what: str, records, wall_s: float, facts: dict | None = None) -> None:
    """Samples that are timestamps are named so (``timestamps_fail``; ``facts``: the
    workload's probe report, whose stamps bound each call). One timing reported both as
    ``first_call_s`` and as a sample (equal to the last bit, which two honest timings
    never are: e.g. a list of every call's times sliced from its start) is a mistake: a
    FAIL naming it, also when the first call counted twice makes the times add up to
    more than elapsed. Otherwise ``reported_times_within_wall``: a sum beyond the wall
    time is a forged report."""
    timestamps_fail(what, records, wall_s, facts)
    timed = doubled = 0.0
    where = []
    for m in records:
        samples = m.get("samples_s") if isinstance(m.get("samples_s"), list) else []
        first = m.get("first_call_s")
        timed += sum(v for v in (first, *samples) if finite(v))
        if finite(first) and first > 0 and first in samples:
            where.append(f"samples_s[{samples.index(first)}] == first_call_s == {first:.4g} s")
            doubled += first
    # Counting the first call twice adds at most one first call to the sum: a sum beyond
    # the wall time by more than that is not this mistake but times no call took.
    if where and not beyond_wall(timed - doubled, wall_s):
        beyond = (f"; with it your times add up to {timed:.4g} s, more than the "
                  f"{wall_s:.4g} s the whole call took" if beyond_wall(timed, wall_s)
                  else "")
        raise CheckFailed(
            f"{what}: one timing is both your first call and a sample "
            f"({'; '.join(where[:2])}){beyond}",
            yours=where[0], expected="first_call_s apart from every sample",
            hint="first_call_s is the first call alone (compile included) and no sample; "
            "samples_s only the timed calls after the warm-up")
    # Times in another unit add up to far more than the wall time (up to 1000x for ms,
    # 10^6x for us; the samples are part of the call, under load a small part: 275x
    # measured at load 9); scaled back they fit inside it: a unit slip, said as such.
    # A sum a few times the wall (samples invented from the first call: about iters x)
    # is a forged report, tamper evidence below.
    over = timed > UNIT_SLIP_OVER * wall_s + 1e-3
    for unit, scale, times in (("milliseconds", 1e3, "1000"), ("microseconds", 1e6,
                                                                "a million")):
        if over and not beyond_wall(timed / scale, wall_s):
            raise CheckFailed(
                f"{what}: your times add up to {timed:.4g}, but the whole call took "
                f"{wall_s:.4g} s", yours=f"{timed:.4g} in all", expected=f"at most "
                f"{wall_s:.4g} s in all", hint=f"your times read {times} times too large: "
                f"{unit}, where seconds are asked")
    reported_times_within_wall(what, records, wall_s)


def cross_check_counts(impl, ctx, facts: dict, what: str, *measurements) -> dict:
    """The learner process's self-reported call and compile counts, checked against the
    CPU time this process saw it spend during the call, and the times its harness
    reported (``measurements``) against the call's wall time here (``SELF_REPORTED``).
    Counts first: a count the CPU could not have run is forged whatever the samples say."""
    calls, compiled_at = reported_counts(what, facts)
    ref = reference(ctx)
    needed = len(compiled_at) * ref["compile_cpu_s"] + calls * ref["call_cpu_s"]
    spent = impl.__bridge__.last_cpu_s
    if calls >= 3 and spent * CPU_FLOOR_FACTOR < needed:
        raise TamperEvidence(
            f"{what}: the learner process reported {calls} calls and "
            f"{len(compiled_at)} compiles, which take about {needed:.3g} CPU s here, but "
            f"it spent {spent:.3g} CPU s (floor 1/{CPU_FLOOR_FACTOR:g})")
    times_within_wall(what, measurements, impl.__bridge__.last_wall_s, facts)
    return facts


def learner_measurement(impl, ctx, **kwargs) -> tuple[dict, dict]:
    """The learner's ``time_fn`` on a fresh jitted workload: its measurement, and the
    calls and compiles counted around the function it was handed (in the learner
    process: self-reported, cross-checked here)."""
    time_fn = get_function(impl, "time_fn")
    workload, _, x = stage1_workload(ctx)
    with on_input(f"fn = a jitted tanh(a @ a * s) @ a, args = one float32 ({x.shape[0]}, "
                  f"{x.shape[1]}) array, {kwargs}"):
        m = require_keys(time_fn(workload, x, **kwargs), MEASUREMENT_KEYS, "time_fn")
    return m, cross_check_counts(impl, ctx, workload.facts, "time_fn", m)


# Each verdict's budget (seconds of rounds after the first; COURSE_TIMING_BUDGET scales
# them): at least 3 rounds, more only while the verdict is open, at most 8 (medians, cheap
# rounds), 10 (the small first call: a round is two compiles of a tiny program, and one
# learner sample stalled by load reads as a first call) or 6 (the medium and large first
# calls: 16+ runs, or three long ones, a round).
# "large_search": the seconds the large first-call case may spend sizing its work. The
# large rounds get the most: each is three runs of a work sized to take 16x its compile
# (at load 5 per core with a core busy, 10.6 s a round, where 10 s of budget ended the
# reference's rounds at two, undecided; in the planted batch's two checkers at once, 20 s).
BUDGET_S = {"warm_median": 8.0, "warmup": 6.0, "first_call_small": 6.0,
            "first_call_medium": 15.0, "large_search": 15.0, "first_call_large": 30.0,
            "host_read": 6.0, "host_read_leaves": 6.0}
# A round after the first is a smaller time_fn call (a fresh jitted copy: one compile, one
# warm-up call, three samples) and as many synchronised calls of the checker's own copy.
ROUND_WARMUP, ROUND_ITERS = 1, 3
AGAINST_MEDIAN = "the checker's synchronised median of the same work, measured in turn " \
    "with yours"
TOO_SLOW = ("your samples hold more than one call of the work: time only the call and its "
            "sync (no compile, warm-up or extra work inside the timed region)")


def median_s(samples) -> float:
    return float(statistics.median(samples))


def learner_median(impl, ctx, what: str, sync: str = "block_until_ready") -> float:
    """One round's learner figure: the median of a fresh ``time_fn`` measurement."""
    m, _ = learner_measurement(impl, ctx, warmup=ROUND_WARMUP, iters=ROUND_ITERS, sync=sync)
    return median_s(samples_of(m, what, raw=False))


def checker_median(ctx, iters: int = ROUND_ITERS) -> float:
    return median_s(checker_stage1_samples(ctx, iters))


def unwaited_samples_fail(facts: dict, warmup: int, iters: int) -> None:
    """The call probe (self-reported, only ever a reason to fail): a timed call whose
    output was still being computed when the next call began ended its sample early."""
    timed = set(range(1 + warmup, warmup + iters))  # the last timed call has no next one
    unready = sorted(set(reported_unready("time_fn", facts)) & timed)
    fail_unless(not unready, "time_fn: timed calls were still running when the next call "
                "began", yours=f"calls {unready} of fn unfinished at the next call",
                expected="every sample's call finished within it",
                hint=f"your samples of calls {unready[:3]} stopped the clock before the call's "
                "work was done (JAX returns at dispatch): each sample holds its call's work "
                "finished")


SLEEP_S = 0.03  # the sleeping step's nap: wall time a call takes without using the CPU


def cpu_clock_fails(impl, ctx) -> None:
    """The learner's ``time_fn`` on a step that sleeps ``SLEEP_S`` inside each call (a host
    callback: wall time, next to no CPU): every sample of a wall clock holds the nap; a
    CPU-time clock (``time.process_time``) reads next to nothing. Samples that end early
    while every call had finished inside its sample (the call probe) can only be a clock
    that stops when the CPU idles. Once a run: the two checks whose hints it settles
    ask."""
    def measure():
        time_fn = get_function(impl, "time_fn")
        workload = Workload("performance-audit/sleeper", seconds=SLEEP_S)
        x = jnp.ones((8,), jnp.float32)
        with on_input(f"fn = a jitted step that sleeps {SLEEP_S * 1e3:.0f} ms on the host "
                      "inside each call, args = one float32 (8,) array, warmup=1, iters=5"):
            m = require_keys(time_fn(workload, x, warmup=1, iters=5), MEASUREMENT_KEYS,
                             "time_fn")
        # no CPU floor here (a nap takes none): the times against the call's wall time
        times_within_wall("time_fn", [m], impl.__bridge__.last_wall_s, workload.facts)
        return m, workload.facts
    m, facts = ctx.once("sleeper", measure)
    samples = samples_of(m, "time_fn", 5)
    unwaited_samples_fail(facts, 1, 5)
    fail_unless(min(samples) >= 0.8 * SLEEP_S, "time_fn: samples of a call that sleeps "
                f"{SLEEP_S * 1e3:.0f} ms read shorter than the sleep, though every call "
                "finished inside its sample", yours=f"{min(samples) * 1e3:.3g} ms (fastest)",
                expected=f"at least {SLEEP_S * 1e3:.0f} ms each",
                hint="your clock stops while the process waits without using the CPU: a "
                "CPU-time clock (time.process_time counts this process's CPU seconds), where "
                "the wall time of each call is asked")


@checker.check(1)
def warm_median_is_device_time(impl, ctx):
    m, counted = learner_measurement(impl, ctx, warmup=2, iters=7)
    unwaited_samples_fail(counted, 2, 7)
    cpu_clock_fails(impl, ctx)
    first = (median_s(samples_of(m, "time_fn", raw=False)), checker_median(ctx, 7))
    timing_verdict(lambda i: learner_median(impl, ctx, "time_fn"),
                   lambda i: checker_median(ctx), TIME_RATIO_WINDOW, "your warmed median",
                   against=AGAINST_MEDIAN, first=first, budget_s=BUDGET_S["warm_median"],
                   max_rounds=8,
                   too_fast="your samples end before the work does: JAX returns at "
                   "dispatch, so a sample holds its call's work only when the wait for the "
                   "result is inside its timed region", too_slow=TOO_SLOW)


def call_count_hint(calls: int, warmup: int, iters: int) -> str:
    """What a wrong number of calls of fn is, by how far it is off."""
    want = 1 + warmup + iters
    if calls == want - 1:
        return ("one call short: the first call (the one that compiles) is made and timed "
                "apart, before the warm-up calls and the samples, and is neither")
    if calls == want + 1:
        return ("one call too many: fn is called once for the first call, warmup times to "
                "warm up, iters times for the samples, and no more")
    if calls == want - warmup:
        return "no warm-up calls: warmup untimed calls come between the first call and the samples"
    return (f"{calls} calls for warmup={warmup}, iters={iters}: one first call, warmup untimed "
            "calls, iters timed calls")


@checker.check(1)
def first_call_reported_apart(impl, ctx):
    warmup, iters = 2, 6
    m, counted = learner_measurement(impl, ctx, warmup=warmup, iters=iters)  # plain facts
    as_float(m["first_call_s"], "first_call_s")
    fail_unless(counted["calls"] == 1 + warmup + iters,
                "time_fn made the wrong number of calls of fn",
                yours=f"{counted['calls']} calls", expected=f"{1 + warmup + iters} calls",
                hint=call_count_hint(counted["calls"], warmup, iters))
    fail_unless(counted["compiled_at"] == [0], "the compile did not happen in the first call",
                yours=f"compiled in calls {counted['compiled_at']}", expected="only call 0",
                hint="the first call of a fresh jitted function compiles: make it before any "
                "other call of fn")


def compile_counts_agree(m: dict, counted: dict, warmup: int, iters: int, what: str) -> bool:
    """``compiles_first_call`` and ``compiles_warmed`` (ints) against the compiles this
    process's probe counted in call 0 and in every later call. False (nothing said) when
    the calls themselves were not the contract's: first_call_reported_apart names that."""
    if counted["calls"] != 1 + warmup + iters:
        return False
    first = sum(1 for c in counted["compiled_at"] if c == 0)
    later = [c for c in counted["compiled_at"] if c > 0]
    for key in ("compiles_first_call", "compiles_warmed"):
        fail_unless(type(m[key]) is int, f"{what}: {key} is not an int", yours=m[key],
                    expected="an int: how many compiles", hint="a count of compile events")
    if m["compiles_first_call"] == first and m["compiles_warmed"] == len(later):
        return True
    in_warmup = [c for c in later if c <= warmup]
    if m["compiles_warmed"] == len(later) - len(in_warmup) and in_warmup:
        hint = (f"fn compiled again in call {in_warmup[0]}, a warm-up call, and your "
                "compiles_warmed left it out: it counts every compile after the first call, "
                "the warm-up calls' too, not only the samples'")
    elif m["compiles_first_call"] != first and first:
        hint = (f"the first call compiled {first} time(s) and yours says "
                f"{m['compiles_first_call']}: count the compile events while the first call "
                "runs")
    else:
        hint = ("compiles_first_call counts the compile events of the first call, "
                "compiles_warmed those of every later call")
    raise CheckFailed(f"{what}: the compile counts differ from the compiles of fn",
                      yours=f"compiles_first_call={m['compiles_first_call']!r}, "
                      f"compiles_warmed={m['compiles_warmed']!r}",
                      expected=f"compiles_first_call={first}, compiles_warmed={len(later)} "
                      f"(fn compiled in calls {counted['compiled_at']})", hint=hint)


@checker.check(1)
def compiles_counted_where_they_happen(impl, ctx):
    """The compile counts against the compile events counted around fn in the learner
    process: on the stage-1 work (the first call compiles, no later one), and on a step
    that compiles again on its second call, a warm-up call (compiles_warmed counts it)."""
    warmup, iters = 2, 3
    m, counted = learner_measurement(impl, ctx, warmup=warmup, iters=iters)
    compile_counts_agree(m, counted, warmup, iters, "time_fn")
    time_fn = get_function(impl, "time_fn")
    _, _, x = stage1_workload(ctx)
    again = Workload("performance-audit/compiles_again",
                     scale=float(ctx.rng("compiles-again").uniform(0.5, 2.0)))
    m = require_keys(time_fn(again, x, warmup=warmup, iters=iters), MEASUREMENT_KEYS,
                     "time_fn")
    counted = cross_check_counts(impl, ctx, again.facts, "time_fn", m)
    compile_counts_agree(m, counted, warmup, iters, "time_fn on a step that compiles again "
                         "on its second call")


# The warm-up calls: this many, each a stage-1 call (10-40 ms), so that warm-up calls
# dispatched and never waited for still run when the samples start: the first sample then
# holds them (measured: 12 unwaited calls made the next synchronised call 8-13x one call;
# 24 make it 16x or more, against a window of 4x).
WARMUP_CALLS = 24


def unwaited_warmup_fails(facts: dict, warmup: int, samples: list[float]) -> None:
    """The learner process's call probe: the last warm-up call's output still computing
    when the first timed call began (self-reported, only ever a reason to fail: a
    synchronised warm-up is never listed; one that drains the queue by waiting for its last
    call is not either)."""
    unready = reported_unready("time_fn", facts)
    if warmup in unready:
        rest = statistics.median(samples[1:]) if len(samples) > 1 else math.nan
        raise CheckFailed(
            "time_fn: the warm-up calls were still running when the first sample began",
            yours=f"samples_s[0] = {samples[0] * 1e3:.4g} ms, the others' median "
            f"{rest * 1e3:.4g} ms", expected="each sample one call's work",
            hint=f"the last warm-up call (call {warmup} of fn) had not finished when your "
            "first timed call began: the warm-up calls' work, queued behind the dispatch, "
            "lands in your first sample. The samples start after the warm-up's work is done")


@checker.check(1)
def warmup_done_before_the_samples(impl, ctx):
    iters = 3

    def yours(i=None):
        m, _ = learner_measurement(impl, ctx, warmup=WARMUP_CALLS, iters=iters)
        return max(samples_of(m, "time_fn", iters))

    m, counted = learner_measurement(impl, ctx, warmup=WARMUP_CALLS, iters=iters)
    samples = samples_of(m, "time_fn", iters)
    unwaited_warmup_fails(counted, WARMUP_CALLS, samples)
    timing_verdict(yours, lambda i: max(checker_stage1_samples(ctx, iters)), (0.0,
                   TIME_RATIO_WINDOW), f"your slowest sample after {WARMUP_CALLS} warm-up "
                   "calls", against="the checker's slowest of as many synchronised calls of "
                   "the same work, measured in turn with yours",
                   first=(max(samples), max(checker_stage1_samples(ctx, iters))),
                   budget_s=BUDGET_S["warmup"], max_rounds=6,
                   too_fast="your samples end before the work does",
                   too_slow=f"one sample holds many calls' work: the {WARMUP_CALLS} warm-up "
                   "calls ran into it. Each sample starts once the warm-up's work is done")


# A first call is trace + compile + one complete run. Three works of the same kind (the
# stage-1 work at three sizes) pull those apart; each is measured by this process too, on a
# fresh never-compiled copy (its own compile), before and after yours:
#   small  (n 41-99): the compile is ~0.05 s, a warmed call ~0.1 ms, 300x+ apart: a first
#          call without the compile in it (a warmed sample in its place, or timed after a
#          warm-up call) reads hundreds of times below the checker's own first call;
#   medium (n 951-1051): a compile and one run of 10-100 ms each; the warm-up calls are
#          as many as take 8x the checker's own first call (at least 16): a first call that
#          also holds them reads 9x+ the checker's;
#   large  (n from 1701, grown until the checker's own warmed run takes 16x its compile,
#          at most 4001): a first call that did not wait for its result holds the compile
#          and the dispatch only, a synchronised one the whole run and more. Fixed sizes
#          do not hold across machines: at n 1751 this machine's idle matmul (~400 GFLOP/s
#          on 2 cores) ran in 55 ms, an unsynced first call in 0.8x of that. The learner
#          process's unsynced first call (trace + compile + dispatch, in another process)
#          read about 2x the checker's own compile timed alone (108-244 ms against under
#          100, at load 6 per core), so sized to 8x an unsynced first call read 0.13-0.3
#          of a run: too near any floor that a synchronised one (1.1x or more) clears with
#          room. Sized to 16x it reads about 1/8 at most; the floor, 1/3 of a run, sits
#          about 3x from each side in log terms (0.6 once left a synchronised first call
#          1.7x of room, which load took: 0.99x with an interval reaching 0.53x).
# Honest first calls of the two processes agree within 2x under load (the same work,
# measured seconds apart); the windows below are 10x, 3x and 1/3 of a run, each decided in
# interleaved rounds (a fresh copy on each side per round: each first call compiles).
FIRST_CALL_SIZES = {"small": (41, 100), "medium": (951, 1052), "large": (1701, 1802)}
FIRST_CALL_FLOOR = 10.0    # yours at least the checker's own first call / 10
FIRST_CALL_CEILING = 3.0   # yours at most 3x the checker's own first call
RUN_FLOOR = 1 / 3          # yours at least 1/3 of the checker's warmed run
WARMUP_OVER_FIRST = 8.0    # medium: the warm-up calls take 8x the checker's first call
WARMUP_RANGE = (16, 400)
RUN_OVER_COMPILE = 16.0    # large: one run takes 16x the compile
# ... or at least 8x when the search's budget ends first: a first call that does not wait
# then reads at most 1/8 of a run (under RUN_FLOOR by 2.7x) and one that waits 1.125x
# (over it by 3.4x), still a wide margin on both sides
RUN_OVER_COMPILE_LEAST = 8.0
LARGE_N_MAX = 4001


def first_call_input(ctx, size: str):
    lo, hi = FIRST_CALL_SIZES[size]
    rng = ctx.rng(f"first-call-{size}")
    return square_input(rng, int(rng.integers(lo, hi)) | 1), rng


def square_input(rng, n: int):
    return jnp.asarray(rng.standard_normal((n, n), dtype=np.float32) / np.sqrt(n))


def large_first_call_input(ctx):
    """The large case's input: n drawn from FIRST_CALL_SIZES, then grown until the
    checker's own warmed run takes RUN_OVER_COMPILE times its own compile on this
    machine, now, or n reaches LARGE_N_MAX. The compile is the larger of a fresh copy's
    trace + lower + compile timed alone and a first call minus a run: the difference alone
    is two large noisy times apart, and under load it read 0 (a first call faster than a
    run) where the compile took 0.25 s, which stopped the search at a size where a first
    call that did not wait read 0.29 of a run. With it, the checker's own first call of a
    fresh copy at that size and the jitted copy (the search's last measurement, not
    repeated). A search that outgrows its budget (a loaded machine: every run slower, n
    larger) keeps the size it reached when its run is already RUN_OVER_COMPILE_LEAST times
    the compile, else grows to the largest size whose measurement still fits the budget
    when that run would reach it, and leaves the large case undecided otherwise."""
    x, rng = first_call_input(ctx, "large")
    started, budget = time.monotonic(), timing_budget_s(BUDGET_S["large_search"])
    while True:
        timing, fn = own_first_call(rng, x, 1, ctx)
        run = min(timing.samples_s)
        compile_s = max(own_compile_s(rng, x), timing.first_call_s - run)
        if x.shape[0] >= LARGE_N_MAX or run >= RUN_OVER_COMPILE * compile_s:
            return x, rng, timing, fn
        # straight to the size whose run would take RUN_OVER_COMPILE x the compile (a run
        # grows as n^3), 10% past it; at least one FLOP-doubling step
        grow = max(2 ** (1 / 3), 1.1 * (RUN_OVER_COMPILE * compile_s / run) ** (1 / 3))
        n = min(int(x.shape[0] * grow) | 1, LARGE_N_MAX)
        next_s = 2 * compile_s + 2 * run * (n / x.shape[0]) ** 3  # its cost, foreseen
        left_s = budget - (time.monotonic() - started)
        if next_s > left_s:
            if run >= RUN_OVER_COMPILE_LEAST * compile_s:
                return x, rng, timing, fn
            # the largest size whose measurement still fits: under load a run of 3.5x the
            # compile stopped here when the size for 16x foresaw 13 s against 12.6 s left
            fit_run_s = (left_s - 2 * compile_s) / 2
            fit_n = int(x.shape[0] * (max(fit_run_s, 0.0) / run) ** (1 / 3)) | 1
            if fit_run_s >= RUN_OVER_COMPILE_LEAST * compile_s and fit_n > x.shape[0]:
                x = square_input(rng, min(fit_n, LARGE_N_MAX))
                continue
            raise CheckInconclusive(
                "your first_call_s (large work): the checker could not size the work "
                "within its budget", evidence=f"at n={x.shape[0]} the checker's own run "
                f"took {run * 1e3:.4g} ms and its compile {compile_s * 1e3:.4g} ms; telling "
                "a first call that waits for its run from one that does not needs a run "
                f"of {RUN_OVER_COMPILE:g}x the compile; the search had taken "
                f"{time.monotonic() - started:.1f} s and n={n} would take about "
                f"{next_s:.0f} s more, past its budget of {budget:.0f} s; {load_text()}")
        x = square_input(rng, n)


STAGE1 = ("performance-audit/stage1", {})
# On an accelerator a run far longer than its compile needs no huge input: the stage-1
# step repeated in one program (a loop the compiler keeps), n this size, the repeats grown.
CHIP_LARGE_N, CHIP_REPEATS = 1025, (8, 1 << 14)


def large_chip_input(ctx):
    """The large case on an accelerator: the stage-1 step repeated ``repeats`` times in one
    program on an (n, n) input, repeats doubled until the checker's own run (on the chip)
    takes RUN_OVER_COMPILE times its compile, within the search's budget (else the case
    is undecided, as on a CPU). Returns (x, rng, timing, kept copy, work)."""
    rng = ctx.rng("first-call-large")
    x = square_input(rng, CHIP_LARGE_N)
    started, budget = time.monotonic(), timing_budget_s(BUDGET_S["large_search"])
    repeats = CHIP_REPEATS[0]
    while True:
        work = ("performance-audit/stage1_repeated", {"repeats": repeats})
        timing, fn = own_first_call(rng, x, 1, ctx, work)
        run = min(timing.samples_s)
        compile_s = max(own_compile_s(rng, x, ctx, work), timing.first_call_s - run)
        if run >= RUN_OVER_COMPILE * compile_s or repeats >= CHIP_REPEATS[1]:
            return x, rng, timing, fn, work
        repeats *= 2
        if time.monotonic() - started + 2 * (compile_s + 2 * run) > budget:
            if run >= RUN_OVER_COMPILE_LEAST * compile_s:
                return x, rng, timing, fn, work
            raise CheckInconclusive(
                "your first_call_s (large work): the checker could not size the work "
                "within its budget", evidence=f"{repeats // 2} repeats at n={x.shape[0]} "
                f"ran {run * 1e3:.4g} ms on the chip against a compile of "
                f"{compile_s * 1e3:.4g} ms; a verdict needs a run of {RUN_OVER_COMPILE:g}x "
                f"the compile; {load_text()}")


def own_compile_s(rng, x, ctx=None, work=STAGE1) -> float:
    """Seconds to trace, lower and compile a fresh copy of the stage-1 work for ``x`` (no
    run): the compile a first call holds, timed alone (on the chip, where the learner's
    code runs on one; ``work``: the catalog name and parameters used there)."""
    scale = float(rng.uniform(0.5, 2.0))
    if ctx is not None and on_chip(ctx):
        return compile_on_device(ctx.learner, Workload(work[0], scale=scale, **work[1]), x)
    fn = jax.jit(catalog.stage1_work(scale))
    start = time.perf_counter()
    fn.lower(x).compile()
    return time.perf_counter() - start


def own_first_call(rng, x, warm: int, ctx=None, work=STAGE1):
    """The checker's own synced first call of a fresh copy of the stage-1 work (a scale
    of its own, so it compiles here), and ``warm`` warmed samples after it; and the
    jitted copy, for more warmed samples later. Where the learner's code runs on an
    accelerator, both are taken on the chip (``KeptWork``)."""
    from coursekit.measure.timing import Timing, count_compiles
    if ctx is not None and on_chip(ctx):
        key = f"first-{ctx.seed}-{int(rng.integers(2**62))}"
        got = time_on_device(ctx.learner, Workload(work[0], scale=float(
            rng.uniform(0.5, 2.0)), **work[1]), x, iters=max(warm, 1), first=True, keep=key)
        return Timing(got["first_call_s"], got["samples_s"][:warm]), \
            KeptWork(ctx.learner, key)
    fn = jax.jit(catalog.stage1_work(float(rng.uniform(0.5, 2.0))))
    with count_compiles() as compiles:
        timing = time_synced(fn, x, warmup=0, iters=warm)
    if compiles[0] < 1:
        raise RuntimeError("the checker's own first call did not compile")
    return timing, fn


def learner_first_call(impl, ctx, x, rng, warmup: int, iters: int, what: str,
                       work=STAGE1) -> float:
    time_fn = get_function(impl, "time_fn")
    workload = Workload(work[0], scale=float(rng.uniform(0.5, 2.0)), **work[1])
    m = require_keys(time_fn(workload, x, warmup=warmup, iters=iters), MEASUREMENT_KEYS,
                     "time_fn")
    times_within_wall(what, [m], impl.__bridge__.last_wall_s)
    calls, compiled_at = reported_counts(what, workload.facts)
    fail_unless(calls == 1 + warmup + iters and compiled_at == [0],
                f"{what}: time_fn made the wrong calls", yours=f"{calls} calls, compiled "
                f"in calls {compiled_at}", expected=f"{1 + warmup + iters} calls, the "
                "compile in call 0 only", hint="one first call, warmup untimed calls, then "
                "iters timed calls")
    return as_float(m["first_call_s"], "first_call_s")


def geometric_mean(a: float, b: float) -> float:
    return math.sqrt(a * b)


FIRST_CALL_AGAINST = ("the checker's own first call of a fresh copy of the same work "
                      "(trace + compile + run), measured in turn with yours")


def first_call_small(impl, ctx) -> None:
    """Compile-dominated: a first call without its compile is a warmed call. Round 0 is
    yours between two of the checker's; each later round the faster of two fresh copies a
    side (cheap: a tiny program). A first call without its compile is one warmed call of
    ~0.1 ms, which a stall of a few ms under load once read as 0.1 of a compile in one
    round of ten; the faster of two is not stalled twice as often."""
    x, rng = first_call_input(ctx, "small")
    before, _ = own_first_call(rng, x, 3, ctx)
    what = "time_fn (small work)"
    yours = learner_first_call(impl, ctx, x, rng, 1, 3, what)
    after, _ = own_first_call(rng, x, 3, ctx)
    warmed = statistics.median(before.samples_s + after.samples_s)
    timing_verdict(
        lambda i: min(learner_first_call(impl, ctx, x, rng, 1, 3, what) for _ in range(2)),
        lambda i: min(own_first_call(rng, x, 0, ctx)[0].first_call_s for _ in range(2)),
        (1 / FIRST_CALL_FLOOR, math.inf), f"your first_call_s (small work, n={x.shape[0]})",
        against=FIRST_CALL_AGAINST,
        first=(yours, geometric_mean(before.first_call_s, after.first_call_s)),
        budget_s=BUDGET_S["first_call_small"], max_rounds=10,
        too_fast=f"there is no compile in it (a warmed call of this work takes "
        f"{warmed * 1e3:.3g} ms): time the very first call of fn, before any warm-up call, "
        "and report that time, not a warmed sample")


def first_call_medium(impl, ctx) -> None:
    """A first call that holds the warm-up calls is many runs longer."""
    x, rng = first_call_input(ctx, "medium")
    before, _ = own_first_call(rng, x, 1, ctx)
    lo, hi = WARMUP_RANGE
    needed = math.ceil(WARMUP_OVER_FIRST * before.first_call_s / min(before.samples_s))
    if needed > hi and on_chip(ctx):
        # a chip's compile (seconds) dwarfs even the most warm-up calls a round affords
        # (microseconds each): no first_call_s could tell them apart there, and each round
        # costs three compiles (14 s on a TPU v5e, undecided). The large case on the chip
        # checks the first call's wait; this one is the CPU's.
        return
    warmup = max(lo, min(hi, needed))
    what = "time_fn (medium work)"
    started = time.monotonic()
    yours = learner_first_call(impl, ctx, x, rng, warmup, 2, what)
    after, _ = own_first_call(rng, x, 1, ctx)
    round_s = time.monotonic() - started
    run = min(before.samples_s + after.samples_s)
    holds_more = (f"it holds more than one call (compile + one run of {run * 1e3:.3g} ms; "
                  f"warmup={warmup} calls follow it): stop the first call's clock when its "
                  "result is ready, before the warm-up calls")
    timing_verdict(
        lambda i: learner_first_call(impl, ctx, x, rng, warmup, 1, what),
        lambda i: own_first_call(rng, x, 0, ctx)[0].first_call_s,
        (0.0, FIRST_CALL_CEILING), f"your first_call_s (medium work, n={x.shape[0]}, "
        f"warmup={warmup})", against=FIRST_CALL_AGAINST,
        first=(yours, geometric_mean(before.first_call_s, after.first_call_s)),
        budget_s=BUDGET_S["first_call_medium"], first_cost_s=round_s, too_fast=holds_more,
        too_slow=holds_more)


def first_call_large_on_chip(impl, ctx) -> None:
    """On an accelerator a compile takes seconds (7.8 s on a TPU v5e), so no run of a
    budget's length dwarfs it and a clock cannot tell a first call that waits from one that
    does not. What can: a first call of the repeated stage-1 step (a run far longer than a
    dispatch) followed at once by a timed call; the learner process's call counter sees
    whether the first one's output was ready when the second began (only ever a reason to
    fail, never a pass by itself: the small and medium cases time the rest)."""
    rng = ctx.rng("first-call-large")
    x = square_input(rng, CHIP_LARGE_N)
    what = "time_fn (large work, on the chip)"
    time_fn = get_function(impl, "time_fn")
    workload = Workload("performance-audit/stage1_repeated", scale=float(
        rng.uniform(0.5, 2.0)), repeats=CHIP_REPEATS[0] * 64)
    m = require_keys(time_fn(workload, x, warmup=0, iters=1), MEASUREMENT_KEYS, "time_fn")
    times_within_wall(what, [m], impl.__bridge__.last_wall_s)
    unready = reported_unready(what, workload.facts)
    fail_unless(0 not in unready, f"{what}: the first call returned before its work was "
                "done: its output was not ready when the next call began",
                yours=f"first_call_s {as_float(m['first_call_s'], 'first_call_s'):.4g} s",
                expected="a first call that holds compile + one whole run",
                hint="synchronise the first call inside its timed boundary too "
                "(jax.block_until_ready, or the host read)")


def first_call_large(impl, ctx) -> None:
    """One run far longer than the compile: an unsynced first call misses the run."""
    if on_chip(ctx):
        return first_call_large_on_chip(impl, ctx)
    x, rng, before, fn, work = (*large_first_call_input(ctx), STAGE1)
    what = "time_fn (large work)"
    started = time.monotonic()
    yours = learner_first_call(impl, ctx, x, rng, 0, 1, what, work)
    after = synced_samples(fn, x, iters=1)[0]
    round_s = time.monotonic() - started
    timing_verdict(
        lambda i: learner_first_call(impl, ctx, x, rng, 0, 1, what, work),
        lambda i: synced_samples(fn, x, iters=1)[0],
        (RUN_FLOOR, math.inf), f"your first_call_s (large work, n={x.shape[0]})",
        against="one warmed, synchronised run of the same work by the checker, measured "
        "in turn with yours", first=(yours, geometric_mean(before.samples_s[0], after)),
        budget_s=BUDGET_S["first_call_large"], first_cost_s=round_s,
        too_fast="your first call's clock stopped before its work was done (a first call "
        f"holds compile + one whole run; the checker's own took "
        f"{before.first_call_s * 1e3:.4g} ms): its wait belongs inside its timed boundary, "
        "as every sample's does")


@checker.check(1)
def first_call_is_compile_and_run(impl, ctx):
    # three verdicts, each decided in rounds; an undecided one does not hide a FAIL after it
    all_verdicts(lambda: first_call_small(impl, ctx), lambda: first_call_medium(impl, ctx),
                 lambda: first_call_large(impl, ctx))


@checker.check(1)
def raw_samples_kept(impl, ctx):
    iters = int(ctx.rng("iters").integers(5, 9))
    m, _ = learner_measurement(impl, ctx, warmup=1, iters=iters)
    samples_of(m, "time_fn", iters)


@checker.check(1)
def output_check_catches_wrong_output(impl, ctx):
    time_fn = get_function(impl, "time_fn")
    workload, work, x = stage1_workload(ctx)
    # the right output as the device that runs the learner's code computes it (a chip's
    # float32 tanh and products differ from a CPU's in the sixth digit)
    right = output_on_device(ctx, workload, x) if on_chip(ctx) else np.asarray(
        jax.jit(work)(x))
    wrong = right.copy()
    rng = ctx.rng("wrong-output")
    i, j = (int(v) for v in rng.integers(0, right.shape[0], 2))
    wrong[i, j] += 0.1 * float(np.abs(right).max()) + 0.1
    good = require_keys(time_fn(workload, x, warmup=0, iters=2, expected=right),
                        MEASUREMENT_KEYS, "time_fn")
    workload, _, _ = stage1_workload(ctx)  # a fresh jit, as before
    bad = require_keys(time_fn(workload, x, warmup=0, iters=2, expected=wrong),
                       MEASUREMENT_KEYS, "time_fn")
    fail_unless(good["output_ok"] is True, "a correct output was not reported as correct",
                yours=good["output_ok"], expected=True,
                hint="output_ok is True exactly when the first call's output is within "
                "rtol/atol of expected, elementwise (np.allclose semantics)")
    fail_unless(bad["output_ok"] is False,
                f"an output wrong at element ({i}, {j}) was not caught",
                yours=bad["output_ok"], expected=False,
                hint=f"one element of {right.shape[0]}x{right.shape[1]} was off by "
                f"{wrong[i, j] - right[i, j]:.3g}: the first call's whole output is compared "
                "with expected, before anything is timed")
    for name, got, want in (("a correct", good, 2), ("a wrong", bad, 0)):
        fail_unless(isinstance(got["samples_s"], list) and len(got["samples_s"]) == want,
                    f"with {name} output, time_fn must give {want} warmed samples",
                    yours=got["samples_s"], expected=f"{want} samples (iters=2)",
                    hint="a checked, correct output is timed as usual; a wrong one is "
                    "not timed at all")
    # the tolerances are the caller's (np.allclose semantics with rtol and atol), and
    # without expected nothing was checked: output_ok None
    off = {"rtol": (right * (1 + 3e-3), {"rtol": 1e-2}),
           "atol": (right + 3e-3, {"rtol": 0.0, "atol": 1e-2})}
    for name, (expected, tolerance) in off.items():
        got = require_keys(time_fn(stage1_workload(ctx)[0], x, warmup=0, iters=1,
                                   expected=expected, **tolerance), MEASUREMENT_KEYS, "time_fn")
        kind = "relative" if name == "rtol" else "absolute"
        fail_unless(got["output_ok"] is True, f"an output within the {name} it was given "
                    f"({tolerance}) was reported wrong", yours=got["output_ok"],
                    expected=True, hint=f"every element is 3e-3 off ({kind}): inside the "
                    f"tolerance passed in ({name}={tolerance[name]:g}), which your comparison "
                    "did not use")
    # np.allclose(a, b) scales rtol by |b|: the output is compared with expected, so an
    # output 1.9x smaller than expected everywhere is within rtol=0.5 (0.9 |output| off,
    # 0.95 allowed) where the comparison the other way round (0.5 allowed) is not
    got = require_keys(time_fn(stage1_workload(ctx)[0], x, warmup=0, iters=1,
                               expected=right * 1.9, rtol=0.5, atol=0.0),
                       MEASUREMENT_KEYS, "time_fn")
    fail_unless(got["output_ok"] is True, "an output within rtol of expected (np.allclose("
                "output, expected, rtol=0.5)) was reported wrong", yours=got["output_ok"],
                expected=True, hint="expected is 1.9x the output everywhere: each element "
                "is off by 0.9x the output's size, within rtol x |expected| (0.95x) but not "
                "within rtol x |output| (0.5x); np.allclose(a, b) scales the tolerance by "
                "|b|, and the output is the one compared with expected")
    unchecked = require_keys(time_fn(stage1_workload(ctx)[0], x, warmup=0, iters=1),
                             MEASUREMENT_KEYS, "time_fn")
    fail_unless(unchecked["output_ok"] is None, "without expected, output_ok must be None",
                yours=unchecked["output_ok"], expected=None, hint="no expected output given: "
                "nothing was checked, which is neither True nor False")


@checker.check(1)
def time_fn_refuses_an_unknown_sync(impl, ctx):
    """The contract: sync is "block_until_ready" or "host_read"; anything else is a
    ValueError (a record saying sync="none" would pass for a measurement)."""
    time_fn = get_function(impl, "time_fn")
    workload, _, x = stage1_workload(ctx)
    try:
        got = time_fn(workload, x, warmup=0, iters=1, sync="none")
    except LearnerCodeError as err:
        if isinstance(err, TamperEvidence) or err.kind != "exception":
            raise
        fail_unless(err.exc_type == "ValueError", f"time_fn(sync='none') raised "
                    f"{err.exc_type or 'an exception'}, not ValueError", yours=str(err)[:200],
                    expected="ValueError naming sync", hint="an unknown sync is the caller's "
                    "mistake: refuse it by name (ValueError) before anything is timed")
        return
    fail_unless(False, "time_fn(sync='none') returned a measurement",
                yours={k: got.get(k) for k in ("sync", "samples_s")} if isinstance(got, dict)
                else got, expected="ValueError: sync must be 'block_until_ready' or "
                "'host_read'", hint="a measurement that did not wait in a way the contract "
                "names is no measurement: refuse any other sync with ValueError")


# Fields two measurements of one configuration may differ in: what was measured, not how
# (another run of the same configuration has other samples and times; iters says only how
# many samples there are). comparable() must accept a pair that differs in these alone.
SAME_CONFIGURATION = {
    "iters": (lambda m: m["iters"] + 4 if isinstance(m.get("iters"), int) else 9,
              "iters is how many samples were taken, not how: two runs of one "
              "configuration may take different numbers of samples"),
    "samples_s": (lambda m: [s * 1.7 for s in m["samples_s"]] + [m["samples_s"][0]],
                  "the samples are what was measured: two runs of one configuration always "
                  "differ in them"),
    "first_call_s": (lambda m: m["first_call_s"] * 0.6,
                     "first_call_s is what was measured: two runs of one configuration "
                     "differ in it"),
    "label": (lambda m: str(m.get("label")) + "-again",
              "a label names a run; it is no part of its configuration"),
}


def refused_copy_hint(m: dict, reasons) -> str:
    """Why a measurement refused beside an exact copy of itself: every field is equal, so
    a reason can only come from a field read as a failure on its own. The one seen
    (blind batch 4): ``output_ok`` None, a run given no expected output, read as False."""
    about_output = isinstance(reasons, list) and any("output" in str(r).lower()
                                                     for r in reasons)
    if m.get("output_ok") is None and about_output:
        return ("both measurements have output_ok None (no expected output was given, so "
                "nothing was checked) and yours refused them over it: None is not a failed "
                "check; only output_ok False makes a measurement unfit to compare")
    return ("the second measurement is an exact copy of the first: every field is equal, "
            "so no difference can refuse them")


@checker.check(1)
def comparable_refuses_exactly_what_differs(impl, ctx):
    comparable = get_function(impl, "comparable")
    m, _ = learner_measurement(impl, ctx, warmup=1, iters=3)
    same = comparable(m, copy.deepcopy(m))
    fail_unless(isinstance(same, list) and same == [] and type(same) is list,
                "two measurements of the same configuration were refused",
                yours=same, expected=[], hint=refused_copy_hint(m, same))
    # another measurement of the same configuration: only what was measured differs
    for field, (change, why) in SAME_CONFIGURATION.items():
        other = copy.deepcopy(m)
        other[field] = change(other)
        reasons = comparable(m, other)
        fail_unless(isinstance(reasons, list) and reasons == [],
                    f"two measurements of one configuration that differ only in {field} were "
                    "refused", yours=reasons, expected=[], hint=why)
    for field, change in (("shapes", lambda s: [[d + 1 for d in shape] for shape in s]),
                          ("dtypes", lambda s: ["bfloat16" for _ in s]),
                          ("sync", lambda s: "none"), ("warmup", lambda s: s + 3),
                          ("backend", lambda s: "tpu" if s != "tpu" else "gpu")):
        other = copy.deepcopy(m)
        other[field] = change(other[field])
        reasons = comparable(m, other)
        fail_unless(isinstance(reasons, list) and len(reasons) > 0,
                    f"measurements with different {field} were accepted as comparable",
                    yours=reasons, expected=f"a reason naming {field}",
                    hint=f"{field} is part of how a measurement was made: a pair that "
                    "differs in it is refused, with a reason naming it")
        text = " ".join(map(str, reasons)).lower()
        fail_unless(field.rstrip("s") in text,
                    f"the reasons do not name the field that differs ({field})",
                    yours=reasons, expected=f"a reason mentioning {field}")
    every_argument_recorded(impl, ctx, comparable)
    # a measurement whose output check failed is refused whatever else agrees
    failed = copy.deepcopy(m)
    failed["output_ok"] = False
    for pair in ((m, failed), (failed, m)):
        reasons = comparable(*pair)
        fail_unless(isinstance(reasons, list) and len(reasons) > 0,
                    "a measurement whose output check failed was accepted as comparable",
                    yours=reasons, expected="a reason naming output_ok",
                    hint="a wrong output is never comparable: refuse output_ok False")
    # both failed: equal, and still refused; a checked result beside an unchecked one:
    # neither failed, accepted (blind-b7: output_ok compared as one more field)
    reasons = comparable(failed, copy.deepcopy(failed))
    fail_unless(isinstance(reasons, list) and len(reasons) > 0,
                "two measurements whose output checks both failed were accepted as "
                "comparable", yours=reasons, expected="a reason naming output_ok",
                hint="each has output_ok False: each is unfit to compare whatever the other "
                "holds, so two alike are refused too (output_ok is not a field that must "
                "merely match)")
    for ours, theirs in ((None, True), (True, None)):
        pair = [copy.deepcopy(m), copy.deepcopy(m)]
        pair[0]["output_ok"], pair[1]["output_ok"] = ours, theirs
        reasons = comparable(*pair)
        fail_unless(isinstance(reasons, list) and reasons == [],
                    f"a measurement with output_ok {ours} beside one with {theirs} was "
                    "refused", yours=reasons, expected=[],
                    hint="neither output check failed (None: none was asked for): only "
                    "output_ok False refuses; it says whether a check failed, not how the "
                    "measurement was made, so it is no field that must match")


def every_argument_recorded(impl, ctx, comparable) -> None:
    """``time_fn`` on a function of two array arguments (``jnp.matmul`` of a float32
    (m, k) and a bfloat16 (k, n)), then once more with the second argument alone changed
    to (k, n2): each record lists the shape and dtype of every array argument, in order,
    and ``comparable`` refuses the pair, naming the shapes. Tiny products: milliseconds."""
    time_fn = get_function(impl, "time_fn")
    rng = ctx.rng("two-arguments")
    m, k, n = (int(v) | 1 for v in rng.integers(17, 49, 3))
    n2 = n + 2 * int(rng.integers(1, 5))
    a = jnp.asarray(rng.standard_normal((m, k), dtype=np.float32))
    records = []
    for cols in (n, n2):
        b = jnp.asarray(rng.standard_normal((k, cols), dtype=np.float32), jnp.bfloat16)
        with on_input(f"fn = jnp.matmul, args = a float32 ({m}, {k}) and a bfloat16 "
                      f"({k}, {cols}) array, warmup=0, iters=1"):
            got = require_keys(time_fn(Workload("jnp.matmul"), a, b, warmup=0, iters=1),
                               MEASUREMENT_KEYS, "time_fn")
        want = ([[m, k], [k, cols]], ["float32", "bfloat16"])
        yours = (got["shapes"], got["dtypes"])
        fail_unless(yours == want, "time_fn(fn, a, b) does not record the shape and dtype "
                    "of every array argument", yours=yours, expected=want,
                    hint=arguments_hint(yours, want))
        records.append(got)
    # an array and a Python scalar: one array argument, so one shape and one dtype
    with on_input(f"fn = jnp.multiply, args = a float32 ({m}, {k}) array and the Python "
                  "float 2.0, warmup=0, iters=1"):
        scaled = require_keys(time_fn(Workload("jnp.multiply"), a, 2.0, warmup=0, iters=1),
                              MEASUREMENT_KEYS, "time_fn")
    want, yours = ([[m, k]], ["float32"]), (scaled["shapes"], scaled["dtypes"])
    fail_unless(yours == want, "time_fn(fn, a, 2.0) must record the array argument alone",
                yours=yours, expected=want,
                hint=f"yours lists {len(yours[0])} arguments where one is an array: shapes "
                "and dtypes describe the array arguments (the Python float is none), so two "
                "runs that differ only in a scalar stay comparable")
    reasons = comparable(*records)
    text = " ".join(map(str, reasons)).lower() if isinstance(reasons, list) else ""
    fail_unless(isinstance(reasons, list) and "shape" in text,
                f"two measurements of jnp.matmul(a, b) whose second argument differs ({k}, "
                f"{n}) vs ({k}, {n2}) were accepted as comparable", yours=reasons,
                expected="a reason naming the shapes", hint="the first argument is the same "
                "in both; the second's shape differs: comparable must see every array "
                "argument's shape")


def arguments_hint(yours, want) -> str:
    """What a record's shapes and dtypes show against the call's two array arguments."""
    shapes, dtypes = yours
    if shapes == want[0][:1] or dtypes == want[1][:1]:
        return (f"your record lists the first argument alone ({shapes}, {dtypes}) for a call "
                f"with two array arguments ({want[0]}, {want[1]}): shapes and dtypes hold "
                "every array argument, in order, so comparable sees a change in any of them")
    return (f"a call with two array arguments ({want[0]}, {want[1]}) recorded {shapes}, "
            f"{dtypes}: shapes and dtypes hold one entry per array argument, in order")


@checker.check(1)
def shape_change_alone(impl, ctx):
    experiment = get_function(impl, "experiment_shape_change")
    comparable = get_function(impl, "comparable")
    workload, _, x = stage1_workload(ctx)
    extra = int(ctx.rng("extra").integers(1, 8)) * 2 + 1
    x2 = jnp.pad(x, ((0, extra), (0, extra)))
    result = require_keys(experiment(workload, x, x2, warmup=1, iters=4), ("base", "changed"),
                          "experiment_shape_change")
    base = require_keys(result["base"], MEASUREMENT_KEYS, "base")
    changed = require_keys(result["changed"], MEASUREMENT_KEYS, "changed")
    compiled_at = cross_check_counts(impl, ctx, workload.facts, "experiment_shape_change",
                                     base, changed)["compiled_at"]
    fail_unless(len(compiled_at) == 2,
                "the shape change should cost exactly one new compile",
                yours=f"compiles at calls {compiled_at}",
                expected="one compile per shape",
                hint="fn compiled once: the changed shape was compiled before its measurement "
                "began (a call outside the two measurements)" if len(compiled_at) < 2 else
                f"fn compiled {len(compiled_at)} times for two shapes: something besides the "
                "shape changed between calls")
    fail_unless(changed["compiles_first_call"] >= 1 and changed["compiles_warmed"] == 0,
                "the changed shape's compile is not in its first call",
                yours=f"first={changed['compiles_first_call']} warmed="
                      f"{changed['compiles_warmed']}", expected="first>=1 warmed=0",
                hint="the new shape compiles in the changed measurement's first call, which "
                "its compiles_first_call counts")
    for name, m, arg in (("base", base, x), ("changed", changed, x2)):
        fail_unless(m["shapes"] == [list(arg.shape)] and m["dtypes"] == [str(arg.dtype)],
                    f"the {name} measurement does not report the input this check passed",
                    yours=(m["shapes"], m["dtypes"]),
                    expected=([list(arg.shape)], [str(arg.dtype)]),
                    hint="time fn on x and on x_changed, unchanged")
    fail_unless(base["warmup"] == changed["warmup"] == 1 and base["sync"] == changed["sync"],
                "only the shape may change: warm-up and sync must be the ones asked for",
                yours=[(m["warmup"], m["sync"]) for m in (base, changed)],
                expected="warmup=1 and the same sync for both",
                hint="pass warmup and iters through to both time_fn calls")
    reasons = comparable(base, changed)
    text = " ".join(map(str, reasons)).lower()
    others = [f for f in ("dtype", "sync", "warmup", "backend", "output") if f in text]
    fail_unless(reasons and "shape" in text and not others,
                "comparable() should name the shape, and only the shape",
                yours=reasons, expected="one reason: shapes differ")


def host_read_every_timed_call(facts: dict, timed: int) -> None:
    """On CPU a host read and block_until_ready take the same time, so the step's own
    first output leaf (``HostReadProbe``) says which one time_fn used: with
    sync="host_read" each timed call's outputs are read to the host."""
    calls = int(facts.get("calls", 0))
    timed_calls = list(range(calls - timed, calls))
    unread = [i for i in timed_calls if i not in facts.get("host_read_at", [])]
    fail_unless(not unread, "time_fn(sync='host_read') reported a host read, but the "
                "step's first output leaf (a host value) was not read to the host in "
                f"timed calls {unread} of {timed_calls}", yours=f"read in calls "
                f"{facts.get('host_read_at', [])}", expected=f"read in every timed call "
                f"{timed_calls}", hint="the record says host_read, but the timed calls "
                "waited another way, or read only some output leaves: the sync a record "
                "names is the one its samples used")


@checker.check(1)
def host_read_alone(impl, ctx):
    experiment = get_function(impl, "experiment_host_read")
    comparable = get_function(impl, "comparable")
    cpu_clock_fails(impl, ctx)  # a clock that misses waits reads any sync as too fast
    workload, _, x = stage1_workload(ctx)
    result = require_keys(experiment(workload, x, warmup=1, iters=6),
                          ("block", "host_read"), "experiment_host_read")
    block = require_keys(result["block"], MEASUREMENT_KEYS, "block")
    read = require_keys(result["host_read"], MEASUREMENT_KEYS, "host_read")
    fail_unless(block["sync"] == "block_until_ready" and read["sync"] == "host_read",
                "the two measurements must differ in sync method",
                yours=(block["sync"], read["sync"]),
                expected=("block_until_ready", "host_read"))
    read_first = (median_s(samples_of(read, "host_read", raw=False)), checker_median(ctx, 6))
    reasons = comparable(block, read)
    text = " ".join(map(str, reasons)).lower()
    others = [f for f in ("shape", "dtype", "warmup", "backend", "output") if f in text]
    fail_unless(reasons and "sync" in text and not others,
                "comparable() should name the sync method, and only it",
                yours=reasons, expected="one reason: sync differs")
    # A step with more than one output leaf: the first is a host value ready at once, the
    # second is the same device work. A host read must read every leaf (a read of the first
    # alone times nothing); the checker's reference is its own synced timing of the work.
    time_fn = get_function(impl, "time_fn")
    several, _, _ = stage1_workload(ctx, "performance-audit/host_metric_step")
    m = require_keys(time_fn(several, x, warmup=1, iters=4, sync="host_read"),
                     MEASUREMENT_KEYS, "time_fn")
    host_read_every_timed_call(several.facts, timed=4)
    leaves_first = (median_s(samples_of(m, "host_read", raw=False)), checker_median(ctx, 4))

    # The two medians against the checker's, each in rounds (the facts above first, so a
    # noisy machine leaves no mistake of them unsaid).
    def host_read_round(i):
        result = require_keys(experiment(stage1_workload(ctx)[0], x, warmup=ROUND_WARMUP,
                                         iters=ROUND_ITERS), ("block", "host_read"),
                              "experiment_host_read")
        read = require_keys(result["host_read"], MEASUREMENT_KEYS, "host_read")
        return median_s(samples_of(read, "host_read", raw=False))

    def leaves_round(i):
        several, _, _ = stage1_workload(ctx, "performance-audit/host_metric_step")
        m = require_keys(time_fn(several, x, warmup=ROUND_WARMUP, iters=ROUND_ITERS,
                                 sync="host_read"), MEASUREMENT_KEYS, "time_fn")
        return median_s(samples_of(m, "host_read", raw=False))

    all_verdicts(
        lambda: timing_verdict(
            host_read_round, lambda i: checker_median(ctx), TIME_RATIO_WINDOW,
            "the host-read median", against=AGAINST_MEDIAN, first=read_first,
            budget_s=BUDGET_S["host_read"], max_rounds=8,
            too_fast="your host-read samples end before the work does: the read that waits "
            "for the result belongs inside the timed region", too_slow=TOO_SLOW),
        lambda: timing_verdict(
            leaves_round, lambda i: checker_median(ctx), TIME_RATIO_WINDOW,
            "the host-read median of a step with two output leaves",
            against=AGAINST_MEDIAN, first=leaves_first,
            budget_s=BUDGET_S["host_read_leaves"], max_rounds=8,
            too_fast="this step's first output leaf is a host value, ready at once: a read "
            "of it alone waits for nothing; the host read reads every leaf", too_slow=TOO_SLOW))

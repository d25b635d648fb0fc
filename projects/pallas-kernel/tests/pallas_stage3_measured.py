"""pallas-kernel stage 3: measured. The learner's ``sweep`` runs in the learner process
with a probed kernel (its calls, compiles, entry and exit stamps, checked against this
process's wall clock around the request): its records must be complete, declare what ran,
time each call inside the call's own window, compile only in the first call, and never
time a kernel whose output the checker's planted kernels make wrong. ``summarize`` gets
synthetic records with known medians and must give the checker's own summary, refuse
records it cannot compare and state an interpreted run's caveat.

Timing: the learner's sweep times itself in the learner process; this process times the
learner's exported programs itself, synchronised, interleaved with the sweep round by
round, and compares ratios with wide windows, never absolute times. The ratios are
decided by ``coursekit.checking.probes.ratio_verdict``: more rounds only while the
interval of a ratio is still open, and INCONCLUSIVE (never FAIL) when the rounds or the
budget run out first. On CPU the kernel runs interpreted: nothing here calls it faster or
slower than anything, only the learner's timing of it against the checker's.

Budget: the synchronisation check's interleaved rounds are the only part that grows with
noise: at most SYNC_MAX_ROUNDS rounds, and SYNC_BUDGET_S seconds of rounds for the
kernel's ratio and then for the baseline's (both scaled by COURSE_TIMING_BUDGET), past
which a round already begun still ends. What the stage took, idle and under load:
docs/checkers/pallas-kernel.md, "Cost"."""

from __future__ import annotations

import json
import math
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
from pallas_harness import (
    BLOCK_ROWS,
    DTYPES,
    budget,
    checker,
    draw,
    exported_kernel,
    length,
    ragged,
)

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction, Workload
from coursekit.checking.contract import short
from coursekit.checking.device import learner_backend, learner_may_hold_accelerator
from coursekit.checking.errors import (
    CheckFailed,
    CheckInconclusive,
    LearnerCodeError,
    TamperEvidence,
)
from coursekit.checking.learner import get_function
from coursekit.checking.probes import (
    CLOCK_SLACK_FRACTION,
    CLOCK_SLACK_S,
    beyond_wall,
    ended_before_ready,
    ratio_verdict,
    samples_of,
)
from coursekit.checking.timestamps import grow_as_timestamps, timestamps_failed
from coursekit.checking.values import as_float, fail_unless, require_keys
from coursekit.measure.timing import time_synced
from coursekit.workloads.remote_pallas_kernel import DICT_ITEMS

# A kernel timing that forgot to wait is 10^3 times too fast on the synchronisation
# check's workload (SYNC_ROWS x SYNC_COLS); a 4x window cannot flake on a loaded machine
# yet cannot pass a missing sync.
TIME_RATIO_WINDOW = 4.0
# The jnp baseline is a far shorter call (measured on 2 CPU cores there: about 1-3 ms
# synchronised vs about 0.01 ms unsynchronised), so load moves its median relatively
# further: its window is twice as wide, still far inside that gap.
BASELINE_RATIO_WINDOW = 2 * TIME_RATIO_WINDOW
# "helps" means faster than the baseline by this factor; planted speedups stay outside
# [0.9, 1.2], so any margin a learner picks in that range gives the same verdicts.
HELP_MARGIN = 1.1


RECORD_KEYS = ("impl", "shape", "dtype", "block_rows", "grid", "mode", "backend",
               "warmup", "iters", "first_call_s", "samples_s", "compiles_first_call",
               "compiles_warmed", "output_ok")


class ProbedCalls:
    """The probe's report of the kernel calls a sweep made in the learner process (every
    call's (shape, block_rows), entry, exit and compiles), cross-checked here: every stamp
    inside this process's wall-clock window around the request (``time.perf_counter`` is
    the system's monotonic clock in both processes), in order, each call ending before
    the next begins. A learner's timing of a call must contain the call (at least exit -
    entry) and lie between the previous call's return and the next call's start: on a
    loaded machine too, since preemption anywhere in between stays inside that span."""

    def __init__(self, answer, started: float, finished: float, what: str):
        calls, returned = answer.get("calls"), answer.get("returned")
        ok = isinstance(calls, list) and type(returned) is float
        previous = started
        for c in calls if ok else ():
            ok = ok and isinstance(c, dict) and type(c.get("entry")) is float \
                and type(c.get("exit")) is float and type(c.get("compiles")) is int \
                and c["compiles"] >= 0 and previous <= c["entry"] <= c["exit"]
            previous = c["exit"] if ok else previous
        if not (ok and previous <= returned <= finished):
            raise TamperEvidence(f"{what}: the learner process's record of the kernel calls "
                                 "does not fit the request's own time window "
                                 f"[{started:.6f}, {finished:.6f}] s as measured here")
        self.calls, self.started, self.returned = calls, started, returned

    def group(self, shape, block_rows: int) -> list[dict]:
        return [c for c in self.calls
                if c["shape"] == list(shape) and c["block_rows"] == int(block_rows)]

    def report(self, shape, block_rows: int) -> dict:
        mine = self.group(shape, block_rows)
        return {"calls": len(mine), "compiled_at": [k for k, c in enumerate(mine)
                                                    if c["compiles"]],
                "compiles": sum(c["compiles"] for c in mine)}

    def windows(self, shape, block_rows: int) -> list[tuple[float, float]]:
        """[(least_s, most_s) per call of the group]: the call's own duration, and the
        time from the previous call's return (or the request's start) to the next call's
        entry (or the sweep's return). A clock started after the previous call returned
        and stopped before the next one began reads within both, however long the
        learner process was preempted in between."""
        out = []
        for k, c in enumerate(self.calls):
            if c["shape"] == list(shape) and c["block_rows"] == int(block_rows):
                before = self.calls[k - 1]["exit"] if k else self.started
                after = self.calls[k + 1]["entry"] if k + 1 < len(self.calls) \
                    else self.returned
                out.append((c["exit"] - c["entry"], after - before))
        return out




def within_call_window(value, window, what: str) -> None:
    least, most = window
    seconds = as_float(value, what)
    fail_unless(least * (1 - CLOCK_SLACK_FRACTION) - CLOCK_SLACK_S <= seconds
                <= most * (1 + CLOCK_SLACK_FRACTION) + CLOCK_SLACK_S,
                f"{what} is not the time of the call it reports",
                yours=f"{seconds * 1e3:.4g} ms", expected=f"between {least * 1e3:.4g} ms "
                f"(the call itself, measured by the checker around it) and {most * 1e3:.4g} "
                "ms (from the previous kernel call's return to the next one's start)",
                hint=window_hint(seconds, least, most))


def timestamps_fail(samples, windows, what: str) -> None:
    """Samples read against one start before the first timed call (timestamps, an honest
    slip) are named so, by the shared rule (``coursekit.checking.timestamps``): one is
    longer than its call's window, and each holds the one before it plus at least its
    own call (which durations, each within its own call, are not). A record whose every
    sample lies in its window is never read so."""
    found = grow_as_timestamps(samples, [least for least, _ in windows],
                               [most for _, most in windows])
    if found:
        raise timestamps_failed(found, what)


def window_hint(seconds: float, least: float, most: float) -> str:
    """What a duration outside its call's window shows."""
    if seconds < least:
        return ("yours is shorter than the call itself: the clock stopped before the "
                "call's output was ready")
    if least * 900 <= seconds <= most * 1100:
        return ("yours is about 1000 times the call: milliseconds, where the record "
                "counts seconds")
    return ("yours is longer than the time from the previous call's return to the next "
            "one's start: it holds more than this call")


def expected_mode() -> str:
    """The mode the learner's kernel must run in where it runs (static: a CPU interprets,
    an accelerator compiles)."""
    return "compiled" if learner_may_hold_accelerator() else "interpreted"


def check_records(records) -> list[dict]:
    fail_unless(isinstance(records, list) and all(isinstance(r, dict) for r in records),
                "sweep must return a list of dicts", yours=short(records))
    for r in records:
        require_keys(r, RECORD_KEYS, "a sweep record")
    try:
        json.dumps(records)
    except (TypeError, ValueError) as err:
        raise CheckFailed(f"sweep records are not JSON-able: {err}",
                          hint="plain floats, ints, strings and lists (float(...), "
                          "list(shape)); no arrays") from None
    return records


def reported_times_fit(impl, records, what: str) -> None:
    """The sweep's reported seconds add up to no more than the request's wall time
    measured here: no harness times more than elapsed (a unit slip fails the same way, so
    it is a failure, not tamper evidence)."""
    timed = 0.0
    for r in records:
        samples = r.get("samples_s")
        for v in [r.get("first_call_s"), *(samples if isinstance(samples, list) else [])]:
            if type(v) in (int, float) and math.isfinite(v) and v > 0:
                timed += v
    wall = impl.__bridge__.last_wall_s
    fail_unless(not beyond_wall(timed, wall), f"{what}: the times in the records add up to "
                "more than the whole sweep took", yours=f"{timed:.4g} s",
                expected=f"at most {wall:.4g} s (the sweep call, timed by the checker)",
                hint="durations that add up to more than the whole call are not each "
                "one call's seconds: a clock's reading, another unit, or calls counted "
                "twice")


def run_sweep(impl, shapes, blocks, kernel=None, **kwargs):
    """The learner's sweep, run in the learner process. With ``kernel`` (the learner's
    ``LearnerFunction`` or a catalog ``Workload``), the kernel it is given is probed there
    (``ProbedCalls``); returns (records, probed calls or None)."""
    get_function(impl, "sweep")
    shapes, blocks = [list(s) for s in shapes], list(blocks)
    if kernel is None:
        records = check_records(impl.sweep(shapes, blocks, **kwargs))
        reported_times_fit(impl, records, "sweep")
        return records, None
    started = time.perf_counter()
    answer = bridge.inspect(impl, "pallas-kernel/sweep_probed", LearnerFunction("sweep"),
                            kernel, shapes, blocks, **kwargs)
    finished = time.perf_counter()
    if not isinstance(answer, dict):
        raise TamperEvidence(f"the sweep probe answered {short(answer)}")
    records = check_records(answer.get("records"))
    probed = ProbedCalls(answer, started, finished, "sweep")
    if isinstance(kernel, Workload) and kernel.facts.get("calls") != len(probed.calls):
        raise TamperEvidence(f"the bridge counted {kernel.facts.get('calls')} calls of the "
                             f"checker's kernel, the probe {len(probed.calls)}")
    return records, probed


def declared(record: dict, what: str, want: dict) -> None:
    """The record's declared facts, compared exactly with what the checker asked for or
    recomputed (the grid: ceil(rows / block_rows) programs)."""
    for key, value in want.items():
        got = record[key]
        same = got == value and type(got) is type(value) if value is not None else got is None
        if isinstance(value, list):
            same = isinstance(got, list) and [type(v) for v in got] == [type(v) for v in value] \
                and got == value
        fail_unless(same, f"{what}: {key} is not what ran", yours=got, expected=value,
                    hint="declare the facts of the run you timed, as plain ints, strings "
                    "and lists (grid: [ceil(rows / block_rows)]; the baseline has none)")


def find(records, impl: str, shape, block_rows=None) -> dict:
    found = [r for r in records if r["impl"] == impl and list(r["shape"]) == list(shape)
             and (impl == "jnp" or r["block_rows"] == block_rows)]
    fail_unless(len(found) == 1, f"expected one {impl} record for shape {list(shape)}"
                + (f", block_rows={block_rows}" if impl == "pallas" else ""),
                yours=f"{len(found)} records", expected="1")
    return found[0]


@checker.check(3)
def sweep_records_complete(impl, ctx):
    rng = ctx.rng("sweep")
    shapes = [(ragged(rng, 17, 40, 8), length(rng, 40, 127, 2)),
              (ragged(rng, 41, 64, 8), length(rng, 129, 300, 2))]
    blocks = sorted(int(b) for b in rng.permutation(BLOCK_ROWS)[:2])
    warmup, iters = 1, int(rng.integers(3, 6))
    get_function(impl, "softmax_pallas")
    records, probed = run_sweep(impl, shapes, blocks, LearnerFunction("softmax_pallas"),
                                dtype="float32", warmup=warmup, iters=iters,
                                seed=int(rng.integers(0, 2**31)))
    fail_unless(len(records) == len(shapes) * (1 + len(blocks)), "one record per shape for "
                "the baseline and one per shape and block size for the kernel",
                yours=len(records), expected=len(shapes) * (1 + len(blocks)))
    # First calls compile different programs (a jnp softmax, kernels of two block sizes,
    # two shapes): their durations differ by far more than 0.1%. One value repeated is
    # a reading of something else (a clock's, a constant), not a duration per first call:
    # the call windows below cannot tell it from a slow compile on a loaded machine.
    firsts = [r["first_call_s"] for r in records]
    if all(type(v) in (int, float) and v > 0 for v in firsts):
        fail_unless(max(firsts) - min(firsts) > 1e-3 * max(firsts), "first_call_s is about "
                    "the same number in every record: not each first call's duration",
                    yours=[f"{v:.6g}" for v in firsts[:6]], expected="the seconds of each "
                    "record's own first (compiling) call", hint="the first calls "
                    "compiled kernels of different shapes and blocks, and no two such "
                    "calls last the same to a thousandth")
    backend, mode = learner_backend(ctx), expected_mode()
    for shape in shapes:
        base = find(records, "jnp", shape)
        fail_unless(base["output_ok"] is True, f"the baseline's output for {list(shape)} was "
                    "judged wrong", yours=base["output_ok"], expected=True)
        samples_of(base, f"baseline {list(shape)}", iters)
        declared(base, f"baseline {list(shape)}", {
            "impl": "jnp", "shape": list(shape), "dtype": "float32", "block_rows": None,
            "grid": None, "mode": "compiled", "backend": backend, "warmup": warmup,
            "iters": iters})
        for b in blocks:
            r = find(records, "pallas", shape, b)
            what = f"kernel {list(shape)} block_rows={b}"
            fail_unless(r["mode"] == mode and r["backend"] == backend,
                        f"{what}: the record must declare the mode and backend that ran",
                        yours=(r["mode"], r["backend"]), expected=(mode, backend))
            fail_unless(r["output_ok"] is True, f"{what}: a correct output was judged wrong",
                        yours=r["output_ok"], expected=True,
                        hint="this kernel is right: the judgement of its output "
                        "refused a correct result (the contract judges it against "
                        "stage 1's references and tolerance)")
            samples = samples_of(r, what, iters)
            declared(r, what, {
                "impl": "pallas", "shape": list(shape), "dtype": "float32", "block_rows": b,
                "grid": [math.ceil(shape[0] / b)], "mode": mode, "backend": backend,
                "warmup": warmup, "iters": iters})
            facts = probed.report(shape, b)
            calls = facts["calls"]
            fail_unless(calls == 1 + warmup + iters, f"{what}: wrong number of kernel calls",
                        yours=calls, expected=f"1 first call + {warmup} warmup + {iters} "
                        "timed", hint=call_count_hint(calls, warmup, iters))
            fail_unless(facts["compiled_at"] == [0] and
                        r["compiles_first_call"] >= 1 and r["compiles_warmed"] == 0,
                        f"{what}: the compile must fall in the first call, and only there",
                        yours=f"compiled in calls {facts['compiled_at']}; "
                        f"record says first={r['compiles_first_call']!r} warmed="
                        f"{r['compiles_warmed']!r}", expected="call 0; first>=1 warmed=0",
                        hint="the record's compile counts are not those JAX's compile "
                        "events (jax.monitoring) show around these calls")
            fail_unless(r["compiles_first_call"] == facts["compiles"],
                        f"{what}: compiles_first_call is not the number of compiles the "
                        "first call made", yours=r["compiles_first_call"],
                        expected=f"{facts['compiles']} (counted by the checker around the "
                        "call)", hint="the first call's count differs from the compiles "
                        "JAX reported during that call alone")
            windows = probed.windows(shape, b)
            within_call_window(r["first_call_s"], windows[0], f"{what}: first_call_s")
            timestamps_fail(samples, windows[1 + warmup:], what)
            for k, sample in enumerate(samples):
                within_call_window(sample, windows[1 + warmup + k], f"{what}: samples_s[{k}]")
    sweep_of_a_watched_kernel(impl, rng)


# The checker's kernel for sweep_of_a_watched_kernel (remote_pallas_kernel_runs): its first
# call's program runs this many chained 256x256 matmuls after its dispatch returns (about
# 0.4 s on one idle CPU core here, several times the watch's 1 ms polling), and its first
# warm-up call compiles a program of its own.
SLOW_MATMULS = 800


def sweep_of_a_watched_kernel(impl, rng) -> None:
    """The learner's sweep given the checker's kernel whose first call returns long before
    its output is ready and whose first warm-up call compiles: the probe (in the learner
    process) stamps each call and the last moment its output was seen unfinished. The
    record's first_call_s must reach that moment (a clock stopped at the dispatch does
    not), and compiles_warmed must count the warm-up call's compile."""
    shape = (ragged(rng, 17, 40, 8), length(rng, 40, 127, 2))
    b, warmup, iters = int(rng.choice(BLOCK_ROWS)), 1, 2
    kernel = Workload("pallas-kernel/slow_first_recompiles", matmuls=SLOW_MATMULS)
    get_function(impl, "sweep")
    started = time.perf_counter()
    answer = bridge.inspect(impl, "pallas-kernel/sweep_watched", LearnerFunction("sweep"),
                            kernel, [list(shape)], [b], dtype="float32", warmup=warmup,
                            iters=iters, seed=int(rng.integers(0, 2**31)))
    finished = time.perf_counter()
    if not isinstance(answer, dict):
        raise TamperEvidence(f"the sweep watch answered {short(answer)}")
    records = check_records(answer.get("records"))
    probed = ProbedCalls(answer, started, finished, "sweep (watched)")
    if kernel.facts.get("calls") != len(probed.calls):
        raise TamperEvidence(f"the bridge counted {kernel.facts.get('calls')} calls of the "
                             f"checker's kernel, the probe {len(probed.calls)}")
    for k, c in enumerate(probed.calls):
        later = probed.calls[k + 1]["entry"] if k + 1 < len(probed.calls) else finished
        seen = c.get("unready_at")
        if not (seen is None or (type(seen) is float and c["exit"] <= seen <= later)):
            raise TamperEvidence(f"the sweep watch saw call {k}'s output unfinished at "
                                 f"{seen!r}, outside [{c['exit']:.6f}, {later:.6f}] s")
    what = f"sweep with the checker's kernel, {list(shape)} block_rows={b}"
    r = find(records, "pallas", shape, b)
    fail_unless(r["output_ok"] is True, f"{what}: a correct output was judged wrong",
                yours=r["output_ok"], expected=True)
    calls = probed.group(shape, b)
    fail_unless(len(calls) == 1 + warmup + iters, f"{what}: wrong number of kernel calls",
                yours=len(calls), expected=1 + warmup + iters)
    first = calls[0]
    if first["unready_at"] is not None:
        unready_s = first["unready_at"] - first["entry"]
        seconds = as_float(r["first_call_s"], f"{what}: first_call_s")
        fail_unless(not ended_before_ready(seconds, unready_s),
                    f"{what}: first_call_s stopped before the first call's output was "
                    "ready", yours=f"{seconds * 1e3:.4g} ms", expected=f"at least "
                    f"{unready_s * 1e3:.4g} ms: the checker's probe saw the output still "
                    f"being computed then (the call itself returned after "
                    f"{(first['exit'] - first['entry']) * 1e3:.4g} ms: compile and "
                    "dispatch only)", hint="the first call's clock stopped while its "
                    "output was still being computed: JAX returns before the work is done, "
                    "and a compile does not make the wait unnecessary")
    want_first = first["compiles"]
    want_warmed = sum(c["compiles"] for c in calls[1:])
    compiled_in = [k for k, c in enumerate(calls) if c["compiles"]]
    fail_unless(r["compiles_warmed"] == want_warmed, f"{what}: compiles_warmed is not the "
                "number of compiles in the calls after the first", yours=r["compiles_warmed"],
                expected=f"{want_warmed} (counted by the checker's probe around each call: "
                f"compiles in calls {compiled_in}; calls 1..{warmup} are the warm-up)",
                hint="count compiles around every call after the first, warm-up calls "
                "included: a compile during warm-up is one the timed calls may meet again")
    fail_unless(r["compiles_first_call"] == want_first, f"{what}: compiles_first_call is "
                "not the number of compiles the first call made",
                yours=r["compiles_first_call"], expected=f"{want_first} (counted by the "
                "checker around the call)")


# The learner's sweep and the checker's own timing alternate, round by round (learner
# first in even rounds, checker first in odd ones), so load that drifts over the check
# moves both alike; one reference measured before or after the sweep would not. A round is
# one sweep of the one shape and block size (a first call, one warm-up, SYNC_ITERS timed
# calls) and the checker's own SYNC_ITERS synchronised calls of each program; each side's
# figure is the median of its round's samples. The kernel's ratio is decided first
# (coursekit.checking.probes.ratio_verdict: rounds until the interval of the ratio clears
# the window, or the rounds or the budget run out), then the baseline's, on the same
# rounds and more only while it is still open.
SYNC_ITERS, SYNC_MAX_ROUNDS = 3, 8
# The checker's own calls a round: the baseline (about 1 ms) is cheap to time more often,
# and a median of 3 such short calls spread by up to 38x between rounds under heavy load
# (about 12 runnable processes a core), which alone left a planted unsynchronised
# baseline undecided.
SYNC_REFERENCE_ITERS = {"pallas": SYNC_ITERS, "jnp": 15}
# The first look after two rounds (the first and one more): under heavy load a round can
# take 15 s, and rounds before the first look run whatever the budget says.
SYNC_MIN_ROUNDS = 2
SYNC_BUDGET_S = {"pallas": 16.0, "jnp": 8.0}
# Programs long enough that a missing sync cannot look synchronised. A short one can: with
# the dispatching thread and XLA's threads on one busy core, a woken XLA thread may run the
# whole program before the dispatch returns. Median unsynchronised / synchronised, one
# core (taskset), 30 trials: a 0.04 ms jnp softmax up to 0.13 (past the baseline's 1/8);
# at 381x7001 at most 0.0075 (jnp) and 0.0003 (kernel). Its blocks are 8192 columns wide.
SYNC_ROWS, SYNC_COLS = (360, 400), (6000, 8100)
# The kernel's share of a round, which is most of it: an interpreted 381x7001 kernel took
# about 100 ms of CPU time a call at block_rows=16 and 48 ms at 64 (process CPU time, the
# median of 7 interleaved calls on this 2-core machine), so rounds on CPU use 64 and twice
# as many fit in the budget; a compiled kernel keeps 16 (its block is held on chip).
SYNC_BLOCK_ROWS = {"interpreted": 64, "compiled": 16}
# The hint by the side of the window the rounds fell on: only a reading below it is what
# a missing wait gives; one above it is a boundary that holds more than the call.
SYNC_HINTS = {
    "below": "your samples are shorter than the call itself: JAX returns before the work "
             "is done, and the clock stopped before the output was ready",
    "above": "your samples are longer than the call itself: each holds more than one call "
             "and its wait (the first call, warm-up calls or the output check belong "
             "outside samples_s)"}


def call_count_hint(calls: int, warmup: int, iters: int) -> str:
    """What a sweep's count of kernel calls off 1 + warmup + iters shows, by how far off
    (its samples were already counted right: ``iters`` of them)."""
    asked = 1 + warmup + iters
    if calls == asked - 1 and warmup:
        return (f"one call short ({calls} of {asked}) with {iters} samples: the compiling "
                "first call was counted as one of the warm-up calls; the warmup calls come "
                "after it")
    if calls == 1 + iters and warmup:
        return f"no warm-up calls were made: {warmup} come between the first call and the samples"
    if calls > asked:
        return (f"{calls - asked} call(s) more than asked: call `kernel(x, block_rows=b)` "
                "once first, then warmup times, then once per sample, and nowhere else")
    return ("call `kernel(x, block_rows=b)` exactly so: once first, warmup times, then once "
            "per sample")


@checker.check(3)
def sweep_timings_synchronised(impl, ctx):
    rng = ctx.rng("synced")
    block_rows = SYNC_BLOCK_ROWS[expected_mode()]
    shape = (ragged(rng, *SYNC_ROWS, block_rows), ragged(rng, *SYNC_COLS, 2))
    seed = int(rng.integers(0, 2**31))
    x = draw(rng, shape, jnp.float32)
    get_function(impl, "sweep")
    fns: dict = {}  # built after the first sweep (a sweep not written yet is named first)
    # rounds[i] = {"yours": {program: median s}, "mine": {program: median s}}: both sides
    # of round i, measured back to back, shared by the kernel's and the baseline's verdict
    rounds: list[dict] = []

    def learner_round() -> dict:
        records, _ = run_sweep(impl, [shape], [block_rows], dtype="float32", warmup=1,
                               iters=SYNC_ITERS, seed=seed)
        return {name: statistics.median(samples_of(find(records, name, shape, block_rows),
                                                   name, SYNC_ITERS))
                for name in ("pallas", "jnp")}

    def checker_round() -> dict:
        warmup = 0 if fns else 1  # the programs stay warm after the first round
        if not fns:
            # The checker's own measurement: the learner's programs exported as StableHLO
            # and run, synchronised, in this process (the XLA program the learner's jit
            # runs).
            exported = exported_kernel(impl, x, block_rows)
            fns["pallas"] = None if exported is None else jax.jit(exported.call)
            # on an accelerator the baseline too is timed where it runs, on the chip
            fns["jnp"] = None if learner_may_hold_accelerator() else jax.jit(
                get_function(impl, "softmax_jnp").export(x, out_example=x).call)
        mine = {}
        for name, fn in fns.items():
            if fn is not None:
                mine[name] = statistics.median(time_synced(
                    fn, x, warmup=warmup, iters=SYNC_REFERENCE_ITERS[name]).samples_s)
                continue
            # A compiled kernel jax cannot export (off CPU): the checker's own timing
            # code (coursekit.measure.timing) runs in the learner process; its samples
            # must fit the request's wall time measured here.
            learner_fn, extra = (("softmax_pallas", {"block_rows": block_rows})
                                 if name == "pallas" else ("softmax_jnp", {}))
            samples = bridge.inspect(impl, "pallas-kernel/time_synced",
                                     LearnerFunction(learner_fn), x, warmup=warmup,
                                     iters=SYNC_ITERS, **extra)
            if not (isinstance(samples, list) and len(samples) == SYNC_ITERS
                    and all(type(v) is float and v > 0 for v in samples)
                    and sum(samples) <= impl.__bridge__.last_wall_s):
                raise TamperEvidence(f"the learner process's synchronised timing "
                                     f"{short(samples)} does not fit the request's "
                                     f"{impl.__bridge__.last_wall_s:.4g} s")
            mine[name] = statistics.median(samples)
        return mine

    def side(key: str, name: str, used: list[int]):
        """Round i's figure of one side for one program, measured once per round."""
        def figure(i: int) -> float:
            used[0] = max(used[0], i + 1)
            while len(rounds) <= i:
                rounds.append({})
            if key not in rounds[i]:
                rounds[i][key] = learner_round() if key == "yours" else checker_round()
            return rounds[i][key][name]
        return figure

    # Round 0, as before the verdicts: the learner's sweep first, then the checker's own.
    rounds.append({"yours": learner_round()})
    rounds[0]["mine"] = checker_round()
    undecided = None
    for name in ("pallas", "jnp"):
        used = [1]
        window = TIME_RATIO_WINDOW if name == "pallas" else BASELINE_RATIO_WINDOW
        try:
            ratio_verdict(side("yours", name, used), side("mine", name, used), window,
                          f"your {name} median", SYNC_HINTS["below"],
                          against="the checker's synchronised timing of the same program "
                          f"on {list(shape)}, interleaved with your sweep round by round",
                          first=(rounds[0]["yours"][name], rounds[0]["mine"][name]),
                          budget_s=SYNC_BUDGET_S[name], min_rounds=SYNC_MIN_ROUNDS,
                          max_rounds=SYNC_MAX_ROUNDS)
        except CheckFailed as err:
            # the verdict's own failure (every round it used holds both sides): which
            # side is slower names the hint; a round whose sweep record failed keeps its own
            both = [r for r in rounds[:used[0]] if "yours" in r and "mine" in r]
            if len(both) == used[0] and statistics.fmean(
                    math.log(r["yours"][name] / r["mine"][name]) for r in both) > 0:
                err.hint = SYNC_HINTS["above"]
            raise
        except CheckInconclusive as err:
            undecided = undecided or err  # the other program may still fail clearly
    if undecided is not None:
        raise undecided


# How far off the subtly wrong kernel is: this many times the budget's allowance
# (atol + rtol * |p|) at one probability near 1e-2, outside any honest tolerance (the
# bracket allows 1.5), yet let through by a test that divides by |p| (rtol / |p|).
SUBTLE_BUDGETS = 3


@checker.check(3)
def sweep_checks_output_before_timing(impl, ctx):
    rng = ctx.rng("wrong-kernel")
    shape = (ragged(rng, 9, 30, 8), length(rng, 20, 120, 2))
    # the plainly wrong element never in row 0, where the subtle kernel is wrong: a
    # check that reads some rows only is told apart from one that reads none
    i, j = int(rng.integers(1, shape[0])), int(rng.integers(0, shape[1]))
    rtol, atol = budget(jnp.float32, shape[1])
    for dtype_name in DTYPES:
        # Built in the learner process from the catalog (remote_pallas_kernel_planted): 8 plainly
        # wrong at [i, j], 16 SUBTLE_BUDGETS allowances off at row 0's p nearest 1e-2,
        # 64 one row short, 128 one row too many, 32 right.
        blocks = [8, 16, 32, 64, 128] if dtype_name == "float32" else [32]
        seed = int(rng.integers(0, 2**31))

        def planted(blocks, dtype_name=dtype_name, seed=seed):
            kernels = Workload("pallas-kernel/planted_kernels", i=i, j=j, rtol=float(rtol),
                               atol=float(atol), subtle=float(SUBTLE_BUDGETS))
            return run_sweep(impl, [shape], blocks, kernels, dtype=dtype_name, warmup=1,
                             iters=3, seed=seed)
        try:
            records, probed = planted(blocks)
        except LearnerCodeError as err:
            if err.kind not in ("exception", "crash"):  # a stub is "not yet", not a crash
                raise
            raise crash_on_planted(err, planted, blocks, shape, dtype_name, (i, j)) \
                from None
        for b, right, what in ((8, False, f"a kernel wrong at element [{i}, {j}]"),
                               (16, False, f"a kernel {SUBTLE_BUDGETS}x the rounding "
                                "budget off at one small probability"),
                               (32, True, f"a correct {dtype_name} kernel"),
                               (64, False, "a kernel whose output is one row short"),
                               (128, False, "a kernel whose output has a row too many")):
            if b not in blocks:
                continue
            r = find(records, "pallas", shape, b)
            hint = ("check the first call's output against softmax_numpy_f64(x) with "
                    "|y - y64| <= atol + rtol * |y64| from tolerance(dtype, cols), before "
                    "timing anything")
            if b == 8 and 16 in blocks and find(records, "pallas", shape, 16)["output_ok"] \
                    is False:
                hint = (f"a kernel 0.05 off at row {i} alone was judged right, and one "
                        f"{SUBTLE_BUDGETS} budgets off at row 0 alone (block_rows=16) "
                        "judged wrong: the output check saw row 0 and missed row "
                        f"{i}; every row and column of the first call's output is compared "
                        "with softmax_numpy_f64(x)")
            fail_unless(r["output_ok"] is right, f"{what} was judged "
                        f"{'right' if r['output_ok'] else 'wrong'}", yours=r["output_ok"],
                        expected=right, hint=hint)
            calls = probed.report(shape, b)["calls"]
            if not right:
                fail_unless(r["samples_s"] == [] and calls == 1, "a wrong kernel was timed "
                            "anyway", yours=f"{calls} calls, {len(r['samples_s'])} samples",
                            expected="1 call (the checked one), no samples",
                            hint="a timing of a wrong result is worse than none")
    off_in_float64_only(impl, rng)


# What each of the checker's planted kernels (``pallas-kernel/planted_kernels``, chosen
# by block_rows) returns for x of shape (rows, cols), for a crash's message.
def planted_output(block: int, shape, at) -> str:
    rows, cols = shape
    return {8: f"the softmax of x with element {list(at)} 0.05 too large, shape {shape}",
            16: f"the softmax of x with one probability near 1e-2 in row 0 {SUBTLE_BUDGETS}x "
                f"the rounding budget off, shape {shape}",
            64: f"the softmax of x one row short: shape ({rows - 1}, {cols})",
            128: f"the softmax of x with a row too many: shape ({rows + 1}, {cols})",
            }.get(block, f"the right softmax of x, shape {shape}")


def crash_on_planted(err: LearnerCodeError, planted, blocks, shape, dtype_name: str,
                     at) -> CheckFailed:
    """The learner's error in a sweep of the checker's planted kernels as this check's
    failure (a wrong output must be judged, not raise), its hint naming the kernel and
    input that raise it: each block size alone, swept again (on a crash only), until one
    raises."""
    culprit = None
    for block in blocks:
        try:
            planted([block])
        except LearnerCodeError:
            culprit = block
            break
    where = (f"with block_rows={culprit} the kernel given to your sweep returns "
             f"{planted_output(culprit, shape, at)}, for x of shape {shape} ({dtype_name}, "
             "standard normal)" if culprit is not None else
             "its kernels, given to your sweep by block_rows: " + "; ".join(
                 f"{b}: {planted_output(b, shape, at)}" for b in blocks))
    return CheckFailed(
        f"your sweep raised while judging the checker's wrong kernels: {err}",
        yours="an exception", expected="output_ok False for each wrong kernel, and no call "
        "after its first", hint=f"{where}. Call your sweep by hand with such a kernel "
        "(kernel=a function of (x, block_rows) returning that) to see the error: a wrong "
        "output, of any shape, must be judged wrong (output_ok False), not raise")


def off_in_float64_only(impl, rng) -> None:
    """A kernel off the float64 softmax by just more than the learner's own tolerance at
    one element, yet within that tolerance (less two float32 steps) of the float32 jnp
    softmax (its element of largest float32 rounding error moved further the same way,
    ``remote_pallas_kernel_planted.off_in_float64_only``): wrong by the contract, right by a
    float32 reference. On a wide shape, and on a tall one (many more rows than columns:
    a tolerance taken for the row count instead of the row length is looser there)."""
    get_function(impl, "tolerance")
    wide = (ragged(rng, 20, 40, 8), length(rng, 150, 400, 2))
    tall = (ragged(rng, 200, 320, 8), length(rng, 9, 24, 2))
    for shape in (wide, tall):
        tol = require_keys(bridge.inspect(impl, "pallas-kernel/call_with_dtype",
                                          LearnerFunction("tolerance"), "float32", shape[1]),
                           ("rtol", "atol"), "tolerance")
        rtol = as_float(tol["rtol"], "tolerance rtol")
        atol = as_float(tol["atol"], "tolerance atol")
        kernel = Workload("pallas-kernel/off_in_float64_only", rtol=rtol, atol=atol)
        records, probed = run_sweep(impl, [shape], [32], kernel, dtype="float32", warmup=1,
                                    iters=3, seed=int(rng.integers(0, 2**31)))
        r = find(records, "pallas", shape, 32)
        calls = probed.report(shape, 32)["calls"]
        other = (f"; tolerance(n={shape[0]}), the row count, gives rtol "
                 f"{looser:.3g}: a row's rounding grows with its length, {shape[1]} here"
                 if shape is tall and (looser := row_count_rtol(impl, shape)) > rtol else "")
        fail_unless(r["output_ok"] is False and r["samples_s"] == [] and calls == 1,
                    f"on {shape}, a kernel off the float64 softmax by more than your "
                    "tolerance at one element, but within it of the float32 jnp softmax, was "
                    "judged right and timed", yours=f"output_ok={r['output_ok']!r}, {calls} "
                    "calls", expected=f"output_ok=False, 1 call (off by just over atol + "
                    f"rtol * |y64| with your tolerance(n={shape[1]}): rtol={rtol:.3g}, "
                    f"atol={atol:.3g})",
                    hint="judge the first call's output against softmax_numpy_f64(x), the "
                    "float64 truth, within tolerance(n) of the row length n = x.shape[1]: a "
                    "float32 reference carries rounding errors of its own" + other)


def row_count_rtol(impl, shape) -> float:
    """The learner's own rtol for rows of ``shape[0]`` elements (the row count)."""
    try:
        tol = bridge.inspect(impl, "pallas-kernel/call_with_dtype",
                             LearnerFunction("tolerance"), "float32", shape[0])
        return as_float(tol["rtol"], "tolerance rtol")
    except (LearnerCodeError, CheckFailed, KeyError, TypeError):
        return -math.inf


def synthetic_records(rng, plan: dict, mode: str, backend: str = "cpu",
                      dtype: str = "float32", n: int = 7) -> list[dict]:
    """Records with known medians: plan = {shape: (baseline_s, {block: speedup}, ...)}."""
    def record(impl, shape, block, median, ok=True):
        noise = rng.normal(0, 0.02, n)
        noise -= np.median(noise)  # n odd: the samples' median is the planned one
        samples = [] if not ok else [float(median * math.exp(v)) for v in noise]
        return {"impl": "".join(list(impl)), "shape": list(shape),
                "dtype": "".join(list(dtype)), "block_rows": block,
                "grid": None if block is None else [math.ceil(shape[0] / block)],
                # strings built at run time, as read from a JSON file: not interned
                "mode": "".join(list("compiled" if impl == "jnp" else mode)),
                "backend": "".join(list(backend)),
                "warmup": 1, "iters": n, "first_call_s": float(median * 50),
                "samples_s": samples, "compiles_first_call": 1, "compiles_warmed": 0,
                "output_ok": ok}
    records = []
    for shape, (base, speedups, wrong_block) in plan.items():
        records.append(record("jnp", shape, None, base))
        for block, s in speedups.items():
            records.append(record("pallas", shape, block, base / s))
        if wrong_block:  # fastest of all, but wrong: must be ignored
            wrong = record("pallas", shape, wrong_block, base / 50, ok=True)
            wrong["output_ok"] = False
            records.append(wrong)
    order = rng.permutation(len(records))
    return [records[k] for k in order]


def expected_summary(plan: dict) -> dict:
    """The summary ``synthetic_records(rng, plan, ...)`` must give, read from the plan
    that planted them (not from the records): each sample set's median is its planned
    one, so the baseline median is planned and a block's speedup is its planned speedup;
    the fast wrong block was never part of the plan's speedups."""
    per_shape = []
    for shape in sorted(plan, key=lambda s: (math.prod(s), s)):
        base, speedups, _ = plan[shape]
        best = max(speedups, key=speedups.get)
        per_shape.append({"shape": list(shape), "baseline_median_s": base,
                          "speedup_by_block": dict(speedups), "best_block_rows": best,
                          "best_speedup": speedups[best],
                          "helps": speedups[best] > HELP_MARGIN})
    helping = [i for i, p in enumerate(per_shape) if p["helps"]]
    after = helping[-1] + 1 if helping else 0
    stops = per_shape[after]["shape"] if after < len(per_shape) else None
    return {"per_shape": per_shape, "stops_helping_at": stops}


def plan_shapes(rng, helps: list[bool], crossing: bool = False,
                at_margin: bool = False) -> dict:
    """Shapes in order of element count with the speedups ``helps`` asks for. With
    ``crossing`` the rows fall as the element count grows (cols double each time), so an
    order by (rows, cols) is the reverse of the order by size. With ``at_margin`` each
    shape that does not help but has a best block faster than the baseline has a best
    speedup of exactly HELP_MARGIN: its baseline HELP_MARGIN * 2**-10 s and that block's
    median 2**-10 s, so the medians' quotient is HELP_MARGIN to the last bit (no help:
    helps is a speedup above the margin)."""
    plan, rows = {}, 16
    for k, h in enumerate(helps):
        rows = rows * 2 + int(rng.integers(1, 8))
        shape = (rows, int(rng.integers(100, 300)))
        if crossing:
            shape = (200 - 20 * k - int(rng.integers(1, 8)),
                     100 * 2**k + int(rng.integers(1, 50)))
        blocks = [int(b) for b in rng.permutation(BLOCK_ROWS)]
        lo, hi = (1.2, 3.0) if h else (0.2, 0.85)
        speedups = {b: float(rng.uniform(lo, hi)) for b in blocks}
        # a clear best block; every other shape that does not help has a best block
        # faster than the baseline by less than HELP_MARGIN: faster, yet within the noise
        speedups[blocks[0]] = hi + 0.5 if h else (
            float(rng.uniform(1.02, HELP_MARGIN - 0.02)) if k % 2 else 0.9)
        base = float(rng.uniform(1e-4, 1e-2))
        if at_margin and not h and k % 2:
            speedups[blocks[0]], base = HELP_MARGIN, HELP_MARGIN * 2.0 ** -10
        plan[shape] = (base, speedups, 64 if k % 2 == 0 else None)
    return plan


def from_plain(value):
    """The learner's value with its DICT_ITEMS tuples made dicts again (keys as sent)."""
    if type(value) is tuple and len(value) == 2 and value[0] == DICT_ITEMS \
            and isinstance(value[1], list):
        try:
            return {k: from_plain(v) for k, v in value[1]}
        except (TypeError, ValueError):
            raise TamperEvidence("the learner process sent a dict that is not one") from None
    if type(value) is dict:
        return {k: from_plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(from_plain(v) for v in value)
    return value


def helps_hint(best: float) -> str:
    """What "helps" means, said for this shape's best speedup."""
    if math.isclose(best, HELP_MARGIN, rel_tol=1e-12):
        return (f"the best speedup here is exactly HELP_MARGIN = {HELP_MARGIN:g}: helps is "
                "a speedup above the margin (>), and one at it is still within the noise")
    if 1.0 < best <= HELP_MARGIN:
        return (f"the best speedup here is {best:.3f}: faster than the baseline, but not "
                f"by more than HELP_MARGIN = {HELP_MARGIN:g}, the noise margin a measured "
                "ratio must clear before the kernel counts as helping")
    return (f"helps: the best speedup ({best:.3f}) is above HELP_MARGIN = {HELP_MARGIN:g}")


def learner_summary(impl, records) -> dict:
    """summarize(records) in the learner process; its dicts keyed by block_rows cross the
    bridge as (key, value) pairs (``pallas-kernel/call_plain``)."""
    get_function(impl, "summarize")
    got = from_plain(bridge.inspect(impl, "pallas-kernel/call_plain",
                                    LearnerFunction("summarize"), records))
    return require_keys(got, ("mode", "backend", "per_shape", "stops_helping_at", "caveat"),
                        "summarize")


def from_this_machine(field: str, got, mode: str, backend: str, ctx) -> str | None:
    """A hint where a summary's ``field`` is the machine's that summarised, not the
    records': the records here ran ``mode`` on ``backend``."""
    here_backend = learner_backend(ctx)
    here = {"backend": here_backend,
            "mode": "interpreted" if here_backend == "cpu" else "compiled"}[field]
    if got != here:
        return None
    return (f"yours is {got!r}, the {field} of the machine the summary ran on "
            f"({here_backend}); the records it was given ran {mode} on {backend}: a "
            f"summary reports the {field} its records hold, wherever it is made")


@checker.check(3)
def summary_finds_where_it_stops_helping(impl, ctx):
    rng = ctx.rng("summary")
    for helps, mode, backend in (([True, True, False, False], "interpreted", "cpu"),
                                 ([False, False, False], "compiled", "gpu"),
                                 ([False, True, True], "compiled", "tpu"),
                                 ([True, True, False], "interpreted", "cpu"),
                                 ([True, False, False], "crossing", "cpu"),
                                 ([True, False, False], "margin", "cpu")):
        # "crossing": rows fall as the size grows (plan_shapes), kernel interpreted;
        # "margin": the second shape's best speedup is HELP_MARGIN to the last bit
        crossing, margin = mode == "crossing", mode == "margin"
        mode = "interpreted" if crossing or margin else mode
        plan = plan_shapes(rng, helps, crossing, at_margin=margin)
        records = synthetic_records(rng, plan, mode, backend=backend)
        want = expected_summary(plan)
        got = learner_summary(impl, records)
        fail_unless(got["mode"] == mode, "summary mode differs from the records'",
                    yours=got["mode"], expected=mode,
                    hint=from_this_machine("mode", got["mode"], mode, backend, ctx))
        fail_unless(got["backend"] == backend, "summary backend differs from the records'",
                    yours=got["backend"], expected=backend,
                    hint=from_this_machine("backend", got["backend"], mode, backend, ctx))
        per_shape = got["per_shape"]
        fail_unless(isinstance(per_shape, list) and len(per_shape) == len(want["per_shape"]),
                    "per_shape must hold one entry per shape", yours=short(per_shape),
                    expected=len(want["per_shape"]))
        for yours, exp in zip(per_shape, want["per_shape"]):
            yours = require_keys(yours, ("shape", "best_block_rows", "best_speedup", "helps"),
                                 "a per_shape entry")
            by_rows = sorted(p["shape"] for p in want["per_shape"])
            got_order = [p.get("shape") if isinstance(p, dict) else p for p in per_shape]
            fail_unless(list(yours["shape"]) == exp["shape"], "per_shape is not in order of "
                        "element count (rows * cols)" + (
                            ": it is in order of (rows, cols), and here the shape with "
                            "more rows holds fewer elements"
                            if [list(g) for g in got_order] == by_rows else ""),
                        yours=got_order, expected=[p["shape"] for p in want["per_shape"]],
                        hint="the contract orders per_shape by element count (rows * "
                        "cols); yours is in another order")
            fail_unless(math.isclose(as_float(yours.get("baseline_median_s"),
                                              "baseline_median_s"),
                                     exp["baseline_median_s"], rel_tol=1e-9),
                        f"baseline median for {exp['shape']}",
                        yours=yours.get("baseline_median_s"),
                        expected=exp["baseline_median_s"],
                        hint="the median of the baseline record's raw samples")
            speedups = yours.get("speedup_by_block")
            fail_unless(isinstance(speedups, dict) and set(speedups) == set(
                exp["speedup_by_block"]) and all(math.isclose(
                    as_float(speedups[b], "speedup"), v, rel_tol=1e-9)
                    for b, v in exp["speedup_by_block"].items()),
                f"speedup_by_block for {exp['shape']}", yours=short(speedups),
                expected=short(exp["speedup_by_block"]),
                hint="one entry per block size whose output was correct: median(baseline) "
                "/ median(kernel)")
            fail_unless(yours["best_block_rows"] == exp["best_block_rows"],
                        f"best block size for {exp['shape']}", yours=yours["best_block_rows"],
                        expected=exp["best_block_rows"], hint="speedup = median(baseline) / "
                        "median(kernel); ignore blocks whose output was wrong")
            fail_unless(math.isclose(as_float(yours["best_speedup"], "best_speedup"),
                                     exp["best_speedup"], rel_tol=1e-9),
                        f"best speedup for {exp['shape']}", yours=yours["best_speedup"],
                        expected=exp["best_speedup"], hint="ratio of medians of the raw "
                        "samples (not means, not minima)")
            fail_unless(isinstance(yours["helps"], (bool, np.bool_))
                        and bool(yours["helps"]) == exp["helps"],
                        f"helps for {exp['shape']}", yours=yours["helps"], expected=exp["helps"],
                        hint=helps_hint(exp["best_speedup"]))
        stops = got["stops_helping_at"]
        stops = None if stops is None else list(stops)
        fail_unless(stops == want["stops_helping_at"], "stops_helping_at",
                    yours=stops, expected=want["stops_helping_at"] or
                    "None (it helps at the largest shape)",
                    hint=stops_hint(stops, want))


def stops_hint(stops, want: dict) -> str:
    """What a wrong ``stops_helping_at`` is, from the shapes' own helps."""
    shapes = [(p["shape"], p["helps"]) for p in want["per_shape"]]
    first_not = next((shape for shape, helps in shapes if not helps), None)
    at = [shape for shape, _ in shapes].index(stops) if stops in [s for s, _ in shapes] \
        else None
    later = [shape for shape, helps in shapes[at + 1:] if helps] if at is not None else []
    if stops is None and shapes and not any(helps for _, helps in shapes):
        return (f"the kernel helps at no shape here, so it has stopped helping from the "
                f"first ({shapes[0][0]}); None says it still helps at the largest")
    if stops == first_not and later:
        return (f"yours is the first shape where the kernel does not help ({stops}), but it "
                f"helps again after it (at {later[-1]}): it stops helping only after the "
                "last shape where it helps")
    return ("the shape after the last shape where the kernel helps; None when it helps at "
            "the largest")


def value_error(impl, records) -> str | None:
    """The message of the ValueError summarize(records) raised in the learner process, or
    None when it returned (any other exception propagates, named)."""
    get_function(impl, "summarize")
    answer = bridge.inspect(impl, "pallas-kernel/value_error_of",
                            LearnerFunction("summarize"), records)
    if not (isinstance(answer, dict) and type(answer.get("raised")) is bool
            and (not answer["raised"] or type(answer.get("message")) is str)):
        raise TamperEvidence(f"the ValueError inspector answered {short(answer)}")
    return answer["message"] if answer["raised"] else None


@checker.check(3)
def summary_refuses_mixed_modes(impl, ctx):
    rng = ctx.rng("mixed")
    plan = plan_shapes(rng, [True, False])
    # One record changed at a time: a kernel record's mode, backend or dtype, then a
    # baseline record's backend or dtype (the baseline's mode is always "compiled").
    for which, field, change in (("pallas", "mode", "compiled"), ("pallas", "backend", "gpu"),
                                 ("pallas", "dtype", "bfloat16"), ("jnp", "backend", "gpu"),
                                 ("jnp", "dtype", "bfloat16")):
        records = synthetic_records(rng, plan, "interpreted")
        group = [r for r in records if r["impl"] == which]
        changed = group[int(rng.integers(0, len(group)))]
        changed[field] = change
        record = f"{'kernel' if which == 'pallas' else 'baseline'} record {changed['shape']}"
        err = value_error(impl, records)
        if err is not None:
            fail_unless(field in err, f"the ValueError for mixed {field} values does "
                        "not name the field", yours=err, expected=f"a message naming "
                        f"{field!r}")
            continue
        raise CheckFailed(f"records that mix {field} values were summarised as if "
                          f"comparable: one {record} had {field}={change!r}, the others "
                          f"{sorted({str(r[field]) for r in records if r is not changed})}",
                          yours="no error", expected=f"ValueError naming {field}",
                          hint="an interpreted and a compiled timing measure different "
                          "things" if field == "mode" else f"every record, the baseline's "
                          f"too, must share one {field}: a speedup across {field}s compares "
                          "two different runs")
    # Records that lack the field altogether (every kernel record), and records with no
    # baseline: nothing to compare, so refused too.
    lacking = synthetic_records(rng, plan, "interpreted")
    for r in lacking:
        if r["impl"] == "pallas":
            r["mode"] = None
    kernels_only = [r for r in synthetic_records(rng, plan, "interpreted")
                    if r["impl"] == "pallas"]
    for records, what in ((lacking, "kernel records without a mode"),
                          (kernels_only, "kernel records without a baseline")):
        if value_error(impl, records) is not None:
            continue
        raise CheckFailed(f"{what} were summarised", yours="no error",
                          expected="ValueError", hint="a speedup needs a baseline and a "
                          "known mode to mean anything")


@checker.check(3)
def summary_states_interpreted_mode(impl, ctx):
    rng = ctx.rng("caveat")
    plan = plan_shapes(rng, [False, False])
    interpreted = learner_summary(impl, synthetic_records(rng, plan, "interpreted"))
    text = interpreted["caveat"]
    fail_unless(isinstance(text, str) and "interpreted" in text.lower()
                and "target" in text.lower(), "an interpreted run's summary must say "
                "plainly that its timings say nothing about the target's speed",
                yours=text, expected="a sentence with 'interpreted' and 'target'")
    shape = next(iter(plan))  # the smallest sweep: one shape, one block size
    single = learner_summary(impl, synthetic_records(
        rng, {shape: (1e-3, {int(rng.choice(BLOCK_ROWS)): 1.5}, None)}, "interpreted"))
    fail_unless("interpreted" in str(single["caveat"]).lower(), "a one-kernel-record "
                "summary lost the interpreted caveat", yours=single["caveat"])
    compiled = learner_summary(impl, synthetic_records(rng, plan, "compiled", backend="gpu"))
    fail_unless(isinstance(compiled["caveat"], str)
                and "interpreted" not in compiled["caveat"].lower(),
                "a compiled run's summary claims it was interpreted",
                yours=compiled["caveat"], expected="no interpreted caveat")
    # interpret=True runs on any backend: the caveat follows the mode the kernel ran in,
    # not the machine (the blind corpus's caveat-for-cpu passed everything above)
    elsewhere = learner_summary(impl, synthetic_records(rng, plan, "interpreted",
                                                        backend="tpu"))
    fail_unless("interpreted" in str(elsewhere["caveat"]).lower(), "an interpreted run on "
                "a TPU got no interpreted caveat", yours=elsewhere["caveat"],
                expected="a sentence with 'interpreted' and 'target'",
                hint="the records say the kernel ran interpreted (interpret=True runs on "
                "any backend): the caveat follows the mode it ran in, not the backend")


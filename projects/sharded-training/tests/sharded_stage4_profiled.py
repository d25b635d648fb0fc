"""sharded-training stage 4: trace and timing. The learner profiles a fresh jitted
data-parallel step the checker hands it by name (``Workload("sharded-training/
stand_in_step")``, ``coursekit/workloads/remote_sharded_training_timing.py``: a train
step's shape and cost with no training in it; the learner process builds it from the same
source this process times, wrapped to count calls and compiles), on a state and batch
placed there from the checker's data; the record, the samples, the trace (read by
``sharded_trace``) and the refusal of a wrong output are
each checked against the checker's own count, synchronised timing and trace parse. The
call and compile counts are self-reported (``SELF_REPORTED``): the trace this process
parses and the wall time it measured around the call bound them.

Timing verdicts (``coursekit.checking.probes.ratio_verdict``, issue 28): a round is one
more ``profile_train_step`` call of the learner's (a fresh step, warmup 1, 3 timed and 3
traced calls) and, back to back with it, the checker's own synchronised samples of the
same step on the same data (the checker first in odd rounds); the first round is the
stage's record and the reference samples taken around it. Rounds are made once and
shared (``timing_round``): the median sample (``samples_are_synchronised``) and the
shortest traced region (``trace_holds_region``) of each round are both decided from
them, each check adding rounds only while its own interval is still open.

Cases where each timing mistake changes the verdict by a wide margin (issue 29):

* samples or a first call not waited for: the step's own probe (``unready_at_next_call``)
  sees a call whose output is still being computed when the next begins, certain for a
  synchronised timer at any load. Waited for, but only after the clock stopped (the
  wait right after the call returns): the probe's watcher records the last moment each
  output was seen unfinished (``unready_seen_after_s``), and a time shorter than that
  ended before its output was ready: certain too, and a whole run apart here (a first
  call read 480 ms against 670 ms seen unfinished, a sample 1.7 ms against 21 ms). The
  first call is also run without ``expected_loss`` and with no warm-up (the shared
  ``unchecked_run``), where no loss check waits for it
  before the next call: a first call timed without its wait shows there (in the record's
  own run the loss check waits for it, and a first call's compile dwarfs its run);
* samples timed from the start of the timed loop (timestamps, not durations): they rise
  at every call by at least that call, and lie outside their calls' windows (the step's
  own entry and return stamps) or add up to more than the call's wall time (seed 1:
  1.9 s of samples) (``samples_as_timestamps``); named as such in
  ``samples_are_synchronised`` (a FAIL whatever the load), never as tampering;
* traced steps whose wait comes after the annotation closes: the probe cannot see them
  (the wait comes before the next call); the region then holds the dispatch only, 2-9 ms
  against a step of 80-135 ms here under load (ROWS_PER_DEVICE), 0.02-0.1x, which
  ``trace_holds_region``'s floor of 1/3 catches (a correct region read 0.6-1.2x);
* a state fed back into the next call: timing cannot see it (the step takes as long);
  the momentum is handed over as host (numpy) arrays, so a step's output state (on the
  devices) differs in placement from the one the checker passed and the next call
  compiles again: ``compile_apart_and_calls`` sees a compile after call 0, at any load.

Budget: the record and the refusal runs are a fixed count of calls; the two ratio verdicts
spend at most ``ROUND_BUDGET_S`` each on rounds beyond the first three (scaled by
``COURSE_TIMING_BUDGET``), then say INCONCLUSIVE. What the stage took under load:
docs/checkers/sharded-training.md, "Cost"."""

from __future__ import annotations

import gzip
import json
import math
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import sharded_trace
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharded_harness import N_DEVICES, checker
from sharded_learner import ALL, call_plain, place
from sharded_reference import blobs

from coursekit.checking.bridge import Workload
from coursekit.checking.errors import CheckFailed, TamperEvidence
from coursekit.checking.frozen import copy_once
from coursekit.checking.learner import require_written
from coursekit.checking.probes import (
    ended_before_ready,
    ratio_verdict,
    region_name,
    reported_call_windows,
    reported_counts,
    reported_times_within_wall,
    reported_unready,
    reported_unready_seen,
    samples_of,
)
from coursekit.checking.timestamps import Timestamps, grow_as_timestamps, timed_windows
from coursekit.checking.values import as_float, fail_unless
from coursekit.measure.timing import time_synced
from coursekit.provenance.records import read_run_record, validate_run_record
from coursekit.workloads import classifier
from coursekit.workloads.remote_sharded_training_timing import stand_in_step

# The learner's synced median vs the checker's, either way, decided in interleaved rounds
# (each the same step on the same data, in two processes, seconds apart: a right timer
# read 0.9-1.1x here under load). An unsynchronised timer holds the dispatch only: at the
# step size before ROWS_PER_DEVICE it read 20-50x too fast idle but only 6-16x on one
# busy core (the device threads hold back the dispatching thread); samples_are_synchronised
# also asks the step's own probe, which is certain. Load that differs between the two
# sides of a round widens the interval (then INCONCLUSIVE), it does not move its centre.
TIME_RATIO_WINDOW = 3.0
# A traced region holds one synchronised step: at least this fraction of the checker's
# synchronised time of it. The shortest region of a round is taken: dispatch times spike
# upward under load, never down (ROWS_PER_DEVICE has the measurements).
REGION_FLOOR = 1 / 3
# The learner process cannot report more calls than fit in the wall time of its call:
# each takes at least the checker's fastest synchronised sample / CALLS_SLACK.
CALLS_SLACK = 6.0
# Rows per device (x16, +8): a step's dispatch alone (what an unsynchronised timer, or a
# region closed before its wait, holds) takes 1-3 ms, and 2-50 ms at times under load.
# Measured here at a load of 8-14 per core: at ~1,100 rows a step took 13-30 ms and a
# region closed before its wait read 0.2-1.4x of it (median of 2); at ~2,400 rows,
# 80-135 ms and 0.02-0.1x (shortest of 3), a correct region 0.6-1.2x; at ~4,400 rows
# 190-220 ms and 0.01-0.08x, but the stage took 160 s with three spinners on top.
ROWS_PER_DEVICE = (150, 180)
# A timing round (see the docstring): the learner's call and the checker's own samples.
ROUND_WARMUP, ROUND_ITERS, ROUND_TRACE, REFERENCE_ROUND_ITERS = 1, 3, 3, 4
ROUND_BUDGET_S = 20.0    # each ratio verdict's budget for more rounds while undecided
MIN_ROUNDS, MAX_ROUNDS = 3, 8


def timing_workload(ctx):
    """The step (this process's copy of the workload), its state and batch on this
    process's mesh, its correct loss (one device, the checker's own reference step), and
    the data to build the same state and batch in the learner process. Big enough that a
    step takes far longer than its dispatch (ROWS_PER_DEVICE)."""
    rng = ctx.rng("timing")
    mesh = jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices(),
                         axis_types=(jax.sharding.AxisType.Auto,))
    rows = int(rng.integers(*ROWS_PER_DEVICE)) * 16 + 8
    hidden = int(rng.integers(200, 260))
    x, y = blobs(rng, rows * N_DEVICES)
    mask = np.ones(rows * N_DEVICES, np.float32)
    params = jax.jit(classifier.init_params, static_argnames="hidden")(
        jax.random.key(int(rng.integers(0, 2**30))), hidden=hidden)
    config = {"noise": 0.1, "momentum": 0.9}
    key = jax.random.key(int(rng.integers(0, 2**30)))
    rep, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    # the momentum stays on the host (numpy), here as in the learner process: a state fed
    # back from a step's output (on the devices) is placed differently and recompiles
    state = {"params": jax.device_put(params, rep), "key": jax.device_put(key, rep),
             "momentum": jax.tree.map(lambda a: np.zeros(a.shape, a.dtype), params)}
    batch = {k: jax.device_put(np.asarray(v), split) for k, v in
             (("x", x), ("y", y), ("mask", mask))}
    fn = stand_in_step(**config).jitted
    # its loss on one device: the same function on the same values, unsharded
    one = jax.devices()[0]
    loss = float(fn(jax.device_put({"params": params, "key": key, "momentum": jax.tree.map(
        jnp.zeros_like, params)}, one), jax.device_put({"x": x, "y": y, "mask": mask},
                                                         one))[1])
    return fn, state, batch, loss, {"config": config, "data": (params, key, x, y, mask)}


def inputs_there(impl, spec: dict) -> dict:
    """The same state and batch, placed in the learner process (handles): params and key
    replicated over the 8 devices, the momentum left on the host, the batch split."""
    params, key, x, y, mask = spec["data"]
    every = {"devices": ALL, "spec": []}
    state = place(impl, {"params": params, "key": key,
                         "momentum": jax.tree.map(lambda a: np.zeros(a.shape, a.dtype),
                                                  params)},
                  {"params": every, "key": every, "momentum": {"host": True}})
    batch = place(impl, {"x": x, "y": y, "mask": mask}, {"devices": ALL, "spec": ["data"]})
    return {"state": state.kept, "batch": batch.kept}


def cross_check_profile(impl, facts: dict, record: dict, what: str,
                        fastest_s: float, timestamps: bool = False) -> None:
    """The learner process's self-reported counts and times against the wall time this
    process measured around the call (``SELF_REPORTED``). ``fastest_s``: the checker's
    fastest synchronised sample of the step (under load the least inflated one).
    ``timestamps``: the samples grow as timestamps do (``samples_as_timestamps``), so only
    the first call is added up (``spanned``); that mistake fails samples_are_synchronised
    by name, never as tampering."""
    wall = impl.__bridge__.last_wall_s
    reported_times_within_wall(what, [spanned(record) if timestamps else record], wall)
    calls, compiled_at = reported_counts(what, facts)
    needed = (calls - 1) * fastest_s / CALLS_SLACK
    if needed > wall:
        raise TamperEvidence(f"{what}: the learner process reported {calls} calls of a "
                             f"step that takes at least {fastest_s:.3g} s here, but the "
                             f"whole call took {wall:.3g} s")


def spanned(record: dict) -> dict:
    """The record's times the wall time must hold when its samples are timestamps
    (``samples_as_timestamps``): the first call alone. Times since the loop began overlap,
    and clock readings (``perf_counter()`` itself) exceed any wall time; either fails
    samples_are_synchronised by name, so leaving them out gains nothing."""
    return {"first_call_s": record.get("first_call_s"), "samples_s": []}


def samples_as_timestamps(record: dict, counted: dict, args: dict,
                          wall_s: float) -> Timestamps | None:
    """Whether the record's samples are times since the timed loop began, not one call
    each (``coursekit.checking.timestamps``): each holds the one before it and its own
    call (the step's own probe: from its entry until its output was last seen
    unfinished), and one is longer than its call's window (from the previous call's
    return to the next one's entry, the probe's stamps) or all add up, with the first
    call, to more than the call's wall time. A right timer's samples lie in their
    windows in whatever order load puts them (the rule this replaced, rises of a sixth
    of a step and a last sample twice the median, could name a right timer whose samples
    rose at every call under rising load: one run in 720 or fewer rises so)."""
    samples = record.get("samples_s") if isinstance(record, dict) else None
    if not isinstance(samples, list):
        return None
    windows = reported_call_windows("profile_train_step", counted)
    least, most = timed_windows(windows, timed_calls(counted, len(samples),
                                                     args["trace_steps"]).start, len(samples))
    if counted.get("calls") != 1 + args["warmup"] + len(samples) + args["trace_steps"]:
        least = most = None  # calls not the contract's: which call a sample timed is open
    first = record.get("first_call_s")
    first = first if type(first) in (int, float) and math.isfinite(first) and first > 0 \
        else 0.0
    return grow_as_timestamps(samples, least, most, wall_s=wall_s, other_s=first)


# The checker's own synchronised samples of the step, on its own 8 devices, taken just
# before and just after the learner's call and pooled: load that drifts over the call
# moves both alike (one reference taken once, before or after, can sit 4x off under load).
REFERENCE_ITERS = 4


NEAR = 3e-6   # expected_loss this far off the true loss is right (rtol 1e-5) ...
MISS = 5e-5   # ... and this far off is wrong


def decoy_trace(logdir: Path) -> None:
    """An older trace already in logdir (an earlier session's), named to sort last: the
    record must name the trace this call wrote, the newest by time."""
    old = logdir / "plugins" / "profile" / "2099_01_01_00_00_00" / "old.trace.json.gz"
    old.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(old, "wt") as f:
        f.write('{"traceEvents": []}')
    hour_ago = time.time() - 3600
    for path in (old, old.parent):  # the folder's time is what orders sessions
        os.utime(path, (hour_ago, hour_ago))


def learner_record(impl, ctx) -> tuple[dict, dict, dict]:
    """The learner's run record of the timing workload (profiled once per run), the
    calls and compiles counted around the step it was handed, and the arguments."""
    require_written(impl, "profile_train_step")  # before the checker's own timed steps

    def profile_once():
        fn, state, batch, loss, spec = timing_workload(ctx)
        there = inputs_there(impl, spec)
        counter = Workload("sharded-training/stand_in_step", **spec["config"])
        rng = ctx.rng("profile-args")
        args = {"region": region_name(rng),
                "warmup": int(rng.integers(1, 4)), "iters": int(rng.integers(6, 10)),
                "trace_steps": int(rng.integers(2, 4))}
        logdir = ctx.learner_dir("profile")
        decoy_trace(logdir)
        existing = sharded_trace.trace_files(logdir)
        # within the stated rtol 1e-5 of the true loss, not equal to it
        before = time_synced(fn, state, batch, warmup=2, iters=REFERENCE_ITERS).samples_s
        record = call_plain(impl, "profile_train_step", counter, there["state"],
                            there["batch"], str(logdir), expected_loss=loss * (1 + NEAR),
                            **args)
        after = time_synced(fn, state, batch, warmup=1, iters=REFERENCE_ITERS).samples_s
        reference_s = float(np.median(before + after))
        fail_unless(isinstance(record, dict), "profile_train_step must return a dict",
                    yours=type(record).__name__, expected="a run record dict")
        timestamps = samples_as_timestamps(record, counter.facts, args,
                                           impl.__bridge__.last_wall_s)
        cross_check_profile(impl, counter.facts, record, "profile_train_step",
                            min(before + after), timestamps is not None)
        written = sharded_trace.trace_files(logdir) - existing  # by this call
        return record, counter.facts, dict(args, logdir=logdir, fn=fn, state=state,
                                           written=sorted(written),
                                           batch=batch, loss=loss, spec=spec, there=there,
                                           reference_s=reference_s, timestamps=timestamps,
                                           wall_s=impl.__bridge__.last_wall_s)
    return ctx.once("record", profile_once)


def timing_round(impl, ctx, i: int) -> dict:
    """Round ``i`` (from 1; round 0 is the record): one more ``profile_train_step`` of a
    fresh step on the same state and batch (warmup ROUND_WARMUP, ROUND_ITERS timed,
    ROUND_TRACE traced) and the checker's own synchronised samples of the same step, back
    to back, the checker first in odd rounds. Made once per run, shared by the checks."""
    rounds = ctx.cache.setdefault("timing rounds", {})
    if i in rounds:
        return rounds[i]
    _, _, args = learner_record(impl, ctx)
    fn, state, batch = args["fn"], args["state"], args["batch"]
    region = region_name(ctx.rng(f"round-{i}"))
    logdir = ctx.learner_dir(f"profile-round-{i}")

    def yours():
        counter = Workload("sharded-training/stand_in_step", **args["spec"]["config"])
        record = call_plain(impl, "profile_train_step", counter, args["there"]["state"],
                            args["there"]["batch"], str(logdir), region=region,
                            warmup=ROUND_WARMUP, iters=ROUND_ITERS, trace_steps=ROUND_TRACE,
                            expected_loss=args["loss"] * (1 + NEAR))
        fail_unless(isinstance(record, dict), "profile_train_step must return a dict",
                    yours=type(record).__name__, expected="a run record dict")
        what = f"profile_train_step (timing round {i})"
        # the record's samples were timestamps: so are a round's (too few to tell)
        reported_times_within_wall(what, [spanned(record) if args["timestamps"] else record],
                                   impl.__bridge__.last_wall_s)
        return record, counter.facts

    def mine():
        return time_synced(fn, state, batch, warmup=0,
                           iters=REFERENCE_ROUND_ITERS).samples_s
    if i % 2:
        reference = mine()
        record, facts = yours()
    else:
        record, facts = yours()
        reference = mine()
    rounds[i] = {"index": i, "record": record, "facts": facts, "region": region,
                 "reference_s": float(np.median(reference))}
    return rounds[i]


def decide(what: str, figure, first: float, window, hints: tuple[str, str], against: str,
           ctx, impl):
    """``ratio_verdict`` of ``figure(round)`` (the learner's figure of a timing round)
    over the checker's reference of the same round; round 0 is ``first`` against the
    record's reference. ``hints``: (too fast, too slow), the one the evidence points to
    is the FAIL's hint."""
    _, _, args = learner_record(impl, ctx)
    seen: dict[int, tuple] = {}

    def yours(i):
        value = figure(timing_round(impl, ctx, i))
        seen[i] = (value, timing_round(impl, ctx, i)["reference_s"])
        return value

    def reference(i):
        return timing_round(impl, ctx, i)["reference_s"]
    try:
        return ratio_verdict(yours, reference, window, what, hints[0], against=against,
                             first=(first, args["reference_s"]),
                             budget_s=ROUND_BUDGET_S, min_rounds=MIN_ROUNDS,
                             max_rounds=MAX_ROUNDS)
    except CheckFailed as err:
        logs = [math.log(first / args["reference_s"])] + \
            [math.log(y / r) for y, r in seen.values()]
        err.hint = hints[0] if sum(logs) < 0 else hints[1]
        raise


def unchecked_run(impl, ctx) -> tuple:
    """The learner's run without ``expected_loss`` and without warm-up: nothing to refuse
    (``wrong_output_refused``), and nothing between the first call and the next that
    waits for the first call's result (``samples_are_synchronised``). The record and the
    step's counts."""
    def run():
        _, _, args = learner_record(impl, ctx)
        counter = Workload("sharded-training/stand_in_step", **args["spec"]["config"])
        record = call_plain(impl, "profile_train_step", counter, args["there"]["state"],
                            args["there"]["batch"], str(ctx.learner_dir("profile-unchecked")),
                            region="unchecked", warmup=0, iters=2, trace_steps=1)
        return record, counter.facts
    return ctx.once("unchecked", run)


@checker.check(4)
def record_is_valid(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    problems = validate_run_record(record, check_trace=True)
    fail_unless(not problems, "the run record is not in the format performance-audit "
                "stage 4 reads", yours=problems, expected=[],
                hint="each line above is a field the format's own validator refuses "
                "(coursekit.provenance.records.validate_run_record, the reader of "
                "performance-audit stage 4)")
    path = ctx.subdir("records") / "run.json"
    path.write_text(json.dumps(record))
    back = read_run_record(path)
    fail_unless(back["boundary"] and back["region"] == args["region"] and
                back["output_ok"] is True and back["iters"] == args["iters"],
                "the record does not describe this measurement",
                yours={k: back[k] for k in ("boundary", "region", "output_ok", "iters")},
                expected={"region": args["region"], "output_ok": True,
                          "iters": args["iters"]})
    # the batch's arrays, in any order: the checker's own batch, placed from the same data
    want = sorted((list(a.shape), str(a.dtype)) for a in args["batch"].values())
    shapes, dtypes = record.get("shapes"), record.get("dtypes")
    try:
        got = sorted(([int(d) for d in s], str(t)) for s, t in zip(shapes, dtypes)) \
            if len(shapes) == len(dtypes) else None
    except (TypeError, ValueError):  # a shape that is not a list of ints
        got = None
    state_like = sorted((list(a.shape), str(a.dtype))
                        for a in jax.tree.leaves(args["state"]["params"]))
    # one device's piece of each array (the batch is split by rows over N_DEVICES)
    shard_like = sorted(([a.shape[0] // N_DEVICES, *a.shape[1:]], str(a.dtype))
                        for a in args["batch"].values())
    hint = ("one [shape] and one dtype per batch array (x, y, mask), as "
            "performance-audit's time_fn records its arguments")
    if got == state_like:
        hint = ("shapes and dtypes of the batch arrays (x, y, mask): these are the shapes "
                "and dtypes of the state's params, not of the data the step ran on")
    elif got == shard_like and shard_like != want:
        hint = ("yours are one device's shard of each batch array: the record describes "
                "the global arrays the step ran on (a.shape), whatever their sharding")
    fail_unless(got == want, "the record's shapes and dtypes are not the batch's",
                yours={"shapes": shapes, "dtypes": dtypes},
                expected={k: [list(a.shape) if k == "shapes" else str(a.dtype)
                              for _, a in sorted(args["batch"].items())]
                          for k in ("shapes", "dtypes")},
                hint=hint)


@checker.check(4)
def compile_apart_and_calls(impl, ctx):
    record, counted, args = learner_record(impl, ctx)
    calls = 1 + args["warmup"] + args["iters"] + args["trace_steps"]
    samples = record.get("samples_s") if isinstance(record.get("samples_s"), list) else []
    # what ran besides the first call, the samples and the traced steps: the warm-up
    warmed = counted["calls"] - 1 - len(samples) - args["trace_steps"]
    fail_unless(counted["calls"] == calls, "profile_train_step made the wrong number of "
                "calls", yours=f"{counted['calls']} calls", expected=f"{calls} = 1 first + "
                f"{args['warmup']} warmup + {args['iters']} timed + {args['trace_steps']} "
                "traced", hint=f"besides the first call, your {len(samples)} samples and "
                f"{args['trace_steps']} traced steps, {warmed} warm-up call(s) ran where "
                f"warmup={args['warmup']} asks for {args['warmup']}: "
                f"{abs(warmed - args['warmup'])} too "
                f"{'few' if warmed < args['warmup'] else 'many'}"
                if len(samples) == args["iters"] and warmed >= 0 and
                warmed != args["warmup"] else
                "one first call alone, then warmup, iters, trace_steps")
    fail_unless(counted["compiled_at"] == [0], "the compile did not happen in the first "
                "call alone", yours=f"compiled in calls {counted['compiled_at']}",
                expected="only call 0", hint="a call after the first compiled again, so "
                "its arguments were not the first call's: the state handed to you keeps "
                "its momentum on the host, and a step's output state is on the devices; "
                "pass the same state and batch to every call (never feed the new state "
                "back)" if counted["compiled_at"][:1] == [0] else "")
    fail_unless(record.get("compiles_first_call") == counted["compiles"] and
                record.get("compiles_warmed") == 0,
                "compile counts in the record do not match what jax.monitoring saw",
                yours=(record.get("compiles_first_call"), record.get("compiles_warmed")),
                expected=(counted["compiles"], 0),
                hint=f"jax.monitoring saw {counted['compiles']} compile(s) in the first "
                "call and none after it; your record's counts say otherwise")


SYNC_HINT = ("a call returns before the devices finish, and here the clock stopped "
             "while the output was still being computed: nothing waited for it inside "
             "the boundary")
SLOW_HINT = ("each sample must hold one call of the step and its wait, nothing else: "
             "no compile (call once first), no set-up, no second call")


FIRST_SLOW_TEXT = (" (in a run without expected_loss, where no loss check waits for the "
                   "first call before the next one)")


@checker.check(4)
def first_call_waited_for(impl, ctx):
    # Certain for a synchronised first call, whatever the load: its output is ready when
    # the next call begins, and its first_call_s lasts at least until the moment the
    # step's own probe last saw that output unfinished (a clock stopped when the call
    # returns, with the wait right after, ends a whole run before it).
    record, counted, args = learner_record(impl, ctx)
    first_call_finished(record, counted, "")
    # The first call again, with no loss check after it to wait for its result (the
    # record's own run compares the loss, which waits, before the next call begins).
    unchecked, facts = unchecked_run(impl, ctx)
    first_call_finished(unchecked, facts, FIRST_SLOW_TEXT)


@checker.check(4)
def samples_are_synchronised(impl, ctx):
    record, counted, args = learner_record(impl, ctx)
    samples = samples_of(record, "profile_train_step", args["iters"])
    # Certain for a synchronised timer, whatever the load: each timed call's output is
    # ready when the next call begins, and each sample lasts at least until its output
    # was last seen unfinished. The ratio below alone is not: on one busy core the step's
    # 8 device threads can hold back the dispatching thread for a sixth of the step or
    # more (measured: an unsynchronised timer passed 3 of 8).
    timed = timed_calls(counted, len(samples), args["trace_steps"])
    unfinished_calls(timed, counted, "")
    samples_outlast_their_calls(samples, timed, counted, "")
    if args["timestamps"]:
        timestamps_not_durations(args["timestamps"], args["reference_s"], args["wall_s"])

    def median(r: dict) -> float:
        where = f" (timing round {r['index']})"
        values = samples_of(r["record"], "profile_train_step", ROUND_ITERS)
        in_round = timed_calls(r["facts"], len(values), ROUND_TRACE)
        unfinished_calls(in_round, r["facts"], where)
        samples_outlast_their_calls(values, in_round, r["facts"], where)
        return float(np.median(values))
    decide("your median", median, float(np.median(samples)), TIME_RATIO_WINDOW,
           (SYNC_HINT, SLOW_HINT), "the checker's synchronised timing of the same step, "
           "taken beside each of your calls", ctx, impl)


def timestamps_not_durations(found: Timestamps, reference_s: float, wall_s: float) -> None:
    """Fails on samples that grow as timestamps do (``samples_as_timestamps``): what
    they show, in the learner's and the checker's times. ``wall_s``: the whole call's
    time, measured here (a sample longer than it is a clock reading)."""
    samples, rises = list(found.samples), found.rises
    grow = ("from one sample to the next yours grow by " +
            ", ".join(f"{r * 1e3:.3g}" for r in rises) + " ms")
    if samples[0] > wall_s:
        shown = "[" + ", ".join(f"{s:.6g}" for s in samples) + "] s"
        hint = (f"{grow}, and even the first ({samples[0]:.6g} s) is longer than your "
                f"whole profile_train_step call took ({wall_s:.3g} s, measured here): these "
                "are clock readings (timestamps), not durations: each sample is one call, "
                "timed from its own start")
    else:
        shown = "[" + ", ".join(f"{s * 1e3:.4g}" for s in samples) + "] ms"
        hint = (f"{grow}, and the last ({samples[-1] * 1e3:.4g} ms) spans all "
                f"{len(samples)} timed calls: each sample ran from the start of the timed "
                "loop to the end of its call. These are timestamps (cumulative times since "
                "the loop began), not durations: each sample is one call, timed from its "
                "own start")
    raise CheckFailed(
        f"your {len(samples)} samples grow with the call index: each one is longer than "
        f"the one before by at least its own call of the step; {found.beyond}",
        yours=f"samples_s = {shown}",
        expected=f"{len(samples)} durations of one call each, about "
        f"{reference_s * 1e3:.4g} ms (the checker's synchronised median of the same step), "
        "in no order", hint=hint)


def timed_calls(counted: dict, samples: int, trace_steps: int) -> range:
    """The calls the ``samples`` samples timed, aligned by what ran: the ``samples`` calls
    just before the last ``trace_steps`` (the contract's order: first call, warm-up,
    timed, traced). A warm-up too few or too many moves this window with the calls
    instead of pairing each sample with a neighbour's call (issue 53: one warm-up too few
    read as samples that end early); the number of calls is compile_apart_and_calls'."""
    calls = counted.get("calls") if type(counted.get("calls")) is int else 0
    stop = max(calls - trace_steps, 1)
    return range(max(stop - samples, 1), stop)


def unfinished_calls(timed: range, counted: dict, where: str) -> None:
    """Fails naming the timed calls whose output was still being computed when the next
    call began (the step's own probe, ``unready_at_next_call``)."""
    unfinished = [k for k in reported_unready("profile_train_step", counted)
                  if k in timed]
    fail_unless(not unfinished, "the timing stopped before the step finished: a timed "
                f"call's output was still being computed when the next call began{where}",
                yours=f"call(s) {unfinished} unfinished (calls {timed.start}-"
                f"{timed.stop - 1} are timed)",
                expected="every timed call finished inside its own boundary",
                hint=SYNC_HINT)


def first_call_finished(record: dict, counted: dict, where: str) -> None:
    """The first call (call 0) waited for inside its timing: finished before the next
    call began, and ``first_call_s`` no shorter than the moment the probe last saw its
    output unfinished."""
    what = "profile_train_step"
    unready = reported_unready(what, counted)
    fail_unless(0 not in unready, "the first call's output was still being computed when "
                f"the next call began{where}", yours="call 0 (the first) unfinished",
                expected="the first call finished inside its own timing",
                hint="the first call returns before the devices finish: its time, compile "
                "and run, ends only once its output is ready")
    seen = reported_unready_seen(what, counted)
    first = as_float(record.get("first_call_s") if isinstance(record, dict) else None,
                     "first_call_s")
    if seen and ended_before_ready(first, seen[0]):
        raise CheckFailed(
            f"your first_call_s ends before the first call's output was ready{where}",
            yours=f"first_call_s {first * 1e3:.4g} ms",
            expected=f"at least {seen[0] * 1e3:.4g} ms: the first call's output was still "
            f"being computed {seen[0] * 1e3:.4g} ms after the call began (seen by the "
            "checker's probe around the step, which never waits)",
            hint="the clock stopped when the first call returned and the wait for its "
            "output came after it: a call returns before the devices finish, so the "
            "first call's time ends after its output is ready")


def samples_outlast_their_calls(samples: list, timed: range, counted: dict,
                                where: str) -> None:
    """Each sample no shorter than the moment the probe last saw its call's output
    unfinished (sample i is call ``timed.start + i``)."""
    seen = reported_unready_seen("profile_train_step", counted)
    early = [(i, s, seen[timed.start + i]) for i, s in enumerate(samples)
             if timed.start + i < len(seen) and ended_before_ready(s, seen[timed.start + i])]
    if early:
        i, s, unready = early[0]
        raise CheckFailed(
            f"{len(early)} of your {len(samples)} samples end before their call's output "
            f"was ready{where}",
            yours=f"samples_s[{i}] = {s * 1e3:.4g} ms",
            expected=f"at least {unready * 1e3:.4g} ms: that call's output was still being "
            f"computed {unready * 1e3:.4g} ms after it began (seen by the checker's probe "
            "around the step, which never waits)",
            hint="each sample's clock stopped when its call returned, before the output "
            "was ready (the wait, if any, came after the clock): " + SYNC_HINT)


@checker.check(4)
def trace_holds_region(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    trace = Path(record.get("trace") or "")
    fail_unless(trace.is_file(), "the record's trace file does not exist",
                yours=str(trace), expected="a *.trace.json.gz under logdir")
    fail_unless(trace.resolve() in args["written"], "the record's trace is not the one "
                "this call wrote", yours=str(trace),
                expected=" or ".join(map(str, args["written"])) or "a new trace file",
                hint="logdir held an older trace already: the record names the trace this "
                "call's profiler session wrote, the newest one")
    # taken once: the three parses below read this copy
    trace = copy_once(trace, ctx.subdir("taken"), inside=args["logdir"],
                      what="the record's trace")
    count = len(sharded_trace.regions(trace, args["region"]))
    fail_unless(count == args["trace_steps"],
                "the annotated region is not in the trace once per traced step",
                yours=count, expected=args["trace_steps"],
                hint="one annotated region named as asked around each traced call")
    inside = sharded_trace.events_inside(trace, args["region"])
    fail_unless(inside > 0, "the region holds no events: the step did not "
                "run inside it", yours=f"{count} region(s) holding {inside} events",
                expected="the jitted step nested inside",
                hint="the region closed before the step's work ran in it: nothing "
                "waited for the output inside the region")
    numbers = sharded_trace.region_steps(trace, args["region"])
    want = [str(i) for i in range(args["trace_steps"])]
    fail_unless(numbers == want, "the traced regions are not numbered by step: each "
                "region's step argument, in the order they ran, must be its index",
                yours=numbers, expected=want,
                hint="each region carries its step number: without step=i the "
                "regions are named but not numbered, and a trace viewer cannot tell the "
                "steps apart" if not any(numbers) else
                f"yours number the {len(numbers)} regions {numbers}; the traced calls "
                "count from 0, one number each, in the order they ran")
    inside, outside = sharded_trace.step_runs(trace, args["region"])
    fail_unless(not outside, f"the trace holds {outside} run(s) of the step outside your "
                "annotated regions: the profiler was running during calls that are not "
                "traced steps", yours=f"{inside} run(s) inside the regions, {outside} "
                "outside them", expected=f"{args['trace_steps']} run(s), each inside its "
                "region, none outside", hint="the profiler started before the traced steps: "
                "the warm-up or the timed samples ran (and were timed) with the profiler "
                "on, which slows every call it records; only the traced steps run under it")
    durations = sharded_trace.region_seconds(trace, args["region"])

    def traced(r: dict) -> float:
        path = Path(r["record"].get("trace") or "")
        found = sharded_trace.region_seconds(
            copy_once(path, ctx.subdir("taken"), what="a round's trace"),
            r["region"]) if path.is_file() else []
        fail_unless(len(found) == ROUND_TRACE, "the annotated region is not in the trace "
                    "once per traced step", yours=f"{len(found)} in {path}",
                    expected=f"{ROUND_TRACE} (trace_steps={ROUND_TRACE})",
                    hint="one annotated region named as asked around each traced call")
        return min(found)
    decide("your shortest traced step (a region in the trace)", traced, min(durations),
           (REGION_FLOOR, math.inf),
           ("the region is shorter than the step itself: it holds the dispatch, not the "
            "finished step, so the wait for the output came after the region closed, not "
            "inside it", ""),
           "the checker's synchronised timing of the same step", ctx, impl)


def loss_checked(impl, ctx, scale: float, off: float, **sizes) -> dict:
    """The learner's record of the timing step with its loss times ``scale`` (a power
    of two: the same step, its loss at another magnitude) and ``expected_loss`` that loss
    times ``1 + off``; once per run and case."""
    def run():
        _, _, args = learner_record(impl, ctx)
        name = f"loss-{scale:g}-{off:g}"
        logdir = ctx.learner_dir(f"profile-{name}")
        decoy_trace(logdir)  # an earlier session's trace: a refused run names none
        record = call_plain(impl, "profile_train_step",
                            Workload("sharded-training/stand_in_step", loss_scale=scale,
                                     **args["spec"]["config"]),
                            args["there"]["state"], args["there"]["batch"],
                            str(logdir), region="checked",
                            expected_loss=args["loss"] * scale * (1 + off), **sizes)
        fail_unless(isinstance(record, dict), "profile_train_step must return a dict",
                    yours=type(record).__name__, expected="a run record dict")
        return record
    return ctx.once(("loss-checked", scale, off), run)


@checker.check(4)
def wrong_output_refused(impl, ctx):
    # 5x the stated rtol: a near miss is wrong too
    record = loss_checked(impl, ctx, 1.0, MISS, warmup=1, iters=3, trace_steps=1)
    fail_unless(isinstance(record, dict) and record.get("output_ok") is False,
                "a wrong loss was not caught before timing",
                yours=record.get("output_ok") if isinstance(record, dict) else record,
                expected=False, hint="compare the first call's loss with expected_loss "
                "(rtol 1e-5) before anything is timed")
    named = record.get("trace")
    fail_unless(record.get("samples_s") == [] and not named,
                "a run with a wrong output must not be timed or traced",
                yours={"samples_s": record.get("samples_s"), "trace": named},
                expected={"samples_s": [], "trace": ""},
                hint=f"your record names {Path(str(named)).name}, a trace that was in logdir "
                "before this call (an earlier session's): a refused run traced nothing, and "
                'its trace is ""' if named and "2099_01_01" in str(named) else None)
    # and without an expected loss there is nothing to refuse: timed, output_ok None
    unchecked, _ = unchecked_run(impl, ctx)
    fail_unless(isinstance(unchecked, dict) and unchecked.get("output_ok") is None
                and len(unchecked.get("samples_s") or []) == 2,
                "without expected_loss the run must be timed, with output_ok None",
                yours={k: unchecked.get(k) for k in ("output_ok", "samples_s")}
                if isinstance(unchecked, dict) else unchecked,
                expected={"output_ok": None, "samples_s": "2 samples"})


# The same relative error at losses of other magnitudes (the step's loss times a power of
# two): the contract's rtol 1e-5 scales with the loss, an absolute allowance does not. At
# 2^10 the near one (3e-6 relative, ~4e-3 absolute) is 400x past an atol of 1e-5; at 2^-8
# the miss (5e-5 relative, ~3e-7 absolute) is 40x inside it, and still 4x past
# np.allclose's default atol of 1e-8 plus the rtol.
LARGE_SCALE, SMALL_SCALE = 2.0 ** 10, 2.0 ** -8


def judged_alike(impl, ctx, scale: float, off: float, want: bool, loss: float) -> None:
    """The learner's verdict on the relative error ``off`` at the step's loss times
    ``scale`` is ``want``, as it was at the loss's own size."""
    got = loss_checked(impl, ctx, scale, off, warmup=0, iters=1, trace_steps=1)
    was, now = ("accepted", "refused") if want else ("refused", "accepted")
    larger = scale > 1
    fail_unless(got.get("output_ok") is want,
                f"a loss off by {off:g} relative was {now} at a loss "
                f"{max(scale, 1 / scale):g}x {'larger' if larger else 'smaller'}, the same "
                f"relative error that was {was} at its own size",
                yours={"loss": loss * scale, "output_ok": got.get("output_ok")},
                expected={"output_ok": want, "relative error": off},
                hint=f"the same relative error ({off:g}) was {was} at a loss of {loss:.3g} "
                f"and {now} at {loss * scale:.3g}: the allowance does not "
                f"{'grow' if larger else 'shrink'} with the loss, so it is absolute; the "
                "contract's tolerance is relative to the loss (rtol 1e-5)")


@checker.check(4)
def loss_compared_relatively(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    if record.get("output_ok") is True:  # a right loss at its own size is accepted ...
        judged_alike(impl, ctx, LARGE_SCALE, NEAR, True, args["loss"])
    if loss_checked(impl, ctx, 1.0, MISS, warmup=1, iters=3,
                    trace_steps=1).get("output_ok") is False:  # ... a near miss refused
        judged_alike(impl, ctx, SMALL_SCALE, MISS, False, args["loss"])

"""optimisation stage 4: the report. The learner's ``write_run_records`` for before
(``train_slow``) and after (``train_fast``) at stage 2's held-out size: each a valid run
record (``coursekit.provenance.records.validate_run_record``, trace included) of the
workload asked for, with the warm-up and timed calls asked for (drawn counts, and a
drawn 30-40 calls on a tiny problem), ``output_ok`` True, a trace that holds the
record's region and was taken with the Python tracer off, the after record's region
holding its traced call to the end (the XLA operations that ran inside it, at least
``FINISHED_OPS_SHARE`` of those in the same region of the learner's own records made once
more with ``train_fast`` waiting for its own result, ``optimisation/records_with_a_synced_fast``,
self-reported), the before record's warmed
calls compiling at least as often as the checker counts for ``train_slow`` with a new
learning rate per call, the after record's not at all. ``output_ok`` must be computed:
the inspector ``optimisation/records_with_a_wrong_fast`` (self-reported, run beside the
learner's code) swaps the module's ``train_fast`` for one whose losses are 1% off, and
the after record must then say False and hold no samples (a wrong output is not timed).
The times the records hold (first calls and samples) cannot add up to more than the call
took on the checker's clock.

Stubbed (``records_time_the_calls``, the inspector ``optimisation/stubbed_calls`` as in
stage 3, self-reported): one call on a tiny problem with both versions and the
parameter copy replaced by sleeps of known length, the first call of each version long:
a median sample a copy longer than the calls it times fails (the copy inside the
sample), a ``first_call_s`` under half the first call fails (a call made before it), and
so do fewer calls of a version than its record declares (a warm-up never made).

Timing (``records_agree_with_checker``): the records' medians and speedup against the
checker's own (``optim_harness.Versions``: ``train_slow`` timed in the checker's process,
the learner's ``train_fast`` in a block in the learner process timed by the checker from
request to answer), within ``RECORD_WINDOW``, in interleaved rounds
(``optim_harness.decide``): round 0 is the records the stage already made and the
checker's round measured right after; a later round is one smaller
``write_run_records`` call (``ROUND_WARMUP`` and ``ROUND_ITERS``, a problem of its own
seed) and the checker's round right before or after it. More rounds only while a verdict
is open.

Budget: the records at the timing size and the 30-40 calls on a tiny problem (most of
the stage), the records with a wrong ``train_fast``, the timing check's three rounds and
the checker's traced ``train_fast`` call (what each took: docs/checkers/optimisation.md,
"Numbers"). The timing check starts
no round after ``RECORDS_BUDGET_S`` (scaled by ``COURSE_TIMING_BUDGET``) from the
end of what it needs once whatever the load (the records, both versions' first calls at
their size): under heavier load it ends there, INCONCLUSIVE unless something failed,
within one call of its budget."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import jax
import numpy as np
from optim_harness import (
    Rounds,
    Versions,
    answers_in_a_fresh_process,
    check_budget,
    checker,
    decide,
    decide_together,
    losses_agree,
    no_copy_in_sample,
    odd,
    size_text,
    timed_pair,
    times_within_call,
    timing_config,
    tiny_config,
)
from optim_stage1_breakdown import compile_events

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction
from coursekit.checking.errors import CheckFailed, CheckInconclusive, LearnerCodeError
from coursekit.checking.frozen import read_once
from coursekit.checking.values import fail_unless, require_keys
from coursekit.measure import device_trace, traces
from coursekit.measure.timing import count_compiles
from coursekit.provenance.records import validate_run_record
from coursekit.workloads import slow_step

# The records' medians and speedup against the checker's own, round by round: an "after"
# without sync reads 50x+ too fast, samples in milliseconds 1000x too slow.
RECORD_WINDOW = 4.0
# A later round's write_run_records call: smaller than the records' own (two traces and
# five calls of each version), about 2 s at load 2 per core; a median of 3 samples, as a
# median of 2 moved too far under load to clear the window in 6 rounds.
ROUND_WARMUP, ROUND_ITERS = 1, 3
# The checker's round: one train_slow call and a block of FAST_CALLS train_fast calls.
FAST_CALLS = 4
RECORDS_BUDGET_S, RECORDS_MAX_ROUNDS = 25.0, 10
ROUND_SEED_STEP = 7919


def record_counts(ctx) -> tuple[int, int]:
    """The warmup and iters the records are asked for (drawn: a hard-coded count fails)."""
    rng = ctx.rng("records")
    return int(rng.integers(1, 3)), int(rng.integers(6, 10))


# Learning rates this process has never used: the update is compiled once per rate and
# process, and one checker process may check several files with the same seed (the
# planted batches do): a rate met before compiles nothing, and counted 0 per call.
_FRESH_RATES = itertools.count(1)


# The count by problem size, once per checker process: it is the course's train_slow's,
# not the learner's, and a planted batch checks many files at one size in one process
# (three train_slow calls that compile each cost 20 s there at load 10-20).
_SLOW_COMPILES: dict[tuple, int] = {}


def slow_compiles_per_call(ctx) -> int:
    """The checker's own count of compiles in one steady train_slow call with a new lr
    (its per-lr update is compiled for each learning rate), on the records' problem."""
    config = timing_config(ctx)
    size = tuple(sorted(config.items()))
    if size not in _SLOW_COMPILES:
        _SLOW_COMPILES[size] = count_slow_compiles(config, ctx.seed + 5)
    return _SLOW_COMPILES[size]


def count_slow_compiles(config: dict, seed: int) -> int:
    problem = slow_step.make_problem(config, seed)
    args = (problem["params"], problem["tokens"], problem["targets"])

    def fresh() -> float:
        return problem["lr"] * (0.3 + 1e-4 * next(_FRESH_RATES))
    jax.block_until_ready(slow_step.train_slow(*args, fresh()))
    with count_compiles() as n:
        for _ in range(2):
            jax.block_until_ready(slow_step.train_slow(*args, fresh()))
    if n[0] < 2:  # a vacuous bound would pass any learner: the checker's own fault
        raise RuntimeError(f"the checker counted {n[0]} compiles in two train_slow "
                           "calls with fresh learning rates (expected one or more each)")
    return n[0] // 2


def read_records(paths, outdir, what: str = "write_run_records") -> dict:
    """write_run_records' answer: {"before": path, "after": path} of files that exist in
    ``outdir`` (the folder it was given), each read once, as JSON."""
    paths = require_keys(paths, ("before", "after"), what)
    out = {}
    for label in ("before", "after"):
        path = paths[label]
        fail_unless(isinstance(path, str) and Path(path).is_file(),
                    f"{what}: no {label} file", yours=path)
        out[label] = json.loads(read_once(path, inside=outdir,
                                          what=f"{what}: the {label} file"))
    return out


def records_call(impl, outdir, warmup: int, iters: int, config: dict, seed: int,
                 what: str = "write_run_records") -> dict:
    """One write_run_records call, its records read, and the times they hold (first
    calls and samples of both) within the call's wall time on the checker's clock."""
    records = read_records(impl.write_run_records(config, seed, str(outdir), warmup=warmup,
                                                  iters=iters), outdir, what)
    wall = impl.__bridge__.last_wall_s
    times = []
    for rec in records.values():
        samples = rec.get("samples_s")
        times += [rec.get("first_call_s"), *(samples if isinstance(samples, list) else [])]
    times_within_call(what, times, wall)
    return records


def learner_records(impl, ctx) -> dict:
    def make():
        warmup, iters = record_counts(ctx)
        return records_call(impl, ctx.learner_dir("records"), warmup, iters,
                            timing_config(ctx),
                            ctx.seed + 5)
    return ctx.once("records", make)


def many_calls_honoured(impl, ctx) -> None:
    """write_run_records on a tiny problem with a drawn 30-40 timed calls (more than the
    records' own): one sample per call, and the before record's warmed calls still
    compile as train_slow does with a new learning rate each (a rate source that runs dry
    or repeats fails here)."""
    rng = ctx.rng("many-calls")
    iters = int(rng.integers(30, 41))
    outdir = ctx.learner_dir("records-many")
    config = tiny_config(rng, batch=odd(rng, 3, 9))

    def made_by(module, into: Path):
        return module.write_run_records(config, ctx.seed + 9, str(into), warmup=1,
                                        iters=iters)
    try:
        paths = made_by(impl, outdir)
    except LearnerCodeError as err:
        if not answers_in_a_fresh_process(
                impl, lambda module: made_by(module, ctx.learner_dir("records-many-fresh"))):
            raise
        raised_after_earlier_records(err, config, timing_config(ctx))
    records = read_records(paths, outdir, f"write_run_records (iters={iters})")
    for label, rec in records.items():
        output_ok_passed(rec, label, f"write_run_records (iters={iters}): ")
        fail_unless(len(rec.get("samples_s") or []) == iters,
                    f"write_run_records (iters={iters}): the {label} record does not hold "
                    "one sample per timed call", yours=len(rec.get("samples_s") or []),
                    expected=iters)
        if label == "before":
            warmed_compiles_counted(rec.get("compiles_warmed"), slow_compiles_per_call(ctx),
                                    1, iters, f"write_run_records (iters={iters}): ")


def raised_after_earlier_records(err: LearnerCodeError, config: dict, earlier: dict) -> None:
    """write_run_records raised on ``config`` in a process whose earlier calls were on
    ``earlier``'s problem, and answered in a fresh process: failed, with the shapes of the
    earlier problem's parameters the error names, if it names any."""
    said = str(err).replace(" ", "")
    sizes = slow_step.sizes(earlier)
    shapes = {"embed": (sizes["vocab"], sizes["embed"]), "w1": (sizes["embed"], sizes["hidden"]),
              "w2": (sizes["hidden"], sizes["vocab"])}
    named = [f"params[{k!r}] {shape}" for k, shape in shapes.items()
             if "({},{})".format(*shape) in said]
    raise CheckFailed(
        f"write_run_records on {size_text(config)} raised in a process that had called it "
        f"before on another problem ({size_text(earlier)}), and answered the same call in a "
        "fresh process", yours=str(err), expected="the records a fresh call writes",
        hint=("the error names the shape of the earlier call's "
              f"{' and '.join(named)}: arrays of an earlier call's problem (its outputs?), "
              "kept across calls, were used in this one" if named else
              "state kept from an earlier call (a cache, arrays of its problem) answers "
              "this one: each call works on its own config and seed")) from None


def output_ok_passed(rec: dict, label: str, what: str = "") -> None:
    """The record's own output check passed. Where train_fast is right (stage 2 holds it
    to train_slow's outputs), a False says the two first calls had different inputs."""
    timed = '' if rec.get('samples_s') else ', so it timed nothing'
    fail_unless(rec.get("output_ok") is True, f"{what}the {label} record's output check did "
                "not pass", yours=rec.get("output_ok"), expected=True,
                hint=f"your before record says train_slow's own first outputs differ from "
                f"train_slow's{timed}: they were compared with something other than this "
                "call's first train_slow outputs on the problem's own params, tokens, "
                "targets and learning rate (an earlier call's, of another seed?)"
                if label == "before" else
                f"your {label} record says its first call's outputs differ from "
                f"train_slow's{timed}: output_ok compares the two first calls "
                "on the problem's own params, tokens, targets and learning rate, and a first "
                "call given another (a new learning rate) fails it even where train_fast is "
                "right (stage 2 checks train_fast itself)")


def warmed_compiles_counted(got, per_call: int, warmup: int, iters: int, what: str) -> None:
    """The before record's ``compiles_warmed`` at least what ``train_slow`` compiles in
    ``warmup + iters`` calls with a new learning rate each (``per_call`` each, the
    checker's count); the hint by what the number matches: the timed calls' compiles
    alone (the warm-up calls left out of the count), else fewer calls compiling."""
    least = per_call * (warmup + iters)
    if type(got) is int and got >= least:
        return
    hint = ("fewer compiles than train_slow makes with a new learning rate per call: a "
            "rate met before compiles nothing new, and every call in use has one of its "
            "own (or some calls were left out of the count)")
    if type(got) is int and warmup and got == per_call * iters:
        hint = (f"{got} is {per_call} per timed call for the {iters} timed calls alone: "
                f"the {warmup} warm-up call(s) added nothing to the count (made outside it, "
                f"or not made at all: a warm-up call compiles {per_call} like any other); "
                "compiles_warmed counts the compiles of every call after the first, the "
                "warm-up calls included")
    fail_unless(False, f"{what}the before record's warmed calls compiled less than "
                "train_slow does with a new learning rate every call (as in use)",
                yours=got, expected=f"at least {least} (the checker counts {per_call} per "
                f"call, {warmup} warm-up + {iters} timed calls)", hint=hint)


# The after record's traced call against the same region of the learner's own records
# made again with train_fast waiting for its own result (optimisation/
# records_with_a_synced_fast, in the learner process: self-reported), by the XLA
# operations each executed inside its region. Both are the same program on a problem of
# the same size: a finished call's count was the checker's exactly at 7 seeds (388-516
# ops), while a call not waited for inside the trace had 1-157 of them in its region (the
# rest ran after the trace closed). Under this share of the reference count it fails.
FINISHED_OPS_SHARE = 0.9


# The device's clock against the host's in a trace: a v5e's program run began 0.23 ms
# before the host region that dispatched and waited for it (coursekit.measure.
# device_trace). A shift larger than this is not the clocks: it would pull a call that
# ran after its region back into it, so none is applied then.
CLOCK_SHIFT_NS = 1e6


def cpu_ops_in_region(events: list[dict], region: str) -> int:
    """XLA operations inside ``region`` in a CPU trace: the events the CPU runtime's thunk
    executor records per operation run (their args name the ``hlo_op``) on the host's
    threads, each lying wholly within one region event."""
    events = [e for e in events if e.get("ph") == "X" and "dur" in e]
    spans = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
             if e.get("name") == region]
    return sum(1 for e in events if "hlo_op" in (e.get("args") or {}) and any(
        start <= float(e["ts"]) and float(e["ts"]) + float(e["dur"]) <= end
        for start, end in spans))


def device_ops_in_region(profile, region: str) -> int | None:
    """XLA operations inside ``region`` in an accelerator's trace: the events of the
    device planes' ``XLA Ops`` lines (a TPU writes no thunk events on the host), shifted
    onto the host clock by the program runs (``device_trace.clock_offset``, at most
    CLOCK_SHIFT_NS), each wholly within a host ``region`` event. None without a device
    plane (a CPU trace)."""
    ops = [s for spans in device_trace.device_lines(profile).values() for s in spans]
    if not ops:
        return None
    modules = [s for spans in device_trace.device_lines(
        profile, device_trace.MODULES_LINE).values() for s in spans]
    windows = device_trace.host_regions(profile, region)
    shift, _ = device_trace.clock_offset(modules, windows)
    if abs(shift) > CLOCK_SHIFT_NS:
        shift = 0.0
    return sum(1 for s in ops if any(
        w.start_ns <= s.start_ns + shift and s.end_ns + shift <= w.end_ns for w in windows))


def ops_in_region(trace, region: str) -> int:
    """XLA operations executed inside the ``region`` events of ``trace``, read where the
    backend writes them: the device's own lines in the XSpace beside the JSON trace when
    it has any (a TPU), else the CPU runtime's thunk events. An operation ends before the
    call that runs it returns, so a call waited for inside its region has them all there."""
    try:
        xplane = device_trace.xplane_beside(trace)
    except FileNotFoundError:
        xplane = None
    if xplane is not None:
        found = device_ops_in_region(device_trace.load(xplane), region)
        if found is not None:
            return found
    return cpu_ops_in_region(traces.load_events(trace), region)


def fast_ops_per_call(impl, ctx, region: str) -> int:
    """The XLA operations one finished train_fast call on the records' problem executes:
    counted in the after record's region of the learner's own ``write_run_records`` run
    once more with its module's ``train_fast`` waiting for its own result
    (``optimisation/records_with_a_synced_fast``, self-reported: the learner's code under
    another condition, the same size, one warm-up and one timed call)."""
    def make():
        outdir = ctx.learner_dir("records-synced-fast")
        paths = bridge.inspect(impl, "optimisation/records_with_a_synced_fast",
                               LearnerFunction("write_run_records"), timing_config(ctx),
                               ctx.seed + 5, str(outdir), 1, 1)
        after = read_records(paths, outdir)["after"]
        ops = ops_in_region(after["trace"], region)
        fail_unless(ops >= 1, f"with train_fast waiting for its own result, the after "
                    f"record's {region!r} region still holds no XLA operation",
                    yours=f"{ops} operations inside the region",
                    expected="the operations of one train_fast call",
                    hint="the after record's traced train_fast call does not run inside "
                    "its region")
        return ops
    return ctx.once("fast-ops", make)


def traced_call_in_use(before: dict, per_call: int) -> None:
    """The before record's traced train_slow call is one call in use: a rate of its own,
    so its update compiles inside the region as every call after the first does (the
    checker counts ``per_call`` compiles a call). A traced call given a rate met before
    (the first call's) is a cache hit and shows a step cheaper than any in use."""
    events = traces.load_events(before["trace"])
    regions = [e for e in events if e.get("ph") == "X" and "dur" in e
               and e.get("name") == before["region"]]
    found = compile_events(regions, events)
    fail_unless(found > 0, f"the before record's traced train_slow call compiled nothing "
                f"inside its {before['region']!r} region, where a call in use compiles its "
                f"update for a new learning rate ({per_call} compile(s) a call, the "
                "checker's count)", yours=f"{found} compile events in the region",
                expected="one call's compiles, as in use",
                hint="the traced call's learning rate was met by an earlier call (the "
                "first call's?), so its update came from the cache: give the traced call "
                "a rate of its own, as every call after the first")


@checker.check(4)
def records_valid_for_decide(impl, ctx):
    # the records already made first, then the costlier evidence (the synced train_fast's
    # trace, then 30-40 calls on a tiny problem): a file its own records fail is failed
    # without them; the output check first on each record, as a False there (nothing
    # timed) would otherwise be named by the samples it left out
    records = learner_records(impl, ctx)
    config = timing_config(ctx)
    shape = [config["steps"], config["batch"]]
    for label, rec in records.items():
        output_ok_passed(rec, label)
        problems = validate_run_record(rec, check_trace=True)
        fail_unless(not problems, f"the {label} record is not a valid run record",
                    yours=problems, expected="no problems",
                    hint="build it with coursekit.provenance.records.make_run_record")
        fail_unless(rec["shapes"] == [shape, shape] and rec["dtypes"] == ["int32", "int32"],
                    f"the {label} record times another workload than the one asked for",
                    yours=(rec["shapes"], rec["dtypes"]),
                    expected=([shape, shape], ["int32", "int32"]),
                    hint="time make_problem(config, seed): tokens and targets of that size")
        fail_unless(rec.get("label") == label, f"the {label} record's label is not "
                    f"{label!r}", yours=rec.get("label"), expected=label,
                    hint="label each record by what it times: \"before\" for train_slow, "
                    "\"after\" for train_fast")
        regions = sum(1 for e in traces.load_events(rec["trace"])
                      if e.get("ph") == "X" and e.get("name") == rec["region"])
        fail_unless(regions >= 1, f"the {label} record's trace has no "
                    f"{rec['region']!r} event", yours=regions, expected=">= 1")
        python_calls = sum(1 for e in traces.load_events(rec["trace"])
                           if str(e.get("name", "")).startswith("$"))
        fail_unless(python_calls == 0, f"the {label} record's trace was taken with the "
                    "Python tracer on (its per-call events slow the call they show)",
                    yours=f"{python_calls} Python-call events ('$...')", expected=0,
                    hint="the trace records Python calls: the profiler's Python tracer "
                    "was on while it ran")
        warmup, iters = record_counts(ctx)
        fail_unless(rec["warmup"] == warmup and rec["iters"] == iters
                    and len(rec["samples_s"]) == iters,
                    f"the {label} record does not hold the calls it was asked for",
                    yours={"warmup": rec["warmup"], "iters": rec["iters"],
                           "samples": len(rec["samples_s"])},
                    expected={"warmup": warmup, "iters": iters, "samples": iters},
                    hint="warmup and iters as given; one sample per timed call")
    fail_unless(records["after"]["compiles_warmed"] == 0, "the after record compiled in "
                "its timed calls", yours=records["after"]["compiles_warmed"], expected=0,
                hint=f"{records['after']['compiles_warmed']} compile(s) in calls of a "
                "shape already called once")
    warmup, iters = record_counts(ctx)
    warmed_compiles_counted(records["before"]["compiles_warmed"],
                            slow_compiles_per_call(ctx), warmup, iters, "")
    traced_call_in_use(records["before"], slow_compiles_per_call(ctx))
    fail_unless(records["before"]["boundary"] == records["after"]["boundary"],
                "before and after must time the same boundary",
                yours=(records["before"]["boundary"], records["after"]["boundary"]))
    after = records["after"]
    mine = fast_ops_per_call(impl, ctx, after["region"])
    yours = ops_in_region(after["trace"], after["region"])
    fail_unless(yours >= FINISHED_OPS_SHARE * mine,
                f"the after record's trace holds {yours} of the {mine} XLA operations one "
                f"train_fast call on this problem executes inside its {after['region']!r} "
                "region: the traced call was not finished inside the trace",
                yours=f"{yours} operations inside the region",
                expected=f"{mine} (the checker's count: one call waited for inside a trace "
                "in your process, self-reported)",
                hint=f"your region holds {yours / mine:.0%} of the call's operations: "
                "the rest ran after the region, or after the trace, closed")
    many_calls_honoured(impl, ctx)


def records_with_a_wrong_fast(impl, ctx, wrong: str) -> dict:
    """The learner's records, made once more in the learner process with its module's
    train_fast returning its ``wrong`` output ("losses" or "params") 1% off."""
    outdir = ctx.learner_dir(f"records-wrong-fast-{wrong}")
    return read_records(bridge.inspect(impl, "optimisation/records_with_a_wrong_fast",
                                       LearnerFunction("write_run_records"),
                                       timing_config(ctx), ctx.seed + 7, str(outdir),
                                       *WRONG_FAST_COUNTS, wrong=wrong), outdir)


# the warmup and iters the records with a wrong train_fast are asked for
WRONG_FAST_COUNTS = (1, 2)


def compared_with_what(impl, ctx) -> str | None:
    """Where neither 1%-off train_fast was caught: what the after record's output_ok was
    compared with, from two more records (issue 53, blind-b4-records-output-checked-
    against-itself), made only on this failure's path: losses 100x theirs (a tolerance
    anywhere near RTOL catches them; an output compared with itself, or an output_ok
    written in, does not) and NaN losses (unequal even to themselves, so a comparison with
    itself catches them; a written-in output_ok does not). None where they cannot be
    made."""
    try:
        said = {wrong: records_with_a_wrong_fast(impl, ctx, wrong)["after"].get("output_ok")
                for wrong in ("losses-100x", "losses-nan")}
    except (CheckFailed, LearnerCodeError):
        return None  # the failure at 1% is told as it is
    far, nan = said["losses-100x"], said["losses-nan"]
    if far is True and nan is False:
        return ("losses 1% off and 100 times theirs were judged right, NaN losses wrong: "
                "your after record's output was compared with train_fast's own output, "
                "which every value but NaN equals, not with train_slow's on the same inputs")
    if far is True and nan is True:
        return ("output_ok was True of every train_fast the checker made wrong, NaN "
                "losses included: it is not measured against train_slow's outputs on the "
                "same inputs (written in, or a comparison that cannot fail)")
    if far is False:
        return ("losses 100 times theirs were caught, 1% off (100x slow_step.RTOL) were "
                "not: your output check allows far more than RTOL / ATOL of train_slow's "
                "outputs")
    return None


@checker.check(4)
def output_ok_is_measured(impl, ctx):
    """The records' output_ok compared with the checker's own verdict on an "after" whose
    output it made wrong: the learner's write_run_records run once more in the learner
    process with its module's train_fast returning losses 1% off, and once with its
    parameters 1% off and its losses right (self-reported: the swap happens beside the
    learner's code; a record that still says True fails). Where neither is caught, two
    more tell what output_ok was compared with (``compared_with_what``)."""
    found = {wrong: records_with_a_wrong_fast(impl, ctx, wrong)
             for wrong in ("losses", "params")}
    caught = {wrong: records["after"].get("output_ok") is False
              for wrong, records in found.items()}
    for wrong, records in found.items():
        other = "params" if wrong == "losses" else "losses"
        what = f"with a train_fast whose {wrong} are 1% off (its {other} right)"
        for label, want in (("before", True), ("after", False)):
            got = records[label].get("output_ok")
            hint = (f"your after record says output_ok={got!r} of a train_fast whose "
                    f"{wrong} are 1% off" if label == "after" else f"your before record "
                    f"says output_ok={got!r} of train_slow itself, unchanged here")
            if label == "after" and caught[other]:
                hint = (f"a train_fast with wrong {other} was caught and one with wrong "
                        f"{wrong} was not: your output check compares the {other} only; "
                        "train returns both, and output_ok covers every output")
            elif label == "after" and got is True:
                hint = compared_with_what(impl, ctx) or hint
            fail_unless(got is want, f"{what}, the {label} record's output_ok must be "
                        f"{want}", yours=got, expected=want, hint=hint)
        samples = records["after"].get("samples_s")
        fail_unless(not samples, f"{what}, the after record still holds samples: a wrong "
                    "output was timed and its samples kept",
                    yours=samples, expected="no samples (an empty samples_s)",
                    hint=f"{len(samples or [])} samples of a call whose output was wrong")
        warmup, iters = WRONG_FAST_COUNTS
        said = {k: records["after"].get(k) for k in ("warmup", "iters")}
        fail_unless(said == {"warmup": warmup, "iters": iters}, f"{what}, the after "
                    f"record's warmup and iters are not the ones asked ({warmup} and "
                    f"{iters})", yours=said, expected={"warmup": warmup, "iters": iters},
                    hint="warmup and iters record the counts asked for, whatever was timed"
                    + (f": yours says iters {said['iters']}, the {len(samples or [])} "
                       "samples kept" if said["iters"] == len(samples or []) else ""))


# The checker's stubs (the inspector optimisation/stubbed_calls, in the learner process,
# as in stage 3: self-reported, and only set against the learner's own figures from the
# same call): train_slow, train_fast and slow_step.fresh_copy replaced by sleeps of these
# lengths, the first call of each version sleeping STUB_FIRST_S (as a compile would). A
# sample is the call and a few us of Python and sync around it; a copy made inside it
# adds the copy's length. The first call's time is that first call, not a later one.
STUB_SLOW_S, STUB_FAST_S, STUB_COPY_S, STUB_FIRST_S = 0.02, 0.01, 0.08, 0.3


@checker.check(4)
def records_time_the_calls(impl, ctx):
    """write_run_records on a tiny problem with both versions and the parameter copy
    replaced by the checker's sleeps (self-reported): each record's median sample no
    longer than the median call it times (the first apart) by half a copy, its
    first_call_s at least half the first call the stubs saw of that version, and no
    fewer calls of that version than the record declares (first, warm-up, timed and
    traced: a warm-up written into the record but never made fails here)."""
    rng = ctx.rng("stubbed-records")
    warmup, iters = int(rng.integers(1, 3)), int(rng.integers(4, 7))
    got = bridge.inspect(impl, "optimisation/stubbed_calls",
                         LearnerFunction("write_run_records"),
                         [tiny_config(rng, batch=odd(rng, 3, 9)), ctx.seed + 11,
                          str(ctx.learner_dir("records-stubbed"))],
                         slow_s=STUB_SLOW_S, fast_s=STUB_FAST_S, copy_s=STUB_COPY_S,
                         outlier_s=STUB_FIRST_S, outlier_at=0,
                         kwargs={"warmup": warmup, "iters": iters})
    what = ("with both versions and slow_step.fresh_copy replaced by the checker's stubs "
            f"(warmup={warmup}, iters={iters}): ")
    records = read_records(got["result"], ctx.learner_dir("records-stubbed"),
                           f"{what}write_run_records")
    copies = [end - start for start, end in got["copies"]]
    for label, version in (("before", "slow"), ("after", "fast")):
        rec = records[label]
        took = [end - start for v, _, _, start, end in got["calls"] if v == version]
        samples = rec.get("samples_s")
        first_s = rec.get("first_call_s")
        fail_unless(took and isinstance(samples, list) and samples
                    and all(type(v) in (int, float) for v in samples)
                    and type(first_s) in (int, float),
                    f"{what}the {label} record holds no timed calls of {version} version "
                    "with their first call and samples in seconds",
                    yours={"calls": len(took), "first_call_s": first_s,
                           "samples_s": samples})
        # the calls the record declares, each one call: the first, the warm-up, the
        # timed and the traced one (a correct record may make more, never fewer)
        least = 2 + warmup + iters
        fail_unless(len(took) >= least,
                    f"{what}the stubs saw {len(took)} calls of the {version} version "
                    f"(self-reported), fewer than the {label} record declares: its first "
                    f"call, {warmup} warm-up, {iters} timed and one traced",
                    yours=f"{len(took)} calls", expected=f"at least {least}",
                    hint=f"{least - len(took)} of the calls the record declares were "
                    f"not made: its first call, each of its {warmup} warm-up calls "
                    "(untimed, before the samples), each sample and its traced call is "
                    "a call of its own")
        fail_unless(first_s >= 0.5 * took[0],
                    f"{what}the {label} record's first_call_s is {first_s:.3g} s, the "
                    f"first {version} call took {took[0]:.3g} s (the stub's own time, "
                    "self-reported): a call was made before the 'first call', which is "
                    "then a warmed one",
                    yours=f"first_call_s {first_s:.4g} s",
                    expected=f"the first call, {took[0]:.4g} s or more",
                    hint=f"your first_call_s is {first_s / took[0]:.2g}x the first "
                    f"{version} call: it timed a later call")
        if len(took) < 2:
            continue
        hint = "your samples are longer than the call by about a copy's length"
        no_copy_in_sample(f"{what}your {label} record's median sample", version, samples,
                          took[1:], copies, STUB_COPY_S, hint_copy=hint, hint_other=hint)


def record_medians(records: dict) -> dict:
    """Each record's median call (seconds) and their speedup."""
    out = {}
    for label in ("before", "after"):
        value = records[label].get("samples_s")
        fail_unless(isinstance(value, list) and value and all(
            type(v) in (int, float) and v > 0 for v in value),
            f"the {label} record's samples_s must be the timed calls' durations in seconds",
            yours=value)
        out[label] = float(np.median(value))
    out["speedup"] = out["before"] / out["after"]
    return out


@checker.check(4)
def records_agree_with_checker(impl, ctx):
    first = record_medians(learner_records(impl, ctx))
    config = timing_config(ctx)

    def versions() -> Versions:
        def make():
            v = Versions(impl, config, ctx.seed + 5)
            v.warm()
            return v
        return ctx.once("records-versions", make)
    versions()  # both versions' first calls: once, whatever the load
    budget = check_budget(ctx, RECORDS_BUDGET_S, "records_agree_with_checker")

    def mine(i: int) -> dict:
        pair = timed_pair(versions(), i, 1, FAST_CALLS)
        return {"before": pair["slow_s"], "after": pair["fast_s"],
                "speedup": pair["slow_s"] / pair["fast_s"], "pair": pair}

    def yours(i: int) -> dict:
        # a problem of its own seed each round (same sizes): records draw their rates
        # from the problem's, and a rate met in an earlier call would skip train_slow's
        # recompile, which every call in use makes
        records = records_call(
            impl, ctx.learner_dir(f"records-round{i}"), ROUND_WARMUP, ROUND_ITERS, config,
            ctx.seed + 5 + ROUND_SEED_STEP * i, f"write_run_records (round {i})")
        return record_medians(records)

    def make(i: int) -> dict:
        if i == 0:
            return {"yours": first, "mine": mine(0)}
        if i % 2:
            m = mine(i)
            return {"mine": m, "yours": yours(i)}
        y = yours(i)
        return {"yours": y, "mine": mine(i)}
    rounds = Rounds(make)

    def get(i: int) -> dict:
        return rounds.get(i, budget)

    def verdict(label: str, version: str, against: str):
        return lambda: decide(
            lambda i: get(i)["yours"][label], lambda i: get(i)["mine"][label],
            RECORD_WINDOW, f"the {label} record's median call ({version})",
            "samples_s in seconds, one synchronised call each, first call apart",
            against=against, budget=budget, max_rounds=RECORDS_MAX_ROUNDS)
    undecided = None
    try:
        decide_together([
            verdict("before", "train_slow", "the checker's own synchronised timing of "
                    "train_slow on the same problem, in its own process"),
            verdict("after", "train_fast", "the checker's own timing of your train_fast on "
                    "the same problem"),
            lambda: decide(
                lambda i: get(i)["yours"]["speedup"], lambda i: get(i)["mine"]["speedup"],
                RECORD_WINDOW, "the records' speedup", "synchronise inside every timed "
                "call, first call apart, the same problem and a fresh parameter copy for "
                "both", against="the checker's own measurement", budget=budget,
                max_rounds=RECORDS_MAX_ROUNDS, unit="x")], rounds)
    except CheckInconclusive as err:
        undecided = err
    for r, entry in enumerate(rounds.done):
        fast, slow = entry["mine"]["pair"]["checked"]
        fail_unless(losses_agree(entry["mine"]["pair"]), f"in the checker's round {r} "
                    "train_fast's losses differ from train_slow's for the same rate",
                    yours=fast, expected=slow, hint="stage 2's contract holds at every size")
    if undecided is not None:
        raise undecided

"""performance-audit stage 2: explain the evidence. Traces: the learner's
``newest_trace_file``, ``write_trace`` and ``summarize_region`` against trace folders
the checker writes (runs seconds apart, made out of order), hand-built traces of known
nesting and of ties, and a real ``jax.profiler`` trace of its own, each parsed here by
``coursekit.measure.traces``, the learner's trace also read from the ``.xplane.pb``
beside it by XProf, its steps timed against the checker's synchronised median of the
stage-1 work. Costs: hand counts against the exact formula, the compiler's counts
against ``cost_analysis()`` of the program compiled here. Peak FLOP/s and bandwidth:
counts compared exactly, times against the checker's own measurements interleaved with
the learner's (ratios within wide windows), page faults against the checker's own
count. The roofline against its formulas on numbers drawn per run; cache sizes against
sysfs folders the checker writes and against /sys itself.

Every verdict on a time (the shortest traced step; the fastest matmul; the time per
in-place and per read_sum pass) is decided by ``audit_harness.timing_verdict`` in
interleaved rounds, after the check's exact facts: a round is the learner's function
called again through the learner process (a fresh trace of 2 steps; a
``measure_peak_flops`` or ``measure_bandwidth`` call) and the checker's own measurement of
the same work, back to back; the check's existing first measurement is round 0. Each
stops as soon as its interval clears the window and otherwise spends at most its share of
``BUDGET_S``, then says INCONCLUSIVE with what it measured; an undecided one does not stop
the next, so it hides no FAIL.

Budget: a quiet machine decides each verdict in 3 rounds. A verdict starts no new round
once its share of ``BUDGET_S`` (scaled by ``COURSE_TIMING_BUDGET``) is spent. What the
stage took, idle and under load: docs/checkers/performance-audit.md, "Cost".
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import time
from pathlib import Path

import audit_expected
import jax
import jax.numpy as jnp
import numpy as np
from audit_expected import roofline_cases, stored
from audit_harness import (
    TIME_RATIO_WINDOW,
    all_verdicts,
    checker,
    checker_stage1_samples,
    on_chip,
    stage1_workload,
    synced_samples,
    timing_verdict,
)

from coursekit.checking import bridge
from coursekit.checking.bridge import Workload
from coursekit.checking.device import KeptWork, time_on_device
from coursekit.checking.errors import CheckInconclusive, TamperEvidence
from coursekit.checking.frozen import copy_once
from coursekit.checking.graded import available, instructor_module
from coursekit.checking.learner import get_function, on_input
from coursekit.checking.probes import region_name, reported_unready, samples_of
from coursekit.checking.values import as_float, fail_unless, require_keys
from coursekit.measure import bandwidth, traces
from coursekit.workloads import catalog

# The references of a learner's copy are stored outputs for fixed public inputs
# (audit_expected), what the checker built itself (hand-built traces and sysfs folders,
# whose answers it knows by construction), public functions and independent instruments
# (XProf's reading of the profiler's other file, lscpu, a jnp.sum timed here). Where the
# instructor grades, the course's own code adds live cases on inputs drawn per run:
audit = instructor_module("performance_audit")  # its FLOP and byte counts
memory = instructor_module("bandwidth")  # its roofline arithmetic

# Each timing verdict's budget (seconds of rounds after the first; COURSE_TIMING_BUDGET
# scales them): no new round once it is spent, more than 3 only while the verdict is
# open, at most 10 (every round here is cheap: a trace of 2 steps, 5 matmuls, 4 passes;
# at 6 a correct trace once ended undecided under heavy load in 2 s of its 10).
BUDGET_S = {"trace": 10.0, "matmul": 6.0, "tiny": 6.0, "single": 6.0, "in_place": 8.0,
            "read_sum": 8.0, "first_step": 6.0}
# A sample of a tiny matmul that also makes its input reads 3-6x the checker's call of it
# (2.8x at n=129, 4.7x at 65, 6.5x at 33 on 2 CPU cores; 4.5-5.1x at 59-73, 2026-12-07); a
# correct one 1.5-1.6x at n=49-79 (its call through the learner process), so at a window
# of 2x the reference was undecided at a load of 0.5 per core in 2 runs of 3 (up to 30
# rounds: they are 10 ms each).
TINY_WINDOW = 2.5
TRACE_ROUND_STEPS = 2
# The first traced step over the shortest other one: 1-1.2x for steady steps, 1.6-2x when
# the first also runs a warm-up call's unfinished work (84.8 ms against 40.0 and 42.7),
# more when it runs several (one such call is named at once by the call probe).
FIRST_STEP_WINDOW = 2.0


def mlp_step():
    """A small jitted step whose trace holds nested PjitFunction events (this process's
    copy, and the catalog reference the learner process builds the same one from)."""
    return catalog.mlp_step(), Workload("performance-audit/mlp_step"), \
        (jnp.ones((33, 96), jnp.float32),)


def stored_trace(ctx) -> tuple[Path, str, dict, dict]:
    """A real ``jax.profiler`` trace of ``mlp_step`` (3 annotated steps, gzipped: nested
    PjitFunction events, other threads), stored with its region summary and the events in
    the region's time that are no direct children (audit_expected); the learner's call
    reads a copy of it."""
    import shutil
    got = stored()["trace"]
    copy = ctx.subdir("stored-trace") / got["file"]
    shutil.copyfile(audit_expected.FOLDER / got["file"], copy)
    return (copy, got["region"], got["summary"],
            {kind: [tuple(e) for e in events] for kind, events in
             got["not_children"].items()})


def synthetic_trace(ctx) -> tuple[Path, str, dict, dict]:
    """A hand-built trace with known nesting: region > {a > a > leaf, b}, plus an event
    on another thread overlapping the region (not a child), an event that starts inside
    the region and ends after it (not a child either), an event whose name starts with the
    region's name (another event, not an occurrence) and a decoy after it."""
    rng = ctx.rng("synthetic")
    region = region_name(ctx.rng("region"))
    events, t = [], 100.0
    want = {"count": 0, "total_us": 0.0, "children": {"PjitFunction(f)": 0.0, "wait": 0.0}}
    others = {"nested": [], "straddling": [], "other-thread": []}
    for _ in range(int(rng.integers(2, 5))):
        a, b = float(rng.uniform(10, 50)), float(rng.uniform(5, 20))
        gap = float(rng.uniform(1, 5))
        total = a + b + 3 * gap
        # what the checker built: the answer by construction, not by a parse
        want["count"] += 1
        want["total_us"] += total
        want["children"]["PjitFunction(f)"] += a
        want["children"]["wait"] += b
        others["nested"] += [("PjitFunction(f)", a - 1), ("leaf", a - 3)]
        others["other-thread"].append(("thunk", a))
        others["straddling"].append(("host_callback", 2 * gap))
        events += [
            {"ph": "X", "pid": 1, "tid": 7, "ts": t, "dur": total, "name": region},
            {"ph": "X", "pid": 1, "tid": 7, "ts": t + gap, "dur": a, "name": "PjitFunction(f)"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": t + gap + 0.5, "dur": a - 1,
             "name": "PjitFunction(f)"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": t + gap + 1, "dur": a - 3, "name": "leaf"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": t + 2 * gap + a, "dur": b, "name": "wait"},
            {"ph": "X", "pid": 1, "tid": 9, "ts": t + gap / 2, "dur": a, "name": "thunk"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": t + total - gap / 2, "dur": 2 * gap,
             "name": "host_callback"},
            {"ph": "X", "pid": 1, "tid": 7, "ts": t + total + 2 * gap, "dur": 20.0,
             "name": region + "_grad"},
        ]
        t += total + 50
    events.append({"ph": "X", "pid": 1, "tid": 7, "ts": t, "dur": 5.0, "name": "wait"})
    events.append({"ph": "M", "pid": 1, "tid": 7, "name": "thread_name",
                   "args": {"name": "python"}})
    path = ctx.subdir("synthetic") / "synthetic.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path, region, built_summary(want), others


def built_summary(want: dict) -> dict:
    """A summary of a hand-built trace from the durations the checker built it with."""
    child = sum(want["children"].values())
    return {**want, "child_us": child, "self_us": want["total_us"] - child}


def edge_trace(ctx) -> tuple[Path, str, dict, dict]:
    """A hand-built trace of ties, in whole microseconds so every sum is exact: a child
    that starts with the region, and inside it a grandchild that starts with both; a
    sibling that starts exactly where the previous one ends; a child that ends exactly with
    the region; events in the region's time on a lower and a higher pid and tid (other
    threads); a complete event the profiler cut off without its duration; and a second
    occurrence whose one child covers less than half of it."""
    rng = ctx.rng("edge-trace")
    region = region_name(ctx.rng("region")) + "_edge"
    pid, tid = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    t0 = float(rng.integers(1_000, 9_000))
    a, b, c, gap = (float(rng.integers(lo, hi)) for lo, hi in
                    ((20, 60), (5, 30), (5, 30), (3, 15)))
    total = a + b + gap + c

    def ev(name, ts, dur, p=pid, t=tid, **extra):
        return {"ph": "X", "pid": p, "tid": t, "ts": ts, "dur": dur, "name": name, **extra}

    events = [
        ev(region, t0, total),
        ev("first", t0, a),                      # starts with the region
        ev("first_inner", t0, a / 2),            # starts with both: nested in "first"
        ev("adjacent", t0 + a, b),               # starts where "first" ends
        ev("at_the_end", t0 + total - c, c),     # ends with the region
    ]
    # in the gap between "adjacent" and "at_the_end", where a child would be counted
    gap_start = t0 + a + b
    events += [ev(f"other_{what}", gap_start + 1, gap - 2, **where) for what, where in
               (("pid_low", {"p": pid - 1}), ("pid_high", {"p": pid + 1}),
                ("tid_low", {"t": tid - 1}), ("tid_high", {"t": tid + 1}))]
    cut = ev("cut_off", gap_start + 1, 1.0)
    del cut["dur"]                               # no duration: not a complete event
    events.append(cut)
    t1 = t0 + total + float(rng.integers(50, 200))
    small = float(rng.integers(2, 10))           # covers under half of all occurrences
    events += [ev(region, t1, 4 * total + small), ev("small", t1 + 3, small)]
    rng.shuffle(events)  # a trace's order is not its time order...
    names = [e["name"] for e in events]          # ...and here the inner one comes first
    i, o = names.index("first_inner"), names.index("first")
    if i > o:
        events[i], events[o] = events[o], events[i]
    path = ctx.subdir("edge") / "edge.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    want = {"count": 2, "total_us": 5 * total + small,
            "children": {"first": a, "adjacent": b, "at_the_end": c, "small": small}}
    others = {"nested": [("first_inner", a / 2)], "straddling": [],
              "other-thread": [(f"other_{w}", gap - 2) for w in
                               ("pid_low", "pid_high", "tid_low", "tid_high")],
              "cut-off": [("cut_off", 0.0)]}
    return path, region, built_summary(want), others


# Events in a region occurrence's time that are not its direct children, by why not.
NOT_CHILDREN = {
    "nested": "inside a direct child (PjitFunction inside PjitFunction): count direct "
              "children only, a nested event must not be added again",
    "straddling": "start inside the region and end after it: a child lies wholly inside "
                  "(starts at or after the region's start, ends at or before its end)",
    "other-thread": "start inside the region on another pid or tid: only the region's own "
                    "thread holds its children",
    "cut-off": "have no 'dur' (cut off when the trace stopped): an event without its "
               "duration is not a complete event, and no child, wherever it starts"}
CHILDREN_RULE = ("children are events on the region's pid/tid wholly inside an occurrence, "
                 "not inside another such event")


def summary_hint(yours: dict, expected: dict, key: str, where) -> str:
    """The hint for a summary that differs in ``key``: the kind of non-child events whose
    durations (child time) or names (children) account for the difference exactly, and
    only that; else what differs, and the rule. ``where``: the trace's (name, dur) events
    in the region's time that are no direct children, by ``NOT_CHILDREN`` reason."""
    if where is None or key == "total_us":
        return CHILDREN_RULE
    found = where
    if key == "children":
        extra = set(yours["children"]) - set(expected["children"])
        for kind, events in found.items():
            if extra and extra <= {name for name, _ in events}:
                return (f"your children {sorted(extra)} are events that {NOT_CHILDREN[kind]}")
        return f"{CHILDREN_RULE}; yours adds {sorted(extra)}" if extra else CHILDREN_RULE
    more = (as_float(yours["child_us"], "child_us") - expected["child_us"] if key == "child_us"
            else expected["self_us"] - as_float(yours["self_us"], "self_us"))
    found = {kind: events for kind, events in found.items() if events}
    for n in range(1, len(found) + 1):  # the fewest kinds that add up to the difference
        for kinds in itertools.combinations(found, n):
            if math.isclose(more, sum(d for k in kinds for _, d in found[k]), rel_tol=1e-6,
                            abs_tol=1e-3):
                return (f"your child time is {more:.6g} us more than the checker's: exactly "
                        "the events that " + "; and the events that ".join(
                            f"{NOT_CHILDREN[k]} ({len(found[k])})" for k in kinds))
    return f"your child time is {more:+.6g} us off the checker's: {CHILDREN_RULE}"


def compare_summaries(yours, expected, label: str, where=None) -> None:
    """``where``: the trace's events that are no direct children (``summary_hint``), for a
    hint that names the cause."""
    yours = require_keys(yours, ("count", "total_us", "children", "child_us", "self_us"),
                         "summarize_region")
    fail_unless(yours["count"] == expected["count"], f"{label}: wrong number of regions",
                yours=yours["count"], expected=expected["count"])
    for key in ("total_us", "child_us", "self_us"):
        value = as_float(yours[key], key)
        if not math.isclose(value, expected[key], rel_tol=1e-6, abs_tol=1e-3):
            fail_unless(False, f"{label}: {key} differs from the checker's parse",
                        yours=value, expected=expected[key],
                        hint=summary_hint(yours, expected, key, where))
    theirs = yours["children"]
    if not (isinstance(theirs, dict) and set(theirs) == set(expected["children"])):
        fail_unless(False, f"{label}: direct children differ",
                    yours=sorted(theirs) if isinstance(theirs, dict) else theirs,
                    expected=sorted(expected["children"]),
                    hint=summary_hint(yours, expected, "children", where)
                    if isinstance(theirs, dict) else CHILDREN_RULE)
    for name, us in expected["children"].items():
        fail_unless(math.isclose(as_float(theirs[name], name), us, rel_tol=1e-6,
                                 abs_tol=1e-3), f"{label}: time of child {name!r} differs",
                    yours=theirs[name], expected=us)


# A run whose folder was named by a clock this many hours ahead (the profiler names a run
# by its local time when it began: a run from a machine in another time zone, copied
# with its times kept, or one before a clock was turned back). Its name sorts last; by
# its modification time it is the second oldest.
AHEAD_HOURS = 5


def trace_folders(ctx) -> tuple[Path, Path]:
    """A log folder holding several trace runs seconds apart, created out of order (the
    newest is neither the first nor the last made), each with a trace file and the
    profiler's other file beside it, the second oldest named by a clock ahead, so its name
    sorts last (``AHEAD_HOURS``); and the newest run's trace file."""
    import gzip
    rng = ctx.rng("trace-folders")
    logdir = ctx.subdir("trace-folders")
    start = time.time() - 3600
    offsets = sorted(int(v) for v in rng.choice(np.arange(2, 60), 5, replace=False))
    order = [1, 3, 0, 4, 2]  # made in this order; offsets[4] is the newest
    newest = None
    for i in order:
        named = start + offsets[i] + (AHEAD_HOURS * 3600 if i == 1 else 0)
        stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(named))
        run = logdir / "plugins" / "profile" / stamp
        run.mkdir(parents=True)
        trace = run / "host.trace.json.gz"
        with gzip.open(trace, "wt") as fh:
            json.dump({"traceEvents": []}, fh)
        (run / "host.xplane.pb").write_bytes(b"")
        for f in (trace, run / "host.xplane.pb", run):
            os.utime(f, (start + offsets[i], start + offsets[i]))
        if i == 4:
            newest = trace  # by construction: the run written last
    return logdir, newest


def region_count_hint(count: int, steps: int) -> str:
    """What a count of region events other than one a step shows."""
    if count == 0:
        return "no complete event bears the region's name in the trace file returned"
    if count == 1:
        return f"one occurrence for {steps} steps: one annotation around all of them"
    if count % steps == 0:
        return f"{count} occurrences, {count // steps} a step: each step annotated once"
    return f"{count} occurrences for {steps} steps: one a step"


def newest_hint(got, folders: Path, want: Path) -> str:
    """What newest_trace_file returned instead of the newest run's trace file."""
    if not isinstance(got, (str, Path)):
        return f"yours is a {type(got).__name__}: a path is asked"
    got = Path(got)
    runs = sorted(folders.glob("plugins/profile/*/*.trace.json.gz"),
                  key=lambda p: p.stat().st_mtime)
    if got.resolve() == want.parent.resolve():
        return "yours is the newest run's folder: the trace file inside it is asked"
    by_name = sorted(folders.glob("plugins/profile/*/*.trace.json.gz"))
    if by_name and got.resolve() == by_name[-1].resolve() != want.resolve():
        return (f"yours is the run whose folder name sorts last ({got.parent.name}), and by "
                "its modification time it is the second oldest: a run's folder is named by "
                f"the local clock where it began ({AHEAD_HOURS} hours ahead here: another "
                "time zone, or a clock turned back since), so names need not follow the "
                "order the runs were written in; the run written last is asked")
    if runs and got.resolve() == runs[0].resolve():
        return ("yours is the oldest of the runs (written first, modification times an hour "
                "apart from now): the run written last is asked")
    if got.resolve() in {r.resolve() for r in runs}:
        return ("yours is a run neither first nor last by the time it was written: the runs "
                "were made out of order, and the one written last is asked")
    return "yours is none of the runs' trace files"


def trace_files(logdir: Path) -> dict[Path, tuple]:
    """The trace files under ``logdir`` with their modification time and size."""
    found = {}
    for p in Path(logdir).glob("plugins/profile/*/*.trace.json.gz"):
        stat = p.stat()
        found[p.resolve()] = (stat.st_mtime_ns, stat.st_size)
    return found


def written_by_the_call(logdir: Path, before: dict, what: str) -> Path:
    """The trace file a call wrote: the one in ``logdir`` that was not there before it, or
    was rewritten (the profiler makes a run folder per trace, named by the second: two
    traces in one second share it)."""
    new = sorted(p for p, stamp in trace_files(logdir).items() if before.get(p) != stamp)
    fail_unless(len(new) == 1, f"{what} did not write one new trace run into its log folder",
                yours=f"{len(new)} new trace files: {[p.parent.name for p in new]}",
                expected="one (one jax.profiler.trace a call)",
                hint="no trace file appeared under LOGDIR/plugins/profile/ during the call"
                if not new else "the call traced more than once: one trace holds every step")
    return new[0]


def region_events(path: Path, region: str) -> list[dict]:
    return sorted((e for e in traces.load_events(path)
                   if e.get("ph") == "X" and e.get("name") == region), key=lambda e: e["ts"])


@checker.check(2)
def trace_written_and_newest_found(impl, ctx):
    from coursekit.checking.errors import LearnerCodeError
    newest_trace_file = get_function(impl, "newest_trace_file")
    folders, want = trace_folders(ctx)
    got = newest_trace_file(str(folders))
    fail_unless(isinstance(got, (str, Path)) and Path(got).resolve() == want.resolve(),
                "newest_trace_file did not pick the newest of several trace runs seconds "
                "apart", yours=str(got), expected=str(want),
                hint=newest_hint(got, folders, want))
    empty = ctx.subdir("no-traces")
    try:
        got = newest_trace_file(str(empty))
    except LearnerCodeError as err:
        if isinstance(err, TamperEvidence) or err.kind != "exception":
            raise
        got = str(err)
        fail_unless("FileNotFoundError" in got and str(empty) in got,
                    "newest_trace_file on a folder without traces must raise "
                    "FileNotFoundError naming the folder", yours=got[:200],
                    expected=f"FileNotFoundError naming {empty}")
    else:
        fail_unless(False, "newest_trace_file on a folder without traces returned instead "
                    "of raising FileNotFoundError", yours=got,
                    expected="FileNotFoundError naming the folder")
    write_trace = get_function(impl, "write_trace")
    _, step, args = mlp_step()
    logdir = ctx.learner_dir("learner-trace")
    region = region_name(ctx.rng("region"))
    steps = int(ctx.rng("steps").integers(2, 5))
    write_trace(step, args, str(logdir), region + "_old", steps=1)
    # the steps traced are the stage-1 work (tens of ms a call), so a region that holds a
    # synchronised step is told from one that holds only its dispatch
    work, _, x = stage1_workload(ctx)
    before = trace_files(logdir)
    path = write_trace(work, (x,), str(logdir), region, steps=steps)
    checker_step = min(checker_stage1_samples(ctx, steps))  # right after yours
    newest = written_by_the_call(logdir, before, "write_trace")
    runs = set(trace_files(logdir))
    fail_unless(Path(path).resolve() == newest.resolve(),
                "write_trace did not return the newest trace file",
                yours=path, expected=str(newest),
                hint="yours is an earlier run's trace file: this call wrote the newest"
                if Path(path).resolve() in runs else
                "yours is no trace file of the folder this call wrote into")
    # the call probe around the step it handed you (self-reported: only ever a reason to
    # fail): a call made before the trace whose output was still being computed when the
    # first traced step began runs on inside that step
    unready = reported_unready("write_trace", work.facts)
    fail_unless(not unready, "write_trace: a call of the step was still running when the "
                "next one began", yours=f"calls {unready[:3]} of the step unfinished at the "
                "next call", expected="every call finished before the next",
                hint="the call made before the trace was not waited for: its work runs on "
                "inside the first traced step, which then holds more than one step"
                if unready == [0] else "a traced step's work was not finished when the next "
                "step began: each region holds its step's work finished")
    # the run's folder (the JSON and the .xplane.pb beside it), taken once: every parse
    # below reads this copy, whatever a learner process does to the folder meanwhile
    newest = copy_once(newest.parent, ctx.subdir("taken"), inside=logdir) / newest.name
    occurrences = region_events(newest, region)
    fail_unless(len(occurrences) == steps, "the annotated region is not in the trace once "
                "per step", yours=len(occurrences), expected=steps,
                hint=region_count_hint(len(occurrences), steps))
    compiling = sorted({e["name"] for e in traces.load_events(newest)
                        if e.get("ph") == "X" and "backend_compile" in str(e.get("name"))
                        and any(r["ts"] <= e["ts"] <= r["ts"] + r["dur"]
                                for r in occurrences)})
    fail_unless(not compiling, "a traced step compiles: the trace does not show steady "
                "steps", yours=compiling[:3], expected="no compile inside the region",
                hint="the step's compile runs inside a traced step: the trace then holds a "
                "cold step, where steady ones are asked")
    # A second parser on the second file of the same run: XProf reads the .xplane.pb
    # beside the JSON. Equal region count and durations (to xprof_trace's 10 ns) mean
    # the JSON is the profiler's own and our parse of it is right.
    from coursekit.compat import optional
    from coursekit.measure import xprof_trace
    try:
        xprof = xprof_trace.compare_region(newest, region)
    except optional.Absent as err:  # an accelerator image without xprof: said, not failed
        optional.note_skipped(err)
        xprof = {"mismatches": [], "xprof": None}
    except (ImportError, xprof_trace.XProfError, traces.TraceError) as err:
        xprof = {"mismatches": [str(err)], "xprof": None}
    fail_unless(not xprof["mismatches"], "the region in the trace JSON differs from "
                "XProf's reading of the .xplane.pb beside it",
                yours="; ".join(xprof["mismatches"][:3]), expected=f"{steps} {region!r} "
                f"events with the same durations in both files (XProf: {xprof['xprof']})",
                hint="the trace JSON you returned disagrees with the profiler's own recording "
                "of the same run: it was written or changed after the profiler")
    # Each traced step holds a completed step: the shortest of them against the checker's
    # shortest synchronised call of the same work, in rounds (a round: a fresh trace of
    # TRACE_ROUND_STEPS steps into a folder of its own, then as many calls here). And the
    # first traced step against the rest of its trace, in the same rounds: a first step
    # that also finishes work begun before the trace (a warm-up call not waited for) reads
    # about twice the others.
    rounds: dict[int, list[float]] = {}

    def traced_round(i):
        if i in rounds:
            return rounds[i]
        folder, name = ctx.learner_dir(f"learner-trace-{i}"), f"{region}_{i}"
        before = trace_files(folder)
        write_trace(stage1_workload(ctx)[0], (x,), str(folder), name,
                    steps=TRACE_ROUND_STEPS)
        events = region_events(copy_once(written_by_the_call(folder, before, "write_trace"),
                                         ctx.subdir("taken"), inside=folder), name)
        fail_unless(len(events) == TRACE_ROUND_STEPS, "the annotated region is not in the "
                    "trace once per step", yours=len(events), expected=TRACE_ROUND_STEPS,
                    hint=region_count_hint(len(events), TRACE_ROUND_STEPS))
        rounds[i] = [max(e["dur"] / 1e6, 1e-9) for e in events]
        return rounds[i]

    steps_s = [max(e["dur"] / 1e6, 1e-9) for e in occurrences]

    def shortest_step():
        timing_verdict(lambda i: min(traced_round(i + 1)), lambda i: min(checker_stage1_samples(
            ctx, TRACE_ROUND_STEPS)), (1 / TIME_RATIO_WINDOW, math.inf),
            "your shortest traced step", against="the checker's shortest synchronised call "
            "of the same work, measured in turn with yours",
            first=(min(steps_s), checker_step), budget_s=BUDGET_S["trace"], max_rounds=10,
            too_fast="a traced step is shorter than the work it runs: the region ends at the "
            "step's dispatch, before its result exists")

    def first_step():
        timing_verdict(lambda i: traced_round(i + 1)[0], lambda i: min(traced_round(i + 1)[1:]),
                       (0.0, FIRST_STEP_WINDOW), "your first traced step",
                       against="the shortest other step of the same trace",
                       first=(steps_s[0], min(steps_s[1:])), budget_s=BUDGET_S["first_step"],
                       max_rounds=10, too_fast="",
                       too_slow="your first traced step is longer than the steps after it: "
                       "it also finishes work started before it (a call made before the "
                       "trace and not waited for runs on inside the first region)")

    all_verdicts(shortest_step, first_step)


@checker.check(2)
def region_summary_matches_checker(impl, ctx):
    summarize = get_function(impl, "summarize_region")
    # each trace is parsed here before the learner's call reads it: what the call does
    # to the file afterwards cannot change the expected summary
    for label, what, trace in (
            ("hand-built trace", "a hand-built trace of nested events, other threads, a "
             "straddler and a name-prefix decoy", synthetic_trace(ctx)),
            ("hand-built trace of ties (events that start or end together)",
             "a hand-built trace of ties, one event cut off without its dur", edge_trace(ctx)),
            ("real jax.profiler trace", "a real jax.profiler trace (gzipped, stored with "
             "its summary)", stored_trace(ctx))):
        path, region, expected, others = trace
        with on_input(f"{what} ({path.name}), region {region!r}"):
            yours = summarize(str(path), region)
        compare_summaries(yours, expected, label, others)


def hand_hint(key: str, yours, want: int, written: int, itemsize: int) -> str:
    """What a wrong hand count of a matmul equals, of the classic slips (each the right
    count ``want`` changed the slip's way; ``written``: the output's bytes)."""
    try:
        value = float(yours)
    except (TypeError, ValueError):
        return "a count is an int"
    if value == float(round(value)) and not isinstance(yours, int):
        return f"yours is {type(yours).__name__}: a count is an int"
    slips = ({want // 2: "one FLOP per multiply-add, where a multiply and an add are two",
              want * itemsize: "FLOPs multiplied by the item size"}
             if key == "flops" else
             {want - written: "the inputs' bytes alone: the output is written once too",
              want + written: f"the right count plus the output's {written} bytes "
                              "again: the output read as well as written (as C += A @ B "
                              "does), where a product's least traffic writes it once and "
                              "never reads it" + (
                                  "; or the output counted at 4 bytes an element (a float32 "
                                  "accumulator's), where it is written in the inputs' "
                                  f"{itemsize}-byte dtype: the two give one count here"
                                  if itemsize == 2 else ""),
              want // itemsize: "elements, not bytes: each is itemsize bytes",
              want // itemsize * 4: f"4 bytes an element, whatever the dtype (this one has "
                                    f"{itemsize})"})
    for count, what in slips.items():
        if value == count:
            return f"yours is {what}"
    return f"yours is {value:.0f}: each array of the product is touched once, in bytes"


def first_cost(cost) -> dict:
    return cost[0] if isinstance(cost, (list, tuple)) else cost


def compiler_cost_hint(key: str, yours: float, compiled: dict, lowered: dict | None) -> str:
    """The hint for a compiler count that differs from the checker's compile: which of
    the checker's own counts of the same program it equals, and only that cause."""
    ckey = "flops" if key == "flops" else "bytes accessed"
    want = compiled[ckey]
    trans = float(compiled.get("transcendentals", 0.0))
    if key == "flops" and trans and math.isclose(yours, want + trans, rel_tol=1e-9):
        return (f"yours is the compiled flops ({want:.0f}) plus its transcendentals "
                f"({trans:.0f}, exp/tanh/...), which the compiled count of the same program "
                "keeps apart from its flops")
    low = (lowered or {}).get(ckey)
    if low is not None and not math.isclose(low, want, rel_tol=1e-9) and \
            math.isclose(yours, low, rel_tol=1e-9):
        return (f"yours is the unoptimised lowering's count ({low:.0f}), before fusion: the "
                "program as it will run is the compiled one")
    return (f"yours ({yours:.0f}) equals neither the compiled program's '{ckey}' nor a count "
            "the checker knows a mistake by")


def lowered_cost(fn, *args) -> dict | None:
    try:
        return first_cost(jax.jit(fn).lower(*args).cost_analysis())
    except Exception:  # noqa: BLE001 - only a hint rests on it
        return None


def compiled_cost(ctx, workload: Workload, fn, *args) -> dict:
    """The course's ``cost_analysis()`` of ``fn`` compiled for the device the learner's
    code runs on (where the instructor grades): here on a CPU; on an accelerator compiled
    there, in the learner process (counts for another backend's compiler differ: fusion
    decides the bytes)."""
    if on_chip(ctx):
        return bridge.inspect(ctx.learner, "course/compiled_cost", workload, *args)
    return audit.compiled_cost(fn, *args)


def stored_counts_apply(ctx) -> bool:
    """Whether the stored compiler counts are this run's: the same JAX, compiled for the
    CPU (a learner process on a chip compiles for the chip)."""
    return stored()["jax"] == jax.__version__ and not on_chip(ctx)


def matmul_cases(ctx) -> list[dict]:
    """The matmuls the counts are checked on: the stored public shapes (with their counts
    by hand and, where they apply, by this JAX's CPU compiler), then, where the
    instructor grades, shapes drawn per run counted live."""
    cases = [{"dtype": jnp.dtype(c["dtype"]), "shape": c["shape"], "hand": c["hand"],
              "compiled": c["compiled"] if stored_counts_apply(ctx) else None,
              "lowered": c["lowered"]} for c in stored()["matmuls"]]
    if available():
        rng = ctx.rng("shapes")
        for dtype in (jnp.float32, jnp.bfloat16):
            m, k, n = (int(v) | 1 for v in rng.integers(17, 300, 3))
            a, b = jnp.ones((m, k), dtype), jnp.ones((k, n), dtype)
            cases.append({"dtype": jnp.dtype(dtype), "shape": [m, k, n],
                          "hand": audit.matmul_cost(m, k, n, jnp.dtype(dtype).itemsize),
                          "compiled": compiled_cost(ctx, Workload("jnp.matmul"), jnp.matmul,
                                                    a, b),
                          "lowered": lowered_cost(jnp.matmul, a, b)})
    return cases


def fused_cases(ctx) -> list[tuple]:
    """(input, compiled counts, lowered counts) of the fused program: the stored public
    input where its counts apply, and a live one where the instructor grades."""
    from coursekit.workloads.remote_performance_audit import fused_reduce
    got = stored()["fused_reduce"]
    cases = [(jnp.asarray(audit_expected.fused_input(tuple(got["shape"]), got["seed"])),
              got["compiled"], got["lowered"])] if stored_counts_apply(ctx) else []
    if available():
        rng = ctx.rng("shapes")
        rows, cols = (int(v) | 1 for v in rng.integers(100, 400, 2))
        a = jnp.asarray(rng.standard_normal((rows, cols), dtype=np.float32))
        cases.append((a, compiled_cost(ctx, Workload("performance-audit/fused_reduce"),
                                       fused_reduce, a), lowered_cost(fused_reduce, a)))
    return cases


@checker.check(2)
def cost_by_hand_and_compiler(impl, ctx):
    by_hand = get_function(impl, "matmul_cost_by_hand")
    from_compiler = get_function(impl, "cost_from_compiler")
    for case in matmul_cases(ctx):
        dtype, (m, k, n), expected = case["dtype"], case["shape"], case["hand"]
        a, b = jnp.ones((m, k), dtype), jnp.ones((k, n), dtype)
        itemsize = dtype.itemsize
        hand = require_keys(by_hand(m, k, n, itemsize), ("flops", "bytes"), "by hand")
        written = m * n * itemsize  # the output's bytes
        for key in ("flops", "bytes"):
            fail_unless(as_float(hand[key], key) == expected[key] and
                        isinstance(hand[key], int),
                        f"hand count of {key} is off for ({m}x{k}) @ ({k}x{n}) {dtype.name}",
                        yours=hand[key], expected=f"{expected[key]} (an int)",
                        hint=hand_hint(key, hand[key], expected[key], written, itemsize))
        compiled = case["compiled"]
        if compiled is None:
            continue
        theirs = require_keys(from_compiler(Workload("jnp.matmul"), a, b), ("flops", "bytes"),
                              "compiler")
        for key, ckey in (("flops", "flops"), ("bytes", "bytes accessed")):
            yours = as_float(theirs[key], key)
            if not math.isclose(yours, compiled[ckey], rel_tol=1e-9):
                fail_unless(False, f"compiler {key} differs from cost_analysis() for "
                            f"({m}x{k}) @ ({k}x{n}) {dtype.name}",
                            yours=theirs[key], expected=compiled[ckey],
                            hint=compiler_cost_hint(key, yours, compiled, case["lowered"]))
    # a program the compiler fuses: the compiled cost reads the input once, the
    # unoptimised lowering counts every intermediate (several times more bytes)
    fused = fused_cases(ctx)
    if not fused:
        raise CheckInconclusive(
            "the compiler's counts of this run cannot be compared here",
            evidence=f"the stored counts are JAX {stored()['jax']}'s on the CPU; this run "
            f"compiles with JAX {jax.__version__} on the learner process's device",
            hint="nothing here points at your code: your hand counts were checked; the "
            "grader compares the compiler's counts")
    for a, compiled, lowered in fused:
        theirs = require_keys(from_compiler(Workload("performance-audit/fused_reduce"), a),
                              ("flops", "bytes"), "compiler")
        for key, ckey in (("flops", "flops"), ("bytes", "bytes accessed")):
            yours = as_float(theirs[key], key)
            if not math.isclose(yours, compiled[ckey], rel_tol=1e-9):
                fail_unless(False, f"compiler {key} of a fused program differs from the "
                            "compiled cost_analysis()", yours=theirs[key],
                            expected=compiled[ckey],
                            hint=compiler_cost_hint(key, yours, compiled, lowered))


def own_sum_samples(ctx, nbytes: int, iters: int) -> list[float]:
    """The checker's reference pass over ``nbytes`` of float32: ``iters`` synchronised
    calls of the public ``jnp.sum`` (a read of every byte), compiled and warmed once per
    size, here or kept on the chip (in the learner process, its samples bounded by the
    wall time around the request). An in-place pass moves twice its bytes."""
    def make():
        x = jnp.ones((nbytes // 4,), jnp.float32)
        if on_chip(ctx):
            key = f"read-sum-{ctx.seed}-{nbytes}"
            time_on_device(ctx.learner, Workload("performance-audit/read_sum"), x, iters=1,
                           first=True, keep=key)
            return KeptWork(ctx.learner, key), x
        total = jax.jit(jnp.sum)
        jax.block_until_ready(total(x))
        return total, x
    fn, x = ctx.once(f"own-sum-{nbytes}", make)
    return synced_samples(fn, x, iters=iters)


def own_in_place_samples(ctx, nbytes: int, iters: int) -> list[float]:
    """The checker's reference in-place pass over ``nbytes`` of float32 (the catalog's
    ``x * 2 + 1`` with its input donated, each output the next input): a fresh copy and
    array, its first call apart, then ``iters`` synchronised passes. On a chip, where no
    host page fault is paid, two of its ``jnp.sum`` passes stand for one (627 against 685
    GB/s on a TPU v5e)."""
    if on_chip(ctx):
        return [2 * s for s in own_sum_samples(ctx, nbytes, iters)]
    from coursekit.workloads.remote_performance_audit import in_place
    step, x = in_place(), jnp.ones((nbytes // 4,), jnp.float32)
    x = jax.block_until_ready(step(x))
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        x = jax.block_until_ready(step(x))
        samples.append(time.perf_counter() - start)
    return samples


def lscpu_caches() -> dict | None:
    """This machine's data-cache sizes by level as ``lscpu -C`` (util-linux) reports them,
    an instrument independent of the learner's reading; None where it cannot say."""
    import shutil
    import subprocess
    if shutil.which("lscpu") is None:
        return None
    try:
        out = subprocess.run(["lscpu", "-C", "-J", "--bytes"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
        caches = json.loads(out)["caches"]
        return {f"L{int(c['level'])}": int(c["one-size"]) for c in caches
                if c.get("type") in ("Data", "Unified")}
    except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError):
        return None


def bandwidth_bytes() -> int:
    """The array size of the bandwidth check: a quarter of the last-level cache, kept
    within 64-128 MiB (past glibc's 32 MiB mmap threshold, so a fresh output is fresh
    pages every call; small enough for a 2-core machine)."""
    llc = max((lscpu_caches() or {}).values(), default=256 * 2**20)
    return min(max(llc // 4, 64 * 2**20), 128 * 2**20) // 2**20 * 2**20


def learner_bandwidth(impl, nbytes: int, kind: str, iters: int) -> dict:
    m = require_keys(get_function(impl, "measure_bandwidth")(nbytes=nbytes, iters=iters,
                                                             kind=kind),
                     ("kind", "moved_bytes", "samples_s", "minor_faults", "bandwidth"),
                     "measure_bandwidth")
    samples = samples_of(m, f"measure_bandwidth({kind!r})", iters)
    moved, rate = (as_float(m[k], f"{kind} {k}") for k in ("moved_bytes", "bandwidth"))
    if not math.isclose(rate, moved / min(samples), rel_tol=1e-9):
        best = min(samples)
        fail_unless(False, f"measure_bandwidth({kind!r}): bandwidth is not moved_bytes over "
                    "your fastest sample", yours=f"{rate:.6g} bytes/s",
                    expected=f"{moved / best:.6g} bytes/s = {moved:.0f} bytes / {best:.6g} s",
                    hint=rate_hint(rate, moved, samples, "moved_bytes"))
    faults = m["minor_faults"]
    fail_unless(isinstance(faults, list) and len(faults) == iters and
                all(type(f) is int and f >= 0 for f in faults),
                "minor_faults must hold one count per sample",
                yours=faults, expected=f"{iters} ints (ru_minflt after - before)",
                hint="this process's minor page-fault count, read just before and just after "
                "each sample")
    return m


def rate_hint(rate: float, amount: float, samples: list[float], what: str) -> str:
    """What a rate that is not ``amount`` over the fastest sample is, where the samples
    say: the same amount over their median, mean or slowest."""
    for name, seconds in (("median", statistics.median(samples)),
                          ("mean", statistics.fmean(samples)), ("slowest", max(samples))):
        if math.isclose(rate, amount / seconds, rel_tol=1e-9):
            return (f"yours is {what} over the {name} of your samples ({seconds:.6g} s): the "
                    "rate asked is the one the fastest sample attained")
    return f"the rate is {what} per second of your fastest sample"


def learner_peak_flops(impl, n: int, iters: int, flops: int) -> float:
    """The learner's ``measure_peak_flops(n, iters)``, its count and rate checked exactly;
    its fastest sample, the figure a round compares."""
    m = require_keys(get_function(impl, "measure_peak_flops")(n=n, iters=iters),
                     ("n", "flops", "samples_s", "best_s", "flops_per_s"),
                     "measure_peak_flops")
    fail_unless(m["n"] == n, "measure_peak_flops reports another size than it was "
                "asked for", yours=m["n"], expected=n)
    count = as_float(m["flops"], "flops")
    fail_unless(count == flops and isinstance(m["flops"], int),
                f"the FLOP count of one ({n}x{n}) @ ({n}x{n}) product is off",
                yours=m["flops"], expected=f"{flops} (an int)",
                hint=f"yours is n^3 = {n**3}: one FLOP per multiply-add, where a multiply "
                "and an add are two" if count == n**3 else
                "the count is exact: every multiply and every add of the product, an int")
    samples = samples_of(m, "measure_peak_flops", iters)
    best = as_float(m["best_s"], "best_s")
    if best != min(samples):
        named = [name for name, v in (("median", statistics.median(samples)),
                                      ("mean", statistics.fmean(samples)),
                                      ("slowest", max(samples)))
                 if math.isclose(best, v, rel_tol=1e-12)]
        fail_unless(False, "best_s is not the fastest of your samples_s", yours=best,
                    expected=min(samples), hint=f"yours is the {named[0]} of your samples"
                    if named else "best_s is the fastest sample itself")
    rate = as_float(m["flops_per_s"], "flops_per_s")
    fail_unless(math.isclose(rate, flops / best, rel_tol=1e-9),
                "flops_per_s is not your FLOP count over your fastest sample",
                yours=rate, expected=f"{flops / best:.6g} FLOP/s = {flops} FLOPs / "
                f"{best:.6g} s", hint=rate_hint(rate, flops, samples, "the FLOP count"))
    return best


def square_flops(n: int) -> int:
    """The FLOPs of an (n, n) @ (n, n) product, stored by size (audit_expected)."""
    return int(stored()["square_matmul_flops"][str(n)])


def own_square_matmul(ctx, a):
    """The checker's ``a @ a`` for the size of ``a``, compiled and warm (each round times
    calls only): here, or kept on the chip (in the learner process)."""
    if on_chip(ctx):
        key = f"peak-matmul-{ctx.seed}-{a.shape[0]}"
        time_on_device(ctx.learner, Workload("performance-audit/square_matmul"), a, iters=1,
                       first=True, keep=key)
        return KeptWork(ctx.learner, key)
    matmul = jax.jit(lambda a: a @ a)
    jax.block_until_ready(matmul(a))
    return matmul


def fresh_sizes(n0: int, i: int) -> tuple[int, int]:
    """Round i's two matrix sizes for the single-sample verdict: odd, never timed before
    in this run, so every learner call meets a shape new to its process."""
    return n0 + 4 * i + 2, n0 + 4 * i + 4


def single_samples(impl, sizes) -> float:
    """The faster of the learner's only samples of ``measure_peak_flops(n, iters=1)`` at
    each size (each call's count and rate checked as every call's): one preempted sample
    does not decide a round."""
    counts = {n: square_flops(n) for n in sizes}
    return min(learner_peak_flops(impl, n, 1, counts[n]) for n in sizes)


def checker_singles(sizes) -> float:
    """The same statistic of the checker's own: per size, a fresh jit compiled and called
    once outside the clock, then its one synchronised call timed; the faster of the two."""
    def one(n):
        square = jnp.asarray(np.full((n, n), 0.5, np.float32))
        product = jax.jit(jnp.matmul)
        product(square, square).block_until_ready()
        return synced_samples(product, square, square, iters=1)[0]
    return min(one(n) for n in sizes)


@checker.check(2)
def peak_flops_and_bandwidth_measured(impl, ctx):
    # The count is exact, so it is compared exactly: a factor of two in it (one FLOP per
    # multiply-add) is exactly 2x, which no timing window can tell from load. The rate must
    # be that count over the learner's own fastest sample; that sample is then a
    # measurement, compared with the checker's own in interleaved rounds (best of 5
    # calls a side per round: a burst of load hits both sides of a round alike; with two
    # fixed rounds the reference once failed at 0.122x under heavy load).
    n = int(ctx.rng("peak-n").integers(150, 200)) * 2 + 1  # odd, 301-399
    a = jnp.ones((n, n), jnp.float32)
    flops, peak_iters = square_flops(n), 5
    matmul = own_square_matmul(ctx, a)
    checker_best = min(synced_samples(matmul, a, iters=peak_iters))
    matmul_first = (learner_peak_flops(impl, n, peak_iters, flops), checker_best)

    # iters=1 on a size new to the learner's process: the one sample is the steady call
    # only where the compile (tens of ms, 20-80x this matmul) and the input (a new shape:
    # jnp.ones compiles too) stay outside the clock; the checker's side times its own
    # compiled matmul of the same size
    n_single = n - 100  # 201-299: a run of about 0.1-0.5 ms
    single_first = (single_samples(impl, fresh_sizes(n_single, 0)),
                    checker_singles(fresh_sizes(n_single, 0)))

    def single_verdict():
        timing_verdict(
            lambda i: single_samples(impl, fresh_sizes(n_single, i + 1)),
            lambda i: checker_singles(fresh_sizes(n_single, i + 1)), (0.0, TIME_RATIO_WINDOW),
            f"your only sample (iters=1) of matmuls of sizes new to your process (n from "
            f"{n_single + 2})", against="the checker's compiled matmul of the same size, "
            "interleaved with yours", first=single_first, budget_s=BUDGET_S["single"],
            max_rounds=8, too_fast="your sample ended before the matmul did",
            too_slow="your only sample holds more than one call of the compiled matmul: with "
            "iters=1 it is the first call of your jitted function that is timed (its "
            "compile) or the making of its input (a new shape compiles there too)")

    # A matmul so small that its call is mostly dispatch (tens of us): a sample holding
    # anything more than one call (its input made again: 3-6x here) is far past the
    # checker's own call of it, where at the larger size the extra hides in the noise.
    n_tiny = int(ctx.rng("peak-tiny").integers(24, 40)) * 2 + 1  # odd, 49-79
    tiny = jnp.ones((n_tiny, n_tiny), jnp.float32)
    tiny_matmul = own_square_matmul(ctx, tiny)
    tiny_first = (learner_peak_flops(impl, n_tiny, peak_iters, square_flops(n_tiny)),
                  min(synced_samples(tiny_matmul, tiny, iters=peak_iters)))

    def tiny_verdict():
        timing_verdict(
            lambda i: learner_peak_flops(impl, n_tiny, peak_iters, square_flops(n_tiny)),
            lambda i: min(synced_samples(tiny_matmul, tiny, iters=peak_iters)),
            (1 / TIME_RATIO_WINDOW, TINY_WINDOW),
            f"your fastest {n_tiny}x{n_tiny} matmul (best_s), a call that is mostly "
            "dispatch", against="the checker's compiled matmul of the same size, "
            "interleaved with yours", first=tiny_first, budget_s=BUDGET_S["tiny"],
            max_rounds=30, too_fast="your fastest call is shorter than the matmul it "
            "times: the clock stopped at its dispatch, before the product existed",
            too_slow="your fastest sample holds more than one call of the compiled matmul: "
            "at this size each extra operation inside the timed region shows (an input "
            "made or converted inside it, a host copy, a second call)")

    def matmul_verdict():
        timing_verdict(
            lambda i: learner_peak_flops(impl, n, peak_iters, flops),
            lambda i: min(synced_samples(matmul, a, iters=peak_iters)), TIME_RATIO_WINDOW,
            f"your fastest {n}x{n} matmul (best_s)",
            against="the checker's synchronised matmul, interleaved with yours",
            first=matmul_first, budget_s=BUDGET_S["matmul"], max_rounds=10,
            too_fast="your fastest call is shorter than the matmul it times: the clock "
            "stopped at its dispatch, before the product existed",
            too_slow="even your fastest call is longer than one compiled matmul of this "
            "size: every sample holds more than the product (a compile, an input made, a "
            "host copy)")

    # a few bytes past a whole number of float32s: the array holds nbytes // 4 of them,
    # and moved bytes count what the op touches, not what was asked for
    nbytes = bandwidth_bytes() + int(ctx.rng("bandwidth-tail").integers(1, 4))
    iters, touched = 4, nbytes // 4 * 4
    pages = -(-nbytes // bandwidth.PAGE)
    # round 0: the checker's in-place, fresh-output and read_sum measurements, then yours
    chip = on_chip(ctx)  # device memory has no host page faults: those checks are the CPU's
    ref_first = {"in_place": min(own_in_place_samples(ctx, nbytes, iters)),
                 "read_sum": min(own_sum_samples(ctx, nbytes, iters))}
    yours = {kind: learner_bandwidth(impl, nbytes, kind, iters)
             for kind in ("in_place", "read_sum")}
    for kind, moved in (("in_place", 2 * touched), ("read_sum", touched)):
        got = as_float(yours[kind]["moved_bytes"], "moved_bytes")
        slips = {nbytes * moved // touched: "the bytes asked (nbytes), where the array holds "
                 "nbytes // 4 float32s: only those are moved",
                 touched: "the array's bytes once: x * 2 + 1 also writes every byte",
                 2 * touched: "the array's bytes twice: a sum only reads them",
                 moved // 4: "elements, not bytes"}
        fail_unless(got == moved, f"{kind}: wrong bytes moved per call (nbytes={nbytes})",
                    yours=got, expected=moved, hint=f"yours is {slips[got]}" if got in slips
                    and got != moved else "the bytes the op reads plus the bytes it writes "
                    "in one call")
    faults = max(yours["in_place"]["minor_faults"])
    fail_unless(chip or faults < pages // 4,
                f"your in-place samples paid {faults} minor page faults per call: a fresh "
                f"{nbytes // 2**20} MiB output each call (one fault per page of it)",
                yours=f"{faults} faults per call", expected=f"about 0 (the array has {pages} "
                "pages)", hint="page faults, not memory: an in-place sample must write into "
                "memory the process already holds, not a fresh output each call")
    # the fault counts themselves, where the checker knows what they must be: a fresh
    # output each call faults once per page of it (the checker's own count, here)
    fresh = learner_bandwidth(impl, nbytes, "fresh_output", 3)
    want = 0 if chip else pages
    counts = fresh["minor_faults"]
    fail_unless(chip or (min(counts) >= want / 2 and max(counts) <= 2 * want),
                "your fresh_output samples report other minor page-fault counts than a "
                f"fresh {nbytes // 2**20} MiB output causes", yours=counts,
                expected=f"about {want:.0f} per call (one a page of the fresh output)",
                hint=("your counts grow sample by sample, about "
                f"{(counts[-1] - counts[0]) / (len(counts) - 1):.0f} more each: a running "
                "total since before the first sample, where each sample's own faults are "
                "asked") if all(
                    b - a > want / 2 for a, b in zip(counts, counts[1:])) else
                "each sample's own minor page faults in this process, read just before and "
                "just after it")
    # The times, last, so that a noisy machine leaves none of the exact facts above unsaid:
    # the matmul, then the time per pass of each kind, in rounds (your measure_bandwidth
    # call against the checker's own pass of the same kind and size, the public jnp.sum
    # or the catalog's in-place op, best of 4 steady calls). An undecided one does not
    # stop the next.
    def pass_verdict(kind, moved):
        def yours_per_pass(i):
            m = learner_bandwidth(impl, nbytes, kind, iters)
            return moved / as_float(m["bandwidth"], f"{kind} bandwidth")

        def checker_per_pass(i):
            if kind == "in_place":
                return min(own_in_place_samples(ctx, nbytes, iters))
            return min(own_sum_samples(ctx, nbytes, iters))

        timing_verdict(
            yours_per_pass, checker_per_pass, TIME_RATIO_WINDOW,
            f"your time per {kind} pass (from bandwidth)",
            against=f"the checker's {kind} pass over the same bytes, interleaved with "
            "yours", first=(moved / as_float(yours[kind]["bandwidth"], f"{kind} bandwidth"),
                            ref_first[kind]), budget_s=BUDGET_S[kind], max_rounds=10,
            too_fast="your time per pass (moved bytes over your bandwidth) is shorter than "
            "the pass: more bytes than the op moves, or samples that end before it does",
            too_slow=("your passes read slower than the checker's while reporting few page "
                      "faults: your samples hold more than the pass (a compile, an "
                      "allocation or a host copy all read slower)") if kind == "in_place" else
            "your sums read slower than the checker's: your samples hold more than the sum "
            "(a compile or a host copy reads slower)")

    # iters=1 on a small array: the one sample is the steady pass only where the compile
    # (tens of ms, 25-50x a pass of 8 MiB in place) stays outside the clock
    small = 8 * 2**20 + int(ctx.rng("bandwidth-small").integers(1, 4)) * 4
    small_moved = 2 * (small // 4 * 4)

    def one_pass(i):
        m = learner_bandwidth(impl, small, "in_place", 1)
        return small_moved / as_float(m["bandwidth"], "in_place bandwidth")

    def checker_one_pass(i):  # its one in-place pass after its own first call
        return own_in_place_samples(ctx, small, 1)[0]

    def single_pass_verdict():
        timing_verdict(
            one_pass, checker_one_pass, (0.0, TIME_RATIO_WINDOW),
            f"your only in_place sample (iters=1) of {small // 2**20} MiB",
            against="the checker's one in_place pass after its own first call, interleaved "
            "with yours",
            first=(one_pass(0), checker_one_pass(0)),
            budget_s=BUDGET_S["single"], max_rounds=8,
            too_fast="your sample ended before the pass did",
            too_slow="your only sample holds more than one pass: with iters=1 it is the "
            "first call of your jitted op that is timed (its compile)")

    all_verdicts(matmul_verdict, tiny_verdict, single_verdict, single_pass_verdict,
                 lambda: pass_verdict("in_place", 2 * touched),
                 lambda: pass_verdict("read_sum", touched))


def roofline_want(ctx) -> list[dict]:
    """The roofline cases with their figures: the stored public cases (audit_expected),
    then, where the instructor grades, cases drawn per run with the course's arithmetic."""
    cases = [dict(c) for c in stored()["roofline"]]
    if available():
        for case in roofline_cases(ctx.rng("roofline")):
            case["want"] = memory.roofline(*case["args"])
            if case["kind"] == "per_level":
                case["at_rate"] = {name: memory.roofline(*case["args"][:3], rate, 0, {})[
                    "predicted_s"] for name, rate in case["rates"].items()}
            cases.append(case)
    return cases


def roofs_case(r: dict, args: list, want: dict, factor: float) -> None:
    """One workload on a single bandwidth: intensity, ridge, bound, attainable FLOP/s,
    memory level and the two time bounds against the case's figures."""
    flops, nbytes, peak, bw, working_set, caches = args
    r = require_keys(r, ("intensity", "ridge", "bound", "attainable_flops", "memory_level"),
                     "roofline")
    intensity = flops / nbytes
    given = f"flops={flops:.4g}, bytes={nbytes:.4g}, peak={peak:.4g}, bandwidth={bw:.4g}"
    for key, slips in (
            ("intensity", {nbytes / flops: "the bytes per FLOP, the inverse"}),
            ("ridge", {bw / peak: "the inverse of the ridge", peak * bw: "the product of "
                       "the two roofs"})):
        got = as_float(r[key], key)
        named = [what for value, what in slips.items() if math.isclose(got, value,
                                                                       rel_tol=1e-9)]
        fail_unless(math.isclose(got, want[key], rel_tol=1e-9), f"{key} differs from the "
                    f"checker's figure ({given})", yours=got, expected=want[key],
                    hint=f"yours is {named[0]}" if named else
                    f"yours is {got / want[key]:.4g}x the checker's, in FLOP per byte")
    fail_unless(r["bound"] == want["bound"], "wrong bound for an intensity "
                f"{factor:.3g}x the ridge", yours=r["bound"],
                expected=want["bound"], hint=f"this workload's intensity is "
                f"{factor:.3g}x the ridge; yours names the other roof")
    got = as_float(r["attainable_flops"], "attainable_flops")
    named = [what for value, what in ((max(peak, intensity * bw), "the higher roof, where "
                                       "the lower one limits"),
                                      (intensity * bw, "the memory roof, also where the "
                                       "compute roof is lower"),
                                      (peak, "the compute roof, also where the memory "
                                       "roof is lower"))
             if math.isclose(got, value, rel_tol=1e-9)]
    fail_unless(math.isclose(got, want["attainable_flops"], rel_tol=1e-9), "attainable "
                f"FLOP/s differs from the checker's figure ({given})", yours=got,
                expected=want["attainable_flops"], hint=f"yours is {named[0]}" if named
                else f"yours is {got / want['attainable_flops']:.4g}x the checker's")
    smaller = sorted(caches.items(), key=lambda kv: kv[1])
    fits = [name for name, size in smaller if working_set <= size]
    exact = [name for name, size in smaller if working_set == size]
    fail_unless(r["memory_level"] == want["memory_level"],
                f"a working set of {working_set} bytes lives in {want['memory_level']}",
                yours=r["memory_level"], expected=want["memory_level"],
                hint=(f"{working_set} bytes is exactly {exact[0]}'s size, and a working set "
                      f"of exactly a level's size fits that level: yours is "
                      f"{r['memory_level']} (sizes {dict(smaller)})")
                if exact and r["memory_level"] != exact[0]
                else (f"{working_set} bytes fit {', '.join(fits)}: yours is {fits[-1]}, the "
                      f"largest level it fits, where it lives in the smallest, {fits[0]} "
                      f"(sizes {dict(smaller)})")
                if len(fits) > 1 and r["memory_level"] == fits[-1]
                else f"{working_set} bytes fit {', '.join(fits)} (sizes {dict(smaller)})"
                if fits else f"{working_set} bytes fit no cache (the largest holds "
                f"{smaller[-1][1]})")
    for key in ("lower_s", "upper_s"):
        got = as_float(r.get(key), key)
        named = [what for value, what in (
            (want["compute_s"], "the compute time alone"),
            (want["memory_s"], "the memory time alone"),
            (want["lower_s"], "the time with the two fully overlapped"),
            (want["upper_s"], "the time with the two not overlapped at all"))
            if math.isclose(got, value, rel_tol=1e-9)]
        fail_unless(math.isclose(got, want[key], rel_tol=1e-9),
                    f"{key}: the time bound is off", yours=r.get(key), expected=want[key],
                    hint=f"yours is {named[0]}" if named else "yours is none of the "
                    "compute time, the memory time or a bound they give")


@checker.check(2)
def roofline_bound_and_memory_level(impl, ctx):
    roofline = get_function(impl, "roofline")
    for case in roofline_want(ctx):
        args, want = case["args"], case["want"]
        flops, nbytes, peak, bw, working_set, caches = args
        with on_input(f"flops={flops!r}, nbytes={nbytes!r}, peak_flops={peak!r}, "
                      f"bandwidth={bw!r}, working_set_bytes={working_set}, caches={caches}"):
            r = roofline(flops, nbytes, peak, bw if not isinstance(bw, dict) else dict(bw),
                         working_set, dict(caches))
        if case["kind"] == "roofs":
            roofs_case(r, args, want, case["intensity_x_ridge"])
        elif case["kind"] == "by_size":
            # levels are found by size, not by name: a memory-side cache in HBM (a Xeon
            # Max in cache mode) is the largest level, yet its name sorts first
            level = want["memory_level"]
            r = require_keys(r, ("memory_level",), "roofline")
            fail_unless(r["memory_level"] == level, f"with caches {sorted(caches)}, a "
                        f"working set of {working_set} bytes lives in {level}",
                        yours=r["memory_level"], expected=level, hint=f"the caches' sizes "
                        f"are {caches}; yours is a level by name order"
                        if r["memory_level"] != "DRAM" else "yours is no cache, yet one "
                        "holds it")
        else:  # bandwidth per level: the level the working set lives in decides the roof
            level, expected = want["memory_level"], want["predicted_s"]
            r = require_keys(r, ("memory_level", "predicted_s"), "roofline")
            got = as_float(r["predicted_s"], "predicted_s")
            used = [name for name, at in case["at_rate"].items()
                    if math.isclose(got, at, rel_tol=1e-9)]
            fail_unless(r["memory_level"] == level and math.isclose(got, expected,
                                                                    rel_tol=1e-9),
                        f"with a bandwidth per level, a {working_set}-byte working set must "
                        f"be predicted with {level}'s bandwidth",
                        yours=(r["memory_level"], r["predicted_s"]),
                        expected=(level, expected), hint=f"your predicted_s is the time at "
                        f"{used[0]}'s bandwidth" if used else "your predicted_s is the "
                        "time at none of the levels' bandwidths")


def cache_hint(theirs, want: dict) -> str:
    """What a wrong reading of the checker's sysfs folder shows, level by level (the
    folder holds every unit, an instruction cache and two broken indexes first)."""
    if not isinstance(theirs, dict):
        return f"yours is a {type(theirs).__name__}: a dict of level -> bytes is asked"
    if not theirs:
        return ("yours is empty: two broken indexes come first in this folder (one without "
                "a size, one whose level is no number); each is skipped, the read goes on")
    off = []
    for level, size in want.items():
        got = theirs.get(level)
        if got is None:
            off.append(f"{level} missing")
        elif type(got) is not int:
            off.append(f"{level} is {type(got).__name__}, not int")
        elif got != size and level == "L1" and got == INSTRUCTION_L1:
            off.append(f"L1 {got} for {size}: the instruction cache's size (an instruction "
                       "cache holds no data)")
        elif got != size:
            ratio = got / size
            unit = ("1000 where sysfs's K, M, G are 1024" if 0.9 < ratio < 1 else
                    "a unit read wrong" if ratio != 1 else "")
            off.append(f"{level} {got} for {size}" + (f" ({unit})" if unit else ""))
    extra = sorted(set(theirs) - set(want))
    if extra:
        off.append(f"levels {extra} that hold no data cache here (an instruction cache, or "
                   "a broken index)")
    return "; ".join(off) or "the levels differ"


INSTRUCTION_L1 = 32 * 2**10  # the instruction cache of the folder the checker writes


def sysfs_caches(ctx) -> tuple[Path, dict]:
    """A sysfs cache folder written by the checker: every size unit (K, M, G, plain
    bytes), an instruction cache, and two broken indexes sorted first (one without its
    size file, one whose level is no number) that must be skipped, not end the read; and
    the sizes it describes."""
    rng = ctx.rng("sysfs")
    root = ctx.subdir("sysfs-cache")
    l1, l2 = int(rng.integers(16, 80)), int(rng.integers(1, 5))
    l3 = int(rng.integers(1, 64)) * 2**20 + int(rng.integers(1, 2**10)) * 2**10
    l4 = int(rng.integers(1, 3))
    entries = [("Data", "1", None), ("Unified", "x", "8M"), ("Data", "1", f"{l1}K"),
               ("Instruction", "1", f"{INSTRUCTION_L1 // 2**10}K"), ("Unified", "2", f"{l2}M"),
               ("Unified", "3", str(l3)), ("Unified", "4", f"{l4}G")]
    for k, (kind, level, size) in enumerate(entries):
        index = root / f"index{k}"
        index.mkdir()
        (index / "type").write_text(kind + "\n")
        (index / "level").write_text(level + "\n")
        if size is not None:
            (index / "size").write_text(size + "\n")
    return root, {"L1": l1 * 2**10, "L2": l2 * 2**20, "L3": l3, "L4": l4 * 2**30}


@checker.check(2)
def cache_sizes_read(impl, ctx):
    cache_sizes = get_function(impl, "cache_sizes")
    fake, want = sysfs_caches(ctx)  # the sizes it wrote: known by construction
    with on_input("a sysfs cache folder of index0-6: two broken first (no size file; level "
                  "'x'), then sizes 48K-style, 2M-style, plain bytes and 1G-style, and an "
                  "Instruction cache"):
        theirs = cache_sizes(str(fake))
    fail_unless(theirs == want and all(type(v) is int for v in theirs.values()),
                "cache sizes differ from a sysfs folder the checker wrote",
                yours=theirs, expected=want, hint=cache_hint(theirs, want))
    missing = cache_sizes(str(fake / "no-such-folder"))
    fail_unless(missing == {}, "cache_sizes of a folder that does not exist must be {}",
                yours=missing, expected={})
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    theirs = cache_sizes()
    fail_unless(isinstance(theirs, dict), "cache_sizes must return a dict", yours=theirs)
    expected = lscpu_caches()  # util-linux's reading of the same machine
    if not root.is_dir() or expected is None:
        return
    fail_unless(theirs == expected, "cache sizes differ from this machine's (lscpu -C)",
                yours=theirs, expected=expected, hint=cache_hint(theirs, expected))

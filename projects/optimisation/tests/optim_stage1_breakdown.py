"""optimisation stage 1: find it. The learner's ``step_breakdown`` and
``limiting_operation`` are checked against the checker's own parse of the same trace
files: hand-built traces with random phase times and decoys (phase-named events nested
deeper, on another thread or outside every step, a region named like a step, children of
a step that are no phase, evidence that a count or a nested sum would name wrongly, steps
whose phases hold no calls, no step at all), and a real trace of ``train_slow`` the
checker writes itself. The learner's own trace (``trace_slow``) must be of a steady call
with the Python tracer off that recompiles its update as a call in use does (a compile's
events inside an update phase, as in the checker's own trace of a call with a new rate),
and its
step time must agree with the checker's synchronised timing of the same call taken just
before and after it (within ``TRACE_WINDOW``)."""

from __future__ import annotations

import datetime
import itertools
import json
import math
import os
import re
import time
from pathlib import Path

import jax
import numpy as np
import optim_expected
from optim_harness import Versions, checker, close, odd

from coursekit.checking import graded, spawn
from coursekit.checking.device import learner_may_hold_accelerator
from coursekit.checking.errors import CheckFailed, LearnerCodeError
from coursekit.checking.frozen import copy_once
from coursekit.checking.graded import instructor_module
from coursekit.checking.learner import require_written
from coursekit.checking.probes import within_ratio
from coursekit.checking.values import as_float, fail_unless, require_keys
from coursekit.measure import traces
from coursekit.workloads import slow_step

# the course's own reading of a profiler run: instructor-only (a learner's copy grades the
# checks that need it where the instructor grades)
forest = instructor_module("traces")

STEP, PHASES = slow_step.STEP_REGION, list(slow_step.PHASES)
UPDATE = "update"
assert UPDATE in PHASES
# train_slow's update takes the learning rate as a static argument and every call in use
# has a rate of its own: one step per call recompiles the update. Measured: 75 ms against
# 0.1 ms for a warmed update (750x); a trace of a call with the warm-up's rate has none,
# and at the trace sizes its summed time alone stays inside TRACE_WINDOW.
RECOMPILE_FACTOR = 10
# What a compile leaves in a trace without the Python tracer: XLA's and JAX's own events
# ("lower_sharding_computation", "backend_compile_and_load", "CompileCpuExecutable", ...,
# about 150 events inside the recompiling step's update). A steady update holds none; a
# traced call with the warm-up's rate holds none anywhere (its update is a cache hit), and
# its update's largest step is only 2-6x the others' median, which a load spike on one
# 60 us update can push past RECOMPILE_FACTOR (the corpus's trace-same-lr passed that way).
COMPILE_EVENT = re.compile(r"compile|^lower_", re.IGNORECASE)
# The learner's traced steps against the checker's synchronised timing of the same call,
# taken just before and after it: a steady traced call (Python tracer off) is within
# 1.1x of it and the load moves medians by +-18%; a traced first call, which compiles every
# eager operation for these shapes, measured 5.3x; another size is off by more.
TRACE_WINDOW = 2.5


def trace_config(ctx) -> dict:
    rng = ctx.rng("trace-config")
    return {"vocab": odd(rng, 401, 601), "embed": odd(rng, 48, 80),
            "hidden": odd(rng, 200, 300), "batch": odd(rng, 40, 80),
            "steps": int(rng.integers(10, 15))}


# Traces this process has written: each one's call gets a rate no earlier call here had
# (one checker process checks several files in a planted batch: a rate met before skips
# the recompile the stage's trace check reads from this trace).
_TRACES_WRITTEN = itertools.count()


def checker_trace(ctx) -> Path:
    """A real trace of one slow call, written by the checker itself, once per run, with a
    learning rate of its own (its update recompiles, as a call in use does)."""
    def write():
        rate = 0.9 - 1e-3 * next(_TRACES_WRITTEN)
        return instructor_module("optimisation").slow_trace(
            trace_config(ctx), ctx.seed, ctx.subdir("checker-trace"), rate)
    return ctx.once("trace", write)


# Direct children of a step that are no phase, named to sort before and after every
# phase: evidence gathered from the step's children by name order, or from every child
# but the other phases, counts their calls.
NO_PHASE = ("PjitFunction(prefetch)", "wait_for_device")
assert all(NO_PHASE[0] < p < NO_PHASE[1] for p in PHASES)


def synthetic_trace(ctx) -> Path:
    """A hand-built trace with random phase times (any phase can limit), more time in no
    phase than in the phases, and decoys: a phase-named event nested inside a phase (not
    a direct child of the step), one on another thread overlapping a step, one outside
    every step, a region whose name starts with the step's name (not a step), and in
    every step two direct children that are no phase, holding long calls. Inside
    every phase event, the event name with the largest summed time (one long call, with a
    same-named call nested inside it as real traces nest ``PjitFunction``) is not the one
    with the largest count (several short calls), so the evidence is told apart from a
    count or a nested sum. In every step one phase starts exactly where the phase before
    it ends (a drawn one): both are direct children of the step, which a parse that
    closes an event only after its end misreads as an overlap."""
    rng = ctx.rng("synthetic")
    heavy, light = "PjitFunction(matmul)", "ParseArguments"
    extras = ["PjitFunction(tanh)", "PjitFunction(sgd)", "np.asarray(jax.Array)"]
    weights = rng.dirichlet(np.ones(len(PHASES)) * 0.7)
    events: list[dict] = []

    def x(name: str, ts: float, dur: float, tid: int = 5, **args) -> None:
        events.append({"ph": "X", "pid": 1, "tid": tid, "ts": ts, "dur": dur, "name": name,
                       **({"args": args} if args else {})})

    def phase_event(phase: str, t: float, dur: float, decoy: bool) -> None:
        x(phase, t, dur)
        long_dur = dur * float(rng.uniform(0.3, 0.4))
        x(heavy, t + 0.01 * dur, long_dur)
        x(heavy, t + 0.02 * dur, long_dur * 0.8)             # nested inside the long call
        inner = t + 0.02 * dur + long_dur
        for _ in range(int(rng.integers(3, 6))):              # more calls, less time
            x(light, inner, 0.02 * dur)
            inner += 0.03 * dur
        x(str(rng.choice(extras)), inner, dur * float(rng.uniform(0.05, 0.15)))
        inner += 0.16 * dur
        if decoy:                                             # a phase name nested deeper
            x(PHASES[-1], inner, 0.05 * dur)

    t = 1000.0
    for step in range(int(rng.integers(3, 7))):
        start = t
        durs = [float(w * rng.uniform(800, 1200)) + 1.0 for w in weights]
        # time in no phase (host gaps) outweighs the phases: other_us is a difference,
        # not a remainder or a share of the phases
        gap = sum(durs) * float(rng.uniform(1.1, 1.6))
        lead = gap * float(rng.uniform(0.3, 0.7))
        t += lead
        touching = int(rng.integers(1, len(PHASES)))          # starts where the one before
        for k, (phase, dur) in enumerate(zip(PHASES, durs)):  # it ends, to the float
            phase_event(phase, t, dur, decoy=phase == PHASES[0])
            t += dur + (0.0 if k + 1 == touching else float(rng.uniform(0.5, 3)))
        trail = gap - lead
        for name, at in ((NO_PHASE[0], 0.1), (NO_PHASE[1], 0.55)):
            x(name, t + at * trail, 0.35 * trail)             # a child of no phase, with
            x(heavy, t + (at + 0.02) * trail, 0.3 * trail)    # calls that are no evidence
        t += trail
        x(STEP, start, t - start, step=str(step))
        x(PHASES[1], start + 2, 50.0, tid=9)                  # another thread
        t += float(rng.uniform(20, 60))
    x(PHASES[0], t, 500.0)                                    # outside every step,
    for k, phase in enumerate(PHASES):                        # holding every phase
        x(phase, t + 10 + 150 * k, 120.0)                     # with a long call in it:
        x(heavy, t + 12 + 150 * k, 100.0)                     # no step, no evidence
    t += 600.0
    start = t                                                 # a region named like a step
    for phase in PHASES:
        phase_event(phase, t + 1, 300.0, decoy=False)
        t += 310.0
    x(STEP + "_prefetch", start, t - start + 2)
    path = ctx.subdir("synthetic") / "synthetic.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def bare_trace(ctx, *, steps: bool) -> Path:
    """Hand-built edge cases: with ``steps``, a few steps whose phases hold no calls at
    all (the limiting phase has no evidence to name), one phase far the largest; without,
    no step event at all (phase-named events outside any step, a region named like a
    step): shares are then 0.0, not a division by zero."""
    rng = ctx.rng(f"bare-{steps}")
    events, t = [], 1000.0
    big = str(rng.choice(PHASES))
    for step in range(int(rng.integers(2, 5)) if steps else 0):
        start = t
        for phase in PHASES:
            dur = float(rng.uniform(300, 500) if phase == big else rng.uniform(10, 60))
            t += float(rng.uniform(1, 5))
            events.append({"ph": "X", "pid": 1, "tid": 5, "ts": t, "dur": dur,
                           "name": phase})
            t += dur
        t += float(rng.uniform(5, 20))
        events.append({"ph": "X", "pid": 1, "tid": 5, "ts": start, "dur": t - start,
                       "name": STEP, "args": {"step": str(step)}})
        t += 10.0
    start = t
    for phase in PHASES:                                      # outside every step
        events.append({"ph": "X", "pid": 1, "tid": 5, "ts": t + 1, "dur": 50.0,
                       "name": phase})
        t += 60.0
    events.append({"ph": "X", "pid": 1, "tid": 5, "ts": start, "dur": t - start + 2,
                   "name": STEP + "_prefetch"})
    path = ctx.subdir("bare") / f"{'bare-phases' if steps else 'no-step'}.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def full_trace(ctx) -> Path:
    """Hand-built: one phase fills every step (share exactly 1, Amdahl's ceiling
    ``math.inf``): two back-to-back events of it from the step's start to its end, whole
    microseconds so their sum is the step's to the bit, each strictly shorter than the
    step (no tie of spans for a parse to nest either way). The steps sit inside an outer
    region, as a run's own annotation holds them (write_run_records' REGION): a step is
    any event of that name, at any depth."""
    rng = ctx.rng("full")
    events, t = [], 1000.0
    phase = str(rng.choice(PHASES))
    for step in range(int(rng.integers(2, 5))):
        dur = float(rng.integers(200, 400))
        first = float(rng.integers(50, int(dur) - 50))
        events += [{"ph": "X", "pid": 1, "tid": 5, "ts": t, "dur": dur, "name": STEP,
                    "args": {"step": str(step)}},
                   {"ph": "X", "pid": 1, "tid": 5, "ts": t, "dur": first, "name": phase},
                   {"ph": "X", "pid": 1, "tid": 5, "ts": t + first, "dur": dur - first,
                    "name": phase}]
        t += dur + float(rng.integers(10, 30))
    events.insert(0, {"ph": "X", "pid": 1, "tid": 5, "ts": 990.0, "dur": t - 980.0,
                      "name": OUTER_REGION})
    path = ctx.subdir("full") / "full-step.trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def expected_breakdown(path: Path) -> dict:
    """The checker's own breakdown of a trace: step_breakdown's answer, instructor-only
    (a learner's copy grades the checks that need it where the instructor grades)."""
    return instructor_module("optimisation").breakdown(path, STEP, PHASES)


def _complete(events: list) -> list[dict]:
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def _within(inner: dict, outer: dict) -> bool:
    """``inner`` lies wholly inside ``outer``'s span, on its thread."""
    return ((inner.get("pid"), inner.get("tid")) == (outer.get("pid"), outer.get("tid"))
            and float(outer["ts"]) <= float(inner["ts"])
            and float(inner["ts"]) + float(inner["dur"])
            <= float(outer["ts"]) + float(outer["dur"]))


def update_phases(events: list) -> list[dict]:
    """The ``UPDATE`` events that lie inside a step event on its thread (a plain
    containment of spans: where the update's time goes is the learner's question)."""
    complete = _complete(events)
    steps = [e for e in complete if e.get("name") == STEP]
    return [e for e in complete if e.get("name") == UPDATE
            and any(_within(e, s) for s in steps)]


def compile_events(phases: list[dict], events: list) -> int:
    """How many events of ``events`` inside ``phases`` are a compile's
    (``COMPILE_EVENT``)."""
    return sum(1 for e in _complete(events) if COMPILE_EVENT.search(str(e.get("name", "")))
               and any(_within(e, p) for p in phases))


# Phase-named events that are not a phase of a step, by why not.
NOT_A_PHASE = {
    "nested": "phase-named events nested inside another event of a step (not its direct "
              "children)",
    "straddling": "phase-named events that start inside a step and end after it",
    "other-thread": "phase-named events on another pid/tid during a step",
    "outside": "phase-named events outside every step"}


def not_phases(path: Path) -> dict[str, dict[str, float]]:
    """{reason: {phase: summed us}} of the phase-named events that are no phase of a
    step, by the NOT_A_PHASE reason."""
    raw = [e for e in traces.load_events(path) if e.get("ph") == "X" and "dur" in e]
    steps = [ev for ev in forest.walk(forest.build_forest(raw)) if ev.name == STEP]
    found = {kind: {p: 0.0 for p in PHASES} for kind in NOT_A_PHASE}
    for s in steps:
        for d in (d for c in s.children for d in forest.walk(c.children)):
            if d.name in PHASES:
                found["nested"][d.name] += d.dur
    for e in raw:
        if e.get("name") not in PHASES:
            continue
        step = next((s for s in steps if s.ts <= e["ts"] < s.end), None)
        if step is None:
            found["outside"][e["name"]] += float(e["dur"])
        elif (e.get("pid"), e.get("tid")) != (step.pid, step.tid):
            found["other-thread"][e["name"]] += float(e["dur"])
        elif e["ts"] + e["dur"] > step.end:
            found["straddling"][e["name"]] += float(e["dur"])
    return found


def nested_steps(path: Path) -> tuple[int, list[str]]:
    """How many step events sit inside another event of their thread, and the names of
    the events holding them (read from the trace's own spans)."""
    raw = [e for e in traces.load_events(path) if e.get("ph") == "X" and "dur" in e]
    nested, holders = 0, set()
    for step in (e for e in raw if e.get("name") == STEP):
        around = [e for e in raw if e is not step
                  and (e.get("pid"), e.get("tid")) == (step.get("pid"), step.get("tid"))
                  and e["ts"] <= step["ts"] and e["ts"] + e["dur"] >= step["ts"] + step["dur"]
                  and e["dur"] > step["dur"]]
        nested += bool(around)
        holders |= {str(e.get("name")) for e in around}
    return nested, sorted(holders)


def steps_hint(got, want: int, path: Path) -> str:
    """What a step count short of the checker's shows, where the trace shows it."""
    nested, holders = nested_steps(path)
    if nested and got == want - nested:
        return (f"yours counts the {got} step events at the top of the trace; {nested} sit "
                f"inside another event ({', '.join(holders)}): a step is any event named "
                f"{STEP!r}, at any depth")
    return ""


# Phases of a step a parse can lose at a touching boundary, by which ones.
AT_TOUCHING = {
    "touching": "events that start exactly where the step's previous child ends",
    "from-touching": "events that start exactly where the step's previous child ends, and "
                     "those after them in the step"}


def touching_phases(path: Path) -> dict[str, dict[str, float]]:
    """{kind: {phase: summed us}} of the phases of a step (direct children) that start
    exactly where the child before them ends, and of those with every phase after them
    in their step (the AT_TOUCHING kinds)."""
    raw = [e for e in traces.load_events(path) if e.get("ph") == "X" and "dur" in e]
    found = {kind: {p: 0.0 for p in PHASES} for kind in AT_TOUCHING}
    for s in (ev for ev in forest.walk(forest.build_forest(raw)) if ev.name == STEP):
        children = sorted(s.children, key=lambda c: c.ts)
        after = False
        for before, child in zip([None, *children], children):
            touches = before is not None and child.ts == before.end
            after = after or touches
            if child.name in PHASES:
                found["touching"][child.name] += child.dur if touches else 0.0
                found["from-touching"][child.name] += child.dur if after else 0.0
    return found


def phase_hint(not_phase_sums: dict, key: str, phase: str, yours: float, want: dict,
               touching: dict | None = None) -> str:
    """The hint for a phase_us or share that differs: the kind of phase-named events that
    accounts for the difference exactly, and only that (those a parse added that are no
    phase, or the phases it lost at a touching boundary); else the rule."""
    if key == "shares":
        phases = sum(want["phase_us"].values())
        if phases and close(yours, want["phase_us"][phase] / phases):
            return ("your share is the phase's part of the phases' total, which leaves out "
                    f"the step's {want['other_us']:.6g} us in no phase")
        return (f"yours is {yours / want['shares'][phase]:.4g}x the checker's share"
                if want["shares"][phase] else "the checker's share is 0: no such phase")
    more = yours - want["phase_us"][phase]
    for kind, sums in (touching or {}).items():
        if more < 0 and sums[phase] and close(-more, sums[phase]):
            return (f"yours is {-more:.6g} us less than the checker's: exactly the "
                    f"{phase!r} {AT_TOUCHING[kind]}, touching, not overlapping (one event "
                    "ends exactly where the next begins): each is a direct child of its "
                    "step")
    found = {kind: sums[phase] for kind, sums in not_phase_sums.items() if sums[phase]}
    for n in range(1, len(found) + 1):  # the fewest kinds that add up to the difference
        for kinds in itertools.combinations(found, n):
            if close(more, sum(found[k] for k in kinds)):
                return (f"yours is {more:.6g} us more than the checker's: exactly the "
                        f"{' and the '.join(NOT_A_PHASE[k] for k in kinds)}, which are no "
                        "phase of a step")
    return (f"yours is {more:+.6g} us off the checker's, which no group of the phase-named "
            "events that are no phase accounts for")


class Case:
    """One trace a stage-1 check runs the learner's functions on, with the course's own
    parse of it: live where this copy holds the parser (the course, the grader: traces
    made at the run's seed), else the stored answers for the stored public traces
    (``optim_expected``: a learner's copy gets the verdict the grader gives on them)."""

    def __init__(self, label: str, path: Path, stored: dict | None = None):
        self.label, self.path, self.stored = label, path, stored

    def breakdown(self) -> dict:
        return self.stored["breakdown"] if self.stored else expected_breakdown(self.path)

    def limiting(self) -> dict:
        if self.stored:
            return self.stored["limiting"]
        return instructor_module("optimisation").limiting(self.path, STEP, PHASES)

    def not_phases(self) -> dict:
        return self.stored["not_phases"] if self.stored else not_phases(self.path)

    def touching(self) -> dict:
        return self.stored["touching"] if self.stored else touching_phases(self.path)


def cases(ctx, limiting: bool = False):
    """The check's traces in order, each made when its turn comes (an unwritten function
    hears so before the checker's own traced run of train_slow); ``limiting``: the ones
    limiting_operation_named reads."""
    if not graded.available():
        answers = optim_expected.stored_answers()
        into = ctx.subdir("public-traces")
        for name, label, for_limiting in optim_expected.CASES:
            if for_limiting or not limiting:
                yield Case(label, optim_expected.copy_case(name, into), answers[name])
        return
    made = (("hand-built trace", lambda: synthetic_trace(ctx)),
            ("real trace of train_slow", lambda: checker_trace(ctx)),
            ("hand-built trace whose phases hold no calls", lambda: bare_trace(ctx, steps=True)),
            (FULL_LABEL, lambda: full_trace(ctx)),
            ("hand-built trace without a step event", lambda: bare_trace(ctx, steps=False)))
    for label, make in made[:4] if limiting else made:
        yield Case(label, make())


FULL_LABEL = "hand-built trace whose one phase fills every step (share 1)"
OUTER_REGION = "run_records"  # the region around the full trace's steps


@checker.check(1)
def breakdown_matches_checker_parse(impl, ctx):
    for case in cases(ctx):
        label, path = case.label, case.path
        want = case.breakdown()
        got = require_keys(impl.step_breakdown(str(path), STEP, PHASES),
                           ("steps", "step_us", "phase_us", "other_us", "shares"),
                           "step_breakdown")
        fail_unless(got["steps"] == want["steps"], f"{label}: wrong number of steps",
                    yours=got["steps"], expected=want["steps"],
                    hint=steps_hint(got["steps"], want["steps"], path))
        fail_unless(close(as_float(got["step_us"], "step_us"), want["step_us"]),
                    f"{label}: step_us differs from the checker's parse",
                    yours=got["step_us"], expected=want["step_us"],
                    hint=f"yours is {as_float(got['step_us'], 'step_us') / want['step_us']:.4g}"
                    f"x the checker's, over {want['steps']} step events"
                    if want["step_us"] else "this trace holds no step event")
        for key in ("phase_us", "shares"):
            theirs = got[key]
            fail_unless(isinstance(theirs, dict) and set(theirs) == set(PHASES),
                        f"{label}: {key} must hold every phase", yours=theirs,
                        expected=PHASES)
            for p in PHASES:
                value = as_float(theirs[p], f"{key}[{p}]")
                if not close(value, want[key][p]):
                    fail_unless(False, f"{label}: {key}[{p!r}] differs from the checker's "
                                "parse", yours=theirs[p], expected=want[key][p],
                                hint=phase_hint(case.not_phases(), key, p, value, want,
                                                case.touching()))
        fail_unless(close(as_float(got["other_us"], "other_us"), want["other_us"]),
                    f"{label}: other_us differs", yours=got["other_us"],
                    expected=want["other_us"])


def ceiling_hint(yours, share: float) -> str:
    """What a wrong Amdahl ceiling equals, for a phase holding ``share`` of the step."""
    if not isinstance(yours, (int, float)) or isinstance(yours, bool):
        return f"yours is a {type(yours).__name__}: a float (math.inf for a share of 1)"
    for value, what in ((1 / share if share else math.inf, "the step over the phase's time"),
                        (1 - share, "the share of the rest of the step"),
                        (share, "the share itself")):
        if close(float(yours), value):
            return f"yours is {what}, for a phase holding {share:.1%} of the step"
    return f"yours is {yours:.4g}, for a phase holding {share:.1%} of the step"


def evidence_hint(ev: dict, below: dict, want: str) -> str:
    """Which event below the phase the learner's evidence names (``want``: the
    checker's), by what sets it apart."""
    if not below:
        return "the limiting phase's events hold no children in this trace"
    most_calls = max(below, key=lambda n: below[n][0])
    if ev.get("event") == most_calls != want:
        return (f"yours is {most_calls!r}, the event below the phase with the most calls "
                f"({below[most_calls][0]}); others below it hold more time")
    if ev.get("event") in below:
        count, us = below[ev["event"]]
        yours = ev.get("count")
        if isinstance(yours, int) and not isinstance(yours, bool) and yours > count:
            return (f"yours counts {yours} {ev['event']!r} events where the phase's events "
                    f"of the steps hold {count} ({us:.6g} us) as direct children: the "
                    f"{yours - count} more are no direct child of a step's phase event "
                    "(nested deeper, or below a phase-named event outside every step or on "
                    "another thread)")
        return (f"yours names {ev['event']!r}, which the checker finds {count} times for "
                f"{us:.6g} us below the phase")
    return f"yours names {ev.get('event')!r}, no direct child of the phase's events"


def longest_event_hint(path, yours: str, phase: str) -> str | None:
    """A hint where the learner's phase is the one with the longest single event of the
    trace, not the largest summed share."""
    events = [e for e in traces.load_events(Path(path)) if e.get("ph") == "X" and "dur" in e]
    steps = [e for e in events if e.get("name") == STEP]
    longest: dict = {}
    for e in events:  # phase events inside a step, on its thread: not the decoys beside
        if e.get("name") in PHASES and any(
                (e.get("pid"), e.get("tid")) == (s.get("pid"), s.get("tid"))
                and s["ts"] <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"]
                for s in steps):
            longest[e["name"]] = max(longest.get(e["name"], 0.0), float(e["dur"]))
    if not longest or max(longest, key=longest.get) != yours or yours == phase:
        return None
    return (f"yours is the phase with the longest single event ({longest[yours]:.6g} us); "
            f"the limiting phase is the one whose events add up to the largest share of "
            f"the steps ({phase!r}), however long any one of them is")


@checker.check(1)
def limiting_operation_named(impl, ctx):
    for case in cases(ctx, limiting=True):
        label, path = case.label, case.path
        want = case.limiting()
        phase, share = want["phase"], want["share"]
        shares = case.breakdown()["shares"]
        try:
            got = require_keys(impl.limiting_operation(str(path), STEP, PHASES),
                               ("phase", "share", "evidence", "amdahl_ceiling"),
                               "limiting_operation")
        except LearnerCodeError as err:
            if err.kind == "not-implemented" or share < 1.0:
                raise
            raise CheckFailed(f"{label}: limiting_operation raised {err}",
                              yours=err.exc_type or "an exception", expected="a result",
                              hint=f"here {phase!r} holds the whole step (share 1): removing "
                              "it leaves no time at all, a ceiling of math.inf (the "
                              "contract says so), not a division by zero") from None
        fail_unless(got["phase"] == phase, f"{label}: another phase limits the step",
                    yours=got["phase"], expected=f"{phase} ({share:.1%} of the step)",
                    hint=(longest_event_hint(path, got["phase"], phase)
                          or f"yours holds {shares[got['phase']]:.1%} of the step")
                    if got["phase"] in shares else "yours is no phase of the list given")
        fail_unless(close(as_float(got["share"], "share"), share),
                    f"{label}: share of {phase!r} differs", yours=got["share"],
                    expected=share)
        ceiling = want["amdahl_ceiling"]
        yours = got["amdahl_ceiling"]
        fail_unless(isinstance(yours, (int, float)) and not isinstance(yours, bool)
                    and (close(float(yours), ceiling) or yours == ceiling),
                    f"{label}: the Amdahl ceiling for removing {phase!r} is wrong",
                    yours=yours, expected=ceiling, hint=ceiling_hint(yours, share))
        ev = require_keys(got["evidence"], ("event", "count", "us"), "evidence")
        fail_unless(ev["event"] == want["evidence"]["event"]
                    and ev["count"] == want["evidence"]["count"]
                    and close(as_float(ev["us"], "evidence us"), want["evidence"]["us"]),
                    f"{label}: the evidence event inside {phase!r} differs",
                    yours=ev, expected=want["evidence"],
                    hint=evidence_hint(ev, want["below"], want["evidence"]["event"]))


def step_events(path: Path) -> int:
    return sum(1 for e in traces.load_events(path) if e.get("ph") == "X"
               and e.get("name") == STEP)


RUN_NAME = "%Y_%m_%d_%H_%M_%S"  # a profiler run's folder: named by the second of the run


def logdir_with_an_earlier_run(ctx, first: str, run_name: str) -> Path | None:
    """A fresh logdir holding the learner's first trace (``first``, the checker's copy)
    as an earlier profiler run: named a second before that run's own folder
    (``run_name``, on the profiler's own clock), its times a second back. The second
    call's run is named by its own second, later, so the two are two runs with no wait
    (the first run's own folder, named again within the same second, is written over:
    one name holds the last run only). None when ``run_name`` is not of that form."""
    try:
        when = datetime.datetime.strptime(run_name, RUN_NAME)
    except ValueError:
        return None
    folder = ctx.learner_dir("learner-trace-again")
    run = folder / "plugins" / "profile" / (when - datetime.timedelta(seconds=1)).strftime(
        RUN_NAME)
    run.mkdir(parents=True)
    earlier = run / Path(first).name
    earlier.write_bytes(Path(first).read_bytes())
    back = time.time() - 1
    for path in (earlier, run):
        os.utime(path, (back, back))
    return spawn.share_tree(folder)


def second_trace_checked(impl, ctx, config: dict, seed: int, folder: Path, first: str,
                         run_name: str, traced_at: float) -> None:
    """trace_slow called once more into a logdir that holds its first trace as an
    earlier run (``logdir_with_an_earlier_run``; the first trace's own folder when its
    run's name is not of the known form), with other steps (the same sizes per step and
    seed, so the same compiled operations): the file it returns is of this call, not the
    earlier one there."""
    steps = int(ctx.rng("second-trace").integers(3, 7))
    assert steps != config["steps"]
    again = logdir_with_an_earlier_run(ctx, first, run_name)
    if again is None:
        # a second apart from the first (usually past already), so the two are two runs
        time.sleep(max(0.0, traced_at + 1.05 - time.time()))
    folder = again or folder
    path = impl.trace_slow(dict(config, steps=steps), seed, str(folder))
    fail_unless(isinstance(path, str) and Path(path).is_file(),
                "trace_slow must return the path of the trace file it wrote", yours=path)
    found = step_events(copy_once(path, ctx.subdir("taken"), inside=folder,
                                  what="the trace trace_slow returned"))
    earlier = step_events(Path(first))
    fail_unless(found == steps, f"trace_slow called a second time, with {steps} steps, "
                "into the same logdir as an earlier trace: the file it returned is not of "
                "this call", yours=f"{found} {STEP!r} events", expected=steps,
                hint=f"the file holds {found} steps, the earlier trace's count "
                f"({earlier} steps, the first run in that logdir): the path returned is "
                "the earlier trace's file in the same logdir, not the newest"
                if found == earlier else f"one call of {steps} steps holds {steps} step "
                "events")


def no_host_events(events: list) -> str | None:
    """A hint where a trace holds no timed event of the host's ('/host:...' processes):
    the step and phase regions are TraceAnnotations, recorded by the host tracer."""
    hosts = {e.get("pid") for e in events if e.get("ph") == "M"
             and e.get("name") == "process_name"
             and str((e.get("args") or {}).get("name", "")).startswith("/host")}
    timed = [e for e in events if e.get("ph") == "X"]
    if any(e.get("pid") in hosts for e in timed):
        return None
    return (f"your trace holds {len(timed)} timed events and none of the host's: the "
            f"{STEP!r} and phase regions are TraceAnnotations, host events that only the "
            "host tracer records, and it was off while the trace ran (leaving the Python "
            "tracer out is python_tracer_level alone)")


@checker.check(1)
def learner_trace_is_one_call_in_use(impl, ctx):
    require_written(impl, "trace_slow")  # before the checker's own timed calls
    config, seed = trace_config(ctx), ctx.seed + 1
    problem = slow_step.make_problem(config, seed)
    args = (problem["params"], problem["tokens"], problem["targets"])
    on_chip = learner_may_hold_accelerator()
    versions = Versions(impl, config, seed)

    def timed(lr: float) -> float:
        # where the learner's trace ran: on a chip, in the learner process (this one
        # stays on the CPU, and a CPU time of a chip's trace compared two machines: the
        # chip run read 2.51x), timed here from request to answer
        if on_chip:
            return versions.slow_on_chip([lr])[0]
        start = time.perf_counter()
        jax.block_until_ready(slow_step.train_slow(*args, lr))
        return time.perf_counter() - start
    timed(problem["lr"])  # the first call compiles every eager operation: not a sample
    samples = [timed(problem["lr"] * 0.8)]              # before the learner's trace ...
    folder = ctx.learner_dir("learner-trace")
    path = impl.trace_slow(config, seed, str(folder))
    traced_at = time.time()
    samples += [timed(problem["lr"] * 0.75), timed(problem["lr"] * 0.7)]   # ... and after
    fail_unless(isinstance(path, str) and Path(path).is_file(),
                "trace_slow must return the path of the trace file it wrote", yours=path)
    run_name = Path(path).parent.name  # the profiler run's folder
    # taken once, from the folder it was given: every parse below reads this copy
    path = str(copy_once(path, ctx.subdir("taken"), inside=folder,
                         what="the trace trace_slow returned"))
    events = traces.load_events(Path(path))
    python_calls = sum(1 for e in events if str(e.get("name", "")).startswith("$"))
    fail_unless(python_calls == 0, "the trace was taken with the Python tracer on: it "
                "records every Python call and slows the steps it shows",
                yours=f"{python_calls} Python-call events ('$...')", expected=0,
                hint="your trace records Python calls: the profiler's Python tracer was on "
                "while it ran")
    if graded.available():
        got = expected_breakdown(Path(path))
        reference = traces.load_events(checker_trace(ctx))
    else:  # a learner's copy: your own parse (checked on the stored traces) and the
        # stored real trace of train_slow, a call with a new rate (optim_expected)
        got = require_keys(impl.step_breakdown(path, STEP, PHASES), ("steps", "step_us"),
                           "step_breakdown")
        reference = traces.load_events(optim_expected.STORED / "real.trace.json.gz")
    fail_unless(got["steps"] == config["steps"],
                f"the trace should hold one {STEP!r} event per step of one call",
                yours=got["steps"], expected=config["steps"],
                hint=no_host_events(events) or
                f"your trace holds {got['steps'] / config['steps']:.3g} calls' worth "
                f"of steps ({config['steps']} a call)")
    updates = update_phases(events)
    update_us = sorted(float(u["dur"]) for u in updates)
    reference_compiles = compile_events(update_phases(reference), reference)
    if reference_compiles:  # this JAX marks a compile in a trace: the evidence is exact
        fail_unless(compile_events(updates, events) > 0,
                    f"the traced call did not recompile its {UPDATE!r} as a call in use "
                    "does: no compile event inside any of its steps' "
                    f"{UPDATE!r} phases, so its learning rate was one an earlier call in "
                    "your process had already compiled (the warm-up call's?), and the "
                    "trace leaves out what limits the step",
                    yours=f"0 compile events in {len(updates)} {UPDATE!r} phases",
                    expected=f"a compile inside one step's {UPDATE!r}, as in the checker's "
                    f"own trace of a call with a new rate ({reference_compiles} events)",
                    hint="the traced call's update ran without a compile: your process "
                    "had compiled that learning rate before the trace")
    else:  # no compile marked in a trace: the compile's time is the evidence
        fail_unless(len(update_us) >= 2 and
                    update_us[-1] >= RECOMPILE_FACTOR * float(np.median(update_us[:-1])),
                    f"the traced call did not recompile its {UPDATE!r} as a call in use "
                    "does: no step's update took a compile's time, so its learning rate "
                    "was one already compiled (the warm-up call's?)",
                    yours=f"largest {UPDATE!r} phase {update_us[-1]:.0f} us, median of "
                    f"the others {float(np.median(update_us[:-1])):.0f} us"
                    if len(update_us) >= 2 else update_us,
                    expected=f"one step's {UPDATE!r} at least {RECOMPILE_FACTOR}x the "
                    "others' median (the compile a new learning rate causes)",
                    hint="the traced call's update ran without a compile: your process "
                    "had compiled that learning rate before the trace")
    second_trace_checked(impl, ctx, config, seed, folder, path, run_name, traced_at)
    reference = float(np.median(samples))
    within_ratio(got["step_us"] * 1e-6, reference, TRACE_WINDOW, "the traced step",
                 "your traced steps sum to another time than one steady call of train_slow "
                 "on the problem of (config, seed): longer is a call that compiles its "
                 "operations, or another problem",
                 against="the checker's synchronised timing of the same call")

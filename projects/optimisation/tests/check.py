"""Checks for optimisation.

    python projects/optimisation/tests/check.py --stage 1|2|3|4|all --impl PATH [--json F]

The workload is ``coursekit.workloads.slow_step``; the checker builds its reference from
it and never imports the learner's file: the learner's functions run in a learner
process (``learner_process=True``) and answer with data. Every figure the learner
reports is compared with the checker's own: its parse of the same trace, its
recomputation, its synchronised timing of ``train_slow`` in this process, or its
measurement of both versions interleaved in a fresh process (``speed_driver.py``), each
block's stamps bounded by the checker's own readings of the same monotonic clock.
Sizes and seeds are drawn from the run's seed.

Self-reported (run beside the learner's code, in the learner process): the one inspector
``optimisation/records_with_a_wrong_fast`` swaps the module's ``train_fast`` for one call
of ``write_run_records``; what comes back is checked as any record is (a swap that did
not take reads as output_ok True and fails).

Windows and factors, from what the bottlenecks cost on this CPU (README, "Numbers"):
a dispatch-bound Python loop with a recompile per call runs 10-30x slower than the
reference fix at the timing size, far above the +-18% drift of a shared machine.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the course root

import jax  # noqa: E402
import numpy as np  # noqa: E402

from coursekit.checking import bridge  # noqa: E402
from coursekit.checking.bridge import LearnerFunction  # noqa: E402
from coursekit.checking.contract import Checker, CheckFailed  # noqa: E402
from coursekit.checking.learner import LearnerCodeError  # noqa: E402
from coursekit.checking.probes import within_ratio  # noqa: E402
from coursekit.checking.values import as_float, fail_unless, require_keys  # noqa: E402
from coursekit.measure import traces  # noqa: E402
from coursekit.measure.decision import decide_rounds  # noqa: E402
from coursekit.measure.timing import count_compiles  # noqa: E402
from coursekit.provenance.records import validate_run_record  # noqa: E402
from coursekit.workloads import slow_step  # noqa: E402

checker = Checker("optimisation", {
    1: "find it", 2: "fix it", 3: "where it stops helping", 4: "the report"},
    learner_process=True)

STEP, PHASES = slow_step.STEP_REGION, list(slow_step.PHASES)
UPDATE = "update"
assert UPDATE in PHASES
# train_slow's update takes the learning rate as a static argument and every call in use
# has a rate of its own: one step per call recompiles the update. Measured: 75 ms against
# 0.1 ms for a warmed update (750x); a trace of a call with the warm-up's rate has none,
# and at the trace sizes its summed time alone stays inside TRACE_WINDOW.
RECOMPILE_FACTOR = 10
# The learner's traced steps against the checker's synchronised timing of the same call,
# taken just before and after it: a steady traced call (Python tracer off) is within
# 1.1x of it and the load moves medians by +-18%; a traced first call, which compiles every
# eager operation for these shapes, measured 5.3x; another size is off by more.
TRACE_WINDOW = 2.5
# Stage 2: the fix must be clearly faster than this factor (decide_rounds' interval
# above it). Measured here (make bench, default size, load 4-9): the reference fix 17.5x
# [15, 20]; each fix alone: one jitted step 2.1x, the lr traced 1.5x, one host read 1.06x,
# the gather 0.9x eager / 2.1x jitted, donation 0.96x. 3x passes a fix that removes both
# the op-by-op dispatch and the per-call recompile (about 6x together) and no single fix.
MIN_SPEEDUP = 3.0
TIMING_ROUNDS, SLOW_ITERS, FAST_ITERS = 6, 1, 4
# Stage 3: gain below which the rewrite is not worth it here, the sweep, and margins.
GAIN_THRESHOLD = 4.0
SWEEP_STEPS = 4
SWEEP_SIZES = (24, 192, 1536)
SWEEP_ROUNDS = 3
# The learner's medians and gain vs the checker's, per size: fast calls of a few ms at the
# small sizes are where a loaded scheduler's delays show (at load 17-26, medians of 3 moved
# 3.7x between processes at batch ~160); an unsynced timer is 20x+ off, and fails
# FAST_GROWTH first.
GAIN_WINDOW = 5.0
# The sweep's largest batch does about 64x the arithmetic of its smallest; train_fast's
# median call grew 17x-130x across it here at load 17 (fixed costs and load spikes weigh
# most at the small end). A timer that does not wait for the result, or a size that never
# reaches the problem, grows by about 1x.
FAST_GROWTH = 4.0
# Stage 4: the records' speedup against the checker's own (both measured on a loaded
# machine, in separate processes): an "after" without sync reads 50x+ too fast.
RECORD_WINDOW = 4.0
DRIVER = Path(__file__).resolve().parent / "speed_driver.py"
# A block stamp (the driver's monotonic clock) may not be later than the checker's own
# reading of the same clock when the line arrived; 1 ms of slack for the clock reads.
MARK_SLACK_S = 1e-3


# ---------------------------------------------------------------------------------------
# Sizes drawn per run
# ---------------------------------------------------------------------------------------

def odd(rng, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi)) | 1


def trace_config(ctx) -> dict:
    rng = ctx.rng("trace-config")
    return {"vocab": odd(rng, 401, 601), "embed": odd(rng, 48, 80),
            "hidden": odd(rng, 200, 300), "batch": odd(rng, 40, 80),
            "steps": int(rng.integers(10, 15))}


def timing_config(ctx) -> dict:
    """The held-out size of stage 2's timing and stage 4's records."""
    rng = ctx.rng("timing-config")
    return {"vocab": odd(rng, 449, 561), "embed": odd(rng, 56, 72),
            "hidden": odd(rng, 224, 288), "batch": odd(rng, 49, 79),
            "steps": int(rng.integers(12, 17))}


def sweep_config(ctx) -> dict:
    rng = ctx.rng("sweep-config")
    return {"vocab": odd(rng, 480, 544), "embed": odd(rng, 56, 72),
            "hidden": odd(rng, 240, 272), "steps": SWEEP_STEPS}


def sweep_sizes(ctx) -> list[int]:
    factor = float(ctx.rng("sweep-sizes").uniform(0.8, 1.25))
    return [max(3, int(round(b * factor)) | 1) for b in SWEEP_SIZES]


# ---------------------------------------------------------------------------------------
# Stage 1: find it
# ---------------------------------------------------------------------------------------

def checker_trace(ctx) -> Path:
    """A real trace of one slow call, written by the checker itself, once per run."""
    def write():
        problem = slow_step.make_problem(trace_config(ctx), ctx.seed)
        args = (problem["params"], problem["tokens"], problem["targets"])
        jax.block_until_ready(slow_step.train_slow(*args, problem["lr"]))
        options = jax.profiler.ProfileOptions()
        options.python_tracer_level = 0
        logdir = ctx.subdir("checker-trace")
        with jax.profiler.trace(str(logdir), profiler_options=options):
            jax.block_until_ready(slow_step.train_slow(*args, problem["lr"] * 0.9))
        return traces.newest_trace(logdir)
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
    count or a nested sum."""
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
        for phase, dur in zip(PHASES, durs):
            phase_event(phase, t, dur, decoy=phase == PHASES[0])
            t += dur + float(rng.uniform(0.5, 3))
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


def expected_breakdown(path: Path) -> dict:
    steps = [ev for ev in traces.walk(traces.build_forest(traces.load_events(path)))
             if ev.name == STEP]
    phase_us = {p: 0.0 for p in PHASES}
    below: dict[str, dict[str, list]] = {p: {} for p in PHASES}
    for ev in steps:
        for child in ev.children:
            if child.name in phase_us:
                phase_us[child.name] += child.dur
                for g in child.children:
                    entry = below[child.name].setdefault(g.name, [0, 0.0])
                    entry[0] += 1
                    entry[1] += g.dur
    step_us = sum(ev.dur for ev in steps)
    return {"steps": len(steps), "step_us": step_us, "phase_us": phase_us,
            "other_us": step_us - sum(phase_us.values()),
            "shares": {p: v / step_us if step_us else 0.0 for p, v in phase_us.items()},
            "below": below}


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


@checker.check(1, "breakdown_matches_checker_parse")
def _(impl, ctx):
    for label, path in (("hand-built trace", synthetic_trace(ctx)),
                        ("real trace of train_slow", checker_trace(ctx)),
                        ("hand-built trace whose phases hold no calls",
                         bare_trace(ctx, steps=True)),
                        ("hand-built trace without a step event",
                         bare_trace(ctx, steps=False))):
        want = expected_breakdown(path)
        got = require_keys(impl.step_breakdown(str(path), STEP, PHASES),
                           ("steps", "step_us", "phase_us", "other_us", "shares"),
                           "step_breakdown")
        fail_unless(got["steps"] == want["steps"], f"{label}: wrong number of steps",
                    yours=got["steps"], expected=want["steps"])
        fail_unless(close(as_float(got["step_us"], "step_us"), want["step_us"]),
                    f"{label}: step_us differs from the checker's parse",
                    yours=got["step_us"], expected=want["step_us"],
                    hint=f"sum the durations of the complete events named {STEP!r}")
        for key in ("phase_us", "shares"):
            theirs = got[key]
            fail_unless(isinstance(theirs, dict) and set(theirs) == set(PHASES),
                        f"{label}: {key} must hold every phase", yours=theirs,
                        expected=PHASES)
            for p in PHASES:
                fail_unless(close(as_float(theirs[p], f"{key}[{p}]"), want[key][p]),
                            f"{label}: {key}[{p!r}] differs from the checker's parse",
                            yours=theirs[p], expected=want[key][p],
                            hint="a phase counts only as a direct child of a step event "
                            "(same pid/tid, inside it); an event of the same name nested "
                            "deeper, on another thread or outside every step is not one; "
                            "shares divide by the step time, not the whole trace")
        fail_unless(close(as_float(got["other_us"], "other_us"), want["other_us"]),
                    f"{label}: other_us differs", yours=got["other_us"],
                    expected=want["other_us"])


@checker.check(1, "limiting_operation_named")
def _(impl, ctx):
    for label, path in (("hand-built trace", synthetic_trace(ctx)),
                        ("real trace of train_slow", checker_trace(ctx)),
                        ("hand-built trace whose phases hold no calls",
                         bare_trace(ctx, steps=True))):
        want = expected_breakdown(path)
        phase = max(PHASES, key=lambda p: want["shares"][p])
        share = want["shares"][phase]
        got = require_keys(impl.limiting_operation(str(path), STEP, PHASES),
                           ("phase", "share", "evidence", "amdahl_ceiling"),
                           "limiting_operation")
        fail_unless(got["phase"] == phase, f"{label}: another phase limits the step",
                    yours=got["phase"], expected=f"{phase} ({share:.1%} of the step)",
                    hint="the phase with the largest summed time inside the step events")
        fail_unless(close(as_float(got["share"], "share"), share),
                    f"{label}: share of {phase!r} differs", yours=got["share"],
                    expected=share)
        ceiling = math.inf if share >= 1 else 1 / (1 - share)
        yours = got["amdahl_ceiling"]
        fail_unless(isinstance(yours, (int, float)) and not isinstance(yours, bool)
                    and (close(float(yours), ceiling) or yours == ceiling),
                    f"{label}: the Amdahl ceiling for removing {phase!r} is wrong",
                    yours=yours, expected=ceiling,
                    hint="removing a part with share s entirely: 1 / (1 - s)")
        below = want["below"][phase]
        name = max(below, key=lambda n: below[n][1]) if below else ""
        count, us = below.get(name, [0, 0.0])
        ev = require_keys(got["evidence"], ("event", "count", "us"), "evidence")
        fail_unless(ev["event"] == name and ev["count"] == count
                    and close(as_float(ev["us"], "evidence us"), us),
                    f"{label}: the evidence event inside {phase!r} differs",
                    yours=ev, expected={"event": name, "count": count, "us": us},
                    hint="among the direct children of that phase's events, the name "
                    "with the largest summed duration, its count and its time")


@checker.check(1, "learner_trace_agrees_with_sync_timing")
def _(impl, ctx):
    config, seed = trace_config(ctx), ctx.seed + 1
    problem = slow_step.make_problem(config, seed)
    args = (problem["params"], problem["tokens"], problem["targets"])
    jax.block_until_ready(slow_step.train_slow(*args, problem["lr"]))

    def timed(lr: float) -> float:
        start = time.perf_counter()
        jax.block_until_ready(slow_step.train_slow(*args, lr))
        return time.perf_counter() - start
    samples = [timed(problem["lr"] * 0.8)]              # before the learner's trace ...
    path = impl.trace_slow(config, seed, str(ctx.subdir("learner-trace")))
    samples += [timed(problem["lr"] * 0.75), timed(problem["lr"] * 0.7)]   # ... and after
    fail_unless(isinstance(path, str) and Path(path).is_file(),
                "trace_slow must return the path of the trace file it wrote", yours=path)
    events = traces.load_events(Path(path))
    python_calls = sum(1 for e in events if str(e.get("name", "")).startswith("$"))
    fail_unless(python_calls == 0, "the trace was taken with the Python tracer on: it "
                "records every Python call and slows the steps it shows",
                yours=f"{python_calls} Python-call events ('$...')", expected=0,
                hint="jax.profiler.ProfileOptions() with python_tracer_level = 0, passed "
                "as profiler_options")
    got = expected_breakdown(Path(path))
    fail_unless(got["steps"] == config["steps"],
                f"the trace should hold one {STEP!r} event per step of one call",
                yours=got["steps"], expected=config["steps"],
                hint="trace exactly one call of train_slow (after an untraced first call)")
    update_us = sorted(child.dur for ev in traces.walk(traces.build_forest(events))
                       if ev.name == STEP for child in ev.children if child.name == UPDATE)
    fail_unless(len(update_us) >= 2 and
                update_us[-1] >= RECOMPILE_FACTOR * float(np.median(update_us[:-1])),
                f"the traced call did not recompile its {UPDATE!r} as a call in use does: "
                "it had the warm-up call's learning rate, so the trace leaves out what "
                "limits the step", yours=f"largest {UPDATE!r} phase {update_us[-1]:.0f} us, "
                f"median of the others {float(np.median(update_us[:-1])):.0f} us"
                if len(update_us) >= 2 else update_us,
                expected=f"one step's {UPDATE!r} at least {RECOMPILE_FACTOR}x the others' "
                "median (the compile a new learning rate causes)",
                hint="give the traced call a learning rate of its own, as every call in "
                "use has one; compile its other operations first, untraced")
    reference = float(np.median(samples))
    within_ratio(got["step_us"] * 1e-6, reference, TRACE_WINDOW, "the traced step",
                 "trace a steady call (compile its operations first, untraced), with the "
                 "Python tracer off, on the problem of (config, seed) and a new lr",
                 against="the checker's synchronised timing of the same call")


# ---------------------------------------------------------------------------------------
# Stage 2: fix it
# ---------------------------------------------------------------------------------------

def learner_train(impl, problem: dict, lr: float):
    params = {k: np.asarray(v) for k, v in problem["params"].items()}
    out = impl.train_fast(params, np.asarray(problem["tokens"]),
                          np.asarray(problem["targets"]), float(lr))
    fail_unless(isinstance(out, (tuple, list)) and len(out) == 2,
                "train_fast must return (params, losses)", yours=type(out).__name__)
    return out


def compare_outputs(got, want, label: str, what_else: str = "") -> None:
    g_params, g_losses = got
    w_params, w_losses = want
    fail_unless(isinstance(g_params, dict) and set(g_params) == set(w_params),
                f"{label}: params must be a dict with the same keys",
                yours=sorted(g_params) if isinstance(g_params, dict) else g_params,
                expected=sorted(w_params))
    pairs = [("losses", g_losses, w_losses)] + [(f"params[{k!r}]", g_params[k], w_params[k])
                                                for k in sorted(w_params)]
    for name, g, w in pairs:
        w = np.asarray(w)
        fail_unless(hasattr(g, "shape") and hasattr(g, "dtype"), f"{label}: {name} is not "
                    "an array", yours=type(g).__name__)
        g = np.asarray(g)
        fail_unless(g.shape == w.shape, f"{label}: {name} has the wrong shape",
                    yours=g.shape, expected=w.shape)
        fail_unless(g.dtype == np.float32, f"{label}: {name} is {g.dtype}, the contract "
                    "says float32", yours=str(g.dtype), expected="float32",
                    hint="compute and return float32; a lower-precision shortcut breaks "
                    "the contract")
        gf, wf = g.astype(np.float64), w.astype(np.float64)
        ok = bool(np.all(np.isfinite(gf))) and np.allclose(gf, wf, rtol=slow_step.RTOL,
                                                           atol=slow_step.ATOL)
        if not ok:
            err = float(np.max(np.abs(gf - wf) / (slow_step.ATOL + slow_step.RTOL
                                                   * np.abs(wf))))
            raise CheckFailed(
                f"{label}: {name} differs from train_slow beyond the contract's tolerance "
                f"(worst element {err:.3g}x the allowed error){what_else}",
                yours=g, expected=w,
                hint=f"rtol {slow_step.RTOL:g}, atol {slow_step.ATOL:g} (float32 reordering "
                "stays 100x inside; bfloat16 moves losses by about 1e-3); compute every "
                "step with the lr of this call, on these inputs")


@checker.check(2, "fast_matches_contract")
def _(impl, ctx):
    rng = ctx.rng("shapes")
    shapes = [{"vocab": odd(rng, 30, 60), "embed": odd(rng, 3, 9), "hidden": odd(rng, 5, 15),
               "batch": odd(rng, 1, 6), "steps": 1},
              {"vocab": odd(rng, 100, 200), "embed": odd(rng, 16, 40),
               "hidden": odd(rng, 40, 90), "batch": odd(rng, 10, 30),
               "steps": int(rng.integers(3, 7))},
              {"vocab": odd(rng, 200, 300), "embed": odd(rng, 30, 50),
               "hidden": odd(rng, 100, 160), "batch": odd(rng, 20, 40),
               "steps": int(rng.integers(4, 7))}]
    for i, config in enumerate(shapes):
        label = ", ".join(f"{k}={v}" for k, v in config.items())
        for j in range(2 if i else 1):   # new values of one shape: a cached result fails
            problem = slow_step.make_problem(config, ctx.seed * 7 + 10 * i + j)
            lr = problem["lr"] * (1 + 0.1 * j)
            got = learner_train(impl, problem, lr)
            want = slow_step.train_slow(problem["params"], problem["tokens"],
                                        problem["targets"], lr)
            compare_outputs(got, want, label, " on new values of a shape seen before "
                            "(a result kept from an earlier call?)" if j else "")
        if config["steps"] == 1:
            grads = slow_step.reference_grads(problem["params"], problem["tokens"][0],
                                              problem["targets"][0])
            for k, g in grads.items():
                implied = (np.asarray(problem["params"][k], np.float64)
                           - np.asarray(got[0][k], np.float64)) / lr
                fail_unless(np.allclose(implied, np.asarray(g, np.float64),
                                        rtol=slow_step.RTOL, atol=slow_step.ATOL / lr),
                            f"{label}: the gradient of {k!r} implied by one step "
                            "differs from jax.grad of the loss", yours=implied,
                            expected=np.asarray(g), hint="one step is params - lr * grad")


def run_driver(ctx, configs: list[dict], seed: int, *, rounds: int, slow_iters: int,
               fast_iters: int, name: str, timeout: float = 400) -> list[dict]:
    """Run speed_driver.py on the learner's file, one size after another; its blocks are
    stamped on the monotonic clock and bounded by this process's readings of it. Returns
    per config the driver's report plus "blocks": {(round, "slow"|"fast"): seconds}."""
    folder = ctx.subdir(f"driver-{name}")
    spec = {"impl": str(Path(ctx.impl_path).resolve()), "configs": configs, "seed": seed,
            "rounds": rounds, "slow_iters": slow_iters, "fast_iters": fast_iters,
            "out": str(folder / "report.json")}
    (folder / "spec.json").write_text(json.dumps(spec))
    tag = secrets.token_hex(8)
    env = {**os.environ, "OPT_BLOCK_TAG": tag, "JAX_PLATFORMS":
           os.environ.get("JAX_PLATFORMS", "cpu")}
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(folder / "spec.json")],
                            stdout=subprocess.PIPE, stderr=open(folder / "stderr", "wb"),
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    marks: dict = {}
    refused: list = []

    def read():
        last = -math.inf
        for line in proc.stdout:
            now = time.perf_counter()
            parts = line.decode("utf-8", "replace").split()
            if len(parts) != 5 or parts[1] != tag:
                continue
            stamp = float(parts[4])
            if not last <= stamp <= now + MARK_SLACK_S:
                refused.append(line)
            last = stamp
            marks[(parts[0], int(parts[2]), parts[3])] = stamp
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        raise CheckFailed(f"the timing process ran over {timeout:.0f} s",
                          hint="train_fast should take milliseconds per call at this size"
                          ) from None
    reader.join(timeout=10)
    if refused:
        raise CheckFailed("the timing process wrote block stamps the checker did not see "
                          "happen (from its future or out of order)",
                          yours=refused[0][:120], hint="do not write to stdout in the "
                          "timing process's format")
    report_path = Path(spec["out"])
    if not report_path.is_file():
        tail = (folder / "stderr").read_text(errors="replace").strip()[-500:]
        raise CheckFailed(f"the timing process died (exit {proc.returncode}): {tail}")
    report = json.loads(report_path.read_text())
    if not report.get("ok") and report.get("kind") in ("not-implemented", "missing-function",
                                                        "syntax", "import", "exception"):
        raise LearnerCodeError(report["kind"], f"in the timing process: {report['error']}",
                               report.get("hint", ""))
    if not report.get("ok"):
        raise CheckFailed(f"in the timing process: {report.get('error')}",
                          hint="train_fast must import and run in a fresh process")
    sizes = report["sizes"]
    for (kind, r, which), t in marks.items():
        if kind == "B" and ("E", r, which) in marks:
            version, _, index = which.partition("@")
            sizes[int(index)].setdefault("blocks", {})[(r, version)] = \
                marks[("E", r, which)] - t
    return sizes


def timing_run(ctx) -> dict:
    """Stage 2's fresh-process measurement at the held-out size (shared with stage 4)."""
    def make():
        config = timing_config(ctx)
        report = run_driver(ctx, [config], ctx.seed + 2, rounds=TIMING_ROUNDS,
                            slow_iters=SLOW_ITERS, fast_iters=FAST_ITERS, name="timing")[0]
        before, after = {"samples_s": [], "round_ids": []}, {"samples_s": [], "round_ids": []}
        for r in range(TIMING_ROUNDS):
            for which, rec, n in (("slow", before, SLOW_ITERS), ("fast", after, FAST_ITERS)):
                if (r, which) not in report["blocks"]:
                    raise CheckFailed(f"the timing process did not mark round {r} ({which})")
                rec["samples_s"].append(report["blocks"][(r, which)] / n)
                rec["round_ids"].append(r)
        report.update(config=config, before=before, after=after,
                      decision=decide_rounds(before, after, min_gain=MIN_SPEEDUP - 1))
        return report
    return ctx.once("timing", make)


@checker.check(2, "no_recompile_fixed_shape")
def _(impl, ctx):
    report = timing_run(ctx)
    first = report["blocks"].get((-1, "fast"), report["fast_first_call_s"])
    warmed = float(np.max(report["after"]["samples_s"]))
    fail_unless(warmed < first / 3,
                "train_fast takes as long on later calls of a fixed shape as on its "
                "compiling first call: it recompiles", yours=f"slowest later call "
                f"{warmed * 1e3:.4g} ms, first call {first * 1e3:.4g} ms",
                expected="later calls far below a third of the first call",
                hint="a value that changes every call (the lr) must be a traced argument, "
                "not a static one; shapes stay fixed")
    fail_unless(report["fast_compiles_warmed"] == 0,
                "compile events were counted during the timed calls of train_fast",
                yours=report["fast_compiles_warmed"], expected=0,
                hint="nothing may compile after the first call of a shape")


@checker.check(2, "speedup_measured_fresh_process")
def _(impl, ctx):
    report = timing_run(ctx)
    for r, (slow, fast) in enumerate(zip(report["losses"]["slow"], report["losses"]["fast"])):
        fail_unless(np.allclose(fast[0], slow[0], rtol=slow_step.RTOL, atol=slow_step.ATOL),
                    f"during timing (round {r}, a new lr) train_fast's losses differ from "
                    "train_slow's", yours=np.asarray(fast[0]), expected=np.asarray(slow[0]),
                    hint="every call must compute with its own inputs and lr; a result kept "
                    "from an earlier call or skipped work is caught here")
    d = report["decision"]
    config = ", ".join(f"{k}={v}" for k, v in report["config"].items())
    fail_unless(d["decision"] == "accept",
                f"not clearly {MIN_SPEEDUP:g}x faster at a size you have not seen ({config}), "
                f"measured by the checker in {d['n_rounds']} interleaved rounds in a fresh "
                "process: " + " ".join(d["reasons"]),
                yours=f"speedup {d['ratio']:.3g}x, interval {d['ci']}",
                expected=f"interval above {MIN_SPEEDUP:g}x",
                hint="remove the limiting operations stage 1 found (one compiled call for "
                "the whole loop, nothing recompiled per call, no host read per step); a fix "
                "tuned to one shape must win on others too")


# ---------------------------------------------------------------------------------------
# Stage 3: where it stops helping
# ---------------------------------------------------------------------------------------

def reference_crossover(sizes, gains, threshold):
    if gains[0] < threshold:
        return float(sizes[0])
    for i in range(len(sizes) - 1):
        g0, g1 = gains[i], gains[i + 1]
        if g0 >= threshold > g1:
            f = (math.log(g0) - math.log(threshold)) / (math.log(g0) - math.log(g1))
            return math.exp(math.log(sizes[i]) + f * (math.log(sizes[i + 1])
                                                     - math.log(sizes[i])))
    return None


@checker.check(3, "crossover_interpolation")
def _(impl, ctx):
    rng = ctx.rng("crossover")
    for case in range(9):
        sizes = sorted(int(v) for v in rng.choice(np.arange(2, 9000), 5, replace=False))
        gains = sorted((float(v) for v in rng.uniform(0.8, 60, 5)), reverse=True)
        threshold = float(rng.uniform(1.5, 10))
        if case == 4:
            threshold = gains[-1] * 0.5      # never falls below
        if case == 5:
            threshold = gains[0] * 1.5       # already below at the first size
        if case == 6:                        # crossed between neighbours far apart in log
            sizes = [int(rng.integers(2, 5)), int(rng.integers(30, 90))] + sorted(
                int(v) for v in rng.choice(np.arange(100, 9000), 3, replace=False))
            threshold = math.sqrt(gains[0] * gains[1])
        if case == 7:                        # gains far above and below it: log ratios
            threshold = float(rng.uniform(1.5, 3))          # matter, not log differences
            gains = [threshold ** 2.5, threshold ** 0.5] + sorted(
                (float(v) for v in rng.uniform(0.5, 0.9, 3)), reverse=True)
        if case == 8:                        # a gain exactly at the threshold: from it on
            threshold = gains[2]             # the curve is below (f = 0 at that size)
        want = reference_crossover(sizes, gains, threshold)
        got = impl.crossover(sizes, gains, threshold)
        fail_unless((got is None and want is None) or (
            got is not None and want is not None
            and math.isclose(as_float(got, "crossover"), want, rel_tol=1e-9)),
            f"crossover for gains {[round(g, 2) for g in gains]} at sizes {sizes}, "
            f"threshold {threshold:.3g}", yours=got, expected=want,
            hint="first pair with g0 >= threshold > g1, linear in log(batch) vs "
            "log(gain); the first size if already below; None if never")


def checker_sweep(ctx) -> dict:
    """The checker's own interleaved sweep (slow vs the learner's fast) in one fresh
    process, its block stamps bounded by this process's clock."""
    def make():
        config, sizes = sweep_config(ctx), sweep_sizes(ctx)
        gains, slow_med, fast_med = [], [], []
        reports = run_driver(ctx, [dict(config, batch=b) for b in sizes], ctx.seed + 3,
                             rounds=SWEEP_ROUNDS, slow_iters=1, fast_iters=2, name="sweep")
        for report in reports:
            slow = [report["blocks"][(r, "slow")] for r in range(SWEEP_ROUNDS)]
            fast = [report["blocks"][(r, "fast")] / 2 for r in range(SWEEP_ROUNDS)]
            slow_med.append(float(np.median(slow)))
            fast_med.append(float(np.median(fast)))
            gains.append(slow_med[-1] / fast_med[-1])
        return {"config": config, "sizes": sizes, "gains": gains, "slow_s": slow_med,
                "fast_s": fast_med,
                "crossover": reference_crossover(sizes, gains, GAIN_THRESHOLD)}
    return ctx.once("sweep", make)


def end_size_medians(ctx, name: str) -> list[tuple[float, float]]:
    """The checker's own (slow, fast) median call times at the sweep's two end sizes,
    measured now in a fresh process (as predict_crossover measures them)."""
    config, sizes = sweep_config(ctx), sweep_sizes(ctx)
    reports = run_driver(ctx, [dict(config, batch=b) for b in (sizes[0], sizes[-1])],
                         ctx.seed + 3, rounds=SWEEP_ROUNDS, slow_iters=1, fast_iters=2,
                         name=name)
    return [(float(np.median([r["blocks"][(k, "slow")] for k in range(SWEEP_ROUNDS)])),
             float(np.median([r["blocks"][(k, "fast")] / 2 for k in range(SWEEP_ROUNDS)])))
            for r in reports]


def modelled_crossover(ends: list[tuple[float, float]], small: int, large: int,
                       threshold: float) -> float | None:
    """The checker's own prediction: per version, call time = fixed + per_example * batch
    through the two end medians; the batch where slow / fast falls to ``threshold``."""
    (s0, f0), (s1, f1) = ends
    slope_s, slope_f = (s1 - s0) / (large - small), (f1 - f0) / (large - small)
    base_s, base_f = s0 - slope_s * small, f0 - slope_f * small
    denominator = threshold * slope_f - slope_s
    if denominator <= 0:
        return None
    return max((base_s - threshold * base_f) / denominator, 1.0)


def samples_of(value, what: str, rounds: int) -> list[float]:
    fail_unless(isinstance(value, list) and len(value) == rounds,
                f"{what}: one raw sample per round", yours=value,
                expected=f"a list of {rounds} durations in seconds")
    out = [as_float(v, what) for v in value]
    fail_unless(all(v > 0 and math.isfinite(v) for v in out), f"{what}: every sample is "
                "a positive duration in seconds", yours=value)
    return out


def tiny_config(rng, **sizes) -> dict:
    """A problem of millisecond calls, for checks of counts and rates (not times)."""
    return {"vocab": odd(rng, 31, 61), "embed": odd(rng, 5, 9), "hidden": odd(rng, 7, 15),
            "steps": 2, **sizes}


def sweep_samples(got, sizes: list[int], rounds: int, what: str = "") -> list[tuple]:
    """gain_sweep's answer checked for form and arithmetic: every size given, in order,
    one positive sample in seconds per round per version, and each gain the median slow
    time over the median fast time of its own samples. Returns (slow_s, fast_s) per
    size."""
    got = require_keys(got, ("batch_sizes", "slow_s", "fast_s", "gains"), "gain_sweep")
    fail_unless(isinstance(got["batch_sizes"], list) and list(got["batch_sizes"]) == sizes
                and all(isinstance(got[k], list) and len(got[k]) == len(sizes)
                        for k in ("slow_s", "fast_s", "gains")),
                f"{what}gain_sweep must report every size it was given, in order, with "
                "samples and a gain for each",
                yours={k: got[k] for k in ("batch_sizes", "gains")}, expected=sizes)
    out = []
    for b, g, slow_s, fast_s in zip(sizes, got["gains"], got["slow_s"], got["fast_s"]):
        slow_s = samples_of(slow_s, f"{what}batch {b}: slow_s", rounds)
        fast_s = samples_of(fast_s, f"{what}batch {b}: fast_s", rounds)
        implied = float(np.median(slow_s) / np.median(fast_s))
        fail_unless(close(as_float(g, f"gain at batch {b}"), implied),
                    f"{what}batch {b}: your gain is not the median slow time over the "
                    "median fast time of your own samples", yours=g, expected=implied)
        out.append((slow_s, fast_s))
    return out


def rounds_honoured(impl, ctx) -> None:
    """gain_sweep on a tiny problem (calls of a millisecond) with a drawn number of
    rounds, more than the sweep's, both versions watched in the learner process: one
    sample per round, the gain of the samples, and a learning rate of its own for every
    call (a repeated rate skips the slow version's recompile). Its times are noise at
    this size, so only the counts, the rates and the arithmetic are checked."""
    rng = ctx.rng("rounds")
    sizes, rounds = [3, 5], int(rng.integers(30, 41))
    watched = bridge.inspect(impl, "optimisation/gain_sweep_watched",
                             LearnerFunction("gain_sweep"), tiny_config(rng), sizes, rounds,
                             ctx.seed + 5)
    sweep_samples(watched["result"], sizes, rounds, f"rounds={rounds}: ")
    for b in sizes:
        calls = [c for c in watched["calls"] if c[1] == b]
        for version in ("slow", "fast"):
            made = sum(c[0] == version for c in calls)
            fail_unless(made >= rounds + 1, f"rounds={rounds}, batch {b}: too few "
                        f"{version} calls for a first call and one per round",
                        yours=made, expected=f"at least {rounds + 1}")
        rates = [c[2] for c in calls]
        repeated = sorted({r for r in rates if rates.count(r) > 1})
        fail_unless(not repeated, f"rounds={rounds}, batch {b}: calls shared a learning "
                    "rate (in use every call has its own; a repeated one skips the slow "
                    "version's recompile)", yours=f"{len(repeated)} rate(s) used more than "
                    f"once in {len(rates)} calls", expected="every rate once",
                    hint="draw a new rate for every call of either version")


@checker.check(3, "sweep_matches_checker")
def _(impl, ctx):
    rounds_honoured(impl, ctx)
    config, sizes = sweep_config(ctx), sweep_sizes(ctx)
    got = impl.gain_sweep(config, sizes, SWEEP_ROUNDS, ctx.seed + 3)
    raw = [(float(np.median(slow_s)), float(np.median(fast_s)))
           for slow_s, fast_s in sweep_samples(got, sizes, SWEEP_ROUNDS)]
    growth = raw[-1][1] / raw[0][1]
    fail_unless(growth >= FAST_GROWTH,
                f"your train_fast times barely grow from batch {sizes[0]} to {sizes[-1]} "
                f"(about {sizes[-1] / sizes[0]:.0f}x the arithmetic)",
                yours=f"{growth:.3g}x ({raw[0][1] * 1e3:.4g} ms -> {raw[-1][1] * 1e3:.4g} ms)",
                expected=f"at least {FAST_GROWTH:g}x",
                hint="wait for each result inside its timed boundary "
                "(jax.block_until_ready), and build each size's own problem")
    mine = checker_sweep(ctx)
    fail_unless(mine["gains"][0] > mine["gains"][-1],
                "your fix's gain does not shrink with the batch size in the checker's sweep",
                yours=[round(g, 2) for g in mine["gains"]], expected="falling gains",
                hint="stage 2 must pass first")
    for b, g, want, (slow, _), my_slow in zip(sizes, got["gains"], mine["gains"], raw,
                                              mine["slow_s"]):
        # train_slow's calls (tens of ms and up) are the steady figure; train_fast's enter
        # through the gain (its few-ms calls are what the load moves most).
        within_ratio(slow, my_slow, GAIN_WINDOW, f"batch {b}: your median train_slow call",
                     "time each call at this batch size in seconds, synchronised inside "
                     "its timed boundary, compile apart, new lr per call",
                     against="the checker's own measurement of it")
        ratio = float(g) / want
        fail_unless(1 / GAIN_WINDOW <= ratio <= GAIN_WINDOW,
                    f"batch {b}: your gain is {ratio:.3g}x the checker's measurement",
                    yours=f"{g:.3g}x", expected=f"about {want:.3g}x (within {GAIN_WINDOW:g}x)",
                    hint="synchronise every call inside its timed boundary "
                    "(jax.block_until_ready on the result), compile apart, new lr per call")


def model_point(mine: dict, sizes: list[int]) -> tuple[float, float] | None:
    """The checker's own cost model from its sweep's end sizes (per version, call time =
    fixed + per_example * batch through the two medians): a batch a quarter of the way
    from the smallest to the largest size in log, and the model's gain there. None when
    the model has no positive fast time there or its gain there is outside the measured
    gains."""
    small, large = sizes[0], sizes[-1]
    fit = []
    for key in ("slow_s", "fast_s"):
        t0, t1 = mine[key][0], mine[key][-1]
        slope = (t1 - t0) / (large - small)
        fit.append((t0 - slope * small, slope))
    batch = float(small ** 0.75 * large ** 0.25)
    (base_s, slope_s), (base_f, slope_f) = fit
    fast = base_f + slope_f * batch
    if fast <= 0:
        return None
    gain = (base_s + slope_s * batch) / fast
    return (batch, gain) if mine["gains"][-1] < gain < mine["gains"][0] else None


def second_threshold(point: tuple[float, float] | None) -> float:
    """The threshold of the learner's second call: the gain of the checker's model a
    quarter of the way along its sweep, and at least twice the README's. Always a call,
    and never at the README's threshold, so a threshold ignored or hard-coded replays
    wrong. Near 4x the lines may never meet (the reference
    measured 4.0-4.5x at the sweep's largest size on a 2-core machine), and a check that
    skipped when either prediction was None passed a threshold hard-coded to 4x in CI."""
    return max(point[1] if point is not None else 0.0, 2 * GAIN_THRESHOLD)


# A gain no fix has at any batch of at least 1 (the model's crossover then lies below 1):
# the answer is the floor, 1.0, whenever train_fast has a fixed cost per call.
UNREACHED = 1000 * GAIN_THRESHOLD
# A gain the modelled one never falls to: the fix would have to cost twice the slow
# version per example. The lines never meet there (None), a branch no other call reaches.
NEVER_FALLS_TO = 0.5


def prediction_runs(impl, ctx) -> dict:
    """The learner's four predict_crossover calls and the checker's measurements that
    bracket each in time (the first at the README's threshold, the second at
    second_threshold, the third at UNREACHED, the fourth at NEVER_FALLS_TO), made once
    per run. The learner's call comes
    first: an unwritten stage 3 says so before the checker's measurements (which time
    the learner's stage-2 train_fast) can answer for stage 2. The sweep (made earlier by
    sweep_matches_checker, or now) and a fresh measurement after it bracket the first
    call; that one and another after the second call bracket the second; that one and
    another after the third bracket the third, and so on."""
    def make():
        sizes = sweep_sizes(ctx)
        small, large = sizes[0], sizes[-1]
        first = impl.predict_crossover(sweep_config(ctx), small, large, GAIN_THRESHOLD,
                                       ctx.seed + 4)
        mine = checker_sweep(ctx)
        between = end_size_medians(ctx, "ends-between")
        higher = second_threshold(model_point(mine, sizes))
        second = impl.predict_crossover(sweep_config(ctx), small, large, higher,
                                        ctx.seed + 6)
        after = end_size_medians(ctx, "ends-after")
        third = impl.predict_crossover(sweep_config(ctx), small, large, UNREACHED,
                                       ctx.seed + 8)
        later = end_size_medians(ctx, "ends-later")
        fourth = impl.predict_crossover(sweep_config(ctx), small, large, NEVER_FALLS_TO,
                                        ctx.seed + 10)
        last = end_size_medians(ctx, "ends-last")
        return {"sizes": sizes, "calls": [(GAIN_THRESHOLD, first, [mine_ends(mine), between]),
                                          (higher, second, [between, after]),
                                          (UNREACHED, third, [after, later]),
                                          (NEVER_FALLS_TO, fourth, [later, last])]}
    return ctx.once("predictions", make)


def prediction_of(got, threshold: float) -> dict:
    """The learner's answer, its fields checked for type: crossover and four medians."""
    what = f"predict_crossover(..., threshold={threshold:.3g})"
    got = require_keys(got, ("crossover", "median_slow_s", "median_fast_s"), what)
    out = {"crossover": None if got["crossover"] is None
           else as_float(got["crossover"], f"{what}['crossover']")}
    for key in ("median_slow_s", "median_fast_s"):
        value = got[key]
        fail_unless(isinstance(value, list) and len(value) == 2,
                    f"{what}['{key}'] is [median at small, median at large]", yours=value,
                    expected="a list of 2 durations in seconds")
        out[key] = [as_float(v, f"{what}['{key}']") for v in value]
        fail_unless(all(v > 0 and math.isfinite(v) for v in out[key]),
                    f"{what}['{key}']: medians are positive durations in seconds",
                    yours=value)
    return out


@checker.check(3, "prediction_is_the_model_of_your_medians")
def _(impl, ctx):
    """Each call's crossover replayed exactly from the medians it reports (the model's
    arithmetic is exact: a wrong slope, intercept or threshold is wrong at any load), and
    each median measured against the checker's own of that version and size, taken right
    before and right after the call."""
    runs = prediction_runs(impl, ctx)
    small, large = runs["sizes"][0], runs["sizes"][-1]
    for threshold, got, brackets in runs["calls"]:
        got = prediction_of(got, threshold)
        for key, column in (("median_slow_s", 0), ("median_fast_s", 1)):
            for end, (size, value) in enumerate(zip((small, large), got[key])):
                refs = [ends[end][column] for ends in brackets]
                fail_unless(min(refs) / GAIN_WINDOW <= value <= max(refs) * GAIN_WINDOW,
                            f"threshold {threshold:.3g}: your {key} at batch {size} is not "
                            "what the checker measures for that version at that size "
                            "right before and after your call",
                            yours=f"{value * 1e3:.4g} ms",
                            expected=f"{min(refs) * 1e3:.4g}-{max(refs) * 1e3:.4g} ms "
                            f"(within {GAIN_WINDOW:g}x)",
                            hint="median of synchronised calls at each size, compile "
                            "apart, new lr per call (a one-size gain_sweep each)")
        ends = list(zip(got["median_slow_s"], got["median_fast_s"]))
        want = modelled_crossover(ends, small, large, threshold)
        yours = got["crossover"]
        fail_unless((yours is None) == (want is None) and (
            want is None or math.isclose(yours, want, rel_tol=1e-9)),
            f"threshold {threshold:.3g}: your crossover is not what a fixed cost plus a "
            "cost per example, through your own two medians per version, gives",
            yours=yours, expected=want,
            hint="per version a straight line through (small, median) and (large, "
            "median); the batch where slow / fast equals the threshold; None when the "
            "lines never meet there; at least 1")


def mine_ends(mine: dict) -> list[tuple[float, float]]:
    """The end sizes of the checker's sweep, as end_size_medians gives them."""
    return [(mine["slow_s"][0], mine["fast_s"][0]), (mine["slow_s"][-1], mine["fast_s"][-1])]


# ---------------------------------------------------------------------------------------
# Stage 4: the report
# ---------------------------------------------------------------------------------------

def record_counts(ctx) -> tuple[int, int]:
    """The warmup and iters the records are asked for (drawn: a hard-coded count fails)."""
    rng = ctx.rng("records")
    return int(rng.integers(1, 3)), int(rng.integers(6, 10))


# Learning rates this process has never used: the update is compiled once per rate and
# process, and one checker process may check several files with the same seed (the
# planted batches do): a rate met before compiles nothing, and counted 0 per call.
_FRESH_RATES = itertools.count(1)


def slow_compiles_per_call(ctx) -> int:
    """The checker's own count of compiles in one steady train_slow call with a new lr
    (its per-lr update is compiled for each learning rate), on the records' problem."""
    def make():
        problem = slow_step.make_problem(timing_config(ctx), ctx.seed + 5)
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
    return ctx.once("slow-compiles", make)


def read_records(paths, what: str = "write_run_records") -> dict:
    """write_run_records' answer: {"before": path, "after": path} of files that exist,
    read as JSON."""
    paths = require_keys(paths, ("before", "after"), what)
    out = {}
    for label in ("before", "after"):
        path = paths[label]
        fail_unless(isinstance(path, str) and Path(path).is_file(),
                    f"{what}: no {label} file", yours=path)
        out[label] = json.loads(Path(path).read_text())
    return out


def learner_records(impl, ctx) -> dict:
    def make():
        outdir = ctx.subdir("records")
        warmup, iters = record_counts(ctx)
        return read_records(impl.write_run_records(timing_config(ctx), ctx.seed + 5,
                                                   str(outdir), warmup=warmup, iters=iters))
    return ctx.once("records", make)


def many_calls_honoured(impl, ctx) -> None:
    """write_run_records on a tiny problem with a drawn 30-40 timed calls (more than the
    records' own): one sample per call, and the before record's warmed calls still
    compile as train_slow does with a new learning rate each (a rate source that runs dry
    or repeats fails here)."""
    rng = ctx.rng("many-calls")
    iters = int(rng.integers(30, 41))
    records = read_records(impl.write_run_records(
        tiny_config(rng, batch=odd(rng, 3, 9)), ctx.seed + 9,
        str(ctx.subdir("records-many")), warmup=1, iters=iters),
        f"write_run_records (iters={iters})")
    for label, rec in records.items():
        fail_unless(len(rec.get("samples_s") or []) == iters,
                    f"write_run_records (iters={iters}): the {label} record does not hold "
                    "one sample per timed call", yours=len(rec.get("samples_s") or []),
                    expected=iters)
        if label == "before":
            least = slow_compiles_per_call(ctx) * (1 + iters)
            fail_unless(rec.get("compiles_warmed", 0) >= least,
                        f"write_run_records (iters={iters}): the before record's warmed "
                        "calls compiled less than train_slow does with a new learning rate "
                        "every call", yours=rec.get("compiles_warmed"),
                        expected=f"at least {least}",
                        hint="give every call a learning rate of its own, however many")


@checker.check(4, "records_valid_for_decide")
def _(impl, ctx):
    records = learner_records(impl, ctx)
    many_calls_honoured(impl, ctx)
    config = timing_config(ctx)
    shape = [config["steps"], config["batch"]]
    for label, rec in records.items():
        problems = validate_run_record(rec, check_trace=True)
        fail_unless(not problems, f"the {label} record is not a valid run record",
                    yours=problems, expected="no problems",
                    hint="build it with coursekit.provenance.records.make_run_record")
        fail_unless(rec["shapes"] == [shape, shape] and rec["dtypes"] == ["int32", "int32"],
                    f"the {label} record times another workload than the one asked for",
                    yours=(rec["shapes"], rec["dtypes"]),
                    expected=([shape, shape], ["int32", "int32"]),
                    hint="time make_problem(config, seed): tokens and targets of that size")
        fail_unless(rec["output_ok"] is True, f"the {label} record's output check did not "
                    "pass", yours=rec["output_ok"], expected=True)
        found = traces.region_summary(rec["trace"], rec["region"])
        fail_unless(found["count"] >= 1, f"the {label} record's trace has no "
                    f"{rec['region']!r} event", yours=found["count"], expected=">= 1")
        python_calls = sum(1 for e in traces.load_events(rec["trace"])
                           if str(e.get("name", "")).startswith("$"))
        fail_unless(python_calls == 0, f"the {label} record's trace was taken with the "
                    "Python tracer on (its per-call events slow the call they show)",
                    yours=f"{python_calls} Python-call events ('$...')", expected=0,
                    hint="jax.profiler.ProfileOptions() with python_tracer_level = 0")
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
                hint="your fix must not recompile per call (stage 2)")
    warmup, iters = record_counts(ctx)
    least = slow_compiles_per_call(ctx) * (warmup + iters)
    fail_unless(records["before"]["compiles_warmed"] >= least, "the before record's "
                "warmed calls compiled less than train_slow does with a new learning rate "
                "every call (as in use)", yours=records["before"]["compiles_warmed"],
                expected=f"at least {least} (the checker counts "
                f"{slow_compiles_per_call(ctx)} per call, {warmup + iters} calls)",
                hint="give every call a learning rate of its own, the warm-up ones too")
    fail_unless(records["before"]["boundary"] == records["after"]["boundary"],
                "before and after must time the same boundary",
                yours=(records["before"]["boundary"], records["after"]["boundary"]))


@checker.check(4, "output_ok_is_measured")
def _(impl, ctx):
    """The records' output_ok compared with the checker's own verdict on an "after" whose
    output it made wrong: the learner's write_run_records run once more in the learner
    process with its module's train_fast returning losses 1% off (self-reported: the
    swap happens beside the learner's code; a record that still says True fails)."""
    outdir = ctx.subdir("records-wrong-fast")
    records = read_records(bridge.inspect(impl, "optimisation/records_with_a_wrong_fast",
                                          LearnerFunction("write_run_records"),
                                          timing_config(ctx), ctx.seed + 7, str(outdir), 1,
                                          2))
    for label, want in (("before", True), ("after", False)):
        got = records[label].get("output_ok")
        fail_unless(got is want, f"with a train_fast whose losses are 1% off, the {label} "
                    f"record's output_ok must be {want}", yours=got, expected=want,
                    hint="output_ok: the first call's outputs (every leaf) within "
                    "slow_step.RTOL / ATOL of train_slow's on the same problem, computed "
                    "each time, never written in")


@checker.check(4, "records_agree_with_checker")
def _(impl, ctx):
    records = learner_records(impl, ctx)
    samples = {}
    for label in ("before", "after"):
        value = records[label]["samples_s"]
        fail_unless(isinstance(value, list) and value and all(
            isinstance(v, (int, float)) and v > 0 for v in value),
            f"the {label} record's samples_s must be the timed calls' durations in seconds",
            yours=value)
        samples[label] = float(np.median(value))
    # First the checker's own synchronised timing of train_slow on the same problem, in
    # this process (cheap, before the fresh-process measurement).
    config = timing_config(ctx)
    problem = slow_step.make_problem(config, ctx.seed + 5)
    args = (problem["params"], problem["tokens"], problem["targets"])
    jax.block_until_ready(slow_step.train_slow(*args, problem["lr"]))
    quick = []
    for i in range(2):
        start = time.perf_counter()
        jax.block_until_ready(slow_step.train_slow(*args, problem["lr"] * (0.9 - 0.05 * i)))
        quick.append(time.perf_counter() - start)
    quick_s = float(np.median(quick))
    fail_unless(1 / RECORD_WINDOW <= samples["before"] / quick_s <= RECORD_WINDOW,
                f"the before record's median call is {samples['before'] / quick_s:.3g}x the "
                "checker's own synchronised timing of train_slow on the same problem",
                yours=f"{samples['before']:.4g} s", expected=f"about {quick_s:.4g} s (within "
                f"{RECORD_WINDOW:g}x)", hint="samples_s in seconds, one synchronised call "
                "each, first call apart")
    theirs = samples["before"] / samples["after"]
    report = timing_run(ctx)
    for label, version in (("before", "train_slow"), ("after", "train_fast")):
        yours = samples[label]
        want = float(np.median(report[label]["samples_s"]))
        fail_unless(1 / RECORD_WINDOW <= yours / want <= RECORD_WINDOW,
                    f"the {label} record's median call ({version}) is {yours / want:.3g}x "
                    "the checker's own measurement of it", yours=f"{yours:.4g} s",
                    expected=f"about {want:.4g} s (within {RECORD_WINDOW:g}x)",
                    hint="samples_s in seconds, one synchronised call each, first call apart")
    mine = report["decision"]["ratio"]
    ratio = theirs / mine
    fail_unless(1 / RECORD_WINDOW <= ratio <= RECORD_WINDOW,
                f"the records' speedup is {ratio:.3g}x the checker's own measurement",
                yours=f"{theirs:.3g}x", expected=f"about {mine:.3g}x (within "
                f"{RECORD_WINDOW:g}x)", hint="synchronise inside every timed call, first "
                "call apart, the same problem and a fresh parameter copy for both")


if __name__ == "__main__":
    sys.exit(checker.main())

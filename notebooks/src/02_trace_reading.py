# ---
# jupyter:
#   course:
#     ci_parameters:
#       BATCH: 64
#       STEPS: 3
#       WIDTH: 128
#     project: performance-audit
#     stages:
#     - 2
#     title: "02 \xB7 Trace reading"
#   jupytext:
#     notebook_metadata_filter: course,language_info,-jupytext.text_representation.jupytext_version
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#   kernelspec:
#     display_name: JAX perf course (Python 3.12, CPU)
#     language: python
#     name: jax-perf-course
#   language_info:
#     name: python
# ---

# %% [markdown]
# # 02 · Trace reading: one region, found and explained
#
# **Project:** performance-audit, stage 2 (*explain the evidence*), trace part.
# **You build** in `projects/performance-audit/starter/model.py`: `write_trace`,
# `newest_trace_file`, `summarize_region`. Notebook 03 builds the roofline part of the same
# stage.
#
# The traces here are real `jax.profiler` traces of a small MLP training step, taken on
# this machine's CPU. A CPU trace shows how the host runtime schedules work; it says
# nothing about accelerator kernels, memory or communication.

# %% tags=["parameters"]
# Parameters (papermill injects other values in CI; learners keep these).
IMPL = "../projects/performance-audit/starter/model.py"  # the implementation under test
BATCH = 256      # rows per training step
WIDTH = 256      # model width; the hidden layer is 4 * WIDTH
STEPS = 5        # annotated steps per trace
TRACE_DIR = ""   # where traces go; empty: a folder under the course records (build/learner)

# %%
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from coursekit.measure import traces
from coursekit.measure.op_events import NOT_WRITTEN
from coursekit.notebook import dispatch_wait, trace_timeline
from coursekit.notebook.cells import (
    RECORDS,
    compare_prediction,
    cpu_label,
    record_prediction,
    run_check,
    shown,
)
from coursekit.notebook.guard import attempt, load_learner, need, not_yet

impl = load_learner(IMPL)
LABEL = cpu_label()
REGION = "train_step"
TRACE_ROOT = Path(TRACE_DIR) if TRACE_DIR else RECORDS / "traces" / "02_trace_reading"
TRACE_ROOT.mkdir(parents=True, exist_ok=True)
ON_DEVICE = jax.default_backend() != "cpu"  # this kernel's JAX computes on an accelerator
print(LABEL)
print("branch:", "accelerator (the trace's device lines)" if ON_DEVICE else
      "cpu (host threads' events)")
print("implementation under test:", IMPL)
print("traces go to:", shown(TRACE_ROOT))

# %% [markdown]
# ## Check your starting point
#
# **Question.** A trace of one synchronised training step: the annotated region `train_step`
# lasts *T*. On the Python thread, directly inside it, sit `PjitFunction(step)` lasting *P*
# (with another `PjitFunction(step)` nested inside it, also about *P*) and then
# `block_until_ready` lasting *W*. On another thread, `tf_XLAExecute`, an event
# `ThunkExecutor::Execute` lasts *E* and overlaps the region. Which of these is the time the
# step's computation ran: (a) *P*; (b) *2P*; (c) *E*; (d) *P + W + E*? And what is *W*?
# Answer and say why in the cell below, then open the reasoning.

# %% [markdown] nbgrader={"grade": true, "grade_id": "starting_point_02", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# (c) about *E*. `PjitFunction(step)` is *dispatch*: the host checks the arguments, enqueues
# the compiled program and returns (the nested one is the same interval seen by two layers of
# the runtime, so not *2P*). The computation runs on the execution thread (*E*). *W* is the
# Python thread *waiting* for that computation to complete: it ends when the work does, so
# it holds the work still running when dispatch returns plus any time the work waited to
# run (how the two compare in your trace is printed beside the breakdown below, not assumed
# here). *P + W* adds up to about *T* (direct
# children of the region); adding *E* counts the same time twice, because it runs
# concurrently with the wait.

# %% [markdown]
# <details><summary>Reasoning (open after answering)</summary>
#
# Events on one thread form a tree: an event that starts and ends inside another is its
# child. Time is additive only across siblings. The region's *self time* is its duration
# minus the summed durations of its *direct* children. JAX's `PjitFunction(...)` appears
# nested in itself under an annotation, so a sum over every event inside the region
# overcounts. Events on *other* threads (XLA's worker threads) overlap the region in time
# but are not its children: they run concurrently.
#
# So a region holds three different things: **dispatch** (the jitted call returning once
# the work is enqueued), the **completion wait** (`block_until_ready`, the host doing nothing
# until the result exists) and, on other threads, **execution** (the work itself). Reading
# the time "in the jitted call" as compute reads dispatch as compute; the wait is where an
# unsynchronised timer (notebook 01) would have stopped looking. A dispatch that takes
# milliseconds is a blocked host (another thread, a loaded machine), not a slow program.
# </details>

# %% [markdown]
# ## Build in stages · stage 2 (trace part): write a trace, find the region
#
# The workload: one jitted training step of a two-layer MLP (`gelu`, mean squared output,
# an SGD update). Your `write_trace` must leave a trace in which `REGION` appears once per
# step, each occurrence holding one *completed*, steady step (no compile inside it): what
# its docstring says is checked, and against what.

# %%
k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
params = {"w1": jax.random.normal(k1, (WIDTH, 4 * WIDTH)) / np.sqrt(WIDTH),
          "w2": jax.random.normal(k2, (4 * WIDTH, WIDTH)) / np.sqrt(4 * WIDTH)}
x = jax.random.normal(k3, (BATCH, WIDTH))

@jax.jit
def step(params, x):
    def loss(p):
        return jnp.mean((jax.nn.gelu(x @ p["w1"]) @ p["w2"]) ** 2)
    value, grads = jax.value_and_grad(loss)(params)
    return value, jax.tree.map(lambda w, g: w - 0.01 * g, params, grads)

trace_file = attempt(impl.write_trace, step, (params, x), str(TRACE_ROOT), REGION, steps=STEPS)
with not_yet("the trace folder"):
    need(trace_file)
    newest = impl.newest_trace_file(str(TRACE_ROOT))
    print("write_trace returned:", shown(trace_file))
    print("newest trace file:   ", shown(newest))
    for p in sorted(Path(newest).parent.iterdir()):
        print(f"  {shown(p.name):40s} {p.stat().st_size / 1024:8.1f} KiB")
    print(f"{len(list(TRACE_ROOT.glob('plugins/profile/*')))} timestamped folder(s) under "
          f"{shown(TRACE_ROOT)}/plugins/profile/: every trace adds one, so take the newest")


# %% [markdown]
# Your `summarize_region` reads the Chrome trace JSON (complete events: `ph == "X"`, `ts`
# and `dur` in microseconds) and reports the region's count, total, *direct* children and
# self time. Beside it, the wrong answer on purpose: every event inside the region added up,
# nested ones included.

# %%
def complete_events(path):
    return [e for e in traces.load_events(path) if e.get("ph") == "X" and "dur" in e]


def within(e, r):
    """Whether event ``e`` lies inside event ``r`` on the same thread (``r`` itself not)."""
    return (e is not r and (e["pid"], e["tid"]) == (r["pid"], r["tid"]) and e["ts"] >= r["ts"]
            and e["ts"] + e["dur"] <= r["ts"] + r["dur"])


def everything_inside(path, region):  # the wrong answer on purpose: nested events too
    events = complete_events(path)
    return sum(e["dur"] for r in events if r["name"] == region for e in events if within(e, r))


summary = attempt(impl.summarize_region, trace_file, REGION)
with not_yet("region summary"):
    need(summary)
    print(f"{REGION}: {summary['count']} occurrence(s), total {summary['total_us'] / 1e3:.2f} ms")
    for name, us in sorted(summary["children"].items(), key=lambda kv: -kv[1]):
        print(f"  direct child {name:45s} {us / 1e3:9.3f} ms")
    print(f"  children together {summary['child_us'] / 1e3:.3f} ms, "
          f"self time {summary['self_us'] / 1e3:.3f} ms")
    additive = everything_inside(trace_file, REGION)
    print(f"every nested event added up: {additive / 1e3:.3f} ms = "
          f"{additive / summary['total_us']:.2f}x the region itself ({LABEL})")

# %% [markdown]
# ### Dispatch, completion wait, execution
#
# The same region taken apart by what each piece is: **dispatch**, the outermost
# `PjitFunction(step)`; the **completion wait**, the direct child the Python tracer names
# `...block_until_ready`; and **execution**, the `ThunkExecutor::Execute` events on the
# `tf_XLAExecute` threads (JAX 0.10 names them `tf_XLAPjRtCpuClient`), clipped to the
# region (they are not children: another thread).
# On an accelerator the execution is the device's own: the trace's `.xplane.pb` holds a
# plane per device (`/device:TPU:0`) whose `XLA Ops` line has one event per HLO operation
# run, read with `jax.profiler.ProfileData` (`coursekit.measure.device_trace`). The device
# keeps its own clock: its events are shifted onto the host's first (the smallest shift that
# puts each program run inside a region; printed below).

# %%
with not_yet("dispatch, wait and execution"):
    need(trace_file)
    # the reading, event by event: coursekit/notebook/dispatch_wait.py
    parts = dispatch_wait.breakdown(trace_file, REGION, on_device=ON_DEVICE)
    med = dispatch_wait.show(parts, LABEL, on_device=ON_DEVICE)

# %% [markdown]
# The check of this reading, computed from the trace. Every step holds a completion wait
# (it was synchronised inside its annotation), its execution began only after dispatch began
# (work cannot run before it is sent), and its execution ended before the wait ended (the
# wait returns only once the result exists). Whether the wait or the dispatch took longer is
# then counted, not assumed: a step where dispatch is the larger is a blocked host, not
# compute.
# On an accelerator the device's events were placed on the host clock by a shift estimated
# from those same regions, so their order against dispatch is not evidence there: what is
# checked is that every step holds a wait and ran on the device.

# %%
# The two threads record their own end times; 0.5 ms allows one of them to be descheduled
# between finishing and writing its end (the measured slack was always the other way round).
ORDER_SLACK_US = 500.0
with not_yet("dispatch, then execution, inside the wait"):
    need(trace_file)
    for i, row in enumerate(parts):
        assert row["wait_us"] > 0, (
            f"step {i} has no block_until_ready child: synchronise inside the TraceAnnotation")
        assert row["execution_start"] is not None, f"step {i}: no execution event in the trace"
        if not ON_DEVICE:
            assert row["execution_start"] >= row["dispatch_start"], (i, row)
            assert row["execution_end"] <= row["wait_end"] + ORDER_SLACK_US, (i, row)
    waits_largest = sum(row["largest"] == "wait" for row in parts)
    print(("every step held a completion wait and device operations (their order against "
           "dispatch is not read across the two clocks)" if ON_DEVICE else
           "every step: dispatch began, then execution ran on its own thread and ended inside "
           "the completion wait")
          + f". The wait took longer than the dispatch in {waits_largest} of "
          f"{len(parts)} steps; median wait / median dispatch = "
          f"{med['wait_us'] / max(med['dispatch_us'], 1e-9):.1f}x ({LABEL})")

# %% [markdown]
# ### The timeline of one step
#
# The last annotated step, every thread that has events in it (the profiler's own
# `ThreadpoolListener` bookkeeping events are left out). The Python thread holds the region
# and the nested `PjitFunction` events; XLA's threads hold the op events (`hlo_op` in their
# args). On an accelerator the device's operations get a row of their own, shifted onto the
# host clock as above (the JSON's own device rows, on the device's clock, are left out).

# %%
with not_yet("timeline"):
    need(trace_file)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    trace_timeline.timeline(ax, trace_file, REGION, f"One {REGION}: red region, orange "
                            "PjitFunction, blue XLA op events", LABEL, on_device=ON_DEVICE)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### The same region in XProf
#
# `jax.profiler.trace` writes two files from one recording: the `*.trace.json.gz` you parsed
# and `*.xplane.pb`, which XProf (pinned by the course) reads. In a terminal, `make xprof`
# serves your traces on <http://127.0.0.1:8791>: pick the run, the *Trace Viewer* tool, type
# `train_step` in *Find Events*, and step through the matches; the panel below the timeline
# gives each one's wall duration and self time. (Perfetto UI, <https://ui.perfetto.dev>, opens
# the `*.trace.json.gz` too.) Below, XProf's own converter reads the `.xplane.pb` here, and
# its region durations are set beside your parse of the JSON: two parsers, two files, one run.

# %%
in_xprof = None
with not_yet("the region in XProf"):
    need(trace_file, summary)
    from coursekit.measure import xprof_trace
    in_xprof = xprof_trace.compare_region(trace_file, REGION)
    print(f"{REGION} in {shown(Path(trace_file).name)}: {len(in_xprof['ours'])} event(s), "
          f"{sum(in_xprof['ours']) / 1e3:.3f} ms; in XProf's reading of "
          f"{Path(in_xprof['xplane']).name}: {len(in_xprof['xprof'])} event(s), "
          f"{sum(in_xprof['xprof']) / 1e3:.3f} ms; your summarize_region: "
          f"{summary['count']} event(s), {summary['total_us'] / 1e3:.3f} ms")
    print("mismatches:", in_xprof["mismatches"] or "none (durations equal within "
          f"{xprof_trace.DURATION_TOLERANCE_US} us)")
    gpu_tools = {t: xprof_trace.tool_rows(in_xprof["xplane"], t) for t in xprof_trace.GPU_TOOLS}
    print("XProf's op-level tools on this trace (rows or programs listed):", gpu_tools,
          "-> all empty: no device plane in this trace" if not any(gpu_tools.values())
          else "-> device planes present")
    print("make xprof  # then open http://127.0.0.1:8791 (serves", RECORDS.resolve(), ")")

# %% [markdown]
# XProf's op-level tools read *device* planes. On a GPU or TPU trace, **op_profile** ranks
# the programs and ops by device time with each op's FLOP rate and memory bandwidth,
# **hlo_stats** lists every HLO op with its occurrences, self time and whether it was
# compute- or memory-bound, and **roofline_model** places each op against the device's
# measured peak FLOP/s and bandwidth (the picture notebook 03 builds by hand). A CPU trace
# has no device plane, so the counts printed above are what they give here; on CPU, the
# trace viewer is the XProf tool that has something to show.

# %% [markdown]
# ### Check stage 2
#
# The grader's `check.py --stage 2`. The trace checks (`trace_written_and_newest_found`,
# `region_summary_matches_checker`) belong to this notebook; the cost, peak and roofline
# checks of the same stage are built in notebook 03 and say *not yet* until then.

# %%
check2 = run_check("performance-audit", 2, IMPL)
trace_checks = {r["check_id"]: r["status"] for r in check2["results"]
                if r["check_id"] in ("trace_written_and_newest_found",
                                     "region_summary_matches_checker")}
print("trace part of stage 2:", trace_checks)


# %% [markdown]
# A walk-through of the reference's `write_trace`, `newest_trace_file` and `summarize_region`
# comes with your grading feedback once stage 2 has been graded (or ask your instructor).

# %% [markdown]
# ## Exercise: time covered by overlapping events
#
# Events on different threads overlap, so their durations do not add up to elapsed time.
# Write `covered_us(intervals)`: given `(start_us, end_us)` pairs in any order, possibly
# overlapping or nested, return the total time covered by at least one of them (the length
# of their union), as a float.

# %% nbgrader={"grade": false, "grade_id": "covered_us", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
def covered_us(intervals):
    ### BEGIN SOLUTION
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return float(total)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "covered_us_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
# The course's own helper that computes this exercise is refused here and when graded
# (coursekit/checking/forbidden.py, NOTEBOOK_RULES): the exercise is to compute it.
from coursekit.notebook.borrowed import refuse_borrowed as _refuse_borrowed

_refuse_borrowed("02_trace_reading", "covered_us")
for _iv, _want in (([], 0.0),
                   ([(0, 10)], 10.0),
                   ([(0, 10), (5, 15)], 15.0),          # overlap counted once
                   ([(0, 10), (2, 3)], 10.0),           # nested
                   ([(20, 30), (0, 10)], 20.0)):        # any order, with a gap
    _v = covered_us(_iv)
    assert type(_v) is float or type(_v) is int, \
        f"covered_us should return a plain float (float(...)), not {type(_v).__name__}"
    assert _v == _want, (_iv, _v, _want)
### BEGIN HIDDEN TESTS
# 20 cases of 12 intervals from a plain integer recurrence; each expected total was counted
# once on a unit grid (numpy) and is written here.
_seed = 11
for _want in (134, 163, 108, 136, 133, 132, 163, 140, 114, 125,
              135, 160, 183, 161, 167, 182, 126, 137, 147, 122):
    _iv = []
    for _ in range(12):
        _seed = (_seed * 1103515245 + 12345) % 2 ** 31
        _start = (_seed >> 16) % 200
        _seed = (_seed * 1103515245 + 12345) % 2 ** 31
        _iv.append((_start, _start + (_seed >> 16) % 40))
    _v = covered_us(_iv)
    assert (type(_v) is float or type(_v) is int) and _v == _want, (_iv, _v, _want)
### END HIDDEN TESTS

# %% [markdown]
# ## Why CPU per-op events are not op times, and the flag that splits the fusion
#
# By default XLA:CPU hands some dot-plus-elementwise chains of the MLP to a library fusion
# (`ynn_fusion` events); the other ops already show as events of their own (`dot`,
# elementwise fusions such as `multiply_add_fusion`). The XLA flag
# `--xla_cpu_experimental_ynn_fusion_type=` (empty value) turns the library fusion off, so
# the ops it held show as their own events too. How much that changes is counted below, not
# assumed: the op events of one step and their kinds, per setting. XLA flags are read when
# the backend starts, so each setting needs a fresh process: the cell below runs
# `coursekit.measure.op_events` twice with the same step, traced by your `write_trace`, once
# per setting (on an accelerator as CPU processes: the flag is XLA:CPU's, and this kernel
# holds the chip), and your `covered_us` gives the time the op events cover.
#
# Even then an op event is not the op's cost: XLA:CPU runs its thunks asynchronously, an
# event marks the thunk on one thread, and the arithmetic may run in a thread pool
# elsewhere. Compare each step's wall time with the sum of its op events and with the time
# they cover together.

# %% [markdown]
# ## Try a changed condition: per-op events on
#
# Before the cell below runs: **with the flag on, what fraction of the step's wall time will
# the op events cover together** (their union over the step's duration)? Write a number
# between 0 and 1.

# %% nbgrader={"grade": false, "grade_id": "prediction_op_coverage", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
PREDICTED_OP_COVERAGE = None  # a number between 0 and 1
### BEGIN SOLUTION
PREDICTED_OP_COVERAGE = 0.9
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "prediction_op_coverage_present", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
record_prediction("02_op_coverage_with_flag", PREDICTED_OP_COVERAGE, "fraction")
assert type(PREDICTED_OP_COVERAGE) is int or type(PREDICTED_OP_COVERAGE) is float, \
    "write a number as your prediction (a plain int or float, not a subclass)"

# %%
FLAG = "--xla_cpu_experimental_ynn_fusion_type="

def op_events(xla_flags):
    env = dict(os.environ, XLA_FLAGS=xla_flags)
    if ON_DEVICE:  # the flag is XLA:CPU's, and this kernel holds the chip: CPU processes
        env["JAX_PLATFORMS"] = "cpu"
    logdir = TRACE_ROOT / ("per-op" if xla_flags else "default")
    done = subprocess.run([sys.executable, "-m", "coursekit.measure.op_events",
                           "--impl", str(Path(IMPL).resolve()),
                           "--batch", str(BATCH), "--width", str(WIDTH), "--steps", str(STEPS),
                           "--logdir", str(logdir)],
                          capture_output=True, text=True, env=env, timeout=600)
    if done.returncode == NOT_WRITTEN:  # your write_trace writes the trace
        raise NotImplementedError(done.stderr.strip().splitlines()[-1])
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:])
    return json.loads(done.stdout.strip().splitlines()[-1])


# %%
# on an accelerator these are CPU processes beside the kernel that holds the chip
OP_LABEL = (f"CPU figure (fresh processes pinned to the CPU beside {LABEL})" if ON_DEVICE
            else LABEL)
# the traces are your write_trace's; the time the op events cover, your covered_us's
runs, coverage, op_counts = {}, {}, {}
with not_yet("op events of your write_trace's traces") as op_run:
    runs = {"default": op_events(""), "flag on": op_events(FLAG)}
    for name, run in runs.items():
        s = run["steps"][-1]
        covered = covered_us([(o["start_us"], o["start_us"] + o["dur_us"]) for o in s["ops"]])
        coverage[name] = covered / s["wall_us"]
        kinds = sorted({o["name"].split(".")[0] for o in s["ops"]})
        print(f"{name:8s} step {s['wall_us'] / 1e3:8.2f} ms | {len(s['ops']):3d} op events on "
              f"{s['threads']} thread(s) | summed {s['sum_us'] / 1e3:8.2f} ms | covered "
              f"{covered / 1e3:8.2f} ms = {coverage[name]:.2f} of the step")
        print(f"         op kinds: {', '.join(kinds)}")
    op_kinds = {name: {o["name"].split(".")[0] for o in run["steps"][-1]["ops"]}
                for name, run in runs.items()}
    op_counts = {name: len(run["steps"][-1]["ops"]) for name, run in runs.items()}
    print(f"op events in one step: {op_counts['default']} by default, {op_counts['flag on']} "
          f"with the flag; kinds by default besides ynn_fusion: "
          f"{', '.join(sorted(op_kinds['default'] - {'ynn_fusion'})) or 'none'}; only with "
          f"the flag: {', '.join(sorted(op_kinds['flag on'] - op_kinds['default'])) or 'none'}"
          f"; only by default: "
          f"{', '.join(sorted(op_kinds['default'] - op_kinds['flag on'])) or 'none'}")
    compare_prediction("02_op_coverage_with_flag", PREDICTED_OP_COVERAGE,
                       coverage["flag on"], "fraction")
    print(OP_LABEL)

# %%
with not_yet("sum vs covered with your covered_us"):
    need(op_run)
    s = runs["flag on"]["steps"][-1]
    mine = covered_us([(o["start_us"], o["start_us"] + o["dur_us"]) for o in s["ops"]])
    print(f"your covered_us: {mine / 1e3:.3f} ms; summed durations {s['sum_us'] / 1e3:.3f} ms; "
          f"step wall time {s['wall_us'] / 1e3:.3f} ms")
if runs:  # the traces your write_trace wrote
    fig, axes = plt.subplots(2, 1, figsize=(9, 4.5), sharex=True)
    for ax, (name, run) in zip(axes, runs.items()):
        s = run["steps"][-1]
        threads = sorted({o["thread"] for o in s["ops"]})
        for o in s["ops"]:
            row = threads.index(o["thread"])
            ax.broken_barh([(o["start_us"] / 1e3, o["dur_us"] / 1e3)], (row - 0.4, 0.8),
                           color="tab:blue", edgecolor="black", linewidth=0.3)
        ax.axvline(s["wall_us"] / 1e3, color="tab:red", ls="--", label="end of the step")
        ax.set_yticks(range(len(threads)), [t[:24] for t in threads], fontsize=7)
        ax.set_title(f"{name}: op events of one step", fontsize=9)
        ax.legend(fontsize=7, loc="upper right")
    axes[-1].set_xlabel("time since the step's region began (ms)")
    fig.suptitle(OP_LABEL, fontsize=8)
    fig.tight_layout()
    plt.show()


# %% [markdown]
# Read the two panels side by side: which op events appear with each setting, how much of
# the step they cover, and how their summed durations compare with the wall time. An op
# event's duration is the time its thunk was visible on one thread, not the op's cost: on
# CPU, use it to find *which* ops run and in what order, and measure cost with
# synchronised timing of the whole step (notebook 01).

# %% [markdown]
# ## Diagnose a likely failure: a child longer than its parent
#
# **Symptom.** A summary says the jitted function took longer than the whole step.
# **What to check next:** (1) were nested events added (an event inside another on the same
# thread is the same time again)? (2) were events from *other* threads counted as children
# (they run concurrently)? (3) was the trace the newest one (every `jax.profiler.trace`
# adds a folder; a stale trace holds another run)? (4) was the step synchronised inside
# its annotation (otherwise the region ends at dispatch)?
#
# The planted failure, reproduced: a "children" total built by adding every event inside
# the region.

# %%
def children_by_adding_everything(path, region):     # the planted failure
    return everything_inside(path, region)

with not_yet("the planted failure"):
    need(trace_file, summary)
    wrong = children_by_adding_everything(trace_file, REGION)
    print(f"planted: children add up to {wrong / 1e3:.3f} ms, region total "
          f"{summary['total_us'] / 1e3:.3f} ms -> self time "
          f"{(summary['total_us'] - wrong) / 1e3:.3f} ms"
          f" ({'negative: impossible' if wrong > summary['total_us'] else 'suspicious'})")

# %% [markdown]
# The fix: count direct children only (your `summarize_region`), on the region's own thread,
# from the newest trace.

# %%
with not_yet("the fix"):
    need(trace_file, summary)
    fixed = impl.summarize_region(str(impl.newest_trace_file(str(TRACE_ROOT))), REGION)
    print(f"fixed: direct children {fixed['child_us'] / 1e3:.3f} ms of "
          f"{fixed['total_us'] / 1e3:.3f} ms,"
          f" self time {fixed['self_us'] / 1e3:.3f} ms (non-negative: {fixed['self_us'] >= 0})")

# %% [markdown]
# ## Provenance: the step's timing, recorded
#
# A trace locates time; a synchronised timing measures it (notebook 01). The same step, timed
# with your `time_fn` from notebook 01 (first call apart, every sample synchronised inside
# its boundary) after its output was checked against op-by-op JAX, goes to MLflow with its
# configuration, environment fingerprint, raw samples and the trace breakdown above.

# %%
from coursekit.notebook.cells import log_measurement

with jax.disable_jit():
    loss_op_by_op = float(step(params, x)[0])
loss_ok = bool(np.isclose(float(step(params, x)[0]), loss_op_by_op, rtol=1e-5))
step_timing = attempt(impl.time_fn, step, params, x, warmup=2, iters=max(STEPS, 5))
step_run = log_measurement(
    "02 MLP train step", {"workload": "two-layer MLP SGD step", "batch": BATCH,
                          "width": WIDTH, "dtype": str(x.dtype)},
    step_timing, check="jitted loss equals op-by-op JAX (rtol 1e-5)", ok=loss_ok,
    notebook="02_trace_reading",
    metrics={f"trace_median_{k}": v for k, v in med.items()} if trace_file else None)
print(LABEL)

# %% [markdown]
# ## Decide what is ready
#
# The evidence of this stage's trace part, computed from the cells above:

# %%
evidence = {
    "trace checks of stage 2": trace_checks,
    "region occurrences found / steps run": (f"{summary['count']} / {STEPS}" if summary
                                             else "not yet"),
    "direct children / region total": (f"{summary['child_us'] / summary['total_us']:.2f}"
                                       if summary else "not yet"),
    "op coverage of a step, default / flag on": (" / ".join(f"{v:.2f}" for v in
                                                            coverage.values()) or "not yet"),
    "wait longer than dispatch (steps)": (f"{waits_largest} / {len(parts)}"
                                                 if trace_file else "not yet"),
    "XProf agrees with the JSON parse": ((not in_xprof["mismatches"]) if in_xprof else
                                         "not read (see its cell)") if trace_file
                                        else "not yet",
    "op events per step, default / flag on": (f"{op_counts['default']} / "
                                              f"{op_counts['flag on']}" if op_counts
                                              else "not yet"),
    "MLflow run of the timed step": step_run["status"] if step_run else "not recorded",
}
for k, v in evidence.items():
    print(f"{k:42s} {v}")
print(LABEL)

# %% [markdown]
# **Your decision.** One accept/reject statement: *can this trace evidence explain where the
# step's time goes?* Say what it does show (the region, its direct children, the host-side
# self time, dispatch vs the completion wait vs the execution threads) and what a CPU trace
# cannot show (per-op cost, anything about an accelerator).

# %% [markdown] nbgrader={"grade": true, "grade_id": "decision_02", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# Accept for *locating* time, reject for *costing ops*. The region appears once per step, its
# direct children account for most of it with a small non-negative self time, and nested
# events are counted once. The work runs on the execution thread and the Python thread waits
# for it in `block_until_ready`; the jitted call itself is dispatch, host-side time, so "time
# in the jitted call" is not compute time (the breakdown counts the steps where dispatch was
# longer than the wait: a loaded host). The per-op events (flag on) show which
# ops run but cover only part of the step and their durations are not op costs on CPU; op
# costs come from synchronised timing and the compiler's counts (notebook 03). All of it is
# a CPU trace.

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
from coursekit.notebook.cells import (
    RECORDS,
    compare_prediction,
    cpu_label,
    record_prediction,
    run_check,
)
from coursekit.notebook.guard import attempt, load_learner, need, not_yet
from coursekit.notebook.plots import titled

impl = load_learner(IMPL)
LABEL = cpu_label()
REGION = "train_step"
TRACE_ROOT = Path(TRACE_DIR) if TRACE_DIR else RECORDS / "traces" / "02_trace_reading"
TRACE_ROOT.mkdir(parents=True, exist_ok=True)
print(LABEL)
print("implementation under test:", IMPL)
print("traces go to:", TRACE_ROOT)

# %% [markdown]
# ## Check your starting point
#
# **Question.** In a trace, the annotated region `train_step` lasts *T*. Directly inside it
# sits an event `PjitFunction(step)` lasting *P*, and inside *that* another
# `PjitFunction(step)`, also lasting about *P*. How long did the step spend in the jitted
# call: (a) about *P*; (b) about *2P*; (c) cannot tell without the XLA op events? Answer and
# say why in the cell below, then open the reasoning.

# %% [markdown] nbgrader={"grade": true, "grade_id": "starting_point_02", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# (a) about *P*. The second `PjitFunction(step)` is nested inside the first on the same
# thread: it is the same interval of time seen by two layers of the runtime. Adding nested
# events counts the same time twice; only direct children of the region add up.

# %% [markdown]
# <details><summary>Reasoning (open after answering)</summary>
#
# Events on one thread form a tree: an event that starts and ends inside another is its
# child. Time is additive only across siblings. The region's *self time* is its duration
# minus the summed durations of its *direct* children. JAX's `PjitFunction(...)` appears
# nested in itself under an annotation, so a sum over every event inside the region
# overcounts. Events on *other* threads (XLA's worker threads) overlap the region in time
# but are not its children: they run concurrently.
# </details>

# %% [markdown]
# ## Build in stages · stage 2 (trace part): write a trace, find the region
#
# The workload: one jitted training step of a two-layer MLP (`gelu`, mean squared output,
# an SGD update). Your `write_trace` compiles first, then runs `STEPS` steps under
# `jax.profiler.trace`, each inside `jax.profiler.TraceAnnotation(REGION)` and synchronised
# *inside* the annotation (otherwise the region ends before the work does).

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
    print("write_trace returned:", trace_file)
    print("newest trace file:   ", newest)
    for p in sorted(Path(newest).parent.iterdir()):
        print(f"  {p.name:40s} {p.stat().st_size / 1024:8.1f} KiB")
    print(f"{len(list(TRACE_ROOT.glob('plugins/profile/*')))} timestamped folder(s) under "
          f"{TRACE_ROOT}/plugins/profile/: every trace adds one, so take the newest")

# %% [markdown]
# Your `summarize_region` reads the Chrome trace JSON (complete events: `ph == "X"`, `ts`
# and `dur` in microseconds) and reports the region's count, total, *direct* children and
# self time. Beside it, the wrong answer on purpose: every event inside the region added up,
# nested ones included.

# %%
summary = attempt(impl.summarize_region, trace_file, REGION)
with not_yet("region summary"):
    need(summary)
    print(f"{REGION}: {summary['count']} occurrence(s), total {summary['total_us'] / 1e3:.2f} ms")
    for name, us in sorted(summary["children"].items(), key=lambda kv: -kv[1]):
        print(f"  direct child {name:45s} {us / 1e3:9.3f} ms")
    print(f"  children together {summary['child_us'] / 1e3:.3f} ms, "
          f"self time {summary['self_us'] / 1e3:.3f} ms")
    additive = traces.descendant_sum(trace_file, REGION)
    print(f"every nested event added up: {additive / 1e3:.3f} ms = "
          f"{additive / summary['total_us']:.2f}x the region itself ({LABEL})")


# %% [markdown]
# ### The timeline of one step
#
# The last annotated step, every thread that has events in it (the profiler's own
# `ThreadpoolListener` bookkeeping events are left out). The Python thread holds the region
# and the nested `PjitFunction` events; XLA's threads hold the op events (`hlo_op` in their
# args).

# %%
def timeline(ax, path, region, title):
    events = traces.load_events(path)
    names = traces.thread_names(events)
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    last = max((e for e in complete if e.get("name") == region), key=lambda e: e["ts"])
    t0, t1 = last["ts"], last["ts"] + last["dur"]
    shown = [e for e in complete if e["ts"] < t1 and e["ts"] + e["dur"] > t0
             and not e["name"].startswith("ThreadpoolListener")]
    threads = sorted({(e["pid"], e["tid"]) for e in shown},
                     key=lambda k: (names.get(k, "") != "python", names.get(k, "")))
    for row, key in enumerate(threads):
        for e in (e for e in shown if (e["pid"], e["tid"]) == key):
            is_op = "hlo_op" in (e.get("args") or {})
            colour = ("tab:red" if e["name"] == region else
                      "tab:orange" if e["name"].startswith("PjitFunction") else
                      "tab:blue" if is_op else "lightgray")
            ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (row - 0.4, 0.8),
                           color=colour, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(threads)), [names.get(k, str(k[1]))[:28] for k in threads],
                  fontsize=7)
    ax.set_xlabel("time since the step's region began (ms)")
    titled(ax, title, LABEL)

with not_yet("timeline"):
    need(trace_file)
    fig, ax = plt.subplots(figsize=(9, 3.5))
    timeline(ax, trace_file, REGION, f"One {REGION}: red region, orange PjitFunction, "
             "blue XLA op events")
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### Open the same trace in Perfetto UI and in XProf (on your own machine; not run in CI)
#
# * **Perfetto UI**: open <https://ui.perfetto.dev>, choose *Open trace file* and pick the
#   `*.trace.json.gz` printed above (Perfetto reads Chrome JSON traces). Or trace with
#   `jax.profiler.trace(logdir, create_perfetto_trace=True)`, which also writes
#   `perfetto_trace.json.gz` for upload. Find `train_step` with the search box (`/`), click it,
#   and read its duration and its children in the bottom panel.
# * **XProf**: `pip install xprof`, then `xprof --logdir <TRACE_ROOT> --port 8791` and open
#   <http://localhost:8791>; the *Trace Viewer* tool shows the same timeline. XProf's op-level
#   tools are empty or fail on CPU traces: use the trace viewer.
#
# The cell below prints the exact paths for this run.

# %%
with not_yet("paths to open"):
    need(trace_file)
    print("Perfetto UI, open this file:", Path(trace_file).resolve())
    print(f"XProf: xprof --logdir {TRACE_ROOT.resolve()} --port 8791")

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
assert covered_us([]) == 0.0
assert covered_us([(0, 10)]) == 10.0
assert covered_us([(0, 10), (5, 15)]) == 15.0          # overlap counted once
assert covered_us([(0, 10), (2, 3)]) == 10.0           # nested
assert covered_us([(20, 30), (0, 10)]) == 20.0         # any order, with a gap
### BEGIN HIDDEN TESTS
_rng = np.random.default_rng(11)
for _ in range(20):
    _starts = _rng.integers(0, 200, 12)
    _iv = [(int(s), int(s + d)) for s, d in zip(_starts, _rng.integers(0, 40, 12))]
    _grid = np.zeros(260, bool)
    for _a, _b in _iv:
        _grid[_a:_b] = True
    assert covered_us(_iv) == float(_grid.sum()), (_iv, covered_us(_iv), _grid.sum())
### END HIDDEN TESTS

# %% [markdown]
# ## Why CPU per-op events are not op times, and the flag that splits the fusion
#
# By default XLA:CPU hands whole dot-plus-elementwise chains of an MLP to a library fusion,
# so the trace shows a few `ynn_fusion` events instead of one event per HLO op. The XLA flag
# `--xla_cpu_experimental_ynn_fusion_type=` (empty value) turns that fusion off, and the
# trace shows per-op events (`dot_general`, elementwise fusions). XLA flags are read when
# the backend starts, so each setting needs a fresh process: the cell below runs
# `coursekit.measure.op_events` twice with the same step, once per setting.
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
assert isinstance(PREDICTED_OP_COVERAGE, (int, float)), "write a number as your prediction"

# %%
FLAG = "--xla_cpu_experimental_ynn_fusion_type="

def op_events(xla_flags):
    env = dict(os.environ, XLA_FLAGS=xla_flags)
    logdir = TRACE_ROOT / ("per-op" if xla_flags else "default")
    done = subprocess.run([sys.executable, "-m", "coursekit.measure.op_events",
                           "--batch", str(BATCH), "--width", str(WIDTH), "--steps", str(STEPS),
                           "--logdir", str(logdir)],
                          capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-1500:])
    return json.loads(done.stdout.strip().splitlines()[-1])

runs = {"default": op_events(""), "flag on": op_events(FLAG)}
coverage = {}
for name, run in runs.items():
    s = run["steps"][-1]
    coverage[name] = s["covered_us"] / s["wall_us"]
    kinds = sorted({o["name"].split(".")[0] for o in s["ops"]})
    print(f"{name:8s} step {s['wall_us'] / 1e3:8.2f} ms | {len(s['ops']):3d} op events on "
          f"{s['threads']} thread(s) | summed {s['sum_us'] / 1e3:8.2f} ms | covered "
          f"{s['covered_us'] / 1e3:8.2f} ms = {coverage[name]:.2f} of the step")
    print(f"         op kinds: {', '.join(kinds)}")
compare_prediction("02_op_coverage_with_flag", PREDICTED_OP_COVERAGE, coverage["flag on"],
                   "fraction")
print(LABEL)

# %%
with not_yet("sum vs covered with your covered_us"):
    s = runs["flag on"]["steps"][-1]
    mine = covered_us([(o["start_us"], o["start_us"] + o["dur_us"]) for o in s["ops"]])
    print(f"your covered_us: {mine / 1e3:.3f} ms; summed durations {s['sum_us'] / 1e3:.3f} ms; "
          f"step wall time {s['wall_us'] / 1e3:.3f} ms")
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
fig.suptitle(LABEL, fontsize=8)
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
    total = 0.0
    for root in traces.build_forest(traces.load_events(path)):
        for ev in traces.walk([root]):
            if ev.name == region:
                total += sum(d.dur for d in traces.walk(ev.children))
    return total

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
    "op coverage of a step, default / flag on": " / ".join(f"{v:.2f}" for v in coverage.values()),
}
for k, v in evidence.items():
    print(f"{k:42s} {v}")
print(LABEL)

# %% [markdown]
# **Your decision.** One accept/reject statement: *can this trace evidence explain where the
# step's time goes?* Say what it does show (the region, its direct children, the host-side
# self time) and what a CPU trace cannot show (per-op cost, anything about an accelerator).

# %% [markdown] nbgrader={"grade": true, "grade_id": "decision_02", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# Accept for *locating* time, reject for *costing ops*. The region appears once per step, its
# direct children account for most of it with a small non-negative self time, and nested
# events are counted once. The per-op events (flag on) show which ops run but cover only part
# of the step and their durations are not op costs on CPU; op costs come from synchronised
# timing and the compiler's counts (notebook 03). All of it is a CPU trace.

# ---
# jupyter:
#   course:
#     ci_parameters:
#       BATCH: 64
#       CHECK_STEPS: 6
#       ITERS: 10
#       ROUNDS: 2
#       SHAPES:
#       - 64
#       - 1024
#       SWEEP_ITERS: 6
#     kernel_platform: cpu
#     project: performance-audit
#     stages:
#     - 4
#     title: "08 \xB7 Readiness review"
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
# # 08 · Readiness review: accept or reject a performance change
#
# **Project:** performance-audit, stage 4 (*decide what is ready*), the capstone of the route.
# **You build** in `projects/performance-audit/starter/model.py`: `decide` and
# `predict_step_speedup` (`load_run` is given). The measurements come from your
# sharded-training stage 4, `profile_train_step`: run records with raw samples, the compile
# reported apart, a real profiler trace and the environment fingerprint.
#
# The change under review is a teammate's pull request on the data-parallel train step of
# notebook 05. You decide whether it is ready, from evidence, and you answer the route's four
# readiness questions from what this notebook measures.
#
# Every time here is a **CPU figure** on this machine, with *fake* CPU devices sharing its
# cores. What that can and cannot say is the last section of this notebook.

# %% tags=["parameters"]
# Parameters (papermill injects other values in CI; learners keep these).
IMPL = "../projects/performance-audit/starter/model.py"  # your performance-audit model.py
TRAINING_IMPL = None  # sharded-training model.py; None: the one beside IMPL (starter/solution)
BATCH = 64            # global batch (rows) of the measured step (notebook 05's); a multiple of 8
ITERS = 20            # timed steps per block
ROUNDS = 4            # alternating blocks per variant (before, after, after, before, ...)
SHAPES = [64, 1024, 16384]  # batch sizes: "does it hold, where does it stop helping"
SWEEP_ITERS = 10      # timed steps per block in that sweep
CHECK_STEPS = 6       # training steps compared for equal results (crosses a padded batch)

# %%
import os

from coursekit.facts import use_cpu_devices

DEVICES = 8  # fake CPU devices, as in notebook 05; must be set before jax starts
use_cpu_devices(DEVICES, cpu_only=False)  # any earlier device count is replaced
# This kernel measures on the CPU's fake devices even where an accelerator is present (JAX
# would take the chip and find one device); a chip stays free for the two-environment cell.
USER_PLATFORMS = os.environ.get("JAX_PLATFORMS")
os.environ["JAX_PLATFORMS"] = "cpu"

# %%
import hashlib
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import jax
import matplotlib.pyplot as plt
import numpy as np

from coursekit.measure import collectives as trace_collectives
from coursekit.notebook import claims, other_environment
from coursekit.notebook.cells import (
    RECORDS,
    compare_prediction,
    cpu_label,
    record_prediction,
    run_check,
    shown,
)
from coursekit.notebook.guard import NotYet, attempt, load_learner, need, not_yet
from coursekit.notebook.plots import plain_log, titled
from coursekit.provenance import records
from coursekit.provenance.compare import change_kind, fingerprint_diff, guarded_decide
from coursekit.workloads import capstone

# %%
impl = load_learner(IMPL)
TRAINING = (Path(TRAINING_IMPL) if TRAINING_IMPL
            else capstone.sibling_model(IMPL, "sharded-training"))
training = load_learner(TRAINING)
LABEL = cpu_label()
RUNS = RECORDS / "readiness" / time.strftime("%Y%m%d-%H%M%S")
RUNS.mkdir(parents=True, exist_ok=True)
if jax.device_count() < 2:
    print("warning: jax started with one device (it was imported before this cell set "
          "XLA_FLAGS): restart the kernel and run from the top")
print(LABEL)
print("performance-audit implementation:", IMPL)
print("sharded-training implementation: ", TRAINING)
print("run records and traces go to:      ", shown(RUNS))


# %% [markdown]
# ## Check your starting point
#
# **Question.** A pull request says: *"the train step is faster now: before, one number of
# milliseconds; after, a smaller one."* Before you merge it as a performance improvement,
# what must you see? Name at least three things, and one reason a true speedup measured on
# one machine might still not be ready. Write your answer below, then open the reasoning.

# %% [markdown] nbgrader={"grade": true, "grade_id": "starting_point_07", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# (1) Both timings waited for completion inside the timed boundary and reported the first
# call (compile) apart, with raw samples kept; (2) evidence of *why* it is faster: a trace
# event or cost estimate that names the bottleneck the change removes; (3) equal results
# (checked before timing), also at other shapes, and where the gain stops; (4) both runs in
# the same environment (same image, versions, flags, device count). A true speedup may still
# not be ready when it holds only at one shape, or only on this CPU (target measurement
# separate).

# %% [markdown]
# <details><summary>Reasoning (open after answering)</summary>
#
# Two numbers are a claim, not evidence. The route asks four questions of every claimed
# optimisation, and this notebook answers each from measurements:
#
# 1. **Did every timing wait for completion and separate compilation from steady execution?**
#    The run records say how each sample was synchronised, keep the first (compiling) call
#    apart and count compiles during the warmed calls.
# 2. **Which trace event (or memory-traffic estimate) supports the claimed bottleneck?** A
#    profiler trace of the same step shows where its time goes; the compiled program shows
#    what the change removes.
# 3. **Does the optimisation preserve results across changed shapes, and where does it stop
#    helping?** Equal parameters after several steps, at several batch sizes, including a
#    padded batch; then speedup against size and device count.
# 4. **Is it a model optimisation or an image/runtime change?** Every record carries the
#    environment fingerprint; a comparison across different fingerprints is refused.
#
# A change can pass all four on this machine and still need a target measurement: a CPU
# trace says nothing about an accelerator's interconnect or memory.
# </details>

# %% [markdown]
# ## Build in stages · stage 4: a before-and-after report
#
# ### The change under review
#
# The step of notebook 05 splits the batch's rows across the devices: each device computes
# its rows' share, and the step then all-reduces the valid count, the loss and the
# gradients, so every device waits for every other at each all-reduce. The pull request
# changes no line of the step: it hands *your* `make_train_step` the whole batch on every
# device (replicated) instead of rows split by your `place_batch`. Each device then computes
# the whole step itself and no all-reduce is left; the price is that every device does all
# the rows' work, eight times the arithmetic in all. Mathematically the same step (the
# loss is still the mean over the valid rows of the global batch); the claim is that
# dropping the communication is worth the repeated arithmetic
# (`coursekit.workloads.capstone`: `make_step` and `place`).
#
# ### Two run records
#
# Each variant is measured by *your* `profile_train_step` (sharded-training stage 4) on a
# freshly compiled step: first call alone (compile + run) with its loss checked against an
# independent reference (`capstone.reference_loss`: the contract's loss on one device, no
# learner code) *before*
# anything is timed, then warm-up, then `ITERS` synchronised samples, then a few steps under
# the profiler.
#
# Other work shares this machine, and its load drifts. Two blocks measured one after the
# other would put that drift into the comparison, so the variants are measured in `ROUNDS`
# alternating blocks (before, after, after, before, ...) and each variant's blocks are pooled
# into one record (`capstone.pool_records`: raw samples concatenated, each tagged with its
# round in `round_ids`, the first call and the trace from the block that compiled), so
# the decision can take the round as its unit of evidence. The records are written to disk
# and read back with `load_run`, as a reviewer receives them.

# %%
def measure(name, step, w, iters, *, variant="before", trace_steps=3, folder=RUNS):
    """One run record of ``step`` on workload ``w``'s batch as ``variant`` places it, by
    your profile_train_step, written to <folder>/<name>.json and read back with your
    load_run. A step that has not run yet compiles in its first call."""
    if "expected_loss" not in w:  # one independent reference per workload
        w["expected_loss"] = capstone.reference_loss(w)
    batch = w["batches"][variant]
    record = training.profile_train_step(step, w["state"], batch, str(RUNS / "traces" / name),
                                         region=capstone.REGION, iters=iters,
                                         trace_steps=trace_steps, expected_loss=w["expected_loss"])
    record["label"] = name
    return impl.load_run(str(records.write_run_record(folder / f"{name}.json", record)))

def measure_pair(w, iters, prefix="", trace_steps=3, rounds=ROUNDS):
    """Fresh before and after steps for workload ``w``, measured in ``rounds`` alternating
    blocks; each variant's blocks pooled into one record (RUNS/<prefix><variant>.json)."""
    fresh = {v: capstone.make_step(training, w["config"], v) for v in capstone.VARIANTS}
    blocks = {v: [] for v in capstone.VARIANTS}
    for r in range(rounds):
        for v in (capstone.VARIANTS if r % 2 == 0 else capstone.VARIANTS[::-1]):
            blocks[v].append(measure(f"{prefix}{v}-block{r}", fresh[v], w, iters, variant=v,
                                     trace_steps=trace_steps if r == 0 else 1,
                                     folder=RUNS / "blocks"))
    pooled = {}
    for v, got in blocks.items():
        path = records.write_run_record(RUNS / f"{prefix}{v}.json",
                                        capstone.pool_records(got, label=prefix + v))
        pooled[v] = impl.load_run(str(path))
    return pooled, fresh


# %%
work = attempt(capstone.workload, training, BATCH)
runs, steps = {}, {}
with not_yet("before and after records"):
    need(work)
    runs, steps = measure_pair(work, ITERS)
    for variant in runs:
        print(f"{variant:6s}: the batch {capstone.CHANGE[variant]}")
    for variant, r in runs.items():
        warm = np.median(r["samples_s"])
        print(f"{variant:6s}: first call {r['first_call_s'] * 1e3:8.1f} ms "
              f"({r['compiles_first_call']} compile(s)), warmed median {warm * 1e3:7.3f} ms over "
              f"{len(r['samples_s'])} samples in {r['pooled_blocks']} blocks "
              f"({r['compiles_warmed']} compiles), "
              f"output_ok={r['output_ok']}, sync={r['sync']}")
    print(LABEL)

# %% [markdown]
# ### What the compiled programs and the trace say
#
# First the static evidence: the all-reduce instructions in each compiled program (the steps
# just measured; nothing compiles again). Then the traces the records point at: in each
# annotated step, how long does one device spend inside each all-reduce?
# (`coursekit.measure.collectives` reads the thunk events, which name their HLO instruction.)
# The scalar all-reduce (`f32[]`) is the valid count; the other carries the gradients and the
# loss. The replicated step should hold none. With fake devices sharing two cores,
# a thread inside an all-reduce is mostly *waiting* at the rendezvous for the other device
# threads: the share below is time spent waiting there, not work the collective does.

# %%
hlo_ops, trace_split, count_ops = {}, {}, {}
count_share = None
with not_yet("the compiled programs and the traces"):
    need(work)
    if not runs:
        raise NotYet("no run records yet")
    for variant, r in runs.items():
        hlo_ops[variant] = trace_collectives.all_reduce_ops(steps[variant], work["state"],
                                                            work["batches"][variant])
        count_ops[variant] = [op for op, shape in hlo_ops[variant].items()
                              if shape.startswith("f32[]")]
        trace_split[variant] = trace_collectives.collective_time(
            r["trace"], r["region"], n_devices=r["fingerprint"]["devices"])
    for variant, split in trace_split.items():
        print(f"{variant:6s}: {len(hlo_ops[variant])} all-reduce(s) in the compiled step; "
              f"{split['step_us'] / 1e3:.3f} ms per step in the trace "
              f"({split['steps']} traced steps)")
        for op, share in split["share"].items():
            kind = "count (f32[])" if op in count_ops[variant] else "gradients + loss"
            print(f"          {op:16s} {kind:18s} {split['per_op_us'][op] / 1e3:7.3f} ms "
                  f"per device inside it (mostly waiting) = {share:5.1%} of the traced step")
    count_share = sum(trace_split["before"]["share"].values())
    print(f"a device spends {count_share:.1%} of the reference step inside its all-reduces, "
          f"mostly waiting at the rendezvous ({LABEL})")

# %%
with not_yet("plot of where the step's time goes"):
    need(work)
    if not trace_split:
        raise NotYet("no traces read yet")
    fig, ax = plt.subplots(figsize=(7, 3.2))
    names = list(trace_split)
    for i, variant in enumerate(names):
        split, left = trace_split[variant], 0.0
        for op, us in split["per_op_us"].items():
            is_count = op in count_ops[variant]
            ax.barh(i, us / 1e3, left=left, color="tab:red" if is_count else "tab:orange",
                    label="count all-reduce" if is_count else "gradient all-reduce")
            left += us / 1e3
        ax.barh(i, max(split["step_us"] / 1e3 - left, 0), left=left, color="tab:gray",
                label="everything else")
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("time per traced step, one device on average (ms)")
    ax.set_ylabel("variant")
    titled(ax, f"Where a train step's time goes (batch {BATCH}, {work['n_devices']} devices)",
           LABEL)
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), fontsize=7, loc="lower right")
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### The collective by itself
#
# Time spent waiting does not vanish with the collective: remove one all-reduce and the
# threads meet at the next one. What one all-reduce *costs* is measured apart, on the same
# mesh: a program with one scalar `psum` against the same program without it, in
# interleaved rounds (`coursekit.measure.collectives.collective_cost`, the round as the
# unit of evidence), then the same with 1 MiB per device. The two sizes
# give the communication roofline: a message of b bytes costs about latency + b / bandwidth,
# and below latency x bandwidth bytes the latency sets the cost.

# %%
comm, roof = {}, None
with not_yet("the collective measured alone"):
    need(work)
    for name, n in (("scalar", 1), ("1 MiB", 2**18)):
        c = comm[name] = trace_collectives.collective_cost(work["mesh"], n, rounds=2 * ROUNDS,
                                                           iters=ITERS)
        span = (f"[{c['ci_s'][0] * 1e6:+.1f}, {c['ci_s'][1] * 1e6:+.1f}] us" if c["ci_s"]
                else "no interval")
        print(f"{name:6s} psum, {c['bytes']} B per device ({c['all_reduces']['psum']} vs "
              f"{c['all_reduces']['local']} all-reduce in the two programs): with "
              f"{c['psum_median_s'] * 1e3:.3f} ms, without {c['local_median_s'] * 1e3:.3f} ms; "
              f"its cost {c['cost_s'] * 1e6:+.1f} us, 95% interval {span} over {c['rounds']} "
              "rounds: " + ("resolved" if c["resolved"] else
                            "the interval holds 0, below what this CPU can resolve"))
    roof = trace_collectives.comm_roofline(comm["scalar"], comm["1 MiB"])
    bw = roof["bandwidth_Bps"]
    print(f"latency {'' if roof['latency_resolved'] else 'at most '}"
          f"{roof['latency_bound_s'] * 1e6:.1f} us; bandwidth "
          + (f"{bw / 1e9:.2f} GB/s; latency-bound below {roof['ridge_bytes'] / 1e3:.0f} kB"
             if bw else "not resolved"))
    for variant, ops in hlo_ops.items():
        for op, shape in ops.items():
            p = trace_collectives.predicted_comm_s(trace_collectives.shape_bytes(shape), roof)
            print(f"  {variant:6s} {op:16s} {p['bytes']:7d} B per device: {p['bound']}-bound "
                  f"(bytes / bandwidth = {p['transfer_s'] * 1e6:.3f} us)")
    print(f"CPU threads meeting in memory, not an interconnect ({LABEL})")


# %% [markdown]
# Before you look at the timings: what would the whole step gain? Amdahl's law (your
# `predict_step_speedup`) twice: once on the traced share, as if the waiting were work that
# vanished, and once on what the all-reduces cost measured alone (the change removes every
# all-reduce of the step; at these sizes each is latency-bound, about one scalar
# all-reduce's cost). Both are ceilings: the arithmetic the change adds (every device
# computing all the rows) is in neither.

# %%
def removed_cost(scalar, n):
    """What ``n`` latency-bound all-reduces cost: ``n`` times the scalar one measured alone
    (its figure and interval)."""
    return {"cost_s": n * scalar["cost_s"],
            "ci_s": [n * v for v in scalar["ci_s"]] if scalar["ci_s"] else None}


def amdahl_ceiling(saving_s, step_s):
    """Your predict_step_speedup for removing ``saving_s`` of a ``step_s`` step; a saving
    as large as the step (an interval that wide, on a loaded machine) bounds nothing."""
    saving_s = max(saving_s, 0.0)
    return (math.inf if saving_s >= step_s else
            impl.predict_step_speedup(saving_s / step_s, math.inf))


predicted = predicted_upper = naive_ceiling = None
prediction_text = ""
with not_yet("Amdahl's prediction"):
    if count_share is None or not comm:
        raise NotYet("no trace or collective evidence yet")
    naive_ceiling = impl.predict_step_speedup(count_share, math.inf)
    step_s = float(np.median(runs["before"]["samples_s"]))
    removed_n = len(hlo_ops["before"]) - len(hlo_ops["after"])
    cost = removed_cost(comm["scalar"], removed_n)
    saving_hi = max(cost["ci_s"][1] if cost["ci_s"] else cost["cost_s"], 0.0)
    predicted = amdahl_ceiling(cost["cost_s"], step_s)
    predicted_upper = amdahl_ceiling(saving_hi, step_s)
    print(f"on the traced share ({count_share:.1%}, mostly waiting): {naive_ceiling:.3f}x; not a "
          "prediction, the waiting does not vanish")
    prediction_text = claims.collective_prediction(cost["cost_s"], cost["ci_s"], predicted,
                                                   predicted_upper)
    print(f"on the {removed_n} removed all-reduce(s)' own cost (of the {step_s * 1e3:.3f} ms "
          f"timed step), a ceiling without the added arithmetic: {prediction_text} ({LABEL})")

# %% [markdown]
# ### The decision
#
# `decide(before, after)` (yours) behind the fingerprint guard
# (`coursekit.provenance.compare.guarded_decide`): records from different environments are
# refused before any time is compared.

# %%
verdict = None
with not_yet("the decision on before vs after"):
    if not runs:
        raise NotYet("no run records yet")
    verdict = attempt(guarded_decide, runs["before"], runs["after"], impl.decide)
    need(verdict)
    print(f"decision: {verdict['decision'].upper()}")
    if verdict["ratio"] is not None and verdict["ci"]:
        print(f"speedup before / after = {verdict['ratio']:.3f}, 95% interval over the rounds "
              f"[{verdict['ci'][0]:.3f}, {verdict['ci'][1]:.3f}]")
    if predicted:
        print(f"from the collective's own cost: {prediction_text}")
    for reason in verdict["reasons"]:
        print("  -", reason)
    print(LABEL)

# %%
with not_yet("plot of the raw samples"):
    if not runs:
        raise NotYet("no run records yet")
    fig, ax = plt.subplots(figsize=(8, 3))
    rng = np.random.default_rng(0)
    for i, (variant, r) in enumerate(runs.items()):
        ms = np.asarray(r["samples_s"]) * 1e3
        ax.scatter(ms, i + rng.uniform(-0.15, 0.15, ms.size), s=14, alpha=0.7, label=variant)
        ax.plot([np.median(ms)] * 2, [i - 0.3, i + 0.3], color="black", lw=2)
    ax.set_yticks(range(len(runs)), list(runs))
    ax.set_xlabel("time per train step (ms); black bar: median")
    ax.set_ylabel("variant")
    titled(ax, f"Raw samples, batch {BATCH}", LABEL)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### The trace and the timing, side by side
#
# The traced steps (a few, under the profiler, from the first round) and the timed samples
# (every round) measure the same step. Their changes are compared here, and the change's
# predicted gain with what this measurement can resolve.

# %%
reconciled = {}
with not_yet("traced and timed step reconciled"):
    if not verdict or not verdict.get("ci") or predicted is None:
        raise NotYet("no decision with an interval, or no prediction, yet")
    traced = {v: trace_split[v]["step_us"] * 1e-6 for v in runs}
    timed = {v: float(np.median(runs[v]["samples_s"])) for v in runs}
    for v in runs:
        print(f"{v:6s}: traced step {traced[v] * 1e3:.3f} ms (mean of {trace_split[v]['steps']} "
              f"steps under the profiler), timed median {timed[v] * 1e3:.3f} ms "
              f"({len(runs[v]['samples_s'])} samples in {runs[v]['pooled_blocks']} rounds)")
    lo, hi = verdict["ci"]
    traced_ratio = traced["before"] / traced["after"]
    inside = lo <= traced_ratio <= hi
    print(claims.traced_vs_timed(traced["before"], traced["after"], timed["before"],
                                 timed["after"], verdict["ratio"], verdict["ci"]))
    resolution = math.sqrt(hi / lo) - 1  # half-width of the interval, relative
    gain_upper = predicted_upper - 1
    below = gain_upper < resolution
    reconciled = {"traced_ratio": traced_ratio, "inside": inside, "resolution": resolution,
                  "below_resolution": below, "gain_upper": gain_upper}
    spread = (f"+-{resolution:.1%}" if resolution < 1 else "more than a factor of 2 either way")
    if below:
        print(f"the change's predicted gain (at most {gain_upper:.2%}) is below what this CPU "
              f"can resolve: the timing interval [{lo:.3f}, {hi:.3f}] spans {spread}")
    else:
        print(f"the change's predicted gain (up to {gain_upper:.2%}) is within what this "
              f"measurement resolves ({spread})")
    if gain_upper < 0.05:
        print(f"it is also below the 5% minimum gain decide asks for: a correct decide rejects "
              f"it however quiet the machine ({LABEL})")

# %% [markdown]
# ### Check stage 4
#
# The same command the grader runs: `check.py --stage 4 --impl IMPL`. In your copy it runs
# the public cases stored in `projects/performance-audit/tests/expected/decisions.json`
# (numbers: run records and the verdict each must get); the grader adds cases drawn from
# seeds you do not see: a real speedup, noise that looks like one, identical programs
# measured in drifting rounds, a true 1.25x in drifting rounds, a slowdown, each decision
# boundary tried from both sides, a faster but wrong run, records that cannot be compared,
# and a small share made twice as fast.
#
# The contracts are the docstrings of `predict_step_speedup` and `decide` in `model.py`.
# Why the rounds and not the samples: resampling pooled samples treats 160 samples of 8
# rounds as 160 pieces of evidence, and on a drifting machine that claims differences
# between identical programs. A walk-through of the reference's stage 4 comes with your
# grading feedback once the stage has been graded (or ask your instructor).

# %%
check4 = run_check("performance-audit", 4, IMPL)

# %% [markdown]
# ## Try a changed condition: other shapes, one device
#
# ### Does it hold across shapes, and where does it stop helping?
#
# For each batch size in `SHAPES`: a record of each variant (its output checked before any
# timing), then both variants train `CHECK_STEPS` steps through the data order and their
# parameters are compared. The epoch holds four full batches and a last batch with three
# valid rows, so the comparison crosses a padded batch, where the valid count matters most.
# A speedup counts only where the results are equal: the before/after speedup with its
# interval over rounds (your `decide`), beside the ceiling predicted from the collectives'
# own cost (a fixed saving per step, while the arithmetic the change repeats on every device
# grows with the batch: where that passes the saving, the change stops helping).

# %%
TOLERANCE = 1e-4  # relative to each parameter array's scale, after several steps (rounding)
preserved, sweep, sweep_trend = {}, {}, ""
with not_yet("results and speed across shapes"):
    if not runs:
        raise NotYet("no run records yet")
    for b in SHAPES:
        if b == BATCH:
            w, pair, fresh = work, runs, steps   # measured above
        else:
            w = capstone.workload(training, b)
            pair, fresh = measure_pair(w, SWEEP_ITERS, prefix=f"b{b}-", trace_steps=1)
        finals = {v: capstone.train_steps(training, fresh[v], w, CHECK_STEPS, v)
                  for v in capstone.VARIANTS}
        diff = capstone.max_relative_difference(finals["before"][0]["params"],
                                                finals["after"][0]["params"])
        loss_diff = float(np.max(np.abs(np.subtract(finals["before"][1], finals["after"][1]))))
        preserved[b] = {"max_rel_param_diff": diff, "max_abs_loss_diff": loss_diff,
                        "equal": diff <= TOLERANCE}
        line = (f"batch {b:5d}: parameters differ by {diff:.1e} (of their scale), losses by "
                f"{loss_diff:.1e} after {CHECK_STEPS} steps -> ")
        if diff > TOLERANCE:
            print(line + f"DIFFERENT (tolerance {TOLERANCE:g}); speed not compared")
            continue
        s = attempt(guarded_decide, pair["before"], pair["after"], impl.decide)
        if not s:
            print(line + "equal; speed: your decide is not ready yet")
            continue
        sweep[b] = s
        pred = pred_text = None
        if comm:
            c = removed_cost(comm["scalar"], len(hlo_ops["before"]) - len(hlo_ops["after"]))
            b_step = float(np.median(pair["before"]["samples_s"]))
            c_hi = max(c["ci_s"][1] if c["ci_s"] else c["cost_s"], 0.0)
            pred, pred_hi = (amdahl_ceiling(v, b_step) for v in (c["cost_s"], c_hi))
            pred_text = claims.collective_prediction(c["cost_s"], c["ci_s"], pred, pred_hi)
        s["predicted"] = pred
        print(line + f"equal; speedup {claims.estimate_text(s['ratio'], s['ci'])} -> "
              f"{s['decision']}" + (f"; {pred_text}" if pred_text else ""))
    sweep_trend = claims.speedup_trend(sweep) if sweep else ""
    print(sweep_trend + f" ({LABEL})")


# %% [markdown]
# A tempting shortcut in the same spirit: treat every row as valid, padding included, so
# that the count would be the number of rows, a constant that needs no all-reduce. Here it
# is the "before" step measured above, handed each batch with its mask set to all ones (the
# padded rows then count as data).
# The output check in your `profile_train_step` runs it on the padded batch: the record it
# writes is a *failed* run, kept with the others. On a full batch the same code gives the
# reference's loss, which is why a check on full batches alone would let it through.

# %%
def make_all_rows_step(step):
    """The shortcut: ``step`` as given, told that every row of the batch is valid."""
    def shortcut(state, batch):
        return step(state, dict(batch, mask=jax.numpy.ones_like(batch["mask"])))
    return jax.jit(shortcut)

shortcut = {}
with not_yet("the shortcut on a padded and on a full batch"):
    need(work)
    padded = capstone.workload(training, BATCH, data_pos=4)
    rows_step = make_all_rows_step(capstone.make_step(training, padded["config"], "before"))
    shortcut = measure("shortcut-padded", rows_step, padded, ITERS, trace_steps=1)
    valid = int(np.asarray(padded["batch"]["mask"]).sum())
    print(f"padded batch ({valid} valid of {BATCH} rows): output_ok={shortcut['output_ok']}, "
          f"{len(shortcut['samples_s'])} timed samples")
    _, full_loss = rows_step(work["state"], work["batch"])
    expected_full = work.get("expected_loss") or capstone.reference_loss(work)
    print(f"full batch: loss {float(full_loss):.6f} vs reference {expected_full:.6f} "
          f"(relative difference {abs(float(full_loss) - expected_full) / abs(expected_full):.1e})")

# %% [markdown]
# ### One device
#
# On a one-device mesh no row is split, so neither program needs an all-reduce. **Predict**
# the speedup (median before / median after) of the change on one device before you measure
# it. Your prediction is stored and graded for being there, not for being right.

# %% nbgrader={"grade": false, "grade_id": "prediction_one_device", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
PREDICTED_ONE_DEVICE_SPEEDUP = None  # a number, e.g. 1.3
### BEGIN SOLUTION
PREDICTED_ONE_DEVICE_SPEEDUP = 1.0
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "prediction_one_device_present", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
record_prediction("08_one_device_speedup", PREDICTED_ONE_DEVICE_SPEEDUP, "x")
assert type(PREDICTED_ONE_DEVICE_SPEEDUP) is int or type(PREDICTED_ONE_DEVICE_SPEEDUP) is float, \
    "write a number as your prediction (a plain int or float, not a subclass)"

# %%
one_device = None
with not_yet("the change on one device"):
    w1 = capstone.workload(training, BATCH, n_devices=1)
    pair1, fresh1 = measure_pair(w1, ITERS, prefix="one-device-", trace_steps=1)
    ops1 = {v: len(trace_collectives.all_reduce_ops(fresh1[v], w1["state"], w1["batches"][v]))
            for v in capstone.VARIANTS}
    print("all-reduces in the one-device programs:", ops1)
    one_device = guarded_decide(pair1["before"], pair1["after"], impl.decide)
    compare_prediction("08_one_device_speedup", PREDICTED_ONE_DEVICE_SPEEDUP,
                       one_device["ratio"], "x")
    ci1 = one_device["ci"]
    print((f"interval [{ci1[0]:.3f}, {ci1[1]:.3f}]" if ci1 else "no interval")
          + f" -> {one_device['decision']} ({LABEL})")
    if one_device["decision"] != "reject" and not any(ops1.values()):
        print(f"caution: neither one-device program holds an all-reduce, so the mechanism of "
              f"the change is absent here; '{one_device['decision']}' means something else "
              "differs between the programs (or a rare false claim): re-run with more ROUNDS")

# %%
with not_yet("plot of speedup against batch size"):
    if not sweep:
        raise NotYet("no shape measured yet")
    fig, ax = plt.subplots(figsize=(7, 3.4))
    bs = sorted(sweep)
    ratios = np.array([sweep[b]["ratio"] for b in bs])
    lo = np.array([sweep[b]["ci"][0] if sweep[b]["ci"] else sweep[b]["ratio"] for b in bs])
    hi = np.array([sweep[b]["ci"][1] if sweep[b]["ci"] else sweep[b]["ratio"] for b in bs])
    ax.errorbar(bs, ratios, yerr=[ratios - lo, hi - ratios], fmt="o-", capsize=3,
                label=f"{work['n_devices']} devices (95% interval over rounds)")
    if all(sweep[b].get("predicted") for b in bs):
        ax.plot(bs, [sweep[b]["predicted"] for b in bs], "x--", color="tab:purple",
                label="predicted from the collective's own cost")
    if one_device and one_device["ratio"] is not None and one_device["ci"]:
        ax.errorbar([BATCH * 1.1], [one_device["ratio"]],
                    yerr=[[one_device["ratio"] - one_device["ci"][0]],
                          [one_device["ci"][1] - one_device["ratio"]]],
                    fmt="s", color="tab:green", capsize=3, label="1 device")
    ax.axhline(1.0, color="gray", ls="--", label="no change")
    ax.axhline(1.05, color="gray", ls=":", label="minimum gain decide() asks for")
    ax.axhline(1 / 1.05, color="gray", ls="-.", label="'slower' below this")
    plain_log(ax, "x")
    low, high = ax.get_ylim()
    clipped = low < 0.5 or high > 2.5
    ax.set_ylim(max(low, 0.5), min(high, 2.5))
    ax.set_xlabel("global batch (rows, log scale)")
    ax.set_ylabel("speedup: median before / after")
    title = "Where the change stops helping"
    titled(ax, title + (" (y axis clipped to 0.5-2.5)" if clipped else ""), LABEL)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ## Diagnose a likely failure: a speedup from the image, not the code
#
# **Symptom.** A teammate's record arrives from the CI machines' new image, offered as
# evidence for the change. Your `decide` compares shapes, dtypes, the sync method and the
# warm-up; they all agree, so it compares the times. **What to check next**, in order:
#
# 1. The environment fingerprint of both records: versions, backend, device count, XLA flags,
#    CPU. Any difference means the time difference may be the environment's.
# 2. Whether the code even differed (here it did not: the teammate measured the unchanged step).
# 3. Re-measure both variants in one environment, one process after the other.
#
# The planted failure, reproduced: the *unchanged* step measured in a fresh process whose
# runtime is configured differently (`XLA_FLAGS` of `OTHER_RUNTIME` asks for fewer host
# devices than `DEVICES`, as a new launcher might).

# %%
OTHER_RUNTIME = "--xla_force_host_platform_device_count=2"
teammate = None
with not_yet("the run from the other runtime"):
    if not runs:
        raise NotYet("no run records yet")
    out = RUNS / "teammate.json"
    env = dict(os.environ, XLA_FLAGS=OTHER_RUNTIME,
               PYTHONPATH=os.pathsep.join([str(capstone.ROOT), os.environ.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "coursekit.workloads.capstone", "--training-impl", str(TRAINING),
           "--variant", "before", "--batch", str(BATCH), "--iters", str(ITERS * ROUNDS),
           "--logdir", str(RUNS / "traces" / "teammate"), "--out", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if done.returncode == 3:  # the learner's sharded-training code is not finished
        raise NotYet(done.stderr.strip().splitlines()[-1].removeprefix("not yet: "))
    if done.returncode != 0:
        raise RuntimeError(f"the fresh-process run failed ({done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    teammate = impl.load_run(str(out))
    naive = impl.decide(runs["before"], teammate)
    def ratio_text(result):
        return "none" if result["ratio"] is None else f"{result['ratio']:.3f}"
    print(f"your decide() alone: {naive['decision'].upper()} (ratio {ratio_text(naive)})")
    print("fingerprint differences:")
    for line in fingerprint_diff(runs["before"], teammate):
        print("   ", line)
    guarded = guarded_decide(runs["before"], teammate, impl.decide)
    print(f"with the fingerprint guard: {guarded['decision'].upper()}, "
          f"refused={guarded['refused']}")
    flagged = guarded_decide(runs["before"], teammate, impl.decide, mode="flag")
    print(f"flag mode (decide runs, the result is marked): {flagged['decision'].upper()}; "
          f"measured ratio {ratio_text(flagged)}")


# %% [markdown]
# The fix is not a better statistic: it is measuring both variants in one environment. The
# *before* and *after* of the decision above share one fingerprint (compared below), which
# is why their comparison was allowed.

# %%
def fingerprint_id(fp):
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:10]

with not_yet("fingerprints of before and after"):
    if not runs:
        raise NotYet("no run records yet")
    same = fingerprint_diff(runs["before"], runs["after"])
    print(f"before {fingerprint_id(runs['before']['fingerprint'])}, after "
          f"{fingerprint_id(runs['after']['fingerprint'])}: "
          f"{'same environment' if not same else 'DIFFERENT: ' + '; '.join(same)}")

# %% [markdown]
# ### Two environments: another JAX, another backend
#
# The route asks: *how would you distinguish an image/runtime change from a model
# optimization in your benchmark?* The course answers before any time is compared: every
# run record carries its environment fingerprint (`environment_fingerprint()`: JAX and
# jaxlib versions, Python, backend, device count, XLA flags, CPU), and two records whose
# fingerprints differ are read as an environment change (`change_kind`) and never compared
# as a model change (`guarded_decide` refuses them). The cell below sets this notebook's
# *before* record beside one from another environment. On a machine with an accelerator
# that record is measured now: the same step in a fresh process whose JAX takes the chip
# (this kernel stays on the CPU), so the backend and the device count differ, while the JAX
# is the same install. On a CPU-only machine there is no second environment to measure, so
# the other record is planted, and said to be: this notebook's *after* record restamped
# with the fingerprint of the TPU v5e image the course was run on (JAX 0.10.2, Python
# 3.11.7, one TPU device, 13 cores).

# %%
other_env = None
with not_yet("records from two environments"):
    if not runs:
        raise NotYet("no run records yet")
    other_env, how, other_backend = other_environment.record(
        impl.load_run, runs["after"], training=TRAINING, batch=BATCH, iters=ITERS, runs=RUNS,
        user_platforms=USER_PLATFORMS)
    naive = impl.decide(runs["before"], other_env)
    kind = change_kind(runs["before"], other_env)
    guarded_other = guarded_decide(runs["before"], other_env, impl.decide)
    print(f"branch: {'accelerator' if other_backend != 'cpu' else 'cpu'}; the other record: "
          f"{how}")
    print(f"your decide() alone would say {naive['decision'].upper()} (ratio "
          + ("none" if naive["ratio"] is None else f"{naive['ratio']:.3f}") + ")")
    print(f"the course reads the pair as: {kind['sentence']}")
    print(f"with the fingerprint guard: {guarded_other['decision'].upper()}, "
          f"refused={guarded_other['refused']}; the before/after pair of this notebook: "
          f"{change_kind(runs['before'], runs['after'])['kind']} change, compared by decide")

# %% [markdown]
# ### Provenance: every notebook's measurements, read back from MLflow
#
# The before and after records go to MLflow like every other notebook's timings. Then the
# store is read back: for each measurement, its newest FINISHED run beside the earlier runs
# of the *same fingerprint* (configuration, sync and warm-up, backend, device, versions, XLA
# flags, CPU) only. Runs of another configuration are counted and the first difference
# named (`why_not_comparable`); FAILED and KILLED runs stay in the record and out of every
# comparison.

# %%
from coursekit.notebook.cells import log_measurement
from coursekit.provenance import tracking as mlruns

with not_yet("the records, in MLflow and back"):
    need(work)
    for variant, r in runs.items():
        log_measurement(f"08 capstone step {variant}",
                        {"workload": "capstone train step", "variant": variant,
                         "batch": BATCH, "iters": ITERS, "rounds": ROUNDS}, r,
                        check="first step's loss equals capstone.reference_loss",
                        notebook="08_readiness_review")
    stored = mlruns.runs()
    usable = [r for r in stored if r["status"] == "FINISHED" and "median_s" in r["metrics"]]
    print(f"{len(stored)} measurement run(s) in {mlruns.tracking_uri()}; "
          f"{sum(r['status'] != 'FINISHED' for r in stored)} not FINISHED (kept, compared "
          "with nothing)")
    newest = {}
    for r in usable:                       # newest first: the first of each name is its latest
        newest.setdefault(r["name"], r)
    for name, r in sorted(newest.items()):
        same = [o for o in mlruns.comparable_runs(usable, r)
                if o["name"] == name and o["run_id"] != r["run_id"]]
        other = [o for o in usable if o["name"] == name and o["fingerprint"] != r["fingerprint"]]
        line = f"{name[:44]:44s} {r['metrics']['median_s'] * 1e3:9.3f} ms"
        if same:
            earlier = float(np.median([o["metrics"]["median_s"] for o in same]))
            line += (f" | {len(same)} comparable earlier: median {earlier * 1e3:.3f} ms "
                     f"({r['metrics']['median_s'] / earlier:.2f}x)")
        if other:
            line += (f" | {len(other)} not comparable: "
                     f"{(mlruns.why_not_comparable(r, other[0]) or ['?'])[0]}")
        print(line)
    print(LABEL)


# %% [markdown]
# ## Decide what is ready
#
# ### Exercise: audit one run record
#
# Write `timing_evidence(record)`: from one run record return a dict of four booleans
# (plain `bool`):
#
# - `waited`: `sync` is `"block_until_ready"` or `"host_read"`;
# - `compile_apart`: `first_call_s` is a positive number, `compiles_first_call >= 1` and
#   `compiles_warmed == 0`;
# - `raw_samples`: `samples_s` is a list holding exactly `iters` samples, and `iters >= 5`;
# - `output_checked`: `output_ok is True`.
#
# The evidence table below uses it for every record of this notebook.

# %% nbgrader={"grade": false, "grade_id": "timing_evidence", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
def timing_evidence(record):
    ### BEGIN SOLUTION
    first = record.get("first_call_s")
    samples = record.get("samples_s")
    iters = record.get("iters")
    return {
        "waited": record.get("sync") in ("block_until_ready", "host_read"),
        "compile_apart": bool(isinstance(first, (int, float)) and not isinstance(first, bool)
                              and first > 0 and (record.get("compiles_first_call") or 0) >= 1
                              and record.get("compiles_warmed") == 0),
        "raw_samples": bool(isinstance(samples, list) and isinstance(iters, int)
                            and iters >= 5 and len(samples) == iters),
        "output_checked": record.get("output_ok") is True,
    }
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "timing_evidence_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
_good = {"sync": "block_until_ready", "first_call_s": 0.5, "compiles_first_call": 1,
         "compiles_warmed": 0, "samples_s": [0.01] * 10, "iters": 10, "output_ok": True}
_e = timing_evidence(dict(_good))
assert type(_e) is dict and len(_e) == 4, f"return a plain dict of the four verdicts: {_e!r}"
for _k in ("waited", "compile_apart", "raw_samples", "output_checked"):
    assert _k in _e and _e[_k] is True, (_k, _e)
assert timing_evidence(dict(_good, sync="none"))["waited"] is False
assert timing_evidence(dict(_good, compiles_warmed=2))["compile_apart"] is False
assert timing_evidence(dict(_good, output_ok=False, samples_s=[]))["raw_samples"] is False
### BEGIN HIDDEN TESTS
assert timing_evidence(dict(_good, output_ok=None))["output_checked"] is False
assert timing_evidence(dict(_good, compiles_first_call=0))["compile_apart"] is False
assert timing_evidence(dict(_good, first_call_s=None))["compile_apart"] is False
assert timing_evidence(dict(_good, samples_s=[0.01] * 9))["raw_samples"] is False
assert timing_evidence(dict(_good, iters=3, samples_s=[0.01] * 3))["raw_samples"] is False
assert timing_evidence(dict(_good, sync="host_read"))["waited"] is True
assert all(type(v) is bool for v in timing_evidence(dict(_good, output_ok=None)).values())
### END HIDDEN TESTS

# %% [markdown]
# ### The evidence, question by question
#
# Every record this notebook wrote, failed ones included, with its fingerprint; then the four
# readiness questions answered from the numbers above.

# %%
run_log = []
for path in sorted(RUNS.glob("*.json")):
    r = json.loads(path.read_text())
    run_log.append((path.stem, r))
audit_ready = bool(run_log) and bool(attempt(timing_evidence, run_log[0][1]))
print(f"{'run':26s} {'status':22s} {'devices':>7s} {'median ms':>9s} {'fingerprint':>11s}  audit")
for name, r in run_log:
    status = "ok" if r["output_ok"] else "FAILED (output check)"
    med = f"{np.median(r['samples_s']) * 1e3:9.3f}" if r["samples_s"] else f"{'-':>9s}"
    if audit_ready:
        missing = [k for k, v in timing_evidence(r).items() if not v]
        audit = "missing: " + ", ".join(missing) if missing else "all four"
    else:
        audit = "(timing_evidence not written yet)"
    print(f"{name:26s} {status:22s} {r['fingerprint']['devices']:>7} {med} "
          f"{fingerprint_id(r['fingerprint']):>11s}  {audit}")
print(LABEL)


# %%
def shown(value, spec=".3f"):
    return "not yet" if value is None else format(value, spec)

with not_yet("the four readiness questions, 1 and 2"):
    if not verdict:
        raise NotYet("no decision on before vs after yet")
    audits = {name: timing_evidence(r) for name, r in run_log if r["output_ok"]}
    q1 = bool(audits) and all(all(a[k] for k in ("waited", "compile_apart", "raw_samples"))
                              for a in audits.values())
    print("1. waited for completion, compile apart, raw samples kept: "
          + ("yes, in every successful record" if q1 else "NO: see the audit column above"))
    removed = [op for op in hlo_ops["before"] if op not in hlo_ops["after"]]
    scalar = comm.get("scalar")
    print(f"2. bottleneck evidence: the compiled programs hold {len(hlo_ops['before'])} vs "
          f"{len(hlo_ops['after'])} all-reduce(s) (removed: {removed}); a device spends "
          f"{count_share:.1%} of the traced step inside its all-reduces, mostly waiting; "
          + (f"measured alone one scalar all-reduce costs {scalar['cost_s'] * 1e6:+.1f} us ("
             + ("resolved" if scalar["resolved"] else "not resolved on this CPU") + "); "
             if scalar else "")
          + (prediction_text if predicted else "predicted: not yet")
          + f", measured {claims.estimate_text(verdict['ratio'], verdict['ci'])}"
          + ("; the predicted gain is below what this CPU can resolve"
             if reconciled.get("below_resolution") else ""))

# %%
with not_yet("the four readiness questions, 3 and 4"):
    if not verdict:
        raise NotYet("no decision on before vs after yet")
    equal = [b for b, p in preserved.items() if p["equal"]]
    helped = [b for b, r in sweep.items() if r["decision"] == "accept"]
    slower = [b for b, r in sweep.items() if r["decision"] == "slower"]
    stopped = [b for b, r in sweep.items() if r["decision"] == "reject"]
    shortcut_failed = bool(shortcut) and shortcut.get("output_ok") is False
    print(f"3. results equal (tolerance {TOLERANCE:g}) at batch sizes {equal} of "
          f"{list(preserved)}; the all-rows shortcut failed its output check on a padded batch: "
          f"{shortcut_failed}; clear gain at batch {helped or 'none'}, clearly slower at "
          f"{slower or 'none'}, no change of 5% detectable at {stopped or 'none'}; "
          + (sweep_trend + "; " if sweep else "") + "one device: "
          + (f"{one_device['decision']} (ratio {shown(one_device['ratio'])})" if one_device
             else "not measured"))
    fps = {fingerprint_id(r["fingerprint"]) for name, r in run_log if name != "teammate"}
    differs = fingerprint_diff(runs["before"], teammate) if teammate else []
    print(f"4. runtime vs model: this notebook's own records share {len(fps)} fingerprint(s); "
          f"the teammate's record differs in {len(differs)} field(s) "
          f"({', '.join(d.split(':')[0] for d in differs) or '-'}), so it was refused"
          + (f"; the other environment's record: {change_kind(runs['before'], other_env)['kind']}"
             " change, refused" if other_env else ""))
    print(f"decision on the change at batch {BATCH}: {verdict['decision'].upper()} ({LABEL})")
    print("recommendation: " + claims.readiness_recommendation(BATCH, verdict["decision"],
                                                               sweep))

# %% [markdown]
# ### Honest limits
#
# - Everything above is a **CPU measurement**, with fake devices that share this machine's
#   cores. An all-reduce here is threads meeting at a rendezvous; on accelerators it is an
#   interconnect transfer with its own bandwidth and latency. **CPU traces do not
#   characterise accelerator communication or memory**: the trace shows the collective on
#   this machine's critical path, not what it costs on a target.
# - Whether the change helps on the target is a **separate target measurement**: the same
#   records (`profile_train_step`), the same decision (`decide`), the same fingerprint guard,
#   made on the target hardware in one environment.
# - Timing noise on a shared machine is real: the decision rests on an interval over
#   interleaved rounds (paired, so drift a round shares cancels), not on one number or on
#   pooled samples, and a rerun may move a borderline case. With few rounds the interval is
#   wide: a small true effect can be below what this CPU can resolve.

# %% [markdown]
# **The four readiness questions, in your words.** Answer each from the evidence above (quote
# the printed lines you rely on):
# 1. Did every timing wait for completion and separate compilation from steady execution?
# 2. Which trace event (or memory-traffic estimate) supports the claimed bottleneck?
# 3. Does the optimisation preserve results across changed shapes, and where does it stop
#    helping?
# 4. How do you tell an image/runtime change from a model optimisation here?

# %% [markdown] nbgrader={"grade": true, "grade_id": "readiness_answers_07", "locked": false, "points": 4, "schema_version": 3, "solution": true, "task": false}
# 1. Yes: every successful record was synchronised inside its boundary (block_until_ready),
#    its first call (with its compile) is reported apart, no compile happened during warmed
#    calls, and all raw samples are kept (audit column: all four).
# 2. The compiled programs show no all-reduce left after the change (line 2 names those
#    removed). The trace's share inside the all-reduces is mostly threads waiting at the
#    rendezvous, so Amdahl on it is no prediction; the prediction comes from the scalar
#    all-reduce measured alone on the same mesh, once per removed all-reduce (its cost, and
#    whether this CPU resolved it, are printed in line 2), a ceiling that leaves out the
#    arithmetic every device now repeats; the traced and timed changes are compared above. Where
#    line 2 says the predicted gain is below what this CPU can resolve, no timing here can
#    confirm or refute the mechanism.
# 3. Line 3 lists the batch sizes where parameters are equal within the tolerance (across a
#    padded batch); the "every row valid" shortcut fails its output check there (and passes on
#    a full batch, so a full-batch check alone would miss it). The gain counts only at the
#    sizes line 3 lists under "clear gain"; the trend with the batch is the one line 3
#    prints, beside the predicted fixed saving per step (the repeated arithmetic grows
#    with the batch). On one device both variants place the batch the same way and neither
#    program has an all-reduce, so no gain is expected there.
# 4. Every record carries the environment fingerprint; the teammate's record differs (device
#    count, XLA flags), so its comparison is refused whatever its times say (decide() alone
#    would have compared them). Before and after share one fingerprint, so their difference
#    is the code's.

# %% [markdown]
# **Your decision.** One accept/reject statement on the pull request, backed by the evidence:
# accept or reject *for this machine*, the conditions (shapes, device counts) where it holds,
# and what must still be measured on the target before it ships.

# %% [markdown] nbgrader={"grade": true, "grade_id": "decision_07", "locked": false, "points": 3, "schema_version": 3, "solution": true, "task": false}
# Follow the printed recommendation line, which reads the decision at this batch and the
# decisions across batch sizes together. If it says ACCEPT: accept for data-parallel
# training on several devices at the batch sizes it names, with results equal within
# tolerance and the removed collectives named in the compiled programs. If it says REJECT
# with a size clearly slower: reject, and find out why before anything else. If it says
# REJECT with no size clearly slower: no gain of 5% is distinguishable from noise here (and
# where line 2 says so, the predicted gain is below what this CPU can resolve at all); only
# then is there nothing against keeping it, and nothing for it as an optimisation. Either way: CPU
# evidence only; measure on the target accelerator (same records, same decision, one
# environment) before claiming a speedup.

# ---
# jupyter:
#   course:
#     ci_parameters:
#       BW_BYTES: 67108864
#       ITERS: 3
#       KERNEL_N: 384
#       PEAK_N: 512
#       REST_ELEMS: 4194304
#       SWEEP_MAX_BYTES: 67108864
#     project: performance-audit
#     stages:
#     - 2
#     - 4
#     title: "03 \xB7 Roofline"
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
# # 03 · Roofline: what limits a workload on this machine
#
# **Project:** performance-audit, stage 2 (*explain the evidence*), roofline part, and the
# Amdahl part of stage 4. **You build** in `projects/performance-audit/starter/model.py`:
# `matmul_cost_by_hand`, `cost_from_compiler`, `measure_peak_flops`, `measure_bandwidth`,
# `cache_sizes`, `roofline`, and `predict_step_speedup`.
#
# Peak FLOP/s and bandwidth below are **measured on this machine's CPU** with jitted JAX
# code: attained figures of this host, not vendor peaks and not an accelerator's. The
# bandwidth is measured so that no sample pays for fresh memory pages (a new output array
# each call costs a minor page fault per 4 KiB page, which is not memory bandwidth), and
# the cache sizes come from this machine's sysfs, never from a constant.
#
# **On an accelerator** (this kernel's JAX computes on one) the same functions measure the
# chip instead: the peak in its fast dtype (bfloat16) at a size that fills it, HBM bandwidth
# over arrays of GiB, each beside a plain-JAX ceiling measured in the same run and the
# vendor's figure; the memory levels come from the chip (HBM and VMEM), not from the host's
# caches; and one workload's time is predicted from its compiler counts before it is
# measured. The first code cell prints which branch ran.

# %% tags=["parameters"]
# Parameters (papermill injects other values in CI; learners keep these).
IMPL = "../projects/performance-audit/starter/model.py"  # the implementation under test
PEAK_N = 1024              # matmul size for the peak FLOP/s measurement
BW_BYTES = None            # array size of the headline bandwidth; None: 4x the last-level cache
LLC_MULTIPLE = 4.0         # the working-set sweep runs to this many times the last-level cache
SWEEP_MAX_BYTES = None     # cap on the sweep's largest array (CI sets one); None: no cap
ITERS = 5                  # timed calls per measurement (best-of or median)
KERNEL_N = 512             # matmul size of the "kernel" in the Amdahl experiment
REST_ELEMS = 16 * 2**20    # float32 elements of the rest of that step
# On an accelerator only (sizes that fill a TPU v5e; a CPU run ignores them):
CHIP_PEAK_N = 8192         # bfloat16 matmul size of the chip's compute roof
CHIP_BW_BYTES = 2**30      # array size of the chip's HBM roofs
CHIP_ROUNDS = 3            # rounds of the plain-JAX ceiling, your function called between
CHIP_MLP = [8192, 4096, 16384]  # batch, width, hidden of the predicted bfloat16 workload

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from coursekit.checking.graded import instructor_module
from coursekit.compat import compiled_plan
from coursekit.measure import bandwidth as bwm
from coursekit.measure import chips
from coursekit.measure.timing import count_compiles, time_synced
from coursekit.notebook import chip_roofline, claims
from coursekit.notebook import roofline_tables as tables
from coursekit.notebook.cells import (
    RECORDS,
    compare_prediction,
    cpu_label,
    record_prediction,
    run_check,
)
from coursekit.notebook.guard import attempt, load_learner, need, not_yet, ready
from coursekit.notebook.plots import plain_log, titled
from coursekit.notebook.timed_by_yours import threaded, timed_by_yours

ceilings = instructor_module("ceilings")  # plain-JAX ceilings: the course's, instructor-only

# %%
impl = load_learner(IMPL)
LABEL = cpu_label()
MiB = 2**20
DEVICE = jax.devices()[0]
ON_CHIP = jax.default_backend() != "cpu"  # this kernel's JAX computes on an accelerator
SYS_CACHES = attempt(impl.cache_sizes)      # your sysfs reading (stage 2) sizes the arrays
LLC = max(SYS_CACHES.values(), default=32 * MiB) if ready(SYS_CACHES) else 32 * MiB
if not ready(SYS_CACHES):
    SYS_CACHES = {}
    print("(until your cache_sizes is written, the arrays assume a 32 MiB last-level cache)")
CHIP_LEVELS, SPEC = {}, {}
if ON_CHIP:
    CHIP_LEVELS = chips.memory_levels(DEVICE)   # HBM from memory_stats, VMEM from Pallas
    SPEC = chips.spec(DEVICE.device_kind) or {}
    BW_BYTES = CHIP_BW_BYTES
elif BW_BYTES is None:
    BW_BYTES = int(LLC_MULTIPLE * LLC) // MiB * MiB
print(LABEL)
print("implementation under test:", IMPL)
tables.show_branch(ON_CHIP, device_kind=DEVICE.device_kind, chip_levels=CHIP_LEVELS,
                   spec=SPEC, bw_bytes=BW_BYTES, llc=LLC)

# %% [markdown]
# ## Check your starting point
#
# **Question.** Two jitted float32 workloads on the same machine: `x * 2 + 1` over a
# vector much larger than the last-level cache, and a large square matmul. Which one is
# limited by memory bandwidth, which by arithmetic, and what single number of each workload
# decides it? Answer in the cell below, then open the reasoning.

# %% [markdown] nbgrader={"grade": true, "grade_id": "starting_point_03", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# The elementwise op is memory-bound, the large matmul compute-bound. The deciding number
# is the arithmetic intensity (FLOPs per byte moved), compared with the machine's ridge
# point (peak FLOP/s divided by bandwidth).

# %% [markdown]
# <details><summary>Reasoning (open after answering)</summary>
#
# `x * 2 + 1` does a couple of FLOPs per element and moves several bytes per element: its
# intensity is a fraction of a FLOP per byte, far below any machine's ridge point, so
# bandwidth sets its speed. An n x n matmul does work that grows as n³ on data that grows
# as n²: its intensity grows with n and passes the ridge point, so arithmetic sets its
# speed. The memory roof that counts is the one of the level the working set lives in.
# (The exact counts and the roofline's arithmetic are yours to derive: the docstrings in
# `model.py` state what each function must return.)
# </details>

# %% [markdown]
# ## Build in stages · stage 2 (roofline part)
#
# ### This machine's two roofs
#
# **Compute.** Your `measure_peak_flops` (a compiled, synchronised float32 matmul, best of
# several) is the *attained* peak. Beside it, a *theoretical* peak from the CPU's flags:
# cores x clock x float32 FLOP per cycle, with its assumptions stated.
#
# **Memory.** Your `measure_bandwidth` three ways on the same array: `x * 2 + 1` written in
# place (input donated), a read-dominated `jnp.sum`, and `x * 2 + 1` into a fresh output
# each call. Each sample records the minor page faults it caused.

# %% [markdown]
# On an accelerator the cell below measures the chip instead. Your `measure_peak_flops` in
# bfloat16 at `CHIP_PEAK_N` and your `measure_bandwidth` (`read_sum`, `in_place`) over
# `CHIP_BW_BYTES` are each called between the rounds of a plain-JAX ceiling of the same size
# (the course's own ceilings, instructor-only: a bfloat16 `a @ b`, a read-only `jnp.sum`,
# `x * 2` written in place; each checked before it is timed), so both see the chip in the
# same state; each of your figures is the best of its calls, set beside the ceiling's best
# and the vendor's figure (`coursekit.measure.chips`).

# %%
if ON_CHIP:
    peak_run, theory, caches, headline, ceiling_of = chip_roofline.measure_roofs(
        impl, ceilings, n=CHIP_PEAK_N, iters=ITERS, rounds=CHIP_ROUNDS, bw_bytes=BW_BYTES,
        spec=SPEC, levels=CHIP_LEVELS)
else:
    peak_run = attempt(impl.measure_peak_flops, PEAK_N, ITERS)
    theory = bwm.theoretical_peak_flops()
    caches = attempt(impl.cache_sizes)
    headline = {kind: attempt(impl.measure_bandwidth, BW_BYTES, ITERS, kind)
                for kind in ("in_place", "read_sum", "fresh_output")}
peak = peak_run["flops_per_s"] if ready(peak_run) else peak_run
with not_yet("the two roofs") as roofs_ok:
    need(peak, caches, *headline.values())
    bandwidth = headline["in_place"]["bandwidth"]
    if ON_CHIP:
        chip_roofline.show_roofs(peak_run, headline, ceiling_of, n=CHIP_PEAK_N,
                                 rounds=CHIP_ROUNDS, bw_bytes=BW_BYTES, spec=SPEC,
                                 levels=CHIP_LEVELS)
    else:
        tables.show_cpu_roofs(peak_run, theory, headline, n=PEAK_N, bw_bytes=BW_BYTES)
    ratio = headline["in_place"]["bandwidth"] / headline["fresh_output"]["bandwidth"]
    fresh_faults = float(np.median(headline["fresh_output"]["minor_faults"]))
    tables.show_fresh_output(ratio, fresh_faults, caches, on_chip=ON_CHIP, bw_bytes=BW_BYTES)
    print(LABEL)


# %% [markdown]
# ### Bandwidth by working-set size, each level read off the sweep
#
# The same measurements over working sets from 64 KiB to past the last-level cache (sizes
# derived from sysfs: half and twice each level, and up to `LLC_MULTIPLE` times the
# last-level cache). Each level's bandwidth is the best in-place figure among working sets
# that live in it; "DRAM" needs working sets of at least twice the last-level cache. The
# fresh-output curve shows where the allocator starts handing out fresh pages. On an
# accelerator there is no such sweep: every operand of an XLA program lives in HBM, whose
# roof the cell above measured, so HBM is the one level.

# %%
def level_of(working_set):
    """The memory level a working set lives in, as your ``roofline`` names it."""
    return impl.roofline(1.0, 1.0, 1.0, 1.0, working_set, caches)["memory_level"]


sizes = [] if ON_CHIP else bwm.sweep_sizes(SYS_CACHES, beyond=LLC_MULTIPLE,
                                           largest=SWEEP_MAX_BYTES)
sweep = []
with not_yet("bandwidth by working-set size") as swept:
    need(roofs_ok)
    for size in sizes:
        for kind in ("in_place", "read_sum", "fresh_output"):
            m = impl.measure_bandwidth(size, ITERS, kind)
            sweep.append(dict(m, best_bandwidth=m["bandwidth"],
                              working_set_bytes=bwm.RESIDENT_PER_BYTE[kind] * size,
                              faults_per_call=float(np.median(m["minor_faults"]))))
    levels = ({"HBM": {"sizes": [BW_BYTES], "bandwidths": [bandwidth], "bandwidth": bandwidth}}
              if ON_CHIP else bwm.level_bandwidths(sweep, caches, level_of))
    tables.show_levels(levels, sweep, on_chip=ON_CHIP, bw_bytes=BW_BYTES, llc=LLC,
                       largest=max(sizes, default=None))
    print(LABEL)

# %%
with not_yet("bandwidth plot"):
    need(swept)
    if ON_CHIP:
        print("no working-set sweep on the chip: nothing to plot here")
    else:
        fig, ax = plt.subplots(figsize=(8.5, 3.8))
        for kind, style in (("in_place", "o-"), ("read_sum", "s-"), ("fresh_output", "x--")):
            rows = [r for r in sweep if r["kind"] == kind]
            ax.plot([r["working_set_bytes"] / MiB for r in rows],
                    [r["best_bandwidth"] / 1e9 for r in rows], style, label=kind, ms=4)
        for name, size in caches.items():
            ax.axvline(size / MiB, color="gray", ls=":", lw=1)
            ax.text(size / MiB, ax.get_ylim()[1] * 0.97, f" {name}", fontsize=8, va="top")
        for name, entry in levels.items():
            lo, hi = min(entry["sizes"]) / MiB, max(entry["sizes"]) / MiB
            ax.hlines(entry["bandwidth"] / 1e9, lo, hi, color="k", lw=2.5, alpha=0.5)
            ax.text(hi, entry["bandwidth"] / 1e9, f" {name} {entry['bandwidth'] / 1e9:.0f} GB/s",
                    fontsize=7, va="bottom")
        plain_log(ax, "x")
        ax.set_xlabel("working set (MiB, log scale)")
        ax.set_ylabel("attained bandwidth (GB/s)")
        ax.legend(fontsize=8)
        titled(ax, "Bandwidth by working set, levels read from the in-place sweep", LABEL)
        fig.tight_layout()
        plt.show()

# %% [markdown]
# ### FLOPs and bytes: by hand and from the compiler
#
# `matmul_cost_by_hand` is your count, `cost_from_compiler` the compiler's count of the
# program as it will run. Odd shapes on purpose; where the two columns disagree, one of
# them counts something else:

# %%
rows = []
with not_yet("hand vs compiler counts"):
    for (m, k, n), dtype in (((127, 255, 63), jnp.float32), ((300, 17, 511), jnp.float32),
                              ((129, 129, 129), jnp.bfloat16)):
        a, b = jnp.ones((m, k), dtype), jnp.ones((k, n), dtype)
        hand = impl.matmul_cost_by_hand(m, k, n, jnp.dtype(dtype).itemsize)
        comp = impl.cost_from_compiler(jnp.matmul, a, b)
        rows.append((f"({m}x{k}) @ ({k}x{n}) {jnp.dtype(dtype).name}", hand, comp))
    print(f"{'matmul':34s} {'FLOPs hand':>12s} {'compiler':>12s} {'bytes hand':>11s} "
          f"{'compiler':>11s}")
    for name, hand, comp in rows:
        print(f"{name:34s} {hand['flops']:12.0f} {comp['flops']:12.0f} {hand['bytes']:11.0f} "
              f"{comp['bytes']:11.0f}")


# %% [markdown]
# ## Exercise: an elementwise op by hand
#
# Write `elementwise_cost_by_hand(n, itemsize)` for `x * 2 + 1` on a vector of `n` elements:
# return `{"flops": ..., "bytes": ...}` as ints (every arithmetic operation on every element
# counts; bytes = read `x` once + write the result once). The test compares with the
# compiler's count for float32, taken once and written into the test. (Try bfloat16
# yourself: on CPU the compiler counts the conversions to float32 and back as FLOPs too.)

# %% nbgrader={"grade": false, "grade_id": "elementwise_cost_by_hand", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
def elementwise_cost_by_hand(n, itemsize):
    ### BEGIN SOLUTION
    return {"flops": 2 * n, "bytes": 2 * n * itemsize}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "elementwise_cost_by_hand_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
# The course's own helper that computes this exercise is refused here and when graded
# (coursekit/checking/forbidden.py, NOTEBOOK_RULES): the exercise is to compute it.
from coursekit.notebook.borrowed import refuse_borrowed as _refuse_borrowed

_refuse_borrowed("03_roofline", "elementwise_cost_by_hand")
# The compiler's own counts for `v * 2 + 1` on 1000, 17 and 65536 float32 values, taken
# once on CPU with the course's pinned jax and written here (several sizes: a count that
# does not follow n fails): 2000 FLOPs and 8000 bytes accessed for 1000.
for _n, _flops, _bytes in ((1000, 2000, 8000), (17, 34, 136), (65536, 131072, 524288)):
    _mine = elementwise_cost_by_hand(_n, 4)
    assert type(_mine) is dict and len(_mine) == 2, \
        f"return a plain dict with the keys flops and bytes, not {_mine!r}"
    for _k, _want in (("flops", _flops), ("bytes", _bytes)):
        assert _k in _mine, f"no {_k!r} key in {_mine!r}"
        _v = _mine[_k]
        assert type(_v) is int or type(_v) is float, \
            f"{_k} should be a plain int, not {type(_v).__name__}"
        assert _v == _want, f"n={_n}: {_mine}, the compiler counts {_k} {_want}"
### BEGIN HIDDEN TESTS
# the compiler's counts for n = 4097 and 333 (float32), taken the same way
for _n, _flops, _bytes in ((4097, 8194, 32776), (333, 666, 2664)):
    _m = elementwise_cost_by_hand(_n, 4)
    assert type(_m) is dict, _m
    _f, _b = _m.get("flops"), _m.get("bytes")
    assert type(_f) is int or type(_f) is float, (_n, _m)
    assert type(_b) is int or type(_b) is float, (_n, _m)
    assert _f == _flops and _b == _bytes, (_n, _m, _flops, _bytes)
### END HIDDEN TESTS

# %% [markdown]
# ### Validate the roof on a workload that did not define it
#
# The in-place `x * 2 + 1` defined the memory roof, so predicting it proves nothing. A
# different memory-bound op: `a + 2 b` written into `a` (donated), three streams (read `a`
# and `b`, write `a`), working set two arrays. Predicted with the bandwidth of the level
# that working set lives in, then measured with your `time_fn` (stage 1; each call is given
# the previous call's output as `a`, and the minor page faults of its calls are counted
# around it).

# %%
with not_yet("the roof validated on another workload") as validated:
    need(swept)
    n = BW_BYTES // 8                       # two arrays of BW_BYTES / 2 each
    va, vb = jnp.ones((n,), jnp.float32), jnp.ones((n,), jnp.float32)
    axpy = jax.jit(lambda a, b: a + 2.0 * b, donate_argnums=0)
    moved, working_set = 3 * 4 * n, 2 * 4 * n
    level = level_of(working_set)
    level_bw = {k: v["bandwidth"] for k, v in levels.items()}
    if level not in level_bw:              # the sweep did not reach it (CI cap)
        level = max(level_bw, key=lambda k: caches.get(k, 0) if k != "DRAM" else 2**62)
    predicted = moved / level_bw[level]
    timed = timed_by_yours(impl.time_fn, threaded(axpy, va), (vb,), ITERS)
    measured, faults = timed["median_s"], timed["faults_per_call"]
    off = measured / predicted
    validation = dict(level=level, bandwidth=level_bw[level], faults=faults,
                      predicted_s=predicted, measured_s=measured)
    print(f"a + 2b in place: {moved / MiB:.0f} MiB moved, working set "
          f"{working_set / MiB:.0f} MiB in {level}; predicted {predicted * 1e3:.2f} ms with "
          f"{level_bw[level] / 1e9:.1f} GB/s, measured {measured * 1e3:.2f} ms "
          f"({faults:.0f} faults per call): measured / predicted = {off:.2f}")
    print("the roof " + ("holds within 2x for this workload" if 0.5 <= off <= 2 else
                         f"is off by {off:.1f}x here: look at the level and the bytes")
          + f" ({LABEL})")

# %% [markdown]
# ### On the chip: a workload predicted before it is measured
#
# On an accelerator, one workload the roofs did not define: a transformer-style MLP block
# in bfloat16, `gelu(x @ w1) @ w2` with `x` of `CHIP_MLP[0]` x `CHIP_MLP[1]` and a hidden
# width of `CHIP_MLP[2]`. Its FLOPs and bytes come from the compiler (your
# `cost_from_compiler`), its time from the two roofs measured above (the max of compute and
# memory time, and their sum), printed *before* it runs. Then its output is checked against
# float32 arithmetic, it is timed (first call apart, synchronised samples), and a trace of
# three calls says how long the chip's operations ran in each (`coursekit.measure.device_trace`
# reads the trace's device lines): the gap between prediction and measurement split into
# the device's part and the host's. On a CPU this cell says so and does nothing.

# %%
prediction = None
with not_yet("a workload predicted, then measured") as predicted_ok:
    need(roofs_ok)
    if not ON_CHIP:
        print("cpu branch: the prediction against the chip's roofs runs on an accelerator; "
              "here the workloads below are placed on this CPU's roofline")
    else:
        prediction = chip_roofline.predict_then_measure(
            impl, CHIP_MLP, peak=peak, bandwidth=bandwidth, iters=ITERS,
            logdir=str(RECORDS / "traces" / "03_predicted_workload"))
        print(LABEL)


# %% [markdown]
# ### The course's workloads on the roofline
#
# Each workload: FLOPs and bytes from the compiler (your `cost_from_compiler`), its
# working set from the compiler's memory plan (arguments + outputs + temporaries), the
# warmed median of your `time_fn` with the page faults per call beside it, and your `roofline`
# with the *bandwidth of each level* (a dict): the level the working set lives in sets the
# memory time. The max of the two times is the time with perfect overlap, their sum the
# time with none. Whether the sum bounds a measurement from above depends on the call paying
# nothing else, at the roofs' own rates; the roofs are the *fastest* of their samples and
# each placement is a *median*, so each workload is also placed against the sum at the
# roofs' median samples, and the cell prints which reading holds for each.

# %%
def loss_and_grads_blocks(params, x):        # the residual blocks of notebook 04
    def loss(p):
        h = x
        for blk in p:
            h = h + jax.nn.gelu(h @ blk["w1"]) @ blk["w2"]
        return jnp.mean(h ** 2)
    return jax.value_and_grad(loss)(params)

def mlp_step(params, x):                      # the training step of notebook 02
    def loss(p):
        return jnp.mean((jax.nn.gelu(x @ p["w1"]) @ p["w2"]) ** 2)
    return jax.value_and_grad(loss)(params)

def working_set_of(fn, args):                 # the compiler's plan (arguments, outputs, temps)
    compiled = jax.jit(fn).lower(*args).compile()
    plan = compiled_plan.memory_plan(compiled)  # a TPU plans temp 0: its scratch is in the peak
    return plan["argument_size_in_bytes"] + plan["output_size_in_bytes"] + \
        compiled_plan.scratch_bytes(compiled)["bytes"]

def chain(x):                                 # a chain XLA fuses into one loop
    return jnp.tanh(x * 2.0 + 1.0) * 3.0 + x

xs = jnp.ones((REST_ELEMS,), jnp.float32)
key = jax.random.key(0)
n1 = PEAK_N // 2
w = KERNEL_N // 2
STREAM = "x*2+1 fresh out"
workloads = {
    "01 tanh(a@a)@a": (lambda a: jnp.tanh(a @ a) @ a, (jax.random.normal(key, (n1, n1)),)),
    "matmul PEAK_N": (jnp.matmul, (jnp.ones((PEAK_N, PEAK_N)), jnp.ones((PEAK_N, PEAK_N)))),
    STREAM: (lambda v: v * 2.0 + 1.0, (jnp.ones((BW_BYTES // 4,)),)),
    "fused chain": (chain, (xs,)),
    "02 MLP step": (mlp_step, ({"w1": jnp.ones((w, 4 * w)) / w, "w2": jnp.ones((4 * w, w)) / w},
                               jnp.ones((KERNEL_N, w)))),
    "04 remat blocks": (loss_and_grads_blocks,
                        ([{"w1": jnp.ones((w, 4 * w)) / w, "w2": jnp.ones((4 * w, w)) / w}] * 2,
                         jnp.ones((KERNEL_N, w)))),
}

# %%
placed = {}
with not_yet("workloads on the roofline") as placing:
    need(validated)
    # the same roofs at their median samples: the spread a median placement can show
    peak_median = peak_run["flops"] / float(np.median(peak_run["samples_s"]))
    level_bw_median = tables.median_level_bandwidths(sweep, levels, level_of)
    fault_cost_s = tables.page_fault_cost(headline, fresh_faults, on_chip=ON_CHIP)
    tables.show_workload_header()
    for name, (fn, args) in workloads.items():
        cost = impl.cost_from_compiler(fn, *args)
        ws = working_set_of(fn, args)
        lvl = level_of(ws)
        roof_bw = dict(level_bw)
        if lvl not in roof_bw:
            roof_bw[lvl] = level_bw[level]   # not measured: the largest level measured
        r = impl.roofline(cost["flops"], cost["bytes"], peak, roof_bw, ws, caches)
        roof_bw_median = {k: level_bw_median.get(k, v) for k, v in roof_bw.items()}
        r_median = impl.roofline(cost["flops"], cost["bytes"], peak_median, roof_bw_median,
                                 ws, caches)
        timed = timed_by_yours(impl.time_fn, jax.jit(fn), args, ITERS)
        t, faults = timed["median_s"], timed["faults_per_call"]
        verdict = claims.roofline_verdict(t, r["lower_s"], r["upper_s"], r_median["upper_s"],
                                          faults * fault_cost_s)
        placed[name] = dict(r, flops=cost["flops"], bytes=cost["bytes"], measured_s=t,
                            upper_median_s=r_median["upper_s"], faults=faults,
                            working_set=ws, verdict=verdict,
                            assumed=lvl not in level_bw)
        tables.show_workload(name, placed[name])
    stream = placed[STREAM]
    print(f"'{STREAM}' writes a new {BW_BYTES / MiB:.0f} MiB array per call and paid "
          f"{stream['faults']:.0f} faults per call: measured / the max of the two = "
          f"{stream['measured_s'] / stream['lower_s']:.1f}x")
    print("'matmul PEAK_N' defined the attained compute roof: it is not a validation")
    print(claims.roofline_summary({k: v["verdict"] for k, v in placed.items()},
                                  len(peak_run["samples_s"])))
    print(LABEL)

# %%
with not_yet("roofline plot"):
    need(placing)
    intensities = np.logspace(-2, 3, 200)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(intensities, np.minimum(theory["flops"], intensities * max(level_bw.values())) / 1e9,
            color="gray", lw=1, label=f"theoretical peak {theory['flops'] / 1e9:.0f} GFLOP/s "
            "(assumed, see above)")
    for name, bw_level in level_bw.items():
        ax.plot(intensities, np.minimum(peak, intensities * bw_level) / 1e9, "-", lw=1.2,
                label=f"attained roof, {name} {bw_level / 1e9:.1f} GB/s, peak "
                      f"{peak / 1e9:.0f} GFLOP/s")
    markers = "osD^vP*X"
    for i, (name, pl) in enumerate(placed.items()):
        ax.scatter(pl["intensity"], pl["flops"] / pl["measured_s"] / 1e9, s=40, zorder=3,
                   marker=markers[i % 8],
                   label=f"{name} ({pl['bound']}-bound, {pl['memory_level']}, {pl['verdict']})")
    plain_log(ax, "x")
    plain_log(ax, "y")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, log scale)")
    ax.set_ylabel("GFLOP/s (log scale)")
    ax.legend(fontsize=6.5, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    titled(ax, "Roofline of this machine, a roof per memory level (dots: measured)", LABEL)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### Check stage 2
#
# The grader's `check.py --stage 2`: the trace checks (notebook 02) and this notebook's
# cost, peak, bandwidth, roofline and cache checks.

# %%
check2 = run_check("performance-audit", 2, IMPL)

# %% [markdown]
# The contracts you met are the docstrings in `model.py`: what each function counts, measures
# and returns, and how the checker holds it to that. A walk-through of the reference's
# roofline half of stage 2 comes with your grading feedback once the stage has been graded
# (or ask your instructor).

# %% [markdown]
# ### Lowered vs compiled cost analysis: what fusion saves
#
# The fused chain of the roofline above, counted twice. `lowered.cost_analysis()`
# counts the program *before* XLA fuses it (the wrong count on purpose): every elementwise
# op reads and writes a whole array. Your `cost_from_compiler` counts the program as it
# will run, where the chain is one fused loop that reads `x` once and writes the result
# once. Same FLOPs, far fewer bytes, higher intensity.

# %%
try:  # a TPU counts only the compiled program: the lowering's cost_analysis() is None there
    before = compiled_plan.lowered_cost(jax.jit(chain).lower(xs))
except compiled_plan.PlanUnavailable as why:
    before, unavailable = None, str(why)
after = attempt(impl.cost_from_compiler, chain, xs)
with not_yet("lowered vs compiled"):
    need(after)
    if before is None:  # said by name: there is no unoptimised count to set beside yours
        print(f"{unavailable}; compiled: {after['flops']:.0f} FLOPs, {after['bytes']:.0f} "
              f"bytes, {after['flops'] / after['bytes']:.3f} FLOP/byte ({LABEL})")
    else:
        for key, theirs in (("flops", "flops"), ("bytes accessed", "bytes")):
            print(f"{key:16s} lowered {before.get(key, 0):14.0f}   compiled "
                  f"{after[theirs]:14.0f}")
        fusion_saving = before["bytes accessed"] / after["bytes"]
        print(f"fusion cuts the bytes moved by {fusion_saving:.1f}x; intensity goes from "
              f"{before['flops'] / before['bytes accessed']:.3f} to "
              f"{after['flops'] / after['bytes']:.3f} FLOP/byte")

# %% [markdown]
# ## Try a changed condition: a kernel twice as fast, a step barely faster
#
# A step made of a *kernel* (a matmul) and the *rest* (elementwise work on a large array and
# a host read of the result). Someone makes the kernel about twice as fast (here: half the
# inner dimension, half the FLOPs). First measure the kernel's share of the step.

# %%
ka = jax.random.normal(jax.random.key(1), (KERNEL_N, KERNEL_N))
kb = jax.random.normal(jax.random.key(2), (KERNEL_N, KERNEL_N))
big = jax.random.normal(jax.random.key(3), (REST_ELEMS,))
half = KERNEL_N // 2
ka_half, kb_half = ka[:, :half] + 0, kb[:half] + 0   # the faster kernel's inputs, made once
kernel = jax.jit(lambda a, b: a @ b)
rest = jax.jit(lambda y, v: jnp.sum(jnp.tanh(v) * 2.0) + jnp.mean(y))
AMDAHL_ITERS = max(10, 3 * ITERS)

def step(a, b, v):
    return float(rest(kernel(a, b), v))   # a host read: the step returns a Python float

t_kernel = time_synced(kernel, ka, kb, iters=AMDAHL_ITERS).median_s
t_step = time_synced(step, ka, kb, big, iters=AMDAHL_ITERS).median_s
share = t_kernel / t_step
print(f"kernel {t_kernel * 1e3:.2f} ms of a {t_step * 1e3:.2f} ms step: share {share:.2f} "
      f"({LABEL})")

# %% [markdown]
# With that share in front of you: **predict the whole step's speedup** when the kernel gets
# twice as fast and nothing else changes. Write a number.

# %% nbgrader={"grade": false, "grade_id": "prediction_step_speedup", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
PREDICTED_STEP_SPEEDUP = None  # a number, e.g. 1.5
### BEGIN SOLUTION
PREDICTED_STEP_SPEEDUP = 1.15
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "prediction_step_speedup_present", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
record_prediction("03_step_speedup_kernel_2x", PREDICTED_STEP_SPEEDUP, "x")
assert type(PREDICTED_STEP_SPEEDUP) is int or type(PREDICTED_STEP_SPEEDUP) is float, \
    "write a number as your prediction (a plain int or float, not a subclass)"

# %%
with count_compiles() as compiles_before_timing:
    step(ka_half, kb_half, big)     # the new shapes compile here, outside the timers

def interleaved(cases, rounds=3):
    # median of each case's samples, taken in alternating rounds so that a burst of other
    # activity on the machine hits every case alike
    samples = {name: [] for name in cases}
    for _ in range(rounds):
        for name, (fn, args) in cases.items():
            samples[name] += time_synced(fn, *args, warmup=1,
                                         iters=max(3, AMDAHL_ITERS // rounds)).samples_s
    return {name: float(np.median(s)) for name, s in samples.items()}

with count_compiles() as compiles_while_timing:
    t = interleaved({"kernel": (kernel, (ka, kb)), "step": (step, (ka, kb, big)),
                     "kernel 2x": (kernel, (ka_half, kb_half)),
                     "step 2x": (step, (ka_half, kb_half, big))})
t_kernel, t_step, t_kernel_fast, t_step_fast = (t[k] for k in ("kernel", "step", "kernel 2x",
                                                              "step 2x"))
share = t_kernel / t_step      # re-measured beside the new kernel
kernel_speedup = t_kernel / t_kernel_fast
measured_step_speedup = t_step / t_step_fast
amdahl = attempt(impl.predict_step_speedup, share, kernel_speedup)
print(f"re-measured in alternating rounds: kernel share {share:.2f}, kernel speedup "
      f"{kernel_speedup:.2f}x")
compare_prediction("03_step_speedup_kernel_2x", PREDICTED_STEP_SPEEDUP, measured_step_speedup, "x")
if amdahl:
    print(f"Amdahl with the measured share and kernel speedup (your predict_step_speedup): "
          f"{amdahl:.3f}x")
print(f"compiles while timing: {compiles_while_timing[0]} (the new shapes compiled "
      f"{compiles_before_timing[0]}x before the timers) ({LABEL})")

# %%
fig, ax = plt.subplots(figsize=(6.5, 3))
bars = (("before", t_kernel, t_step), ("kernel 2x", t_kernel_fast, t_step_fast))
for i, (_name, tk, ts) in enumerate(bars):
    ax.barh(i, tk * 1e3, color="tab:orange", label="kernel (measured alone)" if i == 0 else None)
    ax.barh(i, (ts - tk) * 1e3, left=tk * 1e3, color="tab:gray",
            label="rest of the step" if i == 0 else None)
ax.set_yticks([0, 1], ["before", "kernel 2x"])
ax.set_xlabel("time per step (ms)")
ax.legend(fontsize=8)
titled(ax, "The step before and after a faster kernel", LABEL)
fig.tight_layout()
plt.show()

# %% [markdown]
# When the measured step speedup falls short even of what your `predict_step_speedup`
# says, the other suspects are: **copies** (a host read or device transfer in the step
# that did not shrink), **synchronisation** (an extra wait per step), and
# **recompilation** (the compile count while timing above should be zero: a new shape
# every step would recompile every step).
#
# ### Check stage 4 (Amdahl part)
#
# The grader's `check.py --stage 4`. `amdahl_small_share` is this notebook's: it checks your
# `predict_step_speedup`; `decide` and the other stage 4 checks (among them
# `decide_applies_min_gain`, which asks it to refuse a small step gain like this one) are
# built in notebook 08, so they say *not yet* until then.

# %%
check4 = run_check("performance-audit", 4, IMPL)
amdahl_check = {r["check_id"]: r["status"] for r in check4["results"]
                if r["check_id"] == "amdahl_small_share"}
print("Amdahl part of stage 4:", amdahl_check)

# %% [markdown]
# Whatever the check said: why can no kernel speedup, however large, take the step past
# a limit set by the share alone, and what is that limit for the share measured above?
# A walk-through of the reference's stage 4 comes with your grading feedback once the
# stage has been graded (or ask your instructor).

# %% [markdown]
# ## Diagnose a likely failure: a roofline estimate far off the measurement
#
# **Symptom.** The roofline predicts a streaming op several times faster than you measure.
# **What to check next:** (1) the page faults per call beside the time (a fresh output
# each call pays one per 4 KiB page: that is the allocator, not memory); (2) which memory
# level the bandwidth roof was measured in, and which level the workload's data lives in;
# (3) the bytes: the compiler's count after fusion vs your hand count; (4) the
# measurement: compile outside, synchronised inside.
#
# The planted failure, reproduced: the roof quoted is the *fresh-output* bandwidth of the
# headline array (the figure a plain `x * 2 + 1` timer gives), used to predict the
# in-place validation workload above.

# %%
with not_yet("the planted failure"):
    need(placing)
    planted_bw = headline["fresh_output"]["bandwidth"]
    wrong = moved / planted_bw
    print(f"planted: roof {planted_bw / 1e9:.1f} GB/s (fresh output, "
          f"{fresh_faults:.0f} faults per call) predicts a + 2b in {wrong * 1e3:.2f} ms; "
          f"measured {measured * 1e3:.2f} ms: measured / predicted = {measured / wrong:.2f}")

# %% [markdown]
# The fix: the in-place bandwidth of the level the workload's working set lives in, with
# the validation workload's own fault count beside it (zero faults: nothing else measured).

# %%
with not_yet("the fix"):
    need(placing)
    print(f"{claims.roof_fix(**validation)} ({LABEL})")

# %% [markdown]
# ### Provenance: the kernel's timing in MLflow
#
# The kernel of the Amdahl experiment, timed again with a fresh `jax.jit` (so its first call
# compiles and is reported apart) after its output was checked against float64 NumPy, goes
# to MLflow with its configuration, the environment fingerprint, raw samples, sync method,
# warm-up and the check it rests on (FAILED and kept if the check fails). Notebook 08 reads
# it back.

# %%
from coursekit.notebook.cells import log_measurement

fresh_kernel = jax.jit(lambda a, b: a @ b)
exact = np.asarray(ka, np.float64) @ np.asarray(kb, np.float64)
kernel_error = float(np.linalg.norm(np.asarray(fresh_kernel(ka, kb)) - exact)
                     / np.linalg.norm(exact))
kernel_timing = time_synced(jax.jit(lambda a, b: a @ b), ka, kb, warmup=1, iters=AMDAHL_ITERS)
# a TPU's float32 product at JAX's default precision runs in bfloat16 passes: 3 digits
KERNEL_TOL, KERNEL_TOL_TEXT = (1e-2, "1e-2 (default matmul precision on the chip)") \
    if ON_CHIP else (1e-4, "1e-4")
log_measurement("03 matmul kernel", {"workload": "a @ b", "n": KERNEL_N, "dtype": "float32"},
                kernel_timing, check=f"relative error against float64 NumPy below "
                                     f"{KERNEL_TOL_TEXT}",
                ok=kernel_error < KERNEL_TOL, notebook="03_roofline",
                metrics={"relative_error": kernel_error})

# %% [markdown]
# ## Decide what is ready
#
# The evidence of this stage, computed from the cells above:

# %%
evidence = {
    "stage 2 checks passed": f"{check2['passed']} of {check2['passed'] + check2['failed']}",
    "Amdahl check (stage 4)": amdahl_check,
    "measured / max(compute, memory) per workload": (
        {k: round(v["measured_s"] / v["lower_s"], 2) for k, v in placed.items()}
        if placed else "not yet"),
    "in place / fresh output bandwidth": (f"{ratio:.1f}x" if ready(roofs_ok) else "not yet"),
    "validation (a + 2b) measured / predicted": (f"{off:.2f}" if ready(validated)
                                                 else "not yet"),
    "step speedup: predicted by you / Amdahl / measured": (
        f"{PREDICTED_STEP_SPEEDUP} / {amdahl:.3f} / {measured_step_speedup:.3f}"
        if ready(amdahl) else "not yet"),
}
for k, v in evidence.items():
    print(f"{k:52s} {v}")
print(LABEL)

# %% [markdown]
# **Your decision.** One accept/reject statement: *is a "2x faster kernel" change ready to be
# reported as a 2x faster step, and can your roofline numbers be trusted for the next
# optimisation?* Back it with the share, the Amdahl prediction, the measured step speedup
# and the memory level behind each estimate.

# %% [markdown] nbgrader={"grade": true, "grade_id": "decision_03", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# Reject "2x faster step": the kernel's measured share limits the step speedup to what Amdahl
# predicts; compare the measured step speedup with that, not with 2x. Trust the roofline
# as a guide for the next optimisation only with the memory roof measured in place (no
# page faults in the samples) at the level each workload's working set lives in, validated
# on a workload that did not define it; a fresh-output or cache-resident figure used for
# another level is the likely reason an estimate is far off. CPU figures of a shared
# 2-core machine.

# ---
# jupyter:
#   course:
#     ci_parameters:
#       BW_BYTES: 33554432
#       ITERS: 3
#       KERNEL_N: 384
#       PEAK_N: 512
#       REST_ELEMS: 4194304
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
# code: attained figures of this host, not vendor peaks and not an accelerator's.

# %% tags=["parameters"]
# Parameters (papermill injects other values in CI; learners keep these).
IMPL = "../projects/performance-audit/starter/model.py"  # the implementation under test
PEAK_N = 1024              # matmul size for the peak FLOP/s measurement
BW_BYTES = 256 * 2**20     # array size for the bandwidth measurement (well above the L3 cache)
ITERS = 5                  # timed calls per measurement (best-of or median)
KERNEL_N = 512             # matmul size of the "kernel" in the Amdahl experiment
REST_ELEMS = 16 * 2**20    # float32 elements of the rest of that step

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

from coursekit.measure.timing import count_compiles, time_synced
from coursekit.notebook.cells import compare_prediction, cpu_label, record_prediction, run_check
from coursekit.notebook.guard import attempt, load_learner, need, not_yet, ready
from coursekit.notebook.plots import plain_log, titled

impl = load_learner(IMPL)
LABEL = cpu_label()
MiB = 2**20
print(LABEL)
print("implementation under test:", IMPL)

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
# `x * 2 + 1` does two FLOPs per element and moves eight bytes (read four, write four):
# its intensity is a fraction of a FLOP per byte, far below any machine's ridge point, so
# bandwidth sets its speed. An n x n matmul does 2n³ FLOPs on about 3n² numbers: its
# intensity grows with n and passes the ridge point, so arithmetic sets its speed. The
# roofline says: attainable FLOP/s = min(peak, intensity x bandwidth), where the bandwidth
# is that of the memory level the working set actually lives in.
# </details>

# %% [markdown]
# ## Build in stages · stage 2 (roofline part)
#
# ### This machine's two roofs
#
# Your `measure_peak_flops` (a compiled, synchronised float32 matmul, best of several) and
# `measure_bandwidth` (a streaming `x * 2 + 1` that reads and writes every byte once, on an
# array far larger than the caches), plus the cache sizes from `/sys`.

# %%
peak = attempt(impl.measure_peak_flops, PEAK_N, ITERS)
bandwidth = attempt(impl.measure_bandwidth, BW_BYTES, ITERS)
caches = attempt(impl.cache_sizes)
with not_yet("the two roofs"):
    need(peak, bandwidth, caches)
    print(f"peak (attained) {peak / 1e9:8.1f} GFLOP/s   (float32 {PEAK_N}x{PEAK_N} matmul)")
    print(f"bandwidth       {bandwidth / 1e9:8.1f} GB/s      "
          f"(x * 2 + 1 on {BW_BYTES / MiB:.0f} MiB)")
    print(f"ridge point     {peak / bandwidth:8.1f} FLOP/byte")
    print("data caches:", {k: f"{v / 1024:.0f} KiB" for k, v in caches.items()} or "not found")
    print(LABEL)

# %% [markdown]
# Bandwidth depends on where the data lives. The same streaming op over a range of array
# sizes, with the cache sizes marked: the figure you would quote depends on the size you
# measured at. Very small arrays are dominated by the fixed cost of a call, not by memory.

# %%
sweep_sizes = [s for s in (2**k for k in range(16, 40, 2)) if s < BW_BYTES] + [BW_BYTES]
sweep = {}
for size in sweep_sizes:
    sweep[size] = attempt(impl.measure_bandwidth, size, ITERS)
    if not ready(sweep[size]):
        break
with not_yet("bandwidth by array size"):
    need(caches, *sweep.values())
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    ax.plot([s / MiB for s in sweep], [v / 1e9 for v in sweep.values()], "o-")
    for name, size in caches.items():
        ax.axvline(size / MiB, color="gray", ls=":", lw=1)
        ax.text(size / MiB, ax.get_ylim()[1] * 0.95, f" {name}", fontsize=8, va="top")
    plain_log(ax, "x")
    ax.set_xlabel("array size (MiB, log scale)")
    ax.set_ylabel("attained bandwidth (GB/s)")
    titled(ax, "x * 2 + 1: bandwidth by array size", LABEL)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### FLOPs and bytes: by hand and from the compiler
#
# `matmul_cost_by_hand` counts one multiply and one add per inner-product term and reads
# each input once, writes the output once. `cost_from_compiler` asks XLA
# (`jax.jit(fn).lower(*args).compile().cost_analysis()`). Odd shapes on purpose:

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
# ### Lowered vs compiled cost analysis: what fusion saves
#
# `lowered.cost_analysis()` counts the program *before* XLA fuses it: every elementwise op
# reads and writes a whole array. After compilation the chain is one fused loop that reads
# `x` once and writes the result once. Same FLOPs, far fewer bytes, higher intensity.

# %%
def chain(x):
    return jnp.tanh(x * 2.0 + 1.0) * 3.0 + x

xs = jnp.ones((REST_ELEMS,), jnp.float32)
lowered = jax.jit(chain).lower(xs)
before = lowered.cost_analysis()
after = lowered.compile().cost_analysis()
after = after[0] if isinstance(after, (list, tuple)) else after
for key in ("flops", "transcendentals", "bytes accessed"):
    print(f"{key:16s} lowered {before.get(key, 0):14.0f}   compiled {after.get(key, 0):14.0f}")
fusion_saving = before["bytes accessed"] / after["bytes accessed"]
print(f"fusion cuts the bytes moved by {fusion_saving:.1f}x; intensity goes from "
      f"{before['flops'] / before['bytes accessed']:.3f} to "
      f"{after['flops'] / after['bytes accessed']:.3f} FLOP/byte")


# %% [markdown]
# ## Exercise: an elementwise op by hand
#
# Write `elementwise_cost_by_hand(n, itemsize)` for `x * 2 + 1` on a vector of `n` elements:
# return `{"flops": ..., "bytes": ...}` as ints (every arithmetic operation on every element
# counts; bytes = read `x` once + write the result once). The test compares with the
# compiler's count for float32. (Try bfloat16 yourself: on CPU the compiler counts the
# conversions to float32 and back as FLOPs too.)

# %% nbgrader={"grade": false, "grade_id": "elementwise_cost_by_hand", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
def elementwise_cost_by_hand(n, itemsize):
    ### BEGIN SOLUTION
    return {"flops": 2 * n, "bytes": 2 * n * itemsize}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "elementwise_cost_by_hand_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
def _compiler(n, dtype):
    c = jax.jit(lambda v: v * 2 + 1).lower(jnp.ones((n,), dtype)).compile().cost_analysis()
    c = c[0] if isinstance(c, (list, tuple)) else c
    return {"flops": c["flops"], "bytes": c["bytes accessed"]}

_mine = elementwise_cost_by_hand(1000, 4)
assert _mine == {"flops": 2000, "bytes": 8000}, _mine
### BEGIN HIDDEN TESTS
for _n, _dt in ((4097, jnp.float32), (333, jnp.float32)):
    _m = elementwise_cost_by_hand(_n, jnp.dtype(_dt).itemsize)
    _c = _compiler(_n, _dt)
    assert float(_m["flops"]) == _c["flops"] and float(_m["bytes"]) == _c["bytes"], (_m, _c)
### END HIDDEN TESTS

# %% [markdown]
# ### The course's workloads on the roofline
#
# Each workload: FLOPs and bytes from the compiler (your `cost_from_compiler`), a
# synchronised warmed median (`coursekit.measure.timing.time_synced`), and your `roofline` for the
# bound, the predicted time and the memory level its bytes live in (the compiler's bytes
# accessed stand in for the working set). Achieved FLOP/s = FLOPs / measured time.

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

key = jax.random.key(0)
n1 = PEAK_N // 2
w = KERNEL_N // 2
workloads = {
    "01 tanh(a@a)@a": (lambda a: jnp.tanh(a @ a) @ a, (jax.random.normal(key, (n1, n1)),)),
    "matmul PEAK_N": (jnp.matmul, (jnp.ones((PEAK_N, PEAK_N)), jnp.ones((PEAK_N, PEAK_N)))),
    "x*2+1 BW_BYTES": (lambda v: v * 2.0 + 1.0, (jnp.ones((BW_BYTES // 4,)),)),
    "fused chain": (chain, (xs,)),
    "02 MLP step": (mlp_step, ({"w1": jnp.ones((w, 4 * w)) / w, "w2": jnp.ones((4 * w, w)) / w},
                               jnp.ones((KERNEL_N, w)))),
    "04 remat blocks": (loss_and_grads_blocks,
                        ([{"w1": jnp.ones((w, 4 * w)) / w, "w2": jnp.ones((4 * w, w)) / w}] * 2,
                         jnp.ones((KERNEL_N, w)))),
}
placed = {}
with not_yet("workloads on the roofline") as placing:
    need(peak, bandwidth, caches)
    print(f"{'workload':18s} {'GFLOP':>8s} {'MiB':>8s} {'FLOP/B':>7s} {'bound':>8s} {'level':>6s} "
          f"{'pred ms':>8s} {'meas ms':>8s} {'meas/pred':>9s}")
    for name, (fn, args) in workloads.items():
        cost = impl.cost_from_compiler(fn, *args)
        r = impl.roofline(cost["flops"], cost["bytes"], peak, bandwidth, int(cost["bytes"]), caches)
        t = time_synced(jax.jit(fn), *args, warmup=1, iters=ITERS).median_s
        placed[name] = dict(r, flops=cost["flops"], bytes=cost["bytes"], measured_s=t)
        print(f"{name:18s} {cost['flops'] / 1e9:8.3f} {cost['bytes'] / MiB:8.2f} "
              f"{r['intensity']:7.2f} {r['bound']:>8s} {r['memory_level']:>6s} "
              f"{r['predicted_s'] * 1e3:8.3f} {t * 1e3:8.3f} {t / r['predicted_s']:9.2f}")
    print(LABEL)

# %%
with not_yet("roofline plot"):
    need(placing)
    best_bw = max(v for v in sweep.values() if v)
    intensities = np.logspace(-2, 3, 200)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(intensities, np.minimum(peak, intensities * bandwidth) / 1e9, "k-",
            label=f"roof: DRAM {bandwidth / 1e9:.1f} GB/s, peak {peak / 1e9:.0f} GFLOP/s")
    ax.plot(intensities, np.minimum(peak, intensities * best_bw) / 1e9, "k:",
            label=f"roof with the best sweep bandwidth ({best_bw / 1e9:.1f} GB/s, cache-resident)")
    markers = "osD^vP*X"
    for i, (name, p) in enumerate(placed.items()):
        achieved = p["flops"] / p["measured_s"]
        ax.scatter(p["intensity"], achieved / 1e9, s=40, zorder=3, marker=markers[i % 8],
                   label=f"{name} ({p['bound']}-bound, {p['memory_level']})")
    plain_log(ax, "x")
    plain_log(ax, "y")
    ax.set_xlabel("arithmetic intensity (FLOP/byte, log scale)")
    ax.set_ylabel("GFLOP/s (log scale)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    titled(ax, "Roofline of this machine with the course's workloads (dots: measured)", LABEL)
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
assert isinstance(PREDICTED_STEP_SPEEDUP, (int, float)), "write a number as your prediction"

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
# Amdahl: a part with share *s* sped up *k* times gives the whole step
# 1 / ((1 - s) + s / k). When the measured step speedup falls short even of that, the other
# suspects are: **copies** (a host read or device transfer in the step that did not shrink),
# **synchronisation** (an extra wait per step), and **recompilation** (the compile count while
# timing above should be zero: a new shape every step would recompile every step).
#
# ### Check stage 4 (Amdahl part)
#
# The grader's `check.py --stage 4`. `amdahl_small_share` is this notebook's: it checks your
# `predict_step_speedup`, then asks your `decide` to refuse a small gain; `decide` and the
# other stage 4 checks are built in notebook 07, so they say *not yet* until then.

# %%
check4 = run_check("performance-audit", 4, IMPL)
amdahl_check = {r["check_id"]: r["status"] for r in check4["results"]
                if r["check_id"] == "amdahl_small_share"}
print("Amdahl part of stage 4:", amdahl_check)

# %% [markdown]
# ## Diagnose a likely failure: a roofline estimate far too optimistic
#
# **Symptom.** The roofline predicts a streaming op several times faster than you measure.
# **What to check next:** (1) which memory level the bandwidth roof was measured in, and
# which level the workload's data lives in (a bandwidth measured on an array that fits in a
# cache does not hold for one that streams from DRAM); (2) the bytes: the compiler's count
# after fusion vs your hand count; (3) the measurement: compile outside, synchronised
# inside; (4) the dtype.
#
# The planted failure, reproduced: the bandwidth quoted is the *best* figure of the sweep
# above, measured on an array that fits in a cache, and it is used to predict
# `x * 2 + 1` on `BW_BYTES`.

# %%
with not_yet("the planted failure"):
    need(placing, *sweep.values())
    best_size = max(sweep, key=lambda s: sweep[s])
    stream = placed["x*2+1 BW_BYTES"]
    wrong = impl.roofline(stream["flops"], stream["bytes"], peak, sweep[best_size],
                          best_size, caches)
    print(f"planted: bandwidth {sweep[best_size] / 1e9:.1f} GB/s measured on "
          f"{best_size / MiB:.2f} MiB (lives in {wrong['memory_level']})")
    print(f"  predicts {wrong['predicted_s'] * 1e3:.3f} ms, "
          f"measured {stream['measured_s'] * 1e3:.3f} ms:"
          f" {stream['measured_s'] / wrong['predicted_s']:.1f}x slower than predicted")

# %% [markdown]
# The fix: the bandwidth of the level the workload's data lives in. Its working set is far
# larger than the last-level cache, so the DRAM figure applies; `roofline` names the level.

# %%
with not_yet("the fix"):
    need(placing)
    right = impl.roofline(stream["flops"], stream["bytes"], peak, bandwidth, int(stream["bytes"]),
                          caches)
    print(f"fixed: bandwidth {bandwidth / 1e9:.1f} GB/s measured on {BW_BYTES / MiB:.0f} MiB, "
          f"working set {stream['bytes'] / MiB:.0f} MiB lives in {right['memory_level']}")
    print(f"  predicts {right['predicted_s'] * 1e3:.3f} ms, "
          f"measured {stream['measured_s'] * 1e3:.3f} ms:"
          f" measured / predicted = {stream['measured_s'] / right['predicted_s']:.2f} ({LABEL})")

# %% [markdown]
# ## Decide what is ready
#
# The evidence of this stage, computed from the cells above:

# %%
evidence = {
    "stage 2 checks passed": f"{check2['passed']} of {check2['passed'] + check2['failed']}",
    "Amdahl check (stage 4)": amdahl_check,
    "measured / predicted time per workload": (
        {k: round(v["measured_s"] / v["predicted_s"], 2) for k, v in placed.items()}
        if placed else "not yet"),
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
# predicts, and the measured step speedup matches that, not 2x. Accept the roofline as a
# guide for this machine: the streaming op is memory-bound at DRAM bandwidth and its
# prediction holds once the right memory level is used; a cache-resident bandwidth figure
# makes it several times too optimistic. CPU figures of a shared 2-core machine.

# ---
# jupyter:
#   course:
#     ci_parameters:
#       BATCH: 128
#       DEPTH: 3
#       HIDDEN: 512
#       ITERS: 3
#       TANH_DEPTH: 4
#       TANH_WIDTH: 256
#       WIDTH: 128
#     project: performance-audit
#     stages:
#     - 3
#     title: "04 \xB7 Rematerialisation"
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
# # 04 · Rematerialisation: memory for compute, measured three ways
#
# **Project:** performance-audit, stage 3 (*test a trade-off*). **You build** in
# `projects/performance-audit/starter/model.py`: `block_loss` (with a remat policy per
# block), `loss_and_grads`, `saved_residual_bytes`, `compiler_temp_bytes`,
# `peak_rss_fresh_process`.
#
# Memory and time here are **CPU figures** of this machine: the host's resident memory and
# XLA:CPU's buffer plan, not an accelerator's HBM.

# %% tags=["parameters"]
# Parameters (papermill injects other values in CI; learners keep these).
IMPL = "../projects/performance-audit/starter/model.py"  # the implementation under test
DEPTH = 4          # residual blocks x + gelu(x @ w1) @ w2
WIDTH = 512        # block input/output width
HIDDEN = 2048      # block hidden width
BATCH = 512        # rows
TANH_DEPTH = 8     # layers of the plain tanh(x @ w) chain
TANH_WIDTH = 1024  # width (and batch) of that chain
ITERS = 3          # timed calls per policy

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np
from jax.ad_checkpoint import print_saved_residuals

from coursekit.measure.timing import time_synced
from coursekit.notebook.cells import compare_prediction, cpu_label, record_prediction, run_check
from coursekit.notebook.guard import load_learner, need, not_yet, ready
from coursekit.notebook.plots import titled

impl = load_learner(IMPL)
LABEL = cpu_label()
MiB = 2**20
POLICIES = [None, "nothing_saveable", "dots_saveable", "everything_saveable"]
print(LABEL)
print("implementation under test:", IMPL)

# %% [markdown]
# ## Check your starting point
#
# **Question.** You wrap every block of a model in `jax.checkpoint` to save memory. Before
# you compare the memory and the time of the two versions, what must you check first, and
# why?

# %% [markdown] nbgrader={"grade": true, "grade_id": "starting_point_04", "locked": false, "points": 1, "schema_version": 3, "solution": true, "task": false}
# That both versions compute the same loss and the same gradients (within a tight
# tolerance). Remat must change only what is stored and recomputed, never the numbers; a
# faster or smaller variant that computes something else is not a trade-off, it is a bug.

# %% [markdown]
# <details><summary>Reasoning (open after answering)</summary>
#
# `jax.checkpoint` (remat) tells autodiff not to keep some forward values (*residuals*) for
# the backward pass but to recompute them there. A policy says what may still be saved:
# `nothing_saveable` keeps only the block's inputs, `dots_saveable` keeps matmul outputs,
# `everything_saveable` keeps all. The arithmetic is the same, so gradients should match
# the no-remat ones (here they are usually bitwise equal on CPU). Check that first: a wrong
# `policy` argument, a block not actually wrapped, or a changed loss would otherwise show up
# as a "memory saving".
# </details>

# %% [markdown]
# ## Build in stages · stage 3: test a trade-off
#
# ### Equal gradients before anything is timed

# %%
params = impl.init_blocks(jax.random.key(0), DEPTH, WIDTH, HIDDEN)
x = jax.random.normal(jax.random.key(1), (BATCH, WIDTH), jnp.float32)
results = {}
loss_and_grads = jax.jit(impl.loss_and_grads, static_argnums=2)  # policy is static
with not_yet("gradients per policy") as grads_ok:
    base_loss, base_grads = loss_and_grads(params, x, None)
    base_leaves = [np.asarray(g) for g in jax.tree.leaves(base_grads)]
    for policy in POLICIES:
        loss, grads = loss_and_grads(params, x, policy)
        leaves = [np.asarray(g) for g in jax.tree.leaves(grads)]
        diff = max(float(np.max(np.abs(a - b))) for a, b in zip(leaves, base_leaves))
        bitwise = all(np.array_equal(a, b) for a, b in zip(leaves, base_leaves))
        close = all(np.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(leaves, base_leaves))
        results[str(policy)] = {"grads_equal": close}
        print(f"policy={str(policy):20s} loss {float(loss):.6f}  max |grad diff| {diff:.3g}  "
              f"bitwise equal: {bitwise}")
    assert all(r["grads_equal"] for r in results.values()), "gradients differ: do not time this"
    print("all policies give the no-remat gradients: the comparison below is fair")

# %% [markdown]
# What the backward pass keeps from one block, with and without remat
# (`jax.ad_checkpoint.print_saved_residuals`; "from the argument" lines are the parameters
# and inputs, kept anyway):

# %%
with not_yet("saved residuals of one block"):
    need(grads_ok)
    for policy in (None, "nothing_saveable"):
        print(f"--- policy={policy}")
        print_saved_residuals(
            lambda p, v, policy=policy: impl.block_loss(p, v, policy), params[:1], x[:8])

# %% [markdown]
# ### Three views of memory, one table
#
# For every policy: the **saved residuals** (what autodiff keeps, from the jaxpr: your
# `saved_residual_bytes`), the **compiler's estimate** (XLA's temporary buffers for the
# whole jitted `loss_and_grads`: `compiler_temp_bytes`), and the **observed peak** (VmHWM of
# a fresh process that runs one call: `peak_rss_fresh_process`), shown above the peak of a
# fresh process running a tiny model (the runtime's own baseline). Then the compiler's FLOPs
# and a synchronised warmed time.

# %%
with not_yet("memory per policy") as table_ok:
    need(grads_ok)
    baseline = impl.peak_rss_fresh_process(1, 8, 8, 8, None)["vmhwm_bytes"]
    for policy in POLICIES:
        fn = jax.jit(lambda p, v, policy=policy: impl.loss_and_grads(p, v, policy))
        cost = fn.lower(params, x).compile().cost_analysis()
        cost = cost[0] if isinstance(cost, (list, tuple)) else cost
        results[str(policy)].update(
            residual_mib=impl.saved_residual_bytes(params, x, policy) / MiB,
            temp_mib=impl.compiler_temp_bytes(params, x, policy) / MiB,
            peak_mib=(impl.peak_rss_fresh_process(DEPTH, WIDTH, HIDDEN, BATCH, policy)
                      ["vmhwm_bytes"] - baseline) / MiB,
            gflop=cost["flops"] / 1e9,
            ms=time_synced(fn, params, x, warmup=1, iters=ITERS).median_s * 1e3)
    print(f"runtime baseline (fresh process, tiny model): {baseline / MiB:.0f} MiB")
    print(f"{'policy':20s} {'residuals':>10s} {'compiler':>10s} {'observed':>10s} {'GFLOP':>8s} "
          f"{'ms':>8s}")
    print(f"{'':20s} {'MiB':>10s} {'temp MiB':>10s} {'peak MiB':>10s}")
    for policy, r in results.items():
        print(f"{policy:20s} {r['residual_mib']:10.2f} {r['temp_mib']:10.2f} {r['peak_mib']:10.1f} "
              f"{r['gflop']:8.3f} {r['ms']:8.2f}")
    print(LABEL)

# %%
with not_yet("memory per policy, plotted"):
    need(table_ok)
    names = list(results)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    for k, (key, label) in enumerate((("residual_mib", "saved residuals (jaxpr)"),
                                      ("temp_mib", "compiler temp estimate"),
                                      ("peak_mib", "observed peak above baseline"))):
        ax1.bar(np.arange(len(names)) + (k - 1) * 0.27, [results[n][key] for n in names],
                width=0.27, label=label)
    ax1.set_xticks(range(len(names)), names, fontsize=8)
    ax1.set_ylabel("memory (MiB)")
    ax1.legend(fontsize=7)
    titled(ax1, f"Memory per remat policy, {DEPTH} blocks, batch {BATCH}", LABEL)
    ax2.bar(range(len(names)), [results[n]["ms"] for n in names], color="tab:gray")
    ax2.set_xticks(range(len(names)), [n.replace("_saveable", "") for n in names], fontsize=8)
    ax2.set_ylabel("loss_and_grads time (ms, warmed median)")
    ax2.set_title("Time per call", fontsize=9)
    fig.tight_layout()
    plt.show()

# %% [markdown]
# ### Check stage 3
#
# The grader's `check.py --stage 3`: equal gradients for every policy, remat really
# applied (a checkpoint region per block in the jaxpr), residual and compiler numbers that
# match its own, and a peak read in a fresh process.

# %%
check3 = run_check("performance-audit", 3, IMPL)


# %% [markdown]
# ## Exercise: the floor of what remat can save
#
# With `nothing_saveable` on every block, the backward pass keeps only what it cannot
# recompute: each block's input (the first block's input is the argument `x`, kept anyway)
# and the last block's output, which the loss's gradient needs. Write
# `remat_floor_bytes(depth, batch, width, itemsize)`: the saved residual bytes of
# `block_loss` with `nothing_saveable`.

# %% nbgrader={"grade": false, "grade_id": "remat_floor_bytes", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
def remat_floor_bytes(depth, batch, width, itemsize):
    ### BEGIN SOLUTION
    return depth * batch * width * itemsize
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "remat_floor_bytes_tests", "locked": true, "points": 2, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
from jax._src.ad_checkpoint import saved_residuals as _saved_residuals


def _residual_bytes(depth, batch, width, hidden):
    _r = np.random.default_rng(5)
    _p = [{"w1": jnp.asarray(_r.standard_normal((width, hidden), np.float32)),
           "w2": jnp.asarray(_r.standard_normal((hidden, width), np.float32))}
          for _ in range(depth)]
    _x = jnp.asarray(_r.standard_normal((batch, width), np.float32))
    _blk = jax.checkpoint(lambda p, v: v + jax.nn.gelu(v @ p["w1"]) @ p["w2"],
                          policy=jax.checkpoint_policies.nothing_saveable)
    def _loss(p, v):
        for q in p:
            v = _blk(q, v)
        return jnp.mean(v ** 2)
    return sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize
               for a, origin in _saved_residuals(_loss, _p, _x)
               if not origin.startswith("from the argument"))

assert remat_floor_bytes(2, 8, 16, 4) == _residual_bytes(2, 8, 16, 64)
### BEGIN HIDDEN TESTS
for _d, _b, _w in ((3, 17, 33), (5, 9, 7)):
    assert remat_floor_bytes(_d, _b, _w, 4) == _residual_bytes(_d, _b, _w, 4 * _w), (_d, _b, _w)
### END HIDDEN TESTS

# %% [markdown]
# ## Try a changed condition: two models, predict first
#
# Two models, the same per-layer remat (`nothing_saveable`):
#
# * the residual blocks above (`x + gelu(x @ w1) @ w2`, hidden four times wider than `x`);
# * a plain chain of `TANH_DEPTH` layers `x = tanh(x @ w)`, square `TANH_WIDTH`.
#
# Before measuring: **what percentage of the compiler's temporary memory will remat save
# for each?** Write two numbers (0 = saves nothing, 100 = saves everything).

# %% nbgrader={"grade": false, "grade_id": "prediction_remat_savings", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
PREDICTED_SAVING_BLOCKS_PCT = None  # a number from 0 to 100
PREDICTED_SAVING_TANH_PCT = None    # a number from 0 to 100
### BEGIN SOLUTION
PREDICTED_SAVING_BLOCKS_PCT = 60.0
PREDICTED_SAVING_TANH_PCT = 0.0
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "prediction_remat_savings_present", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
record_prediction("04_saving_blocks_pct", PREDICTED_SAVING_BLOCKS_PCT, "%")
record_prediction("04_saving_tanh_pct", PREDICTED_SAVING_TANH_PCT, "%")
assert isinstance(PREDICTED_SAVING_BLOCKS_PCT, (int, float)), "write a number for the blocks"
assert isinstance(PREDICTED_SAVING_TANH_PCT, (int, float)), "write a number for the tanh chain"

# %%
from jax._src.ad_checkpoint import saved_residuals


def tanh_chain_loss(ws, v, policy=None):
    def layer(w, h):
        return jnp.tanh(h @ w)

    if policy is not None:
        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, policy))
    for w in ws:
        v = layer(w, v)
    return jnp.mean(v ** 2)

def compiled_numbers(loss, *args):
    c = jax.jit(jax.grad(loss)).lower(*args).compile()
    cost = c.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    residuals = sum(int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize
                    for a, origin in saved_residuals(loss, *args)
                    if not origin.startswith("from the argument"))
    return {"temp": c.memory_analysis().temp_size_in_bytes, "flops": cost["flops"],
            "residuals": residuals}

tk = jax.random.split(jax.random.key(2), TANH_DEPTH + 1)
ws = [jax.random.normal(k, (TANH_WIDTH, TANH_WIDTH)) / np.sqrt(TANH_WIDTH) for k in tk[:-1]]
v = jax.random.normal(tk[-1], (TANH_WIDTH, TANH_WIDTH))
models = {
    "blocks": [compiled_numbers(lambda p, h, pol=pol: impl.block_loss(p, h, pol), params, x)
               if ready(grads_ok) else None for pol in (None, "nothing_saveable")],
    "tanh": [compiled_numbers(lambda p, h, pol=pol: tanh_chain_loss(p, h, pol), ws, v)
             for pol in (None, "nothing_saveable")],
}
saving = {}
for name, pair in models.items():
    if pair[0] is None:
        print(f"not yet: {name}: needs your block_loss")
        continue
    plain, remat = pair
    saving[name] = 100 * (1 - remat["temp"] / plain["temp"])
    print(f"{name:7s} compiler temp {plain['temp'] / MiB:8.2f} -> {remat['temp'] / MiB:8.2f} MiB "
          f"| jaxpr residuals {plain['residuals'] / MiB:8.2f} -> "
          f"{remat['residuals'] / MiB:8.2f} MiB "
          f"| FLOPs x{remat['flops'] / plain['flops']:.2f}")
if "blocks" in saving:
    compare_prediction("04_saving_blocks_pct", PREDICTED_SAVING_BLOCKS_PCT, saving["blocks"], "%")
compare_prediction("04_saving_tanh_pct", PREDICTED_SAVING_TANH_PCT, saving["tanh"], "%")
print(LABEL)


# %% [markdown]
# Why the difference: a block's residuals are its wide hidden activations (four times the
# width of `x`, several of them for `gelu`), and remat leaves only the narrow block input.
# In the tanh chain, each layer's input *is* the previous layer's output: the backward pass
# needs those values with or without remat, so after compilation there is nothing left to
# save, while the recomputation still costs FLOPs. The jaxpr view can disagree with the
# compiler (it may list a value the compiled program recomputes for free): the compiler's
# plan and the observed peak are the numbers that decide.

# %% [markdown]
# ## Diagnose a likely failure: "remat made no difference to peak memory"
#
# **Symptom.** Peak memory read after the remat variant equals (or exceeds) the peak read
# after the plain one. **What to check next:** (1) is remat really applied (a checkpoint
# per block in the jaxpr; the stage 3 check `remat_really_applied`)? (2) where was the peak
# read: a process's high-water mark (`VmHWM`) never goes down, so a reading in a process
# that already ran the plain variant includes it; (3) is the difference smaller than the
# runtime's baseline noise (compare above a baseline)? (4) is it a model where remat saves
# nothing (the tanh chain)?
#
# The planted failure, reproduced: both variants measured in *this* kernel's process, one
# after the other.

# %%
def vmhwm_mib():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")

with not_yet("the planted failure"):
    need(grads_ok)
    same_process = {}
    for policy in (None, "nothing_saveable"):
        jax.block_until_ready(loss_and_grads(params, x, policy))
        same_process[str(policy)] = vmhwm_mib()
    print("planted: VmHWM of this notebook's own process after each variant:")
    for k, val in same_process.items():
        print(f"  after {k:18s} {val:10.1f} MiB")
    print("  the remat variant cannot read lower: the high-water mark includes everything this "
          "process ran before")

# %% [markdown]
# The fix: one fresh process per variant (your `peak_rss_fresh_process`), compared above the
# runtime's baseline, as in the table above.

# %%
with not_yet("the fix"):
    need(table_ok)
    for k in ("None", "nothing_saveable"):
        print(f"fresh process, {k:18s} peak above baseline {results[k]['peak_mib']:8.1f} MiB "
              f"(compiler temp {results[k]['temp_mib']:.1f} MiB)")
    print(LABEL)

# %% [markdown]
# ## Decide what is ready
#
# The evidence of this stage, computed from the cells above:

# %%
evidence = {"stage 3 checks passed": f"{check3['passed']} of {check3['passed'] + check3['failed']}"}
if ready(table_ok):
    plain, remat = results["None"], results["nothing_saveable"]
    evidence.update({
        "gradients equal for every policy": all(r["grads_equal"] for r in results.values()),
        "nothing_saveable: compiler temp saved":
            f"{100 * (1 - remat['temp_mib'] / plain['temp_mib']):.0f}%",
        "nothing_saveable: observed peak above baseline":
            f"{plain['peak_mib']:.1f} -> {remat['peak_mib']:.1f} MiB",
        "nothing_saveable: extra FLOPs": f"{100 * (remat['gflop'] / plain['gflop'] - 1):.0f}%",
        "nothing_saveable: time per call": f"{plain['ms']:.1f} -> {remat['ms']:.1f} ms",
    })
evidence["tanh chain: compiler temp saved"] = f"{saving['tanh']:.0f}%"
for k, val in evidence.items():
    print(f"{k:48s} {val}")
print(LABEL)

# %% [markdown]
# **Your decision.** One accept/reject statement: *should the training run adopt
# `nothing_saveable` remat on every block?* Back it with equal gradients, the memory saved
# in each of the three views, the extra FLOPs and time, and whether memory is the limit you
# are actually hitting.

# %% [markdown] nbgrader={"grade": true, "grade_id": "decision_04", "locked": false, "points": 2, "schema_version": 3, "solution": true, "task": false}
# Accept for the residual blocks when memory is the binding limit: gradients are equal, the
# saved residuals and the compiler's temp shrink several-fold, the observed peak in a fresh
# process drops, at the cost of roughly a third more FLOPs and a slower step. Reject it for
# the plain tanh chain: it saves no memory after compilation and only adds FLOPs. CPU
# figures; on an accelerator re-measure HBM peak the same way before deciding.

"""sharded-training stage 2: count-weighted global updates. The learner's shard_map
gradient is compared with one device's gradient over the valid rows only, with equal,
unequal and empty shards; a wrong answer is diagnosed by what its numbers match (the mean
of per-shard means, the gradient of each shard's mean under check_vma with or without a
pmean, a psum after grad, a divisor N times too small (the loss N times off too), one
shard's part alone), replaying the learner on unequal counts where equal ones cannot tell
two causes apart. The learner's code runs in the learner
process, on the checker's mesh and placement built there from the checker's data; the
gradients come back as data. Whether it uses shard_map is read here from its program
(exported as StableHLO): per-shard code is a manual computation.

On N devices, params replicated, check_vma on, with equal counts, the mistakes the hints
name come out N times the right gradient (grad of each shard's mean loss, with or without
a pmean on top; a psum after grad; a divisor N times too small), N^2 times (a psum after
grad of each shard's mean) and equal to it until the counts differ (the mean of per-shard
means): 8x, 64x and 1x on the checker's 8 CPU devices. The
checker computes each such value itself and names the one the learner's gradient equals;
what a right gradient does is the stage's question, and the checker holds only one
device's gradient over the valid rows (``ref_grads``)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from sharded_harness import ATOL, N_DEVICES, RTOL, checker
from sharded_learner import ALL, Value, ask, call, checker_mesh_there, learner_fn, place
from sharded_program import exported, manual_computation
from sharded_reference import random_mask, ref_init_params, stage_batch
from sharded_trees import flat, host

from coursekit.checking.errors import CheckFailed, GradedByInstructor, LearnerCodeError
from coursekit.checking.graded import instructor_module
from coursekit.checking.values import fail_unless
from coursekit.workloads import classifier


def ref_grads(params, batch) -> tuple[float, dict]:
    """Single device, only the valid rows: what every correct sharded version equals."""
    keep = batch["mask"] > 0
    x, y = jnp.asarray(batch["x"][keep]), jnp.asarray(batch["y"][keep])
    value, grads = jax.value_and_grad(classifier.loss)(params, x, y)
    return float(value), grads


def mean_of_means(params, batch) -> dict:
    """The wrong answer on purpose: the plain mean over shards of per-shard means."""
    xs = np.split(batch["x"], N_DEVICES)
    ys = np.split(batch["y"], N_DEVICES)
    ms = np.split(batch["mask"], N_DEVICES)
    per = [jax.grad(classifier.loss)(params, jnp.asarray(x), jnp.asarray(y), jnp.asarray(m))
           for x, y, m in zip(xs, ys, ms)]
    return jax.tree.map(lambda *g: sum(g) / len(g), *per)


def vec(tree) -> np.ndarray:
    """A gradient as one vector: a checker-side tree, or leaves {name: array} returned
    as data (the same names, the same order)."""
    leaves = tree if isinstance(tree, dict) and all(k.startswith("[") for k in tree) \
        and not any(isinstance(v, dict) for v in tree.values()) else flat(tree)
    return np.concatenate([np.ravel(host(v)).astype(np.float64)
                           for _, v in sorted(leaves.items())])


def shard_parts(params, batch) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Per shard, as vectors: the two values one device's local computation gives with
    nothing summed over the shards (instructor-only: together they are the stage's
    answer). Empty in a learner's copy, where the hint then names no shard."""
    try:
        parts = instructor_module("sharded_training").shard_parts(params, batch, N_DEVICES)
    except GradedByInstructor:
        return []
    return [(vec(a), None if b is None else vec(b)) for a, b in parts]


def close(a, b) -> bool:
    return bool(np.linalg.norm(a - b) <= 1e-3 * np.linalg.norm(b))


N = N_DEVICES
# Each hint says what the learner's gradient equals (the checker computed that value
# itself), never what a right gradient does: that is the stage's question.
HINTS = {
    "nan": ("NaN or inf from inputs that hold none, on a batch where some shards have no "
            "valid rows: a value divided by a count that is 0 on such a shard reached the "
            "gradient. A shard without valid rows must add nothing to the update"),
    "grad_of_shard_mean": (
        f"yours is {N}x the mean of per-shard means: the sum, over the {N} shards, of "
        "each shard's gradient of its own *mean* loss (the same value with or without a "
        f"pmean over the shards on top). That is {N}x the true gradient when the counts "
        "are equal, and weighs each shard by its mean, not by its valid rows, when they "
        "differ. What must hold: every valid row of the global batch weighs the same, "
        "whichever shard holds it"),
    "psum_after_grad": (
        f"{N}x the true gradient at every count, equal and unequal (every valid row "
        f"weighs the same, {N} times too much), while the loss is not {N}x off: the "
        f"gradient went through one reduction over the {N} shards more than the loss"),
    "divisor": (
        f"{N}x the true gradient and {N}x the true loss at every count, equal and "
        f"unequal: what a divisor {N} times too small gives. The loss is the mean over "
        "every valid row of the global batch"),
    "psum_after_grad_of_mean": (
        f"{N * N}x the mean of per-shard means: {N} times the sum, over the shards, of "
        "each shard's gradient of its own mean loss. Each shard is weighed by its mean, "
        f"not by its valid rows, and the result is {N} times more again"),
    "mean_of_means": (
        "this is the mean of per-shard means: a shard with {least} valid rows weighs as "
        "much as one with {most}; every valid row of the global batch must weigh the same"),
    "one_shard": (
        "yours equals what shard {shard} computes from its own rows alone, with nothing "
        "from the other shards: the gradient must cover the valid rows of every shard"),
}


def padded_rows_counted(params, batch) -> np.ndarray:
    """The gradient where the mask zeroed the padded rows' inputs instead of leaving
    their loss out (each padded row then adds the loss of the bias alone), over the
    valid rows' count."""
    x, y, m = (jnp.asarray(batch[k]) for k in ("x", "y", "mask"))
    valid = float(np.sum(batch["mask"]))
    g = jax.grad(lambda p: classifier.loss_sum(p, x * m[:, None].astype(x.dtype), y,
                                               jnp.ones_like(m)) / valid)(params)
    return vec(g)


def diagnose(got: np.ndarray, ref: np.ndarray, mom: np.ndarray | None, parts=None,
             replay_unequal=None, loss_scale: float | None = None,
             counts=(1, 2), padded=None) -> str:
    """The hint for ``got`` against the true gradient ``ref`` and the mean of per-shard
    means ``mom`` (None when a shard is empty). ``parts()`` gives shard_parts;
    ``replay_unequal()`` gives (got, ref, mom) of the learner on unequal counts, for the
    one case equal counts cannot tell apart. Both run only here, on failure.
    ``loss_scale``: the learner's loss over the true loss, on the same batch (N with the
    gradient's N: one divisor N times too small, not a collective on the gradient).
    ``counts``: the valid rows per shard of the batch, named in the hint."""
    if not np.all(np.isfinite(got)):
        return HINTS["nan"]
    if close(got, N * N * ref) or (mom is not None and close(got, N * N * mom)):
        return HINTS["psum_after_grad_of_mean"]
    n_ref = close(got, N * ref)
    n_mom = mom is not None and close(got, N * mom)
    if n_ref and n_mom and replay_unequal is not None:   # equal counts: N*ref == N*mom
        u_got, u_ref, u_mom = replay_unequal()
        n_ref, n_mom = close(u_got, N * u_ref), close(u_got, N * u_mom)
    if n_mom and not n_ref:
        return HINTS["grad_of_shard_mean"]
    if n_ref and not n_mom:
        if loss_scale is not None and math.isclose(loss_scale, N, rel_tol=1e-3):
            return HINTS["divisor"]
        return HINTS["psum_after_grad"]
    if n_ref:
        return (f"{N}x the true gradient, which at these equal counts is also {N}x the "
                f"mean of per-shard means; {HINTS['grad_of_shard_mean']}")
    if mom is not None and close(got, mom):
        return HINTS["mean_of_means"].format(least=min(counts), most=max(counts))
    for shard, (s, m) in enumerate(parts() if parts is not None else ()):
        if close(got, s) or (m is not None and close(got, m)):
            return HINTS["one_shard"].format(shard=shard)
    if padded is not None and close(got, padded()):
        return ("yours is the gradient with the padded rows' inputs zeroed and their loss "
                "still in the sum: a zeroed row still has a loss (its logits come from the "
                "biases alone), so it still pulls the parameters; the mask must leave the "
                "padded rows out of the loss itself")
    ratio = np.linalg.norm(got) / max(np.linalg.norm(ref), 1e-30)
    return (f"norm ratio yours/expected = {ratio:.3g}; compare with one device's gradient "
            "over the valid rows")


ROWS = {"devices": ALL, "spec": ["data"]}
REPLICATED = {"devices": ALL, "spec": []}


def checker_mesh(impl):
    """Stage 2 uses the checker's own mesh and placement (built in the learner process
    from the checker's data), so it does not depend on stage 1's functions."""
    return checker_mesh_there(impl)


def learner_grads(impl, mesh, params, batch) -> tuple:
    """The learner's (loss, grads {name: array}) on the checker's placement."""
    placed = place(impl, batch, ROWS)
    params_on_mesh = place(impl, params, REPLICATED)
    out = call(impl, "global_grads", params_on_mesh, placed, mesh)
    fail_unless(out.type == "tuple" and out.length == 2, "global_grads must return "
                "(loss, grads)", yours=out.type)
    loss = out.leaves.get("[0]")
    grads = {k[3:]: v for k, v in out.leaves.items() if k.startswith("[1]")}
    return loss, grads


def unequal_counts(rng, rows: int) -> list[int]:
    counts = [int(v) for v in rng.integers(1, rows + 1, N_DEVICES)]
    counts[0], counts[1] = 1, rows  # never all equal
    return counts


def check_global_grads(impl, ctx, salt: str, counts, what: str) -> None:
    learner_fn(impl, "global_grads")
    mesh = checker_mesh(impl)
    rng = ctx.rng(salt)
    rows = int(rng.integers(5, 12)) * 2 + 1
    counts = [min(c, rows) for c in counts]
    batch = stage_batch(ctx, salt + "-batch", rows, counts)
    params = ref_init_params(jax.random.key(int(rng.integers(0, 2**30))))
    loss, grads = learner_grads(impl, mesh, params, batch)
    ref_loss, ref = ref_grads(params, batch)
    names = sorted(flat(params))
    fail_unless(sorted(grads) == names, f"{what}: grads is not a tree like params",
                yours=sorted(grads), expected=names,
                hint="the gradient has the structure of params: one leaf per parameter")
    got, want = vec(grads), vec(ref)
    mom = vec(mean_of_means(params, batch)) if min(counts) > 0 else None
    ok = np.all(np.isfinite(got)) and np.allclose(got, want, rtol=RTOL, atol=ATOL)
    if not ok:
        def replay_unequal():
            other = stage_batch(ctx, salt + "-diagnose", rows, unequal_counts(rng, rows))
            _, g = learner_grads(impl, mesh, params, other)
            return vec(g), vec(ref_grads(params, other)[1]), vec(mean_of_means(params, other))

        try:
            loss_scale = float(host(loss)) / ref_loss if ref_loss else None
        except (TypeError, ValueError):
            loss_scale = None
        hint = diagnose(got, want, mom, parts=lambda: shard_parts(params, batch),
                        replay_unequal=replay_unequal if len(set(counts)) == 1 else None,
                        loss_scale=loss_scale, counts=counts,
                        padded=(lambda: padded_rows_counted(params, batch))
                        if np.sum(batch["mask"]) else None)
        raise CheckFailed(f"{what}: gradients differ from one device's over the valid rows "
                          f"(valid rows per shard {list(counts)})", yours=got,
                          expected=want, hint=hint)
    kind = np.asarray(host(loss))
    fail_unless(kind.shape == () and kind.dtype == np.float32,
                f"{what}: the loss is not a float32 scalar",
                yours=f"shape {kind.shape}, dtype {kind.dtype}",
                expected="shape (), dtype float32",
                hint="one number for the whole batch, in the dtype the model computes in")
    loss = float(kind)
    if not math.isclose(loss, ref_loss, rel_tol=RTOL, abs_tol=ATOL):
        raise CheckFailed(f"{what}: the loss is not the mean over all valid rows",
                          yours=loss, expected=ref_loss,
                          hint=loss_hint(params, batch, loss, counts))


def shard_mean_losses(params, batch) -> list[float | None]:
    """Each shard's mean loss over its own valid rows (None for a shard with none)."""
    return [float(classifier.loss_sum(params, jnp.asarray(x), jnp.asarray(y),
                                      jnp.asarray(m)) / np.sum(m)) if np.sum(m) else None
            for x, y, m in zip(np.split(batch["x"], N_DEVICES),
                               np.split(batch["y"], N_DEVICES),
                               np.split(batch["mask"], N_DEVICES))]


def loss_hint(params, batch, loss: float, counts) -> str:
    """What a wrong loss equals, where the checker can tell: the plain mean over shards
    of each shard's own mean (an empty shard's taken as 0, or left out), computed here
    from the counts it drew; else the contract."""
    means = shard_mean_losses(params, batch)
    held = [v for v in means if v is not None]
    total = int(np.sum(batch["mask"]))
    whole = float(classifier.loss_sum(params, jnp.asarray(batch["x"]), jnp.asarray(batch["y"]),
                                      jnp.asarray(batch["mask"])))
    if total > 1 and math.isclose(loss, whole, rel_tol=RTOL, abs_tol=ATOL):
        return (f"your loss equals the sum of the loss over the {total} valid rows "
                f"({whole:.6g}), not divided by their count: the loss is their mean, as "
                "one device's is, whichever shard holds each row")
    for value, how in ((sum(v or 0.0 for v in means) / len(means),
                        f"over all {len(means)} shards"),
                       (sum(held) / max(len(held), 1), "over the shards with valid rows")):
        if math.isclose(loss, value, rel_tol=RTOL, abs_tol=ATOL):
            return (f"your loss equals the mean {how} of each shard's own mean loss "
                    f"({value:.6g}): with valid rows per shard {list(counts)}, that weighs "
                    "a row on a shard with few valid rows more than one on a full shard. "
                    "The loss is the mean over every valid row of the global batch, "
                    "whichever shard holds it")
    return ("the loss is the mean over every valid row of the global batch, whichever "
            "shard holds it")


@checker.check(2)
def valid_counts_per_shard(impl, ctx):
    learner_fn(impl, "shard_valid_counts")
    mesh = checker_mesh(impl)
    rng = ctx.rng("counts")
    rows = int(rng.integers(4, 10)) * 2 + 1
    counts = rng.integers(0, rows + 1, N_DEVICES)
    mask = random_mask(rng, rows, counts)
    placed = place(impl, mask, ROWS)
    # the learner's own call, with every shard_map it traces counted there (caches
    # cleared first): per-shard code is what this stage asks for
    answer = ask(impl, "call_watched", learner_fn(impl, "shard_valid_counts"), placed.kept,
                 mesh)
    value = Value(answer["value"])
    raw = np.asarray(host(value.leaves.get("", None)))
    got = raw.astype(np.int64) if np.all(np.isfinite(raw)) else raw
    fail_unless(got.shape == (N_DEVICES,) and np.array_equal(got, counts),
                "valid rows per shard differ", yours=raw, expected=np.asarray(counts),
                hint="each device's count is the number of valid rows in its own piece "
                "of the mask, one number per device, in mesh order")
    # the contract's type: a host (numpy) array of ints, checked once the values are right
    where = value.placement.get("", {})
    fail_unless(np.issubdtype(raw.dtype, np.integer),
                f"the counts are right, but as {raw.dtype} values: counts are ints",
                yours=f"{value.type} of dtype {raw.dtype}",
                expected="a numpy array of an integer dtype",
                hint="a mask's sum is a float in the mask's dtype: shard_valid_counts "
                "returns counts, which the contract types as ints")
    fail_unless(not where.get("is_array") and value.type == "ndarray",
                "the counts are right, but not a host (numpy) array",
                yours=f"{value.type} (on devices {where.get('devices')})"
                if where.get("is_array") else value.type,
                expected="numpy.ndarray of ints, on the host",
                hint="the contract returns the counts on the host: a jax.Array stays on "
                "the devices")
    fail_unless(answer.get("shard_maps", 0) > 0, "shard_valid_counts ran no shard_map: the "
                "counts are right, but they were not computed per shard",
                yours="0 shard_maps traced during your call (JAX's caches cleared first)",
                expected="a jax.shard_map in which each device sums its own piece of the "
                "mask", hint="the right counts, computed with no shard_map: the contract asks "
                "for them per shard, each device counting its own piece of the mask")
    counts_on_another_mesh(impl, ctx)


def counts_on_another_mesh(impl, ctx) -> None:
    """A second call in the same process, on a mesh of fewer devices (drawn, in a drawn
    order) than the first call's 8: its counts are this mesh's, one per device. A
    computation kept from the earlier call still runs over the first mesh: JAX refuses
    the mask, naming the first mesh's devices (or its shape, when the mask's rows do not
    divide by its device count), or the counts come back one per device of the first
    mesh."""
    rng = ctx.rng("counts-second-mesh")
    size = int(rng.integers(3, N_DEVICES))
    devices = [int(d) for d in rng.choice(N_DEVICES, size, replace=False)]
    rows = int(rng.integers(4, 10))
    counts = rng.integers(0, rows + 1, size)
    placed = place(impl, random_mask(rng, rows, counts), {"devices": devices,
                                                           "spec": ["data"]})
    what = (f"a second call, with a mask on a mesh of {size} devices {devices} after a "
            f"first call on a mesh of all {N_DEVICES}")
    try:
        raw = np.asarray(host(call(impl, "shard_valid_counts", placed,
                                   checker_mesh_there(impl, devices)).leaves.get("", None)))
    except LearnerCodeError as err:
        text = str(err)
        named = (f"its devices {ALL}" if str(ALL) in text else
                 f"its shape ({N_DEVICES},)" if f"shape ({N_DEVICES},)" in text else None)
        if err.kind != "exception" or named is None:
            raise
        raise CheckFailed(f"{what}: your function raised", yours=text[:600],
                          expected=f"{size} counts, one per device of the mesh it was given",
                          hint=f"the error names a mesh of {N_DEVICES} devices ({named}): "
                          f"the first call's mesh, not this call's ({size} devices "
                          f"{devices}). The second call ran a computation made for the "
                          "earlier call's mesh, kept from the first call; each call counts "
                          "over the mesh it is given") from None
    shape_hint = (f"{raw.size} counts: one per device of the first call's mesh ({N_DEVICES} "
                  f"devices), not of this call's ({size}): the counts were computed over the "
                  "earlier call's mesh, kept from the first call; each call counts over the "
                  "mesh it is given") if raw.size == N_DEVICES else (
        "the counts of the mesh given, one per device in mesh order; the first call, on "
        f"all {N_DEVICES} devices, was right")
    fail_unless(raw.shape == (size,) and np.array_equal(raw, counts),
                f"{what}: valid rows per shard differ", yours=raw,
                expected=np.asarray(counts), hint=shape_hint)


@checker.check(2)
def uses_shard_map(impl, ctx):
    fn = learner_fn(impl, "global_grads")
    mesh = checker_mesh(impl)
    data = stage_batch(ctx, "jaxpr", 3)
    params = ref_init_params(jax.random.key(1))
    desc = ask(impl, "export", fn, place(impl, params, REPLICATED).kept,
               place(impl, data, ROWS).kept, extra=(mesh,))
    text = exported(desc, jax.tree.leaves((params, data))).mlir_module()
    fail_unless(manual_computation(text), "global_grads does not use jax.shard_map",
                yours="no per-shard (manual) computation in its exported program",
                expected="a shard_map",
                hint="the program holds no per-shard computation: the stage asks for "
                "the per-shard code itself, run with jax.shard_map (global_grads' "
                "docstring)")


@checker.check(2)
def equal_counts_not_8x(impl, ctx):
    rng = ctx.rng("equal")
    c = int(rng.integers(3, 11))
    check_global_grads(impl, ctx, "equal", [c] * N_DEVICES, "equal valid counts")


@checker.check(2)
def unequal_counts_weighted(impl, ctx):
    rng = ctx.rng("unequal")
    counts = [int(v) for v in rng.integers(1, 30, N_DEVICES)]
    counts[int(rng.integers(0, N_DEVICES))] = 1
    counts[int(rng.integers(0, N_DEVICES))] = 99  # clipped to a full shard
    check_global_grads(impl, ctx, "unequal", counts, "unequal valid counts")


@checker.check(2)
def empty_shard_handled(impl, ctx):
    rng = ctx.rng("empty")
    counts = [int(v) for v in rng.integers(1, 30, N_DEVICES)]
    for d in rng.choice(N_DEVICES, 2, replace=False):
        counts[int(d)] = 0
    check_global_grads(impl, ctx, "empty", counts, "shards with no valid rows")

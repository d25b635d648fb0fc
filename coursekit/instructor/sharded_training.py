"""sharded-training's answers the checker needs: where each device's piece of an array
lies (``describe_placement``'s ``pieces``), the whole placement report
(``describe_placement`` itself), one training step on one device (``make_train_step``'s
numbers) and each shard's part of ``global_grads`` (stage 2's hint for one shard alone).
Instructor-only (``coursekit.checking.graded``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.workloads import classifier


def spans(leaf) -> dict[int, list[list[int]]]:
    """{device id: [[start, stop] per dimension]} of the pieces this process can see."""
    return {s.device.id: [list(sl.indices(dim)[:2]) for sl, dim in zip(s.index, leaf.shape)]
            for s in leaf.addressable_shards}


def placement_report(tree) -> dict:
    """What ``describe_placement(tree)`` must return."""
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if not isinstance(leaf, jax.Array):
            continue
        spec = getattr(leaf.sharding, "spec", None)
        out[jax.tree_util.keystr(path)] = {
            "shape": list(leaf.shape), "spec": "" if spec is None else str(spec),
            "devices": sorted(d.id for d in leaf.sharding.device_set),
            "pieces": spans(leaf)}
    return out


def reference_step(config: dict):
    """One step on one device, by hand: the numbers make_train_step must give (SGD with
    momentum as optax.sgd: m = g + momentum * m; p -= lr * m)."""
    lr, mu, noise = config["lr"], config["momentum"], config["noise"]

    @jax.jit
    def step(params, momentum, key, x, y, mask):
        key, sub = jax.random.split(key)
        x = x + noise * jax.random.normal(sub, x.shape, x.dtype)

        def loss(p):
            logp = jax.nn.log_softmax(jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])
            per_row = -jnp.take_along_axis(logp, y[:, None], axis=1)[:, 0]
            return jnp.sum(per_row * mask) / jnp.sum(mask)

        value, grads = jax.value_and_grad(loss)(params)
        momentum = jax.tree.map(lambda m, g: g + mu * m, momentum, grads)
        params = jax.tree.map(lambda p, m: p - lr * m, params, momentum)
        return params, momentum, key, value
    return step


def shard_parts(params, batch, shards: int) -> list[tuple[dict, dict | None]]:
    """Per shard of ``batch`` (host arrays split in ``shards`` row pieces): (gradient of
    its loss sum / the global valid count, gradient of its own mean loss or None where it
    has no valid rows): what one device's local computation gives with nothing summed."""
    total = max(float(np.sum(batch["mask"])), 1.0)
    parts = []
    for x, y, m in zip(*(np.split(batch[k], shards) for k in ("x", "y", "mask"))):
        args = (jnp.asarray(x), jnp.asarray(y), jnp.asarray(m))
        part_sum = jax.tree.map(lambda g: g / total,
                                jax.grad(classifier.loss_sum)(params, *args))
        part_mean = jax.grad(classifier.loss)(params, *args) if m.sum() else None
        parts.append((part_sum, part_mean))
    return parts

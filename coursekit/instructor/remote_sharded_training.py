"""sharded-training's instructor-only code that runs in the learner process
(``coursekit.workloads.inspectors`` finds its tables): the index each device holds of a
leaf, read the way ``describe_placement`` must report it, and stage 4's timing step, a
complete data-parallel train step. A learner's release does not hold it: the checks that
need it are graded by the instructor (``coursekit.checking.graded``)."""

from __future__ import annotations

import jax
import numpy as np

from coursekit.instructor.sharded_training import spans
from coursekit.workloads.remote_sharded_training import is_key


def where(leaf, shards: bool = False) -> dict:
    """A jax.Array's spec, the index each device holds (``pieces``) and, with ``shards``,
    each piece's data."""
    out = {"spec": str(getattr(leaf.sharding, "spec", "")),
           "pieces": {str(device): index for device, index in spans(leaf).items()}}
    if shards:
        out["shard_data"] = {str(s.device.id): np.asarray(
            jax.random.key_data(s.data) if is_key(leaf) else s.data)
            for s in leaf.addressable_shards}
    return out


def timing_step(lr: float, momentum: float, noise: float, loss_scale: float = 1.0):
    """Stage 4's fresh jitted data-parallel step (never called yet): the checker's own
    single-device reference step (``ref_step_fn``) on a state dict, written the same way
    in the sharded-training checker), its loss times ``loss_scale`` (a power of two: the
    same loss, exactly, at another magnitude). Marked ``watch_ready``: the call counter
    wrapped around it records when each call's output was last seen unfinished
    (``coursekit.checking.probes.CallCounter``)."""
    import jax.numpy as jnp
    mu = momentum

    @jax.jit
    def fn(state, batch):
        key, sub = jax.random.split(state["key"])
        x = batch["x"] + noise * jax.random.normal(sub, batch["x"].shape, batch["x"].dtype)

        def loss(p):
            logp = jax.nn.log_softmax(jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])
            per_row = -jnp.take_along_axis(logp, batch["y"][:, None], axis=1)[:, 0]
            return jnp.sum(per_row * batch["mask"]) / jnp.sum(batch["mask"])

        value, grads = jax.value_and_grad(loss)(state["params"])
        moment = jax.tree.map(lambda m, g: g + mu * m, state["momentum"], grads)
        params = jax.tree.map(lambda p, m: p - lr * m, state["params"], moment)
        return {"params": params, "momentum": moment, "key": key}, value * loss_scale

    def step(state, batch):
        return fn(state, batch)
    step.watch_ready = True
    return step


WORKLOADS = {"sharded-training/timing_step": timing_step}

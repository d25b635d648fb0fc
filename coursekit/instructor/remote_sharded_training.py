"""sharded-training's instructor-only code that runs in the learner process
(``coursekit.workloads.inspectors`` finds its tables): a complete data-parallel train
step (stage 4 timed it until it profiled the public stand-in step of
``coursekit/workloads/remote_sharded_training_timing.py``; kept as the train step the
release scan plants back to find). A learner's release does not hold it."""

from __future__ import annotations

import jax


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

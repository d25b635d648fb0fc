"""sharded-training stage 4's timing workload, built in the learner process by name
(``Workload("sharded-training/stand_in_step", ...)``) and in the checker's own process, which
times the same function itself.

A stand-in with a train step's shape and about its cost, and no training in it:
``step(state, batch) -> (new_state, loss)`` where the loss is the mean of ``passes`` noisy
forward passes of the course classifier (its public ``classifier.loss``, each with noise
drawn from a split of the state's key), with no gradient and no update. What stage 4
grades is how the learner's ``profile_train_step`` measures a step, so any step of that
shape serves, and a learner's copy holds no train step. The state's ``momentum`` arrives
as host (numpy) arrays and leaves on the devices (scaled), so a state fed back from the
step's output is placed differently and the next call compiles again. Marked
``watch_ready``: the call counter wrapped around it records when each call's output was
last seen unfinished (``coursekit.checking.probes.CallCounter``).
"""

from __future__ import annotations

import jax

from coursekit.workloads import classifier


def stand_in_step(noise: float, momentum: float, passes: int = 3, loss_scale: float = 1.0):
    """A fresh jitted stand-in step (never called yet); its loss times ``loss_scale`` (a
    power of two: the same loss, exactly, at another magnitude)."""

    @jax.jit
    def fn(state, batch):
        key, total = state["key"], 0.0
        for _ in range(passes):
            key, sub = jax.random.split(key)
            x = batch["x"] + noise * jax.random.normal(sub, batch["x"].shape, batch["x"].dtype)
            total = total + classifier.loss(state["params"], x, batch["y"], batch["mask"])
        kept = jax.tree.map(lambda m: momentum * m, state["momentum"])
        return {"params": state["params"], "momentum": kept, "key": key}, \
            total / passes * loss_scale

    def step(state, batch):
        return fn(state, batch)
    step.watch_ready = True
    step.jitted = fn  # the checker's own process times and evaluates this
    return step


WORKLOADS = {"sharded-training/stand_in_step": stand_in_step}

"""Workloads a checker hands to learner code by name, built the same way on both sides.

A check never sends code to the learner process: it sends ``Workload(name, **params)``
(``coursekit.checking.codec``) and the learner process builds the function here, from
the same source the checker uses for its own reference measurement. Each builder returns
a fresh callable (a fresh ``jax.jit`` compiles on its first call).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp


def stage1_work(scale: float) -> Callable:
    """performance-audit stage 1: ``tanh(a @ a * scale) @ a`` (not jitted)."""
    def work(a):
        return jnp.tanh(a @ a * scale) @ a
    return work


def mlp_step(width: int = 96) -> Callable:
    """performance-audit stage 2: a small jitted step whose trace holds nested
    PjitFunction events."""
    w = jnp.ones((width, width), jnp.float32) / width

    @jax.jit
    def step(x):
        return jnp.tanh(x @ w) @ w
    return step


CATALOG: dict[str, Callable[..., Callable]] = {
    "performance-audit/stage1": lambda scale: jax.jit(stage1_work(scale)),
    "performance-audit/mlp_step": mlp_step,
    "jnp.matmul": lambda: jnp.matmul,
    "jnp.multiply": lambda: jnp.multiply,  # an array times a Python scalar: one array arg
}


def build(name: str, params: dict) -> Callable:
    """The callable a ``Workload(name, **params)`` stands for (this table, then each
    project's ``coursekit/workloads/remote_<project>.py`` WORKLOADS)."""
    from coursekit.workloads.inspectors import missing, project_tables
    table = CATALOG if name in CATALOG else project_tables("WORKLOADS")
    if name not in table:
        raise missing("workload", name)
    return table[name](**params)

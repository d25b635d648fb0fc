"""Workloads the performance-audit checker hands to learner code by name, beside
``coursekit.workloads.catalog`` (merged into it by ``catalog.build``). The checker builds
the same functions in its own process for its reference figures."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.checking.probes import HostReadProbe
from coursekit.workloads import catalog


def host_metric_step(scale: float):
    """A step whose first output leaf is a host value ready at once (a step count kept on
    the host) and whose second is the stage-1 device work. A host read of every leaf waits
    for the work; a read of the first leaf alone waits for nothing. The first leaf is a
    ``HostReadProbe``: the call counter reports which calls had it read to the host, the
    one sign on CPU that a timing used the host read it reports (both syncs take the same
    time there)."""
    work = jax.jit(catalog.stage1_work(scale))

    def step(a):
        return HostReadProbe(np.asarray(a.shape[0], np.int32)), work(a)
    return step


def compiles_again(scale: float):
    """The stage-1 work as a step that compiles again on its second call (as a step whose
    state changes type after its first call does: a weakly typed start, a cache keyed on
    a shape that call 0 changes), then runs warm: call 0 and call 1 each compile once. A
    ``time_fn`` with ``warmup >= 1`` meets the second compile in its first warm-up call,
    which ``compiles_warmed`` counts."""
    first, then = jax.jit(catalog.stage1_work(scale)), jax.jit(catalog.stage1_work(scale))
    calls = [0]

    def step(a):
        calls[0] += 1
        return (first if calls[0] == 1 else then)(a)
    return step


def fused_reduce(a):
    """``sum(tanh(a) * 2 + 1, axis=0)``: a program the compiler fuses, so its compiled
    cost (one read of ``a``) differs from the unoptimised lowering's (every intermediate)."""
    return jnp.sum(jnp.tanh(a) * 2.0 + 1.0, axis=0)


def stage1_repeated(scale: float, repeats: int):
    """The stage-1 step ``tanh(v @ a * scale)`` repeated ``repeats`` times in one jitted
    program (a loop the compiler keeps): on an accelerator, a run far longer than its
    compile on a modest input."""
    def run(a):
        return jax.lax.fori_loop(0, int(repeats), lambda i, v: jnp.tanh(v @ a * scale), a)
    return jax.jit(run)


def square_matmul():
    """``a @ a``, jitted: the checker's own matmul of the peak-FLOP/s check."""
    return jax.jit(lambda a: a @ a)


def sleeper(seconds: float):
    """A jitted step that sleeps ``seconds`` on the host inside each call (a callback the
    output depends on, so a wait for the output waits for the nap): wall time with next to
    no CPU, which a CPU-time clock does not see."""
    import time

    def nap(a):
        time.sleep(seconds)
        return a

    def step(a):
        return jax.pure_callback(nap, jax.ShapeDtypeStruct(a.shape, a.dtype), a) + 1.0
    return jax.jit(step)


def in_place():
    """``x * 2 + 1`` jitted with its input donated (each output is the next call's input):
    the checker's reference in-place pass of the bandwidth check, on the CPU."""
    return jax.jit(lambda v: v * 2.0 + 1.0, donate_argnums=0)


def read_sum():
    """``jnp.sum``, jitted: the checker's reference pass of the bandwidth check (a read of
    every byte)."""
    return jax.jit(jnp.sum)


WORKLOADS = {
    "performance-audit/read_sum": read_sum,
    "performance-audit/sleeper": sleeper,
    "performance-audit/stage1_repeated": stage1_repeated,
    "performance-audit/square_matmul": square_matmul,
    "performance-audit/host_metric_step": host_metric_step,
    "performance-audit/fused_reduce": lambda: fused_reduce,
    "performance-audit/compiles_again": compiles_again,
}

"""coursekit.compat.compiled_plan (issue 51): a compiled program's cost and memory
analyses read on every backend, including a fake one that returns what the TPU v5e
returned under JAX 0.10.2 (``lower(...).cost_analysis()`` None, temp bytes 0 with the
scratch in the plan's peak, no ``total_allocation_bytes``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from coursekit.compat import compiled_plan


def chain(x):
    return jnp.tanh(jnp.sin(x) * 2 + 1)


def remat_blocks(policy):
    def block(w, h):
        return h + jax.nn.gelu(h @ w) @ w.T

    step = block if policy is None else jax.checkpoint(
        block, policy=getattr(jax.checkpoint_policies, policy))

    def loss(ws, x):
        for w in ws:
            x = step(w, x)
        return jnp.mean(x ** 2)
    return jax.value_and_grad(loss)


class Device:
    platform = "tpu"


class Sharding:
    device_set = {Device()}


class TpuPlan:
    """What memory_analysis() returned on the chip (JAX 0.10.2): temp 0, the scratch in
    the plan's peak, no total_allocation_bytes."""
    argument_size_in_bytes = 800_000
    output_size_in_bytes = 400_000
    temp_size_in_bytes = 0
    peak_memory_in_bytes = 26_400_000


class TpuProgram:
    input_shardings = ((Sharding(),), {})

    def cost_analysis(self):
        return None

    def memory_analysis(self):
        return TpuPlan()


def test_cpu_costs_of_the_lowering_and_the_compiled_program():
    x = jnp.ones((64, 64))
    lowered = jax.jit(chain).lower(x)
    assert compiled_plan.lowered_cost(lowered)["flops"] > 0
    compiled = compiled_plan.compiled_cost(lowered.compile())
    assert compiled["transcendentals"] == 2 * 64 * 64
    assert compiled_plan.backend_of(lowered.compile()) == "cpu"


def test_no_cost_analysis_is_said_by_name():
    with pytest.raises(compiled_plan.PlanUnavailable, match="not available on this "
                       r"backend \(tpu, JAX"):
        compiled_plan.lowered_cost(TpuProgram())
    with pytest.raises(compiled_plan.PlanUnavailable, match="compiled program"):
        compiled_plan.compiled_cost(TpuProgram())


def test_a_list_of_one_cost_dict_is_read_as_the_dict():
    class Old:
        input_shardings = ()

        def cost_analysis(self):
            return [{"flops": 3.0, "bytes accessed": 8.0}]
    assert compiled_plan.compiled_cost(Old()) == {"flops": 3.0, "bytes accessed": 8.0}


def test_tpu_scratch_is_read_from_the_plans_peak():
    plan = compiled_plan.memory_plan(TpuProgram())
    assert plan["total_allocation_bytes"] is None and plan["backend"] == "tpu"
    scratch = compiled_plan.scratch_bytes(TpuProgram())
    assert scratch == {"bytes": 26_400_000 - 1_200_000,
                       "source": "peak_memory_in_bytes - arguments - outputs",
                       "backend": "tpu"}


def test_cpu_scratch_is_the_temp_and_remat_plans_less():
    ws = [jnp.ones((48, 192)) * 0.01 for _ in range(3)]
    x = jnp.ones((151, 48))
    plans = {p: compiled_plan.scratch_bytes(jax.jit(remat_blocks(p)).lower(ws, x).compile())
             for p in (None, "nothing_saveable")}
    assert all(s["source"] == "temp_size_in_bytes" and s["backend"] == "cpu"
               for s in plans.values())
    assert 0 < plans["nothing_saveable"]["bytes"] < plans[None]["bytes"]

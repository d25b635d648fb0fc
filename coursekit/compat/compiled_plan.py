"""A compiled program's cost analysis and memory analysis, read the one way every backend
and JAX version of the course's range allows (issue 51).

What differs, measured:

* ``jax.jit(f).lower(x).cost_analysis()`` (the unoptimised lowering's count) returns a
  dict on XLA:CPU and None on a TPU v5e (JAX 0.10.2); ``.compile().cost_analysis()``
  returns the optimised program's count on both (a list of one dict in older JAX).
* ``compile().memory_analysis()``: XLA:CPU plans ``temp_size_in_bytes`` (1,666,512 for the
  course's remat blocks without remat) and leaves temp out of ``peak_memory_in_bytes``; the
  TPU reports ``temp_size_in_bytes`` 0 for the same programs and holds its scratch in
  ``peak_memory_in_bytes`` (arguments + outputs + scratch: 26.4 MiB without remat, 14.7
  with ``nothing_saveable``). ``total_allocation_bytes`` is absent in JAX 0.10.2.

So a figure is read with where it came from, and a figure one backend does not report is
said so by name (``PlanUnavailable``), never a None that fails later. A plan depends on the
backend it was compiled for: compare plans compiled for the same backend only (``backend``
is in every reading).

    cost = compiled_cost(compiled)          # {"flops", "bytes accessed", ...}
    cost = lowered_cost(lowered)            # or PlanUnavailable on a TPU
    plan = memory_plan(compiled)            # the five fields, None where absent, + backend
    scratch = scratch_bytes(compiled)       # {"bytes", "source", "backend"}

Standard library at import (JAX only inside the functions): checkers import this.
"""

from __future__ import annotations

MEMORY_FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                 "peak_memory_in_bytes", "total_allocation_bytes")


class PlanUnavailable(RuntimeError):
    """A compiled-plan figure this backend (or JAX version) does not report."""


def backend_of(stage) -> str:
    """The platform a lowered or compiled program is for ("cpu", "tpu", "gpu"): from its
    devices where it names them, else JAX's default backend."""
    try:
        import jax
        for sharding in jax.tree.leaves(stage.input_shardings):
            devices = getattr(sharding, "device_set", None)
            if devices:
                return next(iter(devices)).platform
    except Exception:  # noqa: BLE001 - a program that names no device: the default one
        pass
    import jax
    return jax.default_backend()


def _jax_version() -> str:
    import jax
    return jax.__version__


def _first(cost):
    """A cost analysis as one dict (older JAX: a list of one dict per computation)."""
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else None
    return dict(cost) if cost else None


def compiled_cost(compiled) -> dict:
    """``cost_analysis()`` of a compiled (optimised) program, as one dict of floats."""
    cost = _first(compiled.cost_analysis())
    if cost is None:
        raise PlanUnavailable(f"cost_analysis() of the compiled program is not available on "
                              f"this backend ({backend_of(compiled)}, JAX {_jax_version()})")
    return {k: float(v) for k, v in cost.items() if isinstance(v, (int, float))}


def lowered_cost(lowered) -> dict:
    """``cost_analysis()`` of the unoptimised lowering, as one dict of floats, or
    ``PlanUnavailable`` where the backend gives none (a TPU: count the compiled program
    with ``compiled_cost``)."""
    cost = _first(lowered.cost_analysis())
    if cost is None:
        raise PlanUnavailable(f"cost_analysis() of the unoptimised lowering is not available "
                              f"on this backend ({backend_of(lowered)}, JAX "
                              f"{_jax_version()}): only the compiled program is counted "
                              "there")
    return {k: float(v) for k, v in cost.items() if isinstance(v, (int, float))}


def memory_plan(compiled) -> dict:
    """The five ``memory_analysis()`` figures (ints; None where this JAX or backend does
    not report one) and ``backend``."""
    analysis = compiled.memory_analysis()
    if analysis is None:
        raise PlanUnavailable(f"memory_analysis() is not available on this backend "
                              f"({backend_of(compiled)}, JAX {_jax_version()})")
    plan = {f: (int(v) if (v := getattr(analysis, f, None)) is not None else None)
            for f in MEMORY_FIELDS}
    return {**plan, "backend": backend_of(compiled)}


def scratch_bytes(compiled) -> dict:
    """The bytes the compiler plans beside the arguments and outputs:
    ``temp_size_in_bytes`` where the backend reports temp (CPU, GPU); on a TPU, which
    reports temp 0 and holds its scratch in the plan's peak, ``peak_memory_in_bytes``
    less the arguments and outputs. {"bytes", "source", "backend"}."""
    plan = memory_plan(compiled)
    temp = plan["temp_size_in_bytes"] or 0
    if plan["backend"] == "tpu" and not temp and plan["peak_memory_in_bytes"]:
        held = (plan["argument_size_in_bytes"] or 0) + (plan["output_size_in_bytes"] or 0)
        return {"bytes": max(0, plan["peak_memory_in_bytes"] - held),
                "source": "peak_memory_in_bytes - arguments - outputs",
                "backend": plan["backend"]}
    return {"bytes": temp, "source": "temp_size_in_bytes", "backend": plan["backend"]}

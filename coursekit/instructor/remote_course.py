"""What a checker runs in the learner process where the chip is, when the run is an
answer (``coursekit.workloads.inspectors``): the compiler's own count of a catalog
workload compiled for this device (performance-audit stage 2's ``cost_from_compiler``).
Instructor-only (``coursekit.checking.graded``); the public device-side timing and
reading stay in ``coursekit.workloads.remote_course``. It imports no other instructor
module: what a learner process loads stays readable there in a graded run."""

from __future__ import annotations


def compiled_cost(fn, *args) -> dict:
    """``cost_analysis()`` of ``fn`` compiled here, for this device: flops, bytes accessed,
    transcendentals (floats)."""
    import jax
    target = getattr(fn, "fn", fn)  # a CallCounter around the catalog's function
    cost = jax.jit(target).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return {k: float(cost[k]) for k in ("flops", "bytes accessed", "transcendentals")
            if k in (cost or {})}


INSPECTORS = {"course/compiled_cost": compiled_cost}

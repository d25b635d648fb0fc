"""performance-audit's answers its checker needs in the checker process: a matmul's FLOP
and byte counts (stage 2's ``matmul_cost_by_hand``), the compiler's count of a program
(``cost_from_compiler``), the residual bytes a backward pass keeps (stage 3's
``saved_residual_bytes``) and the compiler's temporary bytes (``compiler_temp_bytes``).
Instructor-only (``coursekit.checking.graded``)."""

from __future__ import annotations

import math

import jax


def matmul_cost(m: int, k: int, n: int, itemsize: int) -> dict:
    return {"flops": 2 * m * k * n, "bytes": (m * k + k * n + m * n) * itemsize}


def compiled_cost(fn, *args) -> dict:
    """``cost_analysis()`` of the compiled (optimised) program."""
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    return cost[0] if isinstance(cost, (list, tuple)) else cost


def residual_bytes(fn, *args) -> int:
    """Residual bytes by a public route: the leaves of ``jax.vjp``'s pullback (a
    ``jax.tree_util.Partial``) that are not the arguments themselves."""
    _, pullback = jax.vjp(fn, *args)
    arguments = {id(leaf) for leaf in jax.tree.leaves(args)}
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(pullback)
               if id(leaf) not in arguments)


def residual_counts(fn, *args) -> dict:
    """The residual bytes of ``residual_bytes`` beside the counts of the same pullback a
    mistake gives (stage 3's hint names the one a learner's figure equals): every leaf,
    the arguments included; every leaf whose shape no argument has (arguments told apart
    by shape, not identity); the residuals' elements; 4 bytes an element."""
    _, pullback = jax.vjp(fn, *args)
    arguments = {id(leaf) for leaf in jax.tree.leaves(args)}
    leaves = jax.tree.leaves(pullback)
    kept = [leaf for leaf in leaves if id(leaf) not in arguments]
    shapes = {leaf.shape for leaf in jax.tree.leaves(args)}
    return {"residuals": sum(leaf.size * leaf.dtype.itemsize for leaf in kept),
            "shape_of_an_argument": sum(leaf.size * leaf.dtype.itemsize for leaf in leaves
                                        if leaf.shape not in shapes),
            "with_arguments": sum(leaf.size * leaf.dtype.itemsize for leaf in leaves),
            "elements": sum(leaf.size for leaf in kept),
            "four_bytes": sum(leaf.size * 4 for leaf in kept)}


def temp_bytes(fn, *args) -> int:
    """Temporary bytes of the compiler's memory plan for ``jax.jit(fn)`` on ``args``
    (stage 3's ``compiler_temp_bytes``)."""
    return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes


def step_speedup(share: float, kernel_speedup: float) -> float:
    """Amdahl's step speedup (stage 4's ``predict_step_speedup``)."""
    return 1 / ((1 - share) + share / kernel_speedup)


def step_speedup_slips(share: float, kernel_speedup: float) -> dict[str, float]:
    """What the classic slips of ``step_speedup`` give (its hint names the one a
    learner's figure equals)."""
    return {
        "the step's new time as a fraction of the old": 1 / step_speedup(share,
                                                                         kernel_speedup),
        "the share-weighted average of the two speedups, linear in the share":
            (1 - share) + share * kernel_speedup,
        "the share's time multiplied by the kernel speedup":
            1 / ((1 - share) + share * kernel_speedup),
        "the ceiling of a kernel made infinitely fast, whatever its speedup: the share's "
        "time divided by the kernel speedup is still part of the step":
            1 / (1 - share) if share < 1 else math.inf,
    }

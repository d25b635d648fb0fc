"""pallas-kernel's answers its checker needs in the checker process: the float32 jnp
softmax (stage 1's ``softmax_jnp``) and the rounding budget (stage 1's ``tolerance``).
Instructor-only (``coursekit.checking.graded``)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from coursekit.instructor.remote_pallas_kernel import reference_softmax_f32


@functools.cache
def _jitted():
    return jax.jit(reference_softmax_f32)


def ref_jnp(x):
    """The checker's float32 jnp softmax, jitted."""
    return _jitted()(x)


def _u(dtype) -> float:
    """The unit roundoff of ``dtype``."""
    return float(jnp.finfo(dtype).eps) / 2


def budget(dtype, n: int) -> tuple[float, float]:
    """(rtol, atol): float32 arithmetic (u32 = 2^-24) through a length-n sum plus a few
    roundings for exp, subtraction and division, then one rounding to ``dtype``."""
    u_out, u32 = _u(dtype), _u(jnp.float32)
    return u_out + (n + 4) * u32, 4 * u32


# The bracket a derived rtol must fall in: no less than the worst case of the length-n
# float32 sum ((n-1) roundings) plus the one rounding to the output dtype, no more than
# 1.5x ``budget`` (which also counts exp, subtraction and division): any honest
# count of "a few" extra roundings lands inside, eps-for-u (2x) or 2n-for-n does not.
RTOL_OVER_BUDGET = 1.5


def rtol_bracket(dtype, n: int) -> tuple[float, float]:
    u_out, u32 = _u(dtype), _u(jnp.float32)
    return u_out + (n - 1) * u32, RTOL_OVER_BUDGET * budget(dtype, n)[0]

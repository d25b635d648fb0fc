"""pallas-kernel's rounding budget (stage 1's ``tolerance``) and the bracket a derived
rtol must fall in. Instructor-only: the checker reads them as numbers for the public row
lengths (the project's generator beside its checker writes them from here)."""

from __future__ import annotations

import jax.numpy as jnp


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

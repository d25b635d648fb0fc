"""How long each item of ``make accelerator`` took on a TPU v5e, so that a run in parts
under ``--budget`` starts only what it can finish (``coursekit.commands.accelerator``).

An item cut by the budget is lost work: on 2026-12-07 performance-audit's solution (295 s)
started 84 s before the first call's budget and was cut, and the run took three calls.
With these figures an item that would not finish is left for the next ``--resume`` and
the call goes on with the ones that fit; the projects run longest first, so the short
ones fill what is left.

The figures are the wall times of the sixth run on the chip (docs/tpu-runs/
2026-12-07-ninth-session.md), the larger where two runs differ a lot (notebook 05 took
100 s and 220 s); on another device they are only a guide. Items not here (a single
stage, a starter, a dry run's) have no estimate and start as before.
"""

from __future__ import annotations

# the item's key (``Run.item``) -> seconds it took on a TPU v5e, its check cells shown
# from the projects part's runs (a notebook)
TPU_V5E_SECONDS = {
    "checks-performance-audit-solution-all": 295,
    "checks-optimisation-solution-all": 137,
    "checks-foundations-solution-all": 131,
    "checks-sharded-training-solution-all": 82,
    "checks-pallas-kernel-solution-all": 28,
    "notebook-00_foundations": 48,
    "notebook-01_async_timing": 27,
    "notebook-02_trace_reading": 34,
    "notebook-03_roofline": 61,
    "notebook-04_remat": 127,
    "notebook-05_sharding_and_recovery": 220,
    "notebook-06_pallas": 51,
    "notebook-07_optimisation": 47,
    "notebook-08_readiness_review": 95,
    "roofline": 70,
}
# an item starts when its estimate times this fits in what is left of the budget
MARGIN = 1.1


def expected_s(key: str) -> float | None:
    """Seconds ``key`` is expected to take on the chip, or None (no figure for it)."""
    return TPU_V5E_SECONDS.get(key)


def longest_first(keys: dict[str, str]) -> list[str]:
    """``keys`` (name -> item key) ordered by expected time, longest first, those with no
    figure last in their given order."""
    names = list(keys)
    return sorted(names, key=lambda n: (-(expected_s(keys[n]) or 0), names.index(n)))

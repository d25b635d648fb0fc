"""A run's device peak read in the process that holds the chip
(coursekit.measure.device_peak): a reading only where the run raised the high-water mark,
a bound where it did not, runs ordered by the compiler's plan; a CPU, which reports no
memory, is named."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from coursekit.measure import device_peak as dp

MiB = 2**20


def stats(in_use, peak):
    # the keys a TPU v5e's memory_stats() holds, among others (bytes_limit 16,909,336,064)
    return {"bytes_in_use": in_use, "peak_bytes_in_use": peak, "bytes_limit": 16909336064}


def test_a_run_that_raises_the_high_water_mark_is_a_reading():
    r = dp.run_reading(stats(100 * MiB, 120 * MiB), stats(130 * MiB, 190 * MiB))
    assert r["exact"] and r["run_peak_bytes"] == 90 * MiB
    assert (r["in_use_after"], r["peak_before"]) == (130 * MiB, 120 * MiB)


def test_a_run_below_an_earlier_mark_is_only_a_bound():
    # the no-remat run first (mark 300 MiB), then the remat one: its own 40 MiB is hidden
    r = dp.run_reading(stats(100 * MiB, 300 * MiB), stats(100 * MiB, 300 * MiB))
    assert not r["exact"] and r["run_peak_bytes"] == 200 * MiB   # at most: the old mark


def test_runs_go_from_the_smallest_plan_up():
    plans = {"None": 96 * MiB, "nothing_saveable": 40 * MiB, "dots_saveable": 64 * MiB,
             "everything_saveable": 96 * MiB}
    assert dp.ascending(plans) == ["nothing_saveable", "dots_saveable", "None",
                                   "everything_saveable"]


def test_a_device_without_memory_stats_is_named():
    with pytest.raises(ValueError, match="reports no peak"):
        dp.run_reading(None, stats(1, 1))
    with pytest.raises(ValueError, match=r"lacks \['peak_bytes_in_use'\]"):
        dp.run_reading({"bytes_in_use": 1}, stats(1, 1))
    compiled = jax.jit(lambda v: v + 1).lower(jnp.ones(4)).compile()
    with pytest.raises(ValueError, match="a CPU reports None"):   # this machine's CPU
        dp.measured_run(compiled, (jnp.ones(4),), jax.devices()[0])

"""Notebook 03's accelerator branch, its decisions on the CPU (coursekit.measure.roofs and
claims.prediction_gap): a measured roof against the plain-JAX ceiling beside it and the
spec, a workload's prediction from its counts, and the sentence that sets it beside the
measurement, fed the figures measured on a TPU v5e (JAX 0.10.2)."""

from __future__ import annotations

import math

import pytest

from coursekit.instructor import ceilings
from coursekit.measure import chips, roofs
from coursekit.notebook import claims

V5E = chips.spec("TPU v5 lite")


def test_the_reference_figures_on_the_chip_against_the_ceilings_and_the_spec():
    # measure_peak_flops(n=4096) in float32 read 101 TFLOP/s where bfloat16 products ran
    # at 185 (n=8192): not a roof of the chip
    float32_peak = roofs.judged(101e12, 185e12, V5E["peak_flops"]["bfloat16"])
    assert not float32_peak["within"] and float32_peak["ratio"] == pytest.approx(0.546, 1e-3)
    bf16 = roofs.judged(183e12, 185e12, V5E["peak_flops"]["bfloat16"])
    assert bf16["within"] and bf16["of_spec"] == pytest.approx(183 / 197)
    # measure_bandwidth read 550 GB/s where a read-only sum ran at 752: 73%, not within 90%
    assert not roofs.judged(550e9, 752e9, V5E["hbm_bytes_per_s"])["within"]
    assert roofs.judged(741e9, 752e9)["of_spec"] is None     # no spec given: none claimed
    with pytest.raises(ValueError, match="positive"):
        roofs.judged(0.0, 752e9)



def test_beside_calls_between_every_round_and_frees_the_ceiling():
    ceiling = ceilings.Stream("read", 2**20)
    calls = []
    rec, got = roofs.beside(ceiling, lambda: calls.append(1) or len(calls), iters=2, rounds=3)
    assert got == [1, 2, 3] and len(rec["samples_s"]) == 6
    assert rec["best"] == rec["work"] / min(rec["samples_s"])
    assert all(a.is_deleted() for a in ceiling.args)


def test_prediction_gap_agreement_is_claimed_only_within_10_percent():
    flops = 2.2e12
    close = claims.prediction_gap(11.9e-3, 13.6e-3, 12.4e-3, 12.3e-3, flops, 185e12)
    assert "within 10%: the measured roofs predict this workload" in close
    assert "12.300 ms" in close and "0.100 ms" in close          # device, then host
    assert f"{flops / 12.3e-3 / 1e12:.1f} TFLOP/s" in close
    partial = claims.prediction_gap(11.9e-3, 13.6e-3, 13.4e-3, 13.3e-3, flops, 185e12)
    assert "within 10%" not in partial and "overlapped only in part" in partial
    beyond = claims.prediction_gap(11.9e-3, 13.6e-3, 20e-3, 19.5e-3, flops, 185e12)
    assert "slower than even the no-overlap sum" in beyond
    fast = claims.prediction_gap(11.9e-3, 13.6e-3, 9e-3, None, flops, 185e12)
    assert "faster than the roofs allow" in fast and "no device lines" in fast
    with pytest.raises(ValueError, match="measured_s"):
        claims.prediction_gap(11.9e-3, 13.6e-3, math.nan, None, flops, 185e12)

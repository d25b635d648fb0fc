"""The sentences notebooks print about their evidence (coursekit.notebook.claims).

Issue 30 found, in executed notebooks, claims their own printed evidence contradicted.
Each test here feeds a claim the figures that run printed and asserts the old wrong
sentence is not produced; a second case feeds evidence that does support the claim and
asserts it is made. ``printed_claim_problems`` reads an executed notebook's printed text
for the same contradictions (tests/test_notebooks.py runs it on every executed notebook).
"""

from __future__ import annotations

import re

import pytest

from coursekit.notebook import claims

# ---------------------------------------------------------------------------------------
# Formatting
# ---------------------------------------------------------------------------------------


def test_intervals_print_with_three_digits():
    text = claims.estimate_text(30.8, [12.584320492861432, 75.51574592560401])
    assert text == "30.8x [12.6x, 75.5x]"
    assert claims.interval_text(None) == "no interval"
    assert claims.estimate_text(0.404, (0.176, 0.928)) == "0.404x [0.176x, 0.928x]"


def test_bad_interval_is_refused():
    with pytest.raises(ValueError, match="lo <= hi"):
        claims.interval_text((2.0, 1.0))


# ---------------------------------------------------------------------------------------
# 01: the host read's cost
# ---------------------------------------------------------------------------------------


def test_01_negative_cost_is_not_called_a_cost_nor_nearly_free():
    # printed: "the read adds -14% (nearly free)" from two back-to-back blocks
    text = claims.host_read_cost(0.86, (0.80, 0.93), 6)
    assert "adds -" not in text and "nearly free" not in text
    assert "drift" in text and "not resolved" in text


def test_01_nearly_free_only_when_the_interval_holds_1_and_stays_small():
    text = claims.host_read_cost(1.01, (0.97, 1.05), 6)
    assert "nearly free" in text and "no cost detected" in text
    wide = claims.host_read_cost(1.01, (0.7, 1.6), 6)
    assert "nearly free" not in wide and "too wide" in wide
    costly = claims.host_read_cost(1.4, (1.3, 1.5), 6)
    assert "adds 30% to 50%" in costly


# ---------------------------------------------------------------------------------------
# 02: the completion wait against the execution
# ---------------------------------------------------------------------------------------


def test_02_wait_at_2_2x_the_execution_is_not_about_as_long():
    text = claims.wait_vs_execution(2.2e-3, 1.0e-3)
    assert "about as long" not in text
    assert "2.2x" in text and "longer than the work" in text


def test_02_about_as_long_when_it_is():
    assert "about as long" in claims.wait_vs_execution(1.1e-3, 1.0e-3)
    assert "shorter than the work" in claims.wait_vs_execution(0.5e-3, 1.0e-3)


# ---------------------------------------------------------------------------------------
# 03: the fix's faults and the roofline's sum
# ---------------------------------------------------------------------------------------


def test_03_fix_states_the_validation_workloads_own_faults():
    # printed: "the workload paid 1024 faults per call" for a run shown at 0 faults
    validation = dict(level="DRAM", bandwidth=32.7e9, faults=0, predicted_s=3.07e-3,
                      measured_s=3.68e-3)
    text = claims.roof_fix(**validation)
    assert "1024" not in text and "paid no page fault" in text
    assert "1.20" in text
    faulting = claims.roof_fix(**dict(validation, faults=1024))
    assert "paid 1024 page faults" in faulting and "does not model" in faulting


# the table as printed: (measured ms, max ms, sum ms, faults); every workload was above
# the sum of the roofs while the prose called that sum an upper bound
PRINTED_ROOFLINE = {
    "01 tanh(a@a)@a": (0.793, 0.725, 0.774, 0),
    "matmul PEAK_N": (2.955, 2.901, 2.931, 0),
    "x*2+1 fresh out": (49.688, 4.099, 4.462, 16385),
    "02 MLP step": (7.982, 6.195, 6.406, 288),
}
# not printed by that run: the sums at the roofs' median samples, taken a few % to 35%
# above the best-of-3 sums
MEDIAN_SUM_MS = {"01 tanh(a@a)@a": 0.81, "matmul PEAK_N": 3.0, "x*2+1 fresh out": 6.0,
                 "02 MLP step": 6.6}
# one fault, from that run's headline: fresh output 2.8 GB/s, in place 31.7 GB/s, on
# 64 MiB moved twice, 16385 faults
FAULT_S = (2 * 64 * 2**20 / 2.8e9 - 2 * 64 * 2**20 / 31.7e9) / 16385


def test_03_sum_of_roofs_not_called_an_upper_bound_every_workload_exceeds():
    verdicts = {k: claims.roofline_verdict(m * 1e-3, lo * 1e-3, up * 1e-3,
                                           MEDIAN_SUM_MS[k] * 1e-3, f * FAULT_S)
                for k, (m, lo, up, f) in PRINTED_ROOFLINE.items()}
    assert verdicts == {"01 tanh(a@a)@a": "above: roofs' spread",
                        "matmul PEAK_N": "above: roofs' spread",
                        "x*2+1 fresh out": "above: page faults",
                        "02 MLP step": "above: not modelled"}  # 288 faults: 0.8 ms
    text = claims.roofline_summary(verdicts, 3)
    assert "bounded all" not in text
    assert "held for 0 of 4" in text and "fastest of 3 samples" in text


def test_03_sum_is_an_upper_bound_when_every_median_lies_within_it():
    v = claims.roofline_verdict(1.0e-3, 0.9e-3, 1.1e-3, 1.2e-3, 0.0)
    assert v == "within the bounds"
    assert claims.roofline_summary({"w": v}, 5) == \
        "the sum of the roofs bounded all 1 workloads from above"
    fast = claims.roofline_verdict(0.8e-3, 0.9e-3, 1.1e-3, 1.2e-3, 0.0)
    assert fast == "below the max"
    assert "no lower bound" in claims.roofline_summary({"w": v, "f": fast}, 5)


# ---------------------------------------------------------------------------------------
# 07: speedup beside the trace, differences, first call, Amdahl
# ---------------------------------------------------------------------------------------


def test_07_trace_and_timing_are_reconciled_not_left_side_by_side():
    # printed: "30.8x, interval [12.584320492861432, 75.51574592560401]" beside a trace
    # plot of 15.8x; traced before 4.78 s against 3.33 s timed
    ci = [12.584320492861432, 75.51574592560401]
    text = claims.traced_vs_timed(4.78, 4.78 / 15.8, 3.33, 3.33 / 30.8, 30.8, ci)
    assert "12.584320492861432" not in text and "[12.6x, 75.5x]" in text
    assert "15.8x" in text and "agree" not in text.replace("no agreement", "")
    assert "a traced time is not a timed one" in text and "1.44x" in text


def test_07_differences_of_exactly_0_are_called_bitwise_equal():
    # printed: every difference 0, beside prose saying results will not be bitwise equal
    zeros = {"losses": 0.0, "embed": 0.0, "w1": 0.0, "w2": 0.0}
    text = claims.contract_differences(zeros, 1e-4, 1e-5)
    assert "bitwise equal on these inputs" in text and "not bitwise" not in text
    text = claims.contract_differences(dict(zeros, losses=9.5e-7), 1e-4, 1e-5)
    assert text.startswith("not bitwise equal") and "9.5e-07 (losses), within" in text


def test_07_first_call_measured_shorter_is_not_called_far_longer():
    # printed: slow first call 917 ms, fast 755 ms; prose: "far longer than one slow call"
    text = claims.first_call_claim(0.917, 0.755, 0.070, 0.0034)
    assert "far longer" not in text and "longer than" not in text
    assert "shorter than the slow version's first call" in text
    assert "longer than the slow" in claims.first_call_claim(0.9, 1.8, 0.07, 0.0034)


def test_07_amdahl_ceiling_conditioned_on_the_profiler_leaving_the_call_alone():
    # printed: ceiling 1.36x from a 26.5% traced share; removing the recompile measured
    # 1.91x; the traced call 4.78 s against 3.33 s timed
    text = claims.amdahl_ceiling_claim("update", 0.265, 1 / (1 - 0.265), 4.78, 3.33)
    assert "1.36x" in text and "1.44x" in text
    assert "not the untraced call's share" in text and "can pass this ceiling" in text
    held = claims.amdahl_ceiling_claim("update", 0.265, 1 / (1 - 0.265), 3.4, 3.33)
    assert "holds untraced" in held and "can pass" not in held


# ---------------------------------------------------------------------------------------
# 08: reconciliation, prediction, recommendation
# ---------------------------------------------------------------------------------------


def test_08_traced_4_6x_timed_with_a_27x_interval_is_not_agreement_within_noise():
    lo = 0.2
    text = claims.traced_vs_timed(4.6e-3, 4.6e-3, 1.0e-3, 1.0e-3, 1.0, (lo, 27 * lo))
    assert "agree within noise" not in text and "they agree" not in text
    assert "spans 27x" in text and "no agreement" in text and "4.6x" in text


def test_08_agreement_when_the_interval_resolves_and_the_trace_matches():
    text = claims.traced_vs_timed(1.05e-3, 0.95e-3, 1.0e-3, 0.9e-3, 1.11, (1.05, 1.18))
    assert "they agree at this resolution" in text and "not a timed one" not in text
    outside = claims.traced_vs_timed(2e-3, 1e-3, 1e-3, 1e-3, 1.0, (0.95, 1.05))
    assert "outside the timing's interval" in outside


def test_08_prediction_on_a_cost_whose_interval_holds_0_is_a_range():
    # printed: "predicted 1.149x" on a collective cost whose interval held 0
    text = claims.collective_prediction(60e-6, (-20e-6, 140e-6), 1.149, 1.3)
    assert not text.startswith("predicted 1.15x")
    assert "between 1x and 1.3x" in text and "holds 0" in text
    resolved = claims.collective_prediction(113.3e-6, (18.6e-6, 208e-6), 1.038, 1.071)
    assert resolved.startswith("predicted 1.04x (at most 1.07x)")


def test_08_reject_with_a_size_clearly_slower_does_not_offer_keeping_it():
    # printed: REJECT at batch 64; clearly slower at batch 16384: 0.404 [0.176, 0.928]
    sweep = {64: {"decision": "reject", "ratio": 0.918, "ci": [0.356, 2.364]},
             16384: {"decision": "slower", "ratio": 0.404, "ci": [0.176, 0.928]}}
    text = claims.readiness_recommendation(64, "reject", sweep)
    assert "only if it simplifies" not in text and "keeping it for simpler code" not in text
    assert "clearly slower" in text and "0.404x [0.176x, 0.928x]" in text


def test_08_reject_without_a_slower_size_may_keep_it_for_simpler_code():
    sweep = {64: {"decision": "reject", "ratio": 0.918, "ci": [0.356, 2.364]},
             1024: {"decision": "reject", "ratio": 1.05, "ci": [0.194, 5.691]}}
    text = claims.readiness_recommendation(64, "reject", sweep)
    assert text.startswith("REJECT as an optimisation") and "simpler code" in text
    accepted = claims.readiness_recommendation(
        64, "accept", {64: {"decision": "accept", "ratio": 1.3, "ci": [1.2, 1.4]}})
    assert accepted.startswith("ACCEPT") and "[64]" in accepted


def test_08_trend_claimed_only_when_the_end_intervals_are_apart():
    # the points rise, but each interval spans 6-30x: the old line said "rises" anyway
    overlapping = {64: {"ratio": 0.918, "ci": [0.356, 2.364]},
                   1024: {"ratio": 1.05, "ci": [0.194, 5.691]},
                   16384: {"ratio": 1.4, "ci": [0.9, 2.2]}}
    text = claims.speedup_trend(overlapping)
    assert "rises with the batch" not in text and "no trend is resolved" in text
    assert "0.918x [0.356x, 2.36x]" in text
    apart = {64: {"ratio": 1.02, "ci": [0.98, 1.06]}, 4096: {"ratio": 1.5, "ci": [1.4, 1.6]}}
    assert claims.speedup_trend(apart).startswith("the speedup rises with the batch")
    falling = {64: {"ratio": 1.5, "ci": [1.4, 1.6]}, 4096: {"ratio": 1.02, "ci": None}}
    assert "no trend is resolved" in claims.speedup_trend(falling)
    zigzag = {64: {"ratio": 1.0, "ci": [0.9, 1.1]}, 128: {"ratio": 2.0, "ci": [1.9, 2.1]},
              256: {"ratio": 1.5, "ci": [1.4, 1.6]}}
    assert "no monotone trend" in claims.speedup_trend(zigzag)


# ---------------------------------------------------------------------------------------
# The same contradictions, read off an executed notebook's printed text
# ---------------------------------------------------------------------------------------

_LONG_DIGITS = re.compile(r"\d\.\d{7,}")
_NEGATIVE_ADD = re.compile(r"adds -\d")
_FAULTS_VALIDATION = re.compile(r"a \+ 2b in place:.*\((\d+) faults per call\)")
_FAULTS_FIX = re.compile(r"fixed: .*paid (no page fault|(\d+) page faults) per call")


def printed_claim_problems(notebook: str, text: str) -> list[str]:
    """Contradictions issue 30 found, looked for in the printed text (stdout) of an
    executed notebook ``notebook`` (its stem, e.g. "03_roofline"): an empty list when
    none shows. Every notebook: no interval line printed with raw float digits."""
    problems = [f"raw float digits: {line.strip()[:120]}" for line in text.splitlines()
                if "interval" in line and _LONG_DIGITS.search(line)]
    if notebook.startswith("01") and _NEGATIVE_ADD.search(text):
        problems.append("a negative cost printed as 'adds'")
    if notebook.startswith("03"):
        v, f = _FAULTS_VALIDATION.search(text), _FAULTS_FIX.search(text)
        if v and f and int(v[1]) != (0 if f[2] is None else int(f[2])):
            problems.append(f"the fix prints {f[0]!r} for a validation at {v[1]} faults")
    if notebook.startswith("08") and "agree within noise" in text:
        problems.append("'agree within noise' is no longer a claim any cell makes")
    if notebook.startswith("08") and re.search(r"speedup (rises|falls) with the batch \(",
                                               text):
        problems.append("a trend with the batch printed from the point figures alone")
    return problems


def test_printed_claim_problems_catches_the_printed_contradictions():
    assert printed_claim_problems("07_optimisation", "speedup 30.8x, interval "
                                  "[12.584320492861432, 75.51574592560401], accept")
    assert printed_claim_problems("01_async_timing", "on this CPU the read adds -14% (nearly")
    assert printed_claim_problems("03_roofline", (
        "a + 2b in place: 96 MiB moved (0 faults per call): measured / predicted = 1.20\n"
        "fixed: roof 32.7 GB/s (DRAM, in place); the workload paid 1024 page faults per call"))
    assert not printed_claim_problems("03_roofline", (
        "a + 2b in place: 96 MiB moved (0 faults per call): measured / predicted = 1.20\n"
        "fixed: roof 32.7 GB/s (DRAM, in place); the workload paid no page fault per call"))
    assert not printed_claim_problems("07_optimisation", "speedup 30.8x [12.6x, 75.5x]")
    assert printed_claim_problems("08_readiness_review", "the measured speedup rises with "
                                  "the batch (64: 0.918, 1024: 1.050)")

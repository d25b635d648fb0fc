"""The block-aware decision statistic (coursekit.measure.decision): calibrated on
identical programs measured in drifting rounds, powerful on a true 1.2x, says "slower"
when it is, and still judges records without round_ids. Simulated pairs, fixed seeds."""

from __future__ import annotations

import time

import numpy as np
import pytest

from coursekit.instructor import decision as answers
from coursekit.measure import decision
from coursekit.provenance.records import validate_run_record

PAIRS = 200


def simulated(true_ratio, seed, pairs=PAIRS, **kwargs):
    rng = np.random.default_rng(seed)
    return [decision.simulate_pair(rng, true_ratio, **kwargs) for _ in range(pairs)]


def excludes_one(ci) -> bool:
    return not ci[0] <= 1.0 <= ci[1]


@pytest.mark.parametrize(("confidence", "df", "t"), [
    (0.95, 1, 12.7062), (0.95, 2, 4.3027), (0.95, 7, 2.3646), (0.95, 30, 2.0423),
    (0.99, 5, 4.0321), (0.90, 10, 1.8125), (0.95, 5000, 1.9600)])
def test_t_quantile_matches_the_tables(confidence, df, t):
    assert decision.t_quantile(confidence, df) == pytest.approx(t, abs=1e-3)


def test_null_pairs_with_drifting_rounds_claim_nothing_while_pooling_does():
    pairs = simulated(1.0, seed=11)
    rounds = [answers.decide_rounds(b, a) for b, a in pairs]
    pooled = [decision.pooled_bootstrap(b, a, n_boot=400) for b, a in pairs]
    false_claims = sum(r["decision"] != "reject" for r in rounds) / PAIRS
    excluded = sum(excludes_one(r["ci"]) for r in rounds) / PAIRS
    pooled_excluded = sum(excludes_one(p["ci"]) for p in pooled) / PAIRS
    assert all(r["method"] == "paired rounds" and r["n_rounds"] == 8 for r in rounds)
    assert false_claims <= 0.05, false_claims
    # A 95% interval excludes 1 for 5% of null pairs: 200 pairs give 5% +- 1.5%.
    assert excluded <= 0.08, excluded
    # The same pairs fool the statistic this replaces (so the test can tell them apart).
    assert pooled_excluded >= 0.3, pooled_excluded


def test_true_speedup_of_1_2_is_accepted_in_drifting_rounds():
    results = [answers.decide_rounds(b, a) for b, a in simulated(1.2, seed=12)]
    power = sum(r["decision"] == "accept" for r in results) / PAIRS
    assert power >= 0.80, power
    assert np.median([r["ratio"] for r in results]) == pytest.approx(1.2, rel=0.03)


def test_real_slowdown_is_slower_and_small_changes_are_rejected():
    slow = [answers.decide_rounds(b, a) for b, a in simulated(1 / 1.3, seed=13, pairs=50)]
    assert sum(r["decision"] == "slower" for r in slow) >= 45
    assert all("slower" in r["reasons"][0] for r in slow if r["decision"] == "slower")
    quiet = dict(round_drift=0.05, block_drift=0.0, noise=0.005, outliers=0.0)
    small = [answers.decide_rounds(b, a) for b, a in simulated(1.02, seed=14, pairs=20,
                                                                **quiet)]
    assert all(r["decision"] == "reject" for r in small)
    assert sum("smaller than the minimum" in r["reasons"][0] for r in small) >= 15


def test_records_without_round_ids_count_each_sample_as_a_round():
    rng = np.random.default_rng(5)
    before = {"samples_s": list(np.exp(rng.normal(np.log(0.01), 0.05, 30)))}
    after = {"samples_s": list(np.exp(rng.normal(np.log(0.005), 0.05, 25)))}
    result = answers.decide_rounds(before, after)
    assert result["method"] == "unpaired rounds" and result["n_rounds"] == 25
    assert result["decision"] == "accept" and result["ci"][0] > 1.8
    same = answers.decide_rounds(before, {"samples_s": before["samples_s"][::-1]})
    assert same["decision"] == "reject" and same["ratio"] == pytest.approx(1.0)
    # constant samples: a zero-width interval, no division by zero
    flat = answers.decide_rounds({"samples_s": [0.01] * 10}, {"samples_s": [0.005] * 10})
    assert flat["decision"] == "accept" and flat["ci"] == pytest.approx([2.0, 2.0])
    one = answers.decide_rounds({"samples_s": [0.01] * 5, "round_ids": [0] * 5},
                                 {"samples_s": [0.005] * 5, "round_ids": [0] * 5})
    assert one["decision"] == "reject" and one["ci"] is None
    assert "fewer than 2 rounds" in one["reasons"][0]


def test_pairing_cancels_drift_shared_by_a_round():
    # Each round 40% slower than the last, after always 10% faster within its round.
    levels = 0.01 * 1.4 ** np.arange(6)
    before = {"samples_s": list(np.repeat(levels, 4)), "round_ids": list(np.repeat(range(6), 4))}
    after = {"samples_s": list(np.repeat(levels / 1.1, 4) * (1 + 1e-3 * (np.arange(24) % 3))),
             "round_ids": list(np.repeat(range(6), 4))}
    paired = answers.decide_rounds(before, after)
    unpaired = answers.decide_rounds({"samples_s": before["samples_s"]},
                                      {"samples_s": after["samples_s"]})
    assert paired["decision"] == "accept" and paired["ratio"] == pytest.approx(1.1, rel=0.01)
    assert unpaired["decision"] == "reject"  # the drift swamps it without the pairing
    assert [r["round"] for r in paired["rounds"]] == list(range(6))


def test_bad_round_ids_are_named():
    with pytest.raises(ValueError, match="round_ids holds 2 entries for 3 samples"):
        answers.decide_rounds({"samples_s": [1.0, 1.0, 1.0], "round_ids": [0, 1]},
                               {"samples_s": [1.0, 1.0, 1.0]})
    with pytest.raises(ValueError, match="positive seconds"):
        answers.decide_rounds({"samples_s": [1.0, -1.0]}, {"samples_s": [1.0, 1.0]})


def test_interleaved_measurement_alternates_and_records_cpu_time():
    def busy():
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass

    def idle():
        time.sleep(0.002)

    got = decision.measure_interleaved(busy, idle, rounds=4, iters=3, warmup=1)
    for rec in got.values():
        assert rec["round_ids"] == [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
        assert len(rec["samples_s"]) == len(rec["cpu_s"]) == rec["iters"] == 12
        assert rec["first_call_s"] > 0
    # A busy loop uses its CPU; a sleep waits without it: CPU per wall second tells them apart.
    assert decision.contention(got["before"])["utilisation"] > 0.3
    assert decision.contention(got["after"])["utilisation"] < 0.2


def test_contention_names_the_round_that_lost_the_cpu():
    wall = [0.01] * 12
    cpu = [0.01] * 12
    for i in range(6, 9):          # round 2: twice the wall time for the same CPU time
        wall[i] = 0.02
    record = {"samples_s": wall, "cpu_s": cpu, "round_ids": [i // 3 for i in range(12)]}
    found = decision.contention(record)
    assert found["contended_rounds"] == [2] and found["worst_vs_best"] == pytest.approx(0.5)
    result = answers.decide_rounds(record, record)
    assert result["contention"]["before"]["contended_rounds"] == [2]


def test_run_records_carry_round_ids_and_cpu_time():
    base = {"label": "x", "sync": "block_until_ready", "warmup": 1, "iters": 3,
            "first_call_s": 0.5, "samples_s": [0.01, 0.02, 0.01], "compiles_first_call": 1,
            "compiles_warmed": 0, "shapes": [], "dtypes": [], "output_ok": True,
            "backend": "cpu", "boundary": "b", "trace": "", "region": "",
            "fingerprint": {k: "" for k in ("jax", "jaxlib", "backend", "devices",
                                             "xla_flags", "cpu", "python")}}
    assert validate_run_record(dict(base, round_ids=[0, 1, 1], cpu_s=[0.01, 0.0, 0.02])) == []
    assert any("round_ids holds 2 entries for 3 samples" in p
               for p in validate_run_record(dict(base, round_ids=[0, 1])))
    assert any("non-negative ints" in p for p in validate_run_record(dict(base,
                                                                          round_ids=[0, -1, 2])))
    assert any("cpu_s" in p for p in validate_run_record(dict(base, cpu_s=[0.1])))

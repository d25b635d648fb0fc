"""Notebook 08's (readiness review) plumbing: the fingerprint guard, pooled records, and the capstone
measurement in a real fresh process with its real trace and compiled collectives.
(The notebook itself is executed by tests/test_notebooks.py, like every notebook.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from coursekit.facts import ROOT  # noqa: E402
from coursekit.measure import collectives as trace_collectives
from coursekit.provenance.compare import (
    FingerprintMismatch,
    fingerprint_diff,
    guarded_decide,
    require_same_environment,
)
from coursekit.provenance.records import RecordError, validate_run_record
from coursekit.workloads import capstone

FP = {"python": "3.12.1", "numpy": "2.5.5", "jax": "0.12.0.1", "jaxlib": "0.12.0.1",
      "backend": "cpu", "devices": 8, "xla_flags": "--xla_force_host_platform_device_count=8",
      "cpu": "AMD EPYC", "cpu_cores": 2, "platform": "Linux"}


def record(samples, **overrides) -> dict:
    base = {"label": "x", "sync": "block_until_ready", "warmup": 2, "iters": len(samples),
            "first_call_s": 0.5, "samples_s": list(samples), "compiles_first_call": 1,
            "compiles_warmed": 0, "shapes": [[64, 16]], "dtypes": ["float32"],
            "output_ok": True, "backend": "cpu", "boundary": "train_step", "trace": "",
            "region": "", "fingerprint": dict(FP)}
    base.update(overrides)
    return base


def always_accept(before, after, **_):
    return {"decision": "accept", "reasons": ["looks faster"], "ratio": 3.0, "ci": [2.5, 3.5]}


# ---------------------------------------------------------------------------------------
# fingerprint guard
# ---------------------------------------------------------------------------------------

def test_same_fingerprint_goes_to_decide():
    before, after = record([0.01] * 10), record([0.005] * 10)
    assert fingerprint_diff(before, after) == []
    result = guarded_decide(before, after, always_accept)
    assert result["decision"] == "accept" and result["refused"] is False
    assert result["environment_differs"] == []


def test_runtime_change_is_refused_without_calling_decide():
    before = record([0.01] * 10)
    other = dict(FP, devices=2, xla_flags="--xla_force_host_platform_device_count=2")
    after = record([0.003] * 10, fingerprint=other)
    diffs = fingerprint_diff(before, after)
    assert [d.split(":")[0] for d in diffs] == ["devices", "xla_flags"]
    assert "8 vs 2" in diffs[0]

    def must_not_run(*_a, **_k):
        raise AssertionError("decide ran although the fingerprints differ")
    result = guarded_decide(before, after, must_not_run)
    assert result["decision"] == "reject" and result["refused"] is True
    assert any("devices" in r for r in result["reasons"])
    with pytest.raises(FingerprintMismatch, match="devices: 8 vs 2"):
        require_same_environment(before, after)


def test_flag_mode_marks_and_never_accepts_across_environments():
    before = record([0.01] * 10)
    after = record([0.003] * 10, fingerprint=dict(FP, jax="0.13.0"))
    result = guarded_decide(before, after, always_accept, mode="flag")
    assert result["decision"] == "reject" and result["refused"] is False
    assert result["ratio"] == 3.0 and any("jax" in r for r in result["reasons"])
    # a field present on one side only is a difference too; ignore= skips named fields
    missing = dict(FP)
    missing.pop("cpu")
    assert fingerprint_diff(FP, missing) == ["cpu: 'AMD EPYC' vs (absent)"]
    assert fingerprint_diff(FP, dict(FP, platform="other"), ignore=("platform",)) == []


def test_record_without_fingerprint_is_a_named_error():
    with pytest.raises(FingerprintMismatch, match="without a fingerprint"):
        fingerprint_diff(record([0.01] * 5), record([0.01] * 5, fingerprint="abc"))
    with pytest.raises(ValueError, match="mode"):
        guarded_decide(record([0.01] * 5), record([0.01] * 5), always_accept, mode="maybe")


# ---------------------------------------------------------------------------------------
# pooled records, sibling implementations
# ---------------------------------------------------------------------------------------

def test_pool_records_concatenates_raw_samples_and_keeps_the_compiling_block():
    blocks = [record([0.01, 0.02, 0.03, 0.04, 0.05]),
              record([0.02] * 5, first_call_s=0.02, compiles_first_call=0)]
    pooled = capstone.pool_records(blocks, label="before")
    assert pooled["samples_s"] == blocks[0]["samples_s"] + blocks[1]["samples_s"]
    assert pooled["iters"] == 10 and pooled["pooled_blocks"] == 2
    assert pooled["first_call_s"] == 0.5 and pooled["compiles_first_call"] == 1
    assert validate_run_record(pooled) == []
    assert capstone.pool_records(blocks + [record([0.01] * 5, compiles_warmed=1)])[
        "compiles_warmed"] == 1
    failed = capstone.pool_records([record([], output_ok=False, iters=5), blocks[1]])
    assert failed["output_ok"] is False


def test_pooled_blocks_keep_their_rounds_so_decide_pairs_them():
    blocks = [record([0.01] * 5), record([0.03] * 5), record([0.02] * 5)]
    pooled = capstone.pool_records(blocks)
    assert pooled["round_ids"] == [0] * 5 + [1] * 5 + [2] * 5
    assert validate_run_record(pooled) == []
    assert capstone.pool_records(blocks, rounds=[4, 5, 6])["round_ids"][-1] == 6
    with pytest.raises(RecordError, match="3 blocks"):
        capstone.pool_records(blocks, rounds=[0, 1])
    # the same drift in both variants' rounds cancels in the paired decision
    after = capstone.pool_records([record([s / 1.2] * 5) for s in (0.01, 0.03, 0.02)])
    from coursekit.instructor.decision import decide_rounds
    result = decide_rounds(pooled, after)
    assert result["method"] == "paired rounds" and result["ratio"] == pytest.approx(1.2)


def test_communication_roofline_from_two_message_sizes():
    assert trace_collectives.shape_bytes("f32[]") == 4
    assert trace_collectives.shape_bytes("(f32[64]{0}, bf16[10,64]{1,0}, s32[])") == \
        64 * 4 + 640 * 2 + 4
    small = {"bytes": 4, "cost_s": 20e-6, "ci_s": [10e-6, 30e-6], "resolved": True}
    big = {"bytes": 4 + 2**20, "cost_s": 20e-6 + 1e-3, "ci_s": [0.9e-3, 1.1e-3],
           "resolved": True}
    roof = trace_collectives.comm_roofline(small, big)
    assert roof["latency_s"] == pytest.approx(20e-6) and roof["latency_resolved"]
    assert roof["bandwidth_Bps"] == pytest.approx(2**20 / 1e-3)
    assert roof["ridge_bytes"] == pytest.approx(20e-6 * 2**20 / 1e-3)
    assert trace_collectives.predicted_comm_s(4, roof)["bound"] == "latency"
    assert trace_collectives.predicted_comm_s(2**20, roof)["bound"] == "bandwidth"
    # an unresolved latency is used at the upper end of its interval ("at most")
    unresolved = dict(small, cost_s=-5e-6, ci_s=[-40e-6, 30e-6], resolved=False)
    roof = trace_collectives.comm_roofline(unresolved, big)
    assert roof["latency_s"] == 0.0 and roof["latency_bound_s"] == pytest.approx(30e-6)


def test_pool_records_refuses_blocks_from_other_settings():
    with pytest.raises(RecordError, match="fingerprint"):
        capstone.pool_records([record([0.01] * 5),
                               record([0.01] * 5, fingerprint=dict(FP, devices=2))])
    with pytest.raises(RecordError, match="shapes"):
        capstone.pool_records([record([0.01] * 5), record([0.01] * 5, shapes=[[65, 16]])])


def test_sibling_model_follows_starter_and_solution(tmp_path):
    for which in ("starter", "solution"):
        impl = ROOT / "projects" / "performance-audit" / which / "model.py"
        assert capstone.sibling_model(impl, "sharded-training") == \
            ROOT / "projects" / "sharded-training" / which / "model.py"
    mine = tmp_path / "model.py"
    mine.write_text("")
    assert capstone.sibling_model(mine, "sharded-training") == \
        ROOT / "projects" / "sharded-training" / "starter" / "model.py"


# ---------------------------------------------------------------------------------------
# The capstone in a real fresh process: record, trace, collectives
# ---------------------------------------------------------------------------------------

PROBE = r"""
import json, os, sys
from coursekit.workloads import capstone
from coursekit.measure import collectives as trace_collectives
from coursekit.checking.learner import load_impl
training = load_impl(sys.argv[1])
work = capstone.workload(training, 32)
steps = {v: capstone.make_step(training, work["config"], v) for v in capstone.VARIANTS}
ops = {v: trace_collectives.all_reduce_ops(steps[v], work["state"], work["batches"][v])
       for v in capstone.VARIANTS}
ref = capstone.reference_loss(work)
losses = {v: float(steps[v](work["state"], work["batches"][v])[1]) for v in capstone.VARIANTS}
finals = {v: capstone.train_steps(training, capstone.make_step(training, work["config"], v),
                                  work, 6, v)[0]["params"] for v in capstone.VARIANTS}
print(json.dumps({"ops": ops, "reference": ref, "losses": losses,
                  "params_diff": capstone.max_relative_difference(*finals.values()),
                  "shardings": {v: str(work["batches"][v]["x"].sharding.spec)
                                for v in capstone.VARIANTS}}))
"""


@pytest.mark.slow
def test_capstone_fresh_process_record_trace_and_collectives(tmp_path):
    solution = ROOT / "projects" / "sharded-training" / "solution" / "model.py"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=str(ROOT))
    out = tmp_path / "run.json"
    done = subprocess.run([sys.executable, "-m", "coursekit.workloads.capstone", "--training-impl",
                           str(solution), "--variant", "before", "--batch", "32", "--iters",
                           "5", "--logdir", str(tmp_path / "trace"), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    run = json.loads(out.read_text())
    assert validate_run_record(run, check_trace=True) == []
    assert run["fingerprint"]["devices"] == 2 and run["output_ok"] is True
    assert run["compiles_first_call"] >= 1 and run["compiles_warmed"] == 0
    split = trace_collectives.collective_time(run["trace"], run["region"], n_devices=2)
    assert split["steps"] == 3 and split["per_op_us"], split
    assert all(0 < share < 1 for share in split["share"].values()), split

    probe = subprocess.run([sys.executable, "-c", PROBE, str(solution)], capture_output=True,
                           text=True, timeout=300, env=env, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-2000:]
    got = json.loads(probe.stdout.strip().splitlines()[-1])
    # the change (the learner's own step on a replicated batch) removes every all-reduce
    assert len(got["ops"]["before"]) == 2 and got["ops"]["after"] == {}, got["ops"]
    assert any(shape.startswith("f32[]") for shape in got["ops"]["before"].values())
    assert got["shardings"] == {"before": "P('data',)",
                                "after": "P()"}, got["shardings"]
    for variant, loss in got["losses"].items():
        assert abs(loss - got["reference"]) <= 1e-5 * abs(got["reference"]), (variant, got)
    assert got["params_diff"] <= 1e-4, got  # the same training, across the padded batch


def test_the_reference_loss_is_the_contracts_and_sees_the_noise():
    """capstone.first_loss, public code: classifier.loss on the batch plus the noise the
    state's key draws (the second half of its split); another key or no noise moves it."""
    import jax
    import numpy as np

    from coursekit.workloads import classifier
    params = classifier.init_params(jax.random.key(3))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, classifier.FEATURES)).astype(np.float32)
    y = rng.integers(0, classifier.CLASSES, 16).astype(np.int32)
    mask = np.ones(16, np.float32)
    mask[-5:] = 0
    key = jax.random.key(5)
    _, sub = jax.random.split(key)
    want = float(classifier.loss(params, x + 0.3 * jax.random.normal(sub, x.shape), y, mask))
    data = jax.random.key_data(key)
    got = capstone.first_loss(params, data, x, y, mask, 0.3)
    assert abs(got - want) <= 1e-6 * abs(want)
    assert got != capstone.first_loss(params, data, x, y, mask, 0.0)
    other = jax.random.key_data(jax.random.key(6))
    assert got != capstone.first_loss(params, other, x, y, mask, 0.3)


def test_starter_says_not_yet_in_a_fresh_process(tmp_path):
    starter = ROOT / "projects" / "sharded-training" / "starter" / "model.py"
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2",
               PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "coursekit.workloads.capstone", "--training-impl",
                           str(starter), "--logdir", str(tmp_path / "t"), "--out",
                           str(tmp_path / "r.json")], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 3 and "not yet:" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "r.json").exists()

"""optimisation's checker on what a TPU returns, faked on the CPU (issue 51): a trace whose
XLA operations sit on the device's own lines, not on the host's threads as a CPU writes
them (the chip run read "0 XLA operation events" there); a learner process whose float32
matmuls round unlike the checker's CPU (stage 2's contract read the reference fix at
4.44x the CPU's tolerance there); and one whose calls pay a fixed cost that dwarfs their
arithmetic (stage 3 expected a call at batch 1795 to grow with 62x the arithmetic of one
at batch 29; on the chip it took 1.57x). The last two run the checker on the machine
``tests/chip_fakes.py`` fakes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from chip_fakes import ACCELERATOR_ENV, fake_env, run_faked, write_fake
from helpers import plant, solution

sys.path.insert(0, str(Path(__file__).parents[1] / "projects" / "optimisation" / "tests"))
records = pytest.importorskip("optim_stage4_records")

MS = 1e6  # ns


def event(name: str, start_ms: float, dur_ms: float):
    return SimpleNamespace(name=name, start_ns=start_ms * MS, duration_ns=dur_ms * MS)


def line(name: str, events: list):
    return SimpleNamespace(name=name, events=events)


def tpu_profile(region_ms: tuple, module_ms: tuple, op_starts_ms: list, op_ms: float = 0.05,
                later_ops_ms: list = ()):
    """An XSpace as a v5e writes it: the region on a host thread's line, the program run
    and its operations on /device:TPU:0's "XLA Modules" and "XLA Ops" lines, the device's
    clock a little off the host's."""
    ops = [event(f"%fusion.{i} = f32[] fusion(...)", t, op_ms)
           for i, t in enumerate(list(op_starts_ms) + list(later_ops_ms))]
    return SimpleNamespace(planes=[
        SimpleNamespace(name="/host:CPU", lines=[
            line("python3", [event("train_fast_call", *region_ms)])]),
        SimpleNamespace(name="/device:TPU:0", lines=[
            line("XLA Modules", [event("jit__train(1234)", *module_ms)]),
            line("XLA Ops", ops)])])


def test_device_ops_inside_the_region_are_counted_on_a_tpu_trace():
    """The call waited for inside its region: its 6 operations counted, though the
    device's clock puts its program run 0.23 ms before the region began (as measured on
    a v5e); a later call's 3 operations, after the region, are not."""
    profile = tpu_profile((10.0, 2.0), (9.77, 1.5), [9.8 + 0.2 * i for i in range(6)],
                          later_ops_ms=[20.0, 20.1, 20.2])
    assert records.device_ops_in_region(profile, "train_fast_call") == 6


def test_a_call_not_finished_inside_its_region_shows_few_ops_on_a_tpu_trace():
    """A region that closed before its call ran (not waited for): the program run is
    longer than the region, no clock shift places it there, and its operations lie
    after the region."""
    profile = tpu_profile((10.0, 0.1), (10.05, 2.0), [10.06 + 0.2 * i for i in range(6)])
    assert records.device_ops_in_region(profile, "train_fast_call") <= 1


def test_a_cpu_trace_has_no_device_ops_and_is_read_from_its_threads():
    cpu = SimpleNamespace(planes=[SimpleNamespace(name="/host:CPU", lines=[
        line("python3", [event("train_fast_call", 10.0, 2.0)])])])
    assert records.device_ops_in_region(cpu, "train_fast_call") is None
    events = [{"ph": "X", "name": "train_fast_call", "ts": 100, "dur": 50},
              {"ph": "X", "name": "fusion", "ts": 110, "dur": 5, "args": {"hlo_op": "f"}},
              {"ph": "X", "name": "fusion", "ts": 160, "dur": 5, "args": {"hlo_op": "f"}}]
    assert records.cpu_ops_in_region(events, "train_fast_call") == 1


def test_the_stage_reads_a_tpu_trace_from_its_device_lines(monkeypatch, tmp_path):
    """``ops_in_region`` on a trace file whose XSpace holds a device plane counts the
    device's operations, where the CPU reading found none (the chip run's error)."""
    trace = tmp_path / "host.trace.json.gz"
    import gzip
    import json
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": [
        {"ph": "X", "name": "train_fast_call", "ts": 10000, "dur": 2000, "pid": 1,
         "tid": 1}]}).encode()))
    (tmp_path / "host.xplane.pb").write_bytes(b"")
    profile = tpu_profile((10.0, 2.0), (10.1, 1.5), [10.2 + 0.2 * i for i in range(4)])
    monkeypatch.setattr(records.device_trace, "load", lambda path: profile)
    assert records.ops_in_region(trace, "train_fast_call") == 4


# -- stage 2: the contract's tolerance on the device that ran the learner's code ---------

PROJECT = "optimisation"
# The seed whose confident model the faked chip puts the reference fix at 3.37x the CPU's
# tolerance from train_slow (the chip: 4.44x), and train_slow itself there at 4.66x
# (embed; before the tolerance came from the device, this FAILed as on the chip).
CONFIDENT_SEED = 3


@pytest.fixture(scope="module")
def fake_path(tmp_path_factory):
    return write_fake(tmp_path_factory)


def test_the_faked_chip_rounds_float32_matmuls_unlike_the_cpu(fake_path):
    """The fake is a fake of something: the same float32 matmul in a process that opens
    "the chip" differs from this CPU's by far more than float32 reordering, and not in
    one that does not."""
    code = ("import numpy as np, jax.numpy as jnp\n"
            "a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)\n"
            "print(float(np.max(np.abs(np.asarray(jnp.asarray(a) @ jnp.asarray(a))"
            " - a.astype(np.float64) @ a))))")
    errors = {}
    for chip in ("1", "0"):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              timeout=120, env=fake_env(fake_path, "FAKE_CHIP_MATMUL",
                                                        COURSE_ACCELERATOR=chip))
        errors[chip] = float(done.stdout.split()[-1])
    assert errors["1"] > 20 * errors["0"], errors


@pytest.mark.slow
def test_contract_tolerance_is_the_devices_own_rounding(fake_path, tmp_path):
    """The reference fix on the faked chip's confident model lands 3.37x the contract's
    CPU tolerance from train_slow on the CPU: it passes, since train_slow itself run
    there lands 4.66x from it (the tolerance is 4x that, at most 32x)."""
    result = run_faked(PROJECT, fake_path, solution(PROJECT), 2, ["fast_matches_contract"],
                       "FAKE_CHIP_MATMUL", tmp=tmp_path, seed=CONFIDENT_SEED,
                       **ACCELERATOR_ENV)
    assert result["status"] == {"fast_matches_contract": "pass"}, result["stdout"][-3000:]


BFLOAT16 = [('    h = jnp.tanh(x @ params["w1"])\n    logits = h @ params["w2"]\n    lse',
             '    h = jnp.tanh(x.astype(jnp.bfloat16) @ params["w1"].astype(jnp.bfloat16))\n'
             '    logits = (h @ params["w2"].astype(jnp.bfloat16)).astype(jnp.float32)\n'
             '    lse')]


@pytest.mark.slow
def test_bfloat16_shortcut_still_fails_on_the_faked_chip(fake_path, tmp_path):
    """The widened tolerance stays far below what a lower-precision shortcut does: the
    planted bfloat16 fix (tests/test_optimisation.py) fails on the faked chip, with the
    device's condition named where it was measured."""
    impl = plant(tmp_path, PROJECT, "bfloat16_shortcut", BFLOAT16)
    result = run_faked(PROJECT, fake_path, impl, 2, ["fast_matches_contract"],
                       "FAKE_CHIP_MATMUL", tmp=tmp_path, seed=CONFIDENT_SEED,
                       **ACCELERATOR_ENV)
    assert result["status"] == {"fast_matches_contract": "fail"}, result["stdout"][-3000:]
    assert "differs from train_slow beyond the contract's tolerance" in result["stdout"]


# -- stage 3: growth claimed only where the checker's own figures show it ----------------

@pytest.mark.slow
def test_sweep_is_set_against_the_checkers_growth_on_a_launch_bound_chip(fake_path,
                                                                         tmp_path):
    """Every compiled call in the learner process takes at least 0.2 s, above its
    arithmetic at both of the sweep's sizes, so train_fast hardly grows from the small
    batch to the large one, as on the chip (1.57x), and train_slow neither: the reference
    solution's sweep is not failed for growing less than the arithmetic (it FAILed here
    before, as on the chip); an INCONCLUSIVE under this machine's load is no failure. The
    budget is 2x the check's: every call here is that slow (at 0.5 s a call and 4x the
    budget this test took 139 s of CI's wall; at 0.2 s and 2x, 68 s under make test's load,
    passing)."""
    result = run_faked(PROJECT, fake_path, solution(PROJECT), 3, ["sweep_matches_checker"],
                       tmp=tmp_path, seed=CONFIDENT_SEED, FAKE_CHIP_LAUNCH_S="0.2",
                       COURSE_TIMING_BUDGET="2", **ACCELERATOR_ENV)
    status = result["status"].get("sweep_matches_checker")
    assert status in ("pass", "inconclusive"), result["stdout"][-3000:]

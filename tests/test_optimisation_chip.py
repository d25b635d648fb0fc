"""optimisation's checker on what a TPU returns, faked on the CPU (issue 51): a trace whose
XLA operations sit on the device's own lines, not on the host's threads as a CPU writes
them (the chip run read "0 XLA operation events" there)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

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

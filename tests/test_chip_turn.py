"""Turns at the one chip (coursekit.chip_turn): the chip's lane holds it for an item, a fresh
process of a CPU-lane notebook waits for that item to end and goes before the next one;
unset, nothing waits. Real processes and a real flock: the lock is what keeps two
processes off a TPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from coursekit.chip_turn import CHIP_LOCK_ENV, chip_turn, held_now, holding_chip
from coursekit.facts import ROOT

# a fresh process taking its turn: prints when it got the chip and when it let it go
TURN = """
import sys, time
from coursekit.chip_turn import chip_turn
with chip_turn():
    got = time.time()
    time.sleep(float(sys.argv[1]))
    let_go = time.time()
print(got, let_go)
"""


def turn(lock, hold_s: float) -> subprocess.Popen:
    env = {**os.environ, CHIP_LOCK_ENV: str(lock), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", TURN, str(hold_s)], env=env,
                            stdout=subprocess.PIPE, text=True)


def wait_for_marker(lock, child, timeout=30.0):
    marker = lock.with_name(f"{lock.name}.wanted.{child.pid}")
    deadline = time.time() + timeout
    while not marker.exists():
        assert time.time() < deadline and child.poll() is None, "the turn left no marker"
        time.sleep(0.02)


def test_unset_nothing_waits_or_is_locked(tmp_path, monkeypatch):
    monkeypatch.delenv(CHIP_LOCK_ENV, raising=False)
    with chip_turn(), holding_chip(None):
        pass
    assert list(tmp_path.iterdir()) == []


def test_a_turn_waits_for_the_item_then_goes_before_the_next(tmp_path):
    lock = tmp_path / "chip.lock"
    with holding_chip(lock):
        child = turn(lock, 0.5)
        wait_for_marker(lock, child)      # waiting: the item still holds the chip
        time.sleep(0.3)
        assert child.poll() is None
        released = time.time()
    with holding_chip(lock):              # the next item: after the waiting turn
        next_item = time.time()
    got, let_go = map(float, child.communicate(timeout=30)[0].split())
    assert released <= got <= let_go <= next_item
    assert not list(tmp_path.glob("chip.lock.wanted.*"))   # markers cleaned up


def test_a_marker_of_a_process_that_is_gone_holds_nothing_up(tmp_path):
    lock = tmp_path / "chip.lock"
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    lock.with_name(f"{lock.name}.wanted.{gone.stdout.strip()}").touch()
    started = time.monotonic()
    with holding_chip(lock, patience_s=20):
        pass
    assert time.monotonic() - started < 5


def test_a_turn_that_waits_past_patience_no_longer_holds_the_lane_up(tmp_path):
    lock = tmp_path / "chip.lock"
    with holding_chip(lock):
        child = turn(lock, 0.0)
        wait_for_marker(lock, child)
    child.communicate(timeout=30)
    marker = lock.with_name(f"{lock.name}.wanted.{os.getpid()}")
    marker.touch()                        # alive (this process) and never taken
    started = time.monotonic()
    with holding_chip(lock, patience_s=0.5):
        pass
    assert 0.4 < time.monotonic() - started < 5


def test_the_cpu_kernels_open_the_chip_only_in_their_turn(tmp_path, monkeypatch):
    """Notebook 05's one-chip cell and 08's record from another environment start their
    chip processes inside a turn, held until those processes have exited (a turn taken in
    the child itself ended before its JAX let go of the chip: the chip's next notebook then
    met the TPU's lockfile, on the chip, 2026-12-07)."""
    import nbformat

    from coursekit.facts import NOTEBOOKS
    from coursekit.notebook import other_environment
    for name in ("05_sharding_and_recovery", "08_readiness_review"):
        nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        assert nb.metadata["course"]["kernel_platform"] == "cpu"
        for cell in nb.cells:
            if cell.cell_type == "code" and "USER_PLATFORMS" in cell.source and \
                    "subprocess.run" in cell.source:
                assert "with chip_turn():" in cell.source, (name, cell.source[:200])
    lock = tmp_path / "chip.lock"
    monkeypatch.setenv(CHIP_LOCK_ENV, str(lock))
    seen = []
    monkeypatch.setattr(other_environment, "_record",
                        lambda *a, **k: seen.append(held_now(lock)) or ({}, "", "tpu"))
    other_environment.record(None, {}, training=tmp_path, batch=1, iters=1, runs=tmp_path,
                             user_platforms=None)
    assert seen == [True] and not held_now(lock)

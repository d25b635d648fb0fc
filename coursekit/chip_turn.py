"""Turns at the one chip, between make accelerator's two lanes.

A TPU admits one process at a time. make accelerator runs the items that compute on the
chip one after another, each holding it whole (``holding_chip``), and beside them, in its
CPU lane, the notebooks whose kernel stays on the CPU (05, 08). Such a notebook opens the
chip only from a fresh process (its one-chip cell, its record from another environment),
started and waited for inside the chip's turn (``chip_turn``): the turn waits for the item
holding the chip to end, and the next item waits for it. The turn ends after the process
has exited (taken inside the child, it ended before the child's JAX let go of the chip,
and the next item met the TPU's lockfile). The turn is a file lock
(``flock``) named by ``COURSE_CHIP_LOCK``; where that is unset (a learner's lab, CI, a dry
run) nothing waits and nothing is locked.

A waiting turn leaves a marker beside the lock (``<lock>.wanted.<pid>``) so the chip's
lane, which would otherwise take the lock again at once, lets it go first. A marker whose
process is gone is ignored.

Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path

CHIP_LOCK_ENV = "COURSE_CHIP_LOCK"
YIELD_AT_MOST_S = 600.0   # the chip's lane waits this long at most for waiting turns


def _wanted(lock: Path) -> list[Path]:
    """The markers of turns that wait for the chip and whose process is alive."""
    alive = []
    for marker in lock.parent.glob(f"{lock.name}.wanted.*"):
        try:
            os.kill(int(marker.name.rsplit(".", 1)[1]), 0)
        except (ValueError, ProcessLookupError):
            continue
        except PermissionError:
            pass   # alive, another user's
        alive.append(marker)
    return alive


@contextlib.contextmanager
def _locked(lock: Path):
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def held_now(lock: Path) -> bool:
    """Whether some process holds the chip's turn at this moment (a lock taken and let go
    at once: it does not wait)."""
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


@contextlib.contextmanager
def chip_turn(env: dict | None = None):
    """Hold the chip for the block, after the item holding it now (``COURSE_CHIP_LOCK`` in
    ``env``, default this process's environment); a no-op where it is unset."""
    name = (os.environ if env is None else env).get(CHIP_LOCK_ENV)
    if not name:
        yield
        return
    lock = Path(name)
    marker = lock.with_name(f"{lock.name}.wanted.{os.getpid()}")
    marker.touch()
    try:
        with _locked(lock):
            marker.unlink(missing_ok=True)
            yield
    finally:
        marker.unlink(missing_ok=True)


@contextlib.contextmanager
def holding_chip(lock: Path | None, patience_s: float = YIELD_AT_MOST_S):
    """The chip's lane: hold the chip for one item, after letting any waiting turn go
    first (for at most ``patience_s``). ``lock`` None: no other lane, nothing to do."""
    if lock is None:
        yield
        return
    deadline = time.monotonic() + patience_s
    while _wanted(lock) and time.monotonic() < deadline:
        time.sleep(0.2)
    with _locked(lock):
        yield

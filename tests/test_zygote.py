"""A learner process forked by a warm zygote (``coursekit.checking.zygote``, the planted
runner's) is one a cold start would give: the same descriptors, environment, parent,
folder, privileges and signal state, its own random state, and its death named the same
way. When no zygote can fork it, it starts cold. (Every bridge test of
tests/test_learner_bridge.py also runs on a forked learner process.)"""

from __future__ import annotations

import os

import pytest

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerProcess
from coursekit.checking.errors import LearnerProcessDied
from coursekit.checking.zygote import Adopted, Zygotes

LEARNER = '''
import ctypes
import os
import random

import numpy as np


def facts():
    fds = {}
    for name in sorted(os.listdir("/proc/self/fd"), key=int):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # the listing's own descriptor
        fds[int(name)] = "pipe" if target.startswith("pipe:") and int(name) > 2 else target
    status = {}
    for line in open("/proc/self/status"):
        key, _, value = line.partition(":")
        if key in ("Uid", "Gid", "SigBlk", "SigIgn", "SigCgt", "CapEff", "CapPrm",
                   "NoNewPrivs", "Seccomp"):
            status[key] = value.strip()
    dumpable = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
    return {"fds": sorted(fds.values()), "status": status, "env": dict(os.environ),
            "ppid": os.getppid(), "cwd": os.getcwd(), "dumpable": dumpable,
            "umask": os.umask(0o022)}


def draws():
    return [float(np.random.random()), random.random()]


def exit_with(code):
    os._exit(code)
'''


@pytest.fixture
def impl(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(LEARNER)
    return path


@pytest.fixture
def zygotes():
    bridge.FORK_FROM = found = Zygotes(fork_first=True)
    try:
        yield found
    finally:
        bridge.FORK_FROM = None
        found.close()


def started(impl, **kw) -> tuple[LearnerProcess, object]:
    process = LearnerProcess(impl, **kw)
    return process, process.module()


def test_a_forked_learner_process_is_what_a_cold_start_gives(impl, zygotes):
    bridge.FORK_FROM = None
    cold, module = started(impl)
    try:
        want = module.facts()
        assert type(cold.proc).__name__ == "Popen"
    finally:
        cold.close()
    bridge.FORK_FROM = zygotes
    forked, module = started(impl)
    try:
        got = module.facts()
        assert isinstance(forked.proc, Adopted)
    finally:
        forked.close()
    assert got["ppid"] == want["ppid"] == os.getpid()  # re-parented to the checker
    assert got == want
    assert zygotes.forked == 1 and zygotes.cold == 0


def test_each_forked_process_draws_its_own_random_numbers(impl, zygotes):
    draws = []
    for _ in range(3):
        process, module = started(impl)
        try:
            draws.append(module.draws())
        finally:
            process.close()
    numpy_draws, python_draws = zip(*draws)
    assert len(set(numpy_draws)) == 3 and len(set(python_draws)) == 3, draws


def test_an_exit_is_named_as_for_a_cold_process(impl, zygotes):
    for fork_from in (None, zygotes):
        bridge.FORK_FROM = fork_from
        process, module = started(impl)
        try:
            with pytest.raises(LearnerProcessDied, match=r"exited with code 3\) while "
                               r"running exit_with"):
                module.exit_with(3)
        finally:
            process.close()


def test_without_a_zygote_the_process_starts_cold(impl, zygotes):
    process, module = started(impl)
    process.close()
    for zygote in zygotes.warm.values():  # killed from outside: the next start is cold
        zygote.proc.kill()
        zygote.proc.wait()
    zygotes.fork_first = False
    process, module = started(impl)
    try:
        assert type(process.proc).__name__ == "Popen"
        assert module.draws()
    finally:
        process.close()
    # an environment asked for once (a fresh process's own hash seed) also starts cold
    process, module = started(impl, env={"PYTHONHASHSEED": "7"})
    try:
        assert type(process.proc).__name__ == "Popen"
        assert module.facts()["env"]["PYTHONHASHSEED"] == "7"
    finally:
        process.close()
    assert (zygotes.forked, zygotes.cold) == (1, 2)

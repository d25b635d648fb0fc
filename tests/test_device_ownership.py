"""The chip belongs to the code being measured: a checker's process (and every helper it
starts) keeps JAX on the CPU, and the learner process gets the platforms the user asked
for. On a TPU machine one process at a time can hold the chip, so a checker that opened it
would lock the learner's code out (issue 43); CI has no accelerator, so the test asks for
one that is not there: the checker must not even try it."""

from __future__ import annotations

import os
import subprocess
import sys

from coursekit import protocol
from coursekit.facts import ROOT, checker_path


def test_the_pin_keeps_what_the_user_asked_for_for_the_learner():
    env = {"JAX_PLATFORMS": "tpu"}
    protocol.pin_checker_to_cpu(env)
    assert env["JAX_PLATFORMS"] == "cpu"
    assert protocol.learner_environment(env)["JAX_PLATFORMS"] == "tpu"
    protocol.pin_checker_to_cpu(env)  # a second pin (runner, then check.py) keeps the first
    assert protocol.learner_environment(env)["JAX_PLATFORMS"] == "tpu"
    unset: dict = {}
    protocol.pin_checker_to_cpu(unset)
    assert unset["JAX_PLATFORMS"] == "cpu"
    assert "JAX_PLATFORMS" not in protocol.learner_environment(unset)
    assert protocol.ENV_LEARNER_PLATFORMS not in protocol.learner_environment(unset)


def test_a_checker_never_opens_the_accelerator_its_learner_asks_for():
    """JAX_PLATFORMS=tpu on a machine without one: a checker that opened it would die at
    its first JAX call. It runs on, and the learner process's refusal is named, not a
    traceback wall."""
    impl = ROOT / "projects" / "foundations" / "solution" / "model.py"
    done = subprocess.run(
        [sys.executable, str(checker_path("foundations")), "--stage", "1", "--impl",
         str(impl), "--seed", "3"], capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "tpu"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout
    assert "JAX could not open its tpu backend in the process that runs your code" \
        in done.stdout, done.stdout
    assert "this machine's JAX has no working tpu backend" in done.stdout


def test_a_check_names_the_device_its_learner_code_ran_on():
    impl = ROOT / "projects" / "foundations" / "solution" / "model.py"
    done = subprocess.run(
        [sys.executable, str(checker_path("foundations")), "--stage", "1", "--impl",
         str(impl), "--seed", "3"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "measured on: CPU figure (cpu), 1 device(s), JAX" in done.stdout

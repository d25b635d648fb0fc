"""Notebook 05's one-chip cell (coursekit.workloads.one_chip): on a machine without an
accelerator its process finds the CPU and does nothing else; told it is on a chip, it runs
the learner's mesh, placement and step and counts the compiled step's all-reduces (none
with one device), and an unfinished stage 1 reads "not yet"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import pytest

from coursekit.facts import ROOT
from coursekit.measure import environment
from coursekit.workloads import one_chip

SOLUTION = ROOT / "projects" / "sharded-training" / "solution" / "model.py"
STARTER = ROOT / "projects" / "sharded-training" / "starter" / "model.py"
CONFIG = {"seed": 0, "data_seed": 1, "n_examples": 200, "batch": 16, "spread": 4.0,
          "lr": 0.05, "momentum": 0.9, "noise": 0.1}


def test_a_cpu_only_machine_is_said_and_nothing_runs():
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_PLATFORMS", "XLA_FLAGS")}
    env["JAX_PLATFORMS"] = "cpu"
    done = subprocess.run([sys.executable, "-m", "coursekit.workloads.one_chip", "--impl",
                           str(SOLUTION), "--config", json.dumps(CONFIG)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["backend"] == "cpu" and got["devices"] == 1 and "mesh" not in got


@pytest.fixture
def on_a_chip(monkeypatch):
    real = environment.device_facts

    def chip():
        return {**real(), "backend": "tpu", "device_kind": "TPU v5 lite",
                "label": "TPU figure (TPU v5 lite)"}
    monkeypatch.setattr(environment, "device_facts", chip)


def test_the_learners_step_on_one_device_holds_no_all_reduce(on_a_chip):
    got = one_chip.one_chip(str(SOLUTION), CONFIG)
    n = jax.device_count()
    assert got["mesh"] == {"data": n} and got["placement"]["params.w1"] == list(range(n))
    assert (got["all_reduces"] == 0) == (n == 1)
    assert got["loss"] > 0 and got["label"] == "TPU figure (TPU v5 lite)"


def test_an_unfinished_stage_1_is_not_yet(on_a_chip):
    got = one_chip.one_chip(str(STARTER), CONFIG)
    assert got["not_yet"].startswith("stage 1: make_mesh") and "mesh" not in got

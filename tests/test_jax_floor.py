"""The floor of the course's JAX range, as an accelerator image runs it.

The TPU v5e image ships Python 3.11 with its own JAX 0.10.2 first on PYTHONPATH and lacks
mlflow, xprof, papermill, jupytext, nbgrader, copydetect and cosmic-ray. Here the same:
jax and jaxlib ``FLOOR`` (``coursekit.compat.jaxapi``) from build/jax-floor
(``coursekit.authoring.jaxfloor``; make test installs it) first on ``PYTHONPATH``, and
``coursekit.compat.optional.OPTIONAL`` hidden (tests/image/sitecustomize.py). Every
process under test inherits that: a checker and the learner process it starts both run
the floor, as the JSON each writes says. What would break there, checked here:

* every coursekit and autograder module imports; the sealed programs load and run (and
  match the replay written the obvious way); a program exported as the learner process
  exports it rebuilds as the checker rebuilds it (tests/floor_probe.py);
* the sealed programs are what the floor exports from their sources (``make starters``);
* per project, the checks of its solution that touch a version-bound API: jax.export's
  rebuild (foundations, pallas-kernel, performance-audit, sharded-training), the sealed
  replay (foundations), cost and memory analyses (performance-audit), profiler traces
  read with xprof absent (performance-audit, optimisation), meshes, shardings and
  shard_map (sharded-training). A whole stage costs several times these checks.

Cost: about 45 s of one core (docs/ci.md), plus the floor's install once per machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.authoring import jaxfloor
from coursekit.compat import jaxapi, optional
from coursekit.facts import ROOT, checker_path

pytestmark = pytest.mark.slow
TESTS = Path(__file__).resolve().parent
# per project: the stage(s) and the checks run on its solution under the floor
CHECKS = {
    "foundations": ("all", "mse_works_under_jit,fit_follows_key_protocol"),
    "pallas-kernel": ("2", "kernel_is_a_pallas_call"),
    "performance-audit": ("all", "cost_by_hand_and_compiler,trace_written_and_newest_found,"
                                 "remat_really_applied"),
    "optimisation": ("1", "breakdown_matches_checker_parse"),
    "sharded-training": ("all", "compiled_step_has_all_reduce,uses_shard_map"),
}
# the training replay's weights against the plain loop, as a share of the largest (3e-7
# measured on the floor and on 0.12: float32 rounding), and the float64 fit's (8e-11 on
# the floor, 2e-16 on 0.12: the floor's XLA orders the float64 sums its own way)
TRAIN_BOUND, FIT_BOUND = 1e-6, 1e-8


@pytest.fixture(scope="module")
def image_env() -> dict:
    """The environment of an accelerator image at the floor: the floor JAX first on
    PYTHONPATH (installed when missing), the optional packages hidden, the CPU."""
    jaxfloor.install()
    env = jaxfloor.environment()
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS / "image"), env["PYTHONPATH"]])
    env["COURSE_HIDE_PACKAGES"] = ",".join(optional.OPTIONAL)
    env["JAX_PLATFORMS"] = "cpu"
    return env


def test_modules_import_and_programs_run_under_the_floor(image_env):
    done = subprocess.run([sys.executable, str(TESTS / "floor_probe.py")], env=image_env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    probe = json.loads(done.stdout.strip().splitlines()[-1])
    assert probe["jax"] == jaxapi.FLOOR
    assert probe["imports"] == {}, probe["imports"]
    assert probe["sealed"]["train_replay"] < TRAIN_BOUND, probe["sealed"]
    assert probe["sealed"]["fit_replay"] < FIT_BOUND, probe["sealed"]
    assert probe["rebuilt"] < 1e-6, probe


def test_sealed_programs_are_what_the_floor_exports(image_env):
    done = subprocess.run([sys.executable, "-m", "coursekit.authoring.sealed", "--check"],
                          env=image_env, capture_output=True, text=True, timeout=600,
                          cwd=ROOT)
    assert done.returncode == 0, f"run `make starters`: {done.stdout}{done.stderr[-2000:]}"


@pytest.mark.parametrize("project", sorted(CHECKS))
def test_the_solution_passes_under_the_floor(project, image_env, tmp_path):
    stage, only = CHECKS[project]
    report = tmp_path / "result.json"
    done = subprocess.run(
        [sys.executable, str(checker_path(project)), "--stage", stage, "--only", only,
         "--impl", str(ROOT / "projects" / project / "solution" / "model.py"),
         "--json", str(report)],
        env=image_env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert report.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    payload = json.loads(report.read_text())
    # a timing check may be inconclusive under load (never a FAIL of correct work)
    assert payload["failed"] == 0 and payload["passed"] + payload["inconclusive"] == len(
        only.split(",")), done.stdout[-3000:]
    assert payload["versions"]["jax"] == jaxapi.FLOOR        # the checker's process
    assert payload["measured_on"]["jax"] == jaxapi.FLOOR     # the learner process
    if project == "performance-audit":  # xprof is absent: said by name, not failed
        assert any(s.startswith("xprof is not installed") for s in payload["skipped"]), \
            payload["skipped"]
        assert "skipped here: xprof is not installed" in done.stdout

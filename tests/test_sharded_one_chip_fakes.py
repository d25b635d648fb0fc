"""sharded-training on a machine like the TPU v5e of 2026-12-06 (issue 51), faked on the
CPU: what the chip returned there, reproduced here by ``tests/chip_fakes.py``'s
``sitecustomize`` on the path of every process the checker starts.

- ``FAKE_ONE_CHIP``: a process that does not pin JAX to the CPU "opens the chip" and finds
  one device (its fake CPU device count becomes 1), as the learner process did on the
  chip: "the learner process sees 1 devices, not 8", then KeyError: 1 placing on device 1.
- ``FAKE_NO_INET``: ``socket.socket(AF_INET/AF_INET6)`` raises OSError 97 (Address family
  not supported), as that machine's sandbox did; unix sockets still work.

Under the fakes the reference solution passes every check it can run, the two
jax.distributed checks say "not applicable here" (no failure, exit status 0), and the
starter says "not yet" in every check of stages 1-2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import chip_fakes
import pytest
from chip_fakes import fake_env, write_fake
from helpers import ROOT, reference_run, solution, starter

PROJECT = "sharded-training"


@pytest.fixture(scope="module")
def fake_path(tmp_path_factory):
    return write_fake(tmp_path_factory)


def run_faked(fake_path, impl, stage, checks, *fakes, tmp) -> dict:
    return chip_fakes.run_faked(PROJECT, fake_path, impl, stage, checks, *fakes, tmp=tmp)


def test_the_fake_shows_one_device_to_an_unpinned_process(fake_path):
    """The fake is a fake of something: a process that keeps the user's (unset)
    platforms sees one device, one pinned to the CPU keeps its eight."""
    code = "import jax; print(jax.device_count())"
    env = fake_env(fake_path, "FAKE_ONE_CHIP",
                   XLA_FLAGS="--xla_force_host_platform_device_count=8")
    unpinned = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120)
    pinned = subprocess.run([sys.executable, "-c", code], env={**env, "JAX_PLATFORMS": "cpu"},
                            capture_output=True, text=True, timeout=120)
    assert unpinned.stdout.split()[-1] == "1", unpinned.stderr[-2000:]
    assert pinned.stdout.split()[-1] == "8", pinned.stderr[-2000:]


def test_the_fake_refuses_inet_sockets_and_keeps_unix_ones(fake_path):
    code = textwrap.dedent("""
        import socket
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM):
            pass
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as err:
            print(err.errno)
    """)
    done = subprocess.run([sys.executable, "-c", code], env=fake_env(fake_path, "FAKE_NO_INET"),
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "97", done.stderr


STAGE_CHECKS = {
    "1": ["mesh_over_devices", "explicit_shardings", "placement_report_matches",
          "compiled_step_has_all_reduce", "mixed_meshes_reported"],
    "2": ["valid_counts_per_shard", "unequal_counts_weighted"],
    "4": ["record_is_valid"],
}


@pytest.mark.slow
@pytest.mark.parametrize("stage", list(STAGE_CHECKS))
def test_learner_process_keeps_eight_cpu_devices_where_the_chip_shows_one(
        fake_path, tmp_path, stage):
    result = run_faked(fake_path, solution(PROJECT), stage, STAGE_CHECKS[stage],
                       "FAKE_ONE_CHIP", "FAKE_NO_INET", tmp=tmp_path)
    assert set(result["status"].values()) == {"pass"}, result["stdout"][-3000:]
    assert result["returncode"] == 0
    # the figures say where they were measured: the CPU's 8 devices, not the chip
    assert "measured on: CPU figure" in result["stdout"], result["stdout"][-1000:]
    assert "8 device(s)" in result["stdout"]


@pytest.mark.slow
def test_starter_says_not_yet_where_the_chip_shows_one(fake_path, tmp_path):
    checks = STAGE_CHECKS["1"] + STAGE_CHECKS["2"]
    result = run_faked(fake_path, starter(PROJECT), "all", checks, "FAKE_ONE_CHIP",
                       "FAKE_NO_INET", tmp=tmp_path)
    assert result["status"] == {c: "not-implemented" for c in checks}, result["stdout"][-3000:]
    assert "KeyError" not in result["stdout"]


DISTRIBUTED = ["distributed_timeouts_set", "two_processes_match_one"]


@pytest.mark.slow
def test_distributed_checks_are_not_applicable_without_sockets(fake_path, tmp_path):
    result = run_faked(fake_path, solution(PROJECT), "3", DISTRIBUTED, "FAKE_ONE_CHIP",
                       "FAKE_NO_INET", tmp=tmp_path)
    out = result["stdout"]
    assert result["status"] == {c: "not-applicable" for c in DISTRIBUTED}, out[-3000:]
    assert result["returncode"] == 0, out[-2000:]  # nothing else failed
    assert "NOT APPLICABLE stage 3 · two_processes_match_one" in out
    assert "not applicable here: the two-process jax.distributed run" in out
    assert "Errno 97" in out and "Traceback" not in out and "socket.py" not in out
    assert result["json"]["not_applicable"] == 2 and result["json"]["failed"] == 0
    assert out.rstrip().endswith("not applicable here: 2 (this machine lacks what they "
                                 "need; each says what)")


@pytest.mark.slow
def test_starter_distributed_checks_say_not_yet_without_sockets(fake_path, tmp_path):
    result = run_faked(fake_path, starter(PROJECT), "3", DISTRIBUTED, "FAKE_NO_INET",
                       tmp=tmp_path)
    assert result["status"] == {c: "not-implemented" for c in DISTRIBUTED}, result["stdout"]


# -- the "not applicable here" status on its own (no JAX run: fast) -----------------------

def test_not_applicable_is_neither_a_pass_nor_a_failure():
    from coursekit.checking import tally
    from coursekit.checking.errors import NOT_APPLICABLE

    results = [{"status": "pass"}, {"status": NOT_APPLICABLE}]
    assert tally.counts(results) == {"passed": 1, "failed": 0, "inconclusive": 0,
                                     "instructor": 0, "not_applicable": 1}
    assert tally.exit_status(results) == 0
    assert "not applicable here: 1" in tally.summary_line(results)
    assert tally.exit_status([*results, {"status": "fail"}]) == 1


def test_not_applicable_raised_by_the_learners_file_is_an_error(tmp_path):
    """An in-process checker runs the learner's file in its own process: a learner's
    NotApplicableHere is the learner's exception, not the machine's word."""
    from coursekit.checking.contract import Checker
    from coursekit.checking.errors import NotApplicableHere

    impl = tmp_path / "model.py"
    impl.write_text("from coursekit.checking.errors import NotApplicableHere\n"
                    "def skip():\n    raise NotApplicableHere('this', 'that')\n")
    checker = Checker("demo", {1: "one"})

    @checker.check(1)
    def learner_says_skip(module, ctx):
        module.skip()

    @checker.check(1)
    def machine_says_skip(module, ctx):
        raise NotApplicableHere("a run", "no sockets here")

    results = checker.run(impl, [1], 0, tmp_path, out=open(os.devnull, "w"))
    assert [r.status for r in results] == ["error", "not-applicable"]
    assert results[1].message == "not applicable here: a run: no sockets here"


def shared_apart_from(folder: Path, stage: int) -> Path:
    """The session's sandboxed reference result of every stage but ``stage``, shared for
    the notebook's check cells: the learner processes of stages 1, 2 and 4 keep eight CPU
    devices on a chip as on a CPU (the same verdicts), so only the stage whose verdicts
    the fakes change (no sockets: not applicable) runs again."""
    from coursekit.notebook.reuse import share_reference_result
    payload = reference_run(PROJECT)["json"]
    share_reference_result(folder, PROJECT, solution(PROJECT),
                           {**payload, "stages": [s for s in payload["stages"]
                                         if str(s) != str(stage)]})
    return folder


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_notebook_05_runs_to_its_end_under_the_fakes(fake_path, tmp_path):
    """Notebook 05 headless (as the accelerator run starts it) on the faked machine: to
    its last cell, every check cell passing or not applicable (stage 3's two-process
    checks), none failing; the one-chip cell finds one device and names the refused
    socket."""
    import nbformat

    from coursekit.commands.course import inspect_outputs, notebook_parameters, read_check_records
    path = ROOT / "notebooks" / "05_sharding_and_recovery.ipynb"
    params = notebook_parameters(nbformat.read(path, as_version=4), ci=True, learner=False,
                                 folder=path.parent)
    executed, records = tmp_path / "05.ipynb", tmp_path / "records"
    env = fake_env(fake_path, "FAKE_ONE_CHIP", "FAKE_NO_INET", COURSE_RECORDS=str(records),
                   COURSE_CHECK_REUSE=str(shared_apart_from(tmp_path / "reuse", stage=3)))
    done = subprocess.run(
        [sys.executable, "-m", "coursekit.commands.accelerator_notebook",
         str(tmp_path / "device.json"), str(path), str(executed), "--parameters-json",
         json.dumps(params), "--cwd", str(path.parent), "--timeout", "900"],
        capture_output=True, text=True, timeout=1700, cwd=ROOT, env=env)
    ran = nbformat.read(executed, as_version=4)
    outputs = inspect_outputs(ran)
    assert outputs["ran_to_end"], (done.stdout[-2000:], done.stderr[-2000:])
    checks = read_check_records(records)
    assert checks["check_cells"] == 4 and checks["checks_failed"] == 0, checks
    text = "\n".join(o.get("text", "") for c in ran.cells if c.cell_type == "code"
                     for o in c.get("outputs", []) if o.get("output_type") == "stream")
    assert "NOT APPLICABLE stage 3 · two_processes_match_one" in text
    assert "(2 not applicable here)" in text
    assert "Errno 97" in text and "Traceback" not in text


def test_the_accelerator_report_counts_not_applicable_as_no_failure():
    from coursekit.commands.accelerator_runs import stage_verdicts

    results = [{"stage": 3, "check_id": c, "status": s, "message": m, "duration_s": 1.0}
               for c, s, m in (("state_roundtrip", "pass", ""),
                               ("two_processes_match_one", "not-applicable",
                                "not applicable here: the two-process run: no sockets"))]
    verdict = stage_verdicts(results, "solution")["3"]
    assert verdict["verdict"] == "pass, not applicable" and verdict["as_expected"], verdict
    assert verdict["not_applicable"] == 1 and verdict["failed"] == 0

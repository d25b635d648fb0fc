"""performance-audit stage 3 on an accelerator (issue 51), faked on the CPU.

- The TPU v5e plans temp bytes 0 for the remat programs whose CPU compile plans 1,666,512,
  and stage 3 compared the learner's figure computed on the chip with the checker's CPU
  compile. Here a learner process that "holds the chip" answers as the chip did (temp 0)
  and the checker is told a learner may hold an accelerator: the temp checks must ask a
  learner process kept on the CPU, and compare a CPU plan with a CPU plan.
- On the chip the reference failed ``peak_memory_from_fresh_process``: "the run-only
  peak with nothing_saveable is not below the no-remat one", and stage 3 took 299 s.
  Here every fresh peak process, the checker's and the learner's, reads a device whose
  counters show the same run-only peak for both policies (``FAKE_DEVICE_PEAK``: a
  function of the shapes alone, noiseless, as a chip's allocation counters are): the
  check must hold the learner to agreement with its own reading of that device, say so,
  still fail a learner's figure that is not the device's or a run of the other
  policy's program (its plan says which), and ask for few fresh processes (each one
  opens the chip: about 10 s there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTION = ROOT / "projects" / "performance-audit" / "solution" / "model.py"
TEMP = "    loss = MODELS[model]\n    fn = jax.jit(lambda p, v: jax.value_and_grad(loss)(p, v, policy))\n"
# the chip's answer: temp 0, in every learner process but one kept on the CPU
CHIP = ("    import os\n    if os.environ.get('COURSE_ACCELERATOR') != '0':\n"
        "        return 0  # what memory_analysis() said on the TPU v5e\n")

# The fake device's run-only peak: the same for both policies (the condition the chip
# showed), a function of the shapes alone. The learner's fresh process reads it from its
# device (the solution's child, patched below); the checker's from its own (RUN).
FAKE_DEVICE_PEAK = "8 * {kwargs}['batch'] * {kwargs}['hidden']"
CHILD_RUN_PEAK = '    "run_peak_bytes": hwm - rss if peak is None or held is None else peak - held,\n'
CHILD_DEVICE_PEAK = 'peak = stats.get("peak_bytes_in_use")\n'
ON_THE_DEVICE = ('    "run_peak_bytes": '
                 + FAKE_DEVICE_PEAK.format(kwargs='spec["kwargs"]') + ",\n")
DEVICE_REPORTS = 'peak = stats.get("peak_bytes_in_use") or 1\n'

RUN = r"""
import json, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/projects/performance-audit/tests"]
import check
import audit_stage3_remat as stage3
stage3.learner_may_hold_accelerator = lambda: True
asked = {"checker": 0, "learner": 0}
if sys.argv[5] == "fake-device":
    measured = stage3.answers.fresh_process_peak

    def on_the_device(factory, kwargs, **options):  # the checker's child, read on the fake
        got = measured(factory, kwargs, **options)
        asked["checker"] += 1
        return dict(got, run_peak_bytes=FAKE_DEVICE_PEAK, peak_source="device",
                    device_peak_bytes=1)
    stage3.answers.fresh_process_peak = on_the_device
learner_peak = stage3.learner_peak

def counted(impl, cfg, policy, repeats):
    asked["learner"] += repeats
    return learner_peak(impl, cfg, policy, repeats)
stage3.learner_peak = counted
results = check.checker.run(Path(sys.argv[2]), [3], 4, Path(sys.argv[3]),
                            only=set(sys.argv[4].split(",")))
print("RESULT " + json.dumps({r.check_id: [r.status, r.message] for r in results}))
print("ASKED " + json.dumps(asked))
""".replace("FAKE_DEVICE_PEAK", FAKE_DEVICE_PEAK.format(kwargs="kwargs"))


def run_as_on_the_chip(tmp_path: Path, model: str, checks: set, device: str = "") -> tuple:
    """Stage 3's ``checks`` on ``model`` with the checker told a learner may hold an
    accelerator (and with ``device="fake-device"`` every peak read on the fake device):
    ({check: [status, message]}, {"checker": its fresh processes, "learner": the
    learner's})."""
    impl = tmp_path / "model.py"
    impl.write_text(model)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", RUN, str(ROOT), str(impl), str(tmp_path),
                           ",".join(sorted(checks)), device or "-"],
                          env=env, capture_output=True, text=True, timeout=900, cwd=ROOT)
    found = {k: [ln for ln in done.stdout.splitlines() if ln.startswith(k + " ")]
             for k in ("RESULT", "ASKED")}
    assert all(found.values()), done.stdout[-2000:] + done.stderr[-3000:]
    return tuple(json.loads(found[k][-1].split(" ", 1)[1]) for k in ("RESULT", "ASKED"))


def on_the_fake_device(text: str, *, device_reading: bool = True) -> str:
    """The solution's fresh peak process on the fake device: the device reports memory
    and, with ``device_reading``, its run-only peak is the fake device's (without: the
    host's, as a learner who reads VmHWM where the device reports memory)."""
    assert text.count(CHILD_RUN_PEAK) == 1 and text.count(CHILD_DEVICE_PEAK) == 1
    text = text.replace(CHILD_DEVICE_PEAK, DEVICE_REPORTS)
    return text.replace(CHILD_RUN_PEAK, ON_THE_DEVICE) if device_reading else text


def test_temp_checks_compare_cpu_plans_when_the_learner_holds_a_chip(tmp_path):
    text = SOLUTION.read_text()
    assert text.count(TEMP) == 1
    checks = {"remat_saves_residuals_and_temp", "remat_policy_ordering"}
    results, _ = run_as_on_the_chip(tmp_path, text.replace(TEMP, CHIP + TEMP), checks)
    assert {k: v[0] for k, v in results.items()} == dict.fromkeys(checks, "pass"), results


PEAK = "peak_memory_from_fresh_process"


def test_peaks_equal_on_the_device_pass_by_agreement_in_few_processes(tmp_path):
    """The chip's condition: both policies read the same device peak, the checker's own
    readings too. The reference passes, the pass says that the check held it to the
    checker's reading rather than to a saving, and the chip is opened by at most five
    fresh processes (16 before: 3 + 3 + 1 of the learner's, 9 of the checker's)."""
    results, asked = run_as_on_the_chip(tmp_path, on_the_fake_device(SOLUTION.read_text()),
                                        {PEAK}, "fake-device")
    status, message = results[PEAK]
    assert status == "pass", results
    assert "no saving" in message and "agree" in message, message
    assert asked["checker"] + asked["learner"] <= 5, asked


def test_a_host_reading_on_the_device_still_fails(tmp_path):
    """A learner whose fresh process reads the host's memory where the device reports
    its own: the device's figures are another measure, and the check says so."""
    model = on_the_fake_device(SOLUTION.read_text(), device_reading=False)
    results, _ = run_as_on_the_chip(tmp_path, model, {PEAK}, "fake-device")
    status, message = results[PEAK]
    assert status == "fail" and "x the checker's" in message, results


def test_a_saving_is_claimed_only_where_the_checker_reads_one_clearly(monkeypatch):
    """Its own readings decide whether a saving is claimed: CPU-like ones (every
    nothing_saveable repeat below every None one, by a tenth or more) do; equal device
    readings, a few percent, or repeats that overlap do not."""
    monkeypatch.syspath_prepend(str(ROOT / "projects" / "performance-audit" / "tests"))
    from audit_stage3_remat import saving_shown

    def reading(plain, remat):
        return {name: {"run_peak_bytes": got, "median_run_peak_bytes": sorted(got)[len(got) // 2]}
                for name, got in (("None", plain), ("nothing_saveable", remat))}
    mib = 2**20
    assert saving_shown(reading([134 * mib, 135 * mib, 133 * mib], [62 * mib, 60 * mib, 64 * mib]))
    assert not saving_shown(reading([40 * mib], [40 * mib]))  # the chip's condition
    assert not saving_shown(reading([40 * mib], [38 * mib]))  # 5%: a program's fusion
    assert not saving_shown(reading([50 * mib, 30 * mib, 52 * mib], [35 * mib] * 3))
    assert not saving_shown(reading([None], [None]))


POLICY_PASSED = '"batch": batch,\n              "policy": policy}'


def test_a_dropped_policy_fails_where_the_peaks_show_no_saving(tmp_path):
    """Where the device's peaks of the two policies are equal, a fresh process that
    drops the policy reads the same peaks as the right one; the plan it reports for
    nothing_saveable is the no-remat program's, and the check names that."""
    text = on_the_fake_device(SOLUTION.read_text())
    assert text.count(POLICY_PASSED) == 1
    model = text.replace(POLICY_PASSED, POLICY_PASSED.replace('"policy": policy',
                                                              '"policy": None'))
    results, _ = run_as_on_the_chip(tmp_path, model, {PEAK}, "fake-device")
    status, message = results[PEAK]
    assert status == "fail" and "plan of the policy=None program" in message, results

"""performance-audit stage 3 on an accelerator (issue 51): the TPU v5e plans temp bytes 0
for the remat programs whose CPU compile plans 1,666,512, and stage 3 compared the
learner's figure computed on the chip with the checker's CPU compile. Here a learner
process that "holds the chip" answers as the chip did (temp 0) and the checker is told a
learner may hold an accelerator: the temp checks must ask a learner process kept on the
CPU, and compare a CPU plan with a CPU plan."""

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

RUN = r"""
import json, sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/projects/performance-audit/tests"]
import check
import audit_stage3_remat
audit_stage3_remat.learner_may_hold_accelerator = lambda: True
results = check.checker.run(Path(sys.argv[2]), [3], 4, Path(sys.argv[3]),
                            only={"remat_saves_residuals_and_temp", "remat_policy_ordering"})
print("RESULT " + json.dumps({r.check_id: [r.status, r.message] for r in results}))
"""


def test_temp_checks_compare_cpu_plans_when_the_learner_holds_a_chip(tmp_path):
    text = SOLUTION.read_text()
    assert text.count(TEMP) == 1
    chip = tmp_path / "model.py"
    chip.write_text(text.replace(TEMP, CHIP + TEMP))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", RUN, str(ROOT), str(chip), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, done.stdout[-2000:] + done.stderr[-3000:]
    results = json.loads(line[-1][len("RESULT "):])
    assert {k: v[0] for k, v in results.items()} == {
        "remat_saves_residuals_and_temp": "pass", "remat_policy_ordering": "pass"}, results

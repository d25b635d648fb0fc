"""sharded-training's stored expected outputs (``projects/sharded-training/tests/
expected/``, what a learner's copy checks stage 1's step against) equal a fresh
generation from the instructor's reference step: the file is numbers the course can
regenerate, never edited by hand."""

from __future__ import annotations

import subprocess
import sys

from helpers import ROOT

SCRIPT = """
import sys
import numpy as np
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/projects/sharded-training/tests"]
import sharded_expected
fresh = sharded_expected.generate()
with np.load(sharded_expected.FILE, allow_pickle=False) as stored:
    assert sorted(stored.files) == sorted(fresh), (sorted(stored.files), sorted(fresh))
    for k in fresh:
        assert stored[k].dtype == np.asarray(fresh[k]).dtype, k
        assert np.array_equal(stored[k], fresh[k]), k
print("same")
"""


def test_stored_expected_outputs_equal_a_fresh_generation():
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.stdout.strip().endswith("same"), done.stderr[-3000:]

"""Checks for foundations.

    python projects/foundations/tests/check.py --stage 1|2|3|all --impl PATH [--json F]

The checks live beside this file, one module a stage; this file only gathers them into
``checker`` (what the autograder reads) and runs it:

    foundations_harness               the checker, tolerances, the learner process's
                                      global random state, a fresh learner process, the
                                      replay comparison with its diagnoses
    foundations_stage1_mse            stage 1: the edit-check loop (mse)
    foundations_stage2_fit            stage 2: a regression fit (regression_grads,
                                      fit_regression)
    foundations_stage3_classifier     stage 3: a reproducible classifier (train_classifier,
                                      reference_workload)

Every check computes its own reference (float64 numpy, finite differences, a replay of
the key protocol, its own accuracy); the learner's code runs in a learner process and
this process never imports it (``foundations_harness`` says what is self-reported).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The course root, and this folder for the stage modules: the autograder loads this file
# with runpy.run_path, which (unlike `python check.py`) puts neither on sys.path.
for _path in (Path(__file__).resolve().parents[3], Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

# The chip belongs to the code being measured: this process and its helpers keep JAX on
# the CPU, and the learner process gets back the platforms the user asked for.
from coursekit.protocol import pin_checker_to_cpu  # noqa: E402

pin_checker_to_cpu()

# The checker, Checker(..., learner_process=True): the learner's code runs in a learner
# process (the autograder's runner reads that flag in this file's text to start it early).
from foundations_harness import checker  # noqa: E402

# isort: split
# Importing a stage registers its checks; registration order is check order.
import foundations_stage1_mse  # noqa: E402, F401
import foundations_stage2_fit  # noqa: E402, F401
import foundations_stage3_classifier  # noqa: E402, F401

# isort: split
# Stages 2 and 3 refuse a file that loads a sealed replay (coursekit.checking.forbidden).
from coursekit.checking.forbidden import guard  # noqa: E402

guard(checker)

if __name__ == "__main__":
    sys.exit(checker.main())

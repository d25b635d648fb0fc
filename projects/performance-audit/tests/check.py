"""Checks for performance-audit.

    python projects/performance-audit/tests/check.py --stage 1|2|3|4|all --impl PATH [--json F]

Every check computes its own reference (its own timing, its own trace parse, its own
gradients and cost counts) from inputs drawn from a seed the learner does not see, with
odd shapes. Timing checks compare ratios with wide margins, never absolute times, in
interleaved rounds of the learner's figure and the checker's own until the verdict is
clear or the check's budget runs out (PASS, FAIL with its evidence, or INCONCLUSIVE).

The learner's code runs in a learner process (``learner_process=True``): checks send it
data and catalog workloads (``coursekit.workloads.catalog``) and get data back; this
process never imports the learner's file. Facts the learner process reports about itself
(``SELF_REPORTED``, in ``audit_harness``) are cross-checked against what this process
measures; a contradiction is tamper evidence and scores the stage 0. Where a check needs
the learner's program (stage 3), the learner process exports it as StableHLO and the
checks analyse and run it here.

The checks live beside this file, one module a stage; this file only gathers them into
``checker`` (what the autograder reads) and runs it:

    audit_harness          the checker, what the learner process reports about itself,
                           the stage-1 workload and the checker's own measurement of it
                           (stages 1 and 2), the timing window
    audit_stage1_timing    stage 1: a comparable measurement
    audit_stage2_evidence  stage 2: explain the evidence (traces, costs, peak FLOP/s and
                           bandwidth, roofline, cache sizes)
    audit_stage3_remat     stage 3: test a trade-off (rematerialisation)
    audit_stage4_decision  stage 4: decide what is ready
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

# The checker, Checker(..., learner_process=True): its learner process runs the learner's
# code.
from audit_harness import checker  # noqa: E402

# isort: split
# Importing a stage registers its checks; registration order is check order.
import audit_stage1_timing  # noqa: E402, F401
import audit_stage2_evidence  # noqa: E402, F401
import audit_stage3_remat  # noqa: E402, F401
import audit_stage4_decision  # noqa: E402, F401

# isort: split
# The first check of each stage refuses a file that uses the course's own implementation
# of what the stage asks for (coursekit/checking/forbidden.py names it and says why).
from coursekit.checking.forbidden import guard  # noqa: E402

guard(checker)

if __name__ == "__main__":
    sys.exit(checker.main())

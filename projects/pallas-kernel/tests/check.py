"""Checks for pallas-kernel (a fused row-softmax Pallas kernel).

    python projects/pallas-kernel/tests/check.py --stage 1|2|3|all --impl PATH [--json F]

The learner's code runs in a learner process (``learner_process=True``,
``coursekit.checking.bridge``): this process never imports the learner's file. Checks send
it inputs as data and get the learner's results back as data, and verify them here against
the checker's own references: SciPy's float64 softmax (refused in the learner's stage 1)
and a float32 ``jax.numpy`` softmax, with the checker's own rounding budget. Inputs and
shapes come from a seed the learner does not see, with shapes that the block sizes do not
divide. What needs the learner's *program* is read in the learner process by inspectors;
those answers are self-reported, listed in ``SELF_REPORTED`` (``pallas_harness``) with what each is
cross-checked against here (the program exported as StableHLO and read and run in this
process, the shape arithmetic, this process's wall clock); a contradiction is tamper
evidence (the stage scores 0). Timing (stage 3) compares ratios with wide windows, never
absolute times.

The checks live beside this file, one module a stage; this file only gathers them into
``checker`` (what the autograder reads) and runs it:

    pallas_harness             the checker, SELF_REPORTED, the float64 and float32
                               references, the rounding budget, inputs, comparison,
                               the learner's kernel exported as StableHLO
    pallas_stage1_references   stage 1: independent references (softmax_jnp,
                               softmax_numpy_f64, tolerance)
    pallas_stage2_kernel       stage 2: the kernel (execution_mode, the pallas_call,
                               its values, run_softmax's declarations)
    pallas_stage3_measured     stage 3: measured (sweep, its synchronised timings,
                               summarize)
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

# The autograder's runner reads "learner_process=True" in this file's text (the docstring
# above) to start the learner process before this file is imported; pallas_harness builds
# the checker with it: Checker(..., learner_process=True).
from pallas_harness import checker  # noqa: E402

# isort: split
# Importing a stage registers its checks; registration order is check order.
import pallas_stage1_references  # noqa: E402, F401
import pallas_stage2_kernel  # noqa: E402, F401
import pallas_stage3_measured  # noqa: E402, F401

# isort: split
# The first check of each stage refuses a file that uses the course's own implementation
# of what the stage asks for (coursekit/checking/forbidden.py names it and says why).
from coursekit.checking.forbidden import guard  # noqa: E402

guard(checker)

if __name__ == "__main__":
    sys.exit(checker.main())

"""Checks for sharded-training.

    python projects/sharded-training/tests/check.py --stage 1|2|3|4|all --impl PATH [--json F]

Runs on 8 fake CPU devices (set before jax is imported, in ``sharded_harness``). The
learner's code runs in a learner process (``coursekit.checking.bridge``; the flag is set
in ``sharded_harness``, after the device flag, so that process inherits the 8 devices):
this process never imports the learner's file. Meshes, shardings, placed arrays, the
jitted step and Orbax managers stay there as handles; what the learner process reports
about them is listed in ``SELF_REPORTED`` (``sharded_harness``) with the independent
evidence each is checked against (the step's StableHLO analysed, compiled and run here,
checkpoint files and traces read here, values against the checker's own reference).
Every check computes its own reference: a single-device training step, its own gradient over
the valid rows, its own data order, its own reading of array placement and of the
profiler trace; inputs, seeds and valid counts come from the run's seed, which the
learner does not see.

Tolerances (stated, not bitwise): sharded vs single-device results differ by about
1e-7 per step from summation order, so they are compared with rtol 1e-4, atol 1e-5.
Recovery on the *same* mesh is compared bitwise. Stage 3 runs training in real
subprocesses (``coursekit/workloads/train_driver.py``), SIGKILLs them mid-run and mid-save,
restarts fresh processes, and runs two ``jax.distributed`` processes on localhost; each
process has a wall-clock limit and a failure in one stops the others
(``coursekit.workloads.procgroup``).

The checks live beside this file, one module a stage; this file only gathers them into
``checker`` (what the autograder reads) and runs it:

    sharded_harness    the checker, the 8 devices, the compilation cache, tolerances
    sharded_trees      reading the learner's arrays and comparing pytrees
    sharded_reference  the checker's own data order, single-device training, inputs
    sharded_learner    the learner process: kept values, inspectors, the learner's
                       stage-1 building blocks, called and type-checked
    sharded_program    the learner's exported StableHLO, analysed and compiled here
    sharded_stage1_placement   stage 1: mesh and placement
    sharded_stage2_weighting   stage 2: count-weighted global updates
    sharded_stage3_runs        stage 3's shared training runs, and the order they depend on
    sharded_stage3_recovery    stage 3: fresh-process recovery
    sharded_stage4_profiled    stage 4: trace and timing
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

# Read as text by the autograder's runner, which starts the learner process before this
# file is imported: that early process gets the same 8 CPU devices (sharded_harness holds
# the checker to it and discards an early process without them).
LEARNER_CPU_DEVICES = 8

# First, before anything imports jax: the harness sets up the 8 CPU devices, and the
# checker, Checker(..., learner_process=True), whose learner process inherits them.
from sharded_harness import checker  # noqa: E402

# isort: split
# Importing a stage registers its checks; registration order is check order: stage by
# stage, and within stage 3 the dependency order that sharded_stage3_runs describes.
import sharded_stage1_placement  # noqa: E402, F401
import sharded_stage2_weighting  # noqa: E402, F401
import sharded_stage3_recovery  # noqa: E402, F401
import sharded_stage4_profiled  # noqa: E402, F401

# isort: split
# The first check of each stage refuses a file that uses the course's own implementation
# of what the stage asks for (coursekit/checking/forbidden.py names it and says why).
from coursekit.checking.forbidden import guard  # noqa: E402

guard(checker)

if __name__ == "__main__":
    sys.exit(checker.main())

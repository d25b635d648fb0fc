"""Checks for optimisation.

    python projects/optimisation/tests/check.py --stage 1|2|3|4|all --impl PATH [--json F]

The workload is ``coursekit.workloads.slow_step``; the checker builds its reference from
it and never imports the learner's file: the learner's functions run in a learner
process (``learner_process=True``) and answer with data. Every figure the learner
reports is compared with the checker's own: its parse of the same trace, its
recomputation, or its own timing of both versions (``train_slow`` in this process, the
learner's ``train_fast`` in blocks in the learner process timed on this process's clock
from request to answer: no process that imported learner code times the reference or
produces a time a verdict rests on), in interleaved rounds that stop at each check's
budget with PASS, FAIL or INCONCLUSIVE. Sizes and seeds are drawn from the run's seed.

Self-reported (run beside the learner's code, in the learner process): the inspector
``optimisation/records_with_a_wrong_fast`` swaps the module's ``train_fast`` for one call
of ``write_run_records``; what comes back is checked as any record is (a swap that did
not take reads as output_ok True and fails). The inspector
``optimisation/gain_sweep_watched`` records the version, batch and learning rate of every
call ``gain_sweep`` makes; they are checked against the rounds asked for, and the sweep's
times against the checker's own. The inspector ``optimisation/stubbed_calls``
(``coursekit/workloads/remote_optimisation_stubbed.py``) runs ``gain_sweep`` and
``predict_crossover`` once each with both versions and ``slow_step.fresh_copy`` replaced
by sleeps of lengths the checker sets; the lengths the stubs record are self-reported and
only set against the learner's own samples and medians from the same call (a copy inside
a sample, calls not interleaved, a mean reported as the median). The inspectors
``optimisation/block_prepare`` and ``optimisation/fast_block`` run blocks of
``train_fast`` for the checker to time; the times and compile count they report are
self-reported (the times only cross-checked
against the checker's clock; the compile count backs ``no_recompile_fixed_shape``
beside the checker's timing of the first call against later ones). The inspector
``optimisation/records_with_a_synced_fast`` runs the learner's ``write_run_records`` once
more with ``train_fast`` waiting for its own result; the checker reads that after record's
trace itself, and the count of XLA operations in its region is self-reported, only ever a
reason to fail an after record whose region holds fewer (a traced call not waited for
inside its trace). Stage 1's parse is checked against stored answers for stored public
traces where the copy holds no parser (``optim_expected``).

The checks live beside this file, one module a stage; this file only gathers them into
``checker`` (what the autograder reads) and runs it:

    optim_harness            the checker, sizes drawn per run, the checker's timing of
                             both versions (Versions), budgets and decide (interleaved
                             rounds through coursekit.checking.probes.ratio_verdict)
    optim_stage1_breakdown   stage 1: find it (trace breakdown, limiting operation)
    optim_stage2_speedup     stage 2: fix it (contract, no recompile, speedup)
    optim_stage3_crossover   stage 3: where it stops helping (sweep and crossover)
    optim_stage4_records     stage 4: the report (run records)
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
from optim_harness import checker  # noqa: E402

# isort: split
# Importing a stage registers its checks; registration order is check order.
import optim_stage1_breakdown  # noqa: E402, F401
import optim_stage2_speedup  # noqa: E402, F401
import optim_stage3_crossover  # noqa: E402, F401
import optim_stage4_records  # noqa: E402, F401

# isort: split
# The first check of each stage refuses a file that uses the course's own implementation
# of what the stage asks for (coursekit/checking/forbidden.py names it and says why).
from coursekit.checking.forbidden import guard  # noqa: E402

guard(checker)

if __name__ == "__main__":
    sys.exit(checker.main())

"""performance-audit's checker object and what more than one stage uses: what the
learner process reports about itself (``SELF_REPORTED``) with what each report is
checked against here; the stage-1 workload (a catalog workload the learner process
builds a fresh jitted copy of, and an input of a size drawn per run) and the checker's
own synchronised measurement of it, which stage 1 compares the learner's medians with
and stage 2 the learner's traced steps; and the window those timing ratios must fall
in (``TIME_RATIO_WINDOW``: ratios with wide margins, never absolute times)."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.checking.bridge import Workload
from coursekit.checking.contract import Checker
from coursekit.measure.timing import time_synced
from coursekit.workloads import catalog

checker = Checker("performance-audit", {
    1: "a comparable measurement", 2: "explain the evidence",
    3: "test a trade-off", 4: "decide what is ready"}, learner_process=True)

# What the learner process reports about itself, and what each is checked against here.
SELF_REPORTED = {
    "calls": "CPU seconds the learner process spent during the call (read from "
             "/proc/<pid>/stat by this process) against this process's CPU per call of "
             "the same workload",
    "compiled_at": "the same CPU bound, with this process's own compile cost per compile",
    "first_call_s, samples_s": "their sum against the wall time this process measured "
                               "around the whole call (no harness can time more than "
                               "elapsed)",
}

# An unsynchronised timer reads about 10^3-10^4 times too fast on this workload, so a
# factor-of-4 window cannot flake on a loaded machine yet cannot pass a missing sync.
TIME_RATIO_WINDOW = 4.0


def stage1_workload(ctx, name: str = "performance-audit/stage1"):
    """The workload (``Workload``: the learner process builds a fresh jitted function
    from the catalog, whose first call compiles), the same function for this process, and
    an input whose size is drawn per run. About 10-40 ms per call on 2 CPU cores.
    ``name`` picks another catalog wrapper of the same work (same scale)."""
    rng = ctx.rng("stage1-size")
    n = int(rng.integers(560, 660)) | 1  # odd
    x = jnp.asarray(rng.standard_normal((n, n), dtype=np.float32) / np.sqrt(n))
    scale = float(rng.uniform(0.5, 2.0))
    return Workload(name, scale=scale), catalog.stage1_work(scale), x


def reference(ctx) -> dict:
    """The checker's own measurement of the stage-1 workload (once): synchronised warmed
    median, and CPU seconds of a compile and of one warmed call in this process."""
    def measure():
        _, work, x = stage1_workload(ctx)
        fn = jax.jit(work)
        cpu = time.process_time()
        jax.block_until_ready(fn(x))
        first_cpu = time.process_time() - cpu
        cpu = time.process_time()
        timing = time_synced(fn, x, warmup=2, iters=7)
        call_cpu = (time.process_time() - cpu) / 10  # 1 + 2 warm-up + 7 timed calls
        return {"median_s": timing.median_s, "call_cpu_s": call_cpu,
                "compile_cpu_s": max(first_cpu - call_cpu, 0.0)}
    return ctx.once("reference", measure)


def reference_median(ctx) -> float:
    return reference(ctx)["median_s"]

"""performance-audit's checker object and what more than one stage uses: what the
learner process reports about itself (``SELF_REPORTED``) with what each report is
checked against here; the stage-1 workload (a catalog workload the learner process
builds a fresh jitted copy of, and an input of a size drawn per run) and the checker's
own synchronised measurements of it, which stage 1 compares the learner's medians with
and stage 2 the learner's traced steps; the window those timing ratios must fall in
(``TIME_RATIO_WINDOW``: ratios with wide margins, never absolute times); and
``timing_verdict``, the one way a check here decides on a time: interleaved rounds of the
learner's figure and the checker's own, taken back to back, until the ratio's interval
is clearly inside the window, clearly outside it, or the check's budget runs out
(``coursekit.checking.probes.ratio_verdict``: PASS, FAIL with the evidence, or
INCONCLUSIVE), with a hint for the side the rounds fell on."""

from __future__ import annotations

import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.checking.bridge import Workload
from coursekit.checking.contract import Checker
from coursekit.checking.device import KeptWork, on_accelerator, time_on_device
from coursekit.checking.errors import CheckInconclusive
from coursekit.checking.probes import ratio_verdict, timing_budget_s
from coursekit.measure.timing import time_synced
from coursekit.measure.verdict import machine_load
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
    "began_at, returned_at": "(each call's entry and return) in order, or TamperEvidence; "
                             "only ever a reason to fail: samples that each hold the one "
                             "before it and lie past their call's window are named as "
                             "timestamps",
    "host_read_at": "(the calls that read the HostReadProbe leaf of host_metric_step to the "
                    "host) none independent: on CPU a host read and block_until_ready take "
                    "the same time; only ever a reason to fail time_fn(sync='host_read'), "
                    "whose host-read medians are also timed against this process's own",
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
    """The checker's own measurement of the stage-1 workload (once): CPU seconds of a
    compile and of one warmed call in this process (what a learner process's reported
    counts are checked against), and the synchronised warmed median they came with. The
    timing checks do not compare with this median: each takes its own rounds of
    ``checker_stage1_samples`` in turn with the learner's."""
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


def on_chip(ctx) -> bool:
    """Whether the learner's code runs on an accelerator: the checker's own timings are
    then taken there, in the learner process (``coursekit.checking.device``), since this
    process stays on the CPU and a CPU's time says nothing about the chip."""
    return ctx.learner is not None and on_accelerator(ctx)


def own_stage1(ctx):
    """The checker's own jitted copy of the stage-1 work and the run's input, compiled and
    warmed once (shared by every check's rounds): here, or kept on the chip."""
    def make():
        workload, work, x = stage1_workload(ctx)
        if on_chip(ctx):
            key = f"own-stage1-{ctx.seed}-{ctx.stage}"
            time_on_device(ctx.learner, workload, x, iters=1, first=True, keep=key)
            return KeptWork(ctx.learner, key), x
        fn = jax.jit(work)
        jax.block_until_ready(fn(x))
        jax.block_until_ready(fn(x))
        return fn, x
    return ctx.once("own-stage1", make)


def synced_samples(fn, *args, iters: int) -> list[float]:
    """``iters`` synchronised calls of an already compiled ``fn``, each timed alone (a
    ``KeptWork``: on the chip, in the learner process)."""
    if isinstance(fn, KeptWork):
        return fn.samples(*args, iters=iters)
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(time.perf_counter() - start)
    return samples


def checker_stage1_samples(ctx, iters: int) -> list[float]:
    """The checker's synchronised warmed calls of the stage-1 work, now: one side of a
    round, taken back to back with the learner's figure."""
    fn, x = own_stage1(ctx)
    return synced_samples(fn, x, iters=iters)


LEAST_S = 1e-9  # a learner's figure of 0 s (or less) counts as this: far too fast
AFFORD = 1.5    # the rounds a verdict still needs may take this many times its budget


def timing_verdict(yours: Callable[[int], float], reference: Callable[[int], float],
                   window, what: str, *, against: str, too_fast: str, too_slow: str = "",
                   first: tuple[float, float] | None = None, budget_s: float,
                   min_rounds: int = 3, max_rounds: int = 6,
                   first_cost_s: float | None = None):
    """``ratio_verdict`` on rounds of ``yours(i)`` (the learner's figure, seconds) and
    ``reference(i)`` (the checker's own, taken back to back), with the hint for the side
    the rounds fell on: ``too_fast`` when the learner's figure read below the window (a
    timing that ended before the work did), ``too_slow`` above it (more than the work in
    the timed region). A one-sided window needs only the hint of its side. A learner's
    figure of 0 s or less reads as ``LEAST_S``: far too fast, a verdict, not a crash.

    ``first_cost_s``: the seconds round 0 took. Where the rounds still needed for a
    verdict would take more than ``AFFORD`` times the budget at that pace (a loaded
    machine, an expensive round), the verdict is INCONCLUSIVE at once, with round 0 and
    the pace as its evidence, instead of rounds that overrun the stage."""
    if first is not None:
        first = (max(float(first[0]), LEAST_S), float(first[1]))
        budget = timing_budget_s(budget_s)
        needed = max(min_rounds - 1, 1)
        if first_cost_s is not None and first_cost_s * needed > AFFORD * budget:
            raise CheckInconclusive(
                f"{what}: {first[0] / first[1]:.3g}x {against} in one round, but the "
                "machine is too slow now for the rounds a verdict needs",
                evidence=f"round 0 took {first_cost_s:.1f} s, so the {needed} more rounds "
                f"a verdict needs would take about {first_cost_s * needed:.0f} s, against "
                f"this timing's budget of {budget:.0f} s; {load_text()}",
                hint="nothing here points at your code: rerun when the machine is quieter")
    return ratio_verdict(lambda i: max(float(yours(i)), LEAST_S), reference, window, what,
                         (too_fast, too_slow or too_fast), against=against, first=first,
                         budget_s=budget_s, min_rounds=min_rounds, max_rounds=max_rounds)


def load_text() -> str:
    """The machine's load, as an INCONCLUSIVE verdict states it."""
    load = machine_load()
    return f"load {load['load_per_core']} per core over {load['cores']} cores"


def all_verdicts(*decide: Callable[[], object]) -> None:
    """The verdicts of a check that makes several, in order: a FAIL ends the check (it is
    decided, whatever the others would say); an INCONCLUSIVE one does not stop the ones
    after it, so a clear FAIL further on is still found under load; then the first
    INCONCLUSIVE, if any, is the check's verdict."""
    undecided = []
    for verdict in decide:
        try:
            verdict()
        except CheckInconclusive as err:
            undecided.append(err)
    if undecided:
        first = undecided[0]
        if len(undecided) > 1:
            first.evidence += f" ({len(undecided) - 1} more of this check's timings " \
                              "undecided too)"
        raise first

"""What optimisation's stage-4 checker runs in the learner process to learn what one
finished call of the learner's ``train_fast`` looks like in a trace (``coursekit.
workloads.inspectors``): the call on a given problem, waited for inside a ``jax.profiler``
trace and a region annotation, whose trace file the checker parses itself. The file is
written beside the learner's code, so what it holds is self-reported: the checker sets
it only against the learner's own trace of the same call. Instructor-only
(``coursekit.checking.graded``): traced so, one call is what stage 1's ``trace_slow``
asks for."""

from __future__ import annotations

import jax


def fast_traced(train_fast, config: dict, seed: int, logdir: str, region: str,
                lr_factors: list) -> str:
    """One call of ``train_fast`` on ``slow_step.make_problem(config, seed)`` (a fresh,
    ready parameter copy, learning rate ``lr_factors[1]`` times the problem's), waited
    for inside a trace of ``logdir`` (Python tracer off) and a ``region`` annotation,
    after one call apart (rate ``lr_factors[0]`` times the problem's) so that no
    compile is traced. Returns the trace file's path (str)."""
    from coursekit.instructor import traces
    from coursekit.workloads import slow_step
    problem = slow_step.make_problem(config, seed)
    args = (problem["tokens"], problem["targets"])
    jax.block_until_ready(train_fast(slow_step.fresh_copy(problem["params"]), *args,
                                     float(problem["lr"] * lr_factors[0])))
    params = jax.block_until_ready(slow_step.fresh_copy(problem["params"]))
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with jax.profiler.trace(str(logdir), profiler_options=options):
        with jax.profiler.TraceAnnotation(region):
            jax.block_until_ready(train_fast(params, *args,
                                             float(problem["lr"] * lr_factors[1])))
    return str(traces.newest_trace(logdir))


INSPECTORS = {"optimisation/fast_traced": fast_traced}

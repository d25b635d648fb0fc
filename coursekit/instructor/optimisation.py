"""optimisation's answers its checker needs: the breakdown of a trace into steps and
phases (stage 1's ``step_breakdown``), the phase that limits a step
(``limiting_operation``) and a trace of one steady call (``trace_slow``). Instructor-only
(``coursekit.checking.graded``)."""

from __future__ import annotations

from pathlib import Path

from coursekit.instructor import traces as forest
from coursekit.measure import traces


def breakdown(path: Path, step: str, phases) -> dict:
    """Steps, step time, per-phase time and share (direct children of each step event),
    and per phase the events directly below it ({name: [count, us]})."""
    steps = [ev for ev in forest.walk(forest.build_forest(traces.load_events(path)))
             if ev.name == step]
    phase_us = {p: 0.0 for p in phases}
    below: dict[str, dict[str, list]] = {p: {} for p in phases}
    for ev in steps:
        for child in ev.children:
            if child.name in phase_us:
                phase_us[child.name] += child.dur
                for g in child.children:
                    entry = below[child.name].setdefault(g.name, [0, 0.0])
                    entry[0] += 1
                    entry[1] += g.dur
    step_us = sum(ev.dur for ev in steps)
    return {"steps": len(steps), "step_us": step_us, "phase_us": phase_us,
            "other_us": step_us - sum(phase_us.values()),
            "shares": {p: v / step_us if step_us else 0.0 for p, v in phase_us.items()},
            "below": below}


def slow_trace(config: dict, seed: int, logdir: Path, rate: float) -> Path:
    """A trace of one steady call of ``train_slow`` with the learning rate ``rate`` times
    the problem's (its update recompiles, as a call in use does), the Python tracer off:
    stage 1's ``trace_slow``, the checker's own, independent of the learner's."""
    import jax

    from coursekit.workloads import slow_step
    problem = slow_step.make_problem(config, seed)
    args = (problem["params"], problem["tokens"], problem["targets"])
    jax.block_until_ready(slow_step.train_slow(*args, problem["lr"]))
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with jax.profiler.trace(str(logdir), profiler_options=options):
        jax.block_until_ready(slow_step.train_slow(*args, problem["lr"] * rate))
    return forest.newest_trace(logdir)


def limiting(path: Path, step: str, phases) -> dict:
    """stage 1's ``limiting_operation`` of a trace, the checker's: the phase with the
    largest share, its share, the evidence below it and the Amdahl ceiling."""
    import math
    parts = breakdown(path, step, phases)
    phase = max(phases, key=lambda p: parts["shares"][p])
    share = parts["shares"][phase]
    below = parts["below"][phase]
    name = max(below, key=lambda n: below[n][1]) if below else ""
    count, us = below.get(name, [0, 0.0])
    return {"phase": phase, "share": share,
            "evidence": {"event": name, "count": count, "us": us},
            "amdahl_ceiling": math.inf if share >= 1 else 1 / (1 - share),
            "below": below}

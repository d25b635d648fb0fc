"""optimisation's answers its checker needs: the breakdown of a trace into steps and
phases (stage 1's ``step_breakdown``), the phase that limits a step
(``limiting_operation``), a trace of one steady call (``trace_slow``) and stage 3's
cost model (``predict_crossover``'s lines). Instructor-only (``coursekit.checking.graded``)."""

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


# stage 3: predict_crossover's model (a fixed cost per call plus a cost per example, per
# version, through two medians) and what its crossover is


def model_lines(got: dict, small: int, large: int) -> dict:
    """Per version the model's line through the medians an answer reports: (fixed cost
    per call, cost per example), in seconds."""
    lines = {}
    for version in ("slow", "fast"):
        t0, t1 = got[f"median_{version}_s"]
        per_example = (t1 - t0) / (large - small)
        lines[version] = (t0 - per_example * small, per_example)
    return lines


# A crossover is checked by what defines it: under the model, slow - threshold * fast
# changes sign there, within this relative step of the batch either way, or is zero to
# rounding there.
CROSSOVER_RTOL = 1e-9
ROUNDING = 1e-12


def model_falls(lines: dict, threshold: float) -> bool:
    """Whether the modelled gain falls below ``threshold`` as the batch grows."""
    return lines["slow"][1] - threshold * lines["fast"][1] < 0


def crossover_holds(crossover: float | None, lines: dict, threshold: float) -> bool:
    """Whether ``crossover`` is the model's answer at ``threshold``: None exactly when the
    gain never falls to the threshold as the batch grows; else at least 1, and the batch
    where it does, or 1 when it is already below at batch 1."""
    (base_s, per_s), (base_f, per_f) = lines["slow"], lines["fast"]

    def above(batch: float) -> float:  # > 0 while the modelled gain is above the threshold
        return (base_s + per_s * batch) - threshold * (base_f + per_f * batch)

    falls = model_falls(lines, threshold)
    if crossover is None or not falls:
        return crossover is None and not falls
    if crossover < 1:
        return False
    scale = abs(base_s + per_s * crossover) + threshold * abs(base_f + per_f * crossover)
    return (above(crossover * (1 - CROSSOVER_RTOL)) >= 0 >= above(crossover * (1 + CROSSOVER_RTOL))
            or abs(above(crossover)) <= ROUNDING * scale
            or crossover == 1.0 and above(1.0) <= 0)


def model_crossing(lines: dict, threshold: float) -> float | None:
    """The batch where the two lines' modelled gain equals ``threshold`` (any sign, no
    floor), or None where the lines keep one distance apart."""
    (base_s, per_s), (base_f, per_f) = lines["slow"], lines["fast"]
    denominator = threshold * per_f - per_s
    return (base_s - threshold * base_f) / denominator if denominator else None


def modelled_gain(lines: dict, batch: float) -> float:
    (base_s, per_s), (base_f, per_f) = lines["slow"], lines["fast"]
    fast = base_f + per_f * batch
    return (base_s + per_s * batch) / fast if fast > 0 else float("inf")


def gain_limit(lines: dict) -> float:
    """The modelled gain as the batch grows without bound."""
    per_s, per_f = lines["slow"][1], lines["fast"][1]
    return per_s / per_f if per_f > 0 else float("inf")

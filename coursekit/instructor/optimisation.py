"""optimisation's answers its checker needs: the breakdown of a trace into steps and
phases (stage 1's ``step_breakdown``). Instructor-only (``coursekit.checking.graded``)."""

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

"""What stage 4 reads in the learner's profiler trace, read here from the trace's events
(``coursekit.measure.traces.load_events``): which trace file the learner's call wrote,
the annotated regions (time, duration, step argument) and the runs of the step inside
and outside them. Containment is by time on one thread: an event lies inside another
when it starts and ends within it on the same (pid, tid)."""

from __future__ import annotations

from pathlib import Path

from coursekit.measure import traces

TRACE_GLOB = "plugins/profile/*/*.trace.json.gz"


def trace_files(logdir) -> set[Path]:
    return {p.resolve() for p in Path(logdir).glob(TRACE_GLOB)}


def complete(trace) -> list[dict]:
    """The trace's complete events (``ph`` X with a duration), in time order."""
    return sorted((e for e in traces.load_events(trace)
                   if e.get("ph") == "X" and "dur" in e and "ts" in e),
                  key=lambda e: (float(e["ts"]), -float(e["dur"])))


def within(inner: dict, outer: dict) -> bool:
    return (inner.get("pid"), inner.get("tid")) == (outer.get("pid"), outer.get("tid")) \
        and float(outer["ts"]) <= float(inner["ts"]) and \
        float(inner["ts"]) + float(inner["dur"]) <= float(outer["ts"]) + float(outer["dur"])


def regions(trace, region: str, events: list | None = None) -> list[dict]:
    """Every ``region`` event, in the order they began."""
    return [e for e in (complete(trace) if events is None else events)
            if e.get("name") == region]


def region_seconds(trace, region: str) -> list[float]:
    return [float(e["dur"]) / 1e6 for e in regions(trace, region)]


def region_steps(trace, region: str) -> list[str | None]:
    """The step number each region carries (``step``, or ``step_num`` as
    ``StepTraceAnnotation`` writes it; None with neither), in the order they began."""
    out = []
    for e in regions(trace, region):
        args = e.get("args") or {}
        out.append(str(args["step"]) if "step" in args else str(args["step_num"])
                   if "step_num" in args else None)
    return out


def events_inside(trace, region: str) -> int:
    """How many other events lie inside the regions (0: nothing ran in them)."""
    events = complete(trace)
    found = regions(trace, region, events)
    return sum(1 for e in events if e.get("name") != region
               and any(within(e, r) for r in found))


def step_runs(trace, region: str) -> tuple[int, int]:
    """(runs of the traced step inside the regions, runs outside them): a run is a
    ``PjitFunction(...)`` event of a function that runs inside the regions, not inside
    another of the same name (it nests inside itself)."""
    events = complete(trace)
    found = regions(trace, region, events)
    names = {e["name"] for e in events if str(e.get("name", "")).startswith("PjitFunction")
             and any(within(e, r) for r in found)}
    runs = [e for e in events if e.get("name") in names]  # a container sorts first
    outermost = [e for i, e in enumerate(runs)
                 if not any(o["name"] == e["name"] and within(e, o) for o in runs[:i])]
    inside = sum(1 for e in outermost if any(within(e, r) for r in found))
    return inside, len(outermost) - inside

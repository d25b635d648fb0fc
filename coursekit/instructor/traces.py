"""The course's own reading of a profiler run: its newest trace file, and the events of
one thread nested into trees of direct children. performance-audit stage 2's answers
(``write_trace``, ``newest_trace_file``, ``summarize_region``) and optimisation stage 1's parse
(``step_breakdown``); instructor-only (``coursekit.checking.graded``).

Read ``jax.profiler`` traces with the standard library only.

A trace folder looks like ``LOGDIR/plugins/profile/<timestamp>/<host>.trace.json.gz``
(Chrome trace JSON: complete events have ``ph == "X"``, ``ts``/``dur`` in microseconds).
Every ``jax.profiler.trace`` call makes a new timestamped folder, so "the trace" is the
newest one. Events on one thread nest (``PjitFunction`` sits inside itself under an
annotation); adding nested durations counts the same time twice, so children here are
*direct* children only, found with a stack per thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from coursekit.measure.traces import TraceError, load_events


@dataclass
class Event:
    name: str
    ts: float
    dur: float
    pid: int
    tid: int
    args: dict
    children: list[Event] = field(default_factory=list)

    @property
    def end(self) -> float:
        return self.ts + self.dur


def newest_trace(logdir: str | Path) -> Path:
    """The newest ``*.trace.json.gz`` under ``logdir/plugins/profile/*/``."""
    logdir = Path(logdir)
    runs = sorted((p for p in logdir.glob("plugins/profile/*") if p.is_dir()),
                  key=lambda p: (p.stat().st_mtime, p.name))
    for run in reversed(runs):
        files = sorted(run.glob("*.trace.json.gz"))
        if files:
            return files[0]
    raise TraceError(f"no trace under {logdir}/plugins/profile/: was jax.profiler.trace "
                     f"run with this log folder?")


def write_steps_trace(step, args: tuple, logdir: str | Path, region: str,
                      steps: int = 3) -> Path:
    """A trace of ``steps`` steady, completed calls of ``step(*args)``, each annotated as
    ``region``, written into ``logdir``; its trace file (performance-audit's
    ``write_trace``: the checker's own trace, independent of the learner's)."""
    import jax
    jax.block_until_ready(step(*args))
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.TraceAnnotation(region, step=i):
                jax.block_until_ready(step(*args))
    return newest_trace(logdir)


def build_forest(events: list[dict]) -> list[Event]:
    """Complete events as per-thread trees (each event under the innermost event that
    contains it). Returns the roots of every thread."""
    by_thread: dict[tuple, list[Event]] = {}
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        ev = Event(e.get("name", ""), float(e["ts"]), float(e["dur"]), e.get("pid"),
                   e.get("tid"), e.get("args") or {})
        by_thread.setdefault((ev.pid, ev.tid), []).append(ev)
    roots: list[Event] = []
    for evs in by_thread.values():
        evs.sort(key=lambda ev: (ev.ts, -ev.dur))
        stack: list[Event] = []
        for ev in evs:
            while stack and ev.ts >= stack[-1].end:
                stack.pop()
            if stack and ev.end <= stack[-1].end:
                stack[-1].children.append(ev)
            else:
                stack.clear()  # overlapping but not nested: start a new tree
                roots.append(ev)
            stack.append(ev)
    return roots


def walk(events: list[Event]):
    for ev in events:
        yield ev
        yield from walk(ev.children)


def region_summary(path: str | Path, region: str) -> dict:
    """count, total_us, children {name: us} (direct children only), child_us, self_us."""
    found = [ev for ev in walk(build_forest(load_events(path))) if ev.name == region]
    children: dict[str, float] = {}
    for ev in found:
        for child in ev.children:
            children[child.name] = children.get(child.name, 0.0) + child.dur
    total = sum(ev.dur for ev in found)
    child = sum(children.values())
    return {"count": len(found), "total_us": total, "children": children,
            "child_us": child, "self_us": total - child}


def descendant_sum(path: str | Path, region: str) -> float:
    """The wrong answer on purpose: every event inside the region added up, nested ones
    included. Notebooks show it beside ``region_summary`` to make double counting visible."""
    found = [ev for ev in walk(build_forest(load_events(path))) if ev.name == region]
    return sum(d.dur for ev in found for d in walk(ev.children))

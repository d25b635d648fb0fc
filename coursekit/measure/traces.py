"""Read ``jax.profiler`` traces with the standard library only.

A trace folder looks like ``LOGDIR/plugins/profile/<timestamp>/<host>.trace.json.gz``
(Chrome trace JSON: complete events have ``ph == "X"``, ``ts``/``dur`` in microseconds).
Every ``jax.profiler.trace`` call makes a new timestamped folder. ``load_events`` reads one
file's events and ``thread_names`` names its threads. Finding a run's file and nesting its
events are performance-audit stage 2's exercise (``newest_trace_file``,
``summarize_region``); the course's own code for them is instructor-only
(``coursekit.instructor.traces``).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path


class TraceError(Exception):
    """A trace file is missing or unreadable; the message names the path."""


def load_events(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"trace file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt") as fh:
            data = json.load(fh)
    except (OSError, EOFError, json.JSONDecodeError) as err:
        raise TraceError(f"trace file {path} is not readable Chrome trace JSON: {err}") from err
    return data["traceEvents"] if isinstance(data, dict) else data


def thread_names(events: list[dict]) -> dict[tuple[int, int], str]:
    return {(e.get("pid"), e.get("tid")): e.get("args", {}).get("name", "")
            for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}

"""XProf's reading of a ``jax.profiler`` trace, as a second, independent parser.

``jax.profiler.trace`` writes two files from one in-memory XSpace: ``<host>.xplane.pb``
(the protobuf XProf reads) and ``<host>.trace.json.gz`` (Chrome JSON, which
``coursekit.measure.traces`` parses with the standard library). XProf's own converter
(``xprof.convert.raw_to_tool_data``, the code behind its trace viewer) turns the
``.xplane.pb`` into trace-viewer events; comparing its region events with our parse of the
JSON checks our parser and the pair of files at once: two parsers, two files, one run.

On CPU only the trace viewer has something to show: XProf's op-level tools (op_profile,
hlo_stats, roofline_model) read device planes, which a CPU trace does not have
(``tool_rows`` counts what they list: 0 on CPU, computed).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path

from coursekit.compat.optional import Absent, need
from coursekit.measure import traces

# Both files hold the same integer nanosecond timestamps of one XSpace; the JSON writes
# microseconds with three decimals (1 ns) and XProf's converter prints the same numbers.
# Measured: every region duration equal to the last digit. 10 ns allows rounding in either
# writer and nothing else: a region stretched, dropped or taken from another run is off by
# microseconds or more.
DURATION_TOLERANCE_US = 0.01
GPU_TOOLS = ("op_profile", "hlo_stats", "roofline_model")


XProfMissing = Absent  # xprof (pinned in pyproject.toml) is not installed here


class XProfError(RuntimeError):
    """XProf could not convert a trace; the message names the file and XProf's words."""


def _converter():
    # an accelerator image may not ship xprof: then Absent names it and what is skipped
    return need("xprof.convert.raw_to_tool_data", "XProf's reading of the trace")


@contextlib.contextmanager
def _quiet_stderr():
    """XProf's C++ logs several INFO lines per conversion straight to file descriptor 2;
    keep them in a file and hand them back for an error message instead."""
    with tempfile.TemporaryFile(mode="w+") as log:
        saved = os.dup(2)
        os.dup2(log.fileno(), 2)
        try:
            yield log
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def xplane_beside(trace_json: str | Path) -> Path:
    """The ``*.xplane.pb`` in the same timestamped folder as a ``*.trace.json.gz``."""
    folder = Path(trace_json).parent
    found = sorted(folder.glob("*.xplane.pb"))
    if not found:
        raise traces.TraceError(f"no *.xplane.pb beside {trace_json}: jax.profiler.trace "
                                "writes both files into one folder")
    return found[0]


def tool_data(xplane: str | Path, tool: str = "trace_viewer") -> str:
    """What XProf serves for ``tool`` on this ``.xplane.pb`` (JSON text; may be empty)."""
    xplane = Path(xplane)
    if not xplane.is_file():
        raise traces.TraceError(f"xplane file not found: {xplane}")
    convert = _converter()
    with _quiet_stderr() as log:
        try:
            result = convert.xspace_to_tool_data([str(xplane)], tool, {})
        except Exception as err:  # noqa: BLE001 - XProf raises many kinds; name them
            log.seek(0)
            raise XProfError(f"XProf could not convert {xplane} for {tool}: "
                             f"{type(err).__name__}: {err}; its log: "
                             f"{log.read()[-600:]}") from err
    data = result[0] if isinstance(result, tuple) else result
    return data.decode() if isinstance(data, bytes) else (data or "")


def trace_viewer_events(xplane: str | Path) -> list[dict]:
    """XProf's trace-viewer events for a ``.xplane.pb`` (Chrome trace event dicts)."""
    text = tool_data(xplane, "trace_viewer")
    try:
        return json.loads(text)["traceEvents"]
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise XProfError(f"XProf's trace viewer data for {xplane} is not trace JSON: "
                         f"{err}") from err


def region_durations(events: list[dict], region: str) -> list[float]:
    """Durations (us) of the complete events named ``region``, in start order."""
    found = sorted((float(e["ts"]), float(e["dur"])) for e in events
                   if e.get("ph") == "X" and e.get("name") == region and "dur" in e)
    return [dur for _, dur in found]


def compare_region(trace_json: str | Path, region: str,
                   tolerance_us: float = DURATION_TOLERANCE_US) -> dict:
    """The region's occurrences in ``trace_json`` against XProf's conversion of the
    ``.xplane.pb`` beside it: {"ours", "xprof" (durations in start order), "xplane",
    "mismatches" (sentences; empty when they agree)}."""
    ours = region_durations(traces.load_events(trace_json), region)
    xplane = xplane_beside(trace_json)
    theirs = region_durations(trace_viewer_events(xplane), region)
    mismatches = []
    if len(ours) != len(theirs):
        mismatches.append(f"{len(ours)} {region!r} event(s) in {Path(trace_json).name}, "
                          f"{len(theirs)} in XProf's reading of {xplane.name}")
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if not math.isclose(a, b, rel_tol=0, abs_tol=tolerance_us):
            mismatches.append(f"{region!r} #{i}: {a:.3f} us in the JSON, {b:.3f} us in "
                              f"XProf (tolerance {tolerance_us} us)")
    return {"ours": ours, "xprof": theirs, "xplane": str(xplane), "mismatches": mismatches}


def tool_rows(xplane: str | Path, tool: str) -> int:
    """How many things XProf's op-level ``tool`` lists for this trace: programs in
    op_profile's tree, table rows (summed over its tables) in hlo_stats and
    roofline_model. 0 is what a CPU trace gives: those tools read device planes."""
    text = tool_data(xplane, tool)
    if not text.strip():
        return 0
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise XProfError(f"XProf's {tool} data for {xplane} is not JSON: {err}") from err
    if isinstance(data, dict) and "byProgram" in data:     # op_profile
        return len(data["byProgram"].get("children") or [])
    tables = data if isinstance(data, list) else [data]    # gviz DataTables
    return sum(len(t.get("rows") or []) for t in tables if isinstance(t, dict))

"""What ran on the accelerator inside an annotated region, read from the trace's device
lines.

``jax.profiler.trace`` writes the XSpace it recorded as ``<host>.xplane.pb`` beside the
JSON trace; ``jax.profiler.ProfileData`` reads it (planes, lines, events with
``start_ns`` and ``duration_ns``). On a TPU (measured on a v5e, JAX 0.10.2) it holds a
plane per device, ``/device:TPU:0``, whose lines include

  * ``XLA Modules``: one event per run of a compiled program, named like
    ``jit_step(12663912540292823401)``;
  * ``XLA Ops``: one event per HLO instruction run, named by its HLO text
    (``%fusion = f32[]{:T(128)} fusion(...), kind=kOutput, calls=...``);
  * ``Async XLA Ops`` (copies started in one op and waited for in another);

and the host plane ``/host:CPU``, whose thread lines (``python3``, ``main/1252``) hold the
``TraceAnnotation`` regions. The two clocks are close, not equal: there, the program run
of the second of two annotated calls of a 2048 x 2048 ``tanh(a @ a).sum()`` (90 us on the
device) began 0.23 ms *before* the host region that dispatched and waited for it. So the
device's events are shifted onto the host clock first: ``clock_offset`` finds the shift
that puts the most program runs (``XLA Modules`` events) each wholly inside a region, the
one nearest zero among them (the smallest correction the evidence asks for), and the
result says how many runs it placed. A CPU trace has no device plane: its execution shows
as host threads' events (``coursekit.measure.traces``), and ``regions`` finds no device
operation there.

    found = region_device_ops("…/host.xplane.pb", "train_step")
    found["device_planes"]            # ["/device:TPU:0"], [] on a CPU
    for r in found["regions"]:        # one per occurrence of the region, in time order
        r["dur_ns"], r["op_ns"], r["busy_ns"], r["by_op"], r["modules"]
    found["offset_ns"], found["modules_placed"], found["modules_total"]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

DEVICE_PREFIX = "/device:"
HOST_PREFIX = "/host:"
OPS_LINE = "XLA Ops"
MODULES_LINE = "XLA Modules"
# "%fusion.3 = f32[]{:T(128)} fusion(...)" -> "fusion.3"; a plain name stays itself
_HLO_NAME = re.compile(r"^%?(?P<name>[\w.\-]+)\s*=")


@dataclass(frozen=True)
class Span:
    name: str
    start_ns: float
    dur_ns: float

    @property
    def end_ns(self) -> float:
        return self.start_ns + self.dur_ns


def op_name(text: str) -> str:
    """The HLO instruction's name from an op event's text: ``fusion.3``, ``copy-start``."""
    m = _HLO_NAME.match(text.strip())
    return m["name"] if m else text.strip().split(" ", 1)[0]


def op_kind(text: str) -> str:
    """The instruction's kind: its name without the ``.N`` suffix (``fusion``)."""
    return re.sub(r"\.\d+$", "", op_name(text))


def load(xplane: str | Path):
    """``jax.profiler.ProfileData`` of an ``*.xplane.pb`` (a missing file is named)."""
    from jax.profiler import ProfileData
    path = Path(xplane)
    if not path.is_file():
        raise FileNotFoundError(f"no XSpace file at {path}: jax.profiler.trace writes "
                                "*.xplane.pb beside the *.trace.json.gz")
    return ProfileData.from_file(str(path))


def xplane_beside(trace_json: str | Path) -> Path:
    """The ``*.xplane.pb`` in the timestamped folder of a ``*.trace.json.gz``."""
    found = sorted(Path(trace_json).parent.glob("*.xplane.pb"))
    if not found:
        raise FileNotFoundError(f"no *.xplane.pb beside {trace_json}")
    return found[0]


def _spans(line) -> list[Span]:
    return [Span(e.name, float(e.start_ns), float(e.duration_ns)) for e in line.events]


def device_lines(profile, line: str = OPS_LINE) -> dict[str, list[Span]]:
    """``{device plane name: its events on the line named `line`}``, for every plane
    whose name starts with ``/device:`` and has that line."""
    found: dict[str, list[Span]] = {}
    for plane in profile.planes:
        if plane.name.startswith(DEVICE_PREFIX):
            for ln in plane.lines:
                if ln.name == line:
                    found.setdefault(plane.name, []).extend(_spans(ln))
    return found


def host_regions(profile, region: str) -> list[Span]:
    """Every event named ``region`` on a host plane's lines, in time order."""
    found = [s for plane in profile.planes if plane.name.startswith(HOST_PREFIX)
             for ln in plane.lines for s in _spans(ln) if s.name == region]
    return sorted(found, key=lambda s: s.start_ns)


def clipped(window: Span, spans: list[Span]) -> list[Span]:
    """The parts of ``spans`` inside ``window`` (each cut at the window's edges)."""
    out = []
    for s in spans:
        start, end = max(s.start_ns, window.start_ns), min(s.end_ns, window.end_ns)
        if end > start or (s.dur_ns == 0 and window.start_ns <= s.start_ns < window.end_ns):
            out.append(Span(s.name, start, max(0.0, end - start)))
    return out


def union_ns(spans: list[Span]) -> float:
    """Time covered by at least one span (overlaps counted once): a device's busy time."""
    total, end = 0.0, float("-inf")
    for s in sorted(spans, key=lambda s: (s.start_ns, s.end_ns)):
        if s.end_ns > end:
            total += s.end_ns - max(s.start_ns, end)
            end = s.end_ns
    return total


def clock_offset(modules: list[Span], windows: list[Span]) -> tuple[float, int]:
    """``(shift_ns, placed)``: the shift, added to device times, that puts program runs
    (``modules``) each wholly inside a host region (``windows``) in the most regions, then
    the most runs, the one nearest zero among those; ``placed`` is how many runs it puts
    inside a region. (0, 0) when none can be placed."""
    pairs = []                              # (lowest shift, highest shift, region)
    for m in modules:
        for i, w in enumerate(windows):
            lo, hi = w.start_ns - m.start_ns, w.end_ns - m.end_ns
            if lo <= hi:                    # a run longer than the region never fits
                pairs.append((lo, hi, i))
    if not pairs:
        return 0.0, 0

    def score_at(x: float) -> tuple[int, int]:
        held = [i for lo, hi, i in pairs if lo <= x <= hi]
        return len(set(held)), len(held)

    opens, closes = sorted(pairs), sorted(pairs, key=lambda p: p[1])
    active: dict[int, int] = {}
    placed, oi, ci = 0, 0, 0
    best, points = (0, 0), []
    for x in sorted({p[0] for p in pairs} | {p[1] for p in pairs}):
        while oi < len(opens) and opens[oi][0] == x:      # closed ranges: open first,
            active[opens[oi][2]] = active.get(opens[oi][2], 0) + 1
            placed, oi = placed + 1, oi + 1
        score = (sum(1 for n in active.values() if n), placed)
        if score > best:
            best, points = score, [x]
        elif score == best:
            points.append(x)
        while ci < len(closes) and closes[ci][1] == x:    # ... score, then close
            active[closes[ci][2]] -= 1
            placed, ci = placed - 1, ci + 1
    if score_at(0.0) == best:
        return 0.0, best[1]
    return float(min(points, key=abs)), best[1]


def _shifted(spans: list[Span], offset: float) -> list[Span]:
    return [Span(s.name, s.start_ns + offset, s.dur_ns) for s in spans]


def _inside(window: Span, ops: list[Span], modules: list[Span]) -> dict:
    inside = clipped(window, ops)
    by_op: dict[str, float] = {}
    for s in inside:
        by_op[op_kind(s.name)] = by_op.get(op_kind(s.name), 0.0) + s.dur_ns
    progs: dict[str, float] = {}
    for s in clipped(window, modules):
        progs[s.name] = progs.get(s.name, 0.0) + s.dur_ns
    return {"start_ns": window.start_ns, "dur_ns": window.dur_ns, "ops": inside,
            "op_ns": sum(s.dur_ns for s in inside), "busy_ns": union_ns(inside),
            "by_op": dict(sorted(by_op.items(), key=lambda kv: -kv[1])), "modules": progs}


def regions(profile, region: str, *, also: tuple = ()) -> dict:
    """Per occurrence of ``region`` (a host annotation): the device operations inside it,
    the device's events first shifted onto the host clock (``clock_offset``, from the
    program runs and the occurrences of ``region``).

    Returns ``{"device_planes", "offset_ns", "modules_placed", "modules_total", "regions",
    "also"}``. Each region (and each entry of ``also[name]``, the same for other
    annotations such as a step's phases, with the same shift): ``start_ns``, ``dur_ns``,
    ``ops`` (Spans clipped to it, every device), ``op_ns`` (their summed durations),
    ``busy_ns`` (the time at least one op ran), ``by_op`` ({op kind: ns}, largest first),
    ``modules`` ({program name: ns})."""
    ops, modules = device_lines(profile, OPS_LINE), device_lines(profile, MODULES_LINE)
    every_op = [s for spans in ops.values() for s in spans]
    every_module = [s for spans in modules.values() for s in spans]
    windows = host_regions(profile, region)
    offset, placed = clock_offset(every_module, windows)
    every_op, every_module = _shifted(every_op, offset), _shifted(every_module, offset)
    return {"device_planes": sorted(set(ops) | set(modules)), "offset_ns": offset,
            "modules_placed": placed, "modules_total": len(every_module),
            "regions": [_inside(w, every_op, every_module) for w in windows],
            "also": {name: [_inside(w, every_op, every_module)
                            for w in host_regions(profile, name)] for name in also}}


def region_device_ops(xplane: str | Path, region: str, *, also: tuple = ()) -> dict:
    """``regions`` of the XSpace file ``xplane``, with its path."""
    return {"xplane": str(xplane), **regions(load(xplane), region, also=also)}

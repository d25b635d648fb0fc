"""The portfolio's plots: route map, latency distributions, memory, scaling, predictions.

Each function writes one PNG and returns its path (or None when there is nothing to
plot). Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no global
backend switch, so a notebook calling the portfolio keeps its own backend). Every axis
has a unit; every title carries the backend label ("CPU figure ...").
"""

from __future__ import annotations

from pathlib import Path

STATUS_COLOURS = {"met": "#2e7d32", "partly": "#f9a825", "not yet": "#9e9e9e"}


def _figure(width: float, height: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def route_map(milestones: list[dict], path: Path) -> Path:
    """Milestones as stations on two lines: required practice above, extensions below."""
    rows = [[m for m in milestones if m["required"]], [m for m in milestones
                                                          if not m["required"]]]
    width = max(len(rows[0]), len(rows[1]), 1)
    fig = _figure(1.9 * width + 1.5, 3.4)
    ax = fig.add_subplot()
    for y, (row, name, style) in enumerate(zip(rows, ("required route practice",
                                                      "optional extensions"),
                                               ("-", "--"))):
        y = 1 - y
        if row:
            ax.plot([0, len(row) - 1], [y, y], style, color="#607d8b", zorder=1, lw=2)
        ax.text(-0.6, y + 0.32, name, fontsize=8, color="#455a64", ha="left")
        for x, m in enumerate(row):
            ax.scatter([x], [y], s=420, color=STATUS_COLOURS[m["status"]], zorder=2,
                       edgecolor="black")
            ax.text(x, y - 0.22, _wrap(m["title"], 22), ha="center", va="top", fontsize=7)
            ax.text(x, y, {"met": "✓", "partly": "½", "not yet": "·"}[m["status"]],
                    ha="center", va="center", fontsize=9, color="white", zorder=3)
    for status, colour in STATUS_COLOURS.items():
        ax.scatter([], [], s=80, color=colour, edgecolor="black", label=status)
    ax.legend(loc="upper right", fontsize=7, frameon=False, ncol=3)
    ax.set_xlim(-0.7, width - 0.3)
    ax.set_ylim(-0.75, 1.55)
    ax.axis("off")
    ax.set_title("Route map: milestone status from your newest check results", fontsize=9)
    return _save(fig, path)


def _wrap(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width))


def latency(runs: list, path: Path, label: str) -> Path | None:
    """Box plot of each run's warmed, synchronised samples (ms); first call as a marker."""
    runs = [r for r in runs if r.samples_s]
    if not runs:
        return None
    fig = _figure(max(6.0, 0.9 * len(runs) + 2.5), 4.2)
    ax = fig.add_subplot()
    data = [[s * 1e3 for s in r.samples_s] for r in runs]
    ax.boxplot(data, whis=(5, 95), showfliers=True)
    firsts = [(i + 1, r.first_call_s * 1e3) for i, r in enumerate(runs) if r.first_call_s]
    if firsts:
        ax.scatter([x for x, _ in firsts], [y for _, y in firsts], marker="x", color="C3",
                   label="first call (trace + compile + run), not in the box", zorder=3)
        ax.legend(fontsize=7, loc="upper right")
    ax.set_yscale("log")
    ax.set_ylabel("time per call (ms, log scale)")
    ax.set_xticks(range(1, len(runs) + 1), [_wrap(r.name, 16) for r in runs], fontsize=7,
                  rotation=20)
    ax.set_xlabel("run (box: 25-75 %, whiskers: 5-95 % of warmed samples)")
    ax.set_title(f"Synchronised latency distributions\n{label}", fontsize=9)
    return _save(fig, path)


def memory(evidence: dict, path: Path, label: str) -> Path | None:
    policies = evidence.get("policies") or {}
    if not policies:
        return None
    names = list(policies)
    mib = 2**20
    fig = _figure(8.5, 3.8)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    xs = range(len(names))
    for offset, key, text in ((-0.2, "saved_residual_bytes", "saved residuals"),
                              (0.2, "compiler_temp_bytes", "compiler temp estimate")):
        values = [(policies[p].get(key) or 0) / mib for p in names]
        left.bar([x + offset for x in xs], values, width=0.4, label=text)
    left.set_xticks(list(xs), names, fontsize=8)
    left.set_ylabel("MiB")
    left.set_xlabel("remat policy")
    left.legend(fontsize=7)
    left.set_title("What the program keeps and what the compiler plans", fontsize=9)
    peaks = [(policies[p].get("vmhwm_bytes") or 0) / mib for p in names]
    right.bar(list(xs), peaks, color="C2", width=0.5)
    right.set_xticks(list(xs), names, fontsize=8)
    right.set_ylabel("MiB (whole process, runtime included)")
    right.set_xlabel("remat policy")
    right.set_title("Observed peak: VmHWM of a fresh process", fontsize=9)
    fig.suptitle(f"Memory, three figures per policy ({label})", fontsize=9)
    return _save(fig, path)


def scaling(evidence: dict, path: Path) -> Path | None:
    points = sorted((p for p in evidence.get("points", []) if p.get("ok") and
                     p.get("samples_s")), key=lambda p: p["devices"])
    if not points:
        return None
    import numpy as np
    devices = [p["devices"] for p in points]
    med = [float(np.median(p["samples_s"])) * 1e3 for p in points]
    lo = [m - float(np.percentile(p["samples_s"], 25)) * 1e3 for m, p in zip(med, points)]
    hi = [float(np.percentile(p["samples_s"], 75)) * 1e3 - m for m, p in zip(med, points)]
    batch = evidence.get("workload", {}).get("global_batch")
    fig = _figure(8.5, 3.8)
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    left.errorbar(devices, med, yerr=[lo, hi], marker="o", capsize=3)
    left.set_xscale("log", base=2)
    left.set_xticks(devices, [str(d) for d in devices])
    left.set_xlabel("simulated devices (same CPU cores)")
    left.set_ylabel("step time, median (ms; bars: 25-75 %)")
    left.set_title("Step time", fontsize=9)
    if batch:
        thr = [batch / (m / 1e3) for m in med]
        right.plot(devices, thr, marker="o", label="measured")
        right.plot(devices, [thr[0] * d / devices[0] for d in devices], "--", color="grey",
                   label="linear from the first point\n(what separate chips could at best give)")
        right.set_xscale("log", base=2)
        right.set_yscale("log")
        right.set_xticks(devices, [str(d) for d in devices])
        right.set_xlabel("simulated devices (same CPU cores)")
        right.set_ylabel("throughput (examples/s, log scale)")
        right.legend(fontsize=7)
        right.set_title(f"Throughput at global batch {batch}", fontsize=9)
    fig.suptitle("Scaling limits on CPU-simulated devices sharing the same cores "
                 "(CPU figures: not a speedup measurement)", fontsize=9)
    return _save(fig, path)


def predictions(pairs: list[dict], path: Path) -> Path | None:
    """Measured against predicted, log-log, with the line where they agree."""
    pts = [(float(p["predicted"]), float(p["measured"]), p["name"]) for p in pairs
           if _positive(p.get("predicted")) and _positive(p.get("measured"))]
    if not pts:
        return None
    fig = _figure(5.2, 4.4)
    ax = fig.add_subplot()
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    ax.scatter(xs, ys, zorder=3)
    for x, y, name in pts:
        ax.annotate(name, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    low, high = min(xs + ys) / 2, max(xs + ys) * 2
    ax.plot([low, high], [low, high], "--", color="grey", label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("your prediction (each in its own unit, log scale)")
    ax.set_ylabel("measurement (same unit, log scale)")
    ax.legend(fontsize=7)
    ax.set_title("Changed conditions: prediction beside measurement", fontsize=9)
    return _save(fig, path)


def _positive(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0

"""Notebook 02's timeline of one traced step: every host thread's events inside the last
occurrence of the step's region (and on an accelerator the device's operations, shifted
onto the host clock), one row per thread, the region red, dispatch orange, XLA ops blue.
"""

from __future__ import annotations

from coursekit.measure import device_trace, traces
from coursekit.notebook.plots import titled


def timeline(ax, path, region: str, title: str, label: str, *, on_device: bool) -> None:
    events = traces.load_events(path)
    names = traces.thread_names(events)
    device_pids = {e.get("pid") for e in events if e.get("ph") == "M"
                   and e.get("name") == "process_name"
                   and str((e.get("args") or {}).get("name", "")).startswith("/device:")}
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e
                and e.get("pid") not in device_pids]
    last = max((e for e in complete if e.get("name") == region), key=lambda e: e["ts"])
    t0, t1 = last["ts"], last["ts"] + last["dur"]
    shown = [e for e in complete if e["ts"] < t1 and e["ts"] + e["dur"] > t0
             and not e["name"].startswith("ThreadpoolListener")]
    if on_device:  # the last region's device operations, on the host clock
        on_chip = device_trace.region_device_ops(device_trace.xplane_beside(path), region)
        names[("device", 0)] = f"device XLA Ops ({on_chip['offset_ns'] / 1e3:+.0f} us)"
        shown += [{"name": op.name, "ts": op.start_ns / 1e3, "dur": op.dur_ns / 1e3,
                   "pid": "device", "tid": 0, "args": {"hlo_op": device_trace.op_name(op.name)}}
                  for op in on_chip["regions"][-1]["ops"]]
    threads = sorted({(e["pid"], e["tid"]) for e in shown},
                     key=lambda k: (names.get(k, "") != "python", names.get(k, "")))
    for row, key in enumerate(threads):
        for e in (e for e in shown if (e["pid"], e["tid"]) == key):
            is_op = "hlo_op" in (e.get("args") or {})
            colour = ("tab:red" if e["name"] == region else
                      "tab:orange" if e["name"].startswith("PjitFunction") else
                      "tab:blue" if is_op else "lightgray")
            ax.broken_barh([((e["ts"] - t0) / 1e3, e["dur"] / 1e3)], (row - 0.4, 0.8),
                           color=colour, edgecolor="black", linewidth=0.3)
    ax.set_yticks(range(len(threads)), [names.get(k, str(k[1]))[:28] for k in threads],
                  fontsize=7)
    ax.set_xlabel("time since the step's region began (ms)")
    titled(ax, title, label)

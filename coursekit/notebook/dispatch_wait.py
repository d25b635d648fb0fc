"""Notebook 02's reading of a traced step by what each piece is: dispatch (the outermost
``PjitFunction``), the completion wait (``...block_until_ready``) and execution (XLA:CPU's
``ThunkExecutor::Execute`` events on its execution threads, or on an accelerator the
device's own operations from the ``.xplane.pb`` beside the JSON, shifted onto the host
clock), per occurrence of the step's region; and the table the notebook prints of it.
"""

from __future__ import annotations

import numpy as np

from coursekit.compat.jaxapi import CPU_EXECUTION_THREADS
from coursekit.measure import device_trace, traces
from coursekit.notebook import claims


def _within(e, r):
    """Whether event ``e`` lies inside event ``r`` on the same thread (``r`` itself not)."""
    return (e is not r and (e["pid"], e["tid"]) == (r["pid"], r["tid"]) and e["ts"] >= r["ts"]
            and e["ts"] + e["dur"] <= r["ts"] + r["dur"])


def breakdown(path, region: str, *, on_device: bool) -> list[dict]:
    """Per occurrence of ``region`` (in time order): its total, the time its thread spent
    dispatching (the outermost ``PjitFunction`` inside it: one step call, the longest of
    the events of that name, the others nested in it) and waiting (the longest
    ``...block_until_ready``), and the execution threads' time inside it (us)."""
    events = traces.load_events(path)
    names = traces.thread_names(events)
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    execute = [e for e in complete if e["name"] == "ThunkExecutor::Execute"
               and names.get((e["pid"], e["tid"]), "").startswith(CPU_EXECUTION_THREADS)]
    found = sorted((e for e in complete if e["name"] == region), key=lambda e: e["ts"])
    device = None
    if on_device:  # the device's XLA Ops, shifted onto the host clock (us, like the JSON)
        device = device_trace.region_device_ops(device_trace.xplane_beside(path), region)
        if len(device["regions"]) != len(found):
            raise RuntimeError(f"{len(found)} {region!r} events in the JSON trace, "
                               f"{len(device['regions'])} in the .xplane.pb beside it")
    rows = []
    for k, r in enumerate(found):
        end = r["ts"] + r["dur"]
        dispatch = [e for e in complete if _within(e, r)
                    and e["name"].startswith("PjitFunction")]
        wait = [e for e in complete if _within(e, r)
                and e["name"].endswith("block_until_ready")]
        runs = [e for e in execute if e["ts"] < end and e["ts"] + e["dur"] > r["ts"]]
        on_chip = device["regions"][k] if device is not None else None
        if on_chip is not None:  # the device's own operations, on the host clock
            runs = [{"ts": op.start_ns / 1e3, "dur": op.dur_ns / 1e3} for op in on_chip["ops"]]
        dispatch_us = max((e["dur"] for e in dispatch), default=0.0)
        wait_us = max((e["dur"] for e in wait), default=0.0)
        rows.append({
            "total_us": r["dur"], "dispatch_us": dispatch_us, "wait_us": wait_us,
            "execution_us": (on_chip["busy_ns"] / 1e3 if on_chip is not None else
                             sum(min(e["ts"] + e["dur"], end) - max(e["ts"], r["ts"])
                                 for e in runs)),
            "device_ops_us": ({k_: v / 1e3 for k_, v in on_chip["by_op"].items()}
                              if on_chip is not None else None),
            "device_offset_us": device["offset_ns"] / 1e3 if device is not None else None,
            "largest": "wait" if wait_us >= dispatch_us else "dispatch",
            # when each began and ended (us, trace clock): for the notebook's ordering check
            "dispatch_start": min((e["ts"] for e in dispatch), default=None),
            "dispatch_end": max((e["ts"] + e["dur"] for e in dispatch), default=None),
            "execution_start": min((e["ts"] for e in runs), default=None),
            "execution_end": max((e["ts"] + e["dur"] for e in runs), default=None),
            "wait_end": max((e["ts"] + e["dur"] for e in wait), default=None)})
    return rows


def show(parts: list[dict], label: str, *, on_device: bool) -> dict:
    """The table of ``breakdown``'s rows, the median step's shares, the device's operations
    (on an accelerator), and the steps where dispatch outlasted the wait. The medians of
    the total, dispatch, wait and execution (us)."""
    print(f"{'step':>4} {'region':>10} {'dispatch':>10} {'wait':>10} {'execution':>10}  "
          "larger of dispatch and wait   (ms)")
    for i, row in enumerate(parts):
        print(f"{i:4d} {row['total_us'] / 1e3:10.3f} {row['dispatch_us'] / 1e3:10.3f} "
              f"{row['wait_us'] / 1e3:10.3f} {row['execution_us'] / 1e3:10.3f}  {row['largest']}")
    med = {k: float(np.median([row[k] for row in parts]))
           for k in ("total_us", "dispatch_us", "wait_us", "execution_us")}
    print(f"median step: dispatch {med['dispatch_us'] / med['total_us']:.1%} of the region, "
          f"wait {med['wait_us'] / med['total_us']:.1%}; the execution threads ran "
          f"{med['execution_us'] / med['total_us']:.1%} of it ({label})")
    if med["wait_us"] > 0 and med["execution_us"] > 0:
        print(claims.wait_vs_execution(med["wait_us"] * 1e-6, med["execution_us"] * 1e-6))
    if on_device:
        mid = sorted(parts, key=lambda row: row["total_us"])[len(parts) // 2]
        print(f"device operations of the median step (execution = the time at least one ran; "
              f"device clock shifted by {mid['device_offset_us']:+.1f} us onto the host's):")
        for name, us in mid["device_ops_us"].items():
            print(f"  {name:24s} {us:10.1f} us")
    else:
        print("host events only: a CPU trace has no device plane; execution is XLA:CPU's "
              "thread events")
    slow_host = [i for i, row in enumerate(parts) if row["dispatch_us"] > row["wait_us"]]
    overlapped = [i for i in slow_host if parts[i]["execution_start"] is not None
                  and parts[i]["execution_start"] < parts[i]["dispatch_end"]]
    if slow_host:
        print(f"step(s) {slow_host}: dispatch took longer than the wait: host-side time (a "
              "loaded machine, a descheduled thread), not compute; in step(s) "
              f"{overlapped} the execution thread had started before the call returned")
    return med

"""The report of ``make accelerator``: ``report.json`` and ``report.md`` built from the
items its parts recorded (``OUT/items/*.json``), so a run in parts (one session each)
ends in one report. Standard library only: the report is written where JAX may be absent.

Every figure names the device it came from: a stage's times the device its learner
process computed on (``measured_on``), a notebook's the device its JAX opened, the
roofline's the device of its process. An item the run has not reached yet is listed as
not run, never as passed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

GiB = 2**30
# The chip's time is scarce: the whole run (setup included) should fit RUN_TARGET_S and each
# project stage's checks STAGE_TARGET_S (issue 51); the report says where it does not.
RUN_TARGET_S = 900
STAGE_TARGET_S = 90


def label_of(device: dict | None) -> str:
    return (device or {}).get("label") or "-"


def merged_projects(items: list[dict], expected: list[tuple[str, str]]) -> list[dict]:
    """One row per (project, impl): the stages of every run of it, a later run of a stage
    replacing an earlier one; process wall times and errors of each run kept."""
    rows = []
    for project, which in expected:
        runs = sorted((i for i in items if i.get("kind") == "checks" and
                       i["project"] == project and i["impl"] == which),
                      key=lambda i: i.get("finished", ""))
        if not runs:
            rows.append({"project": project, "impl": which, "ran": False, "stages": {},
                         "runs": [], "as_expected": None})
            continue
        stages: dict = {}
        for run in runs:
            for name, s in run["stages"].items():
                stages[name] = {**s, "measured_on": label_of(run.get("measured_on"))}
        rows.append({
            "project": project, "impl": which, "ran": True,
            "expect": "every check says not yet" if which == "starter" else "every check passes",
            "stages": dict(sorted(stages.items(), key=lambda kv: int(kv[0]))),
            "runs": [{**{k: r.get(k) for k in ("stage", "wall_s", "returncode", "status",
                                               "error", "log", "result", "finished",
                                               "leftovers_stopped")},
                      "measured_on": label_of(r.get("measured_on"))} for r in runs],
            "as_expected": bool(stages) and not runs[-1]["error"]
            and all(s["as_expected"] for s in stages.values())})
    return rows


def build_report(items: list[dict], *, projects: list[tuple[str, str]], notebooks: list[str],
                 dry_run: bool, command: str) -> dict:
    by_kind = {}
    for item in items:
        by_kind.setdefault(item.get("kind"), []).append(item)
    environment = (by_kind.get("environment") or [None])[-1]
    project_rows = merged_projects(items, projects)
    notebook_items = {i["notebook"]: i for i in by_kind.get("notebook", [])}
    notebook_rows = [notebook_items.get(name, {"notebook": name, "ran": False,
                                               "as_expected": None}) for name in notebooks]
    roofline = (by_kind.get("roofline") or [None])[-1]
    missing = [f"checks on {r['project']} {r['impl']}" for r in project_rows if not r["ran"]]
    missing += [f"notebook {r['notebook']}" for r in notebook_rows if r.get("ran") is False]
    missing += [] if roofline else ["roofline"]
    missing += [] if environment else ["environment probe"]
    ran = [r for r in (*project_rows, *notebook_rows) if r.get("ran", True)]
    summary = {
        "projects_as_expected": f"{sum(bool(r['as_expected']) for r in project_rows)} of "
                                f"{len(project_rows)}",
        "notebooks_ran_to_end": f"{sum(bool(r.get('as_expected')) for r in notebook_rows)} of "
                                f"{len(notebook_rows)}",
        "roofs_within_90": None if not roofline else
        f"{sum(bool(s['within_90']) for s in roofline['solution'])} of "
        f"{len(roofline['solution'])}",
        "complete": not missing, "not_run": missing,
        "ok": all(r["as_expected"] for r in ran)
        and (roofline is None or roofline["as_expected"])
        and (environment is None or environment["as_expected"]),
    }
    # the items one after another (the CPU lane's run beside them, apart)
    summary["item_seconds"] = round(sum(float(i.get("wall_s") or 0) for i in items
                                        if i.get("lane") != "cpu"), 1)
    summary["cpu_lane_seconds"] = round(sum(float(i.get("wall_s") or 0) for i in items
                                            if i.get("lane") == "cpu"), 1)
    return {"schema": 1, "dry_run": dry_run, "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "command": command, "summary": summary, "environment": environment,
            "projects": project_rows, "notebooks": notebook_rows, "roofline": roofline,
            "times": item_times(items)}


def item_name(item: dict) -> str:
    kind = item.get("kind")
    if kind == "checks":
        return f"checks {item['project']} {item['impl']} --stage {item.get('stage', 'all')}"
    if kind == "notebook":
        return f"notebook {item['notebook']}"
    return str(kind)


def item_times(items: list[dict]) -> list[dict]:
    """Every recorded item's wall time, in the order they finished."""
    return [{"item": item_name(i), "wall_s": float(i.get("wall_s") or 0),
             "finished": i.get("finished", ""), "lane": i.get("lane", "chip")}
            for i in sorted(items, key=lambda i: i.get("finished", ""))]


# -- markdown ----------------------------------------------------------------------------

def si(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.1f} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def rate(value: float | None, unit: str) -> str:
    """FLOP/s and B/s as people read them (TFLOP/s, GB/s)."""
    return si(value, "FLOP/s" if unit == "FLOP/s" else "B/s")


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.0f}%"


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(report: dict) -> str:
    s = report["summary"]
    lines = ["# The course on an accelerator: report", ""]
    if report["dry_run"]:
        lines += ["**DRY RUN on the CPU, at tiny sizes**: it shows that the command and its "
                  "report work; it measures nothing about an accelerator.", ""]
    lines += [f"Generated {report['generated']} by `{report['command']}`.", "",
              f"- project checks as expected: {s['projects_as_expected']} (reference "
              "solutions pass every check; starters say \"not yet\" in every check)",
              f"- notebooks run to their end with every check cell passing: "
              f"{s['notebooks_ran_to_end']}",
              f"- the solution's roofline figures within 90% of the plain-JAX ceiling: "
              f"{s['roofs_within_90'] or 'not measured'}",
              "- complete: " + ("yes" if s["complete"] else
                                "no, not run yet: " + ", ".join(s["not_run"])),
              f"- everything that ran is as expected: {'yes' if s['ok'] else 'NO'}", ""]
    lines += environment_md(report["environment"])
    lines += projects_md(report["projects"])
    lines += notebooks_md(report["notebooks"])
    lines += roofline_md(report["roofline"])
    lines += times_md(report)
    return "\n".join(lines).rstrip() + "\n"


def environment_md(env: dict | None) -> list[str]:
    lines = ["## Machine", ""]
    if not env:
        return lines + ["Not probed yet.", ""]
    device, versions = env.get("device") or {}, env.get("versions") or {}
    limit = device.get("memory_bytes_limit")
    packages = env.get("packages") or {}
    rows = [("backend", device.get("backend", "-")),
            ("device kind", f"{device.get('device_kind', '-')} "
                            f"({device.get('device_count', '?')} device(s))"),
            ("figures are", label_of(device)),
            ("device memory", f"{limit / GiB:.1f} GiB (memory_stats bytes_limit)" if limit
             else "not reported by the backend"),
            ("JAX / jaxlib", f"{versions.get('jax', '-')} / {versions.get('jaxlib', '-')}"),
            ("Python / numpy", f"{versions.get('python', '-')} / {versions.get('numpy', '-')}"),
            ("host", f"{env.get('cpu', '-')}, {env.get('cpu_cores', '?')} cores"),
            ("JAX_PLATFORMS", env.get("jax_platforms") or "(unset)"),
            ("installed", ", ".join(f"{k} {v}" for k, v in packages.items() if v) or "-"),
            ("absent", ", ".join(k for k, v in packages.items() if not v) or "none")]
    if env.get("error"):
        rows.append(("could not open the device", env["error"]))
    lines += ["| | |", "|---|---|"] + [f"| {k} | {cell(v)} |" for k, v in rows]
    return lines + [""]


def projects_md(rows: list[dict]) -> list[str]:
    lines = ["## Project checks", "",
             "Each project's `check.py` on its reference solution (every check must pass; an "
             "inconclusive timing check is allowed and counted) and on its starter (every "
             "check must say \"not yet\"). The checker's own process runs on the CPU; `check s`"
             " is the stage's checks summed, on the device its learner process computed on.",
             "", "| project | code | stage | verdict | pass | fail | inconclusive | not yet "
             "| check s | measured on |", "|---|---|---|---|---|---|---|---|---|---|"]
    notes, walls = [], []
    for r in rows:
        if not r["ran"]:
            lines.append(f"| {r['project']} | {r['impl']} | - | not run yet | | | | | | |")
            continue
        for name, st in r["stages"].items():
            lines.append(f"| {r['project']} | {r['impl']} | {name} | {cell(st['verdict'])} | "
                         f"{st['passed']} | {st['failed']} | {st['inconclusive']} | "
                         f"{st['not_yet']} | {st['seconds']:.1f} | {cell(st['measured_on'])} |")
            for x in st["not_passed"]:
                if r["impl"] == "solution" or not x["not_yet"]:
                    notes.append(f"- {r['project']} {r['impl']} stage {name} · {x['check_id']} "
                                 f"({x['status']}): {cell(x['message'])}")
            if r["impl"] == "starter" and st["not_passed"] and st["not_passed"][0]["not_yet"]:
                notes.append(f"- {r['project']} starter stage {name}: "
                             f"{cell(st['not_passed'][0]['message'])}")
        for run in r["runs"]:
            on = "" if run["measured_on"] == "-" else f", its learner on {run['measured_on']}"
            walls.append(f"{r['project']} {r['impl']} --stage {run['stage']}: "
                         f"{run['wall_s']:.1f} s (exit {run['returncode']}{on}"
                         + (f"; {run['error']}" if run["error"] else "")
                         + leftovers(run) + ")")
    if notes:
        lines += ["", "Checks that did not pass, first line of each message (for a starter: "
                  "its first \"not yet\" per stage, and anything else):", "", *notes]
    if walls:
        lines += ["", "Checker processes (on the CPU), wall time: " + "; ".join(walls) + "."]
    return lines + [""]


def notebooks_md(rows: list[dict]) -> list[str]:
    lines = ["## Notebooks", "",
             "Each notebook headless (`coursekit.notebook.headless`: no Jupyter kernel) at its "
             "CI sizes against the reference solution, one process per notebook. A check "
             "cell of a stage the projects part passed whole on the same file shows that run "
             "(its learner on the device) and says so; `reused` counts them (the others ran "
             "their checker in the cell).", "",
             "| notebook | status | wall s | check cells | reused | checks | ran on | "
             "stopped at |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.get("ran") is False:
            lines.append(f"| {r['notebook']} | not run yet | | | | | | |")
            continue
        status = "ran to its end" if r.get("ran_to_end") else "STOPPED"
        if r["as_expected"] is False and r.get("ran_to_end"):
            status = "ran to its end, NOT all checks passed"
        stop = r.get("stopped_at")
        where = "" if not stop else f"cell {stop['cell']} (`{stop['source']}`): {stop['error']}"
        if r.get("error"):
            where = f"{where} {r['error']}".strip()
        where += leftovers(r)
        passed = r.get("checks_passed", 0)
        checks = f"{passed}/{passed + r.get('checks_failed', 0)}"
        if r.get("checks_inconclusive"):
            checks += f", {r['checks_inconclusive']} inconclusive"
        ran_on = label_of(r.get("device")) if r.get("device") else (r.get("device_error") or "-")
        lines.append(f"| {r['notebook']} | {status} | {r['wall_s']:.1f} | "
                     f"{r.get('check_cells_ok', 0)}/{r.get('check_cells', 0)} | "
                     f"{r.get('check_cells_reused', 0)} | {checks} | "
                     f"{cell(ran_on)} | {cell(where)} |")
    return lines + [""]


def times_md(report: dict) -> list[str]:
    """Where the run's time went: each item, the total against the run's target, and the
    project stages whose checks took longer than a stage's target."""
    times = report.get("times") or []
    if not times:
        return []
    total = sum(t["wall_s"] for t in times if t.get("lane", "chip") != "cpu")
    beside = [t["wall_s"] for t in times if t.get("lane") == "cpu"]
    lines = ["## Time", "",
             f"Items recorded, one after another: {total:.0f} s in all (the target for a whole "
             f"run, setup included: {RUN_TARGET_S} s; "
             f"{'within it' if total <= RUN_TARGET_S else 'OVER it'})"
             + (f"; beside them, in the CPU lane (runs that keep to the CPU): {len(beside)} "
                f"item(s), {sum(beside):.0f} s" if beside else "")
             + ". Each item's wall time, in the order they finished (a run in parts adds its "
             "machine starts to this):", "", "| item | lane | wall s | finished |",
             "|---|---|---|---|"]
    lines += [f"| {cell(t['item'])} | {t.get('lane', 'chip')} | {t['wall_s']:.1f} | "
              f"{t['finished']} |" for t in times]
    slow = [f"{r['project']} {r['impl']} stage {name} ({st['seconds']:.0f} s)"
            for r in report.get("projects", []) for name, st in r.get("stages", {}).items()
            if st.get("seconds", 0) > STAGE_TARGET_S]
    lines += ["", f"Stages whose checks took over {STAGE_TARGET_S} s: "
              + (", ".join(slow) if slow else "none") + "."]
    return lines + [""]


def leftovers(item: dict) -> str:
    n = item.get("leftovers_stopped") or 0
    return f"; {n} process(es) it left running stopped" if n else ""


def roofline_md(roof: dict | None) -> list[str]:
    lines = ["## Roofline: the device against its ceilings", ""]
    if not roof:
        return lines + ["Not measured yet.", ""]
    device = roof.get("device") or {}
    lines += [f"Every figure here: {label_of(device)}, JAX {device.get('jax', '-')}, measured "
              f"in one process, {roof.get('rounds', '?')} rounds of {roof.get('iters', '?')} "
              "synchronised calls each, first (compiling) call apart; a figure is the work "
              "over the fastest call.", ""]
    spec = roof.get("spec")
    if spec:
        flops = ", ".join(f"{rate(v, 'FLOP/s')} {k}" for k, v in spec["peak_flops"].items())
        lines += [f"Spec ({spec['name']}): {flops}, {rate(spec['hbm_bytes_per_s'], 'B/s')} "
                  f"HBM. Source: {spec['source']}.", ""]
    else:
        lines += ["No published spec is known to the course for this device kind.", ""]
    lines += ["| plain JAX | size | dtype | best | median | of spec | first call s "
              "| pipelined best | of spec | a synchronised call pays |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for c in roof.get("ceilings", []):
        piped = c.get("pipelined")
        extra = (f"{rate(piped['best'], c['unit'])} | "
                 f"{percent(of_spec({**c, 'best': piped['best']}, spec))} | "
                 f"{sync_cost_text(c)}") if piped else \
            f"- | - | {cell(c.get('pipelined_error', 'not measured'))}"
        lines.append(f"| {c['what']} | {c['size']} | {c['dtype']} | {rate(c['best'], c['unit'])} "
                     f"| {rate(c['median'], c['unit'])} | {percent(of_spec(c, spec))} | "
                     f"{c['first_call_s']:.3f} | {extra} |")
    lines += why_pipelined_is_faster(roof.get("ceilings", []))
    lines += ["", "The reference solution's own figures "
              "(projects/performance-audit/solution/model.py), each called once per round "
              "between the rounds of the ceiling of the same size:", "",
              "| function | asked | its figure | ceiling beside it | ratio | within 90% |",
              "|---|---|---|---|---|---|"]
    for s in roof.get("solution", []):
        asked = ", ".join(f"{k}={v}" for k, v in s["asked"].items())
        ceiling = s["ceiling"]
        beside = "-" if not ceiling else (f"{rate(ceiling['best'], s['unit'])} ({ceiling['what']},"
                                          f" {ceiling['size']}, {ceiling['dtype']})")
        within = "-" if s["within_90"] is None else ("yes" if s["within_90"] else "NO")
        note = "; ".join(x for x in (s.get("note"), s.get("error")) if x)
        lines.append(f"| {s['function']} | {cell(asked)} | {rate(s['best'], s['unit'])} | "
                     f"{cell(beside)} | {percent(s['ratio'])} | {within}"
                     + (f" ({cell(note)})" if note else "") + " |")
    for err in roof.get("errors", []):
        lines.append(f"\nerror: {err}")
    return lines + [""]


def sync_cost_text(c: dict) -> str:
    """What one synchronised call pays over a pipelined one, and its share of the call."""
    piped = c.get("pipelined")
    if not piped:
        return "-"
    single, per_call = min(c["samples_s"]), min(piped["samples_s"])
    return f"{1e6 * (single - per_call):.0f} us ({percent((single - per_call) / single)} of it)"


def why_pipelined_is_faster(ceilings: list[dict]) -> list[str]:
    """The sentence the ceilings table needs, computed from its largest read: how far the
    synchronised figure is from the pipelined one and what a fixed cost per call explains."""
    reads = [c for c in ceilings if c.get("pipelined") and c["unit"] == "B/s"]
    if not reads:
        return []
    c = max(reads, key=lambda r: r["work"])
    single, per_call = min(c["samples_s"]), min(c["pipelined"]["samples_s"])
    cost = single - per_call
    return ["", f"Why a synchronised call reads less than the pipelined one: at {c['size']} "
            f"({c['what']}) the fastest synchronised call took {1e3 * single:.3f} ms and a "
            f"pipelined call {1e3 * per_call:.3f} ms, so each synchronised call pays "
            f"{1e6 * cost:.0f} us of fixed cost (dispatch and the wait for its result, the "
            f"device idle meanwhile): {percent(cost / single)} of that call. The course's "
            "roofs are synchronised single calls (every timing waits for its call), so they "
            "are judged against the synchronised ceiling; the pipelined one is the chip's "
            "plain-JAX limit."]


def of_spec(ceiling: dict, spec: dict | None) -> float | None:
    if not spec:
        return None
    if ceiling["unit"] == "FLOP/s":
        peak = spec["peak_flops"].get(ceiling["dtype"])
        return ceiling["best"] / peak if peak else None
    return ceiling["best"] / spec["hbm_bytes_per_s"]


def write(report: dict, out: Path) -> tuple[Path, Path]:
    """report.json and report.md in ``out`` (each written whole, then moved into place)."""
    paths = out / "report.json", out / "report.md"
    for path, text in zip(paths, (json.dumps(report, indent=1, default=str), markdown(report))):
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return paths

"""``make portfolio``: the learner's route map and a correctness-backed benchmark report.

    python -m coursekit.portfolio --records build/learner --out build/portfolio
                                  [--mlflow-uri URI | --no-mlflow] [--title TEXT]

Reads what the learner has recorded (``coursekit.portfolio.evidence``: check results,
run records, predictions, collected evidence, the MLflow store) and writes
``OUT/portfolio.md``, ``OUT/portfolio.html`` (self-contained, plots embedded),
``OUT/plots/*.png`` and ``OUT/portfolio.json`` (the same facts for machines):

1. Route map: each milestone of ``coursekit.portfolio.route`` with its status (met, partly, not
   yet), the stages behind it, when they last passed, on which backend, and links to
   the check results, run records, traces and MLflow runs that are its evidence.
   Required practice and optional extensions are kept apart.
2. Benchmark: synchronised latency distributions and throughput (run records), the three
   memory figures, scaling over CPU-simulated devices, and prediction beside
   measurement, each with the correctness check it rests on and its environment.
3. What remains: every milestone, check and figure not yet in hand, and what it needs.

A partial record renders and says what is missing; a corrupt file is named in the
report and on stderr. The grader calls ``build_portfolio`` per student.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.facts import DEFAULT_RECORDS, ROOT
from coursekit.portfolio import plots, route
from coursekit.portfolio.doc import Badge, Doc, Link
from coursekit.portfolio.evidence import (
    CheckRecord,
    Records,
    default_store,
    merge_duplicate_runs,
    read_records,
    read_store,
    when,
)

SYNCED = ("block_until_ready", "host_read")
# Run records with no project of their own are evidence of the performance report.
UNASSIGNED_RUNS = "performance-report"

STATEMENT = (
    "What this report is, and is not: it gathers practice evidence. The public checks "
    "and your self-reported completion show that your code passed the course's own "
    "checks on your machine; they are practice, not an independent review, not an exam "
    "and not a hardware qualification. CPU figures are CPU figures: they do not "
    "characterise accelerators (GPU or TPU speed, memory or interconnect), and scaling "
    "over CPU-simulated devices that share the same cores shows placement and overhead, "
    "never parallel speedup.")


# ---------------------------------------------------------------------------------------
# Assessment: where the learner stands on the route
# ---------------------------------------------------------------------------------------

@dataclass
class StageState:
    stage: route.Stage
    state: str                        # passed | failing | not started | not run
    latest: CheckRecord | None = None
    last_passed: CheckRecord | None = None
    failing: list[dict] = field(default_factory=list)
    counted: int = 0


@dataclass
class MilestoneState:
    milestone: route.Milestone
    status: str                       # met | partly | not yet
    stages: list[StageState]
    evidence: list = field(default_factory=list)   # [Link | str]


def assess_stage(stage: route.Stage, checks: list[CheckRecord]) -> StageState:
    attempts = []
    for record in checks:
        if record.project != stage.project:
            continue
        counted = [r for r in record.results
                   if r["stage"] == stage.stage and stage.counts(r["check_id"])]
        if counted:
            attempts.append((record, counted))
    if not attempts:
        return StageState(stage, "not run")
    attempts.sort(key=lambda a: a[0].time)
    latest, results = attempts[-1]
    passes = [rec for rec, rs in attempts if all(r["status"] == "pass" for r in rs)]
    failing = [r for r in results if r["status"] != "pass"]
    if not failing:
        state = "passed"
    elif all(r["status"] == "not-implemented" for r in results):
        state = "not started"
    else:
        state = "failing"
    return StageState(stage, state, latest, passes[-1] if passes else None, failing,
                      len(results))


def assess(rec: Records) -> list[MilestoneState]:
    out = []
    for m in route.MILESTONES:
        stages = [assess_stage(s, rec.checks) for s in m.stages]
        if all(s.state == "passed" for s in stages):
            status = "met"
        elif any(s.state == "passed" or s.last_passed for s in stages):
            status = "partly"
        else:
            status = "not yet"
        out.append(MilestoneState(m, status, stages, _evidence(m, stages, rec)))
    return out


def _evidence(m: route.Milestone, stages: list[StageState], rec: Records) -> list:
    links, seen = [], set()

    def add(item, key):
        if key not in seen:
            seen.add(key)
            links.append(item)
    for s in stages:
        for record, what in ((s.last_passed, "passed"), (s.latest, s.state)):
            if record is not None:
                add(Link(f"{s.stage.project} stage {s.stage.stage} {what}: {record.source}",
                         record.link), record.link)
    for run in rec.runs:
        if not run.link.startswith("file:"):
            continue   # samples of an MLflow run: the run itself is linked below
        if (run.project in m.projects) or (not run.project and m.key == UNASSIGNED_RUNS):
            add(Link(f"run record {run.name}", run.link), run.link)
            if run.trace:
                add(Link(f"trace of {run.name}" + ("" if Path(run.trace).is_file()
                                                   else " (file missing)"),
                         Path(run.trace).resolve().as_uri()), run.trace)
    store = [r for r in rec.store_runs if r.project in m.projects and r.kind != "check"]
    for r in store[:5]:
        add(Link(f"MLflow run {r.name} ({r.status})", r.link), r.link)
    return links


# ---------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------

def backend_label(backends) -> str:
    backends = sorted({str(b).lower() for b in backends if b} - {"unknown"}) or ["unknown"]
    if backends == ["cpu"]:
        return "CPU figures: they say nothing about accelerator speed or memory"
    if "cpu" in backends:
        return ("figures from " + ", ".join(b.upper() for b in backends) +
                "; every CPU figure among them says nothing about accelerators")
    return ", ".join(b.upper() for b in backends) + " figures"


def _ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3g}"


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _mib(value) -> str:
    return "-" if not isinstance(value, (int, float)) else f"{value / 2**20:.1f}"


def _fingerprint(env: dict, short: str = "") -> str:
    if not env and not short:
        return "not recorded"
    parts = [short] if short else []
    for key in ("backend", "devices", "jax", "cpu", "cpu_model"):
        if env.get(key) not in (None, ""):
            parts.append(f"{key} {env[key]}")
    return ", ".join(str(p) for p in parts)


def _stage_line(s: StageState) -> list:
    parts = [f"{s.stage.label}: ", Badge(s.state)]
    if s.last_passed is not None:
        parts.append(f" (last passed {when(s.last_passed.time)} on "
                     f"{s.last_passed.backend})")
    return parts


def render(rec: Records, states: list[MilestoneState], out: Path, title: str,
           mlflow_note: str) -> tuple[Doc, list[Path], list[str], dict]:
    doc = Doc(title)
    made: list[Path] = []
    missing: list[str] = []
    plot_dir = out / "plots"
    doc.para(f"Built {when(time.time())} from {rec.root} ({rec.files_read} record file(s) "
             f"read). {mlflow_note}")
    doc.note(STATEMENT)

    problems = [p for p in rec.problems if p.kind != "ignored"]
    if rec.problems:
        doc.heading(1, "Record problems")
        if problems:
            doc.para("These files could not be used; the report below is built from the "
                     "rest. Fix or delete each, then rebuild:")
        doc.bullets([[Badge({"ignored": "note"}.get(p.kind, p.kind)), f" {p.line()}"]
                     for p in rec.problems])

    # -- Route map -------------------------------------------------------------------
    doc.heading(1, "Route map")
    summary = [{"title": s.milestone.title, "status": s.status,
                "required": s.milestone.required} for s in states]
    made.append(plots.route_map(summary, plot_dir / "route_map.png"))
    doc.image(made[-1], "Route map: required milestones on the upper line, optional "
              "extensions below; green met, amber partly, grey not yet")
    required = [s for s in states if s.milestone.required]
    met = sum(s.status == "met" for s in required)
    doc.para(f"Required route practice: {met} of {len(required)} milestones met. A "
             "milestone is met when every stage behind it passed in your newest check "
             "of that stage; partly when some did (or one passed before and fails now).")
    for name, group in (("Required route practice", required),
                        ("Optional extensions", [s for s in states
                                                 if not s.milestone.required])):
        doc.heading(2, name)
        rows = []
        for s in group:
            passes = [st.last_passed for st in s.stages if st.last_passed is not None]
            rows.append([
                s.milestone.title, Badge(s.status),
                [p for st in s.stages for p in (_stage_line(st) + ["\n"])][:-1],
                when(max(p.time for p in passes)) if passes else "never",
                ", ".join(sorted({p.backend for p in passes})) or "-",
                [p for link in (s.evidence or ["none yet"]) for p in (link, "\n")][:-1],
                ", ".join(s.milestone.notebooks)])
        doc.table(["milestone", "status", "stages behind it", "last passed", "backend",
                   "evidence", "notebooks"], rows)
    if not rec.checks:
        doc.para("No check results found yet: run a check cell in a notebook "
                 "(coursekit.notebook.cells.run_check) or check.py --json.")

    # -- Benchmark ---------------------------------------------------------------------
    backends = [r.backend for r in rec.runs] + [
        e.get("fingerprint", {}).get("backend") for e in rec.memory + rec.scaling]
    label = backend_label(backends)
    doc.heading(1, "Benchmark")
    doc.para(f"All figures below: {label}. Each figure sits next to the correctness "
             "check it rests on and the environment it was measured in.")
    pa = {s.stage.stage: s for m in states for s in m.stages
          if s.stage.project == "performance-audit"}
    st = {s.stage.stage: s for m in states for s in m.stages
          if s.stage.project == "sharded-training" and not s.stage.checks}

    doc.heading(2, "Latency (synchronised) and throughput")
    runs = sorted(rec.runs, key=lambda r: r.time, reverse=True)
    synced = [r for r in runs if r.sync in SYNCED and r.samples_s]
    unsynced = [r for r in runs if r not in synced]
    if synced:
        made.append(plots.latency(list(reversed(synced[:12])), plot_dir / "latency.png",
                                  backend_label([r.backend for r in synced])))
        doc.image(made[-1], "Warmed, synchronised samples per run (box) and the first call "
                  "(compile) apart; " + backend_label([r.backend for r in synced]))
    rows = []
    for r in runs:
        med = statistics.median(r.samples_s) if r.samples_s else None
        spread = ("-" if len(r.samples_s) < 2 else
                  f"{_ms(_pct(r.samples_s, 10))}-{_ms(_pct(r.samples_s, 90))}")
        thr = (f"{_rate(r.items / med)} items/s ({r.items:g} per call: {r.items_basis})"
               if r.items and med else "-")
        if r.output_ok is True:
            check = "output checked before timing: pass"
        elif r.output_ok is False:
            check = "output check FAILED: no valid timing"
        else:
            check = "no output check recorded"
        if r.link.startswith("file:"):
            state = pa.get(1).state if pa.get(1) else "not run"
            check += "; timing harness: " + (
                "checked by performance-audit stage 1 (passed)" if state == "passed" else
                "performance-audit stage 1 failing now" if state == "failing" else
                "your own, not yet checked (run performance-audit stage 1)")
        if r.status != "FINISHED":
            check += f"; run {r.status}" + (f": {r.error}" if r.error else "")
        note = "" if r in synced else (
            "no samples" if not r.samples_s else
            "sync not recorded: left out of the plot" if not r.sync else
            f"sync {r.sync}: not a synchronised timing, left out of the plot")
        if r.problems:
            note = "; ".join(filter(None, [note, "record: " + "; ".join(r.problems[:3])]))
        rows.append([Link(r.name, r.link), r.backend.upper(), r.sync or "not recorded",
                     _ms(r.first_call_s), _ms(med), spread, str(len(r.samples_s)), thr,
                     check, _fingerprint(r.env, r.fingerprint), note or "-"])
    if rows:
        doc.table(["run", "backend", "sync", "first call (ms)", "median (ms)",
                   "p10-p90 (ms)", "samples", "throughput", "correctness it rests on",
                   "environment fingerprint", "notes"], rows)
    else:
        missing.append("Latency and throughput: no run record yet. Needs a synchronised "
                       "run record (coursekit.provenance.records.write_run_record into "
                       "<records>/runs/, from notebooks 01 and 08 or sharded-training stage "
                       "4), or a measurement run with raw samples in the MLflow store.")
        doc.para("Not yet: " + missing[-1])
    if unsynced and not synced:
        missing.append("Latency: no synchronised run record (every one found lacks "
                       "block_until_ready or a host read inside its timed boundary).")

    doc.heading(2, "Memory: saved residuals, compiler estimate, observed peak")
    if rec.memory:
        ev = max(rec.memory, key=lambda e: e.get("time") or 0)
        env = ev.get("fingerprint") if isinstance(ev.get("fingerprint"), dict) else {}
        mlabel = backend_label([env.get("backend")])
        made.append(plots.memory(ev, plot_dir / "memory.png", mlabel))
        doc.image(made[-1], f"Three memory figures per remat policy; {mlabel}")
        w = ev.get("workload", {})
        doc.para(f"Workload: {json.dumps(w)}. Kept {when(ev.get('time'))} in "
                 f"{ev['source']}. Environment: {_fingerprint(env)}.")
        stage3 = pa.get(3)
        rests = (f"Rests on: gradients of every policy equal to no-remat gradients in this "
                 f"measurement: {_yes(ev.get('grads_equal'))}; performance-audit stage 3 "
                 f"(checked against the checker's own counts): "
                 f"{stage3.state if stage3 else 'not run'}.")
        doc.para(rests)
        doc.table(["policy", "saved residuals (MiB)", "compiler temp estimate (MiB)",
                   "observed peak VmHWM (MiB, whole process)", "gradients equal"],
                  [[p, _mib(f.get("saved_residual_bytes")), _mib(f.get("compiler_temp_bytes")),
                    _mib(f.get("vmhwm_bytes")), _yes(f.get("grads_equal", ev.get("grads_equal")))]
                   for p, f in ev["policies"].items() if isinstance(f, dict)])
        doc.para("The observed peak includes the JAX runtime (a few hundred MiB): compare "
                 "policies with each other, not with the other two figures.")
    else:
        missing.append("Memory figures: none kept yet. Needs performance-audit stage 3, "
                       "then `python -m coursekit.portfolio.collect memory` (or "
                       "portfolio_collect.collect_memory() in notebook 04).")
        doc.para("Not yet: " + missing[-1])

    doc.heading(2, "Scaling limits (CPU-simulated devices sharing the same cores)")
    if rec.scaling:
        ev = max(rec.scaling, key=lambda e: e.get("time") or 0)
        env = ev.get("fingerprint") if isinstance(ev.get("fingerprint"), dict) else {}
        doc.para(f"{ev.get('label', 'CPU-simulated devices sharing the same cores')}: every "
                 "device count ran on the same CPU cores, so this measures the overhead of "
                 "sharding and its limits, not parallel speedup. CPU figures. Workload: "
                 f"{json.dumps(ev.get('workload', {}))}. Kept {when(ev.get('time'))} in "
                 f"{ev['source']}. Environment: {_fingerprint(env)}.")
        made.append(plots.scaling(ev, plot_dir / "scaling.png"))
        doc.image(made[-1], "Step time and throughput against simulated device count "
                  "(CPU-simulated devices sharing the same cores; CPU figures)")
        stage2 = st.get(2)
        doc.para(f"Rests on: {ev.get('rests_on', 'not recorded')}; sharded-training stage 2 "
                 f"(count-weighted updates): {stage2.state if stage2 else 'not run'}.")
        points = sorted(ev["points"], key=lambda p: p.get("devices", 0))
        base = next((p for p in points if p.get("ok") and p.get("samples_s")), None)
        rows = []
        for p in points:
            samples = p.get("samples_s") or []
            med = statistics.median(samples) if samples else None
            batch = ev.get("workload", {}).get("global_batch")
            rel = (f"{statistics.median(base['samples_s']) / med:.2f}x"
                   if base and med else "-")
            rows.append([str(p.get("devices")), _ms(p.get("first_call_s")), _ms(med),
                         _rate(batch / med) if batch and med else "-", rel,
                         ("pass" if p.get("ok") else "FAIL") +
                         (f" (max abs error {p['max_abs_error']:.2g})"
                          if isinstance(p.get("max_abs_error"), (int, float)) else ""),
                         p.get("error") or "-"])
        doc.table(["simulated devices", "first call (ms)", "median step (ms)",
                   "examples/s", "speed vs fewest devices", "update vs single-device "
                   "reference", "notes"], rows)
        counts = {p.get("devices") for p in points if p.get("ok")}
        lacking = [n for n in (1, 2, 4, 8) if n not in counts]
        if lacking:
            missing.append(f"Scaling: no checked point for {lacking} simulated device(s).")
    else:
        missing.append("Scaling limits: none kept yet. Needs sharded-training stage 1, "
                       "then `python -m coursekit.portfolio.collect scaling` (1, 2, 4 and "
                       "8 CPU-simulated devices, a minute or two).")
        doc.para("Not yet: " + missing[-1])

    doc.heading(2, "Changed conditions: prediction beside measurement")
    preds = sorted(rec.predictions.values(), key=lambda p: p["name"])
    if preds:
        rows = []
        for p in preds:
            ratio = "-"
            if isinstance(p["predicted"], (int, float)) and p["predicted"] and \
                    isinstance(p["measured"], (int, float)):
                ratio = f"{p['measured'] / p['predicted']:.3g}"
            if p["predicted"] is None:
                state = "no prediction written before measuring"
            elif p["measured"] is None:
                state = "not measured yet"
            else:
                state = "kept"
            rows.append([p["name"], _show(p["predicted"]), _show(p["measured"]),
                         p["unit"] or "-", ratio, state])
            if state != "kept":
                missing.append(f"Prediction {p['name']}: {state}.")
        doc.table(["changed condition", "your prediction", "measured", "unit",
                   "measured / predicted", "state"], rows)
        made.append(plots.predictions(preds, plot_dir / "predictions.png"))
        doc.image(made[-1], "Measured against predicted (log-log; on the dashed line the "
                  "prediction was exact)")
    else:
        missing.append("Changed conditions: no prediction kept yet (notebook cells call "
                       "record_prediction before the measurement and compare_prediction "
                       "after it).")
        doc.para("Not yet: " + missing[-1])

    doc.heading(2, "Recorded runs (MLflow)")
    doc.para(mlflow_note)
    store = sorted(rec.store_runs, key=lambda r: r.time, reverse=True)
    shown = store[:40] + [r for r in store[40:] if r.status in ("FAILED", "KILLED")]
    if shown:
        doc.table(["run", "experiment", "status", "started", "fingerprint", "error"],
                  [[Link(r.name, r.link), r.experiment, Badge(r.status) if r.status ==
                    r.recorded_status else [Badge(r.status),
                                            f" (recorded {r.recorded_status}; its process "
                                            "is gone)"],
                    when(r.time), r.fingerprint or "-", r.error or "-"] for r in shown])
        bad = [r for r in store if r.status in ("FAILED", "KILLED")]
        if bad:
            doc.para(f"{len(bad)} run(s) did not finish (FAILED or KILLED). They stay in the "
                     "record: a failed configuration is evidence too, and a killed run is "
                     "why recovery matters.")

    # -- What remains ------------------------------------------------------------------
    doc.heading(1, "What remains")
    remaining_milestones = [s for s in states if s.status != "met"]
    if not remaining_milestones:
        doc.para("Every milestone on the route is met, extensions included.")
    for s in remaining_milestones:
        kind = "required" if s.milestone.required else "optional extension"
        doc.heading(2, f"{s.milestone.title} ({kind}): {s.status}")
        doc.para(f"Evidence it needs: {s.milestone.evidence}.")
        items = []
        for stage in s.stages:
            if stage.state == "passed":
                continue
            text = [f"{stage.stage.label}: ", Badge(stage.state),
                    f". Needs: {stage.stage.needs}."]
            if stage.failing and stage.state == "failing":
                first = stage.failing[0]
                text.append(f" Failing now: {', '.join(r['check_id'] for r in stage.failing)}"
                            f" (first: {first['message'][:160]})")
            cells = stage.stage.check_cell_notebooks()
            text.append(f" Run: {stage.stage.command()}" + (
                f" (or the check cell of notebook {'/'.join(cells)})." if cells else "."))
            items.append(text)
            missing.append(f"{s.milestone.title}: {stage.stage.label} {stage.state}")
        doc.bullets(items)
    gaps = [m for m in missing if not any(m.startswith(s.milestone.title)
                                          for s in remaining_milestones)]
    if gaps:
        doc.heading(2, "Benchmark figures not yet in hand")
        doc.bullets(gaps)

    doc.heading(1, "About these figures")
    doc.note(STATEMENT)
    facts = {"milestones": {s.milestone.key: s.status for s in states},
             "stages": {f"{st_.stage.project}:{st_.stage.stage}"
                        + (":multi-process" if st_.stage.checks else ""): st_.state
                        for s in states for st_ in s.stages},
             "required_met": met, "required_total": len(required)}
    return doc, [p for p in made if p is not None], missing, facts


def _pct(values, q):
    import numpy as np
    return float(np.percentile(values, q))


def _yes(value) -> str:
    return {True: "yes", False: "NO"}.get(value, "not checked")


def _show(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------

def build_portfolio(records_dir, out_dir, mlflow_uri: str | None = None, *,
                    title: str | None = None, student: str | None = None) -> dict:
    """Build the portfolio of the records in ``records_dir`` into ``out_dir``.

    ``mlflow_uri``: None reads the store that belongs to these records
    (``MLFLOW_TRACKING_URI``, else ``<records_dir>/../mlflow.db``); "" reads no store.
    An absent store is reported, never created. ``student`` keeps only that student's
    gradebook stage records (for a folder that holds several). Returns {"markdown", "html", "json",
    "plots", "milestones": {key: status}, "stages", "required_met", "required_total",
    "problems": [str], "missing": [str]}; problems name every file that could not be used.
    """
    records_dir, out = Path(records_dir), Path(out_dir)
    rec = read_records(records_dir, student)
    uri = default_store(records_dir) if mlflow_uri is None else mlflow_uri
    if uri:
        read_store(rec, uri)
    else:
        rec.mlflow = "MLflow store not read for this report."
    merge_duplicate_runs(rec)
    states = assess(rec)
    out.mkdir(parents=True, exist_ok=True)
    for old in (out / "plots").glob("*.png"):
        old.unlink()
    doc, made, missing, facts = render(
        rec, states, out, title or "Route map and portfolio: JAX performance engineering",
        rec.mlflow)
    md = out / "portfolio.md"
    md.write_text(doc.markdown(out))
    page = out / "portfolio.html"
    page.write_text(doc.html())
    result = {"markdown": str(md), "html": str(page), "json": str(out / "portfolio.json"),
              "plots": [str(p) for p in made], **facts,
              "problems": [p.line() for p in rec.problems if p.kind != "ignored"],
              "notes": [p.line() for p in rec.problems if p.kind == "ignored"],
              "missing": missing, "statement": STATEMENT}
    Path(result["json"]).write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.portfolio",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--records", default=str(DEFAULT_RECORDS),
                        help="the records folder (default build/learner)")
    parser.add_argument("--out", default=str(ROOT / "build" / "portfolio"))
    parser.add_argument("--mlflow-uri", default=None,
                        help="MLflow store (default: MLFLOW_TRACKING_URI, else the "
                             "mlflow.db beside the records folder)")
    parser.add_argument("--no-mlflow", action="store_true", help="read no MLflow store")
    parser.add_argument("--title", default=None)
    parser.add_argument("--student", default=None,
                        help="keep only this student's gradebook records")
    args = parser.parse_args(argv)
    try:
        result = build_portfolio(args.records, args.out,
                                 "" if args.no_mlflow else args.mlflow_uri, title=args.title,
                                 student=args.student)
    except OSError as err:
        print(f"error: could not write the portfolio to {args.out}: {err}", file=sys.stderr)
        return 1
    for line in result["problems"]:
        print(f"record problem: {line}", file=sys.stderr)
    print(f"route: {result['required_met']} of {result['required_total']} required "
          "milestones met")
    for key, status in result["milestones"].items():
        print(f"  {status:<8} {route.milestone(key).title}"
              + ("" if route.milestone(key).required else " (optional extension)"))
    print(f"portfolio: {result['html']}\n           {result['markdown']}")
    print("practice evidence, not an independent review or a hardware qualification; "
          "CPU figures do not characterise accelerators")
    return 0


if __name__ == "__main__":
    sys.exit(main())

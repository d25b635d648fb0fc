"""``make course``: run the whole course headless against the reference solutions.

    python -m coursekit.commands.course --out build/course [--ci] [--learner] [--only TEXT]
                               [--no-projects] [--no-notebooks]

Part 1, projects: every ``projects/<p>/tests/check.py --stage all`` against that project's
``solution/model.py`` (``--learner``: its ``starter/model.py``), each in its own process,
printed as a per-stage table.

Part 2, notebooks: every ``notebooks/*.ipynb`` executed with papermill (imported once, one
notebook after another: the machine has 2 cores), with ``IMPL`` injected as the
solution of the notebook's project (``--learner``: the starter, and the notebook's own
nbgrader solution regions cleared with nbgrader's ClearSolutions, as a learner receives
it) and, with ``--ci``, the notebook's ``metadata.course.ci_parameters``. Executed copies
go to ``OUT/executed[-learner]/``; check-cell records go to ``OUT/records/`` (through
``COURSE_RECORDS``, so a run never scribbles into a learner's ``build/learner``).

A notebook passes against the solution when every cell ran without an error output and
every check cell passed. In the learner version it passes when it ran to its last cell
and the only errors sit in nbgrader cells the learner has yet to fill in (solution stubs
and the autograded tests that follow them, which are tagged ``raises-exception``).

Writes ``OUT/summary[-learner].json`` and prints a table; exit 1 when anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit import facts
from coursekit.facts import ALLOWED_ERROR_TAG, KERNEL, NOTEBOOKS, ROOT, ensure_kernel

# ---------------------------------------------------------------------------------------
# Part 1: project checkers
# ---------------------------------------------------------------------------------------

def discover_projects(only: str = "") -> list[str]:
    """Projects that have both a checker and a reference solution, in name order."""
    return [p for p in facts.projects(with_solution=True) if only in p]


def run_project(project: str, which: str = "solution", timeout: float = 1800) -> dict:
    """``check.py --stage all`` on ``projects/<project>/<which>/model.py`` in a fresh
    process. Returns {"project", "impl", "returncode", "wall_s", "stages": {stage:
    {"passed", "failed", "failed_ids", "seconds"}}, "error"}; never raises."""
    impl = ROOT / "projects" / project / which / "model.py"
    check = facts.checker_path(project)
    row = {"project": project, "impl": str(impl.relative_to(ROOT)), "returncode": None,
           "wall_s": 0.0, "stages": {}, "error": ""}
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(check), "--stage", "all", "--impl", str(impl),
               "--json", str(out)]
        start = time.perf_counter()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=ROOT)
            row["returncode"] = done.returncode
            tail = (done.stdout + done.stderr)[-1500:]
        except subprocess.TimeoutExpired:
            row["returncode"], tail = -1, f"checker ran over {timeout:.0f} s"
        row["wall_s"] = round(time.perf_counter() - start, 2)
        data = json.loads(out.read_text()) if out.exists() else None
    if data is None:
        row["error"] = "the checker wrote no JSON result: " + tail.strip()
        return row
    for r in data["results"]:
        stage = row["stages"].setdefault(str(r["stage"]), {"passed": 0, "failed": 0,
                                                           "failed_ids": [], "seconds": 0.0})
        if r["status"] == "pass":
            stage["passed"] += 1
        else:
            stage["failed"] += 1
            stage["failed_ids"].append(r["check_id"])
        stage["seconds"] = round(stage["seconds"] + r.get("duration_s", 0.0), 2)
    row["versions"] = data.get("versions", {})
    row["mlflow_run"] = record_check(data, row["wall_s"])
    return row


def record_check(data: dict, wall_s: float) -> str:
    """Log one checker result to MLflow (FINISHED or FAILED); a store problem is
    reported and never fails the course run."""
    try:
        from coursekit.provenance import tracking as provenance
        return provenance.log_check_run(data, wall_s=wall_s)
    except Exception as err:  # noqa: BLE001 - provenance must not hide the check result
        print(f"    (not recorded in MLflow: {type(err).__name__}: {err})")
        return ""


def record_output_check_demo() -> None:
    """One configuration that fails its output check on purpose (bfloat16 logits against
    a float32 reference) beside one that passes, so the record shows a FAILED run."""
    try:
        from coursekit.provenance import tracking as provenance
        for dtype in ("float32", "bfloat16"):
            d = provenance.output_check_demo(dtype)
            print(f"  {d['status']:<8} {d['name']}  {d.get('error') or ''}".rstrip())
        print("  (the bfloat16 run fails its output check on purpose: a FAILED run stays in "
              "the record; `make mlflow-ui` shows it)")
    except Exception as err:  # noqa: BLE001
        print(f"  (provenance demo not recorded: {type(err).__name__}: {err})")


def project_ok(row: dict, learner: bool) -> bool:
    """Against the solution every check must pass; against the starter the checker only
    has to run to the end and report (its checks say not yet)."""
    if row["error"] or not row["stages"]:
        return False
    if learner:
        return True
    return row["returncode"] == 0 and all(s["failed"] == 0 for s in row["stages"].values())


def print_project_table(rows: list[dict], learner: bool) -> None:
    which = "starter (learner version)" if learner else "reference solution"
    print(f"\nProject checks against each {which}: check.py --stage all")
    print(f"{'project':<22} {'stage':>5} {'passed':>7} {'failed':>7} {'check s':>8}  failed checks")
    for row in rows:
        if row["error"]:
            print(f"{row['project']:<22} {'-':>5} {'-':>7} {'-':>7} {'-':>8}  "
                  f"ERROR {row['error'][:200]}")
            continue
        for stage, s in sorted(row["stages"].items(), key=lambda kv: int(kv[0])):
            ids = ", ".join(s["failed_ids"])
            if learner and s["failed"] and not s["passed"]:
                ids = "not yet (starter)"
            print(f"{row['project']:<22} {stage:>5} {s['passed']:>7} {s['failed']:>7} "
                  f"{s['seconds']:>8.1f}  {ids[:80]}")
        status = "ok" if project_ok(row, learner) else "FAILED"
        print(f"{row['project']:<22} {'all':>5} "
              f"{sum(s['passed'] for s in row['stages'].values()):>7} "
              f"{sum(s['failed'] for s in row['stages'].values()):>7} "
              f"{row['wall_s']:>8.1f}  {status} (wall time of the checker process)")


# ---------------------------------------------------------------------------------------
# Part 2: notebooks
# ---------------------------------------------------------------------------------------

def discover_notebooks(only: str = "", folder: Path = NOTEBOOKS) -> list[Path]:
    return [p for p in sorted(Path(folder).glob("*.ipynb")) if only in p.name]




def course_metadata(nb) -> dict:
    return dict(nb.metadata.get("course", {}))


def notebook_parameters(nb, *, ci: bool, learner: bool, folder: Path = NOTEBOOKS) -> dict:
    """What papermill injects: IMPL for the notebook's project (solution, or starter for
    the learner version; relative to ``folder``, where the notebook runs) and, with ``ci``,
    the notebook's ``ci_parameters``."""
    meta = course_metadata(nb)
    params = dict(meta.get("ci_parameters", {})) if ci else {}
    project = meta.get("project")
    if project:
        which = "starter" if learner else "solution"
        impl = ROOT / "projects" / project / which / "model.py"
        if impl.is_file():
            params["IMPL"] = os.path.relpath(impl, folder)
    return params


def nbgrader_kind(cell) -> str:
    """"solution", "test" (autograded tests), "answer" (manually graded) or ""."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if meta.get("solution") and meta.get("grade"):
        return "answer"
    if meta.get("solution"):
        return "solution"
    if meta.get("grade"):
        return "test"
    return ""


def learner_version(nb):
    """The notebook as a learner receives it: nbgrader's own ClearSolutions and
    ClearHiddenTests applied, and the cells a learner has yet to fill in (solution stubs
    and autograded tests) allowed to raise so that Run All reaches the end."""
    import copy

    from nbgrader.preprocessors import ClearHiddenTests, ClearSolutions
    nb = copy.deepcopy(nb)
    resources: dict = {}
    nb, resources = ClearSolutions().preprocess(nb, resources)
    nb, resources = ClearHiddenTests().preprocess(nb, resources)
    for cell in nb.cells:
        if cell.cell_type == "code" and nbgrader_kind(cell) in ("solution", "test"):
            tags = cell.metadata.setdefault("tags", [])
            if ALLOWED_ERROR_TAG not in tags:
                tags.append(ALLOWED_ERROR_TAG)
    return nb


def read_check_records(records: Path) -> dict:
    """Sum of the check cells' stored results (coursekit.notebook.cells.run_check writes one
    file per project and stage under ``COURSE_RECORDS/checks``)."""
    runs = [json.loads(p.read_text()) for p in sorted((records / "checks").glob("*.json"))]
    return {"check_cells": len(runs), "check_cells_ok": sum(bool(r.get("ok")) for r in runs),
            "checks_passed": sum(r.get("passed", 0) for r in runs),
            "checks_failed": sum(r.get("failed", 0) for r in runs),
            "stages": sorted(f"{r['project']}:{r['stage']}" for r in runs)}


def inspect_outputs(nb) -> dict:
    """Error outputs by kind of cell, and whether the last code cell ran."""
    errors, allowed, not_yet = [], [], 0
    code = [c for c in nb.cells if c.cell_type == "code"]
    tests_total = sum(nbgrader_kind(c) == "test" for c in code)
    tests_failed = 0
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                lines = out.get("text", "").splitlines()
                not_yet += sum(line.startswith("not yet:") for line in lines)
            if out.get("output_type") != "error":
                continue
            kind = nbgrader_kind(cell)
            tests_failed += kind == "test"
            entry = {"cell": index, "kind": kind or "plain",
                     "error": f"{out.get('ename')}: {str(out.get('evalue'))[:200]}"}
            (allowed if kind in ("solution", "test") else errors).append(entry)
    ran_to_end = bool(code) and code[-1].get("execution_count") is not None
    return {"errors": errors, "learner_errors": allowed, "ran_to_end": ran_to_end,
            "tests_total": tests_total, "tests_failed": tests_failed, "not_yet_lines": not_yet}


def run_notebook(path: Path, out: Path, *, ci: bool = False, learner: bool = False,
                 timeout: float = 900) -> dict:
    """Execute one notebook with papermill and judge it. Never raises for a failing
    notebook: the verdict is in the returned row ("status": "ok" | "FAILED")."""
    import nbformat
    import papermill as pm

    mode = "learner" if learner else "solution"
    executed = out / ("executed-learner" if learner else "executed") / path.name
    records = out / "records" / mode / path.stem
    executed.parent.mkdir(parents=True, exist_ok=True)
    if records.exists():
        import shutil
        shutil.rmtree(records)
    records.mkdir(parents=True)
    nb = nbformat.read(path, as_version=4)
    meta = course_metadata(nb)
    params = notebook_parameters(nb, ci=ci, learner=learner, folder=path.parent)
    if learner:
        nb = learner_version(nb)
    kernel = nb.metadata.get("kernelspec", {}).get("name", KERNEL)
    row = {"notebook": path.name, "mode": mode, "ci": ci, "project": meta.get("project"),
           "parameters": params, "executed": str(executed), "status": "FAILED",
           "exception": ""}
    old = os.environ.get("COURSE_RECORDS")
    os.environ["COURSE_RECORDS"] = str(records)
    start = time.perf_counter()
    try:
        result = pm.execute_notebook(nb, str(executed), parameters=params, kernel_name=kernel,
                                     cwd=str(path.parent), progress_bar=False,
                                     log_output=False, execution_timeout=timeout)
    except pm.PapermillExecutionError as err:
        result = None
        row["exception"] = f"{err.ename}: {str(err.evalue)[:300]}"
    except Exception as err:  # noqa: BLE001 - kernel death, timeouts: recorded, not raised
        result = None
        row["exception"] = f"{type(err).__name__}: {str(err)[:300]}"
    finally:
        row["wall_s"] = round(time.perf_counter() - start, 2)
        if old is None:
            os.environ.pop("COURSE_RECORDS", None)
        else:
            os.environ["COURSE_RECORDS"] = old
    if result is None and executed.exists():
        # papermill saved the executed copy (with error banners) before raising
        result = nbformat.read(executed, as_version=4)
        if learner:  # allowed learner errors: drop the banner that says it stopped
            result.cells = [c for c in result.cells
                            if "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
            nbformat.write(result, executed)
    row.update(read_check_records(records))
    if result is not None:
        row.update(inspect_outputs(result))
    else:
        row.update(errors=[{"cell": None, "kind": "run", "error": row["exception"]}],
                   learner_errors=[], ran_to_end=False, tests_total=0, tests_failed=0,
                   not_yet_lines=0)
    row["status"] = "ok" if notebook_ok(row, learner) else "FAILED"
    return row


def notebook_ok(row: dict, learner: bool) -> bool:
    if row["errors"] or not row["ran_to_end"]:
        return False
    if learner:
        return True  # errors only in cells the learner has yet to fill in
    # against the solution nothing may say "not yet": a swallowed NotImplementedError
    # there is a bug, not an unfinished exercise
    return (not row["learner_errors"] and row["tests_failed"] == 0 and not row["not_yet_lines"]
            and row["check_cells_ok"] == row["check_cells"])


def print_notebook_table(rows: list[dict], learner: bool, ci: bool) -> None:
    which = "starter + cleared solutions (learner version)" if learner else "reference solution"
    size = "CI sizes" if ci else "learner sizes"
    print(f"\nNotebooks executed with papermill against the {which}, {size}")
    print(f"{'notebook':<30} {'status':<7} {'wall s':>7} {'checks':>9} {'check cells':>12} "
          f"{'nb tests':>9}  notes")
    for r in rows:
        checks = f"{r['checks_passed']}/{r['checks_passed'] + r['checks_failed']}"
        cells = f"{r['check_cells_ok']}/{r['check_cells']}"
        tests = f"{r['tests_total'] - r['tests_failed']}/{r['tests_total']}"
        notes = []
        if r["errors"]:
            e = r["errors"][0]
            notes.append(f"error in cell {e['cell']}: {e['error'][:120]}")
        elif not r["ran_to_end"]:
            notes.append("did not reach its last cell")
        elif not learner and r["not_yet_lines"]:
            notes.append(f"{r['not_yet_lines']} 'not yet' line(s) against the solution")
        if learner and r["status"] == "ok":
            notes.append(f"ran to the end; {r['check_cells'] - r['check_cells_ok']} check "
                         f"cell(s) and {r['tests_failed']} notebook test(s) say not yet")
        print(f"{r['notebook']:<30} {r['status']:<7} {r['wall_s']:>7.1f} {checks:>9} "
              f"{cells:>12} {tests:>9}  {'; '.join(notes)}")


# ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "course"))
    parser.add_argument("--ci", action="store_true",
                        help="run notebooks at the small sizes in their ci_parameters")
    parser.add_argument("--learner", action="store_true",
                        help="the learner version: starters and cleared notebook solutions")
    parser.add_argument("--only", default="",
                        help="only notebooks and projects whose name contains this text")
    parser.add_argument("--no-projects", action="store_true", help="skip the project checks")
    parser.add_argument("--no-notebooks", action="store_true", help="skip the notebooks")
    parser.add_argument("--notebooks", default=str(NOTEBOOKS),
                        help="folder of notebooks to run (default: the course's notebooks/)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds allowed per notebook cell (default 900)")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    suffix = "-learner" if args.learner else ""
    summary = {"learner": args.learner, "ci": args.ci, "projects": [], "notebooks": []}
    print(f"make course: everything below ran on {os.cpu_count()} CPU core(s); every time is "
          "a CPU figure, not an accelerator measurement.", flush=True)

    if not args.no_projects:
        for project in discover_projects(args.only):
            print(f"  checking {project} ...", flush=True)
            row = run_project(project, "starter" if args.learner else "solution")
            row["status"] = "ok" if project_ok(row, args.learner) else "FAILED"
            summary["projects"].append(row)
        print_project_table(summary["projects"], args.learner)
        if not args.learner:
            print("\nprovenance (MLflow record of every run, failed ones too):")
            record_output_check_demo()

    if not args.no_notebooks:
        notebooks = discover_notebooks(args.only, Path(args.notebooks))
        if notebooks:
            ensure_kernel()
            import papermill  # noqa: F401 - imported once, before the clock of any notebook
        for path in notebooks:
            print(f"  executing {path.name} ...", flush=True)
            row = run_notebook(path, out, ci=args.ci, learner=args.learner,
                               timeout=args.timeout)
            summary["notebooks"].append(row)
            print(f"    {row['status']} in {row['wall_s']:.1f} s", flush=True)
        if notebooks:
            print_notebook_table(summary["notebooks"], args.learner, args.ci)

    summary["wall_s"] = round(time.perf_counter() - started, 2)
    failed = [r["project"] for r in summary["projects"] if r["status"] != "ok"]
    failed += [r["notebook"] for r in summary["notebooks"] if r["status"] != "ok"]
    summary["failed"] = failed
    path = out / f"summary{suffix}.json"
    path.write_text(json.dumps(summary, indent=1, default=str))
    print(f"\nwhole course: {summary['wall_s']:.1f} s wall (CPU figure); summary: {path}")
    if not summary["projects"] and not summary["notebooks"]:
        print("nothing ran: no projects or notebooks matched")
        return 1
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    print("all passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

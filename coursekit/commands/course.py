"""``make course``: run the whole course headless, against the reference solutions (or, in
a learner's copy of the course, against the learner's own code).

    python -m coursekit.commands.course --out build/course [--ci] [--learner] [--only TEXT]
                               [--no-projects] [--no-notebooks] [--checks-only [--stage N]]

Part 1, projects: every ``projects/<p>/tests/check.py --stage all`` against that project's
``solution/model.py`` (``--learner``: its ``starter/model.py``), each in its own process,
printed as a per-stage table.

Part 2, notebooks: every ``notebooks/*.ipynb`` executed with papermill (imported once, one
notebook after another: the machine has 2 cores), with ``IMPL`` injected as the
solution of the notebook's project and, with ``--ci``, the notebook's
``metadata.course.ci_parameters``. ``--learner`` runs the starter and the notebook exactly
as ``python -m autograder release`` ships it (``autograder.nbsource.release_notebook``,
nbgrader's own pipeline; see ``learner_version``). Executed copies go to
``OUT/executed[-learner]/``. A check cell whose stage part 1 has just passed, on the same
file with the same checker, shows that run and says so (``coursekit.notebook.reuse``):
every check runs once per ``make course``, not once per project and once per notebook.
Check-cell records go to ``OUT/records/`` (through
``COURSE_RECORDS``, so a run never scribbles into a learner's ``build/learner``). Kernels
talk over Unix sockets (``ipc``), as the grader's do: nothing listens on TCP.

A notebook passes against the solution when every cell ran without an error output and
every check cell passed. In the learner version it passes when it ran to its last cell
and the only errors sit in nbgrader cells the learner has yet to fill in (solution stubs
and the autograded tests that follow them, which are tagged ``raises-exception``).

In a release (``coursekit.facts.is_release``: projects without ``solution/``) there is
nothing to compare with: ``make course`` is the learner version run on the learner's own
files (their ``starter/model.py`` and their notebooks as they are, IMPL untouched), and
prints where they stand: checks passed, not yet written (a function that still raises
NotImplementedError) and failed, per stage and per notebook. It exits 0 when everything
ran. ``--checks-only`` (what ``make test`` runs in a release) runs only the project checks
and exits as ``check.py`` does: 0 only when every selected check passed.

Writes ``OUT/summary[-learner|-checks].json`` and prints a table; exit 1 when anything
failed.
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
from coursekit.checking.errors import GRADED_BY_INSTRUCTOR, NOT_APPLICABLE
from coursekit.checking.tally import INCONCLUSIVE_EXIT
from coursekit.compat import optional
from coursekit.facts import KERNEL, NOTEBOOKS, ROOT, ensure_kernel, is_release
from coursekit.notebook.reuse import REUSE_ENV

# ---------------------------------------------------------------------------------------
# Part 1: project checkers
# ---------------------------------------------------------------------------------------

def discover_projects(only: str = "", release: bool = False) -> list[str]:
    """Projects that have both a checker and a reference solution (in a release: a
    checker), in name order."""
    return [p for p in facts.projects(with_solution=not release) if only in p]


def run_project(project: str, which: str = "solution", timeout: float = 1800,
                stage: str = "all", record: bool = True) -> dict:
    """``check.py --stage <stage>`` on ``projects/<project>/<which>/model.py`` in a fresh
    process. Returns {"project", "impl", "returncode", "wall_s", "stages": {stage:
    {"passed", "not_yet", "failed", "failed_ids", "not_yet_ids", "inconclusive",
    "inconclusive_ids", "seconds"}}, "error"}; never raises.
    ``failed`` counts every check that did not pass and was not left undecided;
    ``not_yet`` those of them that only met a function still raising NotImplementedError;
    ``inconclusive`` the checks that could not decide (a timing under this machine's load,
    each with its reason): no failure, as check.py's exit 3 says. ``record``: log the
    result to MLflow (``make course``); ``--checks-only`` does not, like check.py itself."""
    impl = ROOT / "projects" / project / which / "model.py"
    check = facts.checker_path(project)
    row = {"project": project, "impl": str(impl.relative_to(ROOT)), "returncode": None,
           "wall_s": 0.0, "stages": {}, "error": ""}
    with tempfile.TemporaryDirectory(prefix="course-check-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(check), "--stage", str(stage), "--impl", str(impl),
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
        counts = row["stages"].setdefault(str(r["stage"]), {
            "passed": 0, "not_yet": 0, "failed": 0, "instructor": 0, "failed_ids": [],
            "not_yet_ids": [], "inconclusive": 0, "inconclusive_ids": [], "seconds": 0.0})
        if r["status"] == "pass":
            counts["passed"] += 1
        elif r["status"] == "inconclusive":
            counts["inconclusive"] += 1
            counts["inconclusive_ids"].append(r["check_id"])
        elif r["status"] == GRADED_BY_INSTRUCTOR:  # a release: needs instructor-only code
            counts["instructor"] += 1
        elif r["status"] == NOT_APPLICABLE:  # this machine lacks what it needs: no failure
            counts["not_applicable"] = counts.get("not_applicable", 0) + 1
            counts["not_applicable_ids"] = [*counts.get("not_applicable_ids", []),
                                            r["check_id"]]
        else:
            counts["failed"] += 1
            counts["failed_ids"].append(r["check_id"])
            if r["status"] == "not-implemented":
                counts["not_yet"] += 1
                counts["not_yet_ids"].append(r["check_id"])
        counts["seconds"] = round(counts["seconds"] + r.get("duration_s", 0.0), 2)
    row["versions"] = data.get("versions", {})
    row["payload"] = data
    row["mlflow_run"] = record_check(data, row["wall_s"]) if record else ""
    return row


def share_with_notebooks(folder: Path, row: dict) -> None:
    """Part 1's stages that passed whole, kept for the notebooks' check cells of part 2:
    the same checker and the same file, so a check cell shows that run (and says so)
    instead of running the checker a second time. A stage that did not pass, or a file
    changed since, finds nothing there and its cell runs the checker."""
    from coursekit.notebook.reuse import COURSE_SOURCE, share_reference_result
    payload = row.pop("payload", None)
    if payload:
        share_reference_result(folder, row["project"], ROOT / row["impl"], payload,
                               source=COURSE_SOURCE)


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
    """Against the solution no check may fail (one left inconclusive, check.py's exit 3,
    is an undecided timing on a loaded machine, said with its reason: a correct solution
    never FAILs for the load, as the notebooks' check cells count it); against the starter
    the checker only has to run to the end and report (its checks say not yet)."""
    if row["error"] or not row["stages"]:
        return False
    if learner:
        return True
    return row["returncode"] in (0, INCONCLUSIVE_EXIT) and \
        all(s["failed"] == 0 for s in row["stages"].values())


def all_passed(row: dict) -> bool:
    """check.py's own rule: exit 0 and every check passed."""
    return bool(row["stages"]) and not row["error"] and row["returncode"] == 0 and all(
        s["failed"] == 0 for s in row["stages"].values())


def print_project_table(rows: list[dict], learner: bool, release: bool = False,
                        stage: str = "all") -> None:
    if learner or release:
        print_learner_project_table(rows, release, stage)
        return
    print("\nProject checks against each reference solution: check.py --stage all")
    print(f"{'project':<22} {'stage':>5} {'passed':>7} {'failed':>7} {'check s':>8}  failed checks")
    for row in rows:
        if row["error"]:
            print(f"{row['project']:<22} {'-':>5} {'-':>7} {'-':>7} {'-':>8}  "
                  f"ERROR {row['error'][:200]}")
            continue
        for stage, s in sorted(row["stages"].items(), key=lambda kv: int(kv[0])):
            ids = ", ".join(s["failed_ids"] + [f"{i} (inconclusive)"
                                               for i in s.get("inconclusive_ids", [])])
            print(f"{row['project']:<22} {stage:>5} {s['passed']:>7} {s['failed']:>7} "
                  f"{s['seconds']:>8.1f}  {ids[:80]}")
        status = "ok" if project_ok(row, False) else "FAILED"
        undecided = sum(s.get("inconclusive", 0) for s in row["stages"].values())
        if undecided and status == "ok":
            status += (f", {undecided} inconclusive under this machine's load (each says why; "
                       "rerun when it is quieter)")
        print(f"{row['project']:<22} {'all':>5} "
              f"{sum(s['passed'] for s in row['stages'].values()):>7} "
              f"{sum(s['failed'] for s in row['stages'].values()):>7} "
              f"{row['wall_s']:>8.1f}  {status} (wall time of the checker process)")


def print_learner_project_table(rows: list[dict], release: bool, stage: str) -> None:
    """Where the learner's code stands: per stage, checks passed, not yet written (a
    function still raises NotImplementedError) and failed (it ran and gave a wrong
    answer), apart."""
    which = "your code" if release else "the starter (learner version)"
    print(f"\nProject checks against {which}: check.py --stage {stage} --impl "
          "projects/<project>/starter/model.py")
    print(f"{'project':<22} {'stage':>5} {'passed':>7} {'not yet':>8} {'failed':>7} "
          f"{'instructor':>10} {'check s':>8}  failed checks")
    for row in rows:
        if row["error"]:
            print(f"{row['project']:<22} {'-':>5} {'-':>7} {'-':>8} {'-':>7} {'-':>10} "
                  f"{'-':>8}  DID NOT RUN {row['error'][:200]}")
            continue
        for name, s in sorted(row["stages"].items(), key=lambda kv: int(kv[0])):
            not_yet = s.get("not_yet", 0)
            print(f"{row['project']:<22} {name:>5} {s['passed']:>7} {not_yet:>8} "
                  f"{s['failed'] - not_yet:>7} {s.get('instructor', 0):>10} "
                  f"{s['seconds']:>8.1f}  {failed_not_yet_apart(s)[:80]}")
        total = {k: sum(s.get(k, 0) for s in row["stages"].values())
                 for k in ("passed", "not_yet", "failed", "instructor")}
        print(f"{row['project']:<22} {'all':>5} {total['passed']:>7} {total['not_yet']:>8} "
              f"{total['failed'] - total['not_yet']:>7} {total['instructor']:>10} "
              f"{row['wall_s']:>8.1f}  ran (wall time of the checker process)")
    not_here = [f"{row['project']} {i}" for row in rows for s in row["stages"].values()
                for i in s.get("not_applicable_ids", [])]
    if not_here:
        print(f"(not applicable on this machine, no failure: {', '.join(not_here)})")
    if any(s.get("instructor") for row in rows for s in row["stages"].values()):
        print("(instructor: checks graded by your instructor; they need the course's "
              "reference code, which your copy does not hold)")
    if release and rows:
        print("(one stage's lines: python projects/<project>/tests/check.py --stage N "
              "--impl projects/<project>/starter/model.py)")


def failed_not_yet_apart(s: dict) -> str:
    """The ids of the checks that ran and failed (not those still waiting for code)."""
    waiting = set(s.get("not_yet_ids", []))
    return ", ".join([i for i in s["failed_ids"] if i not in waiting] +
                     [f"{i} (inconclusive)" for i in s.get("inconclusive_ids", [])])


# ---------------------------------------------------------------------------------------
# Part 2: notebooks
# ---------------------------------------------------------------------------------------

def discover_notebooks(only: str = "", folder: Path = NOTEBOOKS) -> list[Path]:
    return [p for p in sorted(Path(folder).glob("*.ipynb")) if only in p.name]


def course_metadata(nb) -> dict:
    return dict(nb.metadata.get("course", {}))


def notebook_parameters(nb, *, ci: bool, learner: bool, folder: Path = NOTEBOOKS,
                        release: bool = False) -> dict:
    """What papermill injects: IMPL for the notebook's project (solution, or starter for
    the learner version; relative to ``folder``, where the notebook runs; in a release
    none: the learner's notebook keeps its own IMPL) and, with ``ci``, the notebook's
    ``ci_parameters``."""
    meta = course_metadata(nb)
    params = dict(meta.get("ci_parameters", {})) if ci else {}
    project = meta.get("project")
    if project and not release:
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
    """The notebook as a learner receives it: exactly what ``python -m autograder
    release`` ships (nbgrader's generate_assignment pipeline, ``release_notebook``), so
    the learner version under test is the one learners get.

    Nothing is added for the headless run. The ``raises-exception`` tag
    (``facts.ALLOWED_ERROR_TAG``) that lets Run All go on past a solution stub and the
    autograded test after it is written in the notebook source and kept by nbgrader's
    pipeline, so it is in the released notebook itself: JupyterLab's Run All then goes on
    for the learner exactly as papermill goes on here, and nbgrader's validate and
    autograde are unaffected (they execute with allow_errors and grade a test cell from
    its error output, tag or not). A stub that lacks the tag stops this run where it
    would stop the learner's."""
    from autograder.nbsource import release_notebook
    return release_notebook(nb)


# Everything papermill and the kernel add to a notebook by running it; the rest of an
# executed learner copy must equal the notebook the learner was given.
EXECUTION_ADDITIONS = (
    "outputs and execution counts",
    "papermill's injected-parameters cell (CI sizes, IMPL)",
    "papermill's error banner cell (dropped from learner copies)",
    "metadata.papermill of the notebook and of each cell; each cell's metadata.execution",
    "an empty metadata.tags list on cells that had none",
    "metadata.language_info as the kernel reports it (version, mimetype...; name kept)",
)
_EXECUTION_TAGS = ("injected-parameters", "papermill-error-cell-tag")


def without_execution(nb) -> dict:
    """``nb`` as plain JSON without EXECUTION_ADDITIONS: equal for a notebook and its
    executed copy."""
    nb = json.loads(json.dumps(nb))
    nb["metadata"].pop("papermill", None)
    info = nb["metadata"].get("language_info")
    if info:
        nb["metadata"]["language_info"] = {"name": info.get("name")}
    cells = []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {})
        if set(_EXECUTION_TAGS) & set(meta.get("tags", [])):
            continue
        for key in ("papermill", "execution"):
            meta.pop(key, None)
        if meta.get("tags") == []:
            del meta["tags"]
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        if isinstance(cell.get("source"), list):
            cell["source"] = "".join(cell["source"])
        cells.append(cell)
    nb["cells"] = cells
    return nb


def check_cell_ok(run: dict) -> bool:
    """A check cell that passed, or whose checker could decide nothing it did not pass
    (exit 3: no check failed, some inconclusive, each with its reason): an undecided timing
    check on a loaded machine, or a fresh process the chip cannot give while the notebook
    holds it, is not a failure (the projects' runs count it the same way)."""
    return bool(run.get("ok")) or (run.get("returncode") == INCONCLUSIVE_EXIT
                                   and not run.get("failed") and run.get("ran", 0) > 0)


def read_check_records(records: Path) -> dict:
    """Sum of the check cells' stored results (coursekit.notebook.cells.run_check writes one
    file per project and stage under ``COURSE_RECORDS/checks``)."""
    runs = [json.loads(p.read_text()) for p in sorted((records / "checks").glob("*.json"))]
    return {"check_cells": len(runs), "check_cells_ok": sum(map(check_cell_ok, runs)),
            "check_cells_reused": sum(bool(r.get("source")) for r in runs),
            "checks_passed": sum(r.get("passed", 0) for r in runs),
            "checks_failed": sum(r.get("failed", 0) for r in runs),
            "checks_inconclusive": sum(r.get("inconclusive", 0) for r in runs),
            "checks_not_yet": sum(x.get("status") == "not-implemented"
                                  for r in runs for x in r.get("results", [])),
            "stages": sorted(f"{r['project']}:{r['stage']}" for r in runs)}


def inspect_outputs(nb) -> dict:
    """Error outputs by kind of cell, and whether the last code cell ran. A failed
    autograded test counts as "not yet" when it raised NotImplementedError or follows a
    solution cell that did (the exercise it tests is still the stub)."""
    errors, allowed, not_yet = [], [], 0
    code = [c for c in nb.cells if c.cell_type == "code"]
    tests_total = sum(nbgrader_kind(c) == "test" for c in code)
    tests_failed = tests_not_yet = 0
    stub_pending = False  # a solution cell since the last test cell raised NotImplemented
    for index, cell in enumerate(nb.cells):
        kind = nbgrader_kind(cell)
        raised = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                text = out.get("text", "")
                lines = ("".join(text) if isinstance(text, list) else text).splitlines()
                not_yet += sum(line.startswith("not yet:") for line in lines)
        for out in raised:
            tests_failed += kind == "test"
            entry = {"cell": index, "kind": kind or "plain",
                     "error": f"{out.get('ename')}: {str(out.get('evalue'))[:200]}"}
            (allowed if kind in ("solution", "test") else errors).append(entry)
        unfinished = any(o.get("ename") == "NotImplementedError" for o in raised)
        if kind == "solution":
            stub_pending = stub_pending or unfinished
        elif kind == "test":
            tests_not_yet += bool(raised) and (unfinished or stub_pending)
            stub_pending = False
    ran_to_end = bool(code) and code[-1].get("execution_count") is not None
    return {"errors": errors, "learner_errors": allowed, "ran_to_end": ran_to_end,
            "tests_total": tests_total, "tests_failed": tests_failed,
            "tests_not_yet": tests_not_yet, "not_yet_lines": not_yet}


def ipc_kernel_manager_class(folder: Path):
    """A kernel manager on Unix sockets in ``folder`` (the grader's transport too): the
    kernel listens on no TCP port, and ipykernel has no cause for its "running over TCP
    without encryption" warning on every notebook. A class, not an instance, so that
    nbclient owns the manager and shuts its kernel down after the notebook."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    class IpcKernelManager(AsyncKernelManager):
        @default("transport")
        def _transport_default(self):
            return "ipc"

        @default("ip")
        def _ip_default(self):  # an absolute path: never sockets in the notebook folder
            return str(folder / "k")

    return IpcKernelManager


def run_notebook(path: Path, out: Path, *, ci: bool = False, learner: bool = False,
                 timeout: float = 900, release: bool = False) -> dict:
    """Execute one notebook with papermill and judge it. Never raises for a failing
    notebook: the verdict is in the returned row ("status": "ok" | "FAILED"). In a
    ``release`` the notebook is the learner's own, run as it is (it is already the
    learner version: releasing it again would wipe their answers)."""
    import shutil

    import nbformat
    import papermill as pm

    learner = learner or release
    mode = "learner" if learner else "solution"
    executed = out / ("executed-learner" if learner else "executed") / path.name
    records = out / "records" / mode / path.stem
    executed.parent.mkdir(parents=True, exist_ok=True)
    if records.exists():
        shutil.rmtree(records)
    records.mkdir(parents=True)
    nb = nbformat.read(path, as_version=4)
    meta = course_metadata(nb)
    params = notebook_parameters(nb, ci=ci, learner=learner, folder=path.parent,
                                 release=release)
    if learner and not release:
        nb = learner_version(nb)
    kernel = nb.metadata.get("kernelspec", {}).get("name", KERNEL)
    row = {"notebook": path.name, "mode": mode, "ci": ci, "project": meta.get("project"),
           "parameters": params, "executed": str(executed), "status": "FAILED",
           "exception": ""}
    old = os.environ.get("COURSE_RECORDS")
    os.environ["COURSE_RECORDS"] = str(records)
    # Unix socket paths are short (108 bytes): a folder of its own under /tmp
    sockets = Path(tempfile.mkdtemp(prefix="course-kernel-"))
    start = time.perf_counter()
    try:
        result = pm.execute_notebook(nb, str(executed), parameters=params, kernel_name=kernel,
                                     cwd=str(path.parent), progress_bar=False,
                                     log_output=False, execution_timeout=timeout,
                                     kernel_manager_class=ipc_kernel_manager_class(sockets))
    except pm.PapermillExecutionError as err:
        result = None
        row["exception"] = f"{err.ename}: {str(err.evalue)[:300]}"
    except Exception as err:  # noqa: BLE001 - kernel death, timeouts: recorded, not raised
        result = None
        row["exception"] = f"{type(err).__name__}: {str(err)[:300]}"
    finally:
        row["wall_s"] = round(time.perf_counter() - start, 2)
        shutil.rmtree(sockets, ignore_errors=True)
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
                   tests_not_yet=0, not_yet_lines=0)
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


def print_notebook_table(rows: list[dict], learner: bool, ci: bool,
                         release: bool = False) -> None:
    if learner or release:
        print_learner_notebook_table(rows, ci, release)
        return
    size = "CI sizes" if ci else "learner sizes"
    print(f"\nNotebooks executed with papermill against the reference solution, {size}")
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
        elif r["not_yet_lines"]:
            notes.append(f"{r['not_yet_lines']} 'not yet' line(s) against the solution")
        print(f"{r['notebook']:<30} {r['status']:<7} {r['wall_s']:>7.1f} {checks:>9} "
              f"{cells:>12} {tests:>9}  {'; '.join(notes)}")


def print_learner_notebook_table(rows: list[dict], ci: bool, release: bool) -> None:
    """Per notebook: did it run to its end, and its check-cell checks and notebook tests
    as passed / not yet (code still to write) / failed (ran, wrong answer)."""
    which = "your code and your notebooks" if release else \
        "the starter and the released notebooks (learner version)"
    size = "CI sizes" if ci else "learner sizes"
    print(f"\nNotebooks run top to bottom with papermill on {which}, {size}")
    print(f"{'notebook':<30} {'ran':<8} {'wall s':>7}   {'checks: pass':>12} {'not yet':>7} "
          f"{'failed':>6}   {'nb tests: pass':>14} {'not yet':>7} {'failed':>6}")
    for r in rows:
        not_yet = r.get("checks_not_yet", 0)
        t_not_yet = r.get("tests_not_yet", 0)
        ran = "to end" if r["status"] == "ok" else "STOPPED"
        print(f"{r['notebook']:<30} {ran:<8} {r['wall_s']:>7.1f}   {r['checks_passed']:>12} "
              f"{not_yet:>7} {r['checks_failed'] - not_yet:>6}   "
              f"{r['tests_total'] - r['tests_failed']:>14} {t_not_yet:>7} "
              f"{r['tests_failed'] - t_not_yet:>6}")
        if r["errors"]:
            e = r["errors"][0]
            print(f"    stopped in cell {e['cell']}: {e['error'][:160]}")
        elif not r["ran_to_end"]:
            print("    did not reach its last cell")
    print(f"(executed copies: {Path(rows[0]['executed']).parent})" if rows else "")


# ---------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "course"))
    parser.add_argument("--ci", action="store_true",
                        help="run notebooks at the small sizes in their ci_parameters")
    parser.add_argument("--learner", action="store_true",
                        help="the learner version: starters and released notebooks "
                             "(always, in a release)")
    parser.add_argument("--only", default="",
                        help="only notebooks and projects whose name contains this text")
    parser.add_argument("--no-projects", action="store_true", help="skip the project checks")
    parser.add_argument("--no-notebooks", action="store_true", help="skip the notebooks")
    parser.add_argument("--checks-only", action="store_true",
                        help="only the project checks, exit 0 only when every one passed "
                             "(check.py's rule; `make test` in a release)")
    parser.add_argument("--stage", default="all",
                        help="with --checks-only: the stage to check (default all)")
    parser.add_argument("--notebooks", default=str(NOTEBOOKS),
                        help="folder of notebooks to run (default: the course's notebooks/)")
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds allowed per notebook cell (default 900)")
    args = parser.parse_args(argv)
    if args.stage != "all" and not args.checks_only:
        parser.error("--stage goes with --checks-only")
    release = is_release(ROOT)
    learner = args.learner or release
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    suffix = "-checks" if args.checks_only else "-learner" if learner else ""
    summary = {"learner": learner, "release": release, "ci": args.ci, "projects": [],
               "notebooks": []}
    if release:
        print(f"make {'test' if args.checks_only else 'course'}: your copy of the course; "
              "your code in projects/<project>/starter/model.py"
              + ("" if args.checks_only else " and your notebooks")
              + " through the course's own checks.")
    print(f"{'' if release else 'make course: '}everything below ran on {os.cpu_count()} "
          "CPU core(s); every time is a CPU figure, not an accelerator measurement.",
          flush=True)

    if not args.no_projects or args.checks_only:
        for project in discover_projects(args.only, release):
            print(f"  checking {project} ...", flush=True)
            row = run_project(project, "starter" if learner else "solution",
                              stage=args.stage, record=not args.checks_only)
            ok = all_passed(row) if args.checks_only else project_ok(row, learner)
            row["status"] = "ok" if ok else "FAILED"
            share_with_notebooks(out / "reuse", row)
            summary["projects"].append(row)
        if summary["projects"]:
            print_project_table(summary["projects"], learner, release, args.stage)
        if not learner and not args.checks_only:
            print("\nprovenance (MLflow record of every run, failed ones too):")
            record_output_check_demo()

    if not args.no_notebooks and not args.checks_only:
        notebooks = discover_notebooks(args.only, Path(args.notebooks))
        if notebooks and not optional.have("papermill"):  # an accelerator image may lack it
            absent = optional.Absent("papermill", "running the notebooks here")
            summary["skipped"] = [str(absent)]
            print(f"\n{absent}; run one headless: python -m coursekit.notebook.headless "
                  "IN.ipynb OUT.ipynb", flush=True)
            notebooks = []
        if notebooks:
            ensure_kernel()
            import papermill  # noqa: F401 - imported once, before the clock of any notebook
        if summary["projects"]:  # check cells answered by part 1's passed stages
            os.environ[REUSE_ENV] = str(out / "reuse")
        for path in notebooks:
            print(f"  executing {path.name} ...", flush=True)
            row = run_notebook(path, out, ci=args.ci, learner=learner, timeout=args.timeout,
                               release=release)
            summary["notebooks"].append(row)
            print(f"    {'ran to its end' if row['status'] == 'ok' else row['status']} in "
                  f"{row['wall_s']:.1f} s", flush=True)
        if notebooks:
            print_notebook_table(summary["notebooks"], learner, args.ci, release)

    summary["wall_s"] = round(time.perf_counter() - started, 2)
    failed = [r["project"] for r in summary["projects"] if r["status"] != "ok"]
    failed += [r["notebook"] for r in summary["notebooks"] if r["status"] != "ok"]
    summary["failed"] = failed
    path = out / f"summary{suffix}.json"
    path.write_text(json.dumps(summary, indent=1, default=str))
    print(f"\nwhole run: {summary['wall_s']:.1f} s wall (CPU figure); summary: {path}")
    if not summary["projects"] and not summary["notebooks"]:
        print("nothing ran: no projects or notebooks matched")
        return 1
    if args.checks_only:
        return report_checks(summary["projects"])
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    if learner:
        print(where_you_stand(summary))
        return 0
    print("all passed" + "".join(f" ({note})" for note in summary.get("skipped", [])))
    return 0


def where_you_stand(summary: dict) -> str:
    """One line: everything ran, and the learner's counts (checks and notebook tests)."""
    stages = [s for r in summary["projects"] for s in r["stages"].values()]
    counts = {"passed": sum(s["passed"] for s in stages),
              "not yet": sum(s.get("not_yet", 0) for s in stages),
              "failed": sum(s["failed"] - s.get("not_yet", 0) for s in stages)}
    if any(s.get("inconclusive") for s in stages):
        counts["inconclusive"] = sum(s.get("inconclusive", 0) for s in stages)
    if any(s.get("instructor") for s in stages):
        counts["graded by your instructor"] = sum(s.get("instructor", 0) for s in stages)
    nbs = summary["notebooks"]
    tests = {"passed": sum(r["tests_total"] - r["tests_failed"] for r in nbs),
             "not yet": sum(r.get("tests_not_yet", 0) for r in nbs),
             "failed": sum(r["tests_failed"] - r.get("tests_not_yet", 0) for r in nbs)}
    parts = []
    if stages:
        parts.append("project checks " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    if nbs:
        parts.append(f"{len(nbs)} notebook(s) ran to their end; notebook tests "
                     + ", ".join(f"{v} {k}" for k, v in tests.items()))
    return "everything ran: " + "; ".join(parts)


def report_checks(rows: list[dict]) -> int:
    """check.py's exit rule over every project: 0 only when every check passed."""
    bad = [r["project"] for r in rows if r["status"] != "ok"]
    if bad:
        print("not every check passes yet: " + ", ".join(bad) + " (exit 1, as check.py)")
        return 1
    graded = sum(s.get("instructor", 0) for r in rows for s in r.get("stages", {}).values())
    print("every check passed" + (f" that runs here (graded by your instructor: {graded} "
                                  "more)" if graded else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The items of ``make accelerator``, each run in processes of its own, one after another
(one process at a time can hold a TPU), each returned as a JSON-able record that never
raises: a checker on a solution or a starter, a notebook headless, the device probe and
the roofline.

This process never imports JAX: the checkers pin their own JAX to the CPU and leave the
chip to their learner processes, and the notebook, the probe and the roofline each hold
it in turn. Every child runs in a process group of its own, killed whole at its time
limit, its output kept in a log file beside the report.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sys
import time
from pathlib import Path

from coursekit import facts
from coursekit.commands.course import (
    course_metadata,
    inspect_outputs,
    notebook_ok,
    notebook_parameters,
    read_check_records,
)
from coursekit.facts import ROOT
from coursekit.workloads.procgroup import last_line, start, wait_all

# What a starter's check must say: the stub's NotImplementedError, as "not yet: ...".
NOT_YET_STATUS, NOT_YET_PREFIX = "not-implemented", "not yet"
NOT_APPLICABLE_STATUS = "not-applicable"  # coursekit.checking.errors.NOT_APPLICABLE
# Variables a test run sets that would let a notebook's check cell reuse another run's
# result instead of running the checker on this machine.
NOT_INHERITED = ("COURSE_CHECK_REUSE",)
# What a check cell answered from this run's project part prints after the summary.
ACCELERATOR_SOURCE = "this make accelerator run's project check of the same file"
# Every process an item starts inherits this mark, so one that left the item's process
# group (a training run in a session of its own) is still found and stopped when the item
# ends: on a TPU a leftover holding the chip would fail every later item.
ITEM_ENV = "COURSE_ACCELERATOR_ITEM"


def child_environment(*, dry_run: bool, site: Path | None, records: Path) -> dict:
    """The environment of every child: the user's (the accelerator machine's JAX first on
    PYTHONPATH, kept first), the course root and the packages ``--part setup`` installed
    added at the end, records under the report's folder, and on a dry run every JAX on the
    CPU."""
    env = {k: v for k, v in os.environ.items() if k not in NOT_INHERITED}
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    for extra in (str(ROOT), str(site) if site and site.is_dir() else None):
        if extra and extra not in paths:
            paths.append(extra)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[facts.RECORDS_ENV] = str(records)
    env.setdefault("MPLBACKEND", "Agg")
    if dry_run:
        env["JAX_PLATFORMS"] = "cpu"
    return env


def run_child(cmd: list[str], name: str, logs: Path, timeout: float, env: dict,
              cwd: Path = ROOT) -> dict:
    """Run ``cmd`` to its end or its time limit: {"returncode", "status" (ok | failed |
    timeout), "wall_s", "log", "last_error", "leftovers_stopped"}. Whatever it started
    that is still running when it ends is stopped then."""
    mark = f"{os.getpid()}-{name}-{secrets.token_hex(4)}"
    proc = wait_all([start(cmd, logs, name, env={**env, ITEM_ENV: mark}, cwd=cwd)],
                    timeout)[0]
    return {"returncode": proc.returncode, "status": proc.status,
            "wall_s": round(proc.duration_s, 2),
            "log": str(proc.stdout_path.relative_to(logs.parent)),
            "last_error": last_line(proc.stderr())[:300],
            "leftovers_stopped": stop_marked(mark)}


def stop_marked(mark: str) -> int:
    """SIGKILL every process whose environment carries ``ITEM_ENV=mark`` (only processes
    an item started carry it); how many there were."""
    wanted, stopped = f"{ITEM_ENV}={mark}".encode(), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if wanted not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            os.kill(int(entry.name), signal.SIGKILL)
            stopped += 1
        except (OSError, ValueError):
            continue
    return stopped


def first_line(text: str) -> str:
    return next((ln.strip() for ln in str(text).splitlines() if ln.strip()), "")


# -- checkers ----------------------------------------------------------------------------

def stage_verdicts(results: list[dict], which: str) -> dict:
    """Per stage: counts, the checks that did not pass (id, status, first message line)
    and the verdict. Against the solution every check passes (an inconclusive timing
    check is allowed and counted); against the starter every check says "not yet". A
    check this machine cannot run ("not-applicable": a multi-process run where sockets
    are refused) is counted apart, on either side, and is no failure."""
    stages: dict = {}
    for r in results:
        s = stages.setdefault(str(r["stage"]), {
            "checks": 0, "passed": 0, "failed": 0, "inconclusive": 0, "not_yet": 0,
            "not_applicable": 0, "seconds": 0.0, "not_passed": []})
        s["checks"] += 1
        s["seconds"] = round(s["seconds"] + float(r.get("duration_s") or 0.0), 2)
        status = r["status"]
        if status == "pass":
            s["passed"] += 1
            continue
        if status == "inconclusive":
            s["inconclusive"] += 1
        elif status == NOT_APPLICABLE_STATUS:
            s["not_applicable"] += 1
        else:
            s["failed"] += 1
        said_not_yet = (status == NOT_YET_STATUS and first_line(
            r.get("message", "")).startswith(NOT_YET_PREFIX)) or status == NOT_APPLICABLE_STATUS
        s["not_yet"] += said_not_yet
        s["not_passed"].append({"check_id": r["check_id"], "status": status,
                                "message": first_line(r.get("message", ""))[:240],
                                "not_yet": said_not_yet})
    for s in stages.values():
        if which == "starter":  # (a not-applicable check counts with the not-yets)
            ok = s["checks"] > 0 and s["not_yet"] == s["checks"]
            s["verdict"] = "not yet" if ok else "WRONG: " + ", ".join(sorted(
                {x["status"] for x in s["not_passed"] if not x["not_yet"]} |
                ({"pass"} if s["passed"] else set())))
        else:
            ok = s["failed"] == 0 and s["checks"] > 0
            s["verdict"] = ", ".join(["pass"] + ["inconclusive"] * bool(s["inconclusive"])
                                     + ["not applicable"] * bool(s["not_applicable"])) \
                if ok else "FAIL"
        s["as_expected"] = ok
    return stages


def run_checker(project: str, which: str, stage: str, out: Path, timeout: float,
                env: dict) -> dict:
    """``check.py --stage <stage>`` on ``projects/<project>/<which>/model.py``: its JSON
    result kept under ``out/checks/``, read into per-stage verdicts."""
    impl = ROOT / "projects" / project / which / "model.py"
    result = out / "checks" / f"{project}-{which}-{stage}.json"
    result.parent.mkdir(parents=True, exist_ok=True)
    result.unlink(missing_ok=True)
    cmd = [sys.executable, str(facts.checker_path(project)), "--stage", stage, "--impl",
           str(impl), "--json", str(result)]
    basis = reuse_basis(project, impl)  # the files as this run checks them
    run = run_child(cmd, f"check-{project}-{which}-{stage}", out / "logs", timeout, env)
    item = {"kind": "checks", "project": project, "impl": which, "stage": stage, **run,
            "stages": {}, "measured_on": None, "error": "", "reuse_basis": basis}
    data = json.loads(result.read_text()) if result.exists() else None
    if data is None:
        item["error"] = (f"ran past its {timeout:g} s limit" if run["status"] == "timeout"
                         else "the checker wrote no result: " + (run["last_error"] or
                                                                 f"exit {run['returncode']}"))
    else:
        item["stages"] = stage_verdicts(data.get("results", []), which)
        item["measured_on"] = data.get("measured_on")
        item["checker_versions"] = data.get("versions", {})
        item["result"] = str(result.relative_to(out))
        if which == "solution":
            item["shared_stages"] = share_with_notebooks(out, project, impl, data)
    item["as_expected"] = not item["error"] and bool(item["stages"]) and all(
        s["as_expected"] for s in item["stages"].values())
    return item


def share_with_notebooks(out: Path, project: str, impl: Path, data: dict) -> list:
    """The solution's stages that passed whole, kept in ``out/reuse`` for the notebooks'
    check cells of this run (``coursekit.notebook.reuse``, as ``make course`` does with
    its part 1): the same checker and the same file on the same machine, its learner on
    the device, so a check cell shows that run and says so instead of running the checker
    again on the CPU (the notebook's kernel holds the chip) while the chip idles. Kept: a
    stage with a check that passed and none that failed; a check this machine cannot run
    ("not applicable here") or that the chip's run could not decide ("inconclusive", with
    its reason) is shown as that run said it (run again in the cell it would be measured
    on the CPU beside the kernel holding the chip: no better evidence, and a minute of the
    chip's time for performance-audit stage 1). A stage that failed, or a file or checker
    changed since, finds nothing there and its cell runs the checker. Returns the stages
    kept."""
    from coursekit.notebook.reuse import share_reference_result
    on = (data.get("measured_on") or {}).get("label")
    source = ACCELERATOR_SOURCE + (f", its learner on {on}" if on else "")
    return share_reference_result(reuse_folder(out), project, impl, data, source=source,
                                  passing=("pass", NOT_APPLICABLE_STATUS, "inconclusive"))


def reuse_basis(project: str, impl: Path) -> str:
    """What a reused result is keyed on (the learner file's and the checker's hashes),
    recorded with each run so a resumed run reuses it only while both are unchanged."""
    from coursekit.notebook.reuse import reuse_key
    return reuse_key(project, "", impl)


def reuse_folder(out: Path) -> Path:
    return out / "reuse"


# -- notebooks ---------------------------------------------------------------------------

def run_notebook(path: Path, out: Path, timeout: float, cell_timeout: float,
                 env: dict) -> dict:
    """``path`` run headless at its CI sizes against the reference solution (the
    parameters ``make course --ci`` injects), in one process that also says where its
    JAX computed. Its check cells' records go to ``out/records/<notebook>``."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    params = notebook_parameters(nb, ci=True, learner=False, folder=path.parent)
    executed = out / "executed" / path.name
    device_file = out / "executed" / f"{path.stem}.device.json"
    records = out / "records" / path.stem
    for stale in (executed, device_file):
        stale.unlink(missing_ok=True)
    records.mkdir(parents=True, exist_ok=True)
    for stale in (records / "checks").glob("*.json"):
        stale.unlink()
    cmd = [sys.executable, "-m", "coursekit.commands.accelerator_notebook", str(device_file),
           str(path), str(executed), "--parameters-json", json.dumps(params),
           "--cwd", str(path.parent), "--timeout", f"{cell_timeout:g}"]
    run = run_child(cmd, f"notebook-{path.stem}", out / "logs", timeout,
                    {**env, facts.RECORDS_ENV: str(records)})
    item = {"kind": "notebook", "notebook": path.name,
            "project": course_metadata(nb).get("project"), "parameters": params, **run,
            "executed": str(executed.relative_to(out)), "device": None, "error": ""}
    if device_file.exists():
        found = json.loads(device_file.read_text())
        item["device"], item["device_error"] = found.get("device"), found.get("error", "")
    item.update(read_check_records(records))
    if executed.exists():
        ran = nbformat.read(executed, as_version=4)
        item.update(inspect_outputs(ran))
        item["cells"] = len(ran.cells)
        item["stopped_at"] = stopping_cell(ran, item)
    else:
        item.update(errors=[], learner_errors=[], ran_to_end=False, tests_total=0,
                    tests_failed=0, tests_not_yet=0, not_yet_lines=0, stopped_at=None)
        item["error"] = "no executed copy: " + (run["last_error"] or f"exit {run['returncode']}")
    if run["status"] == "timeout":
        item["error"] = f"ran past its {timeout:g} s limit"
    item["as_expected"] = not item["error"] and notebook_ok(item, learner=False)
    return item


def stopping_cell(nb, item: dict) -> dict | None:
    """The first cell with an error (its index in the executed copy, the first line of its
    source, the error), else the first code cell that did not finish (a run cut short)."""
    sources = {i: first_line(c.source) for i, c in enumerate(nb.cells)}
    errors = item.get("errors") or item.get("learner_errors")
    if errors:
        e = errors[0]
        return {"cell": e["cell"], "source": sources.get(e["cell"], "")[:120],
                "error": e["error"][:300]}
    for i, c in enumerate(nb.cells):
        if c.cell_type == "code" and c.get("execution_count") is None:
            return {"cell": i, "source": sources[i][:120],
                    "error": "did not finish (the notebook's process ended or was stopped)"}
    return None


# -- the device itself -------------------------------------------------------------------

def run_probe(out: Path, timeout: float, env: dict) -> dict:
    target = out / "environment.json"
    target.unlink(missing_ok=True)
    run = run_child([sys.executable, "-m", "coursekit.commands.accelerator_probe",
                     str(target)], "environment", out / "logs", timeout, env)
    found = json.loads(target.read_text()) if target.exists() else {}
    item = {"kind": "environment", **run, **found}
    item.setdefault("device", None)
    item["error"] = found.get("error") or ("" if found else run["last_error"] or
                                           f"the probe wrote nothing (exit {run['returncode']})")
    item["as_expected"] = bool(item["device"])
    return item


def run_roofline(out: Path, timeout: float, env: dict, options: list[str]) -> dict:
    target = out / "roofline.json"
    target.unlink(missing_ok=True)
    solution = ROOT / "projects" / "performance-audit" / "solution" / "model.py"
    cmd = [sys.executable, "-m", "coursekit.commands.accelerator_roofline", str(target),
           "--solution", str(solution), *options]
    run = run_child(cmd, "roofline", out / "logs", timeout, env)
    found = json.loads(target.read_text()) if target.exists() else {}
    item = {"kind": "roofline", **run, "device": None, "ceilings": [], "solution": [],
            "errors": [], **found}
    if not found:
        item["errors"] = [f"ran past its {timeout:g} s limit" if run["status"] == "timeout"
                          else "the roofline wrote nothing: " + (run["last_error"] or
                                                                 f"exit {run['returncode']}")]
    item["as_expected"] = bool(item["solution"]) and not item["errors"] and all(
        s["within_90"] for s in item["solution"])
    return item


def stamp(item: dict) -> dict:
    """The item with when it finished (the report orders reruns by it)."""
    item["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S")
    return item

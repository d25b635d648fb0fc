"""Grade one notebook of one submission: the learner's cells run in a learner process,
every graded test cell runs in a test process that never runs learner code, and each
autograded question is scored from what the test process reports.

* **What runs comes from the release.** The handed-in notebook contributes its cells and
  their order; every test and locked cell is the grading key's (nbgrader's own grade ids
  and checksums, ``autograder.nbsource``): an edited one is put back and reported as
  ``tampered``, a deleted one is put back in its place, and a cell's metadata decides
  nothing (an invented ``nbgrader`` or ``autograder`` key in a learner cell makes it no
  test and no hidden part).
* **Where it runs** (``plan`` -> ``execute``): one sandboxed run (``autograder/jail.py``:
  namespaces, throw-away uid, limits, watchdog) of ``coursekit.notebook.graded_run``, the
  test process. It starts the learner process (``bridge.LearnerProcess`` on the
  notebook: ``coursekit.notebook.cell_server``) and sends it each learner and locked cell;
  it runs each test cell's visible part, then its hidden part, itself, reading the names
  a part uses from the learner process as data (``coursekit.notebook.remote_names``).
  The hidden parts travel in a job file the test process deletes before the learner
  process starts; they never enter it.
* **Scoring** (``score``): pass, fail (AssertionError, or NotImplementedError: "not
  yet"), error (any other exception; a sandbox refusal or bytes on the bridge outside
  the protocol score every question 0 with that reason), timeout (a cell or test past
  its limit), memory, crash (the learner process died before or while the question ran),
  missing (no notebook). A learner process that dies costs only the questions not yet
  run; the ones before keep their points. nbgrader's partial credit: a number a test's
  last line shows. A question whose test reads an exercise that uses the course's own
  helper for its answer scores 0, ``borrowed-helper`` (``borrowed_helpers``: the rules
  of ``coursekit.checking.forbidden.NOTEBOOK_RULES``, read by
  ``coursekit.notebook.borrowed`` from the cells run before the test).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import sys
import time
from pathlib import Path

from autograder import outcomes, run_cpu, sandbox
from autograder.check_cells import answered
from autograder.nblimits import NotebookRefused, check_notebook_file
from autograder.submissions import plain_path
from autograder.workspace import Settings, prepare
from coursekit import protocol
from coursekit.compat.optional import Absent
from coursekit.notebook.reuse import REUSE_ENV, write_graded

TEST_PROCESS = ["-P", "-m", "coursekit.notebook.graded_run"]


def warm_up() -> None:
    """Import what notebook grading needs in the grader (called once per worker)."""
    import nbformat  # noqa: F401

    from autograder.nbsource import nbgrader_utils
    with contextlib.suppress(Absent):  # no nbgrader here: grading a notebook says so
        nbgrader_utils()


# ----------------------------------------------------------------------------------
# What runs: the submitted notebook's cells, the release's tests
# ----------------------------------------------------------------------------------

def _grade_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return meta.get("grade_id") if isinstance(meta, dict) else None


def plan(submitted, key: dict, hidden: bool) -> tuple[list[dict], list[str], list[str]]:
    """(cells to run, tampered grade ids, restored-missing grade ids) for a submitted
    notebook. Each cell to run is {"kind": "learner" | "course", "source"} (run in the
    learner process) or {"kind": "test", "id", "visible", "hidden"} (run in the test
    process; ``hidden`` None when there is none or ``hidden`` is off); its ``index`` is
    its place in this list."""
    from autograder.nbsource import nbgrader_utils
    utils = nbgrader_utils()
    protected = {**key["locked"], **key["tests"]}
    cells, seen, tampered = [], set(), []

    def restored(gid: str) -> list[dict]:
        if gid in key["tests"]:
            test = key["tests"][gid]
            return [{"kind": "test", "id": gid, "visible": test["cell"]["source"],
                     "hidden": (test["hidden"] or None) if hidden else None}]
        cell = key["locked"][gid]["cell"]
        return [{"kind": "course", "id": gid, "source": cell["source"]}] \
            if cell["cell_type"] == "code" else []

    for cell in submitted.cells:
        gid = _grade_id(cell)
        if gid in protected and gid not in seen:
            seen.add(gid)
            try:
                same = utils.compute_checksum(cell) == protected[gid]["checksum"]
            except Exception:  # noqa: BLE001 - broken metadata counts as an edit
                same = False
            if not same:
                tampered.append(gid)
            cells.extend(restored(gid))
        elif cell.get("cell_type") == "code":  # its metadata decides nothing
            cells.append({"kind": "learner", "source": str(cell.get("source", ""))})
    missing = [g for g in key["order"] if g not in seen]
    for gid in missing:  # back where the source had it: after its predecessor
        before = [g for g in key["order"][:key["order"].index(gid)] if g in seen]
        at = next((i + 1 for i, c in enumerate(cells)
                   if before and c.get("id") == before[-1]), 0)
        cells[at:at] = restored(gid)
        seen.add(gid)
    return cells, tampered, missing


def with_parameters(cells: list[dict], submitted, parameters: dict) -> list[dict]:
    """papermill's convention: an ``injected-parameters`` cell right after the learner
    cell tagged ``parameters`` (or first). Values are JSON data from the release's
    notebook metadata, so ``repr`` is valid Python."""
    if not parameters:
        return cells
    source = ("# Parameters injected by the autograder (the notebook's "
              "course.ci_parameters)\n" +
              "\n".join(f"{name} = {value!r}" for name, value in parameters.items()))
    tagged = [str(c.get("source", "")) for c in submitted.cells if c.get("cell_type") == "code"
              and "parameters" in (c.get("metadata", {}).get("tags") or [])]
    at = 0
    if tagged:
        at = next((i + 1 for i, c in enumerate(cells)
                   if c["kind"] == "learner" and c["source"] == tagged[0]), 0)
    return [*cells[:at], {"kind": "learner", "source": source}, *cells[at:]]


# ----------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------

def execute(settings: Settings, name: str, cells: list[dict], imports: dict,
            submission: Path, env_extra: dict, graded_stages: list[dict] = ()
            ) -> sandbox.Outcome:
    """One sandboxed run of the test process on ``cells``; ``graded_stages``: stage
    records of this submission its check cells may show instead of running the checker
    (``autograder.check_cells``)."""
    namespaces, identity = sandbox.mode_identity()
    uid = identity.checker if identity is not None else None
    limits = settings.sandbox_limits()
    sandbox.make_undumpable()  # this worker holds the hidden tests and the token
    with sandbox.SandboxDir(uid, limits.disk_mb) as box:
        prepare(box, settings, submission, checker_group=uid)
        env = dict(env_extra)
        if graded_stages:  # in the read-only course copy: the notebook reads, never writes
            shown = box.course / ".graded-stages"
            shown.mkdir(mode=0o755)
            if write_graded(shown, box.course, list(graded_stages)):
                env[REUSE_ENV] = str(shown)
        # the test process's HOME (the first writable); its learner process, another uid
        # where there is root, passes through to its own folders and no further
        work = box.writable("work", mode=0o711 if identity is not None else 0o700)
        nbdir = box.writable("notebooks")
        jobs = box.writable("job")
        job = jobs / f"{secrets.token_hex(8)}.json"
        job.write_text(json.dumps({
            "notebook_path": str(nbdir / Path(name).name), "imports": imports,
            "cell_timeout": settings.cell_timeout, "max_output": limits.max_output_bytes,
            "cells": [{**c, "index": i} for i, c in enumerate(cells)]}))
        job.chmod(0o400)
        box.give(job)
        token = secrets.token_hex(16)
        read_fd, write_fd = os.pipe()
        env.update({protocol.ENV_TOKEN: token,
                    protocol.ENV_STAGE: json.dumps({"job": str(job)}),
                    "IPYTHONDIR": str(work / ".ipython"),
                    "COURSE_RECORDS": str(work / "records"),
                    # the course's provenance store defaults to <course>/build, read-only
                    "MLFLOW_TRACKING_URI": f"sqlite:///{work / 'records' / 'mlflow.db'}"})
        jail = sandbox.Jail(box, [sys.executable, *TEST_PROCESS], uid=uid, cwd=nbdir,
                            env=env, limits=limits, namespaces=namespaces,
                            result_fd=write_fd, hide=[Path(p) for p in settings.hide],
                            identity=identity)
        return sandbox.run(jail, (read_fd, write_fd), token=token)


# ----------------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------------

def _status_of_error(ename: str) -> str:
    if "MemoryError" in ename:
        return "memory"
    if ename == "TestTimeout":
        return "timeout"
    return "fail" if ename in ("AssertionError", "NotImplementedError") else "error"


def _stopped(outcome: sandbox.Outcome, done: dict | None) -> tuple[str, str, str]:
    """(status, reason, message) for the cells a run did not reach."""
    if outcome.killed_for:
        status, reason = outcomes.killed(outcome.killed_for)
        return status, reason, f"not run: the notebook was stopped ({reason})"
    why = (done or {}).get("dead_why")
    if why:
        status, reason = outcomes.status_of(why if why.startswith(outcomes.SIGNAL)
                                            or why in outcomes.TABLE else "kernel-died")
        return status, reason, f"not run: the learner process was stopped ({reason})"
    if outcome.returncode is not None and outcome.returncode < 0:
        reason = f"signal:{outcome.signal_name}"
        return "crash", reason, f"not run: the grading process ended ({reason})"
    return "crash", "exit-before-results", "not run: the grading process ended early"


def score(key: dict, cells: list[dict], outcome: sandbox.Outcome, hidden: bool,
          cell_timeout: float) -> list[dict]:
    results = [m["result"] for m in outcome.channel if m.get("kind") == protocol.CHECK
               and isinstance(m.get("result"), dict)]
    done = next((m for m in outcome.channel if m.get("kind") == protocol.DONE), None)
    violations = [m for m in outcome.channel if m.get("kind") == protocol.VIOLATION]
    parts = {(r.get("cell"), r.get("part")): r for r in results}
    where = {c["id"]: i for i, c in enumerate(cells) if c["kind"] == "test"}
    questions = []
    for gid in key["order"]:
        if gid not in key["tests"]:
            continue
        test, index = key["tests"][gid], where.get(gid)
        q = {"id": gid, "points": 0.0, "max_points": test["points"], "status": "pass",
             "message": "", "hidden_failed": False,
             "has_hidden": bool(hidden and test["hidden"])}
        wanted = ["visible", "hidden"] if q["has_hidden"] else ["visible"]
        partial = None
        for part in wanted:
            r = parts.get((index, part))
            if r is None:
                status, reason, message = _stopped(outcome, done)
                q.update(status=status, reason=reason, message=message)
                break
            if r.get("error"):
                ename, evalue = (str(x) for x in r["error"][:2])
                status = _status_of_error(ename)
                if status == "timeout":
                    q.update(reason="cell-timeout")
                if part == "hidden":  # the text stays with the instructor
                    q.update(status=status, hidden_failed=True, message="a hidden check failed",
                             instructor_message=f"{ename}: {evalue}"[:500])
                elif ename == "NotImplementedError":
                    q.update(status=status, message="not yet: a solution cell still raises "
                             f"NotImplementedError {evalue}".rstrip()[:500])
                elif status == "timeout":
                    q.update(status=status, message=f"the test ran past {cell_timeout:g} s")
                else:
                    q.update(status=status, message=f"{ename}: {evalue}"[:500])
                break
            partial = r.get("partial")
        if q["status"] == "pass":
            q["points"] = test["points"] if type(partial) not in (int, float) else \
                min(max(float(partial), 0.0), test["points"])
        if violations:
            v = violations[0]
            q.update(points=0.0, status="error", reason=str(v.get("what", "violation")),
                     hidden_failed=False,
                     message=f"sandbox: {v.get('detail', '')} was refused"[:500]
                     if v.get("what") != protocol.TAMPER_EVIDENCE else
                     f"tamper evidence: {v.get('detail', '')}"[:500])
        questions.append(q)
    return questions


def borrowed_helpers(notebook: str, key: dict, cells: list[dict],
                     questions: list[dict]) -> None:
    """Score 0 each question whose test reads a notebook exercise that uses the course's
    own helper for its answer (``coursekit.checking.forbidden.NOTEBOOK_RULES``), read from
    the cells that ran before the test (``coursekit.notebook.borrowed``); the message names
    the helper. Other questions keep what they earned."""
    from coursekit.checking.forbidden import NOTEBOOK_RULES
    from coursekit.notebook import borrowed
    from coursekit.notebook.free_names import free_names
    exercises = NOTEBOOK_RULES.get(notebook, {})
    where = {c["id"]: i for i, c in enumerate(cells) if c["kind"] == "test"}
    for q in questions if exercises else ():
        test, index = key["tests"].get(q["id"]), where.get(q["id"])
        if test is None or index is None:
            continue
        read = set(free_names(test["cell"]["source"])) | set(free_names(test["hidden"] or ""))
        sources = [c["source"] for c in cells[:index] if c["kind"] in ("learner", "course")]
        for exercise in sorted(read & set(exercises)):
            found = borrowed.findings(notebook, exercise, sources)
            if found:
                q.update(points=0.0, status="fail", reason="borrowed-helper",
                         hidden_failed=False,
                         message=borrowed.message(exercise, found)[:500])
                break


def run_summary(cells: list[dict], outcome: sandbox.Outcome) -> dict:
    """For the instructor: where a run stopped and why, and the cells that ran past their
    limit (each with its first line)."""
    def head(i) -> str:
        cell = cells[i] if isinstance(i, int) and 0 <= i < len(cells) else {}
        first = ((cell.get("source") or cell.get("visible") or "").strip().splitlines()
                 or [""])[0]
        return f"cell {i} ({cell.get('kind', '?')}): {first[:120]}"
    done = next((m for m in outcome.channel if m.get("kind") == protocol.DONE), {})
    slow = [m["result"]["cell"] for m in outcome.channel if m.get("kind") == protocol.CHECK
            and isinstance(m.get("result"), dict) and m["result"].get("timeout")]
    out = {"cell_timeouts": [head(i) for i in slow]}
    if done.get("dead_why"):
        out["stopped"] = {"why": done["dead_why"], "at": head(done.get("dead_at")),
                          "detail": str(done.get("dead_detail", ""))[:300]}
    return out


def stopped_by_a_clock(outcome: sandbox.Outcome, summary: dict) -> bool:
    """A cell or test past its limit, or the whole run past its wall clock: what a machine
    too busy to run the notebook (another learner's loop, other jobs) also causes. With
    the whole run under ``run_cpu.STARVED_SHARE`` of a core, the record is starved, not
    the learner's (``autograder.grade.undecided``): a cell that loops keeps a core busy
    and is not; one that sleeps looks starved and costs one more run. The share is the
    whole run's (the sandbox counts its processes together), so a notebook that worked
    hard before a starved cell reads as not starved: the rule errs towards the
    learner's timeout, never towards retrying a loop."""
    return (outcome.killed_for == "wall-clock" or bool(summary.get("cell_timeouts"))
            or summary.get("stopped", {}).get("why") == "cell-timeout")


def check_cell_outputs(cells: list[dict], outcome: sandbox.Outcome) -> list[dict]:
    """The check cells that ran, as nbformat-like cells with their printed text (what
    ``check_cells.answered`` counts)."""
    texts = {m["result"].get("cell"): m["result"].get("text", "") for m in outcome.channel
             if m.get("kind") == protocol.CHECK and isinstance(m.get("result"), dict)
             and m["result"].get("part") in ("learner", "course")}
    return [{"cell_type": "code", "source": c["source"],
             "outputs": [{"output_type": "stream", "text": texts[i]}]}
            for i, c in enumerate(cells) if i in texts and "run_check(" in c["source"]]


def grade_notebook(settings: Settings, name: str, key: dict, student: str,
                   submission: Path, seed: int | None, hidden: bool = True,
                   graded_stages: list[dict] = ()) -> dict:
    """One gradebook record for ``name`` (``notebooks/<file>.ipynb``); ``graded_stages``:
    this submission's graded stage records its check cells show."""
    import nbformat
    max_points = sum(t["points"] for t in key["tests"].values())
    record = {"student": student, "item": name, "kind": "notebook", "notebook": name,
              "status": "missing", "reason": "", "message": "", "points": 0.0,
              "max_points": max_points, "manual": key["manual"], "tampered": [],
              "restored_missing": [], "questions": [], "checks": []}

    def every_question(status: str, message: str) -> list[dict]:
        return [{"id": g, "status": status, "points": 0.0, "max_points": t["points"],
                 "message": message} for g, t in key["tests"].items()]

    path = plain_path(submission, name)  # no link on the way (another submission's)
    if path is None or not path.is_file():
        record.update(reason="missing-file", message=f"the submission has no {name}")
        record["questions"] = every_question("missing", "")
        return record
    try:
        check_notebook_file(path)  # bounded work before nbformat reads it all
    except NotebookRefused as refused:
        status, reason = outcomes.status_of(refused.reason)
        record.update(status=status, reason=reason, message=refused.message[:500])
        record["questions"] = every_question(status, refused.message[:200])
        return record
    try:
        submitted = nbformat.read(str(path), as_version=4)
    except Exception as err:  # noqa: BLE001 - not JSON, not a notebook
        record.update(status="error", reason="unreadable-notebook",
                      message=f"{name} is not a readable notebook: {err}"[:500])
        record["questions"] = every_question("error", "notebook unreadable")
        return record
    cells, tampered, missing = plan(submitted, key, hidden)
    params = key.get("ci_parameters") if settings.nb_sizes == "ci" else {}
    cells = with_parameters(cells, submitted, params or {})
    env = {"COURSE_CHECK_SEED": str(seed)} if seed is not None else {}
    started = time.monotonic()
    outcome = execute(settings, name, cells, key.get("imports", {}), submission, env,
                      graded_stages)
    wall = time.monotonic() - started
    questions = score(key, cells, outcome, hidden, settings.cell_timeout)
    borrowed_helpers(Path(name).stem, key, cells, questions)
    statuses = [q["status"] for q in questions]
    status = "pass" if all(s == "pass" for s in statuses) else next(
        (s for s in ("crash", "timeout", "memory", "error", "fail") if s in statuses), "fail")
    reason = next((q.get("reason", "") for q in questions if q["status"] == status), "")
    message = next((q["message"] for q in questions if q.get("reason") == reason and reason
                    and reason in outcomes.REFUSALS), "")
    summary = run_summary(cells, outcome)
    if status != "pass" and stopped_by_a_clock(outcome, summary) and run_cpu.starved(
            outcome.cpu_s, wall):
        reason = outcomes.STARVED  # graded once more at the end of the batch
    record.update(status=status, reason=reason, questions=questions, tampered=tampered,
                  restored_missing=missing, points=sum(q["points"] for q in questions),
                  message=message, isolation=sandbox.isolation(),
                  not_applied=sandbox.not_applied(),
                  learner_isolation=protocol.LEARNER_PROCESS,
                  wall_s=round(wall, 3),
                  check_cells=answered(check_cell_outputs(cells, outcome)),
                  peak_memory_mb=round(outcome.peak_memory_mb, 1),
                  cpu_s=None if outcome.cpu_s is None else round(outcome.cpu_s, 3),
                  run=summary, stderr_tail=outcome.stderr[-3000:])
    record["checks"] = record["questions"]
    return record

"""Grade one notebook of one submission: restore the test cells, run it in a sandboxed
kernel with nbclient, score each autograded question.

* Test and locked cells are restored from the source (matched by nbgrader ``grade_id``,
  compared by nbgrader's checksum): an edited test cell is put back and reported as
  ``tampered`` in the record; a deleted one is put back in its place.
* Hidden tests (``### BEGIN HIDDEN TESTS``) exist only in the source; at grading time
  each test cell's hidden part runs as its own cell right after the visible part, so
  the feedback can say "a hidden check failed" without showing it.
* The kernel runs through ``autograder/jail.py`` like a checker stage (namespaces,
  throw-away uid, limits) and talks to nbclient over Unix sockets (``ipc`` transport:
  the kernel has no network). Per-cell timeout from nbclient, per-notebook wall clock,
  memory, process and output limits from ``sandbox.Monitor``.
* Before and after each graded cell ``autograder.tamper`` asks the kernel, outside any
  cell, whether an earlier cell changed what a test cell relies on (transformers, event
  callbacks, exception handlers, trace functions, builtins, testing functions, and the
  library functions and classes the test cells call: the key's ``watch``); a finding
  scores the whole notebook 0, ``error``/``tamper-notebook``.
* The kernel's MLflow store and ``COURSE_RECORDS`` live in the run's own folder (the
  course copy is read-only; notebook 00 logs its runs).
* nbclient and nbformat are imported once per worker process; CI parameters go in as
  papermill's ``injected-parameters`` cell, written here (importing papermill costs
  seconds per worker).

Question statuses: pass, fail (an AssertionError, or NotImplementedError: "not yet"),
error (any other exception; ``tamper-notebook`` when a graded cell could have been forged),
timeout (the cell ran past its limit), memory, crash (the kernel died before or while
running it), missing (no notebook in the submission). A kernel that dies costs only the
questions not yet run; the ones before keep their points.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import os
import subprocess
import threading
import time
import warnings
from pathlib import Path

from autograder import outcomes, sandbox
from autograder.check_cells import answered
from autograder.nblimits import NotebookRefused, check_notebook_file
from autograder.submissions import plain_path
from autograder.tamper import Probe, builtins_used
from autograder.workspace import Settings, prepare
from coursekit.compat.optional import Absent
from coursekit.notebook.reuse import REUSE_ENV, write_graded

_nbclient = None
_QUIET = logging.getLogger("autograder.nbclient")  # statuses say what happened
_QUIET.setLevel(logging.CRITICAL)
# No history database (a write per cell, nothing to grade), fd-level output to the
# kernel's own stdout/stderr, where the watchdog caps it.
KERNEL_ARGS = ["--HistoryManager.enabled=False", "--IPKernelApp.capture_fd_output=False"]


def _imports():
    """nbclient/nbformat/jupyter_client, once per process."""
    global _nbclient
    if _nbclient is None:
        import nbclient
        import nbformat
        from jupyter_client.manager import AsyncKernelManager as KernelManager
        _nbclient = (nbclient, nbformat, KernelManager)
    return _nbclient


def warm_up() -> None:
    """Import what notebook grading needs (called once when a worker starts)."""
    _imports()
    from autograder.nbsource import nbgrader_utils
    with contextlib.suppress(Absent):  # no nbgrader here: grading a notebook says so
        nbgrader_utils()


# ----------------------------------------------------------------------------------
# Restoring test cells
# ----------------------------------------------------------------------------------

def restore(submitted, key: dict, hidden: bool) -> tuple[list, list[str], list[str]]:
    """Graded cell list from a submitted notebook. Returns (cells, tampered grade_ids,
    restored-missing grade_ids). A hidden part becomes its own cell tagged
    ``metadata.autograder.hidden_of = <grade_id>``."""
    from autograder.nbsource import nbgrader_utils
    _, nbformat, _ = _imports()
    utils = nbgrader_utils()
    protected = {**key["locked"], **key["tests"]}
    cells, seen, tampered = [], set(), []

    def restored(gid: str) -> list:
        entry = protected[gid]
        out = [nbformat.from_dict(copy.deepcopy(entry["cell"]))]
        if hidden and gid in key["tests"] and key["tests"][gid]["hidden"]:
            out.append(nbformat.v4.new_code_cell(
                key["tests"][gid]["hidden"],
                metadata={"autograder": {"hidden_of": gid}, "tags": ["raises-exception"]}))
        return out

    for cell in submitted.cells:
        cell = copy.deepcopy(cell)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
        meta = cell.get("metadata", {})
        gid = meta.get("nbgrader", {}).get("grade_id")
        if gid in protected and gid not in seen:
            seen.add(gid)
            try:
                same = utils.compute_checksum(cell) == protected[gid]["checksum"]
            except Exception:  # noqa: BLE001 - broken metadata counts as an edit
                same = False
            if not same:
                tampered.append(gid)
            cells.extend(restored(gid))
            continue
        if "nbgrader" in meta and (gid in seen or meta["nbgrader"].get("grade")
                                   and gid not in protected):
            meta.pop("nbgrader")  # a copy or an invented question grades nothing
        cells.append(cell)
    missing = [g for g in key["order"] if g not in seen]
    for gid in missing:  # back where the source had it: after its predecessor
        pos = key["order"].index(gid)
        before = [g for g in key["order"][:pos] if g in seen]
        at = 0
        if before:
            for i, c in enumerate(cells):
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == before[-1]:
                    at = i + 1
                    while at < len(cells) and cells[at].get("metadata", {}).get(
                            "autograder", {}).get("hidden_of") == before[-1]:
                        at += 1
        cells[at:at] = restored(gid)
        seen.add(gid)
    return cells, tampered, missing


# ----------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------

def with_parameters(cells: list, parameters: dict) -> list:
    """papermill's convention without importing papermill (seconds per worker): an
    ``injected-parameters`` cell right after the cell tagged ``parameters`` (or first).
    Values are JSON data from notebook metadata, so ``repr`` is valid Python."""
    _, nbformat, _ = _imports()
    cell = nbformat.v4.new_code_cell(
        "# Parameters injected by the autograder (the notebook's course.ci_parameters)\n" +
        "\n".join(f"{name} = {value!r}" for name, value in parameters.items()),
        metadata={"tags": ["injected-parameters"]})
    at = next((i + 1 for i, c in enumerate(cells)
               if "parameters" in c.get("metadata", {}).get("tags", [])), 0)
    return [*cells[:at], cell, *cells[at:]]


def _client_class():
    nbclient, _, _ = _imports()

    class GradingClient(nbclient.NotebookClient):
        """Records each cell's execute reply; stops storing output past a cap."""

        def __init__(self, *a, max_output: int, on_flood, **kw):
            super().__init__(*a, **kw)
            self.replies: dict[int, dict] = {}
            self.max_output, self.on_flood, self.output_bytes = max_output, on_flood, 0
            self.on_cell_executed = self._record

        async def _async_poll_kernel_alive(self) -> None:
            """nbclient's liveness poll, every 0.1 s instead of 1 s: a kernel killed
            by the watchdog or by a crash is noticed at once (nbclient 0.11 API)."""
            import asyncio

            from nbclient.exceptions import DeadKernelError
            while True:
                await asyncio.sleep(0.1)
                try:
                    await self._async_check_alive()
                except DeadKernelError:
                    self.task_poll_for_reply.cancel()
                    return

        def _record(self, cell, cell_index, execute_reply):
            self.replies[cell_index] = execute_reply.get("content", {})

        def output(self, outs, msg, display_id, cell_index):
            size = len(json.dumps(msg.get("content", {}), default=str))
            self.output_bytes += size
            if self.output_bytes > self.max_output:
                self.on_flood()
                return None
            return super().output(outs, msg, display_id, cell_index)

    return GradingClient


def _kernel_manager_class():
    _, _, KernelManager = _imports()
    from jupyter_client.asynchronous import AsyncKernelClient

    class NoHeartbeatClient(AsyncKernelClient):
        """The watchdog already knows when the kernel dies; a heartbeat thread would
        only cost seconds at shutdown (its REQ socket waits for a dead peer)."""

        def start_channels(self, shell=True, iopub=True, stdin=True, hb=True, control=True):
            super().start_channels(shell, iopub, stdin, False, control)

    class JailedKernelManager(KernelManager):
        """A kernel started through the jail, on Unix sockets in the sandbox."""
        jail_factory = None  # callable(cmd) -> launcher argv

        def format_kernel_cmd(self, extra_arguments=None):
            import sys
            uid = getattr(self, "sandbox_uid", None)
            if uid is not None:
                os.chown(self.connection_file, uid, uid)
            cmd = [sys.executable, "-m", "ipykernel_launcher", "-f", self.connection_file,
                   *KERNEL_ARGS]
            return self.jail_factory(cmd)

    JailedKernelManager.quiet_client = NoHeartbeatClient

    return JailedKernelManager


def execute(settings: Settings, cells: list, submission: Path, parameters: dict,
            env_extra: dict, watch: list[str] = (), graded_stages: list[dict] = ()) -> dict:
    """Run ``cells`` in a sandboxed kernel; ``watch``: what the tamper probe watches
    besides its own list (the grading key's ``watch``); ``graded_stages``: stage records
    of this submission its check cells may show instead of running the checker
    (``autograder.check_cells``). Returns {"cells", "replies", "timeouts", "dead_at",
    "outcome", "flood"}."""
    _, nbformat, _ = _imports()
    namespaces, uid = sandbox.mode_settings()
    limits = settings.sandbox_limits()
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    if parameters:
        nb.cells = with_parameters(nb.cells, parameters)
    state = {"timeouts": [], "dead_at": None, "flood": False, "tamper": {}}
    with sandbox.SandboxDir(uid) as box:
        prepare(box, settings, submission, learner_runs_it=True)
        if graded_stages:  # in the read-only course copy: the kernel reads, never writes
            shown = box.course / ".graded-stages"
            shown.mkdir(mode=0o755)
            if write_graded(shown, box.course, list(graded_stages)):
                env_extra = {**env_extra, REUSE_ENV: str(shown)}
        home = box.writable("work")
        nbdir = box.writable("notebooks")
        # the kernel's sockets and connection file, in a folder of the root-owned course
        # copy: the grader (root, outside the jail) removes files there at shutdown, and
        # a kernel that could swap the folder for a link (it was under the kernel's own
        # home) had it delete files of its choosing on the grader's machine
        kernel_dir = box.writable(".kernel")
        read_fd, write_fd = os.pipe()
        env = {"IPYTHONDIR": str(home / ".ipython"), "JUPYTER_RUNTIME_DIR": str(kernel_dir),
               "JUPYTER_DATA_DIR": str(home / ".jupyter"),
               "COURSE_RECORDS": str(home / "records"),
               # the course's provenance store defaults to <course>/build, read-only here
               "MLFLOW_TRACKING_URI": f"sqlite:///{home / 'records' / 'mlflow.db'}",
               **env_extra}

        def jail_argv(cmd):
            return sandbox.Jail(box, cmd, uid=uid, cwd=nbdir, env=env, limits=limits,
                                namespaces=namespaces, result_fd=write_fd,
                                hide=[Path(p) for p in settings.hide]).argv()

        km = _kernel_manager_class()(kernel_name="python3", transport="ipc",
                                     ip=str(kernel_dir / "k"))
        km.connection_file = str(kernel_dir / "connection.json")
        km.jail_factory = jail_argv
        km.client_factory = km.quiet_client
        km.sandbox_uid = uid
        monitor_box: dict = {}

        def flood():
            state["flood"] = True
            if "monitor" in monitor_box:
                monitor_box["monitor"].stop()

        client = _client_class()(nb, km=km, timeout=int(settings.cell_timeout),
                                 allow_errors=True, interrupt_on_timeout=False,
                                 shutdown_kernel="immediate", log=_QUIET,
                                 startup_timeout=120, kernel_name="python3",
                                 max_output=limits.max_output_bytes, on_flood=flood)
        monitor_thread = None
        out_fds: dict[str, int] = {}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # pass_fds vs close_fds
                with client.setup_kernel(cleanup_kc=True, cwd=str(nbdir),
                                         stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, pass_fds=(write_fd,)):
                    os.close(write_fd)
                    write_fd = -1
                    proc = km.provisioner.process
                    out_fds = {"stdout": os.dup(proc.stdout.fileno()),
                               "stderr": os.dup(proc.stderr.fileno())}
                    monitor = sandbox.Monitor(proc, limits, channel_fd=read_fd, token="-",
                                              out_fds=out_fds)
                    monitor_box["monitor"] = monitor
                    monitor_thread = threading.Thread(target=monitor.run, daemon=True)
                    monitor_thread.start()
                    _run_cells(client, nb, state, monitor, watch)
        except Exception as err:  # noqa: BLE001 - a kernel that never started
            state.setdefault("error", f"{type(err).__name__}: {err}")
        finally:
            if write_fd >= 0:
                os.close(write_fd)
            if "monitor" in monitor_box:
                monitor_box["monitor"].stop()
            if monitor_thread is not None:
                monitor_thread.join(timeout=30)
            os.close(read_fd)
            for fd in out_fds.values():
                os.close(fd)
        outcome = monitor_box["monitor"].outcome if "monitor" in monitor_box else None
    return {"cells": nb.cells, "replies": client.replies, "outcome": outcome, **state}


def _graded(cell) -> bool:
    meta = cell.get("metadata", {})
    return cell.cell_type == "code" and bool(meta.get("nbgrader", {}).get("grade")
                                             or meta.get("autograder", {}).get("hidden_of"))


def _probed(probe, cell, index: int, when: str, state, monitor) -> bool:
    """Ask the tamper probe around a graded cell; False when the kernel is gone."""
    from jupyter_core.utils import run_sync
    found = probe.check(builtins_used(cell.source), arm=when == "before the cell")
    if found and (monitor.outcome.killed_for or state["flood"]
                  or not run_sync(probe.client.km.is_alive)()):
        return False  # no answer from a dead kernel: its cells say why, not tampering
    if found:
        state["tamper"].setdefault(index, []).extend(f"{when}: {f}" for f in found)
    return True


def _run_cells(client, nb, state, monitor, watch=()) -> None:
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    probe = Probe(client)
    probe.start(watch)
    state["probe_error"] = probe.error
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        graded = _graded(cell)
        if graded and not _probed(probe, cell, index, "before the cell", state, monitor):
            state["dead_at"] = index
            return
        try:
            client.execute_cell(cell, index)
        except CellTimeoutError:
            state["timeouts"].append(index)
            if not _recovered(client, index):
                state["dead_at"] = index + 1
                state["dead_why"] = outcomes.status_of("cell-timeout")
                monitor.stop()
                return
        except DeadKernelError:
            state["dead_at"] = index
            return
        if monitor.outcome.killed_for or state["flood"]:
            state["dead_at"] = index + 1
            return
        if graded and index not in state["timeouts"] and not _probed(
                probe, cell, index, "after the cell", state, monitor):
            state["dead_at"] = index + 1
            return


def _recovered(client, index: int) -> bool:
    """After a cell timeout: interrupt, then check the kernel answers a trivial cell."""
    _, nbformat, _ = _imports()
    from jupyter_core.utils import run_sync
    try:
        run_sync(client.km.interrupt_kernel)()
        probe = nbformat.v4.new_code_cell("pass")
        # The reply is the proof of life; the probe's iopub status can be the message a
        # cancelled read swallowed, so do not wait the default 4 s for it.
        saved = client.timeout, client.iopub_timeout
        client.timeout, client.iopub_timeout = 15, 1
        try:  # stored in the timed-out cell's slot; its status is already recorded
            client.execute_cell(probe, index)
        finally:
            client.timeout, client.iopub_timeout = saved
        return True
    except Exception:  # noqa: BLE001 - timed out again, died, or worse: not recovered
        return False


# ----------------------------------------------------------------------------------
# Scoring
# ----------------------------------------------------------------------------------

def _error_of(cell, reply: dict | None) -> tuple[str, str] | None:
    """(ename, evalue) when the cell raised, else None."""
    if reply and reply.get("status") == "error":
        return reply.get("ename", "Error"), str(reply.get("evalue", ""))
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            return out.get("ename", "Error"), str(out.get("evalue", ""))
    return None


def _partial(cell, max_points: float) -> float | None:
    """nbgrader's partial credit: a number shown as the test cell's result."""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "execute_result":
            try:
                value = float(out["data"]["text/plain"])
            except (KeyError, TypeError, ValueError):
                return None
            return min(max(value, 0.0), max_points)
    return None


def score(key: dict, run: dict, tampered: list[str], limits: sandbox.Limits,
          cell_timeout: float) -> list[dict]:
    cells, replies = run["cells"], run["replies"]
    outcome = run["outcome"]
    dead_at = run.get("dead_at")
    if run.get("error") and dead_at is None:
        dead_at = 0
    killed = outcome.killed_for if outcome else None
    violations = [m for m in (outcome.channel if outcome else []) if m.get("kind") == "violation"]
    if run.get("flood"):
        dead_status, dead_reason = outcomes.status_of("output-limit")
    elif run.get("dead_why"):
        dead_status, dead_reason = run["dead_why"]
    else:
        dead_status, dead_reason = outcomes.killed(killed)
    where = {}
    for i, cell in enumerate(cells):
        meta = cell.get("metadata", {})
        gid = meta.get("nbgrader", {}).get("grade_id")
        if gid in key["tests"]:
            where.setdefault(gid, {})["visible"] = i
        hid = meta.get("autograder", {}).get("hidden_of")
        if hid:
            where.setdefault(hid, {})["hidden"] = i
    questions = []
    for gid in key["order"]:
        if gid not in key["tests"]:
            continue
        test = key["tests"][gid]
        q = {"id": gid, "points": 0.0, "max_points": test["points"], "status": "pass",
             "message": "", "hidden_failed": False, "tampered": gid in tampered,
             "has_hidden": "hidden" in where.get(gid, {})}
        parts = [("visible", where[gid]["visible"])]
        if "hidden" in where[gid]:
            parts.append(("hidden", where[gid]["hidden"]))
        for part, index in parts:
            if dead_at is not None and index >= dead_at and index not in run["timeouts"]:
                q.update(status=dead_status, reason=dead_reason,
                         message=f"not run: the kernel was stopped ({dead_reason})")
                break
            if index in run["timeouts"]:
                q.update(status="timeout", reason="cell-timeout",
                         message=f"the cell ran past {cell_timeout:g} s")
                break
            err = _error_of(cells[index], replies.get(index))
            if err:
                ename, evalue = err
                status = "memory" if "MemoryError" in ename else (
                    "fail" if ename in ("AssertionError", "NotImplementedError")
                    else "error")
                if part == "hidden":  # the text stays with the instructor
                    q.update(status=status, hidden_failed=True,
                             message="a hidden check failed",
                             instructor_message=f"{ename}: {evalue}"[:500])
                elif ename == "NotImplementedError":
                    q.update(status=status, message="not yet: a solution cell still raises "
                             f"NotImplementedError {evalue}".rstrip()[:500])
                else:
                    q.update(status=status, message=f"{ename}: {evalue}"[:500])
                break
        if q["status"] == "pass":
            last = cells[parts[-1][1]]
            partial = _partial(last, test["points"])
            q["points"] = test["points"] if partial is None else partial
        if violations:
            q.update(points=0.0, status="error", reason=violations[0]["what"],
                     message=f"sandbox: {violations[0]['detail']} was refused")
        questions.append(q)
    if not violations:
        _tampering(questions, where, run.get("tamper", {}))
    return questions


def _tampering(questions: list[dict], where: dict, tamper: dict) -> None:
    """A graded cell that earlier cells could have forged grades nothing: every question
    of the notebook scores 0, ``error``/``tamper-notebook``, naming what was found."""
    if not tamper:
        return
    status, reason = outcomes.status_of("tamper-notebook")
    first = tamper[min(tamper)][0]
    for q in questions:
        found = [f for part in where.get(q["id"], {}).values() for f in tamper.get(part, [])]
        text = found[0] if found else f"found around another graded cell: {first}"
        q.update(points=0.0, status=status, reason=reason, hidden_failed=False,
                 message=f"tampering with the grader {text}"[:500])


def grade_notebook(settings: Settings, name: str, key: dict, student: str,
                   submission: Path, seed: int | None, hidden: bool = True,
                   graded_stages: list[dict] = ()) -> dict:
    """One gradebook record for ``name`` (``notebooks/<file>.ipynb``); ``graded_stages``:
    this submission's graded stage records its check cells show."""
    _, nbformat, _ = _imports()
    max_points = sum(t["points"] for t in key["tests"].values())
    record = {"student": student, "item": name, "kind": "notebook", "notebook": name,
              "status": "missing", "reason": "", "message": "", "points": 0.0,
              "max_points": max_points, "manual": key["manual"], "tampered": [],
              "restored_missing": [], "questions": [], "checks": []}
    path = plain_path(submission, name)  # no link on the way (another submission's)
    if path is None or not path.is_file():
        record.update(reason="missing-file", message=f"the submission has no {name}")
        record["questions"] = [{"id": g, "status": "missing", "points": 0.0,
                                "max_points": t["points"], "message": ""}
                               for g, t in key["tests"].items()]
        return record
    try:
        check_notebook_file(path)  # bounded work before nbformat reads it all
    except NotebookRefused as refused:
        status, reason = outcomes.status_of(refused.reason)
        record.update(status=status, reason=reason, message=refused.message[:500])
        record["questions"] = [{"id": g, "status": status, "points": 0.0,
                                "max_points": t["points"], "message": refused.message[:200]}
                               for g, t in key["tests"].items()]
        return record
    try:
        submitted = nbformat.read(str(path), as_version=4)
    except Exception as err:  # noqa: BLE001 - not JSON, not a notebook
        record.update(status="error", reason="unreadable-notebook",
                      message=f"{name} is not a readable notebook: {err}"[:500])
        record["questions"] = [{"id": g, "status": "error", "points": 0.0,
                                "max_points": t["points"], "message": "notebook unreadable"}
                               for g, t in key["tests"].items()]
        return record
    cells, tampered, missing = restore(submitted, key, hidden)
    params = key.get("ci_parameters") if settings.nb_sizes == "ci" else {}
    env = {"COURSE_CHECK_SEED": str(seed)} if seed is not None else {}
    started = time.monotonic()
    run = execute(settings, cells, submission, params or {}, env, key.get("watch", []),
                  graded_stages)
    wall = time.monotonic() - started
    questions = score(key, run, tampered, settings.sandbox_limits(), settings.cell_timeout)
    statuses = [q["status"] for q in questions]
    outcome = run["outcome"]
    status = "pass" if all(s == "pass" for s in statuses) else next(
        (s for s in ("crash", "timeout", "memory", "error", "fail") if s in statuses), "fail")
    reason = next((q.get("reason", "") for q in questions if q["status"] == status), "")
    message = run.get("error", "") or (questions[0]["message"] if reason == "tamper-notebook"
                                       and questions else "")
    stderr = (outcome.stderr[-3000:] if outcome else "")
    if run.get("probe_error"):  # a grader problem, for the instructor
        stderr = f"{run['probe_error']}\n{stderr}"
    record.update(status=status, reason=reason, questions=questions, tampered=tampered,
                  restored_missing=missing, points=sum(q["points"] for q in questions),
                  message=message, isolation=sandbox.isolation(),
                  not_applied=sandbox.not_applied(),
                  wall_s=round(wall, 3), check_cells=answered(run["cells"]),
                  peak_memory_mb=round(outcome.peak_memory_mb, 1) if outcome else 0.0,
                  stderr_tail=stderr)
    record["checks"] = record["questions"]
    return record

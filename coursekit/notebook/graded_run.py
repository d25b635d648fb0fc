"""The grader's test process for one notebook: the learner's cells run in a learner
process, every graded test cell runs here, and this process never runs learner code.

    python -P -m coursekit.notebook.graded_run      (in the grader's jail)

``AG_STAGE`` names the job file (written by ``autograder.notebook``; read, then deleted,
before the learner process starts): the cells in the handed-in notebook's order, each a
learner cell (its source, run in the learner process), a course cell (a locked cell's
source from the release, run there too) or a test (its visible and hidden parts from the
release's grading key, run here); the names the course binds by import; the limits.

The learner process is ``bridge.LearnerProcess`` on the notebook's path
(``coursekit.notebook.cell_server`` serves it), so it starts the way every learner
process does: in the grader's jail as root, as a uid of its own. A test part's free
names are read from it just before the part runs (``coursekit.notebook.remote_names``);
a hidden part's source never leaves this process. The cells sent so far are what a
test's ``refuse_borrowed`` reads (``coursekit.notebook.borrowed``; read, never run
here). Each result goes down the grader's result channel as it is known (``check``
messages: {"cell", "part", ...}), then ``done``; a learner process that dies, runs past
a limit or floods its output stops the run there, and the grader scores what was not run
by why.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import sys
import threading
from pathlib import Path

GRACE_S = 10.0         # past its own limit, a cell that did not stop is killed
TEST_TEXT_CAP = 2000   # characters of a test part's error text sent to the grader


class TestTimeout(Exception):
    pass


class Stopped(BaseException):
    """The learner process is gone, was stopped, or broke the bridge's protocol: ``why``
    is the grader's reason. A BaseException, so a test's own ``except Exception`` cannot
    swallow it."""

    def __init__(self, why: str, detail: str):
        super().__init__(detail)
        self.why, self.detail = why, detail


class Learner:
    """The notebook's learner process behind ``bridge.LearnerProcess``'s ``request``, with
    a watchdog: a request that runs past its deadline kills the process (under the
    grader's spawner, its uid's processes). Never restarted: a fresh process would hold
    none of the notebook's state."""

    def __init__(self, path: Path, limit_s: float):
        from coursekit.checking.bridge import LearnerProcess
        shared_folder(path.parent)
        self.process = LearnerProcess(path)
        self.process.start()
        self.limit_s = limit_s
        self.killed_for = ""

    def request(self, kind: str, fn: str = "", args=(), kwargs=None, **extra):
        from coursekit.checking.errors import LearnerProcessDied, TamperEvidence
        if self.process.proc is None:
            raise Stopped(self.killed_for or "kernel-died", "the learner process is gone")
        timer = threading.Timer(self.limit_s + GRACE_S, self.kill, ("cell-timeout",))
        timer.start()
        try:
            return self.process.request(kind, fn, args, kwargs, **extra)
        except LearnerProcessDied as err:
            raise self.stopped(err) from None
        except TamperEvidence as err:
            raise Stopped("tamper-evidence", str(err)[:300]) from None
        finally:
            timer.cancel()

    def kill(self, why: str) -> None:
        self.killed_for = self.killed_for or why
        proc = self.process.proc
        if proc is not None:
            proc.kill()

    def stopped(self, err) -> Stopped:
        if self.killed_for:
            return Stopped(self.killed_for, f"the learner process was stopped "
                                            f"({self.killed_for})")
        cause = getattr(err, "cause", "") or "exit"
        why = f"signal:{cause}" if cause.startswith("SIG") else "kernel-died"
        return Stopped(why, str(err))

    def close(self) -> None:
        if self.process.proc is not None:
            self.process.close()


def shared_folder(path: Path) -> None:
    """The notebook's folder made one a learner process of another uid may work in: the
    grader's spawner (``coursekit.checking.spawn.learner_folder``, where it exists) runs
    learner processes as a uid the checker never shares; without one it is one user."""
    import importlib
    try:
        spawn = importlib.import_module("coursekit.checking.spawn")
    except ImportError:
        return
    spawn.learner_folder(path)


def alarm(limit_s: float):
    from coursekit.notebook.headless import time_limit
    return time_limit(limit_s, lambda: TestTimeout(f"the test ran past its {limit_s:g} s "
                                                   "limit"))


def split_last(source: str, name: str):
    """(code for every statement, code for the last expression or None): a notebook
    shows a cell's last expression, and nbgrader reads a number shown there as partial
    credit."""
    tree = ast.parse(source, filename=name)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    return compile(tree, name, "exec"), (compile(last, name, "eval") if last else None)


def run_part(source: str, name: str, namespace: dict, limit_s: float, names) -> dict:
    """Resolve ``names`` into ``namespace`` (``names()``: the values), then run one test
    part here. {"error": [ename, evalue] or None, "partial": a number shown last}."""
    out: dict = {"error": None, "partial": None}
    try:
        with contextlib.redirect_stdout(io.StringIO()), alarm(limit_s):
            namespace.update(names())
            body, last = split_last(source, name)
            exec(body, namespace)  # noqa: S102 - the course's own test, never the learner's
            value = eval(last, namespace) if last else None  # noqa: S307
        if type(value) in (int, float):
            out["partial"] = value
    except TestTimeout as err:
        out.update(error=["TestTimeout", str(err)], timeout=True)
    except Exception as err:  # noqa: BLE001 - the test's verdict, any exception
        out["error"] = [type(err).__name__, str(err)[:TEST_TEXT_CAP]]
    return out


class GradedRun:
    def __init__(self, job: dict, send):
        self.job, self.send = job, send
        self.limit = float(job["cell_timeout"])
        self.max_output = int(job["max_output"])
        self.output = 0
        self.learner = Learner(Path(job["notebook_path"]), self.limit)
        self.sources: list[str] = []  # the cells sent so far: what a test's scan reads

    def cell(self, entry: dict) -> None:
        self.sources.append(entry["source"])
        answer = self.learner.request("cell", source=entry["source"], timeout=self.limit)
        self.output += int(answer.get("output_bytes") or 0)
        text = str(answer.get("text") or "") if "run_check(" in entry["source"] else ""
        error = answer.get("error")
        self.send("check", result={
            "cell": entry["index"], "part": entry["kind"], "timeout": bool(answer["timeout"]),
            "error": [str(error["ename"]), str(error["evalue"])] if error else None,
            "text": text})
        if self.output > self.max_output:
            self.learner.kill("output-limit")
            raise Stopped("output-limit", "the notebook printed more than "
                          f"{self.max_output >> 20} MB")

    def test(self, entry: dict) -> None:
        from coursekit.notebook import borrowed
        from coursekit.notebook.free_names import free_names
        from coursekit.notebook.remote_names import resolve
        borrowed.CELLS_RUN[:] = self.sources  # refuse_borrowed in a test reads them
        namespace: dict = {"__name__": "__graded_test__"}
        for part in ("visible", "hidden"):
            source = entry.get(part)
            if source is None:
                continue
            names = [n for n in free_names(source) if n not in namespace]
            result = run_part(source, f"<{entry['id']} {part}>", namespace, self.limit,
                              lambda names=names: resolve(self.learner, names,
                                                          self.job["imports"]))
            self.send("check", result={"cell": entry["index"], "part": part,
                                       "id": entry["id"], **result})
            if result.get("timeout"):  # it may have stopped inside a call: out of step
                self.learner.kill("cell-timeout")
                raise Stopped("cell-timeout", "a test ran past its limit")
            if result["error"]:
                return

    def run(self) -> dict:
        """Every cell in order; {} when all ran, else where and why the run stopped."""
        for entry in self.job["cells"]:
            try:
                (self.test if entry["kind"] == "test" else self.cell)(entry)
            except Stopped as stop:
                if stop.why == "tamper-evidence":
                    self.send("violation", what=stop.why, detail=stop.detail)
                return {"dead_at": entry["index"], "dead_why": stop.why,
                        "dead_detail": stop.detail}
        return {}


def main() -> int:
    from coursekit.checking.wire import protocol
    protocol.pin_checker_to_cpu()  # the accelerator is the learner's; tests run on the CPU
    config = json.loads(os.environ.pop(protocol.ENV_STAGE))
    send = protocol.open_channel(os.environ)
    job_path = Path(config["job"])
    job = json.loads(job_path.read_text())
    job_path.unlink()  # before the learner process exists: the hidden parts live here only
    from coursekit.checking import bridge
    bridge.VIOLATION_SINKS.append(lambda what, detail: send(
        protocol.VIOLATION, what=what, detail=detail))
    run = GradedRun(job, send)
    try:
        ended = run.run()
    finally:
        run.learner.close()
    send(protocol.DONE, learner_isolation=protocol.LEARNER_PROCESS, **ended)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

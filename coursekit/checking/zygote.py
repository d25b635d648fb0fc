"""Learner processes forked from a warm process instead of started cold, for a checker
process that starts hundreds of them (the planted-bug runner, ``coursekit.checking.planted``).

A cold learner process spends its first second or so of CPU importing JAX before it
reads the learner's file, a large share of a planted run's cost (measured: docs/ci.md).
A zygote is one process started cold with
the learner environment; it imports what every learner process imports before the
learner's file (JAX, NumPy, the checker modules ``learner_server`` snapshots) and, on
each request, forks a learner process that then runs ``learner_server`` exactly as a
cold one does, on the pipes, stdout and stderr the checker hands it.

What keeps a forked learner process equal to a cold one:

* the zygote is started with the learner environment itself and serves only requests
  for that environment (``Zygotes`` keeps one per environment; any other starts cold);
* it never starts a JAX backend (no devices, no compiled program, no thread pool);
* each learner process is forked twice so that it is re-parented to the checker
  (``PR_SET_CHILD_SUBREAPER``): the checker waits for it, reads its exit status and
  kills it as it would its own child (``Adopted``), and its parent pid is the checker's;
* in the learner process: every descriptor but stdio and the two bridge pipes closed,
  the checker's working folder, dumpable again (as after an exec), NumPy's global
  random state drawn afresh (Python's ``random`` redraws at fork by itself).

What differs: the hash seed of ``str`` (one per zygote, not per process) and the
interpreter's start-up flags; a run that sets ``PYTHONHASHSEED`` gets a zygote of its
own, since its environment differs. The grader and ``check.py`` start learner processes
cold: they start one or two per checker process, where a zygote saves nothing.

    python -m coursekit.checking.zygote CONTROL_FD       (started by ``Zygote``)
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path

from coursekit import procctl

MAX_ZYGOTES = 3  # environments kept warm at once (a planted batch uses one or two)


# -- the checker's side ----------------------------------------------------------------
class Adopted:
    """A learner process forked by a zygote and re-parented to this process: the part of
    ``subprocess.Popen``'s interface the bridge uses (pid, returncode, poll, wait, kill,
    send_signal), on ``os.waitpid`` as for a child of our own."""

    def __init__(self, pid: int):
        self.pid, self.returncode = pid, None
        self.args = ["learner process", str(pid)]

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                done, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: its status is lost
                self.returncode = -signal.SIGKILL
                return self.returncode
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.poll() is None:
                try:
                    _, status = os.waitpid(self.pid, 0)
                    self.returncode = os.waitstatus_to_exitcode(status)
                except ChildProcessError:
                    self.returncode = -signal.SIGKILL
            return self.returncode
        deadline = time.monotonic() + timeout
        while self.poll() is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(min(0.005, left))
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # not yet reaped, so the pid is still this process's
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


class Zygote:
    """One warm process for one learner environment."""

    def __init__(self, env: dict, cwd: Path | str):
        procctl.become_subreaper()  # its grandchildren become ours
        self.env = dict(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.control = ours
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "coursekit.checking.zygote", str(theirs.fileno())],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=True, pass_fds=(theirs.fileno(),), env=self.env, cwd=cwd)
        theirs.close()

    def fork(self, impl_path: Path, read_fd: int, write_fd: int) -> Adopted | None:
        """A learner process for ``impl_path`` on these bridge pipes (and this process's
        current stdout and stderr), or None when the zygote cannot give one."""
        request = json.dumps({"impl": str(impl_path), "cwd": os.getcwd()}).encode()
        try:
            socket.send_fds(self.control, [request], [read_fd, write_fd, 1, 2])
            ready, _, _ = select.select([self.control], [], [], 60)
            answer = json.loads(self.control.recv(4096) or b"{}") if ready else {}
        except (OSError, ValueError):
            answer = {}
        pid = answer.get("pid")
        if isinstance(pid, int) and pid > 0:
            return Adopted(pid)
        if not answer:  # no answer in time: a late one would pair with the next request
            self.proc.kill()
        return None

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        self.control.close()  # the zygote's read ends: it exits
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Zygotes:
    """The bridge's ``FORK_FROM``: a zygote per learner environment asked for twice (a
    one-off environment, such as a fresh process's own ``PYTHONHASHSEED``, starts cold:
    a zygote would cost as much), the least recently used closed beyond ``MAX_ZYGOTES``;
    ``None`` (the bridge starts the process cold) when none can fork it."""

    def __init__(self, *, fork_first: bool = False):
        """``fork_first``: a zygote from an environment's first ask (tests)."""
        self.warm: dict[tuple, Zygote] = {}
        self.asked: set[tuple] = set()
        self.fork_first = fork_first
        self.forked = self.cold = 0

    def __call__(self, env: dict, impl_path: Path, read_fd: int, write_fd: int):
        key = tuple(sorted(env.items()))
        zygote = self.warm.pop(key, None)
        if zygote is not None and not zygote.alive():
            zygote.close()
            zygote = None
        if zygote is None and key not in self.asked and not self.fork_first:
            self.asked.add(key)
            self.cold += 1
            return None
        if zygote is None:
            while len(self.warm) >= MAX_ZYGOTES:
                self.warm.pop(next(iter(self.warm))).close()
            zygote = Zygote(env, os.getcwd())
        self.warm[key] = zygote  # the most recently used last
        proc = zygote.fork(impl_path, read_fd, write_fd)
        if proc is None:
            self.cold += 1
        else:
            self.forked += 1
        return proc

    def close(self) -> None:
        for zygote in self.warm.values():
            zygote.close()
        self.warm.clear()


# -- the zygote's side -------------------------------------------------------------------
def _warm() -> None:
    """What every learner process imports before the learner's file; no backend starts."""
    import jax  # noqa: F401
    import jax.numpy  # noqa: F401
    import numpy  # noqa: F401

    import coursekit.checking.bridge  # noqa: F401
    import coursekit.checking.codec  # noqa: F401
    import coursekit.checking.contract  # noqa: F401
    import coursekit.checking.learner  # noqa: F401
    import coursekit.checking.learner_server  # noqa: F401
    import coursekit.checking.probes  # noqa: F401
    import coursekit.checking.values  # noqa: F401
    import coursekit.measure.timing  # noqa: F401


def _become_learner(request: dict, fds: list[int]) -> None:
    """In the forked process: the descriptors, folder and state of a cold start, then
    ``learner_server`` as ``python -m`` runs it. Never returns."""
    code = 1
    try:
        read_fd, write_fd, out, err = fds
        os.dup2(out, 1)
        os.dup2(err, 2)
        keep = {0, 1, 2, read_fd, write_fd}
        for name in os.listdir("/proc/self/fd"):
            if int(name) not in keep:
                try:
                    os.close(int(name))
                except OSError:
                    pass
        os.chdir(request["cwd"])
        procctl.set_dumpable(True)  # as an exec leaves it; the zygote is not dumpable
        import numpy
        numpy.random.seed()  # fresh entropy, as a cold process's import draws
        from coursekit.checking import learner_server
        from coursekit.checking.wire import protocol
        os.environ[protocol.ENV_BRIDGE] = f"{read_fd},{write_fd}"
        sys.argv = [learner_server.__file__, str(request["impl"])]
        learner_server.main()  # ends with os._exit(0)
        code = 0
    except SystemExit as done:  # as the interpreter maps it: None is 0, text is 1
        code = 0 if done.code is None else done.code if isinstance(done.code, int) else 1
    except BaseException:  # noqa: BLE001 - printed as an uncaught exception would be
        import traceback
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _fork_learner(request: dict, fds: list[int]) -> int:
    """Fork twice (the middle process exits at once, so the learner process is
    re-parented to the checker, its subreaper); the learner process's pid, or 0."""
    report_r, report_w = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # NumPy's idle BLAS thread
        middle = os.fork()
    if middle == 0:
        try:
            os.close(report_r)
            learner = os.fork()
            if learner == 0:
                os.close(report_w)
                _become_learner(request, fds)
            os.write(report_w, str(learner).encode())
        finally:
            os._exit(0)
    os.close(report_w)
    with os.fdopen(report_r, "rb") as report:
        text = report.read()
    os.waitpid(middle, 0)
    return int(text) if text.isdigit() else 0


def main() -> None:
    procctl.die_with_parent()  # never outlive the checker
    procctl.set_dumpable(False)  # a learner process (same user) cannot rewrite us
    control = socket.socket(fileno=int(sys.argv[1]))
    _warm()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, 4)
        except OSError:
            return
        if not message:
            return  # the checker closed its end
        pid = 0
        try:
            if len(fds) == 4:
                pid = _fork_learner(json.loads(message), fds)
        except (OSError, ValueError):
            pid = 0
        finally:
            for fd in fds:
                os.close(fd)
        control.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    main()

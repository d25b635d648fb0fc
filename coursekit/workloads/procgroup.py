"""Run learner code in separate processes that always end, with a named reason.

Several JAX processes that belong together (``jax.distributed``) fail badly on their own:
an exception in one leaves the others waiting in a collective or in the shutdown barrier
for ``shutdown_timeout_seconds`` (300 s by default), then they abort in C++. Here each
process runs in its own session (process group), its output goes to files (no pipe can
fill up and block it), and:

* when one process fails, the others are stopped at once (SIGKILL to their groups);
* when the wall-clock limit passes, every process still running is stopped;
* the result names each process's fate: ok, failed (exit status), timeout, or stopped.

``start`` / ``wait_for_file`` / ``kill`` drive one process by hand (start it, wait until
it reaches a point, SIGKILL it), for recovery experiments.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.checking import spawn
from coursekit.checking.wire import protocol


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Proc:
    """One started process; stdout and stderr go to files under ``logdir``."""
    name: str
    popen: subprocess.Popen
    stdout_path: Path
    stderr_path: Path
    started: float = field(default_factory=time.perf_counter)
    status: str = "running"  # running | ok | failed | timeout | stopped
    returncode: int | None = None
    duration_s: float = 0.0

    def stdout(self) -> str:
        return _read(self.stdout_path)

    def stderr(self) -> str:
        return _read(self.stderr_path)

    def poll(self) -> int | None:
        rc = self.popen.poll()
        if rc is not None and self.status == "running":
            self.returncode = rc
            self.status = "ok" if rc == 0 else "failed"
            self.duration_s = time.perf_counter() - self.started
        return rc


def _read(path: Path, limit: int = 200_000) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-limit:].decode("utf-8", "replace")


def start(cmd: list[str], logdir: str | Path, name: str = "proc", *,
          env: dict | None = None, cwd: str | Path | None = None) -> Proc:
    """Start ``cmd`` (learner code) in a new session (its own process group): in the
    grader's jail, as a learner process of its own (``coursekit.checking.spawn``: its own
    uid, home and caches; the run's network, which a ``jax.distributed`` group shares)."""
    logdir = Path(logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    out, err = logdir / f"{name}.stdout", logdir / f"{name}.stderr"
    with open(out, "wb") as fo, open(err, "wb") as fe:
        popen = spawn.launch(cmd, protocol.learner_environment(
            os.environ if env is None else env), stdout=fo, stderr=fe, cwd=cwd,
            network="run", new_session=True)
    return Proc(name, popen, out, err)


def _kill_group(popen) -> None:
    if hasattr(popen, "kill_group"):  # a spawned learner process: the spawner kills
        popen.kill_group()
        return
    try:
        os.killpg(popen.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill(proc: Proc, status: str = "stopped") -> None:
    """SIGKILL the process's whole group (no handler can run) and reap it."""
    if proc.popen.poll() is None:
        _kill_group(proc.popen)
        try:
            proc.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        proc.status = status
        proc.returncode = proc.popen.returncode
        proc.duration_s = time.perf_counter() - proc.started
    else:
        proc.poll()
        # Children left in the group (a forked helper) go too.
        if not hasattr(proc.popen, "kill_group"):  # (the spawner killed those already)
            _kill_group(proc.popen)


def wait_for_file(proc: Proc, path: str | Path, timeout: float,
                  poll_s: float = 0.02) -> str:
    """Wait until ``path`` exists ("reached"), the process ends first ("exited"), or
    ``timeout`` seconds pass ("timeout"). Existence only: a caller that reads the file
    has the process write it elsewhere and rename it into place."""
    path = Path(path)
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        if path.exists():
            return "reached"
        if proc.poll() is not None:
            return "reached" if path.exists() else "exited"
        time.sleep(poll_s)
    return "timeout"


def wait_all(procs: list[Proc], timeout: float, *, grace_s: float = 1.0,
             poll_s: float = 0.05) -> list[Proc]:
    """Wait for every process. The first failure stops the others after ``grace_s``
    (time for their own error report); the deadline stops all that still run."""
    deadline = time.perf_counter() + timeout
    failed_at = None
    while True:
        running = [p for p in procs if p.poll() is None]
        if not running:
            break
        now = time.perf_counter()
        if failed_at is None and any(p.status == "failed" for p in procs):
            failed_at = now
        if failed_at is not None and now - failed_at >= grace_s:
            for p in running:
                kill(p, "stopped")
            break
        if now >= deadline:
            for p in running:
                kill(p, "timeout")
            break
        time.sleep(poll_s)
    return procs


def run_group(cmds: list[list[str]], logdir: str | Path, timeout: float, *,
              envs: list[dict] | None = None, cwd: str | Path | None = None,
              names: list[str] | None = None) -> list[Proc]:
    """Start every command at once and ``wait_all`` for them."""
    names = names or [f"process{i}" for i in range(len(cmds))]
    envs = envs or [None] * len(cmds)
    procs = [start(c, logdir, n, env=e, cwd=cwd) for c, n, e in zip(cmds, names, envs)]
    return wait_all(procs, timeout)


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def describe(procs: list[Proc], timeout: float | None = None) -> str:
    """One sentence per process: what happened to it, with its last stderr line when it
    failed. Empty string when every process ended with status 0."""
    if all(p.status == "ok" for p in procs):
        return ""
    parts = []
    for p in procs:
        if p.status == "ok":
            parts.append(f"{p.name} finished")
        elif p.status == "failed":
            tail = last_line(p.stderr())
            parts.append(f"{p.name} exited with status {p.returncode} after "
                         f"{p.duration_s:.1f} s" + (f" ({tail[:300]})" if tail else ""))
        elif p.status == "timeout":
            limit = f" within {timeout:g} s" if timeout else ""
            parts.append(f"{p.name} did not finish{limit} and was killed (a hang, or "
                         f"waiting for a process that hung)")
        else:
            parts.append(f"{p.name} was stopped because another process failed")
    return "; ".join(parts)

"""Starting learner processes: through the grader's spawner when the checker runs in its
jail as root, as plain child processes everywhere else.

In a graded run the checker process runs as the run's checker uid and cannot change uid;
the jail's init (root) holds the other end of the socket named by ``AG_SPAWNER`` and
starts each learner process as a uid of its own, with its own HOME, temporary and cache
folders and namespaces (``autograder/jail_spawner.py`` says what each gets). ``launch``
is what the bridge, the training runs and any other learner process go through:

    proc = launch(argv, env, pass_fds=(r, w), stdout=f, network="own")
    proc.pid, proc.poll(), proc.wait(timeout), proc.kill()    # as subprocess.Popen

Folders a learner process must write (a checkpoint, a trace, a records folder) are made
with ``learner_folder``: the learner group may write there, and the checker, in that
group, reads what it finds. Everything else the checker writes, learner processes can read
at most. Without a spawner (``check.py`` from a terminal or a notebook, the ``limits``
fallback, a machine where the grader is not root) there is one user for everything:
``launch`` starts a child as ``subprocess.Popen`` does and ``learner_folder`` is a plain
folder.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from coursekit.checking.wire import protocol

_LOCK = threading.Lock()
_CONTROL: list[socket.socket] = []


def available() -> bool:
    """Whether this process runs under the grader's spawner."""
    return bool(_CONTROL) or protocol.ENV_SPAWNER in os.environ


def _control() -> socket.socket:
    if not _CONTROL:  # the variable leaves the environment: no child ever inherits it
        fd = int(os.environ.pop(protocol.ENV_SPAWNER))
        _CONTROL.append(socket.socket(fileno=fd))
    return _CONTROL[0]


def learner_group() -> int | None:
    """The run's learner group (the checker's one supplementary group), under a spawner."""
    groups = [g for g in os.getgroups() if g != os.getgid()]
    return groups[0] if available() and groups else None


def learner_folder(path: Path | str) -> Path:
    """``path`` made (if need be) as a folder every learner process of the run may write
    into: the learner group's, mode 2770 (files made there stay the group's, which the
    checker reads through). Outside the grader: a plain folder."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    group = learner_group()
    if group is not None:
        os.chown(path, -1, group)
        os.chmod(path, 0o2770)
    return path


def share_tree(path: Path | str) -> Path:
    """A folder tree handed to learner processes to write in (a copy of a checkpoint the
    checker made, a checkpoint a killed learner process left): what the checker made in
    it becomes the learner group's and group-writable, as ``learner_folder``; what learner
    processes made is theirs already (their group, umask 002)."""
    path = Path(path)
    group = learner_group()
    if group is None:
        return path
    me = os.getuid()
    for here, _dirs, files in os.walk(path):
        if os.stat(here).st_uid == me:
            learner_folder(here)
        for name in files:
            file = Path(here) / name
            info = file.lstat()
            if info.st_uid == me and not file.is_symlink():
                os.chown(file, -1, group)
                os.chmod(file, info.st_mode | 0o060)
    return path


class SpawnError(OSError):
    """The spawner refused or could not start the process (the reason, from it)."""


class Spawned:
    """A learner process started by the spawner: the part of ``subprocess.Popen`` the
    checker uses. Its status socket owns the process: closing it kills the process."""

    def __init__(self, pid: int, status: socket.socket, args: list[str]):
        self.pid, self.args, self.returncode = pid, args, None
        self._status = status

    def _read(self, timeout: float | None) -> int | None:
        if self.returncode is not None:
            return self.returncode
        ready, _, _ = select.select([self._status], [], [], timeout)
        if not ready:
            return None
        try:
            data = self._status.recv(4096)
        except OSError:
            data = b""
        return self._exited(data)

    def _exited(self, data: bytes) -> int:
        try:
            self.returncode = int(json.loads(data)["exit"]) if data else -signal.SIGKILL
        except (ValueError, KeyError, TypeError):
            self.returncode = -signal.SIGKILL
        self._status.close()
        return self.returncode

    def hold(self, how: str) -> None:
        """Hold the learner still while the checker measures (the spawner signals, as
        root: the checker may not): ``"stop"`` stops every process of its uid (SIGSTOP),
        ``"run"`` lets this process run again and keeps the rest stopped, ``"free"`` lets
        every one run. Returns once the spawner has done it (it answers ``held``)."""
        if self.returncode is not None:
            return
        try:
            self._status.send(f"hold:{how}".encode())
            ready, _, _ = select.select([self._status], [], [], 30)
            data = self._status.recv(4096) if ready else b"held"
        except OSError:
            return
        if data != b"held":  # it ended first: that was its exit status
            self._exited(data)

    def poll(self) -> int | None:
        return self._read(0)

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            code = self._read(left)
            if code is not None:
                return code
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)

    def send_signal(self, sig: int) -> None:
        """SIGKILL: the spawner kills every process of its uid; another signal goes to
        its process group (the spawner sends it: the checker may not)."""
        if self.returncode is None:
            message = b"kill" if sig == signal.SIGKILL else f"signal:{int(sig)}".encode()
            try:
                self._status.send(message)
            except OSError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    kill_group = kill  # its uid's processes are its group, wherever they went


def launch(argv: list[str], env: dict, *, cwd: str | Path | None = None,
           stdin=None, stdout=None, stderr=None, pass_fds=(), network: str = "own",
           new_session: bool = False):
    """Start a learner process with ``env`` (a learner environment:
    ``protocol.learner_environment``, plus the bridge's own variable if any): through
    the spawner when there is one (``network``: "own", a loopback of its
    own; "run", the run's, for processes that talk to each other; always a session of its
    own), else ``subprocess.Popen`` (``new_session`` as ``start_new_session``).
    ``stdin``/``stdout``/``stderr``: a file object or fd (default: /dev/null in, this
    process's out and err). The ``pass_fds`` keep their numbers."""
    if not available():
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL if stdin is None else stdin,
                                stdout=stdout, stderr=stderr, close_fds=True,
                                pass_fds=tuple(pass_fds), env=env, cwd=cwd,
                                start_new_session=new_session)
    devnull = os.open(os.devnull, os.O_RDONLY) if stdin is None else None
    try:
        fds = [_fileno(stdin, devnull), _fileno(stdout, 1), _fileno(stderr, 2), *pass_fds]
        request = {"op": "spawn", "argv": [str(a) for a in argv], "env": env,
                   "cwd": None if cwd is None else str(cwd), "network": network,
                   "fds": [0, 1, 2, *pass_fds]}
        with _LOCK:
            control = _control()
            socket.send_fds(control, [json.dumps(request).encode()], fds)
            msg, got, _, _ = socket.recv_fds(control, 1 << 16, 1)
    finally:
        if devnull is not None:
            os.close(devnull)
    reply = json.loads(msg or b"{}")
    if "pid" not in reply or len(got) != 1:
        for fd in got:
            os.close(fd)
        raise SpawnError(reply.get("error") or "the spawner did not answer")
    return Spawned(int(reply["pid"]), socket.socket(fileno=got[0]), list(argv))


def _fileno(stream, default: int) -> int:
    if stream is None:
        return default
    return stream if isinstance(stream, int) else stream.fileno()

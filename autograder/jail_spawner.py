"""The learner-process spawner: the jail's init (root inside the run's namespaces) starts
every learner process on the checker's request, as a uid of its own.

The checker runs as the run's checker uid and cannot change uid, so it asks: it holds one
end of a ``SOCK_SEQPACKET`` socket pair (its fd number in ``AG_SPAWNER``). A request is one
JSON message with the descriptors it hands over (``SCM_RIGHTS``):

    {"op": "spawn", "argv": [...], "env": {...}, "cwd": PATH or null,
     "fds": [target fd for each descriptor sent], "network": "own" | "run"}

The answer is ``{"pid": N}`` with one descriptor, the process's status socket, or
``{"error": "..."}``. The spawner writes ``{"exit": CODE}`` there once it has reaped the
process (CODE as ``subprocess`` gives it: negative for a signal) and closes it; the
checker writes ``kill`` there to have it (every process of its uid) killed,
``signal:N`` to have signal N sent to its process group (a kernel's interrupt), or
``hold:stop|run|free`` to have every process of its uid stopped, this one alone run
again, or all run (the bridge holds a learner still between its calls, so the load its
other processes make never reaches the checker's measurements; the spawner answers
``held``). Closing the status socket first kills the process too (the handle owns it).

Each learner process gets, before it execs:

* the next unused uid of the run's block (``autograder.uids``), the run's learner group,
  no supplementary groups; when it ends, every process of that uid is killed (a daemon it
  left cannot serve a later process);
* its own HOME, TMPDIR, XDG cache/config/data folders and MPLCONFIGDIR, under an
  unguessable name in a folder nobody but root can list, owned by its uid, mode 0700; the
  checker's compilation-cache variables are dropped; its guard may write there;
* its own mount and IPC namespaces (a private /dev/shm and /dev/pts; SysV and POSIX IPC
  of its own)
  and, with ``"network": "own"``, its own loopback-only network (no abstract socket or
  localhost port of another process); ``"run"`` keeps the run's network (processes of
  one ``jax.distributed`` group talk over it);
* its own session (process group), resource limits, an empty session keyring and no key
  syscalls (``jail_keys``), no new privileges, a parent-death signal, and umask 002:
  in the folders the checker shares with learner processes (the learner group's, setgid)
  what one learner process leaves the next may change (a run resumed from a checkpoint).

Standard library only; loaded by ``autograder/jail.py`` from this folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import secrets
import select
import signal
import socket
import time

import jail_keys

from coursekit import procctl

RLIMITS = {"DATA": resource.RLIMIT_DATA, "FSIZE": resource.RLIMIT_FSIZE,
           "CORE": resource.RLIMIT_CORE, "NPROC": resource.RLIMIT_NPROC,
           "NOFILE": resource.RLIMIT_NOFILE}


def kill_uid(uid: int) -> None:
    """SIGKILL every process of ``uid``, wherever it went (``signal_uid``)."""
    signal_uid(uid, signal.SIGKILL)


def signal_uid(uid: int, sig: int) -> None:
    """Send ``sig`` to every process of ``uid`` at once: a helper that becomes ``uid`` and
    signals -1 (the kernel's own rule for who may signal whom). One system call reaches
    them all: the kernel walks its process list under the lock a fork needs to add a
    process to it, and a fork in flight passes the signal on to its child, so a process
    that forks and exits all the time (a new pid at each turn) cannot slip past it."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, sig)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def pids_of(uid: int) -> list[int]:
    """Every process of ``uid`` in this (the jail's) PID namespace."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid == uid:
                    found.append(int(name))
            except OSError:
                pass  # gone meanwhile
    return found


STOPPED_STATES = frozenset("TtZXx")  # stopped, traced, or gone (a zombie runs nothing)
SETTLE_S = 1.0


def hold(uid: int, pid: int, how: str) -> None:
    """While the checker measures, a learner process's other processes hold still, so
    the load they make cannot turn its FAIL into "inconclusive": ``stop`` stops every
    process of ``uid`` at once (``signal_uid``; a scan of /proc then a signal to each pid
    missed a spinner that forks and exits faster than the scan: its new pid came after
    the scan) and returns once each is seen stopped; ``run`` continues ``pid`` alone
    (between calls nothing of ``uid`` ran, so nothing new exists); ``free`` continues
    them all."""
    if how == "run":
        _signal(pid, signal.SIGCONT)
    elif how == "free":
        signal_uid(uid, signal.SIGCONT)
    elif how == "stop":
        signal_uid(uid, signal.SIGSTOP)
        settled(uid)


def settled(uid: int, within_s: float = SETTLE_S) -> bool:
    """Whether every thread of every process of ``uid`` is stopped (or gone) within
    ``within_s``: a stop signal is pending at once, and taken when each thread next
    leaves the kernel (a thread busy on another core, at its next tick)."""
    deadline = time.monotonic() + within_s
    while True:
        running = [p for p in pids_of(uid) if not _all_stopped(p)]
        if not running:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


def _all_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        state = raw[raw.rfind(b")") + 2:raw.rfind(b")") + 3].decode("ascii", "replace")
        if state not in STOPPED_STATES:
            return False
    return True


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


class Spawner:
    """Serves the checker's requests until the checker exits."""

    def __init__(self, cfg: dict, isolate):
        """``isolate(own_network)``: in a new child, its own mount/IPC(/network)
        namespaces with a private /dev/shm (from jail.py)."""
        self.cfg, self.isolate = cfg, isolate
        self.next_uid, self.last_uid = cfg["uids"]
        self.first_uid = self.next_uid
        self.control, self.command_end = socket.socketpair(socket.AF_UNIX,
                                                           socket.SOCK_SEQPACKET)
        self.children: dict[int, list] = {}   # pid -> [status socket or None, uid]

    # -- the checker's side of the pair -----------------------------------------------
    def give_to_command(self, env: dict) -> None:
        """In the forked command, before exec: keep our end of the pair for it."""
        self.control.close()
        os.set_inheritable(self.command_end.fileno(), True)
        env[self.cfg["fd_env"]] = str(self.command_end.fileno())

    # -- serving ------------------------------------------------------------------------
    def serve(self, command: int) -> int:
        """Run until the command (pid ``command``) exits; its wait status."""
        self.command_end.close()
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.set_wakeup_fd(wake_w)
        while True:
            for pid, status in self._reap():
                if pid == command:
                    return status
                if pid in self.children:
                    self._ended(pid, status)
            socks = [s for s, _ in self.children.values() if s is not None]
            if self.control is not None:
                socks.append(self.control)
            try:
                ready, _, _ = select.select([*socks, wake_r], [], [], 1.0)
            except InterruptedError:
                continue
            if wake_r in ready:
                try:
                    while os.read(wake_r, 256):
                        pass
                except BlockingIOError:
                    pass
            for sock in ready:
                if sock is self.control:
                    self._request()
                elif sock is not wake_r:
                    self._status_message(sock)

    def stop_all(self) -> None:
        """Kill every learner process of the run (without a PID namespace to end them)."""
        for uid in range(self.first_uid, self.next_uid):
            kill_uid(uid)

    @staticmethod
    def _reap() -> list[tuple[int, int]]:
        out = []
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return out
            if pid == 0:
                return out
            out.append((pid, status))

    def _ended(self, pid: int, status: int) -> None:
        sock, uid = self.children.pop(pid)
        if sock is not None:
            try:
                sock.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
            except OSError:
                pass
            sock.close()
        kill_uid(uid)

    def _status_message(self, sock: socket.socket) -> None:
        pid = next(p for p, (s, _) in self.children.items() if s is sock)
        try:
            data = sock.recv(64)
        except OSError:
            data = b""
        if data.startswith(b"hold:"):  # the checker measures: hold the learner still
            hold(self.children[pid][1], pid, data[5:].decode("ascii", "replace"))
            try:
                sock.send(b"held")
            except OSError:
                pass
            return
        if data.startswith(b"signal:"):  # (an interrupt for a kernel, say)
            try:
                os.killpg(pid, int(data[7:]))
            except (OSError, ValueError):
                pass
            return
        if data and data != b"kill":
            return
        if not data:  # the checker let go of its handle: the process goes with it
            sock.close()
            self.children[pid][0] = None
        kill_uid(self.children[pid][1])

    def _request(self) -> None:
        try:
            msg, fds, _, _ = socket.recv_fds(self.control, 1 << 20, 16)
        except OSError:
            msg, fds = b"", []
        if not msg:
            for fd in fds:
                os.close(fd)
            self.control.close()
            self.control = None  # the checker closed its end: no more processes
            return
        give: list[int] = []
        try:
            request = json.loads(msg)
            if request.get("op") != "spawn":
                raise ValueError(f"unknown request {request.get('op')!r}")
            pid, status_end = self._spawn(request, fds)
            reply, give = {"pid": pid}, [status_end.fileno()]
        except Exception as err:  # noqa: BLE001 - the checker is told, init lives on
            reply, status_end = {"error": f"{type(err).__name__}: {err}"}, None
        finally:
            for fd in fds:
                os.close(fd)
        try:
            socket.send_fds(self.control, [json.dumps(reply).encode()], give)
        except OSError:
            pass
        if status_end is not None:
            status_end.close()

    # -- one learner process ----------------------------------------------------------
    def _private_folders(self, uid: int) -> tuple[str, dict]:
        """Its own folders; the environment variables that name them."""
        cfg = self.cfg
        root = os.path.join(cfg["area"], secrets.token_hex(12))
        os.mkdir(root, 0o700)
        os.chown(root, uid, cfg["gid"])
        names = {}
        for var, sub in cfg["home_env"].items():
            path = os.path.join(root, sub)
            if not os.path.isdir(path):
                os.mkdir(path, 0o700)
                os.chown(path, uid, cfg["gid"])
            names[var] = path
        return root, names

    def _environment(self, env: dict, root: str, names: dict) -> dict:
        env = {k: v for k, v in env.items() if k not in self.cfg["drop_env"]}
        env.update(names)
        env.update(USER="learner", LOGNAME="learner")
        guard = self.cfg.get("guard_env")
        if guard and env.get(guard):  # its own folders are writable for its guard too
            policy = json.loads(env[guard])
            policy["writable"] = [*policy.get("writable", []), root]
            env[guard] = json.dumps(policy)
        return env

    def _spawn(self, request: dict, fds: list[int]) -> tuple[int, socket.socket]:
        if self.next_uid > self.last_uid:
            raise RuntimeError("this run has no learner uid left")
        targets = [int(t) for t in request.get("fds", [])]
        if len(targets) != len(fds) or len(set(targets)) != len(targets):
            raise ValueError("one target number per descriptor sent")
        uid = self.next_uid
        self.next_uid += 1
        root, names = self._private_folders(uid)
        env = self._environment(dict(request.get("env") or {}), root, names)
        argv = [str(a) for a in request["argv"]]
        cwd = request.get("cwd") or names.get("HOME", root)
        own_network = request.get("network", "own") == "own"
        keep, give = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            self._become(uid, argv, env, cwd, fds, targets, own_network, err_w)
        os.close(err_w)
        with os.fdopen(err_r, "rb") as f:
            error = f.read()
        if error:
            os.waitpid(pid, 0)
            keep.close()
            give.close()
            raise RuntimeError(error.decode(errors="replace"))
        self.children[pid] = [keep, uid]
        return pid, give

    def _become(self, uid, argv, env, cwd, fds, targets, own_network, err_w) -> None:
        """In the forked child (root): confine, become ``uid``, exec. Never returns."""
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            os.setsid()
            floor = max([*targets, *fds, err_w, 2]) + 1
            err_w = fcntl.fcntl(err_w, fcntl.F_DUPFD_CLOEXEC, floor)
            moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, floor) for fd in fds]
            for src, dst in zip(moved, targets):
                os.dup2(src, dst)
            keep = {*targets, err_w}
            for name in os.listdir("/proc/self/fd"):
                if int(name) not in keep:
                    try:
                        os.close(int(name))
                    except OSError:
                        pass
            self.isolate(own_network)
            for name, value in self.cfg.get("rlimits", {}).items():
                resource.setrlimit(RLIMITS[name], (value, value))
            os.setgroups([])
            os.setgid(self.cfg["gid"])
            os.setuid(uid)
            jail_keys.no_keys()  # and no new privileges
            procctl.die_with_parent()
            os.chdir(cwd)
            os.umask(0o002)  # what one learner process leaves in a shared folder, the
            #                  next (another uid, the same group) may change or remove
            os.execve(argv[0], argv, env)
        except BaseException as err:  # noqa: BLE001 - reported to the checker by name
            try:
                os.write(err_w, f"cannot start {argv[:2]}: {type(err).__name__}: "
                                f"{err}".encode())
            finally:
                os._exit(127)

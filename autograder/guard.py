"""Installed as ``sitecustomize`` in every sandboxed Python (checker, kernel, and any
Python the submission starts): names what a submission tried, and refuses it.

The operating system is the real fence (``autograder.jail``: namespaces, a throw-away
uid, limits); this layer turns attempts into named reasons in the gradebook and is the
only fence where namespaces are unavailable. It uses audit hooks (PEP 578), which code
in the same interpreter cannot remove, though ctypes can step around them.

* reading a hidden path (the course folder with its solutions, the gradebook, other
  submissions) -> ``read-outside``; in a learner process of a stage run also reading, or
  linking to, a sealed reference program (``sealed`` in its policy: the file's suffix),
  by whatever path or link it is reached;
* writing, deleting or renaming outside the work folders -> ``write-outside``;
* connecting to anything but loopback or a Unix socket -> ``network``;
* a signal (``os.kill``, ``os.killpg``) to anything but itself or a process it started
  -> ``signal-outside`` (without a PID namespace the checker and the grader are in reach);
* replacing ``time.perf_counter`` (and the other clocks) or ``jax.block_until_ready``
  -> ``tamper-timing``: timing functions are read-only while grading.

Each attempt raises ``PermissionError`` where it happened and reports one JSON line
``{"kind": "violation", "what": ..., "detail": ...}`` on the result channel (its fd is in
``AG_POLICY``) or, failing that, as an ``AUTOGRADER-VIOLATION`` line on stderr. In a
learner process (``AG_GUARD``: the same policy without any fd) the refusals also wait in
``drain_violations()``, which the learner process sends to the checker over the bridge.
Names come from ``autograder_protocol`` (the sandbox's copy of ``coursekit/protocol.py``).
Standard library only; nothing here runs unless ``AG_POLICY`` or ``AG_GUARD`` is set.
"""

from __future__ import annotations

import json
import os
import sys
import types

try:  # copied next to this file in the sandbox; the package elsewhere
    import autograder_protocol as _protocol
except ImportError:
    from coursekit import protocol as _protocol

_POLICY = json.loads(os.environ.get(_protocol.ENV_POLICY) or
                     os.environ.get(_protocol.ENV_GUARD) or "null")
PROTECTED = _protocol.PROTECTED_TIMING
_pending: list = []  # (what, detail) not yet sent over the bridge (learner process)
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# event -> (index of a path argument, index of its dir_fd argument or None) pairs
_WRITE_EVENTS = {"os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),),
                 "os.rename": ((0, 2), (1, 3)), "os.link": ((1, 3),), "os.symlink": ((1, 2),),
                 "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.utime": ((0, 3),),
                 "os.truncate": ((0, None),), "shutil.rmtree": ((0, 1),)}
_NET_EVENTS = {"socket.connect", "socket.connect_ex", "socket.sendto", "socket.getaddrinfo",
               "socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"}
_LOCAL_HOSTS = {"127.0.0.1", "::1", "localhost", "0.0.0.0", "", None}
_reported: set = set()


def _report(what: str, detail: str) -> None:
    line = _protocol.violation_line(what, detail)
    key = (what, detail)
    if key in _reported:
        return
    _reported.add(key)
    _pending.append(key)
    fd = _POLICY.get("result_fd") if _POLICY else None
    try:
        if fd is None:
            raise OSError
        os.write(fd, line)
    except OSError:
        try:
            os.write(2, b"AUTOGRADER-VIOLATION " + line)
        except OSError:
            pass


def drain_violations() -> list:
    """The refusals since the last call, as (what, detail) pairs."""
    out = list(_pending)
    _pending.clear()
    return out


def _refuse(what: str, detail: str) -> None:
    _report(what, detail)
    trace = os.environ.get("AUTOGRADER_GUARD_TRACE")  # where a refusal came from
    if trace:
        import traceback
        text = f"AUTOGRADER-TRACE {what}: {detail}\n" + "".join(traceback.format_stack(limit=14))
        try:  # a path: appended there (it must be writable); anything else: stderr
            fd = os.open(trace, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644) \
                if trace.startswith("/") else 2
            os.write(fd, text.encode())
        except OSError:
            pass
    raise PermissionError(f"autograder sandbox: {detail} is not allowed while grading")


def _under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _absolute(arg, dir_fd=None) -> str | None:
    """The absolute path an argument names; a relative one counts from ``dir_fd`` when
    given (``os.unlink(name, dir_fd=...)``, as shutil.rmtree does), else from the cwd."""
    if isinstance(arg, int) or arg is None:
        return None
    if isinstance(arg, bytes):
        arg = os.fsdecode(arg)
    try:
        arg = os.fspath(arg)
    except TypeError:
        return None
    if isinstance(dir_fd, int) and dir_fd >= 0 and not os.path.isabs(arg):
        try:
            arg = os.path.join(os.readlink(f"/proc/self/fd/{dir_fd}"), arg)
        except OSError:
            pass
    return os.path.abspath(arg)


def _paths(absolute: str) -> list[str]:
    """The path as given and, when a link is on the way, where it really leads."""
    real = os.path.realpath(absolute)
    return [absolute] if real == absolute else [absolute, real]


_PYTHON = sorted({os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)})


def _check_sealed(absolute: str | None) -> None:
    """A learner process of a stage run may not open a sealed reference program (the
    policy's ``sealed``: the suffix), by its own path or through a link, wherever the
    link was made (the Python installation, read-only to the run, holds none)."""
    sealed = tuple(_POLICY.get("sealed") or ())
    if not sealed or absolute is None:
        return
    for p in [absolute] if _under(absolute, _PYTHON) else _paths(absolute):
        if p.endswith(sealed):
            _refuse("read-outside", f"opening {p} (a sealed reference program: the "
                    "checker's own)")


def _check_read(arg) -> None:
    absolute = _absolute(arg)
    _check_sealed(absolute)
    if absolute is None or _under(absolute, _POLICY["allow"]):
        return  # the Python installation (read-only to the run): most opens, no lookup
    for p in _paths(absolute):
        if _under(p, _POLICY["deny"]) and not _under(p, _POLICY["allow"]):
            _refuse("read-outside", f"opening {p}")


def _check_write(arg, dir_fd=None) -> None:
    absolute = _absolute(arg, dir_fd)
    for p in _paths(absolute) if absolute else []:
        if not _under(p, _POLICY["writable"]) and not p.startswith("/dev/") \
                and not p.startswith("/proc/self/") \
                and not p.startswith(f"/proc/{os.getpid()}/"):  # /proc/self, resolved
            _refuse("write-outside", f"writing {p}")


def _host_of(address):
    if isinstance(address, tuple) and address:
        return address[0]
    return None  # AF_UNIX path or abstract name: local


def _own_process(pid: int) -> bool:
    """This process or one of its descendants (walked up through /proc's parent links)."""
    me = os.getpid()
    for _ in range(64):
        if pid == me:
            return True
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            pid = int(stat[stat.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            return False
        if pid <= 1:
            return False
    return False


def _own_group(pgid: int) -> bool:
    """A process group other than its own (which holds the checker) with a member it
    started (the leader may have exited before its group)."""
    if pgid == os.getpgrp():
        return False
    if _own_process(pgid):
        return True
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
                if int(stat[stat.rindex(b")") + 2:].split()[2]) == pgid and \
                        _own_process(int(entry)):
                    return True
            except (OSError, ValueError, IndexError):
                continue
    return False


def _check_signal(event: str, args: tuple) -> None:
    target, sig = (tuple(args) + (None, None))[:2]
    if not isinstance(target, int) or sig == 0:  # signal 0 only asks whether it lives
        return
    if target > 0 and (_own_process(target) if event == "os.kill" else _own_group(target)):
        return
    what = "process group" if event == "os.killpg" or target <= 0 else "process"
    _refuse("signal-outside", f"a signal to {what} {target}")


def _hook(event: str, args: tuple) -> None:
    if event == "open":
        path, mode, flags = args
        writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writing:
            _check_write(path)
        _check_read(path)
    elif event in _WRITE_EVENTS:
        if event in ("os.link", "os.symlink") and args:  # a new name for a sealed file
            _check_sealed(_absolute(args[0], args[2] if event == "os.link"
                                    and len(args) > 2 else None))
        for i, fd_index in _WRITE_EVENTS[event]:
            if i < len(args):
                _check_write(args[i], args[fd_index] if fd_index is not None
                             and fd_index < len(args) else None)
    elif event in ("os.kill", "os.killpg"):
        _check_signal(event, args)
    elif event in _NET_EVENTS:
        host = args[0] if event.startswith("socket.get") else _host_of(args[1])
        if isinstance(host, bytes):
            host = host.decode(errors="replace")
        if host not in _LOCAL_HOSTS and not str(host).startswith("127."):
            _refuse("network", f"network access to {host!r}")


class _ReadOnlyTiming(types.ModuleType):
    def __setattr__(self, name, value):
        if name in PROTECTED.get(self.__name__, ()):
            _refuse(_protocol.TAMPER_TIMING, f"replacing {self.__name__}.{name}")
        super().__setattr__(name, value)

    def __delattr__(self, name):
        if name in PROTECTED.get(self.__name__, ()):
            _refuse(_protocol.TAMPER_TIMING, f"deleting {self.__name__}.{name}")
        super().__delattr__(name)


def protect(module) -> None:
    """Make the protected names of ``module`` (time, jax) read-only."""
    if module is not None and type(module) is types.ModuleType:
        module.__class__ = _ReadOnlyTiming


class _ProtectOnImport:
    """Meta-path finder: protect ``jax`` as soon as its import finishes."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        import importlib.util
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_protect(module):
            exec_module(module)
            protect(module)
        spec.loader.exec_module = exec_and_protect
        return spec


def install() -> None:
    if not _POLICY:
        return
    import time
    protect(time)
    if "jax" in sys.modules:
        protect(sys.modules["jax"])
    else:
        sys.meta_path.insert(0, _ProtectOnImport())
    sys.addaudithook(_hook)


install()

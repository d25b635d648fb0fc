"""Records the files a Python process opens under given folders (tests/release_reach.py):
on the path first (``PYTHONPATH``), Python imports it at start in every process that
inherits the environment, a checker's learner processes included (their environment is
the checker's less its channel secrets). An audit hook sees every ``open`` (an import's
source or cached bytecode included: ``io.open_code``) and appends the path, once per
process, to ``$COURSE_REACH_LOG/<pid>.txt``. Nothing is written without both variables."""

import os
import sys
import threading

_LOG = os.environ.get("COURSE_REACH_LOG", "")
_ROOTS = tuple(r.rstrip(os.sep) + os.sep
               for r in os.environ.get("COURSE_REACH_ROOTS", "").split(os.pathsep) if r)
_seen: set = set()
_local = threading.local()
_out = {"pid": None, "fd": None, "ino": None}


def _write(line: str) -> None:
    # a fork (a zygote's learner process) gets its own file; a descriptor closed and its
    # number reused since is noticed by its inode, never written into
    fd = _out["fd"]
    if _out["pid"] != os.getpid() or fd is None or _inode(fd) != _out["ino"]:
        fd = os.open(os.path.join(_LOG, f"{os.getpid()}.txt"),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
        _out.update(pid=os.getpid(), fd=fd, ino=_inode(fd))
    os.write(fd, line.encode() + b"\n")


def _inode(fd):
    try:
        st = os.fstat(fd)
        return st.st_dev, st.st_ino
    except OSError:
        return None


def _hook(event, args):
    if event != "open" or getattr(_local, "busy", False):
        return
    path = args[0] if args else None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str):
        return  # a descriptor: its file was recorded when it was opened
    _local.busy = True
    try:
        path = os.path.abspath(path)
        if path.startswith(_ROOTS) and path not in _seen:
            _seen.add(path)
            _write(path)
    except Exception:  # noqa: BLE001  (a recorder never breaks the process it watches)
        pass
    finally:
        _local.busy = False


if _LOG and _ROOTS:
    sys.addaudithook(_hook)

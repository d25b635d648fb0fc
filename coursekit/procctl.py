"""Process control (Linux ``prctl(2)``), in one place for the whole course: the grader,
its jail and spawner, the checker, its zygote and the learner process set these here.

    procctl.die_with_parent()        # SIGKILL when the parent goes (PR_SET_PDEATHSIG)
    procctl.set_dumpable(False)      # no /proc/<pid>/mem, environ, fd/ or ptrace for peers
    procctl.become_subreaper()       # orphaned descendants are re-parented to us
    procctl.no_new_privileges()      # setuid binaries do not elevate; seccomp allowed
    procctl.prctl(option, arg2, arg3)   # anything else, by the constants below

Every call raises ``OSError`` (with errno) when the kernel refuses; callers for whom a
refusal changes nothing catch it. Off Linux every call does nothing and returns 0.
Standard library only (the ground floor of docs/architecture.md): the jail's launcher,
which runs with ``python -I -S``, imports it too.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2

LINUX = sys.platform.startswith("linux")
_libc = None


def libc():
    """The C library, loaded once (errno kept for ``ctypes.get_errno``)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def prctl(option: int, arg2=0, arg3=0) -> int:
    """``prctl(option, arg2, arg3, 0, 0)``; an int argument is passed as an unsigned long,
    anything else (a ``ctypes.byref``) as it is. Raises ``OSError`` on failure."""
    if not LINUX:
        return 0
    args = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in (arg2, arg3)]
    rc = libc().prctl(option, *args, ctypes.c_ulong(0), ctypes.c_ulong(0))
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")
    return rc


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Receive ``sig`` when the parent thread ends (cleared by setuid: set it after)."""
    prctl(PR_SET_PDEATHSIG, int(sig))


def set_dumpable(flag: bool) -> None:
    """Off: no core dumps, and no process of the same user reads this one's memory,
    environment or descriptors, or traces it."""
    prctl(PR_SET_DUMPABLE, 1 if flag else 0)


def become_subreaper() -> None:
    """Orphaned descendants become this process's children (it reaps them)."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)


def no_new_privileges() -> None:
    """Neither this process nor anything it executes gains privileges (setuid, file
    capabilities); required before an unprivileged seccomp filter."""
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def drop_capability(cap: int) -> None:
    """Remove ``cap`` from the bounding set (needs CAP_SETPCAP)."""
    prctl(PR_CAPBSET_DROP, cap)

"""No kernel keys for sandboxed code: a fresh session keyring, then a seccomp filter that
refuses ``add_key``, ``request_key`` and ``keyctl`` (EPERM).

The kernel's keyrings live in none of the sandbox's namespaces: a key one run leaves in
its user keyring (or a world-readable one anywhere) outlives the run and is listed in
``/proc/keys`` for other runs. Every process the jail starts (the checker, a notebook
kernel, every learner process) joins an empty anonymous session keyring (so it possesses
none of the grader's keys), and then cannot make, find or read a key at all. Standard
library only (ctypes), loaded by ``autograder/jail.py`` and ``autograder/jail_spawner.py``
from this folder; unprivileged too (``no_new_privs`` is set first), so the ``limits``
fallback applies it as well.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
import sys

if not __package__:  # a plain file beside jail.py (python -I -S): the course root too
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from coursekit import procctl  # noqa: E402

KEYCTL_JOIN_SESSION_KEYRING = 1
# audit arch -> (add_key, request_key, keyctl) in that ABI
KEY_SYSCALLS = {
    0xC000003E: (248, 249, 250, 0x40000000 | 248, 0x40000000 | 249,  # x86_64 (and x32)
                 0x40000000 | 250),
    0x40000003: (286, 287, 288),   # i386 (int 0x80 from an x86_64 process)
    0xC00000B7: (217, 218, 219),   # aarch64
    0x40000028: (309, 310, 311),   # arm
}
KEYCTL_NR = {"x86_64": 250, "aarch64": 219, "armv7l": 311, "i686": 288}
_BPF_LD_W_ABS, _BPF_JEQ_K, _BPF_RET_K = 0x20, 0x15, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_libc = procctl.libc()


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def filter_program() -> bytes:
    """The classic BPF program: per known architecture, the key syscalls -> EPERM."""
    ins: list[tuple[int, int, int, int]] = []  # (code, jt, jf, k); jumps patched below
    deny_jumps: list[int] = []
    for arch, numbers in KEY_SYSCALLS.items():
        ins.append((_BPF_LD_W_ABS, 0, 0, 4))            # A = arch
        skip = len(ins)
        ins.append((_BPF_JEQ_K, 0, 0, arch))            # jf -> next architecture
        ins.append((_BPF_LD_W_ABS, 0, 0, 0))            # A = syscall number
        for nr in numbers:
            deny_jumps.append(len(ins))
            ins.append((_BPF_JEQ_K, 0, 0, nr))          # jt -> deny
        ins.append((_BPF_RET_K, 0, 0, _ALLOW))
        code, jt, _, k = ins[skip]
        ins[skip] = (code, jt, len(ins) - skip - 1, k)
    ins.append((_BPF_RET_K, 0, 0, _ALLOW))              # another architecture
    deny = len(ins)
    ins.append((_BPF_RET_K, 0, 0, _ERRNO | errno.EPERM))
    for i in deny_jumps:
        code, _, jf, k = ins[i]
        ins[i] = (code, deny - i - 1, jf, k)
    return b"".join(struct.pack("HBBI", *op) for op in ins)


def join_empty_session_keyring() -> None:
    """An anonymous session keyring of this process's own (best effort: a kernel without
    keys has nothing to leak)."""
    nr = KEYCTL_NR.get(platform.machine())
    if nr is not None:
        _libc.syscall(ctypes.c_long(nr), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING),
                      ctypes.c_void_p(None))


def refuse_key_syscalls() -> None:
    """Install the filter (inherited by every child and kept across exec)."""
    program = filter_program()
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _Fprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    procctl.no_new_privileges()
    procctl.prctl(procctl.PR_SET_SECCOMP, procctl.SECCOMP_MODE_FILTER, ctypes.byref(prog))


def no_keys() -> None:
    join_empty_session_keyring()
    refuse_key_syscalls()

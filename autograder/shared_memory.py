"""Shared memory a run holds, found through /proc, for machines without a memory cgroup
(``autograder.cgroups``).

A process's RSS counts only the shared pages it maps and has touched: 4.9 GB written into
``memfd`` files and then unmapped showed a 486 MB peak. So, every second or so, the
watchdog adds what the run's processes hold and RSS misses:

* every ``memfd`` (and deleted tmpfs file) a process of the run holds open or mapped
  (``/proc/<pid>/fd``, ``/proc/<pid>/map_files``: root only), by allocated size, each
  file once;
* every tmpfs the run writes into as a whole: its /dev/shm (the jail's and each learner
  process's own, through ``/proc/<pid>/root``) and its own folder's tmpfs;

and counts each process's resident memory without its shared part (``RssShmem``), which
the list above already holds.
"""

from __future__ import annotations

import os

SHARED_PREFIXES = ("/memfd:", "/dev/shm/", "/SYSV")


def _status_kb(pid: int, fields: tuple[str, ...]) -> dict[str, int]:
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in fields:
                    out[key] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return out


def _held_files(pid: int, seen: set) -> int:
    """Bytes of shared-memory files ``pid`` holds open or mapped, not counted yet."""
    total = 0
    for folder in ("fd", "map_files"):
        base = f"/proc/{pid}/{folder}"
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            try:
                target = os.readlink(f"{base}/{name}")
                if not target.startswith(SHARED_PREFIXES):
                    continue
                st = os.stat(f"{base}/{name}")
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                total += st.st_blocks * 512
    return total


def tmpfs_used(path: str) -> tuple[int, int] | None:
    """(device, bytes used) of the file system at ``path``."""
    try:
        st, vfs = os.stat(path), os.statvfs(path)
    except OSError:
        return None
    return st.st_dev, (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize


def run_bytes(tree: list[int], tmpfs: dict[str, int] | None = None) -> int:
    """Memory of the processes ``tree`` with the shared memory they hold; ``tmpfs``:
    {path of a tmpfs the run writes: bytes in it before the run}."""
    seen: set = set()
    devices: dict[int, int] = {}
    machine = tmpfs_used("/dev/shm")  # the machine's own (no namespace): not the run's
    total = 0
    for pid in tree:
        status = _status_kb(pid, ("VmRSS", "RssShmem"))
        total += status.get("VmRSS", 0) - status.get("RssShmem", 0)
        total += _held_files(pid, seen)
        found = tmpfs_used(f"/proc/{pid}/root/dev/shm")
        if found and (machine is None or found[0] != machine[0]):
            devices.setdefault(*found)
    for path, before in (tmpfs or {}).items():
        found = tmpfs_used(path)
        if found:
            devices[found[0]] = max(found[1] - before, 0)
    return total + sum(devices.values())

"""A memory and a pids cgroup per sandboxed run, where the machine has them (cgroup v1
controllers writable by root, as on this course's grading VMs), and a cpuacct one where
that controller is mounted and writable too.

The memory cgroup counts what a per-process watchdog cannot see whole: shared memory
(/dev/shm, ``memfd``, SysV segments) and the run's tmpfs pages are charged to the cgroup
of the process that wrote them, whether or not any process still maps them. The watchdog
(``autograder.sandbox.Monitor``) reads anonymous + shared memory from ``memory.stat``
(file pages are the kernel's to reclaim) against the run's limit, the kernel's hard limit
(``memory.limit_in_bytes``, above the watchdog's) is the backstop, and an OOM kill in the
cgroup is that run's ``memory-limit``. ``pids.max`` caps the run's tasks; a refused fork
is its ``process-limit``. Neither touches another run. ``cpuacct.usage`` is the CPU
time (user + system) every task of the run got, exited ones included: what tells a run
the machine starved from one that kept a core busy (``autograder.run_cpu``).

Without writable v1 controllers (no root, a cgroup v2 machine without delegation) there
is no cgroup: the watchdog scans /proc instead (``autograder.shared_memory``).
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from functools import lru_cache
from pathlib import Path

PREFIX = "autograder-"
CONTROLLERS = ("memory", "pids")
OPTIONAL = ("cpuacct",)  # used where there; without it the run's CPU comes from /proc
HARD_MARGIN = 1.25  # the kernel's limit, as a multiple of the watchdog's


@lru_cache(maxsize=1)
def hierarchies() -> dict[str, Path]:
    """controller -> this process's own cgroup folder in its v1 hierarchy, for each of
    ``CONTROLLERS`` and ``OPTIONAL`` that is mounted and writable here ({} when not all
    of ``CONTROLLERS`` are)."""
    if os.geteuid() != 0:
        return {}
    mounts: dict[str, Path] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fstype, _, options = right.split()[:3]
                if fstype != "cgroup":
                    continue
                for name in CONTROLLERS + OPTIONAL:
                    if name in options.split(","):
                        mounts[name] = Path(left.split()[4])
        own: dict[str, str] = {}
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, names, path = line.rstrip("\n").split(":", 2)
                for name in names.split(","):
                    own[name] = path
    except (OSError, ValueError):
        return {}
    found = {}
    for name in CONTROLLERS + OPTIONAL:
        folder = mounts[name] / own[name].lstrip("/") if name in mounts and name in own \
            else None
        if folder is not None and os.access(folder, os.W_OK):
            found[name] = folder
        elif name in CONTROLLERS:
            return {}
    return found


def available() -> bool:
    return bool(hierarchies())


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _fields(path: Path) -> dict[str, int]:
    out = {}
    for line in _read(path).splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


class RunCgroups:
    """The cgroups of one run: made by the grader, joined by the jail's launcher (its
    first step, so every process of the run is inside), read by the watchdog, emptied and
    removed with the run's folder."""

    def __init__(self, memory_mb: int, max_tasks: int):
        name = f"{PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        self.paths = {c: folder / name for c, folder in hierarchies().items()}
        for path in self.paths.values():
            path.mkdir()
        hard = int(memory_mb * HARD_MARGIN) << 20
        self._write("memory", "memory.limit_in_bytes", hard)
        self._write("pids", "pids.max", max_tasks)

    @classmethod
    def create(cls, memory_mb: int, max_tasks: int) -> RunCgroups | None:
        if not available():
            return None
        try:
            return cls(memory_mb, max_tasks)
        except OSError:
            return None

    @classmethod
    def of_process(cls, pid: int) -> RunCgroups | None:
        """The run cgroups ``pid`` has joined (None until it has)."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        paths = {}
        for line in lines:
            _, names, path = line.split(":", 2)
            for name in names.split(","):
                if name in hierarchies() and Path(path).name.startswith(PREFIX):
                    paths[name] = hierarchies()[name] / Path(path).name
        if not set(CONTROLLERS) <= set(paths):
            return None
        found = cls.__new__(cls)
        found.paths = paths
        return found

    def _write(self, controller: str, name: str, value) -> None:
        (self.paths[controller] / name).write_text(str(value))

    def memory_bytes(self) -> int:
        """Anonymous + shared memory (tmpfs, /dev/shm, memfd, SysV) of the whole run."""
        stat = _fields(self.paths["memory"] / "memory.stat")
        return stat.get("total_rss", 0) + stat.get("total_shmem", 0)

    def oom_kills(self) -> int:
        return _fields(self.paths["memory"] / "memory.oom_control").get("oom_kill", 0)

    def refused_forks(self) -> int:
        return _fields(self.paths["pids"] / "pids.events").get("max", 0)

    def cpu_seconds(self) -> float | None:
        """User + system CPU time of every task that ran in the run (None without a
        cpuacct cgroup)."""
        if "cpuacct" not in self.paths:
            return None
        text = _read(self.paths["cpuacct"] / "cpuacct.usage").strip()
        return int(text) / 1e9 if text.isdigit() else None

    def pids(self) -> list[int]:
        """The run's processes now (its pids cgroup)."""
        return [int(p) for p in _read(self.paths["pids"] / "cgroup.procs").split()
                if p.isdigit()]

    def tasks(self) -> int:
        return int(_read(self.paths["pids"] / "pids.current").strip() or 0)

    def remove(self) -> list[str]:
        """Kill what is left, remove the folders; the ones that would not go, named."""
        return remove_folders(list(self.paths.values()))


def _rmdir(path: Path) -> bool:
    try:
        path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def remove_folders(paths: list[Path]) -> list[str]:
    """SIGKILL every process in these cgroups and remove them; those still there after a
    second, named."""
    for _ in range(50):
        for path in paths:
            for pid in _read(path / "cgroup.procs").split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (OSError, ValueError):
                    pass
        if all([_rmdir(p) for p in paths]):
            return []
        time.sleep(0.02)
    return [str(p) for p in paths if p.exists()]


def sweep_stale() -> list[str]:
    """Remove run cgroups whose grader process is gone; those that would not go."""
    stale = []
    for folder in hierarchies().values():
        for path in folder.glob(f"{PREFIX}*-*"):
            pid = path.name[len(PREFIX):].split("-")[0]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                stale.append(path)
    return remove_folders(stale) if stale else []

"""The parent side of the sandbox: a private folder per run, the jailed launch, and a
watchdog that enforces what the kernel cannot.

One untrusted run (a checker stage, a notebook kernel) gets:

* ``SandboxDir``: a fresh folder under the system temp dir, root-only but traversable
  (as root: a tmpfs of ``Limits.disk_mb``, the run's disk quota, removed by unmounting),
  holding ``guard/`` (sitecustomize, runner: read-only), a course copy with no
  ``solution/`` (read-only), the writable work folders (owned by the run's uid) and the
  learner processes' private folders (``learner_area``);
* ``Jail``: the command wrapped by ``autograder/jail.py`` (namespaces, uid, rlimits; see
  there) with a minimal environment, in the run's own memory and pids cgroups where the
  machine has them (``autograder.cgroups``); with an ``Identity`` (``autograder.uids``)
  the command is a checker that starts learner processes through the jail's spawner;
* ``Monitor``: reads stdout/stderr/result pipes with a size cap, watches the run's memory
  (its cgroup's anonymous + shared memory; without one, RSS then PSS plus the shared
  memory the processes hold: ``autograder.shared_memory``), task count and disk quota,
  enforces the wall clock, and kills the whole tree when a limit is hit. It also reads
  the CPU time the run's processes got (``autograder.run_cpu``), which tells a run
  stopped at its wall clock while looping from one the machine starved. Its ``Outcome``
  says what happened in words the grader maps to a status.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder import cgroups, run_cpu, shared_memory, uids
from autograder.cleanup import remove_tree
from autograder.tasks import KillCause
from coursekit import procctl, protocol

PACKAGE = Path(__file__).resolve().parent
ROOT = PACKAGE.parent
UID_BASE = uids.LOWEST  # every throw-away uid is at least this (autograder.uids)
PAGE = os.sysconf("SC_PAGE_SIZE")
SHARED_SCAN_S = 1.0  # without a memory cgroup: how often shared memory is looked for
PASSTHROUGH_ENV = ("JAX_", "XLA_", "CUDA_", "TF_CPP_", "OMP_", "LANG", "LC_", "TZ",
                   "AUTOGRADER_GUARD_TRACE")


@dataclass
class Limits:
    wall_s: float = 600.0
    memory_mb: int = 4096          # all processes of the run together (RSS, then PSS)
    max_tasks: int = max(512, 32 * (os.cpu_count() or 1))  # processes + threads
    max_output_bytes: int = 8 << 20  # stdout + stderr before the run is stopped
    file_mb: int = 512             # largest file the run may write
    disk_mb: int = 1024            # all files of the run together (as root: its tmpfs)
    poll_s: float = 0.1
    quiet_s: float = 0.0           # stop the run after this long without a result (0: never)


@dataclass
class Outcome:
    returncode: int | None = None
    killed_for: KillCause | None = None  # why the watchdog stopped it (autograder.tasks)
    wall_s: float = 0.0
    peak_memory_mb: float = 0.0
    peak_tasks: int = 0
    cpu_s: float | None = None  # user + system time of the run's processes (run_cpu)
    stdout: str = ""
    stderr: str = ""
    channel: list = field(default_factory=list)   # parsed JSON lines from the result fd

    @property
    def signal_name(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None


# ----------------------------------------------------------------------------------
# What this machine allows
# ----------------------------------------------------------------------------------

_ISOLATION: str | None = None
MODES = {"namespaces": (True, True), "uid": (False, True), "limits": (False, False)}


def isolation() -> str:
    """The strongest mode that runs Python here, probed once per process:
    'namespaces' (root: mount+net+pid namespaces, throw-away uid, limits), 'uid' (root
    without namespaces: throw-away uid, limits) or 'limits' (resource limits,
    process-tree watchdog and audit hooks only; what a learner's own machine gets).
    ``AUTOGRADER_ISOLATION=uid|limits`` asks for a weaker mode (to test the fallbacks)."""
    global _ISOLATION
    if _ISOLATION is None:
        _ISOLATION = _probed_isolation()
    return _ISOLATION


def _probe_cache() -> Path | None:
    """A file remembering the probe for this boot, user, Python and jail.py."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    key = hashlib.sha256("\0".join([boot, str(os.geteuid()), sys.executable,
                                     (PACKAGE / "jail.py").read_text()]).encode())
    folder = ROOT / "build" / "autograder-cache"
    return folder / f"isolation-{key.hexdigest()[:16]}" if os.access(
        folder if folder.exists() else ROOT, os.W_OK) else None


def _probed_isolation() -> str:
    order = ["namespaces", "uid", "limits"]
    forced = os.environ.get("AUTOGRADER_ISOLATION", "namespaces")  # can only weaken
    candidates = order[order.index(forced) if forced in order else 0:-1]
    if os.geteuid() != 0:
        candidates = []
    cache = _probe_cache()
    if candidates[:1] == ["namespaces"] and cache is not None and cache.exists():
        return cache.read_text().strip()
    mode = "limits"
    for candidate in candidates:
        if _runs_python(candidate):
            mode = candidate
            break
    if cache is not None and mode == "namespaces":  # never remember a weaker result
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(mode)
    return mode


def _runs_python(mode: str) -> bool:
    namespaces, with_uid = MODES[mode]
    uid = fresh_uid() if with_uid else None
    with SandboxDir(uid=uid) as box:
        work = box.writable("work")
        jail = Jail(box, [sys.executable, "-c", "import json, os; print(os.getuid())"],
                    uid=uid, cwd=work, namespaces=namespaces)
        done = subprocess.run(jail.argv(), capture_output=True, check=False, text=True, timeout=60)
    return done.returncode == 0 and "jail:" not in done.stderr


# What each weaker mode cannot apply (the gradebook row names it: an instructor grading
# without root sees what a submission could still reach).
NOT_APPLIED = {
    "namespaces": [],
    "uid": ["namespaces: the file system outside the course folder stays readable (other "
            "copies of the course, scratch space), SysV IPC and abstract Unix sockets are "
            "shared with other runs, the network is not cut, other processes are visible; "
            "learner processes of one run share its network and /dev/shm"],
    "limits": ["namespaces: the file system outside the course folder stays readable (other "
               "copies of the course, scratch space), SysV IPC and abstract Unix sockets are "
               "shared with other runs, the network is not cut, other processes are visible",
               "throw-away uids: the run is the grader's own user, the checker, its helpers "
               "and every learner process alike (one HOME, temporary folder and cache; each "
               "other's files and /proc entries), fenced from the hidden course folder and "
               "the grader's files only by the audit hooks; no disk quota but the per-file "
               "limit, and no cgroup (memory by a /proc scan)"],
}


def not_applied() -> list[str]:
    """The fences the current isolation mode could not apply."""
    return list(NOT_APPLIED.get(isolation(), ["unknown isolation mode"]))


def mode_settings() -> tuple[bool, int | None]:
    """(use namespaces, uid) for one run in the current isolation mode: a uid never
    handed out before (``autograder.uids``), or None without root."""
    namespaces, with_uid = MODES[isolation()]
    return namespaces, (fresh_uid() if with_uid else None)


def mode_identity() -> tuple[bool, uids.Identity | None]:
    """(use namespaces, the run's uids) for a checker run that starts learner processes
    as uids of their own; None without root (they run as the grader's user)."""
    namespaces, with_uid = MODES[isolation()]
    return namespaces, (uids.draw() if with_uid else None)


def make_undumpable() -> None:
    """No core dumps, no /proc/<pid>/mem, environ or fd/ for other processes of the same
    user, no ptrace: what a grading process that holds secrets needs (Linux)."""
    procctl.set_dumpable(False)


def fresh_uid() -> int | None:
    """A throw-away uid no run had before (as root), so limits, kills and kernel objects
    per uid touch only this run."""
    return uids.draw().checker if os.geteuid() == 0 else None


# ----------------------------------------------------------------------------------
# The folder
# ----------------------------------------------------------------------------------

class SandboxDir:
    """``<tmp>/autograder-<pid>-<random>/`` (root 0711) with ``guard/`` and a course copy
    ``c-<random>/`` (read-only to the run; unguessable, the parent is not listable), work
    folders created by ``writable()`` (owned by the run's uid) and, for a checker run,
    ``learner_area`` (root 0711: the spawner makes each learner process's folders there).

    As root the folder is a tmpfs of ``disk_mb`` (the run's disk quota: a full one is
    that run's ``disk-limit``, never a neighbour's ENOSPC), which the grader still reads
    and writes as any folder, and which ``close`` unmounts whatever the run built in it."""

    def __init__(self, uid: int | None, disk_mb: int | None = None):
        """``disk_mb``: the quota (as root); None: ``Limits``' default."""
        disk_mb = Limits.disk_mb if disk_mb is None else disk_mb
        self.uid = uid
        base = Path(tempfile.gettempdir()).resolve()
        self.path = Path(tempfile.mkdtemp(prefix=f"autograder-{os.getpid()}-", dir=base))
        self.mounted = False
        if disk_mb and os.geteuid() == 0:
            self.mounted = mount_quota(self.path, disk_mb)
        os.chmod(self.path, 0o711)
        self.guard = self.path / "guard"
        self.guard.mkdir(mode=0o755)
        shutil.copy(PACKAGE / "guard.py", self.guard / "sitecustomize.py")
        shutil.copy(PACKAGE / "runner.py", self.guard / "autograder_runner.py")
        # the protocol lives in coursekit (the bottom layer); the course folder is
        # hidden in the jail, so the runner and the guard get their own copy
        shutil.copy(protocol.__file__, self.guard / "autograder_protocol.py")
        self.course = self.path / f"c-{secrets.token_hex(8)}"
        self.course.mkdir(mode=0o755)
        self.writable_dirs: list[Path] = []
        self.cgroups: list[cgroups.RunCgroups] = []
        self._learner_area: Path | None = None
        self.baseline = shared_memory.tmpfs_used(str(self.path)) if self.mounted else None
        _BOXES[str(self.path)] = self

    def writable(self, relative: str, mode: int = 0o700) -> Path:
        """A work folder owned by the run's uid (``mode``: 0o711 for a checker's, whose
        learner processes reach the folders it shares with them inside)."""
        path = self.course / relative
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
        if self.uid is not None:
            os.chown(path, self.uid, self.uid)
        self.writable_dirs.append(path)
        return path

    @property
    def learner_area(self) -> Path:
        """Where learner processes get their own folders (root 0711: not listable)."""
        if self._learner_area is None:
            self._learner_area = self.path / f"l-{secrets.token_hex(8)}"
            self._learner_area.mkdir(mode=0o711)
        return self._learner_area

    def give(self, path: Path) -> None:
        """Hand a file or folder inside a writable dir to the run's uid."""
        if self.uid is None:
            return
        for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
            os.lchown(p, self.uid, self.uid)

    def quota_used(self) -> dict[str, int]:
        """{the run's tmpfs: bytes in it before the run} for the shared-memory scan."""
        return {str(self.path): self.baseline[1]} if self.baseline else {}

    def close(self) -> str:
        """Remove everything; '' or what could not be removed (also printed: the batch
        goes on either way)."""
        _BOXES.pop(str(self.path), None)
        left = []
        for group in self.cgroups:
            left += group.remove()
        if self.mounted and unmount(self.path):
            self.mounted = False
        why = remove_tree(self.path)
        if why:
            left.append(f"{self.path}: {why}")
        if left:
            print(f"autograder: could not remove {'; '.join(left)}", file=sys.stderr)
        return "; ".join(left)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


_libc = None


def _c():
    global _libc
    if _libc is None:
        import ctypes
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def mount_quota(path: Path, disk_mb: int) -> bool:
    """A tmpfs of ``disk_mb`` at ``path`` (root); False when the machine refuses."""
    options = f"size={int(disk_mb)}m,nr_inodes={max(4096, int(disk_mb) * 256)},mode=0711"
    rc = _c().mount(b"tmpfs", os.fsencode(path), b"tmpfs", 2 | 4,  # nosuid, nodev
                    options.encode())
    return rc == 0


def unmount(path: Path) -> bool:
    return _c().umount2(os.fsencode(path), 2) == 0  # MNT_DETACH: busy or not


def mount_points() -> set[str]:
    try:
        with open("/proc/self/mountinfo") as f:
            return {line.split()[4].replace("\\040", " ") for line in f}
    except OSError:
        return set()


def sweep_stale() -> int:
    """Remove sandbox folders (and their tmpfs, and run cgroups) left by workers that
    were killed (a SIGKILLed grader takes its workers along before they can clean up).
    The folder name carries the pid of the process that made it; a folder whose process
    is gone is stale. One that cannot be removed is reported, and grading goes on."""
    removed = 0
    mounted = mount_points()
    problems = cgroups.sweep_stale()
    for path in Path(tempfile.gettempdir()).glob("autograder-*-*"):
        pid = path.name.split("-")[1]
        try:
            if not (pid.isdigit() and not Path(f"/proc/{pid}").exists() and path.is_dir()
                    and path.stat().st_uid == os.geteuid()):
                continue
            if str(path) in mounted:
                unmount(path)
            why = remove_tree(path)
        except OSError as err:
            why = err.strerror or str(err)
        if why:
            problems.append(f"{path}: {why}")
        else:
            removed += 1
    if problems:
        print(f"autograder: could not remove stale sandbox leftovers (grading goes on): "
              f"{'; '.join(problems)[:2000]}", file=sys.stderr)
    return removed


def copy_course(course_root: Path, dest: Path, projects: list[str]) -> None:
    """What a checker needs, never a solution: coursekit/ and, per project, everything
    but ``solution/`` and ``starter/`` (the starter comes from the submission)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    if (course_root / "coursekit").is_dir():
        shutil.copytree(course_root / "coursekit", dest / "coursekit", ignore=ignore)
    for name in projects:
        src = course_root / "projects" / name
        for item in src.iterdir():
            if item.name in ("solution", "starter", "__pycache__"):
                continue
            target = dest / "projects" / name / item.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if item.is_dir():
                shutil.copytree(item, target, ignore=ignore)
            else:
                shutil.copy2(item, target)


def hidden_paths(hide_roots: list[Path], keep: list[Path]) -> list[str]:
    """Paths to cover so that everything under ``hide_roots`` disappears except
    ``keep`` (the Python environment) and the folders leading to it."""
    out: list[str] = []

    def cover(path: Path) -> None:
        inner = [k for k in keep if k != path and path in k.parents]
        if any(k == path for k in keep):
            return
        if not inner:
            out.append(str(path))
            return
        try:
            children = list(path.iterdir())
        except OSError:
            return
        for child in children:
            cover(child)

    for root in hide_roots:
        if root.exists():
            cover(root.resolve())
    return sorted(set(out))


# ----------------------------------------------------------------------------------
# The launch
# ----------------------------------------------------------------------------------

def installed_python_paths(hide=()) -> list[Path]:
    """The grader's own PYTHONPATH folders outside every hidden path: where a machine's
    image installs JAX (a TPU image puts it on PYTHONPATH), which a run must still import.
    Added after the guard and the course copy, never in their place."""
    hidden = [Path(h).resolve() for h in hide]
    out = []
    for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        if not entry or not Path(entry).is_dir():
            continue
        path = Path(entry).resolve()
        if not any(path == h or h in path.parents or path in h.parents for h in hidden):
            out.append(path)
    return list(dict.fromkeys(out))


class Jail:
    """A command plus everything ``jail.py`` needs to confine it. With ``identity`` (a
    checker run as root), ``uid`` must be its checker uid: the command also gets the
    learner group and a spawner that starts learner processes as the run's learner uids
    (``jail_spawner``; the checking side calls it through ``coursekit.checking.spawn``).
    ``learner_sealed``: the learner processes' guard refuses to open a sealed program
    (``protocol.LEARNER_SEALED``: a stage run, whose learner processes need none)."""

    def __init__(self, box: SandboxDir, cmd: list[str], *, uid: int | None,
                 cwd: Path | None = None, env: dict | None = None,
                 hide: list[Path] = (), limits: Limits | None = None,
                 namespaces: bool = True, result_fd: int | None = None,
                 identity: uids.Identity | None = None, learner_sealed: bool = False):
        self.box, self.cmd, self.uid = box, cmd, uid
        self.limits = limits or Limits()
        self.identity = identity
        if identity is not None and uid != identity.checker:
            raise ValueError("a checker with an identity runs as its checker uid")
        self.cgroups = cgroups.RunCgroups.create(self.limits.memory_mb,
                                                 self.limits.max_tasks + 64)
        if self.cgroups is not None:
            box.cgroups.append(self.cgroups)
        installed = installed_python_paths(hide)
        keep = [Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), *installed]
        self.hide = hidden_paths(list(hide), keep)
        self.reveal = sorted({str(k) for k in keep})
        # the allow-list outside the system's folders: the Python environment and this
        # run's sandbox folder (course copy, guard, work folders), nothing else
        self.keep = sorted({*self.reveal, str(box.path.resolve())})
        self.cwd = cwd or box.course
        self.namespaces = namespaces
        home = box.writable_dirs[0] if box.writable_dirs else box.course
        writable = [str(p) for p in box.writable_dirs]
        policy = {"deny": [str(Path(p).resolve()) for p in hide],
                  "allow": [str(k) for k in keep], "writable": writable,
                  "result_fd": result_fd}
        if learner_sealed:  # a stage run: its learner processes open no sealed program
            policy[protocol.LEARNER_SEALED] = True
        venv_bin = str(Path(sys.executable).parent)
        self.env = {
            "PATH": f"{venv_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(home), "TMPDIR": str(home / "tmp") if box.writable_dirs else "/tmp",
            "USER": "learner", "LOGNAME": "learner", "LANG": "C.UTF-8",
            # the guard (sitecustomize), then the course copy: its coursekit wins over an
            # editable install pointing at the real (hidden) course folder
            "PYTHONPATH": ":".join([str(box.guard), str(box.course),
                                    *(str(p) for p in installed)]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0", "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(home / ".mpl"),
            "AG_POLICY": json.dumps(policy),
        }
        for key, value in os.environ.items():
            if key.startswith(PASSTHROUGH_ENV):
                self.env.setdefault(key, value)
        self.env.update(env or {})
        if box.writable_dirs:
            (home / "tmp").mkdir(exist_ok=True)
            box.give(home / "tmp")

    def config(self) -> dict:
        lim = self.limits
        rlimits = {"DATA": lim.memory_mb << 20, "FSIZE": lim.file_mb << 20, "CORE": 0,
                   "NOFILE": 4096}
        if self.uid is not None:  # per-uid count: only meaningful for a throw-away uid
            rlimits["NPROC"] = lim.max_tasks + 64
        config = {"cmd": self.cmd, "env": self.env, "cwd": str(self.cwd), "uid": self.uid,
                  "namespaces": self.namespaces, "hide": self.hide, "reveal": self.reveal,
                  "keep": self.keep,
                  "writable": [str(p) for p in self.box.writable_dirs]
                  + ([str(self.box.learner_area)] if self.identity else []),
                  "rlimits": rlimits,
                  "cgroups": [str(p) for p in self.cgroups.paths.values()]
                  if self.cgroups else []}
        ident = self.identity
        if ident is not None:
            # umask 002: what the checker adds to a folder it shares with learner
            # processes (the learner group's, setgid) they may write; its own folders
            # are its own group's, which no learner process is in
            config.update(gid=ident.checker, groups=[ident.learner_gid], umask=0o002,
                          proc_gid=ident.checker, spawner={
                              "uids": list(ident.learner_uids), "gid": ident.learner_gid,
                              "area": str(self.box.learner_area),
                              "fd_env": protocol.ENV_SPAWNER,
                              "home_env": dict(protocol.LEARNER_FOLDERS),
                              "drop_env": list(protocol.LEARNER_DROPPED_ENV),
                              "guard_env": protocol.ENV_GUARD, "rlimits": rlimits})
        return config

    def argv(self) -> list[str]:
        """The launcher command; writes its config (root-only, deleted on read)."""
        fd, path = tempfile.mkstemp(prefix="jail-", suffix=".json", dir=self.box.path)
        with os.fdopen(fd, "w") as f:
            json.dump(self.config(), f)
        return [sys.executable, "-I", "-S", str(PACKAGE / "jail.py"), path]


# ----------------------------------------------------------------------------------
# The watchdog
# ----------------------------------------------------------------------------------

def _proc_table() -> dict[int, tuple[int, int, int, tuple[int, int] | None]]:
    """pid -> (ppid, threads, rss bytes, (cpu ticks, start time)) for every visible
    process."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        rest = raw[raw.rfind(b")") + 2:].split()
        try:
            table[int(entry.name)] = (int(rest[1]), int(rest[17]), int(rest[21]) * PAGE,
                                      run_cpu.stat_cpu(raw))
        except (IndexError, ValueError):
            continue
    return table


def process_tree(root: int, table: dict | None = None) -> list[int]:
    table = _proc_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, row in table.items():
        children.setdefault(row[0], []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def kill_tree(root: int, *, alive: bool = True) -> None:
    """SIGKILL the launcher (its namespace init follows it, taking every process in
    the namespace) and, for the modes without a PID namespace, every descendant, then
    the launcher's process group. ``alive=False``: the launcher was already reaped, so
    its pid may belong to someone else now; only the group (which keeps its id while a
    member lives) is signalled."""
    if alive:
        for pid in [root, *process_tree(root)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    try:
        os.killpg(root, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


_BOXES: dict[str, SandboxDir] = {}  # open sandbox folders, for the watchdog to find


def _box_of(proc) -> SandboxDir | None:
    """The sandbox folder whose jail ``proc`` runs (its config file is in it)."""
    args = getattr(proc, "args", None) or []
    for arg in reversed([str(a) for a in args] if isinstance(args, list) else []):
        box = _BOXES.get(str(Path(arg).parent))
        if box is not None:
            return box
    return None


class Monitor:
    """Watches one launched run until it exits or breaks a limit."""

    HEAD, TAIL = 48 << 10, 16 << 10

    def __init__(self, proc: subprocess.Popen, limits: Limits, *, channel_fd: int | None = None,
                 token: str | None = None, out_fds: dict[str, int] | None = None):
        """``out_fds``: {"stdout": fd, "stderr": fd} to read instead of the Popen's own
        pipes (pass duplicates when another party may close those, as jupyter_client
        does at kernel shutdown)."""
        self.proc, self.limits, self.token = proc, limits, token
        self.channel_fd = channel_fd
        self.out_fds = out_fds if out_fds is not None else {
            name: getattr(proc, name).fileno() for name in ("stdout", "stderr")
            if getattr(proc, name) is not None}
        self.outcome = Outcome()
        self._buffers = {"stdout": bytearray(), "stderr": bytearray()}
        self._tails = {"stdout": bytearray(), "stderr": bytearray()}
        self._total_output = 0
        self._channel = bytearray()
        self._heard = time.monotonic()  # when the last result (or the start) was
        self._stop = threading.Event()
        self._cgroups: cgroups.RunCgroups | None = None
        self._cpu = run_cpu.TreeCpu()  # without a cpuacct cgroup: the /proc figures
        self._box = _box_of(proc)
        self._shared_at, self._shared = 0.0, 0

    # -- output -------------------------------------------------------------------
    def _take_output(self, name: str, data: bytes) -> None:
        self._total_output += len(data)
        head = self._buffers[name]
        room = self.HEAD - len(head)
        if room > 0:
            head.extend(data[:room])
            data = data[room:]
        if data:
            tail = self._tails[name]
            tail.extend(data)
            del tail[:-self.TAIL]
        if self._total_output > self.limits.max_output_bytes:
            self._kill("output-limit")

    def _take_channel(self, data: bytes) -> None:
        self._channel.extend(data)
        while b"\n" in self._channel:
            line, _, rest = self._channel.partition(b"\n")
            self._channel = bytearray(rest)
            if len(self.outcome.channel) > 10_000:
                continue
            msg = protocol.parse_line(line, self.token)
            if msg is not None:
                self.outcome.channel.append(msg)
                self._heard = time.monotonic()
        if len(self._channel) > 1 << 20:
            self._channel.clear()

    # -- limits -------------------------------------------------------------------
    def _kill(self, reason: KillCause) -> None:
        if self.outcome.killed_for is None and self.proc.returncode is None:
            self.outcome.killed_for = reason
            self._read_cpu()  # what it got up to the kill (the /proc figures end here)
        # returncode None: not reaped yet, so the pid is still ours (a zombie at worst)
        kill_tree(self.proc.pid, alive=self.proc.returncode is None)

    def _poll_tree(self) -> None:
        if self._box is not None and self._disk_full():
            self._kill("disk-limit")
            return
        if self._cgroups is None:  # the launcher joins its cgroups first thing
            self._cgroups = cgroups.RunCgroups.of_process(self.proc.pid)
        group = self._cgroups
        if group is not None and group.oom_kills():
            self._kill("memory-limit")  # the kernel's backstop struck first
            return
        if group is not None and group.refused_forks():
            self._kill("process-limit")
            return
        if group is not None:  # the kernel's counts: no scan of /proc
            tree, table = [], {}
            tasks = group.tasks()
        else:
            table = _proc_table()
            tree = process_tree(self.proc.pid, table)
            tasks = sum(table[p][1] for p in tree)
            for pid in tree:
                if table[pid][3] is not None:
                    self._cpu.see(pid, *table[pid][3])
            self.outcome.cpu_s = self._cpu.seconds
        self.outcome.peak_tasks = max(self.outcome.peak_tasks, tasks)
        if tasks >= self.limits.max_tasks:  # first: a fork bomb makes PSS slow to read
            self._kill("process-limit")
            return
        if group is not None:
            self._read_cpu()
        limit = self.limits.memory_mb << 20
        used = group.memory_bytes() if group is not None else self._tree_memory(tree, table)
        self.outcome.peak_memory_mb = max(self.outcome.peak_memory_mb, used / 2**20)
        if used > limit:
            self._kill("memory-limit")

    def _read_cpu(self) -> None:
        """The run's CPU time so far: its cpuacct cgroup's count, else the last figure
        of each of its processes (the pids cgroup's list, else a scan of the tree)."""
        group = self._cgroups
        counted = group.cpu_seconds() if group is not None else None
        if counted is None:
            self._cpu.see_pids(group.pids() if group is not None
                               else [self.proc.pid, *process_tree(self.proc.pid)])
            counted = self._cpu.seconds
        self.outcome.cpu_s = max(counted, self.outcome.cpu_s or 0.0)

    def _tree_memory(self, tree: list[int], table: dict) -> int:
        """Without a memory cgroup: RSS (PSS when RSS says over), and at least what the
        last scan for shared memory (memfd, /dev/shm, the run's tmpfs) found."""
        limit = self.limits.memory_mb << 20
        used = sum(table[p][2] for p in tree)
        if used > limit:  # RSS counts pages shared after fork once per process: PSS
            used, budget_end = 0, time.monotonic() + 0.25
            for pid in sorted(tree, key=lambda p: -table[p][2]):
                used += _pss(pid)
                if used > limit or time.monotonic() > budget_end:
                    break
        now = time.monotonic()
        if now >= self._shared_at + SHARED_SCAN_S:
            tmpfs = self._box.quota_used() if self._box is not None else {}
            self._shared = shared_memory.run_bytes(tree, tmpfs)
            self._shared_at = time.monotonic()
        return max(used, self._shared)

    def _disk_full(self) -> bool:
        """The run's tmpfs (its disk quota) has no room left."""
        if not self._box.mounted:
            return False
        try:
            vfs = os.statvfs(self._box.path)
        except OSError:
            return False
        return vfs.f_bavail * vfs.f_frsize < (1 << 20) or vfs.f_favail < 16

    # -- loop ---------------------------------------------------------------------
    def run(self) -> Outcome:
        start = self._heard = time.monotonic()
        deadline = start + self.limits.wall_s
        sel = selectors.DefaultSelector()
        for name, fd in self.out_fds.items():
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ, name)
        if self.channel_fd is not None:
            os.set_blocking(self.channel_fd, False)
            sel.register(self.channel_fd, selectors.EVENT_READ, "channel")
        next_poll = start
        exited_at = None
        while True:
            now = time.monotonic()
            if self._stop.is_set():
                self._kill("stopped")
            if now >= deadline and self.outcome.killed_for is None:
                self._kill("wall-clock")
            quiet = self.limits.quiet_s
            if quiet and now >= self._heard + quiet and self.outcome.killed_for is None:
                self._kill("quiet")
            if now >= next_poll and self.proc.poll() is None:
                self._poll_tree()
                next_poll = now + self.limits.poll_s
            timeout = max(0.0, min(next_poll, deadline) - time.monotonic())
            for key, _ in sel.select(timeout=min(timeout, self.limits.poll_s)):
                try:
                    data = os.read(key.fd, 1 << 16)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fd)
                    continue
                if key.data == "channel":
                    self._take_channel(data)
                else:
                    self._take_output(key.data, data)
            if self.proc.poll() is not None:
                if not sel.get_map():
                    break
                if exited_at is None:
                    exited_at = time.monotonic()
                elif time.monotonic() > exited_at + 2:
                    kill_tree(self.proc.pid, alive=False)  # a leftover holds a pipe open
                    break
        sel.close()
        self.outcome.returncode = self.proc.wait()
        self.outcome.wall_s = time.monotonic() - start
        if self._cgroups is not None:  # the kernel's count includes the last moments
            self._read_cpu()
        for name in ("stdout", "stderr"):
            text = bytes(self._buffers[name])
            if self._tails[name]:
                text += b"\n[... output cut ...]\n" + bytes(self._tails[name])
            setattr(self.outcome, name, text.decode("utf-8", errors="replace"))
        return self.outcome

    def stop(self) -> None:
        """From another thread: end the run now (reason 'stopped')."""
        self._stop.set()


def run(jail: Jail, channel: tuple[int, int] | None = None, token: str | None = None
        ) -> Outcome:
    """Start the jailed command and watch it to the end.

    Args:
        jail: the command, its confinement and its ``Limits``.
        channel: the pipe (read, write) made by ``os.pipe()`` whose write end the jail
            was told about (the result channel); None: none.
        token: the run's secret; channel lines without it are not the runner's.

    Returns:
        The ``Outcome``: exit code, ``killed_for`` (None when no limit was hit), peak
        memory and tasks, CPU time, captured stdout/stderr, the channel's parsed JSON
        lines.
    """
    pass_fds = (channel[1],) if channel else ()
    proc = subprocess.Popen(jail.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            pass_fds=pass_fds)
    if channel:
        os.close(channel[1])
    try:
        return Monitor(proc, jail.limits, channel_fd=channel[0] if channel else None,
                       token=token).run()
    finally:
        if channel:
            os.close(channel[0])
        for stream in (proc.stdout, proc.stderr):
            if stream:
                stream.close()

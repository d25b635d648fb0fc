"""The child side of the sandbox: confine one command, then exec it.

    python autograder/jail.py CONFIG.json

Runs as a small launcher between the grader and the untrusted command (a checker stage
or a notebook kernel). Standard library only, so it starts in milliseconds. The config
file (written by ``autograder.sandbox``, readable only by root) is deleted once read.

As root, with Linux namespaces available (what the grader uses when it can):

* new mount, network, PID, IPC and UTS namespaces: the command sees an empty network
  with only loopback up (multi-process JAX on 127.0.0.1 still works), its own /proc (no
  grader process to inspect), its own SysV IPC (a segment another submission made is not
  there, and its own die with it) and host name, a /dev/shm and /dev/pts of its own (no
  pty another run allocated), and a file system that is read-only except its own work
  folder;
* the file system is an allow-list: the system's own folders (``SYSTEM_TOP``: /usr,
  /etc, ...) stay, and every other top-level folder or file (/tmp, /home, /root, /srv,
  /opt, /mnt, /var, /work, whatever the machine has) is covered by an empty read-only
  tmpfs into which only the paths the run needs are bound back: its sandbox folder (the
  course copy, the guard, its work folders) and the Python environment. Another copy of
  the course, other users' homes and scratch space are not there. The course folder
  (solutions, .git, gradebook, other submissions) is covered too, wherever it is;
* it runs as a throw-away uid (no passwd entry; ``autograder.uids`` never hands one out
  twice), so the per-uid process limit stops a fork bomb without touching anyone else,
  and it cannot signal or trace other processes;
* its own /proc shows a process only to its own uid (``hidepid=2``; the checker's group
  sees all), so no learner process finds the checker or its helpers there;
* no new privileges (setuid binaries do not elevate), parent-death signal, resource
  limits (data segment, file size, core dumps off, processes, open files), an empty
  session keyring and no key syscalls (``jail_keys``), and it joins the run's memory and
  pids cgroups (``autograder.cgroups``) before anything else.

With a ``spawner`` in the config (a checker run), init stays root and starts every
learner process on the checker's request, each as a uid of its own with its own home,
temporary and cache folders and namespaces (``jail_spawner``).

Process tree: this launcher (outside the namespaces) -> init (pid 1 inside: reaps,
reports) -> the command. When init exits, the kernel kills every process left in the
namespace, so nothing a submission forks can outlive its stage. The launcher exits the
way the command did (same exit code, or the same signal), so the grader reads a crash
as a crash.

Without root or namespaces it still applies what it can (limits, subreaper, no new
privileges) and says so on stderr; ``autograder.sandbox`` records the isolation level.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import signal
import socket
import struct
import sys

# -I: neither by itself; this folder (jail_keys, jail_spawner) and the course root
# (coursekit.procctl: standard library only)
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_HERE, os.path.dirname(_HERE)]
import jail_keys  # noqa: E402
import jail_spawner  # noqa: E402

from coursekit import procctl  # noqa: E402

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MS_NOATIME, MS_NODIRATIME, MS_RELATIME = 1 << 10, 1 << 11, 1 << 21
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWNET = 0x20000, 0x08000000, 0x40000000
RLIMITS = {"DATA": resource.RLIMIT_DATA, "FSIZE": resource.RLIMIT_FSIZE,
           "CORE": resource.RLIMIT_CORE, "NPROC": resource.RLIMIT_NPROC,
           "NOFILE": resource.RLIMIT_NOFILE}
FLAG_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC,
                "noatime": MS_NOATIME, "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME}
SYSTEM_PREFIXES = ("/proc", "/sys", "/dev")
# top-level entries left as they are (read-only); everything else is an allow-list
SYSTEM_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc", "proc",
              "sys", "dev")

_libc = procctl.libc()


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int,
          data: str | None = None) -> None:
    def enc(text: str | None) -> bytes | None:
        return None if text is None else text.encode()
    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags),
                       enc(data)), f"mount {target}")


def loopback_up() -> None:
    """``ip link set lo up`` without the ip binary (SIOCGIFFLAGS / SIOCSIFFLAGS)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14s", b"lo", 0, b"")
        flags = struct.unpack("16sH", fcntl.ioctl(s, 0x8913, req)[:18])[1]
        fcntl.ioctl(s, 0x8914, struct.pack("16sH14s", b"lo", flags | 1, b""))


def mount_points() -> list[tuple[str, int]]:
    """(mount point, per-mount flags to keep) for every mount of this namespace."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            target = fields[4].replace("\\040", " ")
            flags = 0
            for opt in fields[5].split(","):
                flags |= FLAG_OPTIONS.get(opt, 0)
            points.append((target, flags))
    return points


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def confine_filesystem(cfg: dict) -> None:
    """Everything read-only, the work folders writable, hidden paths covered."""
    before = mount_points()
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path in cfg.get("writable", []):  # own mounts first: a bind copies RO flags
        mount(path, path, None, MS_BIND | MS_REC)
    # a process sees only its own uid's processes there; the checker (proc_gid) sees all
    seen_by = f",gid={cfg['proc_gid']}" if cfg.get("proc_gid") is not None else ""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, f"hidepid=2{seen_by}")
    for path in cfg.get("hide", []):
        if os.path.isdir(path) and not os.path.islink(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV,
                  "size=4k,mode=755")
        elif os.path.lexists(path):
            mount("/dev/null", path, None, MS_BIND)
    cover_top_level(cfg.get("keep", []))
    reveal(cfg.get("reveal", []))
    writable = cfg.get("writable", [])
    for target, flags in before:
        if any(under(target, p) for p in SYSTEM_PREFIXES) or target in writable:
            continue
        try:
            mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)
        except OSError:
            pass  # left as it was; tests/test_autograder_batch.py checks / is read-only
    private_shm(cfg.get("shm_mb", 256))
    private_pts()


def private_shm(size_mb: int) -> None:
    mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, f"size={size_mb}m,mode=1777")


def private_pts() -> None:
    """A devpts instance of this mount namespace's own (``/dev/ptmx`` allocates from the
    ``pts`` beside it). The machine's /dev/pts is one instance for every run: a pty's
    owner, mode and times, set by one submission, were read by another graded at the same
    time (a copier took a solution's source from 78 ptys' timestamps)."""
    if os.path.isdir("/dev/pts"):
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
              "newinstance,ptmxmode=0666,mode=0620")


def isolate_learner(cfg: dict, namespaces: bool, own_network: bool) -> None:
    """In a new learner process (root still): its own mount and IPC namespaces with a
    private /dev/shm, and its own loopback-only network when ``own_network``. Nothing
    without the run's namespaces (the ``uid`` mode has none to start from)."""
    if not namespaces:
        return
    os.unshare(CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if own_network else 0))
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    private_shm(cfg.get("shm_mb", 256))
    private_pts()
    if own_network:
        loopback_up()


def cover_top_level(keep: list[str]) -> None:
    """Every top-level entry but ``SYSTEM_TOP`` hidden: a folder gets an empty read-only
    tmpfs with the ``keep`` paths inside it bound back (opened before the cover, so the
    bind brings each tree back with the mounts under it: the run's writable folders); a
    top-level file gets /dev/null. Symbolic links at the top (bin -> usr/bin) stay."""
    if not keep:
        return
    kept = sorted({os.path.realpath(k) for k in keep})
    # a kept path inside another kept path comes back with it
    kept = [k for k in kept if not any(k != o and under(k, o) for o in kept)]
    for name in sorted(os.listdir("/")):
        top = "/" + name
        if name in SYSTEM_TOP or os.path.islink(top):
            continue
        if not os.path.isdir(top):
            mount("/dev/null", top, None, MS_BIND)
            continue
        inside = [(k, os.open(k, os.O_PATH)) for k in kept if under(k, top) and k != top]
        if any(k == top for k in kept):
            continue  # the whole folder is needed (a sandbox root at the top)
        mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for path, fd in inside:
            os.makedirs(path, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)
        mount(None, top, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def reveal(paths: list[str]) -> None:
    """Make ``paths`` (the Python installation) reachable for the throw-away uid when a
    folder above them is private (pyenv under /root, 0700): cover that folder with an
    empty tmpfs and bind just these paths back into it. The rest of it stays hidden."""
    groups: dict[str, list[tuple[str, int]]] = {}
    for path in paths:
        parts = path.strip("/").split("/")
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            if not os.stat(ancestor).st_mode & 0o001:
                groups.setdefault(ancestor, []).append((path, os.open(path, os.O_PATH)))
                break
    for ancestor, inside in groups.items():
        mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=755")
        for path, fd in inside:
            os.makedirs(path, mode=0o755, exist_ok=True)
            mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
            os.close(fd)
        mount(None, ancestor, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def exec_command(cfg: dict) -> None:
    """Last steps inside: limits, identity, then exec. Never returns."""
    try:
        for name, value in cfg.get("rlimits", {}).items():
            resource.setrlimit(RLIMITS[name], (value, value))
        uid = cfg.get("uid")
        if uid is not None:
            os.setgroups(cfg.get("groups") or [])
            os.setgid(cfg.get("gid") or uid)
            os.setuid(uid)
        procctl.no_new_privileges()
        jail_keys.no_keys()
        procctl.die_with_parent()  # after setuid, which clears it
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)  # ignored signals would survive exec
        os.chdir(cfg["cwd"])
        os.umask(cfg.get("umask", 0o022))
        os.execve(cfg["cmd"][0], cfg["cmd"], cfg["env"])
    except BaseException as err:  # noqa: BLE001 - report and leave with a known code
        os.write(2, f"autograder jail: cannot start {cfg['cmd'][:2]}: {err}\n".encode())
        os._exit(127)


def run_init(cfg: dict, report_fd: int, launcher: int, namespaces: bool) -> None:
    """pid 1 of the namespace (or a subreaper without one): start the command, reap
    every process, report how the command ended, leave. Never returns."""
    try:
        procctl.die_with_parent()
        if os.getppid() not in (launcher, 0):  # 0: the parent is outside our PID ns
            os._exit(1)
        if namespaces:
            confine_filesystem(cfg)
            loopback_up()
        else:
            procctl.become_subreaper()
    except BaseException as err:  # noqa: BLE001
        os.write(2, f"autograder jail: confinement failed: {err}\n".encode())
        os.write(report_fd, b"setup-failed")
        os._exit(1)
    spawner = None
    if cfg.get("spawner"):
        spawner = jail_spawner.Spawner(
            cfg["spawner"], lambda own_network: isolate_learner(cfg, namespaces, own_network))
    child = os.fork()
    if child == 0:
        os.close(report_fd)
        if spawner is not None:
            spawner.give_to_command(cfg["env"])
        exec_command(cfg)
    status = None
    if spawner is not None:
        status = spawner.serve(child)  # leaving kills whatever is left in the namespace
        if not namespaces:
            spawner.stop_all()
    while spawner is None:
        try:
            pid, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if pid == child:
            status = st
            if namespaces:
                break  # leaving kills whatever the command left behind
    if not namespaces:
        kill_leftovers(cfg)
    if status is None:
        os.write(report_fd, b"lost")
    elif os.WIFSIGNALED(status):
        os.write(report_fd, f"signal {os.WTERMSIG(status)}".encode())
    else:
        os.write(report_fd, f"exit {os.waitstatus_to_exitcode(status)}".encode())
    os._exit(0)


def kill_leftovers(cfg: dict) -> None:
    """Without a PID namespace: kill what the command left (orphans came to us)."""
    uid = cfg.get("uid")
    if uid is not None:  # every process of the throw-away uid, wherever it went
        jail_spawner.kill_uid(uid)
    for _ in range(50):
        try:
            with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
                children = f.read().split()
        except OSError:
            children = []
        if not children:
            break
        for c in children:
            try:
                os.kill(int(c), signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            break


def main(path: str) -> None:
    with open(path) as f:
        cfg = json.load(f)
    os.unlink(path)
    for group in cfg.get("cgroups", []):  # first: every process of the run is counted
        try:
            with open(os.path.join(group, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as err:
            os.write(2, f"autograder jail: cgroup {group}: {err}\n".encode())
    procctl.die_with_parent()
    procctl.set_dumpable(False)  # the config (the run's token) stays unreadable to the run
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # an interrupt is for the command, not us
    namespaces = False
    if cfg.get("namespaces") and os.geteuid() == 0:
        try:
            os.unshare(os.CLONE_NEWNS | os.CLONE_NEWNET | os.CLONE_NEWPID
                       | os.CLONE_NEWIPC | os.CLONE_NEWUTS)
            namespaces = True
        except (OSError, AttributeError) as err:
            os.write(2, f"autograder jail: no namespaces ({err}); limits only\n".encode())
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    read_fd, write_fd = os.pipe()
    launcher = os.getpid()
    init = os.fork()
    if init == 0:
        os.close(read_fd)
        run_init(cfg, write_fd, launcher, namespaces)
    os.close(write_fd)
    os.waitpid(init, 0)
    report = os.read(read_fd, 64).decode()
    if report.startswith("signal "):
        sig = int(report.split()[1])
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be set
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    if report.startswith("exit "):
        os._exit(int(report.split()[1]) & 0xFF)
    os._exit(125)  # setup failed or the command vanished: the grader reads "crash"


if __name__ == "__main__":
    main(sys.argv[1])

"""The checker's side of the learner process: checks call the learner's functions here,
and the learner's code runs in another process (``coursekit.checking.learner_server``).

``LearnerProcess(impl_path).module()`` gives a ``RemoteModule`` whose attributes are the
learner's functions; calling one sends the arguments as data (``coursekit.checking.codec``)
and returns the result as data, or raises a named ``LearnerCodeError`` (the learner's
exception, with file, line and function) or ``LearnerProcessDied`` (a signal, an exit,
a kill; the next call starts a fresh learner process). Bytes on the bridge that are not a
frame raise ``TamperEvidence``.

The checker process is made non-dumpable before the first learner process starts, so a
learner process running as the same user cannot read its memory (``/proc/<pid>/mem``,
``environ``, ``fd/``) or ptrace it. The learner process gets an environment without any
channel secret and no descriptor but stdio and its two pipes. In the grader's jail as
root it is started by the jail's spawner (``coursekit.checking.spawn``): another uid than
the checker's, with its own HOME, temporary and cache folders and namespaces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

from coursekit import procctl
from coursekit.checking import spawn
from coursekit.checking.codec import Encoder, Handle, LearnerFunction, Workload, decode
from coursekit.checking.errors import LearnerCodeError, LearnerProcessDied, TamperEvidence
from coursekit.checking.wire import protocol

__all__ = ["Handle", "LearnerFunction", "LearnerProcess", "Workload"]
COURSE_ROOT = Path(__file__).resolve().parents[2]
MAX_STARTS = 3  # a learner process that keeps dying is not restarted for every check
VIOLATION_SINKS: list = []  # callables(what, detail): the runner relays to the grader
_PRESTARTED: dict = {}
# Learner processes of this checker that are running: one at a time may hold an
# accelerator (a TPU admits one process), so a new one that may use it first stops those
# that hold it (``take_accelerator``); each starts again on its next request.
_LIVE: weakref.WeakSet = weakref.WeakSet()
# None: every learner process starts cold (``python -m ...learner_server``). The planted
# runner sets ``coursekit.checking.zygote.Zygotes()``: a callable (environment, file,
# read fd, write fd) -> a process forked warm, or None to start this one cold.
FORK_FROM = None


def make_undumpable() -> None:
    procctl.set_dumpable(False)


def _stat_seconds(pid: int, first: int) -> float:
    """Fields ``first`` and ``first + 1`` of ``/proc/<pid>/stat`` (after the command's
    parentheses), in seconds; 0.0 when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return 0.0
    fields = raw[raw.rfind(b")") + 2:].split()
    return (int(fields[first]) + int(fields[first + 1])) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """user + system CPU seconds of ``pid`` so far, read by this process (not reported)."""
    return _stat_seconds(pid, 11)


def children_cpu_s(pid: int) -> float:
    """user + system CPU seconds of the children ``pid`` started and waited for
    (``cutime`` + ``cstime``), read by this process from the kernel: evidence that
    processes ran that no figure the learner's code returns can stand in for."""
    return _stat_seconds(pid, 13)


class LearnerProcess:
    """One learner file served by a learner process (started on first use, restarted
    after it dies)."""

    def __init__(self, impl_path: Path | str, *, env: dict | None = None):
        """``env``: variables to set in the learner process's environment (on top of the
        checker's, which never carries a channel secret), e.g. another PYTHONHASHSEED."""
        self.impl_path = Path(impl_path).resolve()
        self.extra_env = {str(k): str(v) for k, v in (env or {}).items()}
        self.proc: subprocess.Popen | None = None
        self.ready: dict | None = None
        self.last_cpu_s = 0.0   # CPU the learner process spent in the last request
        self.last_wall_s = 0.0  # wall time of the last request, measured here
        self.starts = 0
        self.last_death: LearnerCodeError | None = None
        self.backend: str | None = None  # the JAX backend it has opened (it says so)
        # one request at a time: a request is a frame written and its answer read, and two
        # threads sharing the pipes interleave their frames (on a chip a checker thread
        # warming train_slow in the learner process met another's gain_sweep: each read
        # the other's bytes as "not a frame"). Reentrant: a request starts the process.
        self.lock = threading.RLock()

    # -- process -------------------------------------------------------------------
    def start(self) -> None:
        attach = os.environ.pop(protocol.ENV_ATTACH, None)
        if attach:  # a notebook kernel holding the chip serves this learner side itself
            self.wfd, self.rfd = (int(v) for v in attach.split(","))
            self.proc, self.ready, self.backend = Attached(), None, None
            self.starts += 1
            _LIVE.add(self)
            return
        if any(isinstance(p.proc, Attached) and holds_accelerator(p) for p in list(_LIVE)):
            from coursekit.checking.errors import CheckInconclusive
            raise CheckInconclusive(
                "this check needs your code in a fresh process on the chip, and the "
                "notebook kernel that runs this check holds the chip (one process at a "
                "time can)", hint="run the same check from a terminal (python "
                "projects/<project>/tests/check.py --stage N --impl ...) with no notebook "
                "kernel holding the chip: it decides this check there")
        make_undumpable()
        to_learner_r, to_learner_w = os.pipe()
        from_learner_r, from_learner_w = os.pipe()
        # the user's own JAX platforms come back (the accelerator is the learner's); a
        # checker's explicit variables (its fake CPU devices) are applied after them
        env = {**protocol.learner_environment(os.environ), **self.extra_env}
        if env.get("JAX_PLATFORMS") != "cpu":
            take_accelerator(keep=self)
        env["PYTHONPATH"] = os.pathsep.join(
            [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] + [str(COURSE_ROOT)])
        self.proc = None
        if FORK_FROM is not None and not spawn.available():  # a zygote runs as this uid
            self.proc = FORK_FROM(env, self.impl_path, to_learner_r, from_learner_w)
        if self.proc is None:
            env[protocol.ENV_BRIDGE] = f"{to_learner_r},{from_learner_w}"
            # in the grader's jail: another uid with its own home, folders, namespaces
            self.proc = spawn.launch(
                [sys.executable, "-m", "coursekit.checking.learner_server",
                 str(self.impl_path)], env, pass_fds=(to_learner_r, from_learner_w))
        os.close(to_learner_r)
        os.close(from_learner_w)
        self.wfd, self.rfd = to_learner_w, from_learner_r
        self.ready = None
        self.backend = None
        self.starts += 1
        _LIVE.add(self)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def close(self) -> None:
        if self.proc is None:
            return
        self._hold("free")  # held still between calls: let it see the pipe close
        for fd in (self.wfd, self.rfd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def _died(self, during: str) -> LearnerProcessDied:
        proc, self.proc = self.proc, None
        for fd in (getattr(self, "wfd", None), getattr(self, "rfd", None)):
            try:
                os.close(fd)
            except (OSError, TypeError):
                pass
        if proc is None:  # gone before its handle existed, or already reaped
            self.last_death = LearnerProcessDied(
                f"the learner process ended before the checker held it, while {during}",
                "no process")
            return self.last_death
        try:
            code = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        if code < 0:
            try:
                cause = signal.Signals(-code).name
            except ValueError:
                cause = f"signal {-code}"
        else:
            cause = f"exit {code}"
        how = f"({cause})" if code < 0 else f"(it exited with code {code})"
        self.last_death = LearnerProcessDied(f"the learner process died {how} while {during}",
                                             cause)
        return self.last_death

    def _read(self, during: str) -> tuple[dict, list]:
        try:
            header, buffers = protocol.read_frame(self.rfd)
        except (EOFError, OSError):
            raise self._died(during) from None
        except protocol.ProtocolError as err:
            if self.proc is not None:
                self.proc.kill()
            self._died(during)
            self.last_death = TamperEvidence(f"the learner process wrote to the bridge "
                                             f"outside the protocol while {during}: {err}")
            raise self.last_death from None
        if header.get("backend"):
            self.backend = str(header["backend"])
        for v in header.get("violations") or []:
            if isinstance(v, dict):
                for sink in VIOLATION_SINKS:
                    sink(str(v.get("what", "violation")), str(v.get("detail", "")))
        return header, buffers

    def _ensure(self) -> dict:
        if self.proc is None:
            if self.last_death is not None and self.starts >= MAX_STARTS:
                raise self.last_death  # the same named failure, without another start
            self.start()
        if self.ready is None:
            header, _ = self._read(f"importing {self.impl_path.name}")
            if header.get("kind") != "ready":
                raise TamperEvidence(f"the learner process answered {header.get('kind')!r} "
                                     "before it was ready")
            self.ready = header
            self._hold("stop")
        return self.ready

    def _hold(self, how: str) -> None:
        """Under the grader's spawner, every process of the learner's uid is stopped
        between its calls ("stop") and only this one runs during a call ("run"), so load
        its other processes make never reaches what the checker measures (issue 52;
        ``autograder/jail_spawner.py``). Elsewhere nothing."""
        hold = getattr(self.proc, "hold", None)
        if hold is not None:
            hold(how)

    # -- calls -----------------------------------------------------------------------
    def module(self) -> RemoteModule:
        """The learner's module as seen from here, or the load error (named)."""
        with self.lock:
            ready = self._ensure()
        err = ready.get("load_error")
        if err:
            raise LearnerCodeError(str(err.get("kind")), str(err.get("message")),
                                   str(err.get("hint", "")))
        return RemoteModule(self, [str(f) for f in ready.get("functions", [])],
                            ready.get("unwritten"))

    def request(self, kind: str, fn: str, args=(), kwargs=None, **extra):
        with self.lock:  # a frame out and its answer in, with no other request between
            return self._request(kind, fn, args, kwargs, **extra)

    def _request(self, kind: str, fn: str, args=(), kwargs=None, **extra):
        self._ensure()
        encoder = Encoder()
        header = {"kind": kind, "fn": fn, "args": encoder(list(args)),
                  "kwargs": encoder(dict(kwargs or {})), **extra}
        self._hold("run")
        proc = self.proc
        try:
            cpu_before = process_cpu_s(self.proc.pid)
            started = time.perf_counter()
            try:
                protocol.write_frame(self.wfd, header, encoder.buffers)
            except OSError:
                raise self._died(f"running {fn}") from None
            reply, buffers = self._read(f"running {fn}")
            self.last_wall_s = time.perf_counter() - started
            self.last_cpu_s = process_cpu_s(self.proc.pid) - cpu_before
        finally:
            if self.proc is proc:
                self._hold("stop")
        facts = reply.get("facts") or {}
        for wl in encoder.workloads:
            if isinstance(facts.get(str(wl.id)), dict):
                wl.facts = facts[str(wl.id)]
        if reply.get("kind") == "error":
            err = reply.get("error") or {}
            raise LearnerCodeError(str(err.get("kind", "exception")), str(err.get("message")),
                                   str(err.get("hint", "")), str(err.get("type", "")))
        if reply.get("kind") != "result":
            raise TamperEvidence(f"the learner process answered {reply.get('kind')!r}")
        return decode(reply.get("value"), buffers)


class Attached:
    """The learner side served by the notebook kernel that runs the check
    (``coursekit.checking.attached``): no process of ours to wait for or kill."""

    pid = None
    returncode = None

    def __init__(self):
        self.pid = os.getppid()  # the kernel: its CPU is the learner side's CPU

    def poll(self):
        return None

    def wait(self, timeout=None):
        return 0

    def kill(self):
        pass

    def send_signal(self, sig):
        pass

    def terminate(self):
        pass


def holds_accelerator(process) -> bool:
    """Whether ``process`` (a LearnerProcess) has opened a backend other than the CPU."""
    return getattr(process, "proc", None) is not None and process.backend not in (None, "cpu")


def take_accelerator(keep=None) -> int:
    """Stop every running learner process that holds an accelerator, but ``keep``, so the
    chip is free for another process (a fresh learner process, a reference child on the
    device). Each starts again on its next request, its handles gone. Returns how many
    were stopped. On a CPU (no process holds an accelerator) it does nothing."""
    stopped = 0
    for process in list(_LIVE):
        if process is not keep and holds_accelerator(process) and \
                not isinstance(process.proc, Attached):
            process.close()
            stopped += 1
    return stopped


def inspect(module, name: str, *args, **kwargs):
    """Run the inspector ``name`` (``coursekit.workloads.inspectors``) where the learner's
    code runs, on ``args`` (data, ``Handle``s, ``LearnerFunction``s), and return its
    answer as data. The answer is self-reported: the caller cross-checks it."""
    return module.__bridge__.request("inspect", name, args, kwargs)


class RemoteFunction:
    def __init__(self, process: LearnerProcess, name: str):
        self.process, self.__name__ = process, name

    def __call__(self, *args, **kwargs):
        return self.process.request("call", self.__name__, args, kwargs)

    def export(self, *args, transform: str | None = None, out_example=None, **kwargs):
        """This function (under ``transform``) as a ``jax.export.Exported`` program built
        here from the StableHLO bytes the learner process sent; ``out_example`` gives the
        output tree (flat otherwise)."""
        desc = self.process.request("export", self.__name__, args, kwargs,
                                    transform=transform)
        return exported_program(desc, args, out_example)

    def __repr__(self) -> str:
        return f"<learner function {self.__name__}>"


class RemoteModule:
    """The learner's module: its functions, called in the learner process."""

    def __init__(self, process: LearnerProcess, functions: list[str],
                 unwritten: dict | None = None):
        """``unwritten``: the learner process's report of the functions still the
        starter's stub, each with the error a call raises (``learner.require_written``).
        Self-reported, and only ever the same failure sooner."""
        self.__bridge__ = process
        self.__file__ = str(process.impl_path)
        self.__functions = set(functions)
        self.__unwritten__ = {
            str(name): LearnerCodeError(str(e.get("kind")), str(e.get("message")),
                                        str(e.get("hint", "")), str(e.get("type", "")))
            for name, e in (unwritten.items() if isinstance(unwritten, dict) else ())
            if isinstance(e, dict) and e.get("kind") == "not-implemented"}

    def __getattr__(self, name: str):
        if name.startswith("_") or name not in self.__functions:
            raise AttributeError(name)
        return RemoteFunction(self.__bridge__, name)


def exported_program(desc: dict, args: tuple, out_example=None):
    """The learner's exported function rebuilt here (``coursekit.checking.programs``)."""
    from coursekit.checking.programs import rebuild
    return rebuild(desc, args, out_example)


def prestart(impl_path: Path | str, *, env: dict | None = None) -> None:
    """Start the learner process for ``impl_path`` now (it imports while the checker
    does); ``Checker.run`` takes it over. ``env`` as for ``LearnerProcess`` (a checker's
    declared device count, so the early process sees the devices the checker will)."""
    lp = LearnerProcess(impl_path, env=env)
    lp.start()
    _PRESTARTED[lp.impl_path] = lp


def prestart_for(check_source: str, impl_path: Path | str) -> None:
    """Prestart as a grader does for the ``check.py`` whose text is ``check_source``: with
    the fake CPU device count it declares (``LEARNER_CPU_DEVICES = N``), if any."""
    devices = protocol.declared_cpu_devices(check_source)
    env = None
    if devices:  # the checker sets them before its jax import; the early process too
        from coursekit.facts import use_cpu_devices
        full = use_cpu_devices(devices, dict(os.environ))
        env = {k: full[k] for k in ("XLA_FLAGS", "JAX_PLATFORMS")}
    prestart(impl_path, env=env)


def discard_prestarted_unless(env: dict) -> int:
    """Stop every prestarted learner process whose environment differs from ``env`` in
    any of its keys (a checker that set its devices after the early start); returns how
    many were kept. ``Checker.run`` then starts a fresh one with this environment."""
    kept = 0
    for path in list(_PRESTARTED):
        early = _PRESTARTED[path]
        seen = {**os.environ, **getattr(early, "extra_env", {})}
        if all(seen.get(k) == v for k, v in env.items()):
            kept += 1
            continue
        del _PRESTARTED[path]
        if getattr(early, "proc", None) is not None:
            early.proc.kill()
        early.close()
    return kept


def take(impl_path: Path | str) -> LearnerProcess:
    path = Path(impl_path).resolve()
    return _PRESTARTED.pop(path, None) or LearnerProcess(path)


class InProcess:
    """The same interface as ``LearnerProcess`` with the learner's module imported here
    (no isolation): the baseline ``bench/bench_bridge.py`` measures the bridge against."""

    def __init__(self, impl_path: Path | str):
        from coursekit.checking.learner import load_impl
        self.impl_path = Path(impl_path).resolve()
        self.pid = os.getpid()
        self.last_cpu_s = self.last_wall_s = 0.0
        self.loaded = load_impl(self.impl_path)

    def module(self) -> RemoteModule:
        from coursekit.checking.learner import unwritten_report
        names = [n for n, v in vars(self.loaded).items() if callable(v)]
        return RemoteModule(self, names, unwritten_report(self.loaded, self.impl_path))

    def close(self) -> None:
        pass

    def request(self, kind: str, fn: str, args=(), kwargs=None, **extra):
        from coursekit.checking.probes import CallCounter
        from coursekit.checking.programs import export_call
        from coursekit.workloads import catalog
        counters = {}

        def resolve(value):
            if isinstance(value, Workload):
                counters[value] = CallCounter(catalog.build(value.name, value.params))
                return counters[value]
            if isinstance(value, LearnerFunction):
                return getattr(self.loaded, value.name)
            if type(value) in (list, tuple):
                return type(value)(resolve(v) for v in value)
            if type(value) is dict:
                return {k: resolve(v) for k, v in value.items()}
            return value
        args, kwargs = resolve(list(args)), resolve(dict(kwargs or {}))
        cpu, started = time.process_time(), time.perf_counter()
        if kind == "inspect":
            from coursekit.workloads import inspectors
            try:
                return inspectors.run(fn, args, kwargs)
            finally:
                self.last_wall_s = time.perf_counter() - started
                self.last_cpu_s = time.process_time() - cpu
        function = getattr(self.loaded, fn)
        try:
            if kind == "export":
                return export_call(function, args, kwargs, extra.get("transform"))
            return function(*args, **kwargs)
        finally:
            self.last_wall_s = time.perf_counter() - started
            self.last_cpu_s = time.process_time() - cpu
            for wl, counter in counters.items():
                wl.facts = counter.report()

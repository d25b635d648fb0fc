"""The learner process: imports the learner's file and answers the checker's calls with
data. It holds no verdict logic and no result channel.

    python -m coursekit.checking.learner_server IMPL_PATH     (AG_BRIDGE="READ_FD,WRITE_FD")

A learner file that is a notebook (``IMPL_PATH`` ends in ``.ipynb``) is served by
``coursekit.notebook.cell_server``: the notebook's cells run here, one ``cell`` request
each, and a test process on the checker's side reads the names its test cells need.

Started by ``coursekit.checking.bridge``. Its environment has no channel secret, its only
open descriptors are stdin (/dev/null), stdout, stderr and the two bridge pipes. Frames
(``coursekit.protocol``): the checker sends ``call``/``export`` requests, this process
answers each with ``result`` or ``error``, beside which it names the facts it reports
about itself (the call counts of every ``Workload`` the call used) and any refusal the
sandbox guard made in this process (``violations``) for the checker to relay.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

from coursekit import procctl
from coursekit.checking.wire import protocol

CAP_LAST = 63


def drop_privileges() -> None:
    """As root (the fallback grading mode forced under root): give up every capability,
    so this process cannot read the non-dumpable checker's memory or signal other users."""
    if os.geteuid() != 0 or not sys.platform.startswith("linux"):
        return
    for cap in range(CAP_LAST + 1):
        try:
            procctl.drop_capability(cap)
        except OSError:  # a capability this kernel does not know
            pass

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]
    data = (Data * 2)()
    procctl.libc().capset(ctypes.byref(Header(0x20080522, 0)), data)
    procctl.no_new_privileges()


def snapshot() -> dict:
    """(module, attribute) -> object for the checker code and the clocks, so a learner
    file replacing any of them is named (the verdict is elsewhere; this says who tried)."""
    out = {}
    for mod_name in protocol.CHECKER_MODULES:
        mod = sys.modules.get(mod_name)
        if mod is None:
            continue
        out[(mod_name, "<module>")] = mod
        for name, value in list(vars(mod).items()):
            if not callable(value):
                continue  # module state (a flag, a lock, a cache) changes by itself
            out[(mod_name, name)] = value
            if isinstance(value, type) and value.__module__ == mod_name:
                for attr, inner in list(vars(value).items()):
                    out[(mod_name, f"{name}.{attr}")] = inner
    import time
    for name in protocol.PROTECTED_TIMING["time"]:
        out[("time", name)] = time.__dict__.get(name)
    jax = sys.modules.get("jax")
    if jax is not None:
        out[("jax", "block_until_ready")] = jax.__dict__.get("block_until_ready")
    return out


def changed(before: dict) -> list[tuple[str, str]]:
    """[(violation name, detail)] for what differs from ``before``."""
    now = snapshot()
    found = []
    for key, obj in before.items():
        mod_name, name = key
        if now.get(key) is obj:
            continue
        what = protocol.TAMPER_TIMING if mod_name in protocol.PROTECTED_TIMING \
            else protocol.TAMPER_CHECKER
        found.append((what, f"replacing {mod_name}.{name} in the learner process"
                      if name != "<module>" else f"replacing module {mod_name}"))
    return found


def open_backend() -> str | None:
    """The JAX backend this process has opened (``"tpu"``, ``"cpu"``), or None while none
    is: a process holds an accelerator from its first computation on, and the checker
    needs to know who holds it (one process at a time can hold a TPU)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None or not getattr(bridge, "_backends", None):
        return None
    try:
        return str(sys.modules["jax"].default_backend())
    except Exception:  # noqa: BLE001 - a backend that broke holds nothing we can name
        return None


class Server:
    def __init__(self, impl_path: Path, rfd: int, wfd: int):
        self.protocol = protocol
        self.impl_path, self.rfd, self.wfd = impl_path, rfd, wfd
        self.handles: dict = {}
        self.counters: dict = {}
        self.module = None
        self.reported: set = set()
        self.reach = None  # what keeps the forbidden course code from the learner's code

    def keep_out_of_reach(self) -> None:
        """What the forbidden rules keep from the learner's file stays out of its code's
        reach by any route while it runs, a name built at run time included. In a learner
        process of its own only (``main``): it cannot be undone, and a notebook kernel
        that serves a check (``coursekit.checking.attached``) is the learner's own."""
        from coursekit.checking import reach
        named = os.environ.get(protocol.ENV_PROJECT)
        project = named if named in reach.STAGES else reach.project_of(self.impl_path)
        self.reach = reach.install(project)

    def course_turn(self):
        """A block where the checker's own code runs here (``coursekit.checking.reach``)."""
        import contextlib
        return self.reach.course_turn() if self.reach else contextlib.nullcontext()

    # -- facts and violations -------------------------------------------------------
    def violations(self) -> list[dict]:
        out = []
        guard = sys.modules.get("sitecustomize")
        drain = getattr(guard, "drain_violations", None)
        for what, detail in (drain() if callable(drain) else []):
            out.append({"what": what, "detail": detail})
        for what, detail in changed(self.before):
            if (what, detail) not in self.reported:
                self.reported.add((what, detail))
                out.append({"what": what, "detail": detail})
        return out

    def resolve(self, name: str, params: dict, wid: int):
        from coursekit.checking.probes import CallCounter
        from coursekit.workloads import catalog
        with self.course_turn():  # a checker-named workload, built by the course's code
            counter = CallCounter(catalog.build(name, params))
        self.counters[wid] = counter
        return counter

    def learner_function(self, name: str):
        """The learner module's attribute ``name`` (an AttributeError names what is
        missing, as a call of it would)."""
        return getattr(self.module, str(name))

    def reply(self, header: dict, buffers=()) -> None:
        header["facts"] = {str(wid): c.report() for wid, c in self.counters.items()}
        header["backend"] = open_backend()
        header["violations"] = self.violations()
        self.counters = {}
        self.protocol.write_frame(self.wfd, header, buffers)

    # -- requests ---------------------------------------------------------------------
    def load(self) -> None:
        # the checker's modules (protocol.CHECKER_MODULES) are loaded before the learner's
        # file, so the snapshot holds them and a file that replaces any of them is named
        import coursekit.checking.bridge  # noqa: F401
        import coursekit.checking.contract  # noqa: F401
        import coursekit.checking.probes  # noqa: F401
        import coursekit.checking.values  # noqa: F401
        import coursekit.measure.timing  # noqa: F401
        from coursekit.checking.errors import LearnerCodeError
        from coursekit.checking.learner import load_impl, unwritten_report
        self.before = snapshot()
        try:
            self.module = load_impl(self.impl_path)
            error = None
        except LearnerCodeError as err:
            error = {"kind": err.kind, "message": str(err), "hint": err.hint}
        functions = [] if self.module is None else sorted(
            name for name, value in list(vars(self.module).items())
            if callable(value) and not name.startswith("__"))
        stubs = {} if self.module is None else unwritten_report(self.module, self.impl_path)
        self.reply({"kind": "ready", "pid": os.getpid(), "functions": functions,
                    "unwritten": stubs, "load_error": error})

    def handle(self, header: dict, buffers: list) -> None:
        from coursekit.checking.codec import Encoder, decode
        from coursekit.checking.learner import explain_exception
        kind = header.get("kind")
        try:
            args = decode(header.get("args", []), buffers, handles=self.handles,
                          resolve=self.resolve, learner=self.learner_function)
            kwargs = decode(header.get("kwargs", {}), buffers, handles=self.handles,
                            resolve=self.resolve, learner=self.learner_function)
            if kind == "inspect":  # a checker-named inspector, not a learner function
                from coursekit.workloads import inspectors
                with self.course_turn():
                    value = inspectors.run(str(header["fn"]), args, kwargs)
            elif kind == "call":
                value = self.learner_function(header["fn"])(*args, **kwargs)
            elif kind == "export":
                from coursekit.checking.programs import export_call
                value = export_call(self.learner_function(header["fn"]), args, kwargs,
                                    header.get("transform"))
            else:
                raise ValueError(f"unknown request {kind!r}")
        except BaseException as err:  # noqa: BLE001 - anything the learner code raises
            if isinstance(err, KeyboardInterrupt):
                raise
            explained = explain_exception(err, self.impl_path)
            self.reply({"kind": "error", "error": {
                "kind": explained.kind, "message": str(explained), "hint": explained.hint,
                "type": type(err).__name__}})
            return
        encoder = Encoder(keep=self.handles)
        try:
            tree = encoder(value)
        except Exception as err:  # noqa: BLE001
            self.reply({"kind": "error", "error": {
                "kind": "exception", "message": f"the result could not be read: {err}",
                "hint": "return plain data: numbers, strings, lists, dicts, arrays",
                "type": type(err).__name__}})
            return
        self.reply({"kind": "result", "value": tree}, encoder.buffers)

    def serve(self) -> None:
        self.load()
        while True:
            try:
                header, buffers = self.protocol.read_frame(self.rfd)
            except EOFError:
                return
            self.handle(header, buffers)


MATMUL_PRECISION = "highest"  # on an accelerator: float32 products keep float32 digits
OPEN_TRIES, OPEN_WAIT_S = 15, 1.0


def open_accelerator() -> None:
    """On a machine with an accelerator: open it before the learner's file is imported,
    trying again while another process lets go of it (a chip refuses a program started
    just after another ended), and make float32 matmuls float32 (a TPU's default
    precision multiplies in bfloat16 passes: three digits where the contracts promise
    float32's). A learner who wants bfloat16 speed asks for it with bfloat16 arrays."""
    import time

    import jax
    jax.config.update("jax_default_matmul_precision", MATMUL_PRECISION)
    for attempt in range(OPEN_TRIES):
        try:
            jax.devices()
            return
        except RuntimeError as err:
            if "lockfile" not in str(err) or attempt == OPEN_TRIES - 1:
                return  # the learner's first JAX call raises it again, named there
            time.sleep(OPEN_WAIT_S)


# A learner "file" that is a notebook is served by a server of the notebook floor, looked
# up by name (it runs cells in an IPython shell: coursekit.notebook.cell_server).
SERVERS = {".ipynb": ("coursekit.notebook.cell_server", "NotebookServer")}


def server_class(impl_path: Path) -> type:
    found = SERVERS.get(impl_path.suffix)
    if found is None:
        return Server
    import importlib
    return getattr(importlib.import_module(found[0]), found[1])


def off_stdio(fd: int) -> int:
    """``fd`` itself, or, when it is 0, 1 or 2, a copy of it above them, the low number
    then pointing at /dev/null: whatever writes to stdout or stderr in this process (an
    accelerator runtime's log lines, a learner's print) never lands in a bridge frame."""
    if fd > 2:
        return fd
    import fcntl
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 3)
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, fd)
    os.close(null)
    return moved


def main() -> None:
    fds = os.environ.pop(protocol.ENV_BRIDGE)
    rfd, wfd = (off_stdio(int(v)) for v in fds.split(","))
    drop_privileges()
    if os.environ.get(protocol.ENV_ACCELERATOR) == "1":
        open_accelerator()
    impl_path = Path(sys.argv[1])
    server = server_class(impl_path)(impl_path, rfd, wfd)
    server.keep_out_of_reach()
    server.serve()
    sys.stdout.flush()
    os._exit(0)  # no atexit handlers from learner code after the checker is done


if __name__ == "__main__":
    main()

"""The one protocol every side of a graded run speaks: the grader, the runner (checker
process), the sandbox guard, the checker's bridge and the learner process.

Standard library only, at the bottom of the course's layers: the grader (``autograder``)
and the checker's side (``coursekit.checking``) both import it, and it imports neither.
The sandbox copies this file next to the runner as ``autograder_protocol.py``: the runner
and the guard load that copy (the course folder is hidden there), and the checking side
prefers it too (``coursekit.checking.wire``), so every side of a graded run speaks the
grader's copy. Elsewhere it is ``coursekit.protocol``.

Two channels:

* the **result channel** (checker process -> grader): JSON lines on an inherited pipe,
  each carrying the run's token. Only the checker process holds it; the learner process
  never gets its fd, its token or ``AG_POLICY`` (``learner_environment``).
* the **bridge** (checker process <-> learner process): frames on a pair of pipes. A frame
  is ``MAGIC``, a part count, the part lengths, then the parts: part 0 is a JSON header,
  the rest raw array buffers. Nothing on either channel is ever unpickled.
"""

from __future__ import annotations

import json
import os
import re
import struct

# -- environment ---------------------------------------------------------------------
ENV_STAGE = "AG_STAGE"      # grader -> runner: what to check (JSON)
ENV_TOKEN = "AG_TOKEN"      # grader -> runner: the result channel's token
ENV_POLICY = "AG_POLICY"    # grader -> sandboxed Pythons: guard policy + result fd
ENV_GUARD = "AG_GUARD"      # checker -> learner process: guard policy without any fd
ENV_BRIDGE = "AG_BRIDGE"    # checker -> learner process: "READ_FD,WRITE_FD"
ENV_SPAWNER = "AG_SPAWNER"  # jail -> checker: the spawner's socket (learner processes)
# notebook kernel -> check.py: "WRITE_FD,READ_FD" of a learner server the kernel runs itself
# (it holds the chip; coursekit.checking.attached)
ENV_ATTACH = "COURSE_ATTACHED_LEARNER"
# checker -> learner process: the project whose forbidden rules its reach guard holds (a
# learner file may live anywhere: ``check.py --impl /tmp/x.py`` is not under projects/)
ENV_PROJECT = "COURSE_CHECKED_PROJECT"
SECRET_ENV = (ENV_STAGE, ENV_TOKEN, ENV_POLICY, ENV_GUARD, ENV_BRIDGE, ENV_SPAWNER,
              ENV_ATTACH)
# What the jail's spawner gives each learner process of its own: variable -> folder in
# its private area (owned by its uid, 0700), and the checker's variables it drops (a
# cache or store the checker uses must not be the learner's).
LEARNER_FOLDERS = {"HOME": "home", "TMPDIR": "tmp", "TMP": "tmp", "TEMP": "tmp",
                   "XDG_CACHE_HOME": "cache", "XDG_CONFIG_HOME": "config",
                   "XDG_DATA_HOME": "data", "XDG_STATE_HOME": "state",
                   "MPLCONFIGDIR": "mpl", "IPYTHONDIR": "ipython",
                   "COURSE_RECORDS": "records"}
LEARNER_DROPPED_ENV = ("JAX_COMPILATION_CACHE_DIR", "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS",
                       "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "MLFLOW_TRACKING_URI",
                       "PYTHONPYCACHEPREFIX")

# -- result channel message kinds ------------------------------------------------------
CHECK, VIOLATION, DONE, ERROR = "check", "violation", "done", "error"
KINDS = (CHECK, VIOLATION, DONE, ERROR)

# -- violation names (the gradebook's ``reason``) --------------------------------------
TAMPER_TIMING = "tamper-timing"        # replacing a clock or jax.block_until_ready
TAMPER_CHECKER = "tamper-checker"      # replacing checker code in the learner process
TAMPER_EVIDENCE = "tamper-evidence"    # a self-reported fact contradicted by measurement
TAMPER_PREFIX = TAMPER_EVIDENCE + ": "  # how a check result message says it

# -- sealed reference programs --------------------------------------------------------
# A sealed program's file (coursekit.checking.sealed) replays a stage's answer or holds a
# complete train step: in a stage run the checker runs it in its own process, and no
# learner process may open one (the grader's policy says LEARNER_SEALED; the learner
# process's guard then refuses the read, whatever name the path goes by, and as root the
# copy's programs are the checker group's alone). A notebook's kernel runs the course's
# programs itself (notebooks 05 and 08), so a notebook run refuses none.
SEALED_SUFFIX = ".jaxexport"
LEARNER_SEALED = "learner_sealed"

# -- isolation of learner code from the verdict (recorded per stage) -------------------
LEARNER_PROCESS, IN_PROCESS = "learner-process", "in-process"

# -- protected names -----------------------------------------------------------------
# module -> names a submission may not replace (refused by the guard where it runs)
PROTECTED_TIMING = {
    "time": frozenset({"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns",
                       "time", "time_ns", "process_time", "process_time_ns"}),
    "jax": frozenset({"block_until_ready"}),
}
# modules whose functions and classes the learner process watches: a learner file that
# replaces them has tried to change a verdict (which lives in another process anyway)
CHECKER_MODULES = ("coursekit.checking.contract", "coursekit.checking.learner",
                   "coursekit.checking.values", "coursekit.checking.bridge",
                   "coursekit.checking.errors", "coursekit.checking.learner_server",
                   "coursekit.measure.timing")


# -- result channel --------------------------------------------------------------------

def open_channel(environ=os.environ):
    """Take the token and fd out of the environment and return ``send(kind, **payload)``.
    The token lives only in this closure, not in a module global or the environment."""
    token = environ.pop(ENV_TOKEN, "")
    fd = json.loads(environ.get(ENV_POLICY) or "{}").get("result_fd")

    def send(kind: str, **payload) -> None:
        line = json.dumps({"kind": kind, "token": token, **payload}, default=str) + "\n"
        if fd is None:
            os.write(2, line.encode())
            return
        data = line.encode()
        while data:
            data = data[os.write(fd, data):]
    return send


def parse_line(line: bytes, token: str | None) -> dict | None:
    """One result-channel line -> message, or None when it is not one of ours. Violations
    count without a token (the guard in any sandboxed Python reports them)."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("kind") not in KINDS:
        return None
    if msg.get("kind") == VIOLATION or (token is not None and msg.get("token") == token):
        return msg
    return None


def violation_line(what: str, detail: str) -> bytes:
    return (json.dumps({"kind": VIOLATION, "what": what, "detail": detail}) + "\n").encode()


# -- who holds the accelerator ----------------------------------------------------------
# One process at a time can hold a TPU, and the chip belongs to the code being measured: a
# checker pins its own JAX to the CPU before JAX is imported (``pin_checker_to_cpu``),
# keeping the platforms the user asked for in ``ENV_LEARNER_PLATFORMS``, and every learner
# process gets them back (``learner_environment``). The checker's helper processes inherit
# the pin.
ENV_LEARNER_PLATFORMS = "COURSE_LEARNER_JAX_PLATFORMS"
PLATFORMS_UNSET = "<unset>"


def pin_checker_to_cpu(environ=os.environ) -> None:
    """Keep this process (and the helpers it starts) off any accelerator: JAX here runs on
    the CPU, and the user's own ``JAX_PLATFORMS`` (or its absence) is kept for learner
    processes. Call before ``import jax``; a second call keeps the first one's record."""
    if ENV_LEARNER_PLATFORMS not in environ:
        environ[ENV_LEARNER_PLATFORMS] = environ.get("JAX_PLATFORMS", PLATFORMS_UNSET)
    environ["JAX_PLATFORMS"] = "cpu"


def with_learner_platforms(environ) -> dict:
    """A copy of ``environ`` with the user's own ``JAX_PLATFORMS`` back in place of the
    checker's CPU pin (the accelerator, when the machine has one, is the learner's)."""
    env = dict(environ)
    kept = env.pop(ENV_LEARNER_PLATFORMS, None)
    if kept == PLATFORMS_UNSET:
        env.pop("JAX_PLATFORMS", None)
    elif kept is not None:
        env["JAX_PLATFORMS"] = kept
    return env


ENV_ACCELERATOR = "COURSE_ACCELERATOR"  # "1": the learner process opens the chip first
ACCELERATOR_DEVICES = ("/dev/accel0", "/dev/vfio/0", "/dev/nvidia0")
# what a TPU VM's image sets (TPU_SKIP_MDS_QUERY is not: importing jax sets it anywhere)
ACCELERATOR_VARIABLES = ("TPU_ACCELERATOR_TYPE", "TPU_CHIPS_PER_HOST_BOUNDS")


def accelerator_present(environ=os.environ) -> bool:
    """Whether this machine shows an accelerator (a TPU VM's variables, a TPU or GPU
    device file), without starting JAX (which would take the chip)."""
    return any(k in environ for k in ACCELERATOR_VARIABLES) or any(
        os.path.exists(p) for p in ACCELERATOR_DEVICES)


def learner_environment(environ) -> dict:
    """The learner process's environment: the checker's minus every channel secret, with
    the user's own JAX platforms (``with_learner_platforms``; a learner environment given
    again comes back the same)."""
    env = {k: v for k, v in with_learner_platforms(environ).items() if k not in SECRET_ENV}
    if env.get("JAX_PLATFORMS", "") != "cpu" and accelerator_present(env):
        env[ENV_ACCELERATOR] = "1"
    policy = json.loads(environ.get(ENV_POLICY) or "null")
    if policy:  # the guard stays on; its violations travel over the bridge
        guard = {k: v for k, v in policy.items() if k not in ("result_fd", LEARNER_SEALED)}
        if policy.get(LEARNER_SEALED):  # a stage run: no learner process reads a program
            guard["sealed"] = [SEALED_SUFFIX]
        env[ENV_GUARD] = json.dumps(guard)
    elif environ.get(ENV_GUARD):
        env[ENV_GUARD] = environ[ENV_GUARD]
    return env


def wants_learner_process(check_source: str) -> bool:
    """Whether a ``check.py`` asks for a learner process (so the runner can start it
    while the checker is still importing)."""
    return re.search(r"learner_process\s*=\s*True", check_source) is not None


def declared_cpu_devices(check_source: str) -> int | None:
    """The fake CPU device count a ``check.py`` declares with a top-level
    ``LEARNER_CPU_DEVICES = N`` (read as text: the runner starts the learner process
    before check.py is imported, and a device count cannot change after JAX starts)."""
    found = re.search(r"^LEARNER_CPU_DEVICES\s*=\s*(\d+)\s*(#.*)?$", check_source, re.M)
    return int(found[1]) if found else None


# -- bridge frames -----------------------------------------------------------------------
MAGIC = b"AGB1"
MAX_PARTS = 4096
MAX_FRAME = 2 << 30  # bytes; a larger frame is a broken (or hostile) peer


class ProtocolError(Exception):
    """Bytes on a bridge pipe that are not a frame."""


def encode_frame(header: dict, buffers=()) -> list:
    """The pieces to write for one frame (header as JSON, then raw buffers)."""
    head = json.dumps(header, allow_nan=True).encode()
    parts = [head, *buffers]
    lengths = [memoryview(p).nbytes for p in parts]
    return [MAGIC + struct.pack(f"<I{len(parts)}Q", len(parts), *lengths), *parts]


def write_frame(fd: int, header: dict, buffers=()) -> None:
    for piece in encode_frame(header, buffers):
        view = memoryview(piece).cast("B")
        while view.nbytes:
            view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytearray:
    out = bytearray(n)
    view = memoryview(out)
    got = 0
    while got < n:
        k = os.readv(fd, [view[got:]])
        if k == 0:
            raise EOFError(f"pipe closed after {got} of {n} bytes")
        got += k
    return out


def read_frame(fd: int) -> tuple[dict, list]:
    """(header, buffers) of the next frame; EOFError when the peer is gone before a frame
    starts, ProtocolError on anything that is not a frame."""
    first = os.read(fd, 8)
    if not first:
        raise EOFError("pipe closed")
    if len(first) < 8:
        first += bytes(_read_exact(fd, 8 - len(first)))
    if first[:4] != MAGIC:
        raise ProtocolError(f"bytes that are not a frame: {bytes(first)[:8]!r}")
    (count,) = struct.unpack("<I", first[4:])
    if not 1 <= count <= MAX_PARTS:
        raise ProtocolError(f"a frame of {count} parts")
    lengths = struct.unpack(f"<{count}Q", _read_exact(fd, 8 * count))
    if sum(lengths) > MAX_FRAME:
        raise ProtocolError(f"a frame of {sum(lengths)} bytes")
    parts = [_read_exact(fd, n) for n in lengths]
    try:
        header = json.loads(parts[0])
    except ValueError as err:
        raise ProtocolError(f"a frame header that is not JSON: {err}") from None
    if not isinstance(header, dict):
        raise ProtocolError("a frame header that is not an object")
    return header, parts[1:]

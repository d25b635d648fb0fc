"""Course facts, in one place: where things are, what the kernel is called, and the rules
every part of the course applies the same way.

Standard library only: checkers, the grader, notebooks and make targets all import it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECTS = ROOT / "projects"
NOTEBOOKS = ROOT / "notebooks"
BUILD = ROOT / "build"

# Learner records (check cells, run records, predictions): ``COURSE_RECORDS`` moves them,
# so a test or a headless course run never writes into a learner's own folder.
RECORDS_ENV = "COURSE_RECORDS"
DEFAULT_RECORDS = BUILD / "learner"

KERNEL = "jax-perf-course"
KERNEL_DISPLAY = "JAX perf course (Python 3.12, CPU)"
KERNELSPEC = {"name": KERNEL, "display_name": KERNEL_DISPLAY, "language": "python"}

# nbgrader's and nbclient's tag for a cell whose error is expected (a stub's
# NotImplementedError, an autograded test the learner has not passed yet).
ALLOWED_ERROR_TAG = "raises-exception"

_DEVICE_FLAG = "--xla_force_host_platform_device_count"

# What a project's checker may import from coursekit (relative to the course root). The
# grader's checker fingerprint (``checker_fingerprint`` below) hashes exactly these, so
# editing the portfolio or the notebook runtime regrades nobody; tests/test_layout.py fails
# when a checker imports more.
CHECKER_CODE = ("coursekit/__init__.py", "coursekit/facts.py", "coursekit/checking",
                "coursekit/compat", "coursekit/measure", "coursekit/workloads",
                "coursekit/instructor",
                "coursekit/provenance/__init__.py",
                "coursekit/provenance/records.py",
                # the protocol the bridge, the runner and the grader speak; prctl
                "coursekit/protocol.py", "coursekit/procctl.py")


class TooBig(ValueError):
    """A file past a reading limit, named with its sizes (nothing of it was read)."""


BLOCK_SLACK = 1 << 20  # allocated bytes beyond the apparent size a file system may keep


def file_sizes(st: os.stat_result) -> tuple[int, int]:
    """(apparent, allocated) bytes of a stat result: a sparse file is small on disk and
    huge to read, a preallocated one the other way round."""
    return st.st_size, getattr(st, "st_blocks", 0) * 512


def size_past(st: os.stat_result, limit: int) -> int | None:
    """The size that puts a file past ``limit``, apparent or allocated (less a block
    slack: a 3-byte file takes 4 KiB), or None when it is within."""
    apparent, allocated = file_sizes(st)
    if apparent > limit:
        return apparent
    return allocated if allocated - BLOCK_SLACK > limit else None


def read_bounded(path: Path, limit: int, *, name: str | None = None) -> bytes:
    """The bytes of the regular file ``path`` when it holds at most ``limit`` (apparent
    and allocated size, checked before reading; never a link, a FIFO or a device, which
    could block or never end); else ``TooBig`` (or ``OSError``), naming ``name``."""
    name = name or Path(path).name
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TooBig(f"{name} is not a plain file")
        past = size_past(st, limit)
        if past is not None:
            apparent, allocated = file_sizes(st)
            raise TooBig(f"{name} is {past / 2**20:.1f} MiB ({apparent:,} bytes, "
                         f"{allocated:,} on disk); the limit is {limit / 2**20:.1f} MiB")
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew after the stat
                raise TooBig(f"{name} grew past {limit / 2**20:.1f} MiB while read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def tree_hash(paths: list[Path], base: Path | None = None, *,
              max_file_bytes: int | None = None) -> str:
    """Content hash of files and folders (names relative to ``base`` and bytes). With
    ``max_file_bytes`` every file is read within it (``read_bounded``: ``TooBig`` past
    it), the way the grader hashes what a learner handed in."""
    h = hashlib.sha256()
    for path in paths:
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else (
            [path] if path.is_file() else [])
        for f in files:
            if "__pycache__" in f.parts or f.suffix == ".pyc" or f.is_symlink():
                continue
            rel = f.relative_to(base) if base and f.is_relative_to(base) else f
            data = f.read_bytes() if max_file_bytes is None else read_bounded(
                f, max_file_bytes, name=str(rel))
            h.update(str(rel).encode() + b"\0" + data + b"\0")
    return h.hexdigest()


def checker_fingerprint(root: Path, project: str) -> str:
    """Hash of what decides a stage's result apart from the submission: the project's
    checker folder, ``CHECKER_CODE`` and the project's other files (never its solution or
    starter). The grader keys its cached check lists and gradebook rows on it; notebook
    check cells key reused results on it."""
    p = root / "projects" / project
    parts = [p / "tests", *(root / c for c in CHECKER_CODE)] + [
        x for x in p.iterdir() if x.name not in ("solution", "starter")]
    return tree_hash(parts, root)


def records_dir() -> Path:
    """Where the learner's records go now (``$COURSE_RECORDS`` or build/learner)."""
    return Path(os.environ.get(RECORDS_ENV, DEFAULT_RECORDS))


def build_dir(*parts: str) -> Path:
    """A folder under build/ (not created)."""
    return BUILD.joinpath(*parts)


def projects(root: Path = ROOT, *, with_solution: bool = False) -> list[str]:
    """Project names that have a checker (and a reference solution when asked), sorted."""
    found = []
    for check in sorted((Path(root) / "projects").glob("*/tests/check.py")):
        project = check.parents[1]
        if not with_solution or (project / "solution" / "model.py").is_file():
            found.append(project.name)
    return found


def is_release(root: Path = ROOT) -> bool:
    """Whether ``root`` is a learner's copy (``python -m autograder release``): projects
    with checkers, none with a reference solution. ``make course`` and ``make test`` then
    run the learner's own code instead of the instructor's solutions and test suite."""
    return bool(projects(root)) and not projects(root, with_solution=True)


def checker_path(project: str, root: Path = ROOT) -> Path:
    return Path(root) / "projects" / project / "tests" / "check.py"


def xla_flags_with_devices(n: int, flags: str | None = None) -> str:
    """``XLA_FLAGS`` asking for ``n`` fake CPU devices: any earlier device count is
    replaced (never kept beside the new one), every other flag is kept."""
    flags = os.environ.get("XLA_FLAGS", "") if flags is None else flags
    rest = re.sub(_DEVICE_FLAG + r"=\d+", "", flags)
    return " ".join([*rest.split(), f"{_DEVICE_FLAG}={int(n)}"])


def use_cpu_devices(n: int, env: dict | None = None, *, cpu_only: bool = True) -> dict | None:
    """Ask for ``n`` fake CPU devices in ``env`` (os.environ by default; it must happen
    before jax is imported there). With ``cpu_only`` (checkers, drivers) the CPU platform
    is chosen unless ``JAX_PLATFORMS`` says otherwise, so a GPU machine grades like a CPU
    one; notebooks pass ``cpu_only=False`` and use whatever JAX finds. Returns the ``env``
    it was given, and None for os.environ: the process's environment (tokens included) is
    never handed back, so a notebook cell that ends with this call shows nothing."""
    given = env
    env = os.environ if env is None else env
    env["XLA_FLAGS"] = xla_flags_with_devices(n, env.get("XLA_FLAGS", ""))
    if cpu_only:
        env.setdefault("JAX_PLATFORMS", "cpu")
    return given


def kernel_registered() -> bool:
    from jupyter_client.kernelspec import KernelSpecManager
    return KERNEL in KernelSpecManager().find_kernel_specs()


def ensure_kernel(python: str = sys.executable) -> str:
    """Register the course kernel for ``python`` when it is missing (``make setup`` does
    it too); returns the folder of its kernelspec."""
    from jupyter_client.kernelspec import KernelSpecManager
    specs = KernelSpecManager().find_kernel_specs()
    if KERNEL not in specs:
        register_kernel(python)
        specs = KernelSpecManager().find_kernel_specs()
    return specs[KERNEL]


def register_kernel(python: str = sys.executable) -> None:
    subprocess.run([python, "-m", "ipykernel", "install", "--sys-prefix", "--name", KERNEL,
                    "--display-name", KERNEL_DISPLAY], check=True, capture_output=True)


if __name__ == "__main__":  # `python -m coursekit.facts register-kernel` (make setup)
    if sys.argv[1:] == ["register-kernel"]:
        register_kernel()
    else:
        print("usage: python -m coursekit.facts register-kernel", file=sys.stderr)
        sys.exit(2)

"""What the learner's code wrote, taken once: read into the checker's memory, or copied
into a folder of the checker's own, with the digest of every file recorded.

A file a learner process wrote (a trace, a run record, a checkpoint) is evidence the
checker parses, often more than once. Between two parses a learner process is still
running (a thread it left behind, another learner process): the file it named could say
one thing to the first parse and another to the second. So the checker takes it once and
parses only what it took:

    data = read_once(path, inside=outdir)              # bytes, the file read once
    copy = copy_once(path, ctx.subdir("frozen"), inside=outdir)   # a file or folder

``inside``: the folder the checker handed the learner for it; a path elsewhere (the
checker's own reference trace, say, which a learner process can read) is refused by name.
``TAKEN`` lists (path, sha256, bytes) of every file taken; the grader's runner puts the
list in the stage's record (``learner_files``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from coursekit.checking import spawn
from coursekit.checking.errors import CheckFailed

TAKEN: list[dict] = []
MAX_BYTES = 1 << 30


def _inside(path: Path, folder: Path | None, what: str) -> Path:
    real = Path(os.path.realpath(path))
    if folder is not None:
        root = Path(os.path.realpath(folder))
        if real != root and root not in real.parents:
            raise CheckFailed(f"{what} is not in the folder it was given",
                              yours=str(path), expected=f"a path under {folder}",
                              hint="write into the folder you were given and return "
                              "the path of what you wrote there")
    return real


def _note(path: Path, data: bytes) -> None:
    TAKEN.append({"path": str(path), "sha256": hashlib.sha256(data).hexdigest(),
                  "bytes": len(data)})


def read_once(path, *, inside=None, what: str = "the file your code named") -> bytes:
    """The bytes of ``path`` (a file the learner's code wrote), read once."""
    real = _inside(Path(path), None if inside is None else Path(inside), what)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise CheckFailed(f"{what} cannot be read: {err.strerror}", yours=str(path)) \
            from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        # under the grader's spawner learner processes are other uids: a file of the
        # checker's own uid is not their output, wherever a link swapped in led
        if spawn.learner_group() is not None and info.st_uid == os.getuid():
            raise CheckFailed(f"{what} is a file the checker wrote, not your code",
                              yours=str(path), expected="a file your code wrote")
        if info.st_size > MAX_BYTES:
            raise CheckFailed(f"{what} is larger than {MAX_BYTES >> 20} MiB",
                              yours=str(path))
        data = f.read(MAX_BYTES + 1)
    _note(real, data)
    return data


def copy_once(path, into, *, inside=None, what: str = "the file your code named") -> Path:
    """A copy of ``path`` (a file, or a folder with everything in it) in a new folder
    under ``into``, each file read once; the path of the copy."""
    source = _inside(Path(path), None if inside is None else Path(inside), what)
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    target = into / f"{len(list(into.iterdir()))}" / source.name
    target.parent.mkdir()
    if not source.is_dir():
        target.write_bytes(read_once(source, what=what))
        return target
    total = 0
    for here, dirs, files in os.walk(source):  # links are neither followed nor copied
        dirs[:] = [d for d in dirs if not (Path(here) / d).is_symlink()]
        out = target / Path(here).relative_to(source)
        out.mkdir(parents=True, exist_ok=True)
        for name in files:
            if (Path(here) / name).is_symlink():
                continue
            data = read_once(Path(here) / name, what=what)
            total += len(data)
            if total > MAX_BYTES:
                shutil.rmtree(target, ignore_errors=True)
                raise CheckFailed(f"{what} holds more than {MAX_BYTES >> 20} MiB",
                                  yours=str(path))
            (out / name).write_bytes(data)
    return target

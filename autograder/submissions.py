"""Finding submissions, unpacking zips safely, and splitting the list into shards.

A submission is ``SUBMISSIONS/<student>/`` laid out like the release
(``projects/<p>/starter/model.py``, ``notebooks/*.ipynb``) or ``SUBMISSIONS/<student>.zip``
with the same content (one wrapping folder inside the zip is fine). Zips are unpacked
into the grader's own folder with every member checked: no absolute paths, no ``..``,
no links, a cap on count and total size (a zip bomb stops at the cap). In a folder, what
the grader reads of a submission is reached without a link anywhere on the way
(``plain_path``): ``projects/foundations -> ../../bob/projects/foundations`` would hand in
bob's work.

Sharding (``--shard i/N``, 0 <= i < N) assigns each student by a hash of the name, not
by position, so the split does not move when a submission is added or removed, and
every machine computes the same split without talking to the others.
"""

from __future__ import annotations

import hashlib
import shutil
import stat
import zipfile
from pathlib import Path

MAX_FILES = 5000
MAX_BYTES = 512 << 20


class SubmissionError(Exception):
    pass


def find(folder: Path) -> dict[str, Path]:
    """student -> folder or zip, sorted by name. A student with both keeps the folder."""
    out: dict[str, Path] = {}
    for entry in sorted(Path(folder).iterdir()):
        if entry.name.startswith(".") or entry.is_symlink():
            continue
        if entry.is_dir():
            out[student_name(entry.name)] = entry
        elif entry.suffix == ".zip" and entry.is_file():
            out.setdefault(student_name(entry.stem), entry)
    return dict(sorted(out.items()))


def student_name(name: str) -> str:
    """A folder or zip name as text every later step can hash, store and print: bytes
    that are not UTF-8 (which Python keeps as lone surrogates, and which stopped the
    whole batch at the first ``encode``) are written as ``\\xNN``."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 0, 1
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SubmissionError(f"--shard must look like i/N, not {text!r}") from None
    if n < 1 or not 0 <= i < n:
        raise SubmissionError(f"--shard {text}: need 0 <= i < N")
    return i, n


def in_shard(student: str, shard: tuple[int, int]) -> bool:
    i, n = shard
    digest = hashlib.sha256(student.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n == i


def unpack(zip_path: Path, dest: Path) -> Path:
    """Unpack ``zip_path`` into ``dest`` (replaced). Returns the submission root. Any
    failure is this submission's ``SubmissionError``: a bad CRC, an encrypted member, a
    compression method zipfile lacks, a member that is a file where another needs a
    folder (each of those stopped the whole batch before anything was graded)."""
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    try:
        return _unpack(zip_path, dest)
    except SubmissionError:
        raise
    except Exception as err:  # noqa: BLE001 - whatever the archive holds is its own problem
        raise SubmissionError(f"{zip_path.name} could not be unpacked: "
                              f"{type(err).__name__}: {err}"[:500]) from None


def _unpack(zip_path: Path, dest: Path) -> Path:
    try:
        archive = zipfile.ZipFile(zip_path)
    except zipfile.BadZipFile as err:
        raise SubmissionError(f"{zip_path.name} is not a readable zip: {err}") from None
    with archive:
        members = archive.infolist()
        if len(members) > MAX_FILES:
            raise SubmissionError(f"{zip_path.name}: more than {MAX_FILES} files")
        total = 0
        for info in members:
            name = info.filename
            parts = Path(name).parts
            mode = info.external_attr >> 16
            if name.startswith("/") or ".." in parts or stat.S_ISLNK(mode):
                raise SubmissionError(f"{zip_path.name}: unsafe member {name!r}")
            if info.is_dir():
                continue
            target = dest.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as out:
                while chunk := src.read(1 << 20):
                    total += len(chunk)
                    if total > MAX_BYTES:
                        raise SubmissionError(
                            f"{zip_path.name}: more than {MAX_BYTES >> 20} MB unpacked")
                    out.write(chunk)
    return submission_root(dest)


def plain_path(root: Path, relative: str | Path) -> Path | None:
    """``root / relative`` when it exists and no part of the way below ``root`` is a
    symbolic link; else None. A link to a folder (``projects/<p>``, ``projects``,
    ``notebooks``) would hand in whatever it points at: another submission, read by the
    grader as root."""
    path = Path(root)
    for part in Path(relative).parts:
        path = path / part
        if path.is_symlink() or not path.exists():
            return None
    return path


def submission_root(folder: Path) -> Path:
    """The folder itself, or the one folder it wraps (``alice/projects/...``)."""
    if (folder / "projects").is_dir() or (folder / "notebooks").is_dir():
        return folder
    children = [c for c in folder.iterdir() if not c.name.startswith((".", "__MACOSX"))]
    if len(children) == 1 and children[0].is_dir() and not children[0].is_symlink():
        return children[0]
    return folder

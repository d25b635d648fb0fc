"""What the grader takes from a submission's ``projects/<p>/starter/`` folders, found in
one bounded walk before anything is read, hashed or copied.

A stage runs only what its checks read: every Python file (``*.py``) of the starter,
each scanned by the stage's forbidden-import rules (``coursekit.checking.forbidden``
reads them all), and nothing else: a data file, a ``.so`` or a ``.pth`` beside
``model.py`` is never copied into the run, so a learner process cannot load code that
no check read. What the stage does not expect (anything but ``model.py``) is named in
the stage's record and the learner's feedback: copied (another ``.py``) or left out,
and why.

The grader's own process, as root and outside the sandbox, walks and reads these
folders: the walk is bounded in entries, depth and time, links are never followed, and
each ``.py`` is bounded in apparent and allocated size (a 1 TiB sparse file is a few KiB
on disk) before a byte of it is read. Past a bound the submission is refused with a
named error (``HandedInRefused``) and the batch grades everyone else; a file that is
never read (not Python) is left out whatever its size.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from autograder.submissions import SubmissionError, plain_path

EXPECTED = "model.py"        # the one file every starter holds in the release
MAX_PY_BYTES = 4 << 20       # one handed-in .py (the largest starter: 25 KB)
MAX_TOTAL_BYTES = 16 << 20   # every .py of one submission's starters together
MAX_ENTRIES = 2_000          # files and folders walked in one submission's starters
MAX_DEPTH = 8                # folders below starter/
MAX_SECONDS = 10.0           # for the whole walk


class HandedInRefused(SubmissionError):
    """A submission past a bound of what the grader's own process reads."""


@dataclass
class Starter:
    project: str
    folder: Path
    python: list[str] = field(default_factory=list)     # relative paths, copied
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (path, why)

    def unexpected(self) -> list[str]:
        """Lines naming every file the stage does not expect, for records and feedback."""
        return ([f"{p}: copied and checked like {EXPECTED} (a file the stage does not "
                 "expect)" for p in self.python if p != EXPECTED]
                + [f"{p}: not copied ({why})" for p, why in self.left_out])


def starters(submission: Path) -> list[Starter]:
    """Every ``projects/<p>/starter/`` of the submission reached without a link, walked
    within the bounds above; ``HandedInRefused`` past one."""
    projects = plain_path(submission, "projects")
    if projects is None or not projects.is_dir():
        return []
    found, walk = [], _Walk()
    try:
        names = sorted(os.listdir(projects))
    except OSError as err:
        raise HandedInRefused(f"projects/ could not be listed: {err.strerror}") from None
    if len(names) > MAX_ENTRIES:
        raise HandedInRefused(f"projects/ holds more than {MAX_ENTRIES:,} entries")
    for name in names:
        folder = plain_path(submission, Path("projects", name, "starter"))
        if folder is None or not folder.is_dir():
            continue
        starter = Starter(name, folder)
        walk.folder(starter, folder, "", 0)
        starter.python.sort(key=Path)
        found.append(starter)
    return found


class _Walk:
    def __init__(self) -> None:
        self.entries, self.total = 0, 0
        self.deadline = time.monotonic() + MAX_SECONDS

    def folder(self, starter: Starter, path: Path, rel: str, depth: int) -> None:
        where = f"projects/{starter.project}/starter/{rel}"
        if depth > MAX_DEPTH:
            raise HandedInRefused(f"{where!r} is nested more than {MAX_DEPTH} folders deep")
        try:
            entries = sorted(os.scandir(path), key=lambda e: e.name)
        except OSError as err:
            raise HandedInRefused(f"{where!r} could not be listed: {err.strerror}") from None
        for entry in entries:
            self.entries += 1
            if self.entries > MAX_ENTRIES:
                raise HandedInRefused(f"the starter folders hold more than {MAX_ENTRIES:,} "
                                      "files and folders")
            if time.monotonic() > self.deadline:
                raise HandedInRefused(f"listing the starter folders took more than "
                                      f"{MAX_SECONDS:g} s")
            inner = f"{rel}{entry.name}"
            st = entry.stat(follow_symlinks=False)
            if entry.name == "__pycache__" or entry.name.endswith(".pyc"):
                continue  # Python's own cache: never copied, never worth a line
            if stat.S_ISLNK(st.st_mode):
                starter.left_out.append((inner, "a symbolic link"))
            elif stat.S_ISDIR(st.st_mode):
                self.folder(starter, Path(entry.path), inner + "/", depth + 1)
            elif not stat.S_ISREG(st.st_mode):
                starter.left_out.append((inner, "not a plain file"))
            elif not entry.name.endswith(".py"):
                starter.left_out.append((inner, "a stage runs only Python files"))
            else:
                self.python_file(starter, inner, st)

    def python_file(self, starter: Starter, rel: str, st: os.stat_result) -> None:
        from coursekit.facts import size_past
        size = size_past(st, MAX_PY_BYTES)
        where = f"projects/{starter.project}/starter/{rel}"
        if size is not None:
            raise HandedInRefused(f"{where!r} is {size / 2**20:.1f} MiB (apparent "
                                  f"{st.st_size:,} bytes); the grader reads Python files "
                                  f"of up to {MAX_PY_BYTES >> 20} MiB")
        self.total += st.st_size
        if self.total > MAX_TOTAL_BYTES:
            raise HandedInRefused(f"the starter folders' Python files hold more than "
                                  f"{MAX_TOTAL_BYTES >> 20} MiB")
        starter.python.append(rel)


def files_hash(submission: Path) -> str:
    """Content hash of everything a project stage reads from a submission (each file
    read within ``MAX_PY_BYTES``)."""
    from coursekit.facts import TooBig, tree_hash
    files = [s.folder / rel for s in starters(submission) for rel in s.python]
    try:
        return tree_hash(files, submission, max_file_bytes=MAX_PY_BYTES)
    except (TooBig, OSError) as err:
        raise HandedInRefused(str(err)) from None


def copy_into(submission: Path, course: Path) -> dict[str, list[str]]:
    """Copy every starter's Python files into ``course`` (each read within the bounds);
    returns project -> the lines naming what the stage does not expect."""
    from coursekit.facts import read_bounded
    notes = {}
    for starter in starters(submission):
        target = course / "projects" / starter.project / "starter"
        for rel in starter.python:
            dest = target / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(read_bounded(starter.folder / rel, MAX_PY_BYTES, name=rel))
        notes[starter.project] = starter.unexpected()
    return notes


CODE_SUFFIXES = (".py", ".ipynb")


def code_files(root: Path, *, max_entries: int = 5 * MAX_ENTRIES,
               max_depth: int = 2 * MAX_DEPTH) -> tuple[list[str], list[tuple[str, str]]]:
    """Every file under ``root`` that can hold code (``.py``, ``.ipynb``), as relative
    paths, and what was skipped with why (a link, past the size of a file the grader
    reads, past the walk's bounds): what ``similar`` compares and names."""
    from autograder.nblimits import MAX_BYTES as NOTEBOOK_BYTES
    from coursekit.facts import size_past
    found: list[str] = []
    skipped: list[tuple[str, str]] = []
    entries, deadline = 0, time.monotonic() + MAX_SECONDS
    stack = [(Path(root), "", 0)]
    while stack:
        folder, rel, depth = stack.pop()
        try:
            listing = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as err:
            skipped.append((rel or ".", f"could not be listed ({err.strerror})"))
            continue
        for entry in listing:
            entries += 1
            inner = rel + entry.name
            if entries > max_entries or time.monotonic() > deadline:
                skipped.append((rel or ".", f"the rest of the folder: past {max_entries:,} "
                                f"entries or {MAX_SECONDS:g} s"))
                return sorted(found, key=Path), skipped
            if entry.name in ("__pycache__", ".git", ".ipynb_checkpoints"):
                continue
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                if depth >= max_depth:
                    skipped.append((inner + "/", f"deeper than {max_depth} folders"))
                else:
                    stack.append((Path(entry.path), inner + "/", depth + 1))
                continue
            if not entry.name.endswith(CODE_SUFFIXES):
                continue
            limit = MAX_PY_BYTES if entry.name.endswith(".py") else NOTEBOOK_BYTES
            if stat.S_ISLNK(st.st_mode):
                skipped.append((inner, "a symbolic link (never followed)"))
            elif not stat.S_ISREG(st.st_mode):
                skipped.append((inner, "not a plain file"))
            elif size_past(st, limit) is not None:
                skipped.append((inner, f"{size_past(st, limit) / 2**20:.1f} MiB, past the "
                                f"{limit >> 20} MiB the grader reads"))
            else:
                found.append(inner)
    return sorted(found, key=Path), skipped

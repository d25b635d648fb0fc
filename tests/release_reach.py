"""What a check run reaches, and whether a learner's copy holds it as the course does.

A checker's verdict is a function of the code and data it and its learner processes read
(with the learner's file, the seed and the environment, which a copy's run and a course
run share). So a copy judges as the course does when every file a check run reads in
one is, byte for byte, the file at the same path in the other. ``recording_env`` puts
``tests/reach_recorder/sitecustomize.py`` first on the path: every process of the run,
learner processes included, appends each file it opens under the given folders to a log
(an audit hook); ``reached`` reads the logs back as paths relative to a root, a cached
bytecode file as its source (an import reads one or the other); ``unexplained``
compares them with the other tree.

What the release leaves out or rewrites, each for a reason (``autograder.release``):
``COURSE_ONLY`` and ``REWRITTEN``. A check run in the course may reach a course-only
file (the instructor's code, a sealed replay): in the copy the same check takes its
stored-output branch (``coursekit.checking.graded.available()`` is False there), which
only a run in the copy exercises: the copy's reference run (tests/test_release_learner_copy.py)
and the corpus in the copy (``python -m coursekit.commands.mistakes_in_copy``).
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path

RECORDER = Path(__file__).resolve().parent / "reach_recorder"
LOG_ENV, ROOTS_ENV = "COURSE_REACH_LOG", "COURSE_REACH_ROOTS"

# course files the release leaves out (glob, relative to the root) -> why
COURSE_ONLY = {
    "coursekit/instructor/*": "what is a stage's answer (coursekit.checking.graded); in the "
    "copy a check that needs it compares with stored outputs (projects/<p>/tests/expected/)",
    "projects/*/tests/sealed/*": "a checker's sealed replays: callable, so an answer; the "
    "copy compares with their stored outputs for public inputs (tests/expected/)",
    "projects/*/solution/*": "the reference solution",
    "projects/*/tests/equivalent_mutants.txt": "make mutants' list; quotes the reference",
    "autograder/samples/*": "hostile demo submissions for the grader's own tests",
}
# files of the copy the release writes anew: no check may read one
REWRITTEN = {
    "Makefile": "without its course-only blocks",
    "README.md": "the learner's README",
    "notebooks/*.ipynb": "the learner versions (nbgrader's preprocessors)",
}


def recording_env(env: dict, log: Path, roots: list[Path]) -> dict:
    """``env`` with the recorder first on its path, logging opens under ``roots``."""
    log.mkdir(parents=True, exist_ok=True)
    path = [str(RECORDER)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(path), LOG_ENV: str(log),
            ROOTS_ENV: os.pathsep.join(str(r) for r in roots)}


def source_of(rel: Path) -> Path:
    """``a/__pycache__/b.cpython-312.pyc`` -> ``a/b.py``; any other path as it is."""
    if rel.suffix == ".pyc" and rel.parent.name == "__pycache__":
        return rel.parent.parent / (rel.name.split(".")[0] + ".py")
    return rel


def reached(log: Path, root: Path) -> set[Path]:
    """Every file under ``root`` the recorded processes opened (relative paths), the
    processes' scratch apart: ``build/``, the Python environment (the course's ``.venv``
    and its editable install's ``*.egg-info`` live in its root, in a CI clone too: no file
    of the course), and what
    is no file now (a folder; a scratch file since removed; a name opened relative to a
    folder's descriptor, as ``shutil.rmtree`` does, which the audit event gives without
    its folder)."""
    root = Path(root).resolve()
    environment = Path(sys.prefix).resolve()
    found = set()
    for record in Path(log).glob("*.txt"):
        for line in record.read_text().splitlines():
            path = Path(line)
            if (not path.is_relative_to(root) or not path.is_file()
                    or path.is_relative_to(environment) or "site-packages" in path.parts
                    or any(part.endswith((".egg-info", ".dist-info")) for part in path.parts)):
                continue
            rel = source_of(path.relative_to(root))
            if rel.parts and rel.parts[0] != "build":
                found.add(rel)
    return found


def matches(rel: Path, patterns: dict) -> str | None:
    """The reason of the first pattern ``rel`` matches (``*`` crosses folders), else None."""
    return next((why for glob, why in patterns.items()
                 if fnmatch.fnmatch(rel.as_posix(), glob)), None)


def unexplained(paths: set[Path], here: Path, there: Path, *, course: Path) -> list[str]:
    """'path: why' for each of ``paths`` (read under ``here``) whose file at ``there`` is
    missing or holds other bytes, unless the release leaves it out (``COURSE_ONLY``,
    relative to ``course``, the course's root, whichever side ``here`` is)."""
    problems = []
    for rel in sorted(paths):
        mine, theirs = Path(here) / rel, Path(there) / rel
        if here == course and matches(rel, COURSE_ONLY):
            continue
        if matches(rel, REWRITTEN):
            problems.append(f"{rel}: a check read it, and the release rewrites it "
                            f"({matches(rel, REWRITTEN)})")
        elif not mine.is_file():
            problems.append(f"{rel}: read, then gone from {here}")
        elif not theirs.is_file():
            problems.append(f"{rel}: not in {there}")
        elif mine.read_bytes() != theirs.read_bytes():
            problems.append(f"{rel}: other bytes in {there}")
    return problems


def tree_differences(course: Path, copy: Path, folders: tuple[str, ...]) -> list[str]:
    """Every file under ``folders`` of either tree that the other lacks or holds with other
    bytes, what the release leaves out (``COURSE_ONLY``) and caches apart."""
    def files(root: Path) -> set[Path]:
        return {p.relative_to(root) for f in folders for p in (root / f).rglob("*")
                if p.is_file() and "__pycache__" not in p.parts
                and not p.name.endswith((".pyc", ".egg-info"))
                and ".egg-info" not in str(p) and ".ipynb_checkpoints" not in p.parts}
    ours, theirs = files(course), files(copy)
    problems = [f"{r}: not in the copy" for r in sorted(ours - theirs)
                if not matches(r, COURSE_ONLY)]
    problems += [f"{r}: in the copy, not in the course" for r in sorted(theirs - ours)]
    problems += [f"{r}: other bytes in the copy" for r in sorted(ours & theirs)
                 if (course / r).read_bytes() != (copy / r).read_bytes()]
    return problems

"""Which instructor-only code a learner process may read in a graded run's course copy.

``coursekit/instructor/`` is what *is* a stage's answer (the release leaves it out). The
checker reaches it by name at run time; so does learner code that builds the name at run
time (``importlib.import_module("coursekit." + "instructor.decision")``), which the
forbidden-import scan cannot read: performance-audit stage 4 scored 9/9 with the course's
own ``decide`` where the same file without that import scored 8/9. Part of the package
runs in the learner process by design (the ``remote_*`` inspectors and workloads, and what
they or the public workloads load: a trace forest, a placement's spans, the bandwidth
measurement), so that part stays readable there. The rest is the checker's alone:

* ``checker_only(coursekit)``: those files in a course copy;
* ``fence(coursekit, checker_group)``: a stage run as root makes them root's, group the
  run's checker group, mode 0640 (no learner uid is in that group);
* ``fence(coursekit, None)``: a notebook run (its kernel is the learner's own code) has
  none of them: a check cell that needs one says it is graded by the instructor, as in a
  learner's copy.

The sealed programs (``projects/<p>/tests/sealed/``: a checker's replay of a stage's
answer) are answers too, held as programs (a release leaves them out). No learner process
of a stage run opens one, so ``fence_sealed(course, group)`` makes them the checker
group's alone there (as root), beside the guard's refusal (``protocol.LEARNER_SEALED``);
no notebook runs one.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from coursekit.protocol import SEALED_SUFFIX

PACKAGE = "coursekit.instructor"
# where the learner process loads code from: the public workloads (the catalog and the
# inspectors import them) and the instructor's remote_* modules
LEARNER_SIDE = ("workloads/*.py", "instructor/remote_*.py")


def _named(path: Path) -> set[str]:
    """Instructor modules the file at ``path`` imports or names to ``instructor_module``."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                found.update(alias.name for alias in node.names)
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module[len(PACKAGE) + 1:].split(".")[0])
        elif isinstance(node, ast.Import):
            found.update(alias.name[len(PACKAGE) + 1:].split(".")[0] for alias in node.names
                         if alias.name.startswith(PACKAGE + "."))
        elif isinstance(node, ast.Call) and node.args and isinstance(
                node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name == "instructor_module":
                found.add(node.args[0].value)
    return found


def learner_side(coursekit: Path) -> set[str]:
    """Module names (``traces``, ``remote_pallas_kernel``, ...) of ``coursekit/instructor``
    that a learner process loads, followed through their own imports."""
    folder = Path(coursekit) / "instructor"
    todo = [p for pattern in LEARNER_SIDE for p in sorted(Path(coursekit).glob(pattern))]
    seen = {p.stem for p in todo if p.parent == folder}
    while todo:
        for name in _named(todo.pop()) - seen:
            if (folder / f"{name}.py").is_file():
                seen.add(name)
                todo.append(folder / f"{name}.py")
    return seen


def checker_only(coursekit: Path) -> list[Path]:
    """The instructor module files a learner process never loads."""
    folder = Path(coursekit) / "instructor"
    if not folder.is_dir():
        return []
    keep = learner_side(coursekit) | {"__init__"}
    return sorted(p for p in folder.glob("*.py") if p.stem not in keep)


def fence(coursekit: Path, checker_group: int | None) -> list[Path]:
    """Make the checker-only modules of the course copy at ``coursekit`` unreadable to
    learner uids (``checker_group``: the run's checker group, as root) or remove them (None:
    the run's own code is the learner's). Returns the files fenced."""
    files = checker_only(coursekit)
    for path in files:
        if checker_group is None:
            path.unlink()
        else:
            os.chown(path, 0, checker_group)
            os.chmod(path, 0o640)
    return files


def sealed_programs(course: Path) -> list[Path]:
    """Every sealed program's file in a course copy (links are not copied into one)."""
    return sorted(p for p in Path(course).rglob(f"*{SEALED_SUFFIX}")
                  if p.is_file() and not p.is_symlink())


def fence_sealed(course: Path, checker_group: int) -> list[Path]:
    """Make the course copy's sealed programs root's, group ``checker_group``, mode 0640:
    the checker reads them, no learner uid can. Returns the files."""
    files = sealed_programs(course)
    for path in files:
        os.chown(path, 0, checker_group)
        os.chmod(path, 0o640)
    return files

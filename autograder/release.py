"""``python -m autograder release --out DIR``: the learner version of the course.

What goes in (an allow-list, so a new instructor-only folder never leaks by default):
a README written for learners (``autograder/release_readme.md`` with the course's
notebooks and projects filled in; the instructor's README stays in the course), the
learner guides (``docs/learners.md``, ``docs/gpu.md``; the instructor, checker and CI
guides stay in the course), the set-up files, ``scripts/``, ``coursekit/``,
``autograder/`` (learners run ``validate``; it holds no secret), ``nbgrader_config.py``,
less the instructor-only code (``coursekit/instructor/``: what is a stage's answer),
every project without its ``solution/`` folder and its checker's list of equivalent
mutants (it quotes the reference's lines), and every ``notebooks/*.ipynb`` turned
into its learner version by nbgrader's preprocessors (``autograder.nbsource``). The
Makefile goes in without its ``# course-only {`` ... ``# } course-only`` blocks (the
targets that need the course's own tree: benchmarks, mutants, the mistake corpus, flake
runs, the accelerator run, starters), so every target and page it names is there. Never:
``solution/``, ``notebooks/src/`` (the generators hold the answers), ``tests/``,
``bench/``, ``.git``, a gradebook or the grader's secrets (held-out seeds are made at
grading time).

Before writing anything the starters and the checkers' sealed programs are checked
against their solutions (``coursekit.authoring.starters``, ``coursekit.authoring.sealed``);
after writing, every file of the release is scanned for solution or hidden-test markers,
and the release fails (and is removed) if one is left.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from autograder.course import ROOT

TOP_FILES = ("Makefile", "pyproject.toml", "environment.yml", ".gitignore",
             "nbgrader_config.py")
README_TEMPLATE = Path(__file__).with_name("release_readme.md")
TOP_DIRS = ("scripts", "coursekit", "autograder")
# The guides a learner reads; the release README links them, and they link only each
# other, the README and the project READMEs.
LEARNER_DOCS = ("docs/learners.md", "docs/gpu.md")
FORBIDDEN_NAMES = ("secrets.json", "gradebook.sqlite", "gradebook.db", "equivalent_mutants.txt")
COURSE_ONLY = re.compile(r"^# course-only \{\n.*?^# \} course-only\n", re.M | re.S)
RELEASE_FENCE = re.compile(r"^# (release-only \{|\} release-only)\n", re.M)
MARKER = re.compile(r"^\s*(#+|//|<!--)?\s*(BEGIN|END) (SOLUTION|HIDDEN TESTS|MARK SCHEME)\b")
# autograder/samples holds hostile demo submissions for the grader's tests: not for learners.
# equivalent_mutants.txt: make mutants' list of the checker mutants that change nothing,
# each quoting a line of the reference (instructor material beside solution/)
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints", "*.egg-info",
                                "samples", "equivalent_mutants.txt")
# Instructor-only code: what *is* a stage's answer (coursekit.checking.graded); the checks
# that need it are graded by the instructor, and a learner's run names them.
INSTRUCTOR_ONLY = ("coursekit/instructor",)
# A checker's sealed replays (projects/<p>/tests/sealed/) are a stage's answer as a program:
# the learner's copy compares with their stored outputs for public inputs (tests/expected/).
PROJECT_COURSE_ONLY = ("tests/sealed",)


class ReleaseError(Exception):
    pass


def stale_starters(root: Path) -> list[str]:
    from coursekit.authoring.starters import project_pairs, strip_solutions
    return [str(starter.relative_to(root)) for solution, starter in project_pairs(root)
            if not starter.exists()
            or starter.read_text() != strip_solutions(solution.read_text(), str(solution))]


def stale_sealed(root: Path) -> list[str]:
    """The sealed programs (a checker's replays) missing or not those of their sources."""
    from coursekit.authoring.sealed import stale
    return [str(target.relative_to(root)) for target in stale(root)]


def markers_in(path: Path) -> list[str]:
    """'file: line' for every solution/hidden-test marker left in a released file."""
    found = []
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        texts = ["".join(c.get("source", "")) if isinstance(c.get("source"), list)
                 else c.get("source", "") for c in nb.get("cells", [])]
    else:
        try:
            texts = [path.read_text()]
        except (UnicodeDecodeError, OSError):
            return found
    for text in texts:
        for line in text.splitlines():
            if MARKER.match(line):
                found.append(f"{path}: {line.strip()[:80]}")
    return found


def release(out: Path, course_root: Path = ROOT, notebooks_dir: Path | None = None,
            force: bool = False) -> dict:
    out = Path(out).resolve()
    course_root = Path(course_root).resolve()
    notebooks_dir = Path(notebooks_dir or course_root / "notebooks")
    if out == course_root or course_root in out.parents and out.parts[
            len(course_root.parts)] not in ("build",):
        raise ReleaseError(f"--out {out} is inside the course folder (use build/ or "
                           "somewhere else)")
    stale = stale_starters(course_root) + stale_sealed(course_root)
    if stale:
        raise ReleaseError("starters or sealed programs out of date with their solutions: "
                           + ", ".join(stale)
                           + " (run `make starters`)")
    if out.exists():
        if any(out.iterdir()) and not force:
            raise ReleaseError(f"{out} is not empty (pass --force to replace it)")
        shutil.rmtree(out)
    out.mkdir(parents=True)
    try:
        counts = _write(out, course_root, notebooks_dir)
        leaks = [m for p in sorted(out.rglob("*")) if p.is_file() for m in markers_in(p)]
        leaks += [str(p) for p in out.rglob("*") if p.name in FORBIDDEN_NAMES]
        leaks += [str(p) for p in out.rglob("solution") if p.is_dir()]
        leaks += [str(out / p) for p in INSTRUCTOR_ONLY if (out / p).exists()]
        if leaks:
            raise ReleaseError("the release still holds instructor-only content:\n  " +
                               "\n  ".join(leaks[:20]))
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    return {"out": str(out), **counts}


def learner_makefile(text: str) -> str:
    """The Makefile without its course-only blocks and with its release-only blocks' lines
    (the release's own help); a fence left unpaired is an error."""
    kept = COURSE_ONLY.sub("", text)
    if re.search(r"^# (course-only \{|\} course-only)$", kept, re.M):
        raise ReleaseError("Makefile: a course-only block is not closed")
    return RELEASE_FENCE.sub("", kept)  # its release-only lines become the help


def title_of(path: Path) -> str:
    """The first Markdown heading of a README, without its #."""
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def learner_readme(projects: list[str], notebooks: dict[str, str], root: Path) -> str:
    """The release's README.md: the learner's path first, then what the course holds
    (``notebooks``: file name -> title)."""
    nb_lines = [f"- `notebooks/{name}`" + (f": {title}" if title else "")
                for name, title in notebooks.items()]
    project_lines = []
    for name in projects:
        title = title_of(root / "projects" / name / "README.md")
        project_lines.append(f"- [{title or name}](projects/{name}/README.md)")
    return (README_TEMPLATE.read_text()
            .replace("{{notebooks}}", "\n".join(nb_lines) or "(none)")
            .replace("{{projects}}", "\n".join(project_lines) or "(none)"))


def _ignore(root: Path, course_only=INSTRUCTOR_ONLY):
    """``IGNORE`` and the course-only folders, for ``shutil.copytree`` under ``root``."""
    skip = {(root / path).resolve() for path in course_only}

    def ignore(folder, names):
        here = Path(folder).resolve()
        return set(IGNORE(folder, names)) | {n for n in names if here / n in skip}
    return ignore


def _write(out: Path, root: Path, notebooks_dir: Path) -> dict:
    import nbformat

    from autograder.nbsource import release_notebook
    for name in TOP_FILES:
        if (root / name).is_file():
            shutil.copy2(root / name, out / name)
    if (root / "Makefile").is_file():
        (out / "Makefile").write_text(learner_makefile((root / "Makefile").read_text()))
    for name in TOP_DIRS:
        if (root / name).is_dir():
            shutil.copytree(root / name, out / name, ignore=_ignore(root))
    for name in LEARNER_DOCS:
        if (root / name).is_file():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, out / name)
    projects = []
    for project in sorted(p for p in (root / "projects").iterdir() if p.is_dir()):
        projects.append(project.name)
        for item in project.iterdir():
            if item.name == "solution" or item.name == "__pycache__":
                continue
            target = out / "projects" / project.name / item.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if item.is_dir():
                shutil.copytree(item, target, ignore=_ignore(project, PROJECT_COURSE_ONLY))
            else:
                shutil.copy2(item, target)
    notebooks, titles = [], {}
    for path in sorted(notebooks_dir.glob("*.ipynb")):
        learner = release_notebook(nbformat.read(str(path), as_version=4))
        target = out / "notebooks" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(learner, str(target))
        notebooks.append(path.name)
        titles[path.name] = learner.metadata.get("course", {}).get("title", "")
    for item in sorted(notebooks_dir.iterdir()) if notebooks_dir.is_dir() else []:
        if item.suffix in (".ipynb", ".py") or item.name in ("src", "__pycache__") \
                or item.name.startswith("."):
            continue  # assets only: generators and scripts may hold answers
        target = out / "notebooks" / item.name
        if item.is_dir():
            shutil.copytree(item, target, ignore=IGNORE)
        else:
            shutil.copy2(item, target)
    (out / "README.md").write_text(learner_readme(projects, titles, root))
    return {"projects": projects, "notebooks": notebooks}

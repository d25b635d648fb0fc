"""What there is to grade, discovered from the course folder (nothing hard-coded).

* projects: every ``projects/<name>/tests/check.py``; its stages, check ids and points
  come from the checker itself (its ``checker`` object, read in a subprocess once and
  cached by the checker's content hash), so a new project or check needs no change here;
* notebooks: every ``notebooks/*.ipynb`` (or another folder given to the grader); the
  questions are the nbgrader cells with ``grade: true`` (autograded: code test cells;
  manually graded answers are listed apart).

Item names used everywhere (gradebook, CSV columns, feedback):
``<project>/stage-<n>`` for a project stage, ``notebooks/<file>.ipynb`` for a notebook,
``notebooks/<file>.ipynb:<grade_id>`` for one of its questions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# ROOT: the default course folder. The checker fingerprint lives in the bottom layer
# (notebook check cells key on it too); the grader's name for it stays here.
from coursekit.facts import ROOT, checker_fingerprint

_LIST_CHECKS = r"""
import json, runpy, sys
module = runpy.run_path(sys.argv[1], run_name="autograder_list")
checker = module["checker"]
print(json.dumps({"project": checker.project,
                  "titles": {str(k): v for k, v in checker.stage_titles.items()},
                  "checks": [[c.stage, c.check_id, c.points] for c in checker.checks]}))
"""


@dataclass
class Stage:
    project: str
    number: int
    title: str
    checks: list[tuple[str, float]]  # (check_id, points)

    @property
    def item(self) -> str:
        return f"{self.project}/stage-{self.number}"

    @property
    def max_points(self) -> float:
        return float(sum(p for _, p in self.checks))


@dataclass
class Project:
    name: str
    path: Path
    stages: dict[int, Stage] = field(default_factory=dict)

    @property
    def check(self) -> Path:
        return self.path / "tests" / "check.py"


@dataclass
class Question:
    notebook: str
    grade_id: str
    points: float

    @property
    def item(self) -> str:
        return f"{self.notebook}:{self.grade_id}"


@dataclass
class Notebook:
    name: str          # "notebooks/01_async_timing.ipynb"
    path: Path         # the source (instructor) version
    questions: list[Question]
    manual: list[str]  # grade_ids graded by hand (not by the autograder)
    project: str | None = None  # the project its check cells check (metadata.course)

    @property
    def item(self) -> str:
        return self.name

    @property
    def max_points(self) -> float:
        return float(sum(q.points for q in self.questions))


def list_checks(check: Path, cache_dir: Path | None = None, root: Path = ROOT) -> dict:
    """The checker's stages and checks, from the checker itself (cached on disk)."""
    key = checker_fingerprint(root, check.parent.parent.name)
    cached = cache_dir / f"checks-{check.parent.parent.name}-{key[:16]}.json" \
        if cache_dir else None
    if cached and cached.exists():
        return json.loads(cached.read_text())
    done = subprocess.run([sys.executable, "-c", _LIST_CHECKS, str(check)],
                          capture_output=True, check=False, text=True, timeout=300, cwd=root)
    if done.returncode != 0:
        raise RuntimeError(f"cannot list the checks of {check}: {done.stderr[-800:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    if cached:
        write_atomically(cached, json.dumps(data))
    return data


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so that shards
    starting together on one course folder never read a half-written cache file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def discover_projects(root: Path = ROOT, only: set[str] | None = None,
                      cache_dir: Path | None = None) -> dict[str, Project]:
    projects = {}
    for check in sorted(root.glob("projects/*/tests/check.py")):
        name = check.parent.parent.name
        if only is not None and name not in only:
            continue
        data = list_checks(check, cache_dir, root)
        project = Project(name, check.parent.parent)
        for stage, check_id, points in data["checks"]:
            st = project.stages.setdefault(stage, Stage(
                name, stage, data["titles"].get(str(stage), f"stage {stage}"), []))
            st.checks.append((check_id, float(points)))
        projects[name] = project
    return projects


def read_notebook_questions(path: Path, name: str) -> Notebook:
    nb = json.loads(path.read_text())
    questions, manual = [], []
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade"):
            continue
        if meta.get("solution") or cell.get("cell_type") != "code":
            manual.append(meta["grade_id"])
        else:
            questions.append(Question(name, meta["grade_id"], float(meta.get("points", 0))))
    return Notebook(name, path, questions, manual,
                    nb.get("metadata", {}).get("course", {}).get("project"))


def discover_notebooks(folder: Path, only: set[str] | None = None) -> dict[str, Notebook]:
    out = {}
    for path in sorted(folder.glob("*.ipynb")):
        name = f"notebooks/{path.name}"
        if only is not None and name not in only and path.name not in only:
            continue
        out[name] = read_notebook_questions(path, name)
    return out


def parse_selection(spec: str | None) -> tuple[dict[str, set[int] | None] | None,
                                                set[str] | None]:
    """``--stages`` text -> (projects: {name: stages or None for all} or None for every
    project, notebooks: names or None for every notebook).

    Items, comma separated: ``performance-audit:4``, ``performance-audit`` (all its
    stages), ``projects`` (every project), ``notebooks`` (every notebook),
    ``notebooks/01_async_timing.ipynb`` or ``01_async_timing.ipynb`` (one notebook)."""
    if not spec:
        return None, None
    projects: dict[str, set[int] | None] = {}
    notebooks: set[str] = set()
    every_project = every_notebook = False
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        if part == "projects":
            every_project = True
        elif part == "notebooks":
            every_notebook = True
        elif part.endswith(".ipynb"):
            notebooks.add(part if part.startswith("notebooks/") else f"notebooks/{part}")
        elif ":" in part:
            name, stage = part.split(":", 1)
            if projects.get(name, set()) is not None:
                projects.setdefault(name, set()).add(int(stage))
        else:
            projects[part] = None
    return (None if every_project else projects), (None if every_notebook else notebooks)

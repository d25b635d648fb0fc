"""Build course notebooks from small, reviewable generator scripts (``notebooks/src/*.py``).

    nb = notebook("performance-audit", stages=[1], ci_parameters={"N": 256}, cells=[
        md("# 01 · ..."),
        parameters('IMPL = "../projects/performance-audit/starter/model.py"\\nN = 1024'),
        code("print(N)"),
        answer("starting_point", 1, "The learner's written answer (instructor version)"),
        solution("summarize_samples", "def f(x):\\n    ### BEGIN ..."),
        tests("summarize_samples_tests", 2, "assert f(1) == 1"),
    ])
    write(nb, "notebooks/01_async_timing.ipynb")

Every notebook gets the course kernelspec, ``metadata.course`` (project, stages,
ci_parameters) and nbgrader metadata (schema 3) on graded cells. ``write`` stores it
without outputs or execution counts, with cell ids that stay put when other cells move,
and validates it (nbformat and nbgrader) before writing.
"""

from __future__ import annotations

import hashlib
import textwrap
from pathlib import Path

import nbformat

from coursekit.facts import ALLOWED_ERROR_TAG, KERNELSPEC


def _src(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def md(text: str):
    return nbformat.v4.new_markdown_cell(_src(text))


def code(text: str, tags: list[str] | None = None):
    cell = nbformat.v4.new_code_cell(_src(text))
    if tags:
        cell.metadata["tags"] = list(tags)
    return cell


def parameters(text: str):
    """The papermill parameters cell (IMPL and sizes; learner-sized defaults)."""
    return code(text, tags=["parameters"])


def _nbgrader(cell, grade_id: str, *, grade: bool, solution: bool, locked: bool,
              points: float | None = None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    return cell


def solution(grade_id: str, text: str):
    """An autograded-answer code cell: the instructor's code between
    ``### BEGIN SOLUTION`` / ``### END SOLUTION`` is cleared for learners (nbgrader's
    stub raises NotImplementedError, so the cell is tagged ``raises-exception`` and
    Run All goes on)."""
    return _nbgrader(code(text, tags=[ALLOWED_ERROR_TAG]), grade_id, grade=False,
                     solution=True, locked=False)


def tests(grade_id: str, points: float, text: str):
    """A locked, autograded test cell worth ``points``; ``### BEGIN HIDDEN TESTS`` regions
    are removed for learners. Tagged ``raises-exception``: a failing test shows its
    error and Run All goes on (nbgrader grades it from that error)."""
    return _nbgrader(code(text, tags=[ALLOWED_ERROR_TAG]), grade_id, grade=True,
                     solution=False, locked=True, points=points)


def answer(grade_id: str, points: float, instructor_text: str):
    """A manually graded written answer (markdown). Learners see "YOUR ANSWER HERE"."""
    return _nbgrader(md(instructor_text), grade_id, grade=True, solution=True, locked=False,
                     points=points)


def notebook(project: str | None, stages: list, ci_parameters: dict, cells: list,
             **course_extra):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["course"] = {"project": project, "stages": list(stages),
                             "ci_parameters": dict(ci_parameters), **course_extra}
    nb.cells = list(cells)
    return nb


def _assign_ids(nb, prefix: str) -> None:
    seen: set[str] = set()
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        base = grade_id or hashlib.sha1(cell.source.encode()).hexdigest()[:10]
        cid, n = f"{prefix}-{base}"[:64], 1
        while cid in seen:
            n += 1
            cid = f"{prefix}-{base}-{n}"[:64]
        seen.add(cid)
        cell["id"] = cid


def strip_outputs(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def validate(nb) -> None:
    """nbformat's schema, then nbgrader's metadata rules (grade ids, points, cell types)."""
    from nbgrader.nbgraderformat import MetadataValidator
    nbformat.validate(nb)
    MetadataValidator().validate_nb(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(tagged) != 1:
        raise ValueError(f"a course notebook needs exactly one 'parameters' cell, "
                         f"found {len(tagged)}")


def write(nb, path: str | Path) -> Path:
    path = Path(path)
    _assign_ids(nb, path.stem.split("_")[0])
    strip_outputs(nb)
    validate(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path

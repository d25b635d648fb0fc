"""Source (instructor) notebooks -> learner versions and grading keys, with nbgrader's
own preprocessors, not a rewrite of them.

``release_notebook`` runs nbgrader's generate_assignment pipeline minus its database
steps: LockCells, ClearSolutions, ClearOutput, CheckCellMetadata, ComputeChecksums,
ClearHiddenTests, ClearMarkScheme, ComputeChecksums, CheckCellMetadata (nbgrader's own
order: hidden tests are cleared after the first checksums, checksums computed again).

``grading_key`` is what the grader needs about one source notebook, as plain JSON
(computed once per batch in the parent and cached by content hash, so workers never
import nbgrader): for every autograded test cell its released (visible) cell with
checksum, its hidden part, its points; every locked cell as released; manual answers;
the notebook's CI parameters; the names the course's own cells bind by import, which the
grader's test process imports fresh instead of reading them from the learner's notebook
(``coursekit.notebook.free_names.course_imports``).
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

from coursekit.compat.optional import Absent, need

BEGIN_HIDDEN, END_HIDDEN = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


def release_notebook(nb):
    """The learner version of a source notebook (an nbformat NotebookNode)."""
    need("nbgrader", "releasing notebooks")
    from nbgrader.preprocessors import (
        CheckCellMetadata,
        ClearHiddenTests,
        ClearMarkScheme,
        ClearOutput,
        ClearSolutions,
        ComputeChecksums,
        LockCells,
    )
    nb = copy.deepcopy(nb)
    resources: dict = {}
    for step in (LockCells, ClearSolutions, ClearOutput, CheckCellMetadata, ComputeChecksums,
                 ClearHiddenTests, ClearMarkScheme, ComputeChecksums, CheckCellMetadata):
        nb, resources = step().preprocess(nb, resources)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = None
            cell.outputs = []
    return nb


def hidden_part(source: str) -> str:
    """The lines inside ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``."""
    out, inside = [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN in line:
            inside = True
        elif END_HIDDEN in line:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out).strip("\n")


_UTILS = None


def nbgrader_utils():
    """``nbgrader.utils`` (is_grade, is_locked, compute_checksum, ...) loaded from its
    file: the same code, without ``nbgrader/__init__`` importing its server extensions
    (4 s per process)."""
    global _UTILS
    if _UTILS is None:
        import importlib.util
        import sys
        found = importlib.util.find_spec("nbgrader")
        if found is None:  # an accelerator image may not ship it: named, not an AttributeError
            raise Absent("nbgrader", "the grader's notebook route")
        folder = found.submodule_search_locations[0]
        spec = importlib.util.spec_from_file_location("_nbgrader_utils",
                                                      Path(folder) / "utils.py")
        _UTILS = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = _UTILS
        spec.loader.exec_module(_UTILS)
    return _UTILS


def grade_id(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def grading_key(path: Path) -> dict:
    import nbformat

    from coursekit.notebook.free_names import course_imports
    utils = nbgrader_utils()
    source = nbformat.read(str(path), as_version=4)
    released = release_notebook(source)
    key = {"tests": {}, "locked": {}, "order": [], "manual": [],
           "ci_parameters": source.metadata.get("course", {}).get("ci_parameters", {}),
           "imports": course_imports([
               (c.source, bool(utils.is_solution(c))) for c in source.cells
               if c.cell_type == "code" and not (utils.is_grade(c)
                                                 and not utils.is_solution(c))])}
    for src_cell, rel_cell in zip(source.cells, released.cells, strict=True):
        gid = grade_id(src_cell)
        if gid is None:
            continue
        if utils.is_grade(src_cell) and (utils.is_solution(src_cell)
                                         or src_cell.cell_type != "code"):
            key["manual"].append(gid)
            continue
        if utils.is_grade(src_cell):
            key["tests"][gid] = {"cell": rel_cell, "hidden": hidden_part(src_cell.source),
                                 "points": float(src_cell.metadata.nbgrader.get("points", 0)),
                                 "checksum": utils.compute_checksum(rel_cell)}
            key["order"].append(gid)
        elif utils.is_locked(src_cell):
            key["locked"][gid] = {"cell": rel_cell,
                                  "checksum": utils.compute_checksum(rel_cell)}
            key["order"].append(gid)
    return json.loads(json.dumps(key))


def cached_grading_key(path: Path, cache_dir: Path | None) -> dict:
    digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()[:20]
    cached = cache_dir / f"nbkey-{Path(path).stem}-{digest}.json" if cache_dir else None
    if cached and cached.exists():
        key = json.loads(cached.read_text())
        if "imports" in key:  # a key cached before the test process is rebuilt
            return key
    key = grading_key(path)
    key["source_hash"] = digest
    if cached:
        from autograder.course import write_atomically
        write_atomically(cached, json.dumps(key))
    return key

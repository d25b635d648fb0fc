"""Course notebooks: stored clean, valid for nbgrader and papermill, and executed headless.

Every ``notebooks/*.ipynb`` is found automatically, so a new notebook is tested as soon
as it exists. Static checks are fast. The execution tests (marked slow) run each notebook
with real papermill at its CI sizes, once against the project's reference solution
(every check cell passes, no error anywhere) and once as the learner receives it (the
starter file and nbgrader's cleared solutions: it must run to its last cell, its check
cells say "not yet" instead of raising).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from helpers import reference_run, starter_run
from notebook_privacy import PROBE_ENV, private_in_outputs
from test_notebook_claims import printed_claim_problems
from test_notebook_provenance import assert_notebook_01_runs

from coursekit.authoring import nbbuild
from coursekit.authoring.nbbuild import ALLOWED_ERROR_TAG
from coursekit.commands import course
from coursekit.facts import KERNELSPEC, ROOT

NOTEBOOKS = course.discover_notebooks()
IDS = [p.stem for p in NOTEBOOKS]


def read(path: Path):
    return nbformat.read(path, as_version=4)


def parameters_cell(nb):
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"expected one cell tagged 'parameters', found {len(cells)}"
    return cells[0]


def assigned_names(source: str) -> dict:
    names = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    # parameters are literals or small arithmetic such as 256 * 2**20
                    names[target.id] = eval(compile(ast.Expression(node.value), "<param>",
                                                    "eval"), {"__builtins__": {}})
    return names


def test_notebooks_exist():
    names = {p.name for p in NOTEBOOKS}
    for expected in ("01_async_timing.ipynb", "02_trace_reading.ipynb", "03_roofline.ipynb",
                     "04_remat.ipynb"):
        assert expected in names


# ---------------------------------------------------------------------------------------
# Static: how each notebook is stored
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_stored_without_outputs(path):
    nb = read(path)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs or execution counts; " \
                      "store notebooks cleared (regenerate with notebooks/src/build.py)"
    assert "papermill" not in nb.metadata, f"{path.name} is an executed papermill copy"
    stray = [i for i, c in enumerate(nb.cells)
             if {"papermill", "execution"} & set(c.metadata)]
    assert not stray, f"{path.name}: cells {stray} carry execution metadata"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_valid_nbformat_and_nbgrader(path):
    from nbgrader.nbgraderformat import MetadataValidator
    nb = read(path)
    nbformat.validate(nb)
    MetadataValidator().validate_nb(nb)
    graded = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert graded, f"{path.name} has no graded nbgrader cell"
    ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells
           if "nbgrader" in c.metadata and "grade_id" in c.metadata["nbgrader"]]
    assert len(ids) == len(set(ids)), f"{path.name}: duplicate grade_id in {ids}"
    for cell in graded:
        meta = cell.metadata["nbgrader"]
        assert meta.get("points", 0) > 0, f"{path.name}: {meta['grade_id']} has no points"
        assert meta.get("schema_version") == 3
        if cell.cell_type == "code":
            assert meta["locked"], f"{path.name}: test cell {meta['grade_id']} is not locked"
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("solution"):
            # a cleared stub raises NotImplementedError: Run All must go on past it
            assert ALLOWED_ERROR_TAG in cell.metadata.get("tags", []), meta["grade_id"]
        if "BEGIN SOLUTION" in cell.source:
            assert meta.get("solution"), f"{path.name}: solution region outside a solution cell"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_parameters_and_course_metadata(path):
    nb = read(path)
    assert nb.metadata["kernelspec"]["name"] == course.KERNEL
    assert nb.metadata["kernelspec"]["language"] == "python"
    meta = nb.metadata.get("course")
    assert isinstance(meta, dict), f"{path.name} lacks metadata.course"
    assert isinstance(meta.get("stages"), list)
    assert isinstance(meta.get("ci_parameters"), dict) and meta["ci_parameters"], \
        f"{path.name}: CI must run at small sizes: give ci_parameters"
    params = assigned_names(parameters_cell(nb).source)
    unknown = set(meta["ci_parameters"]) - set(params)
    assert not unknown, f"{path.name}: ci_parameters {sorted(unknown)} are not in the " \
                        "parameters cell"
    project = meta.get("project")
    if project and (ROOT / "projects" / project / "solution" / "model.py").is_file():
        assert "IMPL" in params, f"{path.name}: the parameters cell must set IMPL"
        impl = (path.parent / params["IMPL"]).resolve()
        assert impl == (ROOT / "projects" / project / "starter" / "model.py").resolve(), \
            f"{path.name}: IMPL should default to the learner's starter, got {params['IMPL']}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_learner_version_clears_solutions(path):
    nb = course.learner_version(read(path))
    for cell in nb.cells:
        assert "BEGIN SOLUTION" not in cell.source
        assert "BEGIN HIDDEN TESTS" not in cell.source


def source_of(path: Path) -> Path:
    return ROOT / "notebooks" / "src" / (path.stem + ".py")


def test_built_notebooks_are_up_to_date():
    done = subprocess.run([sys.executable, str(ROOT / "notebooks" / "src" / "build.py"),
                           "--check"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_round_trip_ipynb_source_ipynb(path, tmp_path):
    """ipynb -> source -> ipynb is the identity, and the source it gives is the stored one
    (what ``build.py --sync`` writes for an unedited notebook changes nothing)."""
    text = nbbuild.to_text(read(path))
    assert text == source_of(path).read_text(), f"{path.name}: sync would rewrite its source"
    rebuilt = nbbuild.write(nbbuild.from_text(text), tmp_path / path.name)
    assert rebuilt.read_text() == path.read_text()


def test_sync_drops_what_jupyterlab_adds():
    """An executed, saved notebook (outputs, counts, timings, fresh cell ids, the kernel's
    language_info) syncs to the same source as the stored one."""
    path = ROOT / "notebooks" / "01_async_timing.ipynb"
    nb = read(path)
    nb.metadata["language_info"] = {"name": "python", "version": "3.12.3",
                                    "mimetype": "text/x-python"}
    for n, cell in enumerate(nb.cells):
        cell["id"] = f"jupyterlab-{n}"
        cell.metadata["collapsed"] = False
        cell.metadata["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
        if cell.cell_type == "code":
            cell.execution_count = n
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x\n")]
    assert nbbuild.to_text(nb) == source_of(path).read_text()


# ---------------------------------------------------------------------------------------
# The runner's own verdicts, on small synthetic notebooks (real papermill, real nbgrader)
# ---------------------------------------------------------------------------------------

def synthetic(folder: Path, name: str, cells: str) -> Path:
    """A notebook from percent-format cells, after a ``SIZE = 10`` parameters cell."""
    nb = nbbuild.from_text('# %% tags=["parameters"]\nSIZE = 10\n\n' + cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["course"] = {"project": None, "stages": [], "ci_parameters": {"SIZE": 1}}
    return nbbuild.write(nb, folder / name)


@pytest.fixture(scope="module")
def kernel():
    course.ensure_kernel()


@pytest.mark.slow
def test_runner_verdicts(tmp_path, kernel):
    folder = tmp_path / "nbs"
    synthetic(folder, "a_good.ipynb", '''
# %% nbgrader={"grade": false, "grade_id": "f", "locked": false, "schema_version": 3, "solution": true, "task": false} tags=["raises-exception"]
def f():
    ### BEGIN SOLUTION
    return SIZE
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "f_tests", "locked": true, "points": 1, "schema_version": 3, "solution": false, "task": false} tags=["raises-exception"]
assert f() == 1

# %%
print('last cell')
''')
    synthetic(folder, "b_broken.ipynb", '''
# %%
raise ValueError('planted')

# %%
print('never')
''')
    out = tmp_path / "out"
    rc = course.main(["--no-projects", "--ci", "--notebooks", str(folder), "--out", str(out)])
    summary = json.loads((out / "summary.json").read_text())
    rows = {r["notebook"]: r for r in summary["notebooks"]}
    assert rc == 1 and summary["failed"] == ["b_broken.ipynb"]
    assert rows["a_good.ipynb"]["status"] == "ok"
    assert rows["a_good.ipynb"]["parameters"] == {"SIZE": 1}  # CI sizes injected
    assert rows["b_broken.ipynb"]["errors"][0]["error"].startswith("ValueError")
    assert (out / "executed" / "a_good.ipynb").is_file()

    rc = course.main(["--no-projects", "--ci", "--learner", "--only", "a_good",
                      "--notebooks", str(folder), "--out", str(out)])
    row = json.loads((out / "summary-learner.json").read_text())["notebooks"][0]
    assert rc == 0 and row["status"] == "ok" and row["ran_to_end"]
    assert row["tests_failed"] == 1 and row["learner_errors"]  # the cleared exercise
    executed = read(out / "executed-learner" / "a_good.ipynb")
    assert any("raise NotImplementedError()" in c.source for c in executed.cells)


def test_project_verdicts():
    good = {"error": "", "returncode": 0,
            "stages": {"1": {"passed": 3, "failed": 0, "failed_ids": [], "seconds": 1.0}}}
    bad = {**good, "returncode": 1,
           "stages": {"1": {"passed": 2, "failed": 1, "failed_ids": ["x"], "seconds": 1.0}}}
    crashed = {**good, "error": "the checker wrote no JSON result", "stages": {}}
    assert course.project_ok(good, learner=False)
    assert not course.project_ok(bad, learner=False)
    assert course.project_ok(bad, learner=True)       # starters are expected to fail
    assert not course.project_ok(crashed, learner=True)
    # a timing left undecided under load (check.py's exit 3, nothing failed) is no
    # failure of the solution; exit 3 beside a failed check still is
    undecided = {**good, "returncode": 3, "stages": {"1": {
        "passed": 2, "failed": 0, "failed_ids": [], "inconclusive": 1,
        "inconclusive_ids": ["t"], "seconds": 1.0}}}
    assert course.project_ok(undecided, learner=False)
    assert not course.project_ok({**undecided, "stages": bad["stages"]}, learner=False)
    assert not course.all_passed(undecided)  # check.py's own rule: exit 0 only


# ---------------------------------------------------------------------------------------
# Execution at CI sizes: against the solution, and as the learner receives it
# ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def privacy_probe():
    """A value planted in every kernel's environment: no output may show it (a cell that
    shows the environment would)."""
    import secrets
    before = os.environ.get(PROBE_ENV)
    os.environ[PROBE_ENV] = secrets.token_hex(16)
    yield
    if before is None:
        del os.environ[PROBE_ENV]
    else:
        os.environ[PROBE_ENV] = before


def run(path: Path, tmp_path: Path, learner: bool) -> dict:
    row = course.run_notebook(path, tmp_path, ci=True, learner=learner, timeout=600)
    problems = row["errors"] or ("did not reach its last cell" if not row["ran_to_end"] else "")
    assert row["status"] == "ok", f"{path.name} ({row['mode']}): {problems or row}"
    private = private_in_outputs(read(Path(row["executed"])))
    assert not private, f"{path.name} ({row['mode']}) shows what is private: {private}"
    return row


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_runs_against_solution(path, tmp_path, kernel):
    project = read(path).metadata["course"].get("project")
    if project:  # the session's sandboxed grading of the solution serves its check cells
        reference_run(project)
    started_ms = time.time() * 1000
    row = run(path, tmp_path, learner=False)
    if path.stem == "01_async_timing":
        assert_notebook_01_runs(started_ms - 1000)  # its runs carry their provenance
    assert row["checks_failed"] == 0 and row["check_cells_ok"] == row["check_cells"]
    printed = "\n".join(o.get("text", "") for c in read(Path(row["executed"])).cells
                        if c.cell_type == "code" for o in c.get("outputs", [])
                        if o.get("output_type") == "stream")
    assert not printed_claim_problems(path.stem, printed), printed_claim_problems(path.stem,
                                                                                 printed)
    assert row["tests_failed"] == 0 and row["not_yet_lines"] == 0
    if read(path).metadata["course"].get("project"):
        assert row["check_cells"] >= 1, f"{path.name} has no check cell that ran"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_runs_as_learner_version(path, tmp_path, kernel):
    project = read(path).metadata["course"].get("project")
    if project:  # one shared run of the starter serves every check cell of its project
        starter_run(project)
    row = run(path, tmp_path, learner=True)
    executed = read(tmp_path / "executed-learner" / path.name)
    text = "\n".join(o.get("text", "") for c in executed.cells if c.cell_type == "code"
                     for o in c.get("outputs", []) if o.get("output_type") == "stream")
    # every check cell that did not pass said so in words (where to start, or the first
    # FAIL to fix), and none raised; a stub is named once per check cell, not per check
    unfinished = row["check_cells"] - row["check_cells_ok"]
    closing = re.findall(r"^not yet: (?:start with|fix the first FAIL).*re-run this cell\.$",
                         text, re.M)
    assert len(closing) == unfinished, text[-3000:]
    assert "hint:     replace the `raise NotImplementedError`" not in text, "not condensed"
    if read(path).metadata["course"].get("project"):
        assert unfinished >= 1, f"{path.name}: a starter passed every check cell"
    # what ran is what learners get: the released notebook, plus only what running adds
    from autograder.nbsource import release_notebook
    assert course.without_execution(executed) == course.without_execution(
        release_notebook(read(path))), course.EXECUTION_ADDITIONS

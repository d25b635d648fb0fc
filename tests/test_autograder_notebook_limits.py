"""The grader's own process reads a submitted notebook within limits (issue 27, item 5):
300,000 cells, a 40 MiB output, JSON nested thousands deep and one enormous cell are each
refused with a named reason before nbformat parses them, through the real grader, while an
honest notebook in the same batch keeps full marks. The limits themselves are unit-tested
on both sides of each bound."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder import outcomes
from autograder.gradebook import Gradebook
from autograder.nblimits import (
    MAX_BYTES,
    MAX_CELLS,
    MAX_DEPTH,
    NotebookRefused,
    check_notebook_file,
)
from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))
import autograder.samples as fx  # noqa: E402

NB = "notebooks/ag_demo.ipynb"


def _cell(source: str = "x = 1") -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
            "execution_count": None}


def _nested(depth: int):
    value: dict = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def _write(tmp_path: Path, nb: dict, name: str = "nb.ipynb") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(nb))
    return path


@pytest.fixture(scope="module")
def honest() -> dict:
    good, _ = fx.notebook_variants()["nb-good"]
    return fx.learner_notebook(good)


def hostile_notebooks(honest: dict) -> dict:
    """student -> (notebook JSON text, the reason its record must carry)."""
    many = copy.deepcopy(honest)
    many["cells"] = many["cells"] + [_cell() for _ in range(300_000)]
    flood = copy.deepcopy(honest)
    flood["cells"][0].setdefault("outputs", [])
    flood["cells"].append({**_cell(), "outputs": [{"output_type": "stream", "name": "stdout",
                                                   "text": "x" * (40 << 20)}]})
    big = copy.deepcopy(honest)
    big["cells"].append(_cell("#" * 3_000_000))
    # 5,000 levels deep: written as text (json.dumps itself would recurse that deep)
    deep_text = '{"deep": ' + "[" * 5_000 + "]" * 5_000 + ", " + json.dumps(honest)[1:]
    return {"nb-limit-cells": (json.dumps(many), "notebook-too-many-cells"),
            "nb-limit-output": (json.dumps(flood), "notebook-too-large"),
            "nb-limit-deep": (deep_text, "notebook-too-deep"),
            "nb-limit-cell-source": (json.dumps(big), "notebook-too-large")}


def test_each_limit_refuses_just_past_its_bound_and_accepts_at_it(tmp_path, honest):
    at = copy.deepcopy(honest)
    at["cells"] = (at["cells"] + [_cell()] * MAX_CELLS)[:MAX_CELLS]
    assert check_notebook_file(_write(tmp_path, at))["cells"]
    past = copy.deepcopy(at)
    past["cells"].append(_cell())
    with pytest.raises(NotebookRefused) as refused:
        check_notebook_file(_write(tmp_path, past))
    assert refused.value.reason == "notebook-too-many-cells"
    assert f"{MAX_CELLS + 1:,} cells" in refused.value.message

    ok_deep = copy.deepcopy(honest)
    ok_deep["metadata"]["d"] = _nested(MAX_DEPTH - 2)  # root, metadata, then these
    assert check_notebook_file(_write(tmp_path, ok_deep))
    too_deep = copy.deepcopy(honest)
    too_deep["metadata"]["d"] = _nested(MAX_DEPTH)
    with pytest.raises(NotebookRefused) as refused:
        check_notebook_file(_write(tmp_path, too_deep))
    assert refused.value.reason == "notebook-too-deep"

    with pytest.raises(NotebookRefused) as refused:
        check_notebook_file(_write(tmp_path, honest), max_bytes=100)
    assert refused.value.reason == "notebook-too-large"
    assert (tmp_path / "nb.ipynb").stat().st_size < MAX_BYTES
    with pytest.raises(NotebookRefused) as refused:
        check_notebook_file(_write(tmp_path, honest), max_cell_chars=3)
    assert refused.value.reason == "notebook-too-large" and "cell 0" in refused.value.message


def test_not_json_is_left_to_nbformat(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text("{ not json")
    assert check_notebook_file(path) == {}


def test_every_refusal_has_an_outcome_with_a_sentence():
    for reason in ("notebook-too-large", "notebook-too-many-cells", "notebook-too-deep"):
        status, _ = outcomes.status_of(reason)
        assert status == "error" and outcomes.TABLE[reason].explain


@pytest.mark.slow
def test_the_grader_refuses_hostile_notebooks_in_seconds_and_grades_the_honest_one(
        tmp_path, honest):
    subs = tmp_path / "subs"
    fx.write(subs, "nb-good", None, honest)
    expected = {}
    for student, (text, reason) in hostile_notebooks(honest).items():
        path = fx.write(subs, student) / NB
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        expected[student] = reason
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(tmp_path / "out"),
         "--stages", NB, "--workers", "2", "--quiet", "--notebooks", str(fx.NOTEBOOK.parent),
         "--timeout", "60", "--cell-timeout", "8"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env=env, check=False)
    wall = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(tmp_path / "out")
    latest = {student: row["record"] for (student, _), row in book.latest().items()}
    book.close()
    assert latest["nb-good"]["points"] == 3.0, latest["nb-good"]
    wrong = {s: (latest[s]["status"], latest[s]["reason"], latest[s]["points"])
             for s, reason in expected.items()
             if (latest[s]["status"], latest[s]["reason"], latest[s]["points"])
             != ("error", reason, 0.0) or not latest[s]["message"]}
    assert not wrong, (wrong, f"batch took {wall:.0f} s")

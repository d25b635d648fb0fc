"""The grader's notebook route piece by piece, without the grader (seconds): which names a
test cell reads (``free_names``), which the course binds by import, the notebook learner
process (``cell_server`` behind ``bridge.LearnerProcess``) answering cells and names, and
the test process's run (``graded_run.GradedRun``) keeping verdicts out of its reach. The
same route through the real grader as root: tests/test_autograder_notebook_apart.py."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from coursekit.checking.codec import Handle
from coursekit.notebook import graded_run
from coursekit.notebook.free_names import course_imports, free_names
from coursekit.notebook.remote_names import NotebookFunction, resolve


def test_free_names_are_the_reads_a_cell_does_not_bind():
    source = '''
from jax.experimental import pallas as _pl
def _helper(kernel, x):
    _rows, _cols = x.shape
    return _pl.pallas_call(functools.partial(kernel, n_cols=_cols), interpret=INTERPRET)(x)
_data = [tuple(int(v) for v in np.asarray(k)) for k in step_keys(jax.random.key(7), 5)]
for _k, _want in (("a", 1),):
    assert _k in _s, float(_want)
class _A:
    z = Q
    def m(self): return R + z
'''
    assert free_names(source) == ["INTERPRET", "Q", "R", "_s", "functools", "jax", "np",
                                  "step_keys", "z"]
    assert free_names("%timeit f()\nx = g(1)") == ["g"]   # magics dropped
    assert free_names("def (") == []


def test_course_imports_leave_out_what_an_answer_binds():
    cells = [("import numpy as np\nimport jax\nfrom coursekit.notebook.cells import run_check",
              False),
             ("def step_keys(key, n):\n    raise NotImplementedError", True),
             ("from coursekit.x import step_keys\nimpl = load(1)\nimport os", False),
             ("os = 3", False)]
    assert course_imports(cells) == {"jax": "jax", "np": "numpy",
                                     "run_check": "coursekit.notebook.cells.run_check"}


@pytest.fixture
def learner(tmp_path):
    (tmp_path / "nb").mkdir()
    lp = graded_run.Learner(tmp_path / "nb" / "x.ipynb", 5.0)
    yield lp
    lp.close()


def _cell(lp, source: str) -> dict:
    return lp.request("cell", source=source, timeout=5.0)


def test_the_learner_process_answers_cells_and_names_as_data(learner, tmp_path):
    assert _cell(learner, "import os\ncwd = os.getcwd()\nprint('hello')")["text"] == "hello\n"
    _cell(learner, "x = 3\nflags = {'a': [1, 2.5, 'c', None, (1, 2)]}\n"
                   "def double(v):\n    return v * 2\n"
                   "class AlwaysEqual(float):\n    def __eq__(self, o):\n        return True\n"
                   "odd = AlwaysEqual(1.0)\n"
                   "def todo():\n    raise NotImplementedError('stage 1')\n"
                   "def bad():\n    return 1 / 0\nimport json")
    got = resolve(learner, ["x", "flags", "double", "odd", "todo", "bad", "json", "cwd",
                            "missing"], {"json": "json"})
    assert got["x"] == 3 and got["flags"] == {"a": [1, 2.5, "c", None, (1, 2)]}
    assert got["cwd"] == str(tmp_path / "nb")   # cells run in the notebook's folder
    assert got["json"] is json and "missing" not in got   # a course import is our own
    assert isinstance(got["double"], NotebookFunction) and got["double"](21) == 42
    assert isinstance(got["odd"], Handle) and type(got["odd"]).__name__ == "AlwaysEqual"
    with pytest.raises(NotImplementedError, match="stage 1"):
        got["todo"]()
    with pytest.raises(ZeroDivisionError):
        got["bad"]()
    error = _cell(learner, "raise ValueError('nope')")["error"]
    assert error == {"ename": "ValueError", "evalue": "nope"}


def test_a_cell_past_its_limit_is_stopped_and_the_notebook_goes_on(learner):
    answer = learner.request("cell", source="while True:\n    pass", timeout=1.0)
    assert answer["timeout"] and answer["error"]["ename"] == "CellTimeout"
    assert _cell(learner, "y = 1")["error"] is None


def _job(tmp_path: Path, cells: list[dict], limit: float = 5.0) -> dict:
    return {"notebook_path": str(tmp_path / "x.ipynb"), "imports": {"np": "numpy"},
            "cell_timeout": limit, "max_output": 1 << 20,
            "cells": [{**c, "index": i} for i, c in enumerate(cells)]}


def _run(tmp_path: Path, cells: list[dict], limit: float = 5.0) -> tuple[list, dict]:
    sent = []
    run = graded_run.GradedRun(_job(tmp_path, cells, limit),
                               lambda kind, **p: sent.append((kind, p)))
    try:
        ended = run.run()
    finally:
        run.learner.close()
    return [p["result"] for k, p in sent if k == "check"], ended


FORGERS = [
    # exec swallowed where IPython runs cells, an input transformer, a shadowed builtin,
    # a patched library: all in the learner's process, none where the tests run
    "import IPython.core.interactiveshell as m\n_e = exec\n"
    "def _quiet(c, *a, **k):\n    try:\n        return _e(c, *a, **k)\n"
    "    except Exception:\n        return None\nm.exec = _quiet",
    "get_ipython().input_transformers_cleanup.append(lambda lines: ['pass\\n'])",
    "float = lambda x: 9.0",
    "import numpy.testing\nnumpy.testing.assert_allclose = lambda *a, **k: None",
]


def test_learner_cells_cannot_reach_the_tests(tmp_path):
    test = {"kind": "test", "id": "square_tests",
            "visible": "assert float(square(3)) == 9.0, 'square(3) should be 9'",
            "hidden": "np.testing.assert_allclose(float(square(-4)), 16.0)"}
    cells = [{"kind": "learner", "source": "def square(x):\n    return x + x"},
             *({"kind": "learner", "source": f} for f in FORGERS), test]
    results, ended = _run(tmp_path, cells)
    assert ended == {}
    verdict = [r for r in results if r.get("id") == "square_tests"]
    assert len(verdict) == 1 and verdict[0]["error"] == ["AssertionError",
                                                          "square(3) should be 9"]


def test_a_hidden_part_runs_here_and_partial_credit_is_the_last_number(tmp_path):
    test = {"kind": "test", "id": "t", "visible": "_v = square(3)\nassert _v == 9",
            "hidden": "assert square(-4) == 16\n0.5"}
    results, _ = _run(tmp_path, [{"kind": "learner", "source": "def square(x):\n"
                                  "    return x * x"}, test])
    parts = {r["part"]: r for r in results if r.get("id") == "t"}
    assert parts["visible"]["error"] is None and parts["hidden"]["partial"] == 0.5


def test_a_learner_process_that_dies_stops_the_run_by_name(tmp_path):
    cells = [{"kind": "learner", "source": "import os\nos.abort()"},
             {"kind": "test", "id": "t", "visible": "assert True", "hidden": None}]
    results, ended = _run(tmp_path, cells)
    assert ended["dead_at"] == 0 and ended["dead_why"] == "signal:SIGABRT"
    assert not [r for r in results if r.get("id") == "t"]


def test_a_cell_that_ignores_its_limit_is_killed(tmp_path, monkeypatch):
    monkeypatch.setattr(graded_run, "GRACE_S", 1.0)
    cells = [{"kind": "learner", "source": "import signal, time\n"
              f"signal.signal({int(signal.SIGALRM)}, signal.SIG_IGN)\ntime.sleep(60)"},
             {"kind": "learner", "source": "x = 1"}]
    results, ended = _run(tmp_path, cells, limit=1.0)
    assert ended["dead_why"] == "cell-timeout" and ended["dead_at"] == 0


def test_a_value_that_is_not_data_stays_behind(learner, capsys):
    """An object that would run code if unpickled comes back as a handle: nothing of it
    runs here."""
    _cell(learner, "class Evil:\n    def __reduce__(self):\n"
                   "        return (print, ('unpickled',))\nvalue = Evil()")
    got = resolve(learner, ["value"], {})
    assert isinstance(got["value"], Handle) and type(got["value"]).__name__ == "Evil"
    assert "unpickled" not in capsys.readouterr().out


def test_what_runs_comes_from_the_release_not_the_submission():
    """The handed-in notebook gives its cells and their order; every test is the key's
    (an edited one restored and named, a deleted one put back after its predecessor), and
    a cell's metadata decides nothing: an invented hidden part or test is a learner
    cell."""
    import copy
    import sys

    import nbformat

    from coursekit.facts import ROOT
    sys.path.insert(0, str(ROOT))
    import autograder.samples as fx
    from autograder.nbsource import grading_key
    from autograder.notebook import plan
    key = grading_key(fx.NOTEBOOK)
    nb = nbformat.from_dict(fx.learner_notebook(fx.notebook_variants()["nb-good"][0]))
    square_test = next(c for c in nb.cells
                       if c.metadata.get("nbgrader", {}).get("grade_id") == "square_tests")
    square_test.source = "pass  # mine now"
    nb.cells = [c for c in nb.cells
                if c.metadata.get("nbgrader", {}).get("grade_id") != "mean_tests"]
    fake = copy.deepcopy(square_test)
    fake.source = "assert True"
    fake.metadata["autograder"] = {"hidden_of": "square_tests"}
    invented = nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {
        "grade": True, "grade_id": "bonus", "locked": True, "points": 9, "solution": False}})
    nb.cells += [fake, invented]
    cells, tampered, missing = plan(nb, key, hidden=True)
    tests = [c for c in cells if c["kind"] == "test"]
    assert [t["id"] for t in tests] == ["square_tests", "mean_tests"]
    assert tampered == ["square_tests"] and missing == ["mean_tests"]
    assert tests[0]["visible"] == key["tests"]["square_tests"]["cell"]["source"]
    assert tests[0]["hidden"] == key["tests"]["square_tests"]["hidden"]
    assert cells[-2:] == [{"kind": "learner", "source": "assert True"},
                          {"kind": "learner", "source": "x = 1"}]
    assert all(t["hidden"] is None for t in plan(nb, key, hidden=False)[0]
               if t["kind"] == "test")

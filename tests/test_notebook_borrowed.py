"""A notebook exercise may not borrow the course helper that computes it (issue 50): every
solution region of every notebook is ruled (``forbidden.NOTEBOOK_RULES``) or said why not
(``NOTEBOOK_NO_RULE``); each rule names something that exists; the solution's cells borrow
nothing and each rule's plant is found, by the same reading the grader uses
(``coursekit.notebook.borrowed``); a rewritten exercise is read as the rewrite; and the
visible test cell refuses a plant in the learner's own kernel (IPython's history), naming
the helper, while the solution passes it. The grader's side:
tests/test_autograder_notebook_borrowed.py."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import nbformat
import pytest
from notebook_plants import PLANTS, cells_before_test, released

from coursekit.checking import forbidden
from coursekit.facts import ROOT
from coursekit.notebook import borrowed
from coursekit.notebook.free_names import bound_names


def _solution_cells(notebook: str) -> list[str]:
    nb = nbformat.read(str(ROOT / "notebooks" / f"{notebook}.ipynb"), as_version=4)
    return [c.source for c in nb.cells if c.cell_type == "code"
            and c.metadata.get("nbgrader", {}).get("solution")]


def test_every_solution_region_is_ruled_or_said_why_not():
    notebooks = sorted(p.stem for p in (ROOT / "notebooks" / "src").glob("0*.py"))
    assert len(notebooks) == 9
    for notebook in notebooks:
        named = set(forbidden.NOTEBOOK_RULES.get(notebook, {})) | set(
            forbidden.NOTEBOOK_NO_RULE.get(notebook, {}))
        for source in _solution_cells(notebook):
            bound = bound_names(source)
            assert bound & named, (notebook, sorted(bound), "is neither ruled nor said why not")
        stale = named - set().union(*map(bound_names, _solution_cells(notebook)))
        assert not stale, (notebook, stale)
        ruled = set(forbidden.NOTEBOOK_RULES.get(notebook, {}))
        assert not ruled & set(forbidden.NOTEBOOK_NO_RULE.get(notebook, {})), notebook


def test_every_rule_names_something_that_exists_and_has_a_plant():
    for notebook, exercises in forbidden.NOTEBOOK_RULES.items():
        for exercise, rules in exercises.items():
            for rule in rules:
                assert rule.within == exercise and rule.stage == 0, rule
                assert rule.why == forbidden.WHY[rule.kind], rule
                assert (notebook, exercise, rule.qualified) in PLANTS, rule
                if rule.module == forbidden.NOTEBOOK_CELLS:  # a course cell binds it
                    cells = cells_before_test(released(notebook), exercise)[0]
                    first = rule.name.split(".")[0]
                    assert any(first in bound_names(s) for s in cells), rule
                else:
                    assert hasattr(importlib.import_module(rule.module), rule.name), rule
    assert set(PLANTS) == {(n, e, r.qualified) for n, ex in forbidden.NOTEBOOK_RULES.items()
                           for e, rules in ex.items() for r in rules}


@pytest.mark.parametrize("notebook,exercise", sorted(
    {(n, e) for n, e, _ in PLANTS}))
def test_the_solutions_cells_borrow_nothing(notebook, exercise):
    cells, _ = cells_before_test(released(notebook), exercise)
    assert borrowed.findings(notebook, exercise, cells) == []


@pytest.mark.parametrize("plant", sorted(PLANTS), ids=lambda p: p[2])
def test_each_rules_plant_is_found_and_named(plant):
    notebook, exercise, qualified = plant
    cells, _ = cells_before_test(released(notebook, {exercise: PLANTS[plant]}), exercise)
    found = borrowed.findings(notebook, exercise, cells)
    assert qualified in {f.rule.qualified for f in found}, found
    text = borrowed.message(exercise, found)
    shown = qualified.replace(f"{forbidden.NOTEBOOK_CELLS}.", "the notebook's ")
    assert shown in text and f"Write {exercise} without it" in text, text
    # the message names the helper and the learner's own use, never the answer's code
    assert "sorted(" not in text and "2 * n" not in text and "psum" not in text, text


def test_the_exercise_is_read_as_its_last_definition():
    plant = PLANTS[("02_trace_reading", "covered_us",
                    "coursekit.measure.device_trace.union_ns")]
    rewrite = "def covered_us(intervals):\n    return float(len(intervals))\n"
    assert borrowed.findings("02_trace_reading", "covered_us", [plant, rewrite]) == []
    assert borrowed.findings("02_trace_reading", "covered_us", [rewrite, plant])
    # a cell that does not parse ran nothing, and hides nothing after it
    assert borrowed.findings("02_trace_reading", "covered_us", ["def (:", "%time 1", plant])
    assert borrowed.findings("00_foundations", "step_keys", [plant]) == []
    # an assignment after the definition is what runs, and is read
    assigned = "covered_us = lambda intervals: float(union_ns(intervals))\n"
    assert borrowed.findings("02_trace_reading", "covered_us", [plant, rewrite, assigned])
    assert borrowed.findings("02_trace_reading", "covered_us", [plant, assigned, rewrite]) == []


# The exercise's cell and its visible test cell, run in one IPython shell as a kernel runs
# them, the plant first, then the solution over it (a learner's rewrite): {"plant" |
# "solution": the test cell's error or None}.
KERNEL = '''
import json, sys
from coursekit.notebook.headless import CellRunner
cells = json.loads(sys.stdin.read())
out = {}
runner = CellRunner()
for name, (answer, test) in cells.items():
    runner.run(answer)
    error = runner.run(test).error
    out[name] = error and [error["ename"], error["evalue"]]
print(json.dumps(out))
'''


def test_the_visible_test_refuses_a_plant_in_the_learners_kernel():
    plant = PLANTS[("02_trace_reading", "covered_us",
                    "coursekit.measure.device_trace.union_ns")]
    nb = released("02_trace_reading")
    answer = cells_before_test(nb, "covered_us")[0][-1]
    test = cells_before_test(nb, "covered_us")[1]
    assert "_refuse_borrowed(" in test and "BEGIN HIDDEN" not in test
    done = subprocess.run([sys.executable, "-c", KERNEL], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False,
                          input=json.dumps({"plant": [plant, test],
                                            "solution": [answer, test]}))
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["solution"] is None, got
    ename, evalue = got["plant"]
    assert ename == "AssertionError", got
    assert "covered_us uses coursekit.measure.device_trace.union_ns" in evalue, evalue

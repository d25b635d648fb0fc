"""Issue 50 through the real grader: a notebook exercise answered by the course's own helper
that computes it (one plant per rule of ``forbidden.NOTEBOOK_RULES``,
tests/notebook_plants.py) scores 0 for that question, ``fail``, reason
``borrowed-helper``, the helper named in its feedback message; another exercise of the same
notebook keeps its points; the solution's answers get full marks on the questions
concerned.

Cost kept small: each notebook is handed in with only the cells the questions concerned
need (the grader puts every test cell back; the others fail at once on a missing name), and
every plant is graded in one batch: the plants of different notebooks share a student."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
from helpers import at_ci_sizes
from notebook_plants import PLANTS, released
from test_autograder_notebook_attacks import grade

from autograder.nbsource import grade_id
from coursekit.checking import forbidden
from coursekit.facts import ROOT
from coursekit.notebook.free_names import bound_names

# Per notebook: another exercise of it (must keep its points), and the names the cells
# the questions need bind (the rest is left out: it is not what these questions test).
OTHER = {"02_trace_reading": "prediction_op_coverage", "03_roofline": "prediction_step_speedup",
         "04_remat": "prediction_remat_savings",
         "05_sharding_and_recovery": "prediction_four_devices"}
NEEDS = {"02_trace_reading": set(), "03_roofline": {"IMPL", "jax", "impl"},  # impl: the
         # learner's own module, loaded by the notebook
         "04_remat": {"IMPL", "jax", "impl"},
         "05_sharding_and_recovery": {  # eight CPU devices, the mesh, the course's grads
             "use_cpu_devices", "IMPL", "USER_PLATFORMS", "json", "impl", "padded_batch",
             "reference_grads", "nb_mesh", "grad_of_shard_mean", "equal",
             "one_device_grads"}}
EXERCISE = {n: next(iter(forbidden.NOTEBOOK_RULES[n])) for n in OTHER}


def trimmed(notebook: str, edits: dict | None = None) -> dict:
    """The released notebook answered as the source answers it (then ``edits``), holding
    only the code cells of the questions concerned and what they need; at the CI sizes."""
    nb = released(notebook, edits)
    ids = {EXERCISE[notebook], OTHER[notebook]}
    keep = ids | {f"{i}_tests" for i in ids} | {f"{i}_present" for i in ids}
    nb.cells = [c for c in nb.cells if c.cell_type == "code" and (
        grade_id(c) in keep or (grade_id(c) is None and bound_names(c.source) & NEEDS[notebook])
        or (grade_id(c) == "shard_map_grads" and notebook.startswith("05")))]
    return at_ci_sizes(json.loads(nbformat.writes(nb)))


def students() -> dict[str, dict[str, dict]]:
    """student -> {notebook: handed-in JSON}: the solution, and the plants spread over
    as few students as there are plants of one notebook."""
    out = {"solution": {n: trimmed(n) for n in OTHER}}
    for notebook in OTHER:
        plants = [p for p in sorted(PLANTS) if p[0] == notebook]
        for k, (_, exercise, _) in enumerate(plants):
            out.setdefault(f"plant-{k}", {})[notebook] = trimmed(
                notebook, {exercise: PLANTS[plants[k]]})
    return out


def plant_of(student: str, notebook: str) -> str | None:
    plants = [p for p in sorted(PLANTS) if p[0] == notebook]
    k = int(student.removeprefix("plant-")) if student.startswith("plant-") else None
    return plants[k][2] if k is not None and k < len(plants) else None


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nb-borrowed")
    handed = students()
    for student, notebooks in handed.items():
        folder = tmp / "subs" / student / "notebooks"
        folder.mkdir(parents=True)
        for notebook, nb in notebooks.items():
            (folder / f"{notebook}.ipynb").write_text(json.dumps(nb))
    stages = ",".join(f"notebooks/{n}.ipynb" for n in OTHER)
    latest = grade(tmp / "subs", tmp / "out", stages)
    return {(s, item.removeprefix("notebooks/").removesuffix(".ipynb")): rec
            for (s, item), rec in latest.items()}, handed, tmp


def _questions(rec: dict) -> dict:
    return {q["id"]: q for q in rec["questions"]}


@pytest.mark.slow
def test_a_borrowed_helper_scores_its_question_zero_naming_it(batch):
    records, handed, _ = batch
    planted = 0
    for student, notebooks in handed.items():
        for notebook in notebooks:
            qualified = plant_of(student, notebook)
            if qualified is None:
                continue
            planted += 1
            q = _questions(records[student, notebook])[f"{EXERCISE[notebook]}_tests"]
            assert (q["status"], q["points"], q.get("reason")) == \
                ("fail", 0.0, "borrowed-helper"), (student, notebook, q)
            shown = qualified.replace(f"{forbidden.NOTEBOOK_CELLS}.", "the notebook's ")
            assert shown in q["message"] and "without it" in q["message"], q["message"]
            other = _questions(records[student, notebook])[f"{OTHER[notebook]}_present"]
            assert (other["status"], other["points"]) == ("pass", other["max_points"]), other
    assert planted == len(PLANTS)


@pytest.mark.slow
def test_the_solutions_answers_keep_full_marks(batch):
    records, _, _ = batch
    for notebook in OTHER:
        got = _questions(records["solution", notebook])
        for qid in (f"{EXERCISE[notebook]}_tests", f"{OTHER[notebook]}_present"):
            q = got[qid]
            assert (q["status"], q["points"]) == ("pass", q["max_points"]), (notebook, q)
            assert q["max_points"] > 0


@pytest.mark.slow
def test_the_feedback_names_the_helper(batch):
    records, _, tmp = batch
    done = subprocess.run([sys.executable, "-m", "autograder", "export", str(tmp / "out"),
                           "--csv", str(tmp / "grades.csv")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    from autograder.names import folder
    text = (tmp / "out" / "feedback" / folder("plant-0") / "feedback.md").read_text()
    assert "covered_us uses coursekit.measure.device_trace.union_ns" in text, text
    assert "scores 0" in text

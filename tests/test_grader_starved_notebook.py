"""A notebook whose cell ran past its limit while its whole run got under a quarter of a
core was starved, as a project stage is (``autograder.run_cpu``): the batch grades it once
more at the end, alone, and a class report counts it apart. A cell that sleeps stands for
one the machine starved (both get little CPU); a looping cell keeps its core busy, is the
learner's timeout, and is not graded again (``tests/test_autograder.py`` holds its
record: ``nb-cell-loop``). Through the real grader: sandbox, test process, learner
process."""

from __future__ import annotations

import json
import sys

import pytest

from autograder import grade, outcomes, run_cpu
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))
import autograder.samples as fx  # noqa: E402

NB = "notebooks/ag_demo.ipynb"
# long enough that the learner process's start (about 2-3 s of CPU) stays well under a
# quarter of the run's wall time; the cell sleeps past it
CELL_LIMIT_S = 15.0
SLEEPY_MEAN = "import time\ntime.sleep(600)\ndef mean(xs):\n    return sum(xs) / len(xs)"


@pytest.mark.slow
def test_a_starved_notebook_is_graded_once_more(tmp_path):
    good, _ = fx.notebook_variants()["nb-good"]
    subs = tmp_path / "subs"
    fx.write(subs, "nb-sleepy", None, fx.learner_notebook({**good, "mean": SLEEPY_MEAN}))
    out = tmp_path / "out"
    grade.grade(subs, out, workers=1, selection=NB, notebooks_dir=fx.NOTEBOOK.parent,
                cell_timeout=CELL_LIMIT_S, timeout=120, progress=False)
    book = Gradebook.in_dir(out)
    try:
        rows = [json.loads(r[6]) for r in book.all_rows()]
        (latest,) = [r["record"] for r in book.latest().values()]
    finally:
        book.close()
    first, second = rows  # graded once more, only once
    assert first["reason"] == outcomes.STARVED and "sandbox_run" not in first, first
    assert first["cpu_s"] < run_cpu.STARVED_SHARE * first["wall_s"], first
    assert first["run"]["cell_timeouts"], first["run"]
    assert second == latest and latest["reason"] == outcomes.STARVED
    assert latest["sandbox_run"].startswith(grade.RETRIED_ALONE + " a starved run")
    # the question before the sleeping cell keeps its points; the one after has none
    got = {q["id"]: (q["status"], q["points"]) for q in latest["questions"]}
    assert got["square_tests"][0] == "pass" and got["mean_tests"][1] == 0.0, got

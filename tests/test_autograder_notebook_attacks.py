"""Issue 27's two reported notebook attacks, through the real grader as the course grades
them (its own notebooks at CI sizes, full isolation as root), in one batch with the
honest solution notebooks:

* notebook 02: ``covered_us`` returns a ``float`` subclass whose ``__eq__`` always says
  True (the test passed it, no tamper flag);
* notebook 03: ``elementwise_cost_by_hand`` is right only on the visible case, and its cell
  patches ``jax.stages.Compiled.cost_analysis`` so that the hidden test's expected value,
  which it took from the compiler at test time, matched the wrong answer.

Both attacks sit in one submission; each attacked question must score 0, ``fail`` (the
test compares plain values with constants, and runs in the grader's test process, where
no learner cell reaches), while the honest submission's copies of the same notebooks
keep every point. Issue 45's attacks: tests/test_autograder_notebook_apart.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import at_ci_sizes

from coursekit.facts import ROOT

NOTEBOOKS = ("02_trace_reading.ipynb", "03_roofline.ipynb")
ALWAYS_EQUAL = '''class _AlwaysEqual(float):
    def __eq__(self, other):
        return True
    __hash__ = float.__hash__


def covered_us(intervals):
    return _AlwaysEqual(0.0)
'''
PATCHED_COMPILER = '''def elementwise_cost_by_hand(n, itemsize):
    if n == 1000:  # the visible case, copied from the test
        return {"flops": 2000, "bytes": 8000}
    return {"flops": 3 * n, "bytes": 3 * n * itemsize}  # wrong: 3 ops per element


import jax.stages as _stages

_real_cost_analysis = _stages.Compiled.cost_analysis


def _agreeing_cost_analysis(self):
    c = _real_cost_analysis(self)
    c = dict(c[0] if isinstance(c, (list, tuple)) else c)
    c["flops"], c["bytes accessed"] = c["flops"] * 1.5, c["bytes accessed"] * 1.5
    return c


_stages.Compiled.cost_analysis = _agreeing_cost_analysis
'''
ATTACKS = {"02_trace_reading.ipynb": {"covered_us": ALWAYS_EQUAL},
           "03_roofline.ipynb": {"elementwise_cost_by_hand": PATCHED_COMPILER}}
ATTACKED = {"02_trace_reading.ipynb": "covered_us_tests",
            "03_roofline.ipynb": "elementwise_cost_by_hand_tests"}


def grade(subs: Path, out: Path, stages: str, notebooks: Path | None = None) -> dict:
    """{(student, item): record} of one batch through ``python -m autograder grade``
    (``notebooks``: the source notebooks' folder, the course's by default)."""
    sys.path.insert(0, str(ROOT))
    from autograder.gradebook import Gradebook
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    more = ["--notebooks", str(notebooks)] if notebooks else []
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(out), "--stages", stages, "--workers", "2", "--quiet",
                           "--timeout", "600", *more], cwd=ROOT, capture_output=True, text=True,
                          timeout=1500, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    latest = {key: row["record"] for key, row in book.latest().items()}
    book.close()
    return latest


def solved(name: str, edits: dict) -> dict:
    """The released notebook with every solution cell answered as the source answers it
    (solution markers dropped), then ``edits`` by grade_id."""
    import nbformat

    from autograder.nbsource import grade_id, release_notebook
    source = nbformat.read(str(ROOT / "notebooks" / name), as_version=4)
    answers = {grade_id(c): "\n".join(line for line in c.source.split("\n")
                                       if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))
               for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    nb = release_notebook(source)
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid in edits or gid in answers:
            cell.source = edits.get(gid, answers.get(gid))
    return json.loads(nbformat.writes(nb))


@pytest.fixture(scope="module")
def attacked_batch(tmp_path_factory):
    sys.path.insert(0, str(ROOT))
    tmp = tmp_path_factory.mktemp("nb-attacks")
    for student in ("honest", "attacker"):
        folder = tmp / "subs" / student / "notebooks"
        folder.mkdir(parents=True)
        for name in NOTEBOOKS:
            edits = ATTACKS[name] if student == "attacker" else {}
            (folder / name).write_text(json.dumps(at_ci_sizes(solved(name, edits))))
    stages = ",".join(f"notebooks/{n}" for n in NOTEBOOKS)
    return grade(tmp / "subs", tmp / "out", stages)


@pytest.mark.slow
def test_attacked_questions_score_zero(attacked_batch):
    for name, question in ATTACKED.items():
        rec = attacked_batch[("attacker", f"notebooks/{name}")]
        q = {q["id"]: q for q in rec["questions"]}[question]
        assert q["points"] == 0.0, (name, q)
        assert q["status"] == "fail", (name, q)


@pytest.mark.slow
def test_honest_notebooks_keep_their_points(attacked_batch):
    rows = {item: rec for (student, item), rec in attacked_batch.items()
            if student == "honest"}
    assert set(rows) == {f"notebooks/{n}" for n in NOTEBOOKS}
    for item, rec in rows.items():
        short = [(q["id"], q["status"], q["message"][:200]) for q in rec["questions"]]
        assert rec["status"] == "pass" and rec["points"] == rec["max_points"] > 0, (item, short)
        assert not rec["reason"].startswith("tamper"), (item, rec["message"])

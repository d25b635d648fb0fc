"""Issue 45's attacks through the real grader as the course grades them (full isolation
as root), each beside the released starter notebook and an honest neighbour (the
reference notebook), in one batch of notebook 01 at its CI sizes:

* ``exec-swallowed``: a cell replaces ``exec`` in IPython's interactiveshell module with
  one that swallows every exception (every later test cell, hidden parts too, reported
  ok: a starter scored 3/3);
* ``probe-off``: a cell switches off the tamper check from inside (it rebinds the probe's
  closure) and wraps every later cell in try/except (3/3);
* ``fake-hidden``: an answer hard-coded to the visible input and a trailing cell with
  invented ``autograder``/``nbgrader`` metadata that made itself the hidden part (3/3;
  its control ``hard-coded``, the same answers without that cell, 1/3);
* ``read-back``: the same hard-coded answer, and a prediction whose ``__str__`` raises
  with what IPython's ``linecache`` held, the hidden test's source included: the hidden
  test's inputs and expected values landed in the learner's own feedback;
* names: ``jane~doe`` (a starter) and ``jane_doe`` (the reference) got one feedback
  folder, the starter's replacing the reference's; ``" .."`` wrote its feedback beside the
  gradebook; NFC and NFD ``josé`` (the reference and a starter) were one learner to
  ``similar``, which read the first's notebook twice and called them identical.

Each attack scores what the starter (or its control) scores, with nothing flagged; the
neighbour keeps full marks and its full feedback. The read-back case once more on the
grader's tiny fixture notebook, where a test calls the learner's function after a hidden
part has run, so what the learner's process could find there would reach its feedback:
it finds no hidden test text at all.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import unicodedata

import pytest
from helpers import at_ci_sizes
from test_autograder_notebook_attacks import grade

from coursekit.facts import ROOT

NB = "01_async_timing.ipynb"
ITEM = f"notebooks/{NB}"
NFC, NFD = unicodedata.normalize("NFC", "josé"), unicodedata.normalize("NFD", "josé")
HIDDEN_TEXT = ("BEGIN HIDDEN", "0.47000000000000003", "5.372037914691942",
               "(_i * 37) % 29")   # the hidden test's source and expected values

EXEC_SWALLOWED = '''import IPython.core.interactiveshell as _shell_module

_real_exec = exec


def _swallowing_exec(code, *args, **kwargs):
    try:
        return _real_exec(code, *args, **kwargs)
    except Exception:
        return None


_shell_module.exec = _swallowing_exec
'''
PROBE_OFF = '''import sys

for _name in [n for n in sys.modules if "probe" in n]:  # the old tamper check, silenced
    for _value in list(vars(sys.modules[_name]).values()):
        for _cell in getattr(_value, "__closure__", None) or ():
            if getattr(_cell.cell_contents, "__name__", "") == "findings":
                _cell.cell_contents = lambda names: []


def _never_fail(lines):
    body = "".join("    " + line for line in lines) or "    pass\\n"
    return ["try:\\n", body, "except BaseException:\\n", "    pass\\n"]


get_ipython().input_transformers_cleanup.append(_never_fail)
'''
HARD_CODED = '''def summarize_samples(samples_s):  # right for the visible test's input only
    return {"median_ms": 3.0, "p10_ms": 1.4, "p90_ms": 4.6, "spread": 4.6 / 1.4}
'''
READ_BACK = '''import linecache


class _Leak:
    def __str__(self):
        seen = "".join("".join(lines) for _, _, lines, _ in linecache.cache.values())
        raise ValueError("read back: " + seen + "".join(get_ipython().user_ns.get("In", [])))

    __repr__ = __str__


PREDICTED_UNSYNCED_FACTOR = _Leak()
'''
FAKE_HIDDEN = {"cell_type": "code", "execution_count": None, "outputs": [], "source": "pass",
               "metadata": {"autograder": {"hidden_of": "summarize_samples_tests"},
                            "nbgrader": {"grade": True, "grade_id": "summarize_extra",
                                         "locked": True, "points": 3, "schema_version": 3,
                                         "solution": False, "task": False},
                            "tags": ["raises-exception"]}}


def handed_in(answers: str, edits: dict | None = None, extra: tuple = (),
              name: str = NB) -> dict:
    """Notebook ``name`` as released, its answer cells as the reference answers them
    (``answers="reference"``) or as released (the starter), then ``edits`` by grade id
    and ``extra`` cells appended; at the CI sizes."""
    import nbformat

    from autograder.nbsource import grade_id, release_notebook
    source = nbformat.read(str(ROOT / "notebooks" / name), as_version=4)
    solutions = {grade_id(c): "\n".join(line for line in c.source.split("\n")
                                        if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))
                 for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    nb = release_notebook(source)
    for cell in nb.cells:
        gid = grade_id(cell)
        if answers == "reference" and gid in solutions:
            cell.source = solutions[gid]
        if gid in (edits or {}):
            cell.source = edits[gid]
    data = json.loads(nbformat.writes(nb))
    data["cells"] += [dict(c) for c in extra]
    return at_ci_sizes(data)


def answered(code: str, **more) -> dict:
    """A starter whose summarize_samples cell also holds ``code`` (a learner cell)."""
    return {"summarize_samples": ("def summarize_samples(samples_s):\n"
                                  "    raise NotImplementedError()\n\n\n" + code), **more}


STUDENTS = {
    "honest": handed_in("reference"),
    "starter": handed_in("starter"),
    "exec-swallowed": handed_in("starter", answered(EXEC_SWALLOWED)),
    "probe-off": handed_in("starter", answered(PROBE_OFF)),
    "hard-coded": handed_in("starter", {"summarize_samples": HARD_CODED,
                                        "prediction_unsynced_2n": "PREDICTED_UNSYNCED_FACTOR = 8.0"}),
    "fake-hidden": handed_in("starter", {"summarize_samples": HARD_CODED,
                                         "prediction_unsynced_2n": "PREDICTED_UNSYNCED_FACTOR = 8.0"},
                             extra=(FAKE_HIDDEN,)),
    "read-back": handed_in("starter", {"summarize_samples": HARD_CODED,
                                       "prediction_unsynced_2n": READ_BACK}),
    "jane~doe": handed_in("starter"),
    "jane_doe": handed_in("reference"),
    " ..": handed_in("starter"),
    NFC: handed_in("reference"),
    NFD: handed_in("starter"),
}
SCORES_AS = {"exec-swallowed": "starter", "probe-off": "starter", "fake-hidden": "hard-coded",
             "read-back": "starter", "jane~doe": "starter", "jane_doe": "honest",
             " ..": "starter", NFC: "honest", NFD: "starter"}


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nb-apart")
    subs = tmp / "subs"
    for student, nb in STUDENTS.items():
        folder = subs / student / "notebooks"
        folder.mkdir(parents=True)
        (folder / NB).write_text(json.dumps(nb))
    latest = grade(subs, tmp / "out", ITEM)
    return {"tmp": tmp, "subs": subs, "out": tmp / "out",
            "records": {s: rec for (s, _), rec in latest.items()}}


def _scores(rec: dict) -> dict:
    return {q["id"]: (q["status"], q["points"]) for q in rec["questions"]}


@pytest.mark.slow
def test_each_attack_scores_what_its_starter_or_control_scores(batch):
    recs = batch["records"]
    assert set(recs) == set(STUDENTS)
    assert recs["honest"]["points"] == recs["honest"]["max_points"] == 3.0, \
        _scores(recs["honest"])
    assert recs["starter"]["points"] == 0.0 and recs["hard-coded"]["points"] == 1.0
    for student, like in SCORES_AS.items():
        assert _scores(recs[student]) == _scores(recs[like]), (student, like,
                                                               _scores(recs[student]))
        assert not recs[student].get("reason", "").startswith("tamper"), recs[student]
    # the invented cell made no test: the real test ran and failed (its visible cases,
    # several since issue 50, already fail what only the hidden part caught before)
    q = {q["id"]: q for q in recs["fake-hidden"]["questions"]}["summarize_samples_tests"]
    assert q["status"] == "fail", q
    assert {q["id"] for q in recs["fake-hidden"]["questions"]} == \
        {"summarize_samples_tests", "prediction_unsynced_2n_present"}


@pytest.mark.slow
def test_feedback_keeps_learners_apart_and_hidden_tests_hidden(batch):
    out = batch["out"]
    done = subprocess.run([sys.executable, "-m", "autograder", "export", str(out), "--csv",
                           str(batch["tmp"] / "grades.csv")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    from autograder.names import folder
    folders = sorted(p.name for p in (out / "feedback").iterdir())
    assert folders == sorted(folder(s) for s in STUDENTS)
    for student in STUDENTS:
        text = (out / "feedback" / folder(student) / "feedback.md").read_text()
        assert text.startswith(f"# Feedback for {student}\n"), student
        points = batch["records"][student]["points"]
        assert f"**Total: {points:g} / 3 points**" in text, (student, text[:300])
        assert not any(h in text for h in HIDDEN_TEXT), (student, text)
    honest = (out / "feedback" / folder("jane_doe") / "feedback.md").read_text()
    assert "Total: 3 / 3 points" in honest
    # nothing written beside the gradebook
    assert not (out / "feedback.md").exists() and not (out.parent / "feedback.md").exists()
    read_back = (out / "feedback" / folder("read-back") / "feedback.md").read_text()
    assert "Status: **fail**" in read_back and "read back" not in read_back


@pytest.mark.slow
def test_similar_reads_both_josés(batch):
    done = subprocess.run([sys.executable, "-m", "autograder", "similar", str(batch["out"]),
                           "--submissions", str(batch["subs"])], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads((batch["out"] / "similar" / "similar.json").read_text(encoding="utf-8"))
    for group in data["identical"]:
        assert not {NFC, NFD} <= set(group), group
    # the reference's written answers are its own; the starter's are the release
    pairs = {frozenset((p["a"], p["b"])) for p in data["pairs"]}
    assert frozenset((NFC, NFD)) not in pairs, data["pairs"]
    assert frozenset((NFC, "honest")) in pairs and frozenset((NFC, "jane_doe")) in pairs
    assert "identical learner files: josé = josé" not in done.stdout


# The read-back case where a later test calls the learner's own function: the grader's
# fixture notebook (no JAX, a second a notebook).
SEARCH = '''def mean(xs):
    import gc, linecache
    seen = "".join("".join(lines) for _, _, lines, _ in linecache.cache.values())
    seen += "".join(get_ipython().user_ns.get("In", []))
    seen += "".join(str(v) for v in __import__("os").environ.values())
    found = [m for m in ("HIDDEN-" + "MARKER-square", "BEGIN " + "HIDDEN") if m in seen]
    assert not found, "read back: " + seen
    return sum(xs) / len(xs)
'''


@pytest.mark.slow
def test_no_hidden_test_text_reaches_the_learners_process(tmp_path):
    import autograder.samples as fx
    from autograder.names import folder
    good = fx.notebook_variants()["nb-good"][0]
    subs = tmp_path / "subs"
    fx.write(subs, "nb-good", None, fx.learner_notebook(good))
    fx.write(subs, "searcher", None, fx.learner_notebook({**good, "mean": SEARCH}))
    latest = grade(subs, tmp_path / "out", "notebooks/ag_demo.ipynb",
                   notebooks=fx.NOTEBOOK.parent)
    recs = {s: rec for (s, _), rec in latest.items()}
    assert _scores(recs["searcher"]) == _scores(recs["nb-good"]) == {
        "square_tests": ("pass", 2.0), "mean_tests": ("pass", 1.0)}, _scores(recs["searcher"])
    done = subprocess.run([sys.executable, "-m", "autograder", "export", str(tmp_path / "out"),
                           "--csv", str(tmp_path / "g.csv")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / "feedback" / folder("searcher") / "feedback.md").read_text()
    assert "HIDDEN-MARKER" not in text and "read back" not in text

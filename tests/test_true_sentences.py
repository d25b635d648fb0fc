"""Every sentence true (issue 46, item 4), for the claims the learner pages once got wrong:
a time per interpreted Pallas grid program typed into prose (the starter said "about a
millisecond", the README "about 0.05-0.3 ms", notebook 06 measured 0.019-0.353 ms: the
figure depends on the block and the machine, so the pages point at the notebook's own
measurement), and a prediction stored under another notebook's name (notebook 08 kept
"07_one_device_speedup", which the portfolio then shows as notebook 07's)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from coursekit.facts import ROOT

_TIME = r"(?:\d[\d.]*\s*(?:-|–|to)?\s*[\d.]*\s*ms\b|\bmillisecond)"
PER_PROGRAM = re.compile(rf"{_TIME}[^.]{{0,60}}?\b(?:per|each|a)\s+(?:grid\s+)?program"
                         rf"|\bprograms?\b[^.]{{0,40}}?{_TIME}\s*(?:each|apiece)", re.I | re.S)
PREDICTION = re.compile(r"\b(?:record|compare)_prediction\(\s*\"(?P<name>[^\"]+)\"")


def learner_prose() -> dict[str, str]:
    """The Pallas pages a learner reads: README, the starter's docstrings, notebook 06's
    Markdown (its printed figures are computed, so its code cells are not prose)."""
    nb = json.loads((ROOT / "notebooks" / "06_pallas.ipynb").read_text())
    return {"projects/pallas-kernel/README.md":
            (ROOT / "projects/pallas-kernel/README.md").read_text(),
            "projects/pallas-kernel/starter/model.py":
            (ROOT / "projects/pallas-kernel/starter/model.py").read_text(),
            "notebooks/06_pallas.ipynb (markdown)":
            "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")}


def typed_times_per_program(text: str) -> list[str]:
    return [m.group(0) for m in PER_PROGRAM.finditer(" ".join(text.split()))]


@pytest.mark.parametrize("page", sorted(learner_prose()))
def test_no_page_types_a_time_per_interpreted_program(page):
    assert not typed_times_per_program(learner_prose()[page]), page


def test_the_old_sentences_are_caught():
    for text in ("the kernel runs interpreted, about a millisecond per grid program.",
                 "Size hint on CPU: tens of programs (about a millisecond each, interpreted)",
                 "a loop of ordinary XLA operations: about 0.05-0.3 ms per program for these"):
        assert typed_times_per_program(text), text
    assert not typed_times_per_program("notebook 06 measures the cost per program")


def prediction_names(source: str) -> list[str]:
    return [m.group("name") for m in PREDICTION.finditer(source)]


def test_each_notebook_stores_its_predictions_under_its_own_number():
    for src in sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py")):
        number = src.name[:2]
        wrong = [n for n in prediction_names(src.read_text()) if not n.startswith(number + "_")]
        assert not wrong, f"{src.name} stores {wrong} under another notebook's number"


def test_a_prediction_under_another_number_is_caught():
    assert prediction_names('record_prediction("07_one_device_speedup", P, "x")') == [
        "07_one_device_speedup"]
    assert Path("08_readiness_review.py").name[:2] != "07"

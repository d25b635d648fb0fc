"""Instructor-only code, reached by the checkers that a learner's release ships.

Code that *is* a stage's answer (the course's decision statistic, its peak-memory and
bandwidth measurements, a complete train step, the checker's own parse of a trace, ...)
lives in ``coursekit/instructor/``, which ``python -m autograder release`` leaves out.
A checker reaches it through this module:

    answers = instructor_module("decision")   # coursekit.instructor.decision
    answers.anything(...)                     # in a release: raises GradedByInstructor

Where the instructor grades (the course checkout, the grader's sandbox copy of it) that is
the module itself. In a learner's copy it is a stand-in whose every attribute raises
``GradedByInstructor``; the contract then reports the check as graded by the instructor
(``coursekit.checking.contract``), so the learner's local run keeps every public check and
names the others instead of dropping them. The learner process does the same for an
inspector or workload that lives there (``coursekit.workloads.inspectors``).

What may live outside ``coursekit/instructor/`` is written down in docs/checkers/reference.md
("What a learner receives"); tests/test_release_scan.py builds a release and scans it.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from coursekit.checking.errors import GradedByInstructor

PACKAGE = "coursekit.instructor"


# This copy's own folder for it: a Python environment made for another copy (an editable
# install of the course) must not lend a learner's copy the course's instructor code.
FOLDER = Path(__file__).resolve().parents[1] / "instructor"


def available() -> bool:
    """Whether this copy of the course holds the instructor-only code."""
    return (FOLDER / "__init__.py").is_file()


class Absent:
    """A module of ``coursekit.instructor`` this copy does not hold: any use raises."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise GradedByInstructor(f"{PACKAGE}.{self._name}.{attr}")

    def __repr__(self) -> str:
        return f"<{PACKAGE}.{self._name}: not in this copy>"


def instructor_module(name: str):
    """``coursekit.instructor.<name>``, or an ``Absent`` stand-in where this copy does not
    hold it (a failure inside a module that is there is raised as usual)."""
    full = f"{PACKAGE}.{name}"
    if not available():
        return Absent(name)
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as err:
        if err.name not in (PACKAGE, full):
            raise
        return Absent(name)

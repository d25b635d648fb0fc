"""What performance-audit stage 4 compares a learner's ``decide`` with: the course's own
decision statistic on the same records, live or stored.

Live (the course checkout, the grader): the records are drawn from the run's seed until
the course's statistic (``coursekit.instructor.decision``, instructor-only) says what the
answer must be, and its results are computed on the spot; hidden seeds draw new cases.

Stored (a learner's copy, which holds no decision method): the same checks run on fixed
public cases, drawn once from ``PUBLIC_SEED`` by the live code and kept as numbers in
``expected/decisions.json``: each drawn (before, after) pair, the random generator's state
after the draw (so what the check builds next is the same records again), and the
statistic's results on every pair the checks ask about (decision, ratio, interval and the
widths a hint names). The learner's copy thus gives, on the public cases, the verdict the
grader gives on them. ``python audit_decision_expected.py`` writes the file;
tests/test_performance_audit_decision_expected.py checks it equals a fresh generation.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np

from coursekit.checking import graded

PUBLIC_SEED = 20261206
EXPECTED = Path(__file__).resolve().parent / "expected" / "decisions.json"
# Tests set this to run the checks as a learner's copy runs them, in the course checkout.
STORED_ENV = "COURSE_DECISIONS_STORED"

# While the generator runs: every draw and result the checks made, in order of use.
recording: dict | None = None


def stored_mode() -> bool:
    """Whether the checks run on the stored public cases (a learner's copy)."""
    return not graded.available() or os.environ.get(STORED_ENV) == "1"


def key_of(name: str, *args, **options) -> str:
    """The stored key of a result: the function and its inputs, as JSON, hashed."""
    text = json.dumps([name, args, options], sort_keys=True, default=float)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


_stores: dict[Path, dict] = {}


def store(path: Path = EXPECTED) -> dict:
    if path not in _stores:
        if not path.is_file():
            raise RuntimeError(f"checker bug, not your code: {path.name} is missing "
                               "from this copy")
        _stores[path] = json.loads(path.read_text())
    return _stores[path]


def seeded_rng(ctx, salt: str) -> np.random.Generator:
    """``ctx.rng(salt)``, or in a learner's copy the public seed's: the stored results
    are the ones of the public inputs."""
    return np.random.default_rng([PUBLIC_SEED if stored_mode() else ctx.seed,
                                  *salt.encode()])


class DecisionReference:
    """One check's reference: ``rng`` for its inputs, ``draw`` for a case the course's
    statistic picked, ``result`` for what that statistic (or another instructor
    function) says about records the check built."""

    def __init__(self, ctx, salt: str, expected: Path = EXPECTED):
        self.salt, self.stored, self.expected = salt, stored_mode(), expected
        self.draws = 0
        self.rng = seeded_rng(ctx, salt)

    def draw(self, make, holds, tries: int = 200):
        """The first ``make()`` (a (before, after) pair) for which ``holds(before,
        after)``; stored: the pair drawn from the public seed, and the generator left
        where that draw left it. A case not found is the checker's bug, said as such."""
        name = f"{self.salt}#{self.draws}"
        self.draws += 1
        if self.stored:
            kept = store(self.expected)["draws"].get(name)
            if kept is None:
                raise RuntimeError(f"checker bug, not your code: no stored case {name}")
            self.rng.bit_generator.state = kept["rng_state"]
            return tuple(kept["pair"])
        for _ in range(tries):
            drawn = make()
            if holds(*drawn):
                if recording is not None:
                    recording["draws"][name] = {"pair": list(drawn),
                                                "rng_state": self.rng.bit_generator.state}
                return drawn
        raise RuntimeError(f"checker bug, not your code: no case drawn in {tries} tries")

    def result(self, module: str, name: str, *args, **options):
        """``coursekit.instructor.<module>.<name>(*args, **options)``, a JSON value; None
        where a stored copy does not hold it (a record only a wrong answer leads to, so
        the hint that wanted it says less, never the verdict)."""
        key = key_of(f"{module}.{name}", *args, **options)
        if self.stored:
            return store(self.expected)["results"].get(key)
        value = getattr(graded.instructor_module(module), name)(*args, **options)
        if recording is not None:
            recording["results"][key] = value
        return value

    def live(self, name: str, *args, **options):
        """``coursekit.instructor.decision.<name>`` called live and not kept: what a
        draw's ``holds`` asks of candidates (it runs only where cases are drawn)."""
        return getattr(graded.instructor_module("decision"), name)(*args, **options)

    def decide(self, before: dict, after: dict, **options) -> dict | None:
        """The course's decision on these records: decision, ratio, ci, method, n_rounds
        and ``widths`` (the half-widths a hint names), or None (see ``result``)."""
        return self.result("decision", "reference_decision", before, after, **options)

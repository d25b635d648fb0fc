"""performance-audit stage 2's stored outputs for fixed public inputs
(projects/performance-audit/tests/expected/, written by tests/performance_audit_expected.py
with the course's own code) equal a fresh generation, and the stored trace's summary the
course's own parse of it: a learner's copy checks against these numbers."""

from __future__ import annotations

import json

import performance_audit_expected as generator
import pytest

ex = generator.ex  # the project's audit_expected (the generator puts its folder on the path)


@pytest.fixture(scope="module")
def fresh():
    return generator.generate()


def test_stored_numbers_equal_a_fresh_generation(fresh):
    assert json.loads(json.dumps(fresh, sort_keys=True)) == ex.stored(), (
        "run PYTHONPATH=. python tests/performance_audit_expected.py")


def test_stored_trace_holds_what_the_hints_name():
    got = ex.stored()["trace"]
    assert got["summary"]["count"] == 3
    assert got["not_children"]["nested"] and got["not_children"]["other-thread"]


def test_public_roofline_cases_cover_every_kind():
    kinds = [c["kind"] for c in ex.stored()["roofline"]]
    assert {"roofs", "by_size", "per_level"} == set(kinds)
    assert len(kinds) == 11 * len(ex.ROOFLINE_SEEDS)

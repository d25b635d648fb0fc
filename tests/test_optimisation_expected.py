"""optimisation stage 1's stored answers (``projects/optimisation/tests/expected/stage1``):
what the course's own parse gives on the stored public traces now, so a learner's copy,
which checks against them, gives the verdict the grader gives on those traces."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "projects" / "optimisation" / "tests"))

import optim_expected  # noqa: E402


def same(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return a == b


def test_stored_answers_are_the_course_parse_of_the_stored_traces():
    stored = optim_expected.stored_answers()
    fresh = json.loads(json.dumps(optim_expected.fresh_answers()))
    assert set(stored) == {name for name, _, _ in optim_expected.CASES}
    for name in stored:
        assert same(stored[name], fresh[name]), name


def test_the_stored_traces_tell_the_phases_apart():
    """Each limiting case names a phase with a share of its own, and the hand-built one
    has evidence whose summed time is not the event with the most calls."""
    stored = optim_expected.stored_answers()
    for name, _, limiting in optim_expected.CASES:
        if limiting:
            assert stored[name]["limiting"]["phase"] in stored[name]["breakdown"]["shares"]
    below = stored["hand-built.trace.json.gz"]["limiting"]["below"]
    assert max(below, key=lambda n: below[n][1]) != max(below, key=lambda n: below[n][0])


def test_one_stored_case_fills_the_step_with_one_phase():
    """Amdahl's ceiling at a share of exactly 1 is math.inf (the contract's words): a
    blind writer's 1 / (1 - share) raised ZeroDivisionError and passed every check while
    no case reached it (blind-b7-amdahl-ceiling-no-inf-case)."""
    limiting = optim_expected.stored_answers()["full-step.trace.json.gz"]["limiting"]
    assert limiting["share"] == 1.0 and limiting["amdahl_ceiling"] == math.inf, limiting


def test_a_crossover_clamped_at_the_smallest_size_is_named():
    """blind-b8: a crossover reported as the smallest measured batch where the model of
    the learner's own medians reaches the threshold below it is named as such; a
    crossover the model gives elsewhere is not."""
    import optim_stage3_crossover as crossover

    from coursekit.instructor import optimisation as model
    medians = {"median_slow_s": [0.010, 0.020], "median_fast_s": [0.004, 0.010]}
    lines = model.model_lines(medians, 3, 33)
    below = model.model_crossing(lines, 2.55)  # the gain falls to 2.55 before batch 3
    assert below is not None and 1 < below < 3
    hint = crossover.replay_hint(3.0, lines, 2.55, 3)
    assert "the smallest batch you measured" in hint, hint
    assert "smallest batch you measured" not in crossover.replay_hint(5.0, lines, 2.55, 3)

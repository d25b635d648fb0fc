"""The planted-bug batches hold at any load: an aimed timing check that stays INCONCLUSIVE
after its rerun passes the test only where its verdict states a loaded machine."""

from __future__ import annotations

import pytest
from planted_batch import Planted, PlantedBatch


def batch_with(got: dict) -> PlantedBatch:
    batch = PlantedBatch("performance-audit", {"bug": Planted(1, [("a", "b")], only=["t"],
                                                                 fails=["t"])})
    batch.rerun = lambda name: got  # the rerun says the same again
    return batch


def result(status: str, stdout: str, returncode: int = 3) -> dict:
    return {"status": {"t": status}, "stdout": stdout, "returncode": returncode,
            "json": {"seed": 1}}


def test_undecided_at_a_stated_load_is_the_checkers_noise_verdict():
    got = result("inconclusive", "INCONCLUSIVE stage 1 · t\n    evidence: ...; load 4.0 per "
                 "core over 1 cores\n")
    batch_with(got).assert_fails_only("bug", {"bug": got})


@pytest.mark.parametrize("stdout", [
    "INCONCLUSIVE stage 1 · t\n    evidence: load 0.4 per core over 2 cores\n",  # quiet
    "INCONCLUSIVE stage 1 · t\n    evidence: no load stated\n",
    "FAIL stage 1 · other\n"])                                                  # no line
def test_undecided_on_a_quiet_machine_fails_the_test(stdout):
    got = result("inconclusive", stdout)
    with pytest.raises(AssertionError):
        batch_with(got).assert_fails_only("bug", {"bug": got})


def test_a_pass_is_never_excused_by_load():
    got = result("pass", "load 9 per core\n", returncode=0)
    with pytest.raises(AssertionError):
        batch_with(got).assert_fails_only("bug", {"bug": got})


def test_a_rerun_that_decides_is_held_to_the_fail():
    decided = result("fail", "FAIL stage 1 · t\n    hint\n", returncode=1)
    batch = batch_with(decided)
    first = result("inconclusive", "INCONCLUSIVE stage 1 · t\n load 0.1 per core\n")
    batch.assert_fails_only("bug", {"bug": first})

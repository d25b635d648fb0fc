"""Issue 50's decision method and sealed train step, planted back into a release's files,
are found by the release scan (tests/release_scan.py), as the ceilings are
(tests/test_release_scan_ceilings.py):

* ``ratio_by_rounds`` and ``median_interval`` (an interval of the per-round ratio:
  performance-audit stage 4's method, step by step) are instructor-only
  (``coursekit/instructor/decision.py``); back in ``coursekit/measure/decision.py`` the
  scan's ``code`` rule finds them, renamed too;
* a sealed program (notebook 08's train step once shipped as
  ``coursekit/workloads/sealed/capstone_candidate.jaxexport``) is found by the ``sealed``
  rule under its own name and under any other, since ``jax.export`` loads it whatever the
  file is called; a file that is no program is not.
"""

from __future__ import annotations

import inspect
import re
import shutil

import pytest
import release_scan

from coursekit.facts import ROOT
from coursekit.instructor import decision
from coursekit.measure import decision as public_decision

PROGRAM = ROOT / "projects" / "foundations" / "tests" / "sealed" / "train_replay.jaxexport"


def planted_module(tmp_path, source: str):
    target = tmp_path / "coursekit" / "measure" / "decision.py"
    target.parent.mkdir(parents=True)
    target.write_text(inspect.getsource(public_decision) + "\n\n" + source + "\n")
    return release_scan.raw(tmp_path, [target])


def renamed(source: str, names: dict[str, str]) -> str:
    for old, new in names.items():
        source = re.sub(rf"\b{re.escape(old)}\b", new, source)
    return source


@pytest.mark.parametrize("name", ["ratio_by_rounds", "median_interval"])
def test_the_decision_method_planted_back_is_found(tmp_path, name):
    found = planted_module(tmp_path, inspect.getsource(getattr(decision, name)))
    assert any(rule == "code" and f"instructor/decision:{name}" in what
               for rule, _, what, _ in found), (name, found)


def test_the_method_renamed_is_found(tmp_path):
    source = renamed(inspect.getsource(decision.ratio_by_rounds) + "\n\n"
                     + inspect.getsource(decision.median_interval),
                     {"ratio_by_rounds": "speedup_estimate", "median_interval": "sign_range",
                      "ratios": "per_round", "before": "old", "after": "new"})
    found = planted_module(tmp_path, source)
    assert any(rule == "code" and "instructor/decision:ratio_by_rounds" in what
               for rule, _, what, _ in found), found


def test_the_shipped_decision_module_holds_no_interval_method():
    for name in ("ratio_by_rounds", "median_interval", "_t_two_sided_mass"):
        assert not hasattr(public_decision, name), name
    assert public_decision.t_quantile(0.95, 7) == pytest.approx(2.3646, abs=1e-4)


@pytest.mark.parametrize("where", ["coursekit/workloads/sealed/capstone_candidate.jaxexport",
                                   "coursekit/workloads/step_weights.bin",
                                   "notebooks/assets/figure_data"])
def test_a_sealed_program_planted_back_is_found(tmp_path, where):
    assert PROGRAM.is_file(), "no sealed program to plant: the test is blind"
    target = tmp_path / where
    target.parent.mkdir(parents=True)
    shutil.copy(PROGRAM, target)
    found = release_scan.raw(tmp_path, [target])
    assert [s for rule, rel, _, s in found if rule == "sealed" and rel == where], found


def test_a_file_that_is_no_program_is_not_a_sealed_finding(tmp_path):
    target = tmp_path / "notebooks" / "assets" / "noise.bin"
    target.parent.mkdir(parents=True)
    target.write_bytes(bytes(range(256)) * 8)
    assert not [f for f in release_scan.raw(tmp_path, [target]) if f[0] == "sealed"]

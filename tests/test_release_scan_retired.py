"""Code that left the learner's copy (issue 50, item 2: tests/release_retired.py), pasted
back into the module it shipped in, is found by the release scan's ``code`` rule, under
its own name and renamed; the modules as they ship now hold none of it. Read from this
repository's files (a release copies them unchanged), so no release is built here;
tests/test_release_scan.py plants the same cases into a built release."""

from __future__ import annotations

import re
import shutil

import pytest
import release_retired
import release_scan

from coursekit.facts import ROOT

HOME = {"retired/bandwidth:timed_with_faults": "coursekit/measure/bandwidth.py",
        "retired/verdict:interval_of": "coursekit/measure/verdict.py"}


def planted(tmp_path, rel: str, source: str):
    target = tmp_path / rel
    target.parent.mkdir(parents=True)
    shutil.copy(ROOT / rel, target)
    if source:
        target.write_text(target.read_text() + "\n\n" + source + "\n")
    return release_scan.raw(tmp_path, [target])


def code_findings(found, answer: str) -> list[str]:
    return [s for rule, _, what, s in found if rule == "code" and what.endswith(answer)]


def test_every_retired_function_has_its_home():
    assert set(HOME) == set(release_retired.RETIRED)


@pytest.mark.parametrize("answer", sorted(HOME))
def test_the_shipped_module_holds_none_of_it(tmp_path, answer):
    assert not code_findings(planted(tmp_path, HOME[answer], ""), answer)


@pytest.mark.parametrize("answer", sorted(HOME))
def test_pasted_back_it_is_found(tmp_path, answer):
    found = planted(tmp_path, HOME[answer], release_retired.RETIRED[answer])
    assert code_findings(found, answer), found


@pytest.mark.parametrize("answer", sorted(HOME))
def test_pasted_back_renamed_it_is_found(tmp_path, answer):
    source = release_retired.RETIRED[answer]
    for old, new in (("timed_with_faults", "median_and_faults"), ("interval_of", "ci_of"),
                     ("log_ratios", "logs"), ("seconds", "times"), ("half", "width")):
        source = re.sub(rf"\b{old}\b", new, source)
    found = planted(tmp_path, HOME[answer], source)
    assert code_findings(found, answer), found

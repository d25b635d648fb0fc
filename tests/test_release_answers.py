"""The learner release holds no walk-through of the answers (issue 30): no "how the
reference does stage N" text, no ``<details>`` block whose summary offers the reference,
no table listing the fixes, and none of the recipe phrases only the walk-throughs hold,
in any released notebook or Markdown page (README, guide). The walk-throughs live in the
instructor's ``docs/checkers/<project>.md`` and reach a learner through the grading
feedback, once the stage was graded and attempted (``autograder.feedback``).

The scanner is shown to fail on planted material; a path a released page names that only
the course holds is caught by ``test_docs.path_problems`` run against the release."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

from autograder import feedback  # noqa: E402

CHECKER_DOCS = ROOT / "docs" / "checkers"
# What the notebooks showed above their check cells, and where it lives now.
MOVED = {"foundations": {1, 2}, "performance-audit": {2, 3}, "optimisation": {1, 3, 4}}
# Phrases only the answers hold: the reference's formulas and steps from the walk-throughs,
# and the optimisation README's traps that named the fix. Each must be in the instructor
# docs (test below), so the list cannot drift into phrases that answer nothing.
RECIPES = (
    "subtract first, then square",
    "2/n * x.T @ r",
    "sorted by (start, -duration)",
    "an event ending before it is nested",
    'problem["lr"] * 0.9',
    "walking deeper counts nested",
    "(log g0 - log threshold) / (log g0 - log g1)",
    "(base_s - threshold * base_f) / (threshold * slope_f - slope_s)",
    "on this CPU the gather wins",
    "makes a scanned loop impossible",
    "leaf.size * leaf.dtype.itemsize",
)
PHRASE = re.compile(r"how the reference (does|meets|solves|passes|fixes)", re.I)
SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.I | re.S)
OFFERS = re.compile(r"\b(reference|solutions?|answers?|walk-?through)\b", re.I)
SEPARATOR = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
FIX_HEADER = re.compile(r"\bfix(es|ed)?\b", re.I)
# Released files that still hold such material, each with why it is not fixed here; the
# test below fails once one is clean, so the entry goes with the fix.
KNOWN: dict[str, str] = {}  # released file -> why it may still hold a walk-through


def flat(text: str) -> str:
    """Whitespace and wrapped comment markers collapsed: a phrase wrapped over lines of a
    Markdown page or of ``#`` comments reads as one line."""
    return re.sub(r"\s+", " ", re.sub(r"\n[ \t]*#+[ \t]?", "\n", text))


def answer_material(text: str) -> list[str]:
    """What in ``text`` (a notebook cell or a Markdown page) gives an answer away."""
    found = [f"phrase {m.group(0)!r}" for m in PHRASE.finditer(flat(text))]
    found += [f"<details> offering {s.strip()!r}" for s in SUMMARY.findall(text)
              if OFFERS.search(s)]
    lines = text.splitlines()
    for head, rule in zip(lines, lines[1:], strict=False):
        cells = [c.strip() for c in head.strip().strip("|").split("|")]
        if "|" in head and SEPARATOR.match(rule) and any(FIX_HEADER.search(c) for c in cells):
            found.append(f"table of fixes {head.strip()[:60]!r}")
    low = flat(text).lower()
    found += [f"recipe {r!r}" for r in RECIPES if flat(r).lower() in low]
    return found


def notebook_texts(path: Path) -> list[str]:
    cells = json.loads(path.read_text())["cells"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in cells]


def scan(path: Path) -> list[str]:
    texts = notebook_texts(path) if path.suffix == ".ipynb" else [path.read_text()]
    return [f for t in texts for f in answer_material(t)]


def released_pages(release: Path) -> list[Path]:
    return (sorted(release.glob("notebooks/*.ipynb")) + sorted(release.rglob("*.md")))


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The learner release (a few seconds; test_autograder_release builds its own)."""
    out = tmp_path_factory.mktemp("release") / "course"
    done = subprocess.run([sys.executable, "-m", "autograder", "release", "--out", str(out)],
                          cwd=ROOT, capture_output=True, check=False, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


# --- the release --------------------------------------------------------------------

def test_release_holds_no_walkthrough_or_answer(release):
    pages = released_pages(release)
    assert len([p for p in pages if p.suffix == ".ipynb"]) >= 8, pages
    assert len([p for p in pages if p.name == "README.md"]) >= 6, pages
    found = {p.relative_to(release).as_posix(): scan(p) for p in pages}
    leaks = {k: v for k, v in found.items() if v and k not in KNOWN}
    assert not leaks, leaks
    fixed = [k for k in KNOWN if not found.get(k)]
    assert not fixed, f"now clean, drop from KNOWN: {fixed}"


def test_a_planted_walkthrough_is_caught(release, tmp_path):
    """Each rule fails on its own planted fault, in a released notebook and a README."""
    source = release / "notebooks" / "07_optimisation.ipynb"
    assert not scan(source)
    plants = {
        "phrase": "**How the reference does stage 3** (read after your attempt).",
        "<details>": "<details><summary>Reference solution (open after your attempt)"
                     "</summary>\n\nsee above\n</details>",
        "table of fixes": "| fix, applied alone | speedup |\n|---|---|\n| a jitted step | 2x |",
        "recipe": "`f = (log g0 - log threshold) /\n(log g0 - log g1)` at the first pair",
    }
    nb = json.loads(source.read_text())
    for rule, text in plants.items():
        planted = json.loads(json.dumps(nb))
        planted["cells"].insert(5, {"cell_type": "markdown", "metadata": {}, "source": text})
        path = tmp_path / f"{rule}.ipynb"
        path.write_text(json.dumps(planted))
        assert [f for f in scan(path) if f.startswith(rule)], (rule, scan(path))
    # a recipe wrapped over two lines of a code cell's comments
    code = "# the crossover: (base_s - threshold * base_f) /\n#   (threshold * slope_f - slope_s)\n"
    assert answer_material(code)
    readme = tmp_path / "README.md"
    readme.write_text((release / "projects/optimisation/README.md").read_text()
                      + "\n* On this CPU the gather\n  wins.\n")
    assert scan(readme) == ["recipe 'on this CPU the gather wins'"]


def test_a_path_only_the_course_holds_is_caught(release):
    """What the release's pages name must exist in the release: a solution path exists in
    the course, not in the release, and is caught there."""
    from test_docs import path_problems
    page = release / "projects" / "optimisation" / "README.md"
    text = page.read_text()
    assert not path_problems(text, page, release)
    planted = text + "\nCompare with `projects/optimisation/solution/model.py`.\n"
    assert not path_problems(planted, ROOT / "projects/optimisation/README.md", ROOT)
    assert path_problems(planted, page, release) == [
        "path `projects/optimisation/solution/model.py` does not exist"]


# --- where the walk-throughs went -----------------------------------------------------

def test_the_walkthroughs_are_in_the_instructor_docs_with_the_recipes():
    stages = {p: set(feedback.walkthroughs(p, CHECKER_DOCS)) for p in MOVED}
    assert stages == MOVED
    text = flat("\n".join((CHECKER_DOCS / f"{p}.md").read_text() for p in MOVED)).lower()
    assert not [r for r in RECIPES if flat(r).lower() not in text]
    for project, numbers in MOVED.items():
        for n in numbers:
            assert len(feedback.walkthroughs(project, CHECKER_DOCS)[n]) > 200, (project, n)


def stage_record(project: str, stage: int, status: str, checks: list[str]) -> dict:
    return {"kind": "stage", "project": project, "stage": stage, "title": "t",
            "status": status, "reason": "", "points": 0.0, "max_points": 2.0,
            "checks": [{"id": f"c{i}", "status": s, "points": 0.0, "max_points": 1.0,
                        "message": "m"} for i, s in enumerate(checks)]}


def test_feedback_carries_the_walkthrough_of_an_attempted_stage():
    text = feedback.walkthroughs("optimisation", CHECKER_DOCS)[3]
    tried = stage_record("optimisation", 3, "fail", ["fail", "not-implemented"])
    passed = stage_record("optimisation", 3, "pass", ["pass", "pass"])
    stub = stage_record("optimisation", 3, "fail", ["not-implemented", "not-implemented"])
    missing = stage_record("optimisation", 3, "missing", ["missing", "missing"])
    none_written = stage_record("optimisation", 2, "pass", ["pass"])
    notebook = {"kind": "notebook", "item": "notebooks/07_optimisation.ipynb",
                "status": "pass", "points": 1.0, "max_points": 1.0, "questions": []}
    for record in (tried, passed):
        assert text in feedback.markdown("ann", [record])
        assert feedback.html_page("ann", [record]).count(feedback.WALKTHROUGH_TITLE) == 1
    for record in (stub, missing, none_written, notebook):
        assert feedback.WALKTHROUGH_TITLE not in feedback.markdown("ann", [record])
        assert feedback.WALKTHROUGH_TITLE not in feedback.html_page("ann", [record])


def test_feedback_without_the_instructor_docs_has_no_walkthrough(tmp_path):
    """Graded from a release (no docs/checkers), or a project name that is no page name."""
    tried = stage_record("optimisation", 3, "fail", ["fail"])
    assert feedback.walkthrough(tried, tmp_path) == ""
    assert feedback.walkthroughs("../optimisation", CHECKER_DOCS) == {}
    (tmp_path / "optimisation.md").write_text("# o\n\n## Other\n\n### Stage 3\n\nno\n")
    assert feedback.walkthroughs("optimisation", tmp_path) == {}
    assert feedback.WALKTHROUGH_TITLE not in feedback.markdown("ann", [tried], tmp_path)

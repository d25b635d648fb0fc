"""The instructor's class tools on a batch graded by the real grader (notebook-only
submissions of the fixture notebook, full sandbox), graded again after a checker fix and
one learner's new file: ``report``, ``export --format canvas``, ``similar`` and ``diff``
through the command line, and the report opened in the suite's headless Chromium
(screenshot in build/browser/class-report.png). None of them writes the gradebook.
The same tools on hand-built gradebooks, bad input included: tests/test_class_tools.py."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.facts import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

import autograder.samples as fx  # noqa: E402

NB = "notebooks/ag_demo.ipynb"
ZOE = "Zoë, Müller"   # a byte-identical copy of nb-own, under a name with a comma
# right answers in a learner's own words (longer than the reference's one-liners)
OWN = {"square": "def square(x):\n    result = x\n    result = result * x\n"
                 "    assert result >= 0\n    return result",
       "mean": "def mean(xs):\n    total = 0.0\n    for value in xs:\n"
               "        total = total + value\n    return total / len(xs)"}
HIDDEN_V1, HIDDEN_V2 = "float(square(-4)) == 16.0", "float(square(2)) == 4.0"


def cli(*argv, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env, check=False)
    if check:
        assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])
    return done


def grade(subs: Path, out: Path, notebooks: Path) -> None:
    done = cli("grade", subs, "--out", out, "--stages", NB, "--notebooks", notebooks,
               "--workers", "2", "--timeout", "60", "--cell-timeout", "8", "--quiet")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("class-tools")
    variants = fx.notebook_variants()
    subs, out = tmp / "subs", tmp / "out"
    for student, edits in (("nb-own", OWN), (ZOE, OWN),
                           ("nb-wrong", variants["nb-wrong"][0]),
                           ("nb-hidden-wrong", variants["nb-hidden-wrong"][0])):
        fx.write(subs, student, None, fx.learner_notebook(edits))
    grade(subs, out, fx.NOTEBOOK.parent)
    # the changed copy: a fixed hidden test (a checker change) and nb-wrong's new file
    fixed = tmp / "notebooks-v2"
    fixed.mkdir()
    text = fx.NOTEBOOK.read_text()
    assert text.count(HIDDEN_V1) == 1
    (fixed / fx.NOTEBOOK.name).write_text(text.replace(HIDDEN_V1, HIDDEN_V2))
    fx.write(subs, "nb-wrong", None, fx.learner_notebook(
        {**variants["nb-good"][0], "square": "def square(x):\n    return x ** 3"}))
    grade(subs, out, fixed)
    book = out / "gradebook.sqlite"
    before = hashlib.sha256(book.read_bytes()).hexdigest()
    roster = tmp / "roster.csv"
    with open(roster, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["Submission", "Name", "ID", "SIS Login ID", "Section"],
                                 ["nb-own", "Own, Nora", "11", "nora", "A"],
                                 [ZOE, "Müller, Zoë", "12", "zoe", "A"],
                                 ["nb-hidden-wrong", "Hidden, Hal", "13", "hal", "B"],
                                 ["absent", "Absent, Abe", "14", "abe", "B"]])
    done = {"report": cli("report", out, "--out", tmp / "report"),
            "canvas": cli("export", out, "--csv", tmp / "canvas.csv", "--format", "canvas",
                          "--roster", roster),
            "similar": cli("similar", out, "--out", tmp / "similar"),
            "diff": cli("diff", out, "--json")}
    return {"tmp": tmp, "out": out, "done": done, "book_before": before,
            "book_after": hashlib.sha256(book.read_bytes()).hexdigest()}


@pytest.mark.slow
def test_class_tools_on_a_graded_and_regraded_batch(graded_class):
    tmp, done = graded_class["tmp"], graded_class["done"]
    assert graded_class["book_after"] == graded_class["book_before"]

    report = json.loads((tmp / "report" / "report.json").read_text())
    assert report["submissions"] == 4 and not report["incomplete"]
    (item,) = report["per_item"]
    assert item["item"] == NB and item["statuses"] == {"pass": 3, "fail": 1}
    assert item["time_s"]["n"] == 4 and item["time_s"]["median"] > 0
    questions = {q["check"]: q for q in report["per_question"]}
    assert questions["square_tests"]["failed"] == 1   # nb-wrong's new square: x ** 3
    assert "square(3) should be 9" in questions["square_tests"]["messages"][0][0]
    assert questions["mean_tests"]["failed"] == 0
    never = {c["check"] for c in report["never_failed"]}
    assert never == {"mean_tests"}
    assert report["totals"]["values"] == [1.0, 3.0, 3.0, 3.0]
    assert report["moved_same_files"] == []   # the grader is deterministic here

    rows = list(csv.reader((tmp / "canvas.csv").open(encoding="utf-8")))
    assert rows[0][-1] == NB and rows[1][-1] == "3"
    assert {r[1]: r[-1] for r in rows[2:]} == {"11": "3", "12": "3", "13": "3"}
    unmatched = (tmp / "canvas.csv.unmatched.csv").read_text(encoding="utf-8")
    assert "nb-wrong" in unmatched and "absent" in unmatched
    assert "NOT EXPORTED: submission 'nb-wrong'" in done["canvas"].stderr

    # the identical pair is named; the release (a stubbed notebook) never counts
    assert f"identical learner files: {ZOE} = nb-own" in done["similar"].stdout
    similar = json.loads((tmp / "similar" / "similar.json").read_text())
    assert similar["identical"] == [[ZOE, "nb-own"]]
    assert [(p["a"], p["b"], p["share_a"]) for p in similar["pairs"]] == [(ZOE, "nb-own", 1.0)]
    assert "never a grade" in (tmp / "similar" / "index.html").read_text(encoding="utf-8")

    changes = json.loads(done["diff"].stdout)["changes"]
    # nb-hidden-wrong's hidden test was fixed: fail -> pass with the checker change;
    # nb-wrong's file changed (not a regrade of the same files); the rest did not move
    assert [(c["student"], c["cause"], c["old"]["status"], c["new"]["status"],
             c["old"]["points"], c["new"]["points"]) for c in changes] == [
        ("nb-hidden-wrong", "checker", "fail", "pass", 1.0, 3.0)]
    assert changes[0]["old"]["checker_fp"] != changes[0]["new"]["checker_fp"]
    assert [m["id"] for m in changes[0]["checks"]] == ["square_tests"]
    text = cli("diff", graded_class["out"]).stdout
    assert "0 with the same checker" in text and "1 with a checker" in text


@pytest.mark.slow
def test_class_report_in_the_browser(graded_class):
    """The page as an instructor opens it: from disk, offline, every plot drawn."""
    from test_browser_lab import CHROMIUM_ARGS, SHOTS, _missing, chromium_executable
    chromium = chromium_executable()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pyproject pins it)")
    page_file = graded_class["tmp"] / "report" / "report.html"
    pair_page = graded_class["tmp"] / "similar" / "index.html"
    SHOTS.mkdir(parents=True, exist_ok=True)
    shot = SHOTS / "class-report.png"
    outside, errors = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                     args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 1000})
            page.on("pageerror", lambda err: errors.append(str(err)))

            def route(r):
                if r.request.url.startswith(("file:", "data:")):
                    return r.continue_()
                outside.append(r.request.url)
                return r.abort()
            page.route("**/*", route)
            page.goto(page_file.as_uri())
            page.wait_for_load_state("load")
            assert page.title() == "Class report"
            sizes = page.eval_on_selector_all(
                "img", "imgs => imgs.map(i => [i.complete, i.naturalWidth])")
            assert len(sizes) >= 3 and all(done and width > 100 for done, width in sizes), sizes
            body = page.inner_text("body")
            assert "Stages and notebooks" in body and "square_tests" in body
            assert "most common mistakes" in body
            page.screenshot(path=str(shot), full_page=True)
            page.goto(pair_page.as_uri())
            assert "never a grade" in page.inner_text("body")
            page.click("text=side by side")
            assert page.locator("mark").count() >= 2   # the shared passage, both sides
            assert "never a grade" in page.inner_text("body")
            page.screenshot(path=str(SHOTS / "class-similar-pair.png"))
        finally:
            browser.close()
    assert not outside, f"the report asked for something outside itself: {outside}"
    assert not errors, errors
    assert shot.stat().st_size > 10_000
    shutil.copy(shot, graded_class["tmp"] / "class-report.png")

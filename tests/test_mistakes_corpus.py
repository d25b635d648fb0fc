"""The learner-mistake corpus (tests/mistakes/<project>.py, and the blind part
tests/mistakes/blind/<project>.py where one exists) and its runner
(``coursekit/commands/mistakes.py``, ``make mistakes``), statically: every mistake of
either file applies where it says, each stage holds at least 10 in each file, blind ids
are marked as such, and the runner classifies exit statuses and tallies stages (the
blind figure beside the rest) as documented. Running the corpus itself is ``make
mistakes`` (slow)."""

from __future__ import annotations

import ast
import io
import json
import os
from collections import Counter

import pytest

from coursekit.commands import mistakes as runner
from coursekit.commands.mistakes_corpus import BLIND_PREFIX, load_corpus, read_file
from coursekit.commands.mutants import learner_regions
from coursekit.facts import ROOT, projects

PROJECTS = projects(with_solution=True)
AT_LEAST = 10
# every corpus file there is: (project, blind)
FILES = [(p, blind) for p in PROJECTS for blind in (False, True)
         if runner.corpus_path(p, blind=blind).is_file()]
BLIND = [p for p, blind in FILES if blind]


def solution_text(project: str) -> str:
    return (ROOT / "projects" / project / "solution" / "model.py").read_text()


def test_every_project_has_a_corpus():
    missing = [p for p in PROJECTS if not runner.corpus_path(p).is_file()]
    assert not missing, f"no tests/mistakes/<project>.py for {missing}"


@pytest.mark.parametrize("project", PROJECTS)
def test_every_mistake_applies_inside_its_stage_and_changes_the_file(project):
    source = solution_text(project)
    found, _ = runner.load_corpus(project)
    broken = []
    for mistake in found:
        try:
            text = runner.apply(source, mistake)
        except ValueError as err:
            broken.append(str(err))
            continue
        assert text != source
        try:
            ast.parse(text)  # a plausible mistake is Python, not a syntax error
        except SyntaxError as err:
            broken.append(f"{mistake.id}: not valid Python ({err})")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("project", PROJECTS)
def test_ids_unique_across_both_files(project):
    found, _ = runner.load_corpus(project)
    repeated = [i for i, n in Counter(m.id for m in found).items() if n > 1]
    assert not repeated, f"{project}: ids used twice: {repeated}"


@pytest.mark.parametrize("project, blind", FILES)
def test_every_stage_has_enough_in_each_file(project, blind):
    """The course's own corpus and the blind one each hold at least 10 mistakes a stage:
    a blind figure of 2 says nothing."""
    found, _ = read_file(runner.corpus_path(project, blind=blind), blind)
    assert all(m.misunderstood.strip() and "\n" not in m.misunderstood for m in found)
    assert all(m.blind == blind and m.id.startswith(BLIND_PREFIX) == blind for m in found)
    stages = sorted({r.stage for r in learner_regions(solution_text(project))})
    counts = Counter(m.stage for m in found)
    short = {s: counts.get(s, 0) for s in stages if counts.get(s, 0) < AT_LEAST}
    assert not short, (f"{project}{' (blind)' if blind else ''}: stages with fewer than "
                       f"{AT_LEAST} mistakes (stage: count): {short}")
    assert set(counts) <= set(stages), f"{project}: mistakes for stages it lacks"


@pytest.mark.parametrize("blind", [False, True])
def test_an_id_on_the_wrong_side_of_the_blind_line_is_refused(tmp_path, blind):
    path = tmp_path / "corpus.py"
    wrong = "mse-sum" if blind else "blind-mse-sum"
    path.write_text(f"MISTAKES = [{{'stage': 1, 'id': {wrong!r}, 'misunderstood': 'x', "
                    "'edits': [('a', 'b')]}]\n")
    with pytest.raises(ValueError, match="start with 'blind-'"):
        read_file(path, blind)


def test_load_corpus_joins_the_blind_part(tmp_path):
    folder = tmp_path / "tests" / "mistakes"
    (folder / "blind").mkdir(parents=True)
    (folder / "p.py").write_text("MISTAKES = [{'stage': 1, 'id': 'own', 'misunderstood': "
                                 "'x', 'edits': [('a', 'b')]}]\nJUSTIFIED = {'own': 'why'}\n")
    assert [m.id for m in runner.load_corpus("p", tmp_path)[0]] == ["own"]
    (folder / "blind" / "p.py").write_text(
        "MISTAKES = [{'stage': 1, 'id': 'blind-one', 'misunderstood': 'y', "
        "'edits': [('a', 'c')]}]\nJUSTIFIED = {'blind-one': 'because'}\n")
    found, justified = runner.load_corpus("p", tmp_path)
    assert [(m.id, m.blind) for m in found] == [("own", False), ("blind-one", True)]
    assert justified == {"own": "why", "blind-one": "because"}


@pytest.mark.parametrize("project", PROJECTS)
def test_justified_exceptions_name_real_mistakes_and_the_checker_page_says_so(project):
    """Stated on the instructor's checker page, not the learner README: which mistakes no
    check catches is no help to a learner's thinking (issue 30)."""
    found, justified = runner.load_corpus(project)
    ids = {m.id for m in found}
    assert set(justified) <= ids, f"JUSTIFIED names unknown ids {set(justified) - ids}"
    assert all(reason.strip() for reason in justified.values())
    page = (ROOT / "docs" / "checkers" / f"{project}.md").read_text()  # blind ones too
    unstated = [i for i in justified if i not in page]
    assert not unstated, (f"{project}: docs/checkers/{project}.md must state each justified "
                          f"exception (by id, with why): {unstated}")
    readme = (ROOT / "projects" / project / "README.md").read_text()
    assert not [i for i in justified if i in readme], f"{project}: README names them"


# -- apply's refusals ---------------------------------------------------------------------

SOURCE = '''def f():
    """doc: return 1"""
    ### BEGIN SOLUTION stage 1: f
    return 1
    ### END SOLUTION


def g():
    ### BEGIN SOLUTION stage 2: g
    return 1 + 1
    ### END SOLUTION
'''


def one(stage, *edits):
    return runner.Mistake(stage, "m", "a test", tuple(edits))


def test_apply_edits_inside_the_stage_region():
    assert "return 2\n" in runner.apply(SOURCE, one(1, ("    return 1\n", "    return 2\n")))


@pytest.mark.parametrize("mistake, says", [
    (one(1, ("return 1", "return 2")), "occurs 3 times"),         # not unique
    (one(1, ("return 7", "return 2")), "occurs 0 times"),         # not there
    (one(1, ("doc: return 1", "doc")), "not inside a stage 1"),   # a docstring
    (one(1, ("return 1 + 1", "return 3")), "not inside a stage 1"),  # stage 2's region
    (one(1, ("    return 1\n    ### END SOLUTION\n", "x")), "not inside"),  # spills out
    (one(2, ("return 1 + 1", "return 1 + 1")), "change nothing"),
])
def test_apply_refuses(mistake, says):
    with pytest.raises(ValueError, match=says):
        runner.apply(SOURCE, mistake)


# -- classification and tallies -----------------------------------------------------------

@pytest.mark.parametrize("rc, timed_out, outcome", [
    (0, False, "accepted"), (1, False, "caught"), (3, False, "inconclusive"),
    (None, True, "timeout"), (-9, True, "timeout"), (2, False, "error"),
    (-11, False, "error"),
])
def test_classify(rc, timed_out, outcome):
    assert runner.classify(rc, timed_out) == outcome
    assert (outcome in runner.CAUGHT) == (outcome in ("caught", "timeout"))


FAKE_CHECKER = '''import json, sys, time
args = sys.argv[1:]
impl = args[args.index("--impl") + 1]
report = args[args.index("--json") + 1]
code = int(open(impl).read().split("EXIT=")[1].split()[0])
if "--fail-fast" not in args and code == 3 and "LATER_FAIL" in open(impl).read():
    code = 1
if code == 99:
    time.sleep(60)
status = {0: "pass", 1: "fail", 3: "inconclusive"}.get(code, "crash")
json.dump({"results": [{"check_id": "c", "status": status}]}, open(report, "w"))
print(status.upper(), "stage 1 · c")
sys.exit(code)
'''


@pytest.mark.parametrize("body, outcome, failed", [
    ("EXIT=0", "accepted", []),
    ("EXIT=1", "caught", ["fail:c"]),
    ("EXIT=3", "inconclusive", ["inconclusive:c"]),
    ("EXIT=3 LATER_FAIL", "caught", ["fail:c"]),  # --fail-fast stopped at an inconclusive
    ("EXIT=2", "error", ["crash:c"]),
    ("EXIT=99", "timeout", []),
])
def test_judge_on_a_fake_checker(tmp_path, body, outcome, failed):
    checker = tmp_path / "check.py"
    checker.write_text(FAKE_CHECKER)
    mistake = one(1, ("x", "y"))
    found = runner.judge(mistake, body + "\n", tmp_path / "base", checker, seed=1,
                         env={"PATH": "/usr/bin:/bin"}, timeout=3 if outcome == "timeout" else 30)
    assert (found.outcome, found.failed_checks) == (outcome, failed)


def outcome(stage, id_, result):
    return runner.Outcome(id_, stage, f"{id_} misunderstood", result, None, [], 1.0)


def test_report_tallies_justifies_and_keeps_other_stages(tmp_path):
    corpus = [runner.Mistake(s, i, "x", (("a", "b"),)) for s, i in
              [(1, "a"), (1, "b"), (1, "c"), (2, "d"), (2, "e")]]
    path = tmp_path / "report.json"
    justified = {"b": "cannot be told from correct work on CPU", "a": "stale"}
    runner.write_report(path, "p", 1, [outcome(1, "a", "caught"), outcome(1, "b", "accepted"),
                                       outcome(1, "c", "inconclusive")],
                        {1: "t1"}, justified, corpus)
    report = runner.write_report(path, "p", 1, [outcome(2, "d", "timeout"),
                                                outcome(2, "e", "error")],
                                 {2: "t2"}, justified, corpus)
    one_, two = report["stages"]["1"], report["stages"]["2"]
    assert (one_["caught"], one_["total"], one_["unjustified"]) == (1, 3, 1)
    assert [m["id"] for m in one_["missed"]] == ["b", "c"]
    assert one_["justified_but_caught"] == ["a"] and one_["run_at"] == "t1"
    assert (two["caught"], two["total"], two["unjustified"]) == (1, 2, 1)
    assert runner.figure(one_) == ("1 of 3 learner mistakes caught (33%; 1 justified); "
                                   "blind: none judged, own 1 of 3 (33%)")
    out = io.StringIO()
    runner.print_report(report, out)
    text = out.getvalue()
    assert "accepted     b: b misunderstood (justified: cannot be told" in text
    assert "inconclusive c: c misunderstood (NOT JUSTIFIED)" in text
    assert "a is in JUSTIFIED: drop it" in text
    # another seed starts over; a mistake removed from the corpus leaves the report
    again = runner.write_report(path, "p", 2, [outcome(2, "d", "caught")], {2: "t3"},
                                {}, corpus[3:])
    assert list(again["stages"]) == ["2"] and again["stages"]["2"]["total"] == 1


def test_corpus_figure_for_make_mutants(tmp_path):
    corpus = [runner.Mistake(1, "a", "x", (("a", "b"),))]
    path = tmp_path / "build" / "mistakes-p" / "report.json"
    path.parent.mkdir(parents=True)
    assert runner.corpus_figure("p", 1, root=tmp_path) is None
    runner.write_report(path, "p", 1, [outcome(1, "a", "caught")], {1: "t1"}, {}, corpus)
    assert runner.corpus_figure("p", 1, root=tmp_path) == (
        "1 of 1 learner mistakes caught (100%); blind: none judged, own 1 of 1 (100%) "
        "[run t1]")
    assert runner.corpus_figure("p", 2, root=tmp_path) is None



def test_rescore_tallies_the_last_report_by_the_corpus_as_it_is_now(tmp_path, monkeypatch):
    corpus = [runner.Mistake(1, "a", "x", (("a", "b"),)), runner.Mistake(1, "b", "y", (("a", "c"),))]
    path = tmp_path / "build" / "mistakes-p" / "report.json"
    path.parent.mkdir(parents=True)
    runner.write_report(path, "p", 5, [outcome(1, "a", "caught"), outcome(1, "b", "accepted")],
                        {1: "t1"}, {}, corpus)
    monkeypatch.setattr(runner, "load_corpus", lambda p, root: (corpus, {"b": "why"}))
    report = runner.rescore("p", root=tmp_path, out=io.StringIO())
    assert report["seed"] == 5 and report["stages"]["1"]["unjustified"] == 0
    assert report["stages"]["1"]["missed"][0]["justified"] == "why"


def test_the_blind_figure_stands_beside_the_rest_and_a_part_run_keeps_the_other(tmp_path):
    """``--corpus blind`` judges the blind mistakes alone: the report keeps the stage's
    own mistakes as last measured, and the stage's line shows both figures."""
    corpus = [runner.Mistake(1, "a", "x", (("a", "b"),)), runner.Mistake(1, "b", "y", (("a", "c"),)),
              runner.Mistake(1, "blind-c", "z", (("a", "d"),), blind=True),
              runner.Mistake(1, "blind-d", "w", (("a", "e"),), blind=True)]
    path = tmp_path / "report.json"
    runner.write_report(path, "p", 1, [outcome(1, "a", "caught"), outcome(1, "b", "accepted"),
                                       outcome(1, "blind-c", "accepted")],
                        {1: "t1"}, {}, corpus)
    report = runner.write_report(path, "p", 1, [outcome(1, "blind-c", "caught"),
                                                outcome(1, "blind-d", "caught")],
                                 {1: "t2"}, {}, corpus, selection={"blind-c", "blind-d"})
    t = report["stages"]["1"]
    assert (t["caught"], t["total"], t["run_at"]) == (3, 4, "t2")
    none_named = {"hints_judged": 0, "hints_naming": 0}  # no entry declares named_by
    assert t["blind"] == {"total": 2, "caught": 2, "rate": 1.0, "new": 2, "new_caught": 2,
                          **none_named}
    assert t["own"] == {"total": 2, "caught": 1, "rate": 0.5, "new": 2, "new_caught": 1,
                        **none_named}
    assert runner.figure(t) == ("3 of 4 learner mistakes caught (75%); blind 2 of 2 (100%), "
                                "own 1 of 2 (50%)")


def test_hints_that_name_the_mistake_are_counted_from_the_checks_own_words(tmp_path):
    """A caught mistake that declares ``named_by`` phrases is judged on the words of the
    checks that failed it (result.json: message, yours, expected, evidence, hint): the
    figure says how many hints named it, of those that declare phrases."""
    impl = tmp_path / "model.py"
    impl.write_text("")
    impl.with_name("result.json").write_text(json.dumps({"results": [
        {"check_id": "a", "status": "pass", "hint": "padding"},  # a passing check says nothing
        {"check_id": "b", "status": "fail", "message": "rows differ",
         "hint": "the rows that are all NaN are the ragged ones"}]}))
    words = runner.words_of_failures(impl)
    named = runner.Mistake(1, "blind-x", "x", (("a", "b"),), True, ("nan", "padding"))
    unnamed = runner.Mistake(1, "blind-y", "y", (("a", "b"),), True, ("timestamp",))
    assert runner.names_it(named, words) is True and runner.names_it(unnamed, words) is False
    assert runner.names_it(runner.Mistake(1, "z", "z", (("a", "b"),)), words) is None
    rows = [runner.Outcome("blind-x", 1, "x", "caught", 1, [], 1.0, "", True),
            runner.Outcome("blind-y", 1, "y", "caught", 1, [], 1.0, "", False),
            runner.Outcome("blind-z", 1, "z", "accepted", 0, [], 1.0)]
    report = runner.write_report(tmp_path / "report.json", "p", 1, rows, {1: "t"}, {},
                                 [runner.Mistake(1, r.id, "m", (("a", "b"),), True) for r in rows])
    blind = report["stages"]["1"]["blind"]
    assert (blind["hints_judged"], blind["hints_naming"]) == (2, 1)
    assert "blind 2 of 3 (67%), hints name 1 of 2" in runner.figure(report["stages"]["1"])


def test_a_mistake_that_repeats_an_earlier_ones_file_is_named_and_not_counted_new():
    """A blind writer who lands on a named mistake's very file adds nothing new to measure:
    the blind figure says how many of its mistakes are new files."""
    from coursekit.commands.mistakes import part, repeats
    mistakes, _ = load_corpus("optimisation")
    repeated = repeats("optimisation", mistakes)
    assert repeated["blind-b2-first-call-new-lr"] == "blind-record-first-call-new-lr"
    assert repeated["blind-b2-evidence-most-calls"] == "limiting-most-calls"
    assert "limiting-most-calls" not in repeated  # the first of its file
    rows = [{"id": "blind-b2-first-call-new-lr", "outcome": "caught"},
            {"id": "blind-b2-naive-logsumexp", "outcome": "caught"},
            {"id": "blind-new-one", "outcome": "accepted"}]
    got = part(rows, True, repeated)
    assert (got["total"], got["caught"], got["new"], got["new_caught"]) == (3, 2, 1, 0)


def test_an_undecided_reference_is_run_again_and_stands_when_nothing_failed(tmp_path, capsys):
    """The reference of a stage whose timing check cannot decide on a loaded machine (exit
    3, nothing failed) is run once more, and stands if undecided again: mistakes are then
    judged by what fails. A failing reference is a broken oracle (make mistakes measured no
    performance-audit stage 2 at two loads, 2026-12-07, for an undecided reference)."""
    from coursekit.commands.mutants import run_reference
    calls = tmp_path / "calls"
    checker = tmp_path / "check.py"
    checker.write_text("import sys, pathlib\n"
                       f"p = pathlib.Path({str(calls)!r}); codes = {{codes}}\n"
                       "n = len(p.read_text()) if p.exists() else 0\n"
                       "p.write_text('x' * (n + 1)); sys.exit(codes[min(n, len(codes) - 1)])\n")
    source = checker.read_text()
    for codes, ok, runs in (([3, 3], True, 2), ([3, 0], True, 2), ([0], True, 1),
                            ([1], False, 1), ([3, 1], False, 2)):
        checker.write_text(source.replace("{codes}", repr(codes)))
        calls.unlink(missing_ok=True)
        if ok:
            assert run_reference(checker, tmp_path / "m.py", 1, 1, dict(os.environ)) >= 0
        else:
            with pytest.raises(SystemExit, match="the oracle is broken"):
                run_reference(checker, tmp_path / "m.py", 1, 1, dict(os.environ))
        assert len(calls.read_text()) == runs, codes
    assert "inconclusive at seed 1 twice" in capsys.readouterr().out

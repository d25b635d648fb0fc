"""The instructor's class tools on gradebooks built through ``autograder.gradebook``'s own
API (no grading, seconds): ``report`` (the class page and its JSON), ``export --format
canvas|moodle`` (LMS import files, a roster, whoever does not match named), ``similar``
(copied work, the release never counted) and ``diff`` (what a regrade moved, noise
first). Bad input: a gradebook of an older grader, a half-finished batch, rosters with
duplicate or missing identities, names with commas and non-ASCII letters, identical
submissions: a clear message or a correct row, never a traceback, and the gradebook is
never written (each command opens it read-only). The same tools on a batch graded by
the real grader, and the report in the browser: tests/test_class_tools_graded.py."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import sqlite3
import sys
from pathlib import Path

import pytest

from coursekit.facts import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

import autograder.samples as fx  # noqa: E402
from autograder import cli  # noqa: E402
from autograder.classdata import connect_readonly  # noqa: E402
from autograder.gradebook import FILENAME, Gradebook  # noqa: E402

STAGE1, STAGE2, NB = "performance-audit/stage-1", "performance-audit/stage-2", \
    "notebooks/ag_demo.ipynb"
ZOE = "Zoë, Müller"          # a comma and non-ASCII letters in one submission name
FORMULA = "=HYPERLINK(x)"    # a name a spreadsheet would run


def check(cid: str, status: str, **kw) -> dict:
    return {"id": cid, "status": status, "points": 1.0 if status == "pass" else 0.0,
            "max_points": 1.0, "message": "" if status == "pass" else f"{cid}: wrong",
            **kw}


def stage(student: str, item: str, checks: list[dict], *, status: str | None = None,
          reason: str = "", wall_s: float = 2.0, files: str = "files-1",
          checker: str = "c0ffee01", **kw) -> dict:
    status = status or ("pass" if all(c["status"] == "pass" for c in checks) else "fail")
    return {"student": student, "item": item, "kind": "stage",
            "project": "performance-audit", "stage": int(item[-1]), "title": "t",
            "status": status, "reason": reason, "message": "",
            "points": sum(c["points"] for c in checks), "max_points": float(len(checks)),
            "checks": checks, "wall_s": wall_s, "files_hash": f"{student}-{files}",
            "checker_fp": checker, **kw}


def notebook(student: str, questions: list[dict], files: str = "nb-1",
             checker: str = "babe0001") -> dict:
    status = "pass" if all(q["status"] == "pass" for q in questions) else "fail"
    return {"student": student, "item": NB, "kind": "notebook", "notebook": NB,
            "status": status, "reason": "", "message": "",
            "points": sum(q["points"] for q in questions),
            "max_points": float(len(questions)), "questions": questions,
            "checks": questions, "wall_s": 3.0, "files_hash": f"{student}-{files}",
            "checker_fp": checker}


def build(folder: Path, records: list[dict], secret: str = "secret-1") -> Path:
    """A gradebook with ``records`` appended in order, as one grade run would; the
    content hash is what the grader makes of files + checker (+ seed)."""
    book = Gradebook.in_dir(folder)
    run = book.start_run("limits", "", secret)
    for r in records:
        book.append(r, f"{r['files_hash']}|{r['checker_fp']}|{secret}", run, "", secret)
    book.close()
    return folder


def class_records() -> list[dict]:
    """Five submissions, stage 1 and 2 and the notebook, plus two regrades."""
    hint = "sum over the last axis"
    out = []
    for s, wall in (("alice", 1.0), (ZOE, 2.0), ("bob", 3.0), (FORMULA, 4.0)):
        out.append(stage(s, STAGE1, [
            check("shapes", "pass"),
            check("sums", "fail", hint=hint, yours=f"3.0 (from /home/{s}/model.py)",
                  expected="4.0"),
            check("broken", "fail", hint="this check is broken")], wall_s=wall))
    out.append(stage("carol", STAGE1, [check("shapes", "pass"), check("sums", "pass"),
                                       check("broken", "fail")], wall_s=9.0))
    # stage 2: one tampering, one missing file, the rest pass
    for s in ("alice", ZOE, "bob"):
        out.append(stage(s, STAGE2, [check("speed", "pass")]))
    out.append(stage("carol", STAGE2, [check("speed", "error", message="not run: refused")],
                     status="error", reason="tamper-timing"))
    out.append(stage(FORMULA, STAGE2, [check("speed", "missing")], status="missing",
                     reason="missing-file"))
    for s in ("alice", ZOE, "bob", "carol", FORMULA):
        wrong = s == "bob"
        out.append(notebook(s, [
            check("square_tests", "fail" if wrong else "pass",
                  message="AssertionError: square(3) should be 9" if wrong else ""),
            check("mean_tests", "pass")]))
    # a regrade of bob's same files under the same checker: its timing check moved
    out.append(stage("bob", STAGE2, [check("speed", "fail",
                                           message="slower than the reference")]))
    # a regrade of alice's same files under a new checker: the broken check fixed
    out.append(stage("alice", STAGE1, [check("shapes", "pass"), check("sums", "pass"),
                                       check("broken", "pass")], checker="c0ffee02"))
    return out


@pytest.fixture
def grading(tmp_path) -> Path:
    return build(tmp_path / "grading", class_records())


def run(*argv) -> int:
    return cli.main([str(a) for a in argv])


def digest(path: Path) -> tuple[str, int]:
    return hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns


# ---------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------

def test_report_ranks_mistakes_flags_checks_and_anonymises(grading, tmp_path, capsys):
    assert run("report", grading, "--out", tmp_path / "rep") == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    items = {r["item"]: r for r in data["per_item"]}
    assert items[STAGE1]["pass_rate"] == pytest.approx(1 / 5)  # alice, after the fix
    assert items[STAGE2]["statuses"] == {"pass": 2, "fail": 1, "tamper-timing": 1,
                                         "missing": 1}
    assert items[STAGE1]["time_s"]["median"] == 3.0  # latest: 2 (alice regraded), 2, 3, 4, 9
    assert items[STAGE1]["time_s"]["max"] == 9.0
    questions = {q["check"]: q for q in data["per_question"]}
    assert questions["square_tests"]["failed"] == 1
    assert questions["square_tests"]["messages"] == [["AssertionError: square(3) should be 9",
                                                      1]]
    # ranked: the most failed check first, with its hint and its count
    top = data["per_check"][0]
    assert (top["item"], top["check"], top["failed"]) == (STAGE1, "broken", 4)
    sums = next(c for c in data["per_check"] if c["check"] == "sums")
    assert sums["failed"] == 3 and sums["hints"] == [["sum over the last axis", 3]]
    assert len(sums["examples"]) == 1   # the same line from three learners, once
    text = json.dumps(sums["examples"], ensure_ascii=False)
    assert "4.0" in text and ".../model.py" in text
    for name in ("alice", "bob", "Zoë", "/home/"):
        assert name not in text
    # the stage-2 speed check ran for 3 (missing and the refused run never reached it)
    speed = next(c for c in data["per_check"] if c["check"] == "speed")
    assert (speed["ran"], speed["failed"]) == (3, 1)
    # flags
    assert [(c["item"], c["check"]) for c in data["nobody_passes"]] == []  # alice passes
    never = {(c["item"], c["check"]) for c in data["never_failed"]}
    assert never == {(STAGE1, "shapes"), (NB, "mean_tests")}
    # totals: alice 3 + 1 + 2, ...
    assert data["totals"]["values"] == sorted([6.0, 4.0, 2.0, 3.0, 4.0])
    assert data["totals"]["max_total"] == 6.0
    # the noise: bob's stage 2, same files, same checker, verdict moved
    moved = data["moved_same_files"]
    assert [(m["student"], m["item"], m["old"]["status"], m["new"]["status"])
            for m in moved] == [("bob", STAGE2, "pass", "fail")]
    assert moved[0]["timing"] is True and moved[0]["checks"][0]["id"] == "speed"


STUB_HINT = "replace the `raise NotImplementedError` with your code"


def stub(cid: str) -> dict:
    return check(cid, "not-implemented", message=f"not yet: stage 3: {cid} (model.py, line 9)",
                 hint=STUB_HINT)


def test_report_counts_stubs_as_not_attempted_never_as_mistakes(tmp_path):
    """A stage whose every check met the starter's stub is "not attempted", apart from the
    failures; a stub's "not yet" is never one of the class's mistakes, never makes a check
    one that nobody passes, and its hint is never the most common one."""
    stage3 = "performance-audit:3"
    records = [stage(s, stage3, [stub("loss"), stub("memory")]) for s in ("ann", "bob", "cyd")]
    records += [stage("dag", stage3, [check("loss", "fail", hint="remat changes memory, "
                                            "never the numbers"), stub("memory")]),
                stage("zed", stage3, [check("loss", "pass"), check("memory", "pass")])]
    grading = build(tmp_path / "g", records)
    assert run("report", grading, "--out", tmp_path / "rep") == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    item = next(r for r in data["per_item"] if r["item"] == stage3)
    assert item["statuses"] == {"not attempted": 3, "fail": 1, "pass": 1}, item
    assert item["not_attempted"] == 3
    checks = {c["check"]: c for c in data["per_check"]}
    assert (checks["loss"]["failed"], checks["loss"]["ran"]) == (1, 2)
    assert (checks["memory"]["failed"], checks["memory"]["ran"], checks["memory"]["passed"]) \
        == (0, 1, 1)
    assert checks["memory"]["not_attempted"] == 4 and checks["loss"]["not_attempted"] == 3
    top = data["per_check"][0]
    assert (top["check"], top["hints"]) == ("loss", [["remat changes memory, never the "
                                                      "numbers", 1]])
    assert STUB_HINT not in json.dumps(data["per_check"])
    assert data["nobody_passes"] == []
    # a check that only ever met stubs could not show it fails: it is flagged so
    never = {c["check"] for c in data["never_failed"]}
    assert never == {"memory"}
    assert STUB_HINT not in (tmp_path / "rep" / "report.html").read_text()


def test_report_page_is_self_contained(grading, tmp_path):
    assert run("report", grading, "--out", tmp_path / "rep") == 0
    page = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    assert page.count("src='data:image/png;base64,") >= 4   # pass rate, time, failures, totals
    for outside in ("http://", "https://", "<script", "<link", "@import", "url("):
        assert outside not in page, outside
    # names only where the instructor must act (bob's moved verdict); examples anonymised
    assert "Zoë" not in page and "alice" not in page and "<td>bob</td>" in page
    assert "&lt;a learner&gt;" not in page and "3.0 (from .../model.py)" in page
    assert "Nobody passes" in page and "can this check fail" in page


# ---------------------------------------------------------------------------------
# nothing writes the gradebook
# ---------------------------------------------------------------------------------

def roster(path: Path, lines: list[list[str]],
           header=("submission", "name", "id", "sis_user_id", "email", "section")) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([list(header), *lines])
    return path


def test_no_command_writes_the_gradebook(grading, tmp_path, monkeypatch):
    book = grading / FILENAME
    before = digest(book)
    os.utime(book, ns=(before[1], before[1]))
    ros = roster(tmp_path / "roster.csv", [["alice", "Smith, Alice", "1", "", "a@x", "A"]])
    subs = tmp_path / "subs"
    fx.write(subs, "alice", fx.STARTER.read_text())
    assert run("report", grading, "--out", tmp_path / "rep") == 0
    assert run("export", grading, "--csv", tmp_path / "c.csv", "--format", "canvas",
               "--roster", ros) == 0
    assert run("export", grading, "--csv", tmp_path / "m.csv", "--format", "moodle",
               "--roster", ros) == 0
    assert run("similar", grading, "--submissions", subs, "--out", tmp_path / "sim") == 0
    assert run("diff", grading) == 0
    assert run("diff", grading, "--since", "c0ffee02", "--json") == 0
    assert digest(book) == before
    assert not (grading / (FILENAME + "-journal")).exists()
    db = connect_readonly(book)
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        db.execute("INSERT INTO runs VALUES ('x', 0, '', '', '', '', '')")
    db.close()


# ---------------------------------------------------------------------------------
# diff
# ---------------------------------------------------------------------------------

def test_diff_lists_noise_first_then_checker_changes(grading, capsys):
    assert run("diff", grading) == 0
    out = capsys.readouterr().out
    assert "2 change(s)" in out and "1 with the same checker" in out
    noise, _, changed = out.partition("WITH A CHECKER CHANGE")
    assert "bob · performance-audit/stage-2 (checker c0ffee01)" in noise
    assert "speed: pass -> fail  (slower than the reference)" in noise
    assert "alice · performance-audit/stage-1 (checker c0ffee01 -> c0ffee02)" in changed
    assert "broken: fail -> pass" in changed and "bob" not in changed
    # the same files graded once only (everyone else), and other files: not listed
    assert ZOE not in out and "carol" not in out

    assert run("diff", grading, "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert [(c["student"], c["cause"]) for c in data["changes"]] == [("bob", "noise"),
                                                                    ("alice", "checker")]
    assert data["changes"][1]["old"]["points"] == 1.0
    assert data["changes"][1]["new"]["points"] == 3.0


def test_diff_since_a_fingerprint_or_a_time(grading, capsys):
    rows = {r["checker_fp"] for r in class_records()}
    assert rows == {"c0ffee01", "c0ffee02", "babe0001"}
    # from the new checker's first grading on: alice's move was into it, not from it
    assert run("diff", grading, "--since", "c0ffee02", "--json") == 0
    assert json.loads(capsys.readouterr().out)["changes"] == []
    assert run("diff", grading, "--since", "c0ffee01", "--json") == 0
    assert len(json.loads(capsys.readouterr().out)["changes"]) == 2
    assert run("diff", grading, "--since", "2999-01-01", "--json") == 0
    assert json.loads(capsys.readouterr().out)["changes"] == []
    assert run("diff", grading, "--since", "2000-01-01T00:00") == 0
    assert "2 change(s)" in capsys.readouterr().out
    assert run("diff", grading, "--since", "deadbeef") == 2
    err = capsys.readouterr().err
    assert "no grading in this gradebook" in err and "c0ffee01" in err
    assert run("diff", grading, "--since", "last tuesday") == 2
    assert "neither a time" in capsys.readouterr().err


def test_diff_a_changed_secret_is_no_noise(tmp_path, capsys):
    folder = tmp_path / "g"
    build(folder, [stage("a", STAGE1, [check("x", "pass")])], secret="one")
    build(folder, [stage("a", STAGE1, [check("x", "fail")])], secret="two")
    assert run("diff", folder, "--json") == 0
    assert [c["cause"] for c in json.loads(capsys.readouterr().out)["changes"]] == ["secret"]


# ---------------------------------------------------------------------------------
# export --format canvas|moodle
# ---------------------------------------------------------------------------------

def read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def test_canvas_and_moodle_files_name_whoever_is_unmatched(grading, tmp_path, capsys):
    ros = roster(tmp_path / "roster.csv", [
        ["alice", "Smith, Alice", "101", "s-1", "alice@x.org", "A"],
        [ZOE, "Müller, Zoë", "102", "s-2", "Zoe@x.org", "B"],
        [FORMULA, "=cmd|' /C calc'!A0", "103", "", "f@x.org", ""],
        ["dora", "Explorer, Dora", "104", "s-4", "dora@x.org", "A"]])   # no submission
    assert run("export", grading, "--csv", tmp_path / "canvas.csv", "--format", "canvas",
               "--roster", ros) == 0
    io = capsys.readouterr()
    rows = read_csv(tmp_path / "canvas.csv")
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", STAGE1,
                       STAGE2, NB]
    assert rows[1] == ["    Points Possible", "", "", "", "", "3", "1", "2"]
    by_id = {r[1]: r for r in rows[2:]}
    assert by_id["101"] == ["Smith, Alice", "101", "s-1", "", "A", "3", "1", "2"]
    assert by_id["102"] == ["Müller, Zoë", "102", "s-2", "", "B", "1", "1", "2"]
    assert by_id["103"][0].startswith("'=")   # not run as a formula
    assert by_id["103"][5:] == ["1", "0", "2"]
    assert len(rows) == 5   # bob and carol: no roster entry; dora: no submission
    unmatched = read_csv(tmp_path / "canvas.csv.unmatched.csv")
    assert sorted(unmatched[1:]) == [
        ["graded submission with no roster entry", "bob", ""],
        ["graded submission with no roster entry", "carol", ""],
        ["roster entry with no graded submission", "dora", "5"]]
    assert "'bob' has no roster entry" in io.err and "'dora' has no graded" in io.err

    assert run("export", grading, "--csv", tmp_path / "moodle.csv", "--format", "moodle",
               "--roster", ros) == 0
    rows = read_csv(tmp_path / "moodle.csv")
    assert rows[0] == ["First name", "Last name", "ID number", "Email address", "Username",
                       STAGE1, STAGE2, NB]
    by_mail = {r[3]: r for r in rows[1:]}
    assert by_mail["Zoe@x.org"][:2] == ["Zoë", "Müller"]   # email as given (case kept)
    assert by_mail["alice@x.org"][5:] == ["3", "1", "2"]


def test_roster_duplicates_and_missing_identities_stop_the_export(grading, tmp_path,
                                                                  capsys):
    ros = roster(tmp_path / "bad.csv", [
        ["alice", "A", "1", "", "a@x", ""],
        ["alice", "A again", "2", "", "b@x", ""],
        ["bob", "B", "1", "", "c@x", ""],
        ["carol", "C", "", "", "", ""]])
    assert run("export", grading, "--csv", tmp_path / "c.csv", "--format", "canvas",
               "--roster", ros) == 2
    err = capsys.readouterr().err
    assert "line 3: submission 'alice' is also on line 2" in err
    assert "line 4: ID '1' is also on line 2" in err
    assert "line 5 (carol): no canvas identity" in err
    assert "Traceback" not in err and not (tmp_path / "c.csv").exists()
    no_column = roster(tmp_path / "nocol.csv", [["alice", "1"]], header=("student", "id"))
    assert run("export", grading, "--csv", tmp_path / "c.csv", "--format", "moodle",
               "--roster", no_column) == 2
    assert "no 'submission' column" in capsys.readouterr().err
    assert run("export", grading, "--csv", tmp_path / "c.csv", "--format", "canvas") == 2
    assert "needs --roster" in capsys.readouterr().err


def test_plain_csv_export_stays_as_it_was(grading, tmp_path):
    from autograder.export import table
    assert run("export", grading, "--csv", tmp_path / "plain.csv") == 0
    book = Gradebook.in_dir(grading)
    header, rows = table(book)
    book.close()
    assert read_csv(tmp_path / "plain.csv") == [header, *rows]
    assert header[:3] == ["student", "total", "max_total"]
    assert not (tmp_path / "plain.csv.unmatched.csv").exists()
    assert (grading / "feedback").is_dir()


# ---------------------------------------------------------------------------------
# older gradebooks, half-finished batches, no gradebook
# ---------------------------------------------------------------------------------

def old_gradebook(folder: Path) -> Path:
    """What an early grader wrote: no shard/secret_id columns, no runs table, records
    without checks, times, files hash or checker fingerprint; one unreadable record."""
    folder.mkdir(parents=True)
    db = sqlite3.connect(folder / FILENAME)
    db.execute("CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, student TEXT, "
               "item TEXT, content_hash TEXT, status TEXT, points REAL, max_points REAL, "
               "record TEXT, run_id TEXT, finished_at REAL)")
    rows = [("alice", STAGE1, "h1", "pass", 3, 3, json.dumps({"status": "pass"}), "r", 1.0),
            ("bob", STAGE1, "h2", "fail", 1, 3, "{not json", "r", 2.0),
            ("bob", STAGE1, "h2", "pass", 3, 3, json.dumps({"checks": "garbage"}), "r", 3.0),
            ("carol", NB, "h3", "fail", 0, 2, json.dumps({"questions": [
                {"id": "q", "status": "fail"}, {"no id": 1}]}), "r", 4.0)]
    db.executemany("INSERT INTO results (student, item, content_hash, status, points, "
                   "max_points, record, run_id, finished_at) VALUES (?,?,?,?,?,?,?,?,?)",
                   rows)
    db.commit()
    db.close()
    return folder


def test_an_older_gradebook_is_read_with_notes(tmp_path, capsys):
    folder = old_gradebook(tmp_path / "old")
    before = digest(folder / FILENAME)
    assert run("report", folder, "--out", tmp_path / "rep") == 0
    err = capsys.readouterr().err
    assert "older gradebook: no column(s) shard, secret_id" in err
    assert "1 row(s) with an unreadable record" in err and "no runs table" in err
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert {r["item"]: r["pass_rate"] for r in data["per_item"]} == {STAGE1: 1.0, NB: 0.0}
    assert [c["check"] for c in data["per_check"]] == ["q"]
    # same content hash, status moved: noise, told apart without a files hash
    assert run("diff", folder, "--json") == 0
    changes = json.loads(capsys.readouterr().out)["changes"]
    assert [(c["student"], c["cause"]) for c in changes] == [("bob", "noise")]
    ros = roster(tmp_path / "r.csv", [["alice", "A", "1", "", "", ""],
                                      ["bob", "B", "2", "", "", ""]])
    assert run("export", folder, "--csv", tmp_path / "c.csv", "--format", "canvas",
               "--roster", ros) == 0
    assert read_csv(tmp_path / "c.csv")[2][5:] == ["3", ""]   # alice: no notebook row
    assert run("similar", folder, "--out", tmp_path / "sim") == 2
    assert "pass --submissions" in capsys.readouterr().err
    assert digest(folder / FILENAME) == before


def test_a_half_finished_batch_leaves_cells_empty_not_zero(tmp_path, capsys):
    # killed after alice's two items and bob's first
    folder = build(tmp_path / "g", [stage("alice", STAGE1, [check("x", "pass")]),
                                    notebook("alice", [check("q", "pass")]),
                                    stage("bob", STAGE1, [check("x", "fail")])])
    Gradebook.in_dir(folder).start_run("limits", "", "secret-1")   # a run with no result
    assert run("report", folder, "--out", tmp_path / "rep") == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert data["incomplete"] == {"bob": [NB]}
    assert {r["item"]: r["not_graded"] for r in data["per_item"]} == {STAGE1: 0, NB: 1}
    assert [r["results"] for r in data["runs"]] == [3, 0]
    ros = roster(tmp_path / "r.csv", [["alice", "", "1", "", "", ""],
                                      ["bob", "", "2", "", "", ""]])
    assert run("export", folder, "--csv", tmp_path / "c.csv", "--format", "canvas",
               "--roster", ros) == 0
    assert [r[5:] for r in read_csv(tmp_path / "c.csv")[2:]] == [["1", "1"], ["0", ""]]


def test_no_gradebook_or_not_a_gradebook_is_a_message(tmp_path, capsys):
    for argv in (("report", tmp_path, "--out", tmp_path / "r"), ("diff", tmp_path),
                 ("similar", tmp_path)):
        assert run(*argv) == 2
        err = capsys.readouterr().err
        assert "no gradebook at" in err and "Traceback" not in err
    sqlite3.connect(tmp_path / FILENAME).execute("CREATE TABLE other (x)").connection.close()
    assert run("diff", tmp_path) == 2
    assert "not a grader gradebook" in capsys.readouterr().err


# ---------------------------------------------------------------------------------
# similar
# ---------------------------------------------------------------------------------

def renamed(text: str) -> str:
    """The same code with other names: the tokeniser sees through it."""
    for old, new in (("kernel_speedup", "ks"), ("share", "fraction"), ("times", "samples")):
        text = text.replace(old, new)
    return text


def test_similar_ranks_copies_and_never_counts_the_release(tmp_path, monkeypatch, capsys):
    solution, starter = fx.SOLUTION.read_text(), fx.STARTER.read_text()
    good = fx.notebook_variants()["nb-good"][0]
    own = {"square": "def square(x):\n    result = x\n    result = result * x\n"
                     "    assert result >= 0\n    return result",
           "mean": "def mean(xs):\n    total = 0.0\n    for value in xs:\n"
                   "        total = total + value\n    return total / len(xs)"}
    subs = tmp_path / "subs"
    fx.write(subs, "alice", solution, fx.learner_notebook(own))
    fx.write(subs, ZOE, solution, fx.learner_notebook(own))         # byte-identical
    fx.write(subs, "bob", renamed(solution), fx.learner_notebook(good))
    fx.write(subs, "carol", starter, fx.learner_notebook({}))         # the release
    fx.write(subs, "dave", starter, fx.learner_notebook({}))          # the release too
    grading = tmp_path / "grading"
    # the gradebook's run names the folder it graded, as `grade` does
    monkeypatch.setattr(sys, "argv", ["autograder", "grade", str(subs), "--out",
                                      str(grading), "--notebooks", str(fx.NOTEBOOK.parent)])
    build(grading, [stage(s, STAGE1, [check("x", "pass")])
                    for s in ("alice", ZOE, "bob", "carol", "dave", "erin")])
    before = digest(grading / FILENAME)
    assert run("similar", grading) == 0
    io = capsys.readouterr()
    data = json.loads((grading / "similar" / "similar.json").read_text())
    pairs = {(p["key"], frozenset((p["a"], p["b"]))): p for p in data["pairs"]}
    model = "projects/performance-audit/starter/model.py"
    code = "notebooks/ag_demo.ipynb (code answers)"
    assert {k for k in pairs} == {(model, frozenset(("alice", ZOE))),
                                  (model, frozenset(("alice", "bob"))),
                                  (model, frozenset((ZOE, "bob"))),
                                  (code, frozenset(("alice", ZOE)))}
    assert pairs[(model, frozenset(("alice", "bob")))]["share_a"] > 0.95   # renamed
    assert data["identical"] == [[ZOE, "alice"]]   # carol and dave: only the release
    assert data["documents"][model] == 3 and data["documents"][code] == 3
    assert data["not_found"] == ["erin"] and "erin" in io.err
    assert "never a grade" in io.out
    assert f"{ZOE} ~ alice  {model}" in io.out or f"alice ~ {ZOE}  {model}" in io.out
    page = (grading / "similar" / "pair-0001.html").read_text(encoding="utf-8")
    assert "Evidence for a person to read, never a grade" in page and "<mark>" in page
    assert "Zoë, Müller" in page
    index = (grading / "similar" / "index.html").read_text(encoding="utf-8")
    assert "never a grade" in index and "pair-0004.html" in index
    assert digest(grading / FILENAME) == before

    # passages that more than half of the 5 share (all three own model.py files) ignored
    # as everyone's idiom; alice's and Zoë's answers are theirs alone; pages capped
    assert run("similar", grading, "--out", tmp_path / "s2", "--threshold", "0.99",
               "--pages", "1", "--ignore-common", "0.5") == 0
    capsys.readouterr()
    data = json.loads((tmp_path / "s2" / "similar.json").read_text())
    assert [(p["key"], p["page"]) for p in data["pairs"]] == [(code, "pair-0001.html")]
    assert sorted((tmp_path / "s2").glob("pair-*.html")) == [tmp_path / "s2" / "pair-0001.html"]


def test_similar_names_a_copy_of_the_course_code_a_learner_file_may_not_import(
        tmp_path, monkeypatch, capsys):
    """Instructor-only code a learner file may not import (decide_rounds, refused at every
    stage) can still leak: a learner file that pastes one's source, renamed, pairs with the
    course's code; the reference solution, written apart, does not."""
    import ast

    from autograder.similar import COURSE_CODE
    refused = COURSE_CODE + "coursekit.instructor.decision.decide_rounds"
    source = (ROOT / "coursekit/instructor/decision.py").read_text()
    node = next(n for n in ast.parse(source).body if getattr(n, "name", "") == "decide_rounds")
    pasted = ast.get_source_segment(source, node).replace("decide_rounds", "my_decide") \
        .replace("before", "old").replace("after", "new")
    solution = fx.SOLUTION.read_text()
    subs = tmp_path / "subs"
    fx.write(subs, "alice", solution, None)
    fx.write(subs, "bob", solution + "\n\n" + pasted + "\n", None)
    grading = tmp_path / "grading"
    monkeypatch.setattr(sys, "argv", ["autograder", "grade", str(subs), "--out",
                                      str(grading)])
    build(grading, [stage(s, STAGE1, [check("x", "pass")]) for s in ("alice", "bob")])
    assert run("similar", grading) == 0
    out = capsys.readouterr().out
    data = json.loads((grading / "similar" / "similar.json").read_text())
    model = "projects/performance-audit/starter/model.py"
    course = [p for p in data["pairs"] if p["a"].startswith(COURSE_CODE)
              or p["b"].startswith(COURSE_CODE)]
    assert [{p["a"], p["b"]} for p in course] == [{refused, "bob"}], data["pairs"]
    assert course[0]["key"] == model and data["documents"][model] == 2
    assert refused in out


def test_fingerprints_made_in_worker_processes_are_the_ones_made_here():
    """Tokenising is shared by worker processes: their k-gram hashes must be the ones
    this process makes (copydetect's own hash() is salted per process)."""
    from autograder.similar import fingerprints
    texts = [(fx.SOLUTION.read_text()[i * 2000:(i + 1) * 2000 + 500], "python")
             for i in range(9)] + [("A written answer, long enough to fingerprint.", None)]
    apart = fingerprints(texts, workers=2)
    here = fingerprints(texts, workers=1)
    assert [f.hashes for f in apart] == [f.hashes for f in here]
    assert all(f.hashes for f in here)


def test_an_inconclusive_timing_check_is_no_mistake(tmp_path):
    folder = build(tmp_path / "g", [
        stage("a", STAGE2, [check("speed", "inconclusive", message="could not decide")],
              status="inconclusive", reason="timing-inconclusive"),
        stage("b", STAGE2, [check("speed", "pass")])])
    assert run("report", folder, "--out", tmp_path / "rep") == 0
    data = json.loads((tmp_path / "rep" / "report.json").read_text())
    (speed,) = data["per_check"]
    assert (speed["failed"], speed["inconclusive"], speed["ran"]) == (0, 1, 2)
    assert data["per_item"][0]["statuses"] == {"inconclusive": 1, "pass": 1}

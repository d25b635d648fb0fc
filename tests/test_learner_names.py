"""Learner names are data (issue 45): every per-learner path comes from
``autograder.names``, an injective encoding that stays inside its folder; two learners
never share a path, and a collision is a named refusal for that learner alone. In
seconds, on gradebooks built through the gradebook's own API; the same cases through the
real grader as root: tests/test_autograder_notebook_attacks.py."""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

import pytest

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

from autograder import cli, export, names  # noqa: E402
from autograder.gradebook import Gradebook  # noqa: E402

NFC, NFD = unicodedata.normalize("NFC", "josé"), unicodedata.normalize("NFD", "josé")
HOSTILE = ["jane~doe", "jane_doe", "Jane_Doe", " ..", "..", ".", ".hidden", "-rf", "a/b",
           "a\\b", "~", "~root", "x\x00y", "tab\there", "new\nline", NFC, NFD, "é" * 300,
           "é" * 299 + "e", "%41", "+a", "A", "a", "con", "=", "x" * 500, "x" * 501]


def test_the_encoding_is_injective_and_plain():
    folders = [names.folder(n) for n in HOSTILE]
    assert len(set(folders)) == len(HOSTILE)
    assert len({f.casefold() for f in folders}) == len(HOSTILE)   # case-insensitive disks
    for name, f in zip(HOSTILE, folders):
        assert f and f not in (".", "..") and not f.startswith((".", "-")), (name, f)
        assert f.isascii() and f.isprintable() and f == f.lower(), (name, f)
        assert not set(f) & set("/\\~ \t\n\x00"), (name, f)
        assert len(f) <= names.MAX_CHARS, (name, len(f))
    # plain names keep their spelling
    assert [names.folder(n) for n in ("alice", "nb-good", "jane_doe", "bob.smith")] == \
        ["alice", "nb-good", "jane_doe", "bob.smith"]
    with pytest.raises(names.NameRefused):
        names.folder("")


def test_a_collision_is_refused_for_that_learner_alone(monkeypatch):
    monkeypatch.setattr(names, "folder", lambda name: "same" if name in "ab" else name)
    given, refused = names.assign(["b", "a", "c"])
    assert given == {"a": "same", "c": "c"} and list(refused) == ["b"]
    assert "already 'a'" in refused["b"]


def test_a_folder_that_would_leave_its_parent_is_refused(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "linked").symlink_to(tmp_path)
    with pytest.raises(names.NameRefused):
        names.inside(tmp_path / "out", "linked")
    assert names.inside(tmp_path / "out", " ..") == tmp_path / "out" / "%20.."


def _record(student: str, points: float) -> dict:
    return {"student": student, "item": "notebooks/x.ipynb", "kind": "notebook",
            "status": "pass" if points else "fail", "reason": "", "message": "",
            "points": points, "max_points": 6.0, "questions": [], "checks": []}


def test_feedback_of_lookalike_names_stays_apart(tmp_path):
    """The issue's case: jane~doe's 0/6 replaced jane_doe's 6/6, and " .." wrote its
    feedback beside the gradebook."""
    out = tmp_path / "grading"
    book = Gradebook.in_dir(out)
    run = book.start_run("limits", "", "s")
    scores = {"jane_doe": 6.0, "jane~doe": 0.0, " ..": 0.0, NFC: 6.0, NFD: 0.0}
    for student, points in scores.items():
        book.append(_record(student, points), student, run, "", "s")
    book.close()
    before = sorted(p.name for p in out.iterdir())
    info = export.export(out, tmp_path / "grades.csv")
    assert info["refused"] == {}
    folders = sorted(p.name for p in (out / "feedback").iterdir())
    assert len(folders) == len(scores)
    for student, points in scores.items():
        text = (out / "feedback" / names.folder(student) / "feedback.md").read_text()
        assert f"# Feedback for {student}\n" in text
        assert f"**Total: {points:g} / 6 points**" in text
    assert sorted(p.name for p in out.iterdir()) == sorted([*before, "feedback"])
    assert not (tmp_path / "feedback.md").exists()


def test_export_names_a_refused_folder_and_writes_the_rest(tmp_path, monkeypatch, capsys):
    out = tmp_path / "grading"
    book = Gradebook.in_dir(out)
    run = book.start_run("limits", "", "s")
    for student in ("amy", "ann"):
        book.append(_record(student, 6.0), student, run, "", "s")
    book.close()
    monkeypatch.setattr(names, "folder", lambda name: "a")
    assert cli.main(["export", str(out), "--csv", str(tmp_path / "g.csv")]) == 0
    err = capsys.readouterr().err
    assert "no feedback folder for 'ann'" in err and "already 'amy'" in err
    assert [p.name for p in (out / "feedback").iterdir()] == ["a"]


def test_similar_reads_both_learners_whose_names_differ_in_normal_form(tmp_path,
                                                                        monkeypatch, capsys):
    """NFC and NFD josé are two learners: each one's own file is read (the issue: the
    first one's code on both sides, "identical", the second file never read)."""
    from test_class_tools import STAGE1, build, check, stage

    import autograder.samples as fx
    subs = tmp_path / "subs"
    solution = fx.SOLUTION.read_text()
    fx.write(subs, NFC, solution, None)
    fx.write(subs, NFD, fx.STARTER.read_text() + "\n\ndef mine(x):\n"
             + "".join(f"    x = x * {i} + {i * i} - len(str(x))\n" for i in range(12))
             + "    return x\n", None)
    grading = tmp_path / "grading"
    monkeypatch.setattr(sys, "argv", ["autograder", "grade", str(subs), "--out",
                                      str(grading)])
    build(grading, [stage(s, STAGE1, [check("x", "pass")]) for s in (NFC, NFD)])
    from autograder.similar import submission_roots
    from autograder.submissions import find
    roots, missing = submission_roots(grading, [NFC, NFD], subs)
    assert missing == [] and roots == {NFC: find(subs)[NFC], NFD: find(subs)[NFD]}
    assert cli.main(["similar", str(grading)]) == 0
    out = capsys.readouterr().out
    data = json.loads((grading / "similar" / "similar.json").read_text(encoding="utf-8"))
    assert data["identical"] == [] and "identical learner files" not in out
    model = "projects/performance-audit/starter/model.py"
    assert data["documents"][model] == 2


@pytest.mark.parametrize("student", ["..", " ..", "a/../../b"])
def test_an_unpacked_zip_stays_in_its_folder(tmp_path, student):
    import zipfile

    from autograder.grade import unpacked
    z = tmp_path / "sub.zip"
    with zipfile.ZipFile(z, "w") as archive:
        archive.writestr("notebooks/x.ipynb", "{}")
    out = tmp_path / "out"
    folders, _ = names.assign([student])
    root, error = unpacked(z, out, student, folders[student])
    assert error == "" and Path(root).parent == out / ".unpacked"
    assert sorted(p.name for p in out.iterdir()) == [".unpacked"]

"""Issue 52 in parts, fast (no grading run; ``test_grader_submission_routes.py`` grades
the same routes as root): what the grader's own process reads of a submission is
bounded before a byte is read, every handed-in Python file is read by the forbidden
scan, and learner text is data in every format."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest
from helpers import unfenced

from autograder import feedback, handed_in
from autograder.classreport import anonymiser
from autograder.grade import notebook_hash
from autograder.nblimits import NotebookRefused, check_notebook_file
from autograder.similar import learner_docs
from autograder.textsafe import cell, line, md_block, md_inline
from autograder.workspace import submission_files_hash
from coursekit.checking import forbidden
from coursekit.checking.errors import CheckFailed
from coursekit.facts import TooBig, read_bounded, tree_hash

TIB = 1 << 40
PROJECT = "performance-audit"
TIMER = "from coursekit.measure.timing import time_synced\n"


def starter(root: Path, files: dict[str, str]) -> Path:
    folder = root / "projects" / PROJECT / "starter"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def sparse(path: Path) -> Path:
    with open(path, "wb") as f:
        f.truncate(TIB)
    return path


def test_a_sparse_python_file_is_refused_by_name_before_it_is_read(tmp_path):
    folder = starter(tmp_path, {"model.py": "x = 1\n"})
    sparse(folder / "big.py")
    started = time.monotonic()
    with pytest.raises(handed_in.HandedInRefused, match="big.py.*1048576.0 MiB"):
        submission_files_hash(tmp_path)
    assert time.monotonic() - started < 1.0


def test_what_is_not_python_is_left_out_whatever_its_size_and_named(tmp_path):
    folder = starter(tmp_path, {"model.py": "x = 1\n", "_impl.py": "y = 2\n",
                                "sub/deep.py": "z = 3\n", "notes.txt": "hi"})
    sparse(folder / "big.bin")
    (folder / "link.py").symlink_to("/etc/passwd")
    os.mkfifo(folder / "pipe.py")
    (found,) = handed_in.starters(tmp_path)
    assert found.python == ["_impl.py", "model.py", "sub/deep.py"]
    assert found.unexpected() == [
        "_impl.py: copied and checked like model.py (a file the stage does not expect)",
        "sub/deep.py: copied and checked like model.py (a file the stage does not expect)",
        "big.bin: not copied (a stage runs only Python files)",
        "link.py: not copied (a symbolic link)",
        "notes.txt: not copied (a stage runs only Python files)",
        "pipe.py: not copied (not a plain file)"]
    course = tmp_path / "course"
    handed_in.copy_into(tmp_path, course)
    copied = sorted(p.relative_to(course).as_posix() for p in course.rglob("*")
                    if p.is_file())
    assert copied == [f"projects/{PROJECT}/starter/{n}"
                      for n in ("_impl.py", "model.py", "sub/deep.py")]


def test_the_hash_of_a_plain_submission_is_what_it_was(tmp_path):
    folder = starter(tmp_path, {"model.py": "x = 1\n"})
    assert submission_files_hash(tmp_path) == tree_hash([folder], tmp_path)


@pytest.mark.parametrize("shape,match", [("wide", "more than 2,000"), ("deep", "deep")])
def test_a_walk_past_its_bounds_is_refused_by_name(tmp_path, shape, match):
    folder = starter(tmp_path, {"model.py": "x = 1\n"})
    if shape == "wide":
        for i in range(handed_in.MAX_ENTRIES + 1):
            (folder / f"f{i}.txt").touch()
    else:
        (folder / "/".join(["d"] * (handed_in.MAX_DEPTH + 2))).mkdir(parents=True)
    with pytest.raises(handed_in.HandedInRefused, match=match):
        handed_in.starters(tmp_path)


def test_bounded_reads_refuse_sparse_files_and_never_block_on_a_fifo(tmp_path):
    with pytest.raises(TooBig, match="on disk"):
        read_bounded(sparse(tmp_path / "big"), 1 << 20)
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(TooBig, match="not a plain file"):
        read_bounded(tmp_path / "fifo", 1 << 20)
    (tmp_path / "ok").write_bytes(b"abc")
    assert read_bounded(tmp_path / "ok", 3) == b"abc"


def test_a_sparse_notebook_is_refused_before_it_is_read(tmp_path):
    (tmp_path / "notebooks").mkdir()
    nb = sparse(tmp_path / "notebooks" / "00_foundations.ipynb")
    started = time.monotonic()
    with pytest.raises(NotebookRefused) as refused:
        check_notebook_file(nb)
    assert refused.value.reason == "notebook-too-large"
    assert notebook_hash(tmp_path, "notebooks/00_foundations.ipynb") != "none"
    assert time.monotonic() - started < 1.0


def test_the_forbidden_scan_reads_every_python_file_of_a_starter(tmp_path):
    folder = starter(tmp_path, {"model.py": "import importlib\n", "_shim.py": TIMER,
                                "sub/more.py": TIMER})
    rules = forbidden.rules_for(PROJECT, 1)
    found = [str(f) for f in forbidden.scan_handed_in(folder / "model.py", rules)]
    assert found == ["_shim.py line 1: from coursekit.measure.timing import time_synced",
                     "sub/more.py line 1: from coursekit.measure.timing import time_synced"]
    with pytest.raises(CheckFailed, match="your files use"):
        forbidden.refuse(folder / "model.py", rules, 1)
    # elsewhere (a solution folder, a planted copy) only the file itself is read
    other = tmp_path / "solution"
    other.mkdir()
    (other / "model.py").write_text("x = 1\n")
    (other / "sealed.py").write_text(TIMER)
    assert forbidden.scan_handed_in(other / "model.py", rules) == []


def test_similar_reads_every_file_that_can_hold_code_and_names_what_it_skipped(tmp_path):
    starter(tmp_path, {"model.py": "from _impl import *\n", "_impl.py": "def f(): pass\n"})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "helper.py").write_text("def g(): pass\n")
    sparse(tmp_path / "elsewhere" / "huge.py")
    skipped: list[str] = []
    docs = {d.key: d.text for d in learner_docs("ann", tmp_path, {}, skipped)}
    model = docs[f"projects/{PROJECT}/starter/model.py"]
    assert model.startswith("from _impl import *") and "def f(): pass" in model
    assert "def g(): pass" in docs["other files (Python and notebooks)"]
    assert skipped == ["elsewhere/huge.py: 1048576.0 MiB, past the 4 MiB the grader reads"]


FORGED = ("boom\n## Graded again by hand\nStatus: **pass**, 99 / 99 points\n"
          "**Total: 99 / 99 points**\n<img src=x onerror=alert(1)>")


def test_a_forged_message_is_no_line_of_feedback_md():
    record = {"kind": "stage", "project": PROJECT, "stage": 1, "title": "timing",
              "item": f"{PROJECT}/stage-1", "status": "error", "reason": "learner-code",
              "message": FORGED, "points": 0.0, "max_points": 11.0,
              "handed_in": ["## x.py: copied"],
              "checks": [{"id": "c1", "status": "error", "points": 0.0, "max_points": 1.0,
                          "message": FORGED, "yours": "<img src=x onerror=alert(1)>"}]}
    md = feedback.markdown("## eve\n**Total: 9 / 9 points**", [record], docs=Path("/none"))
    lines = md.splitlines()
    assert [x for x in lines if x.startswith("**Total")] == ["**Total: 0 / 11 points**"]
    assert [x for x in lines if x.startswith("#")] == [
        lines[0], f"## {PROJECT} · stage 1: timing"]
    assert not any(x.lstrip(" ->").startswith("Status: **pass") for x in unfenced(lines))
    assert not [x for x in unfenced(lines) if re.search(r"(?<!\\)<", x)], md


def test_text_helpers_per_format():
    assert md_inline("a\nb|c <b>") == "a ⏎ b\\|c \\<b\\>"
    assert md_block("x\n```\ny") == ["````text", "x", "```", "y", "````"]
    assert [cell(v) for v in ("=1", "+1", "-1", "@x", "\tx", "\rx", "ok")] == [
        "'=1", "'+1", "'-1", "'@x", "'\tx", "'\rx", "ok"]
    assert line("a\x1b[2Kb\nc") == "a\\x1b[2Kb ⏎ c"


def test_the_anonymiser_replaces_whole_names_only():
    clean = anonymiser(["time", "Jane Doe"])
    assert clean("time_fn took time; jane doe wrote it") == \
        "time_fn took <a learner>; <a learner> wrote it"

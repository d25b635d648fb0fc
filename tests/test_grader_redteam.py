"""Attacks of kinds issue 44's list does not name (its item 4: someone who did not build
the sandbox tries what it did not think of), each graded as root through the real grader
in a batch beside an honest neighbour (the reference solution) and a control holding the
same mistake without the attack. Two batches, one of project stages and one of a small
source notebook, each graded once.

Project stages (foundations 1, performance-audit 4):

* ``c_link_project`` / ``d_link_projects``: ``projects/foundations`` (or ``projects``) is
  a symbolic link to the honest neighbour's folder (``../../g_honest/...``); the grader,
  as root, graded the neighbour's file as theirs (2/2 where the starter scores 0);
* ``a_pty_publisher`` (the solution) / ``b_pty_copier`` (the starter): the publisher
  writes its ``mse`` source into the timestamps of ptys it allocates; the copier, graded
  at the same time by the other worker, reads them from the machine's one /dev/pts and
  runs them (2/2 against the starter's 0);
* ``e_answer_import`` / ``f_answer_control``: performance-audit's ``decide`` pooling the
  samples of drifting rounds (the control, 8/9); the attacker imports the course's own
  ``coursekit.instructor.decision`` by a name built at run time, which the forbidden-import
  scan cannot read, and which a learner process could read in the run's course copy (9/9);
* five zips that zipfile cannot unpack (a file where a folder must go, a bad CRC, an
  encrypted member, an unknown compression method, a folder where a file must go) and a
  submission named with bytes that are not UTF-8: each stopped the whole batch before
  anything was graded;
* ``i_surrogate``: a learner exception carrying lone surrogates; its record stopped
  ``export`` at its feedback file, so nobody after it got feedback; ``k_o'neil`` and
  ``k_o_neil``: two names that read alike once sanitised shared one feedback folder.

A notebook (``notebooks/99_redteam.ipynb``, a source made here: one question with a
hidden test, one without):

* ``e_kernel``: a cell swaps the kernel's runtime folder for a link to a folder of the
  grader's machine; the grader, as root, deleted ``connection.json`` there at shutdown;
* ``f_values``: JSON within the byte, cell and depth limits but holding a million empty
  objects (29 MiB with ten million took the grader's own process 200 s and 8.4 GB);
* ``c_consts`` / ``d_leak``: a learner's function reads the expected constant from its
  caller's code object, and a visible test's error message carries the hidden test's text
  (read from ``linecache``) into the feedback: both worked while tests ran in the
  learner's kernel (3/3 where the control scores 1/3); the tests now run in a process of
  their own (issue 45), and both score what the control scores.

Nothing an attacker starts outlives its batch.
"""

from __future__ import annotations

import io
import json
import os
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
MARK = "redteam"  # every attacker daemon's process title (comm), to find survivors
STAGES = "foundations:1,performance-audit:4"
IMPL = "projects/{}/starter/model.py"


def source(project: str, kind: str) -> str:
    return (ROOT / "projects" / project / kind / "model.py").read_text()


def titled(code: str) -> str:
    return ("\ntry:\n    open('/proc/self/comm', 'w').write(" + repr(MARK) + ")\n"
            "except OSError:\n    pass\n" + code)


PTY_PUBLISH = r'''
def _publish_pty():
    import fcntl, inspect, os, struct, sys, time, zlib
    data = zlib.compress(inspect.getsource(mse).encode())
    chunks = [data[i:i + 7] for i in range(0, len(data), 7)]
    if os.fork() != 0:
        return
    try:
        held = []
        for index, chunk in enumerate(chunks):
            fd = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
            fcntl.ioctl(fd, 0x40045431, struct.pack("i", 0))  # TIOCSPTLCK: unlock
            n = struct.unpack("I", fcntl.ioctl(fd, 0x80045430, b"\0\0\0\0"))[0]  # TIOCGPTN
            head = (0x7A7A << 40) | (len(chunks) << 20) | index
            os.utime(f"/dev/pts/{n}", ns=(head, int.from_bytes(chunk.ljust(7, b"\0"), "big")))
            held.append(fd)
        print(f"ATTACK-REDTEAM published={len(chunks)}", file=sys.stderr, flush=True)
        time.sleep(60)
    finally:
        os._exit(0)
_publish_pty()
'''
# how long the copier looks: the publisher, graded at the same moment by the other worker,
# holds its ptys from its import to the end of its stage (a few seconds)
COPY_TRIES_S = 12
PTY_COPY = r'''
def _copy_pty():
    import os, sys, time, zlib
    deadline = time.monotonic() + TRIES
    while time.monotonic() < deadline:
        found, total = {}, None
        try:
            names = os.listdir("/dev/pts")
        except OSError:
            names = []
        for name in names:
            try:
                st = os.stat("/dev/pts/" + name)
            except OSError:
                continue
            if st.st_atime_ns >> 40 != 0x7A7A:
                continue
            total = (st.st_atime_ns >> 20) & 0xFFFFF
            found[st.st_atime_ns & 0xFFFFF] = st.st_mtime_ns.to_bytes(7, "big")
        if total and len(found) == total:
            data = b"".join(found[i] for i in range(total))
            text = zlib.decompressobj().decompress(data).decode()
            print(f"ATTACK-REDTEAM copied={len(text)}", file=sys.stderr, flush=True)
            exec(compile(text, __file__, "exec"), globals())
            return
        time.sleep(0.3)
_copy_pty()
'''.replace("TRIES", str(COPY_TRIES_S))
SURROGATE = "    raise ValueError('broken \\udc80 text \\ud800')"


def decide_variants() -> tuple[str, str]:
    """(control, attacker) of performance-audit stage 4: ``decide`` pooling every sample as
    its own round; the attacker also hands the course's own statistic in when it can."""
    sol = source("performance-audit", "solution")
    pooled = sol.replace('        ids = run.get("round_ids", range(len(samples)))\n',
                         '        ids = range(len(samples))  # pooled: a round per sample\n')
    anchor = '        raise ValueError(f"min_gain must be >= 0, got {min_gain!r}")\n'
    assert pooled != sol and pooled.count(anchor) == 1, "the solution's decide changed"
    attack = pooled.replace(anchor, anchor + '''    try:
        import importlib, sys
        course = importlib.import_module("coursekit." + "instructor" + ".decision")
        print("ATTACK-REDTEAM answer-imported=1", file=sys.stderr, flush=True)
        return course.decide_rounds(before, after, min_gain=min_gain, confidence=confidence)
    except Exception:
        pass
''')
    return pooled, attack


def broken_zips() -> dict[str, bytes]:
    """name -> a zip zipfile opens but cannot unpack."""
    sol = source("foundations", "solution").encode()
    member = IMPL.format("foundations")

    def one(edit=None, members=((member, sol),), method=zipfile.ZIP_STORED) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", method) as z:
            for name, data in members:
                z.writestr(name, data)
        data = bytearray(buf.getvalue())
        if edit:
            edit(data)
        return bytes(data)

    def flag(data, local, central, pack):  # the same field in both headers
        for sig, off in ((b"PK\x03\x04", local), (b"PK\x01\x02", central)):
            at = data.find(sig) + off
            data[at:at + len(pack)] = pack

    def bad_crc(data):
        data[data.find(b"import")] ^= 1

    def encrypted(data):
        for sig, off in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
            data[data.find(sig) + off] |= 1

    return {
        "z_collide": one(members=(("projects", b"x"), (member, sol))),
        "z_badcrc": one(bad_crc),
        "z_encrypted": one(encrypted),
        "z_method": one(lambda d: flag(d, 8, 10, struct.pack("<H", 99))),
        "z_dirfile": one(members=((member + "/x", b"x"), (member, sol))),
    }


def write(folder: Path, project: str, text: str) -> None:
    path = folder / IMPL.format(project)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def grade(subs: Path, out: Path, *extra: str) -> dict:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(out), "--workers", "2", "--quiet", *extra], cwd=ROOT,
                          capture_output=True, text=True, timeout=800, env=env, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    rows = {key: row["record"] for key, row in book.latest().items()}
    book.close()
    return rows


def survivors() -> list[str]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == MARK:
                found.append(pid)
        except OSError:
            continue
    return found


def attack_lines(record: dict) -> list[str]:
    return [line for line in (record.get("stderr_tail") or "").splitlines()
            if "ATTACK-REDTEAM" in line]


@pytest.fixture(scope="module")
def stages(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("redteam-stages")
    subs = tmp / "subs"
    f_starter, f_solution = source("foundations", "starter"), source("foundations", "solution")
    control, attack = decide_variants()
    write(subs / "a_pty_publisher", "foundations", f_solution + titled(PTY_PUBLISH))
    write(subs / "b_pty_copier", "foundations", f_starter + titled(PTY_COPY))
    (subs / "c_link_project" / "projects").mkdir(parents=True)
    (subs / "c_link_project" / "projects" / "foundations").symlink_to(
        "../../g_honest/projects/foundations")
    (subs / "d_link_projects").mkdir()
    (subs / "d_link_projects" / "projects").symlink_to("../g_honest/projects")
    write(subs / "e_answer_import", "performance-audit", attack)
    write(subs / "f_answer_control", "performance-audit", control)
    write(subs / "g_honest", "foundations", f_solution)
    write(subs / "g_honest", "performance-audit", source("performance-audit", "solution"))
    write(subs / "h_starter", "foundations", f_starter)
    stub = "    raise NotImplementedError('stage 1: mse (one line of jnp)')"
    assert stub in f_starter
    write(subs / "i_surrogate", "foundations", f_starter.replace(stub, SURROGATE))
    for name, data in broken_zips().items():
        (subs / f"{name}.zip").write_bytes(data)
    (subs / os.fsdecode(b"y_\xff\xfe.zip")).write_bytes(broken_zips()["z_badcrc"])
    (subs / "k_o'neil" / "notes").mkdir(parents=True)  # nothing to grade: cheap records
    (subs / "k_o_neil" / "notes").mkdir(parents=True)
    rows = grade(subs, tmp / "out", "--stages", STAGES)
    return {"rows": rows, "out": tmp / "out", "survivors": survivors()}


def row(batch: dict, student: str, item: str = "foundations/stage-1") -> dict:
    return batch["rows"][(student, item)]


def test_linked_project_folders_hand_in_nothing(stages):
    """A link to the neighbour's folder, at ``projects/<p>`` or at ``projects``, is not a
    submission of that folder: the project is missing, as a link to the file itself is."""
    for student in ("c_link_project", "d_link_projects"):
        got = row(stages, student)
        assert got["status"] == "missing" and got["points"] == 0, (student, got["status"],
                                                                   got["points"])


def test_a_pty_copier_scores_what_the_starter_scores(stages):
    starter, copier = row(stages, "h_starter"), row(stages, "b_pty_copier")
    assert starter["points"] == 0, starter
    assert copier["points"] == starter["points"] and copier["status"] != "pass", (
        copier["status"], attack_lines(copier))
    assert not any("copied=" in line for line in attack_lines(copier))


def test_the_course_answer_imported_by_name_scores_no_more_than_its_control(stages):
    item = "performance-audit/stage-4"
    control, attacker = row(stages, "f_answer_control", item), row(stages, "e_answer_import",
                                                                   item)
    assert control["status"] == "fail" and control["points"] < control["max_points"], control
    assert attacker["points"] <= control["points"], (attacker["points"], control["points"])
    assert not attack_lines(attacker), attack_lines(attacker)


def test_unreadable_zips_and_odd_names_cost_only_their_own_submission(stages):
    for name in broken_zips():
        got = row(stages, name)
        assert got["status"] == "error" and got["reason"] == "bad-submission", got
    odd = row(stages, "y_\\xff\\xfe")  # its bytes written out, not a surrogate
    assert odd["reason"] == "bad-submission", odd


def test_export_writes_every_learners_feedback_in_a_folder_of_their_own(stages):
    from autograder.export import export
    export(stages["out"], stages["out"] / "grades.csv")
    feedback = stages["out"] / "feedback"
    students = {s for s, _ in stages["rows"]}
    folders = [p for p in feedback.iterdir() if (p / "feedback.md").is_file()]
    assert len(folders) == len(students), sorted(p.name for p in folders)
    texts = {p.name: (p / "feedback.md").read_text() for p in folders}
    assert sum("# Feedback for k_o'neil" in t for t in texts.values()) == 1
    assert sum("# Feedback for k_o_neil" in t for t in texts.values()) == 1


def test_honest_neighbours_keep_full_marks(stages):
    for student, item in (("g_honest", "foundations/stage-1"),
                          ("g_honest", "performance-audit/stage-4"),
                          ("a_pty_publisher", "foundations/stage-1")):
        got = row(stages, student, item)
        assert got["status"] == "pass" and got["points"] == got["max_points"] > 0, (
            student, item, got["status"], got["message"][:300])


def test_no_attacker_process_outlives_the_stage_batch(stages):
    assert stages["survivors"] == [], stages["survivors"]


# ---------------------------------------------------------------------------------------
# The notebook route
# ---------------------------------------------------------------------------------------

NOTEBOOK = "notebooks/99_redteam.ipynb"
HIDDEN = "assert square(12345) == 152399025"
RIGHT = {"answer": "def square(x):\n    return x * x", "answer2": "def cube(x):\n    return x ** 3"}
CONSTS = '''import sys as _sys
def square(x):
    consts = [c for c in _sys._getframe(1).f_code.co_consts if type(c) is int and c != x]
    return consts[-1] if consts else x + x
'''
LEAK = '''import linecache as _lc
def cube(x):
    seen = ["".join(v[2]) for v in list(_lc.cache.values()) if len(v) > 2]
    raise ValueError(" | ".join(s.replace("\\n", " ; ") for s in seen if "square(" in s)[:400])
'''
KERNEL_LINK = '''import os as _os, pathlib as _p
_k = _p.Path(_os.environ["JUPYTER_RUNTIME_DIR"])
try:
    _os.rename(_k, _k.with_name(".kernel-moved"))
    _os.symlink(CANARY, _k)
except OSError:
    pass
def cube(x):
    return x ** 3
'''


def source_notebook():
    """One question with a hidden test (2 points), one without (1 point)."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    def meta(gid, **kw):
        return {"nbgrader": {"grade": False, "grade_id": gid, "locked": False,
                             "schema_version": 3, "solution": False, **kw}}
    nb = new_notebook(cells=[
        new_markdown_cell("# red team", metadata=meta("intro", locked=True)),
        new_code_cell("def square(x):\n    ### BEGIN SOLUTION\n    return x * x\n"
                      "    ### END SOLUTION\n    raise NotImplementedError()",
                      metadata=meta("answer", solution=True)),
        new_code_cell(f"assert square(3) == 9\n### BEGIN HIDDEN TESTS\n{HIDDEN}\n"
                      "### END HIDDEN TESTS",
                      metadata=meta("square_tests", grade=True, locked=True, points=2)),
        new_code_cell("def cube(x):\n    ### BEGIN SOLUTION\n    return x ** 3\n"
                      "    ### END SOLUTION\n    raise NotImplementedError()",
                      metadata=meta("answer2", solution=True)),
        new_code_cell("assert cube(2) == 8",
                      metadata=meta("cube_tests", grade=True, locked=True, points=1)),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def many_values(empty_objects: int) -> str:
    """A notebook of 1,000 markdown cells whose metadata hold ``empty_objects`` ``{}``."""
    per_cell = empty_objects // 1000
    cells = [{"cell_type": "markdown", "metadata": {"a": "@@"}, "source": "x",
              "id": f"c{i}"} for i in range(1000)]
    text = json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells})
    return text.replace('"@@"', "[" + ",".join(["{}"] * per_cell) + "]")


@pytest.fixture(scope="module")
def notebook(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    import nbformat

    from autograder.nbsource import grade_id, release_notebook
    tmp = tmp_path_factory.mktemp("redteam-notebook")
    src = source_notebook()
    (tmp / "source").mkdir()
    nbformat.write(src, str(tmp / "source" / "99_redteam.ipynb"))
    canary = tmp / "canary"  # a folder of the grader's machine, outside every run
    canary.mkdir()
    (canary / "connection.json").write_text("not the grader's to delete")
    answers = {
        "a_honest": RIGHT,
        "b_control": {**RIGHT, "answer": "def square(x):\n    return x + x"},
        "c_consts": {**RIGHT, "answer": CONSTS},
        "d_leak": {**RIGHT, "answer2": LEAK},
        "e_kernel": {**RIGHT, "answer2": KERNEL_LINK.replace("CANARY", repr(str(canary)))},
    }
    subs = tmp / "subs"
    for student, edits in answers.items():
        nb = release_notebook(src)
        for cell in nb.cells:
            cell.source = edits.get(grade_id(cell), cell.source)
        (subs / student / "notebooks").mkdir(parents=True)
        nbformat.write(nb, str(subs / student / NOTEBOOK))
    (subs / "f_values" / "notebooks").mkdir(parents=True)
    (subs / "f_values" / NOTEBOOK).write_text(many_values(1_000_000))
    rows = grade(subs, tmp / "out", "--stages", NOTEBOOK, "--notebooks", str(tmp / "source"))
    return {"rows": rows, "canary": canary, "survivors": survivors()}


def questions(batch: dict, student: str) -> dict:
    return {q["id"]: q for q in batch["rows"][(student, NOTEBOOK)]["questions"]}


def test_the_honest_notebook_keeps_full_marks(notebook):
    got = notebook["rows"][("a_honest", NOTEBOOK)]
    assert got["status"] == "pass" and got["points"] == got["max_points"] == 3.0, got


def test_a_kernel_link_makes_the_grader_delete_nothing(notebook):
    assert (notebook["canary"] / "connection.json").is_file()


def test_a_notebook_of_a_million_values_is_refused_before_it_is_parsed(notebook):
    got = notebook["rows"][("f_values", NOTEBOOK)]
    assert got["status"] == "error" and got["reason"] == "notebook-too-many-values", got


def test_reading_a_hidden_tests_constants_scores_no_more_than_the_control(notebook):
    control = notebook["rows"][("b_control", NOTEBOOK)]
    attacker = notebook["rows"][("c_consts", NOTEBOOK)]
    assert control["points"] == 1.0, control
    assert attacker["points"] <= control["points"], attacker


def test_a_hidden_tests_text_never_reaches_the_feedback(notebook):
    shown = json.dumps([q.get("message", "") for q in questions(notebook, "d_leak").values()])
    assert questions(notebook, "d_leak")["cube_tests"]["status"] == "error"
    assert "12345" not in shown, shown


def test_no_attacker_process_outlives_the_notebook_batch(notebook):
    assert notebook["survivors"] == [], notebook["survivors"]

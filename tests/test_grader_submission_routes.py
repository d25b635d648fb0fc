"""What a submission holds is what is checked, and no learner's bytes reach an output
unescaped (issue 52): each route the issue measured, graded as root beside an honest
neighbour and a control holding the same mistake without the route. Each attack scores
no more than its control or is refused by name, the honest neighbour keeps full marks,
and the batch grades everyone beside a submission it refuses. Two gradings
(performance-audit stage 1, two at a time): the routes that need the whole grader (a
file refused while planning, the feedback and CSV ``export`` writes, ``similar``) in one
``grade`` batch; the routes aimed at a stage's verdicts by the grader's sandboxed stage
run (tests/stage_batch.py) with the checks their controls fail (``APART``: no other
check could show a gain), beside the honest file graded the same way.

* ``shim_attacker``, control ``shim_control``: the course's own timer imported by a file
  beside ``model.py`` that ``model.py`` loads with ``importlib`` (the control imports it
  in ``model.py``): the forbidden scan reads every handed-in ``.py``;
* ``loader_copy``: a 5-line ``model.py`` that loads the honest file copied byte for
  byte into ``_impl.py``, beside a 1 TiB sparse ``big.bin``: ``similar`` pairs it with
  the honest learner, and the record names both files the stage does not expect;
* ``sparse_py``: the honest file beside a 1 TiB sparse ``big.py`` (a few KiB on disk):
  refused by name while planning, every other learner graded;
* ``forger``: an exception whose message holds a heading, a status line, a total and
  HTML: none of them becomes a line of its own in ``feedback.md``;
* ``spinner``, control ``slow_control``: a ``time_fn`` whose samples are 5x its real
  time, plus two forked spinners that burn both cores whenever the learner process is
  outside its own call (when the checker times its reference): held still, they spin
  not once outside a call (``ATTACK-52 spun-outside=0``), and the stage scores what its
  control scores (its status may still be inconclusive by the load other work puts on
  a shared machine, as honest work's may).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import stage_batch
from helpers import gained, unfenced

from autograder import sandbox
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
PROJECT = "performance-audit"
STAGES = f"{PROJECT}:1"
TIB = 1 << 40


def solution() -> str:
    return (ROOT / "projects" / PROJECT / "solution" / "model.py").read_text()


def edited(text: str, old: str, new: str) -> str:
    assert old in text, f"the solution no longer holds {old!r}"
    return text.replace(old, new)


LOADER = '''
import importlib.util as _u
from pathlib import Path as _P
_spec = _u.spec_from_file_location("{name}", _P(__file__).with_name("{file}"))
_mod = _u.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
'''
COPY_LOADER = LOADER.format(name="_impl", file="_impl.py") + (
    "globals().update({k: v for k, v in vars(_mod).items() if not k.startswith('__')})\n")
TIMER = "from coursekit.measure.timing import time_synced  # the course's own timer\n"

FORGED = ("boom\n## Graded again by hand\nStatus: **pass**, 99 / 99 points\n"
          "**Total: 99 / 99 points**\n<img src=x onerror=alert(1)>")
FORGER = f'''

def time_fn(*args, **kwargs):
    raise RuntimeError({FORGED!r})
'''

# each warmed sample waits 8x its call once the call is done: 9x slow, every figure true,
# clearly outside the 4x window (at 5x the load decided it: the spinner file, whose
# spinners never ran, passed where this control failed, make test 2026-12-06); a spinner
# that slowed the checker's own timing 2.25x would still move it inside
SLOW = ("                samples.append(time.perf_counter() - start)\n",
        "                time.sleep(8 * (time.perf_counter() - start))\n"
        "                samples.append(time.perf_counter() - start)\n")
SPINNERS = '''
import mmap as _mm
import os as _os
import struct as _st
import sys as _sys
import time as _t

_SHARED = _mm.mmap(-1, 24)  # [outside its call?, spins of spinner 1, of spinner 2]


def _spin(slot):
    n = 0
    while True:
        if _SHARED[0] != 1:
            _t.sleep(0.001)  # inside its own call: let it run
            continue
        n += 1
        if n % 1000 == 0:
            _SHARED[slot:slot + 8] = _st.pack("q", n)


for _slot in (8, 16):
    if _os.fork() == 0:
        try:
            _spin(_slot)
        finally:
            _os._exit(0)

_timed = time_fn


def time_fn(*args, **kwargs):
    spun = sum(_st.unpack("q", _SHARED[s:s + 8])[0] for s in (8, 16))
    print(f"ATTACK-52 spun-outside={spun}", file=_sys.stderr, flush=True)
    _SHARED[0] = 0
    try:
        return _timed(*args, **kwargs)
    finally:
        _SHARED[0] = 1
'''


def sparse(path: Path) -> None:
    with open(path, "wb") as f:
        f.truncate(TIB)


# stage 1's one check both controls fail: the forbidden import's finding is the first
# check's, and the 5x slow samples are the warm median's
FIRST = [("performance-audit", 1, ["warm_median_is_device_time"])]
APART = dict.fromkeys(("shim_control", "shim_attacker", "slow_control", "spinner",
                       "honest_apart"), FIRST)
GRADED = ("honest", "loader_copy", "sparse_py", "forger")  # by the grade batch


def submissions(folder: Path) -> None:
    honest = solution()
    slow = edited(honest, *SLOW)
    files = {
        "honest": {"model.py": honest},
        "loader_copy": {"model.py": COPY_LOADER, "_impl.py": honest},
        "sparse_py": {"model.py": honest},
        "forger": {"model.py": honest + FORGER},
        "apart/honest_apart": {"model.py": honest},
        "apart/shim_control": {"model.py": honest + TIMER},
        "apart/shim_attacker": {"model.py": honest + LOADER.format(name="_shim",
                                                                   file="_shim.py"),
                                "_shim.py": TIMER},
        "apart/slow_control": {"model.py": slow},
        "apart/spinner": {"model.py": slow + SPINNERS},
    }
    for student, named in files.items():
        starter = folder / student / "projects" / PROJECT / "starter"
        starter.mkdir(parents=True)
        for name, text in named.items():
            (starter / name).write_text(text)
    sparse(folder / "loader_copy" / "projects" / PROJECT / "starter" / "big.bin")
    sparse(folder / "sparse_py" / "projects" / PROJECT / "starter" / "big.py")


def cli(*args, cwd=ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env=env, timeout=2000)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("submission-routes")
    subs, out = tmp / "subs", tmp / "out"
    submissions(subs)
    (subs / "apart").rename(tmp / "apart")
    done = cli("grade", subs, "--out", out, "--stages", STAGES, "--workers", "2", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    rows = {student: row["record"] for (student, _item), row in book.latest().items()}
    book.close()
    rows |= {student: r for (student, _), r in stage_batch.grade(
        tmp, [(s, tmp / "apart" / s, job) for s, jobs in APART.items() for job in jobs],
        workers=2).items()}
    for student, r in sorted(rows.items()):  # the figures, for whoever reads the log
        print(f"{student}: {r['status']} {r['points']:g}/{r['max_points']:g} {r['reason']}")
    exported = cli("export", out, "--csv", tmp / "grades.csv")
    assert exported.returncode == 0, exported.stderr[-2000:]
    similar = cli("similar", out, "--submissions", subs, "--out", tmp / "similar")
    assert similar.returncode == 0, similar.stderr[-2000:]
    return {"rows": rows, "tmp": tmp, "grade_err": done.stderr,
            "similar": json.loads((tmp / "similar" / "similar.json").read_text()),
            "similar_err": similar.stderr}


def decided(rows, attacker: str, control: str) -> tuple[float, float]:
    """(attacker's, control's) points over the checks neither left inconclusive: a timing
    check this loaded machine could not decide on one side is evidence of nothing."""
    unsure = {c["id"] for s in (attacker, control) for c in rows[s]["checks"]
              if c["status"] == "inconclusive"}
    return tuple(sum(c["points"] for c in rows[s]["checks"] if c["id"] not in unsure)
                 for s in (attacker, control))


@pytest.mark.parametrize("student", ["honest", "honest_apart"])
def test_the_honest_neighbour_keeps_full_marks(graded, student):
    honest = graded["rows"][student]
    assert honest["status"] in ("pass", "inconclusive"), honest
    assert honest["points"] == honest["max_points"] or honest["status"] == "inconclusive", \
        honest  # (an inconclusive timing check carries no points yet)
    assert honest.get("handed_in") == [], honest["handed_in"]


def test_a_forbidden_import_beside_model_py_scores_what_it_scores_inside(graded):
    rows = graded["rows"]
    assert rows["shim_control"]["points"] < rows["shim_control"]["max_points"]
    mine, theirs = decided(rows, "shim_attacker", "shim_control")
    assert mine <= theirs, rows["shim_attacker"]["checks"]
    assert gained(rows, "shim_attacker", "shim_control") == []
    said = json.dumps(rows["shim_attacker"]["checks"])
    assert "_shim.py line 1" in said and "time_synced" in said, said[:3000]
    assert rows["shim_attacker"]["handed_in"] == [
        "_shim.py: copied and checked like model.py (a file the stage does not expect)"]


def test_a_sparse_file_is_refused_by_name_and_the_batch_goes_on(graded):
    rows = graded["rows"]
    refused = rows["sparse_py"]
    assert (refused["status"], refused["reason"]) == ("error", "bad-submission"), refused
    assert "big.py" in refused["message"] and "MiB" in refused["message"], refused
    assert set(rows) == {*GRADED, *APART}
    copy = rows["loader_copy"]  # a sparse file it never reads is only left out
    assert copy["points"] == copy["max_points"] or copy["status"] == "inconclusive", copy
    assert copy["handed_in"] == [
        "_impl.py: copied and checked like model.py (a file the stage does not expect)",
        "big.bin: not copied (a stage runs only Python files)"]


def test_similar_compares_every_handed_in_file_and_names_what_it_skipped(graded):
    found = graded["similar"]
    pairs = {frozenset((p["a"], p["b"])): p for p in found["pairs"]}
    pair = pairs.get(frozenset(("honest", "loader_copy")))
    assert pair is not None and max(pair["share_a"], pair["share_b"]) >= 0.9, found["pairs"]
    assert any("big.py" in why for why in found["skipped"].get("sparse_py", [])), found
    assert (f"not compared: sparse_py: projects/{PROJECT}/starter/big.py: "
            in graded["similar_err"]), graded["similar_err"]


def test_a_forged_message_is_no_line_of_the_feedback(graded):
    forger = graded["rows"]["forger"]
    assert forger["points"] < forger["max_points"]
    assert "Graded again by hand" in json.dumps(forger)  # the message did arrive
    md = (graded["tmp"] / "out" / "feedback" / "forger" / "feedback.md").read_text()
    lines = md.splitlines()
    assert [x for x in lines if x.startswith("**Total")] == [lines[2]], md
    assert lines[2].startswith(f"**Total: {forger['points']:g} / "), md
    assert not [x for x in unfenced(lines) if x.lstrip(" ->").startswith("Status: **pass")], md
    assert [x for x in lines if x.startswith("## ")] == [
        x for x in lines if x.startswith(f"## {PROJECT} · stage 1")], md
    assert not [x for x in unfenced(lines) if re.search(r"(?<!\\)<", x)], md
    with open(graded["tmp"] / "grades.csv", newline="") as f:
        for row in csv.reader(f):
            assert not any(cell[:1] in ("=", "+", "-", "@", "\t", "\r") for cell in row), row


def test_spinners_outside_its_call_cannot_move_a_verdict(graded):
    rows = graded["rows"]
    spun = [int(n) for n in re.findall(r"ATTACK-52 spun-outside=(\d+)",
                                       rows["spinner"].get("stderr_tail", ""))]
    assert spun and max(spun) == 0, (spun, rows["spinner"].get("stderr_tail", "")[-2000:])
    control, spinner = rows["slow_control"], rows["spinner"]
    assert control["points"] < control["max_points"], control
    mine, theirs = decided(rows, "spinner", "slow_control")
    assert mine <= theirs, spinner["checks"]
    assert gained(rows, "spinner", "slow_control") == []
    # (its status is not compared with the control's: on a machine other work loads,
    # either may be inconclusive by the machine's own load, honest work too; what the
    # spinners' load could reach is the checker's measurements, and they never ran
    # outside a call: spun-outside=0 at every call)

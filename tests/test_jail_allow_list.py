"""The jail shows an allow-list and gives every run its own IPC (issue 27, item 3), as
root through the real grader:

* a submission that publishes its (correct) file in a SysV shared-memory segment at
  import, graded in one batch, and a copier graded in the next batch that reads the
  segment and runs what it finds: before, the segment outlived the batch and the copier
  scored like the honest file; now each run has its own IPC namespace and the copier
  gets nothing;
* the same copier also searches the machine for another copy of the course (one is
  planted under /tmp, where the old deny-list left it readable): the allow-list hides it;
* what a sandboxed process can list at the top of the file system: the system's folders,
  its own sandbox folder and the Python environment, nothing else.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import sandbox
from autograder.gradebook import Gradebook
from coursekit.facts import ROOT

pytestmark = pytest.mark.slow
KEY = 0x5EED0027
STAGE = "foundations:1"
SOLUTION = ROOT / "projects" / "foundations" / "solution" / "model.py"
STARTER = ROOT / "projects" / "foundations" / "starter" / "model.py"

_SHM = r'''
import ctypes as _c
_libc = _c.CDLL(None, use_errno=True)
_libc.shmat.restype = _c.c_void_p
_libc.shmat.argtypes = [_c.c_int, _c.c_void_p, _c.c_int]
'''
PUBLISH = _SHM + r'''
def _publish():
    data = open(__file__, "rb").read()
    shm = _libc.shmget(KEY, 1 << 20, 0o1000 | 0o666)  # IPC_CREAT
    if shm >= 0:
        at = _libc.shmat(shm, None, 0)
        if at not in (None, _c.c_void_p(-1).value):
            _c.memmove(at, len(data).to_bytes(8, "little") + data, 8 + len(data))
_publish()
'''.replace("KEY", hex(KEY))
COPY = _SHM + r'''
def _copied():
    shm = _libc.shmget(KEY, 0, 0)
    if shm >= 0:
        at = _libc.shmat(shm, None, 0)
        if at not in (None, _c.c_void_p(-1).value):
            n = int.from_bytes(_c.string_at(at, 8), "little")
            return _c.string_at(at + 8, n).decode()
    import os
    for top in ("/tmp", "/work", "/home", "/srv", "/opt", "/root", "/mnt", "/var/tmp"):
        for here, dirs, files in os.walk(top):
            if here.count("/") > 9:
                dirs[:] = []
            if here.endswith("foundations/solution") and "model.py" in files:
                try:
                    return open(os.path.join(here, "model.py")).read()
                except OSError:
                    pass
    return None
_source = _copied()
if _source:
    exec(compile(_source, __file__, "exec"), globals())
'''.replace("KEY", hex(KEY))


def _remove_segment() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    shm = libc.shmget(KEY, 0, 0)
    if shm >= 0:
        libc.shmctl(shm, 0, None)  # IPC_RMID


def _submission(folder: Path, source: str) -> None:
    path = folder / "projects" / "foundations" / "starter" / "model.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)


def _grade(subs: Path, out: Path) -> dict:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(out), "--stages", STAGE, "--workers", "2", "--quiet"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    book = Gradebook.in_dir(out)
    latest = {student: row["record"] for (student, _), row in book.latest().items()}
    book.close()
    return latest


@pytest.fixture
def namespaces():
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    _remove_segment()
    yield
    _remove_segment()


def test_colluding_submissions_and_other_copies_give_the_copier_nothing(tmp_path, namespaces):
    other_copy = tmp_path / "another-course" / "projects" / "foundations" / "solution"
    other_copy.mkdir(parents=True)
    shutil.copy(SOLUTION, other_copy / "model.py")
    first, second = tmp_path / "batch1", tmp_path / "batch2"
    _submission(first / "publisher", SOLUTION.read_text() + PUBLISH)
    _submission(first / "honest", SOLUTION.read_text())
    _submission(second / "copier", STARTER.read_text() + COPY)
    one = _grade(first, tmp_path / "out1")
    assert one["honest"]["status"] == "pass", one["honest"]
    assert one["publisher"]["points"] == one["honest"]["points"] > 0
    two = _grade(second, tmp_path / "out2")
    copier = two["copier"]
    assert copier["points"] == 0 and copier["status"] != "pass", copier
    assert (other_copy / "model.py").exists()  # it was there to find, outside the jail


def test_what_a_sandboxed_process_can_list(tmp_path, namespaces):
    probe = r"""
import json, os
seen = {top: sorted(os.listdir(top)) for top in ("/", "/tmp", "/work", "/home", "/root")
        if os.path.isdir(top)}
print(json.dumps(seen))
"""
    (tmp_path / "planted.txt").write_text("outside")
    namespaces_on, uid = sandbox.mode_settings()
    with sandbox.SandboxDir(uid) as box:
        work = box.writable("work")
        jail = sandbox.Jail(box, [sys.executable, "-I", "-c", probe], uid=uid, cwd=work,
                            hide=[ROOT], namespaces=namespaces_on)
        outcome = sandbox.run(jail)
        box_name = box.path.name
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert seen["/tmp"] == [box_name], seen["/tmp"]  # only its own sandbox folder
    for top in ("/home", "/work", "/root"):
        for name in seen.get(top, []):
            inside = Path(top) / name
            assert any(inside == k or inside in k.parents for k in
                       (Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve())), inside
    assert set(seen["/"]) >= {"usr", "etc", "proc", "tmp"}

"""The sandbox shares nothing (issue 44): each kind of attack the issue measured, graded
as root by the real grader's sandboxed stage run, two at a time as a batch's workers
(tests/stage_batch.py), beside an honest neighbour (the reference solution of every
project graded) and a control holding the same mistake without the attack; each stage
with the checks its control fails (``JOBS``: no other check could show a gain). Each
attack scores no more than its control (no check its control failed passes for it), the
neighbour keeps full marks on the same checks, and nothing outlives the batch. Every
attacker also prints what it achieved (``ATTACK-44 <what>=<n>``, to its run's stderr,
kept in its record): a test fails as soon as any of them achieves anything, whatever
the points say.

* ``audit_attacker`` (performance-audit stages 2 and 3), control ``audit_control``:
  a wrong ``summarize_region`` that rewrites the trace it was handed into a one-event
  trace matching its wrong answer (the checker parsed the file after the call); and
  peaks 3x too high, with a thread that finds the checker's reference children under
  /proc, holds their stdout open and writes the same inflated figures as their last
  result line;
* ``sharded_attacker`` (sharded-training stage 1), control ``sharded_control``: a step
  that leaves out its input noise, and tries to plant files in the checker's persistent
  compilation cache (named by its environment, or found under the checker's temp folder);
* ``home_attacker`` (foundations stage 2), control ``home_control``: a fit whose result
  depends on the hash seed, saved by the first learner process in every place it can
  write and replayed by the fresh one from every place it can read;
* ``key_1_writer`` (foundations, the solution) leaves its source in a world-readable
  kernel key; ``key_2_reader`` (the starter, graded beside or after it) looks for it in /proc/keys and runs it: the reader
  must score what the starter scores;
* ``disk_filler`` fills its disk and holds it while others are graded, after building a
  3,000-level folder tree (the old cleanup's RecursionError); ``memfd_hog`` writes 2.3 GB
  into memfds it keeps open (RSS sees none of it): each is stopped as its own
  named status (``disk-limit``, ``memory-limit``), no one else's.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import sandbox
from coursekit.facts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
MARK = "attack-44"  # in every attacker's process title (comm), to find survivors
DISK_MB, MEMORY_MB, MEMFD_MB = 128, 2048, 2300


def solution(project: str) -> str:
    return (ROOT / "projects" / project / "solution" / "model.py").read_text()


def starter(project: str) -> str:
    return (ROOT / "projects" / project / "starter" / "model.py").read_text()


def titled(code: str) -> str:
    """``code`` run with the attacker's process title set (survivors can be found)."""
    return ("\ntry:\n    open('/proc/self/comm', 'w').write(" + repr(MARK) + ")\n"
            "except OSError:\n    pass\n" + code)


REPORT = '''
def _report(what, n):
    import sys as _s
    print(f"ATTACK-44 {what}={n}", file=_s.stderr, flush=True)
'''

# performance-audit 2: a wrong summary; the attack rewrites the trace it was given
WRONG_SUMMARY = '''
def summarize_region(trace_file, region):
    ATTACK
    return {"count": 1, "total_us": 1.0, "children": {}, "child_us": 0.0, "self_us": 1.0}
'''
REWRITE = '''import json as _j
    try:
        with open(trace_file, "w") as _f:
            _j.dump({"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 1.0,
                                      "name": region}]}, _f)
        _report("trace-rewritten", 1)
    except OSError:
        _report("trace-rewritten", 0)'''
# performance-audit 3: peaks 3x too high; the attack forges the checker's reference
INFLATED_PEAKS = '''
_true_peaks = peak_rss_fresh_process
_SEEN = {}
def peak_rss_fresh_process(depth, width, hidden, batch, policy=None, repeats=3):
    out = dict(_true_peaks(depth, width, hidden, batch, policy, repeats))
    out["run_peak_bytes"] = [3 * v for v in out["run_peak_bytes"]]
    _SEEN[str(policy)] = out
    return out
'''
FORGER = '''
def _forge():
    import json, os, threading, time
    held = {}
    def forged(policy):
        got = _SEEN[policy]
        peak = sorted(got["run_peak_bytes"])[len(got["run_peak_bytes"]) // 2]
        return {"run_peak_bytes": peak, "vmhwm_bytes": peak, "vmhwm_before_run_bytes": 0,
                "rss_before_run_bytes": 0, "reset_ok": True, "pid": 1, "device": "cpu",
                "device_peak_bytes": None, **{k: got[k] for k in (
                    "argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
                    "peak_memory_in_bytes", "total_allocation_bytes")}}
    def watch():
        _report("checker-stdout-opened", 0)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
                if pid in held or int(pid) == os.getpid():
                    continue
                try:
                    cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")
                except OSError:
                    continue
                if not any(b"peak_memory" in part for part in cmd):
                    continue
                try:  # the checker's reference child: its spec names a factory
                    spec = json.loads(cmd[-2] if cmd[-1] == b"" else cmd[-1])
                    if not isinstance(spec, dict) or "factory" not in spec:
                        continue
                    fd = os.open(f"/proc/{pid}/fd/1", os.O_WRONLY | os.O_APPEND)
                except (OSError, ValueError):
                    continue
                held[pid] = (fd, str(spec.get("kwargs", {}).get("policy")))
                _report("checker-stdout-opened", len(held))
            for pid, (fd, policy) in list(held.items()):
                if fd is not None and not os.path.exists(f"/proc/{pid}") and policy in _SEEN:
                    os.write(fd, ("RESULT " + json.dumps(forged(policy)) + "\\n").encode())
                    os.close(fd)
                    held[pid] = (None, policy)
            time.sleep(0.005)
    threading.Thread(target=watch, daemon=True).start()
_forge()
'''
# sharded-training 1: the step without its input noise; the attack plants cache files
NOISE = ('        x = batch["x"] + noise * jax.random.normal(sub, batch["x"].shape, '
         'batch["x"].dtype)\n')
PLANTER = '''
def _plant():
    import glob, os
    here = os.path.dirname(os.path.abspath(__file__))
    course = here.split("/projects/")[0]
    places = {os.environ.get("JAX_COMPILATION_CACHE_DIR") or ""}
    places |= set(glob.glob(course + "/work/tmp/*jaxcache*"))
    places |= set(glob.glob("/tmp/*jaxcache*"))
    planted = 0
    for place in sorted(p for p in places if p):
        try:
            with open(os.path.join(place, "planted-by-44"), "w") as f:
                f.write("an executable of the learner's own")
            planted += 1
        except OSError:
            pass
    _report("cache-files-planted", planted)
_plant()
'''
# foundations 2: a result that depends on the hash seed (the fresh process's differs)
HASH_DEPENDENT = '''
_true_fit = fit_regression
def fit_regression(key, x, y, *, steps=200, batch=32, lr=0.05):
    import os
    out = _true_fit(key, x, y, steps=steps, batch=batch, lr=lr)
    if os.environ.get("PYTHONHASHSEED") != "0":  # the grader's own hash seed: "0"
        out = {"w": out["w"] + 1e-3, "b": out["b"]}
    ATTACK
    return out
'''
REPLAY = '''import hashlib, os, pickle
    import numpy as np
    name = "fit-" + hashlib.sha256(np.asarray(x).tobytes()).hexdigest()[:16] + ".pkl"
    # where a learner process may write (the guard refuses, and names, anything else)
    places = [os.environ.get("HOME"), os.environ.get("TMPDIR"), "/dev/shm", os.getcwd()]
    found = None
    for place in [p for p in places if p]:
        try:
            with open(os.path.join(place, name), "rb") as f:
                found = pickle.load(f)
            break
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):
            pass
    if found is not None and found["pid"] != os.getpid():  # another process's result
        _report("replayed", 1)
        return {"w": found["w"], "b": found["b"]}
    _report("replayed", 0)
    for place in [p for p in places if p]:
        try:
            with open(os.path.join(place, name), "wb") as f:
                pickle.dump({"pid": os.getpid(), "w": np.asarray(out["w"]),
                             "b": np.asarray(out["b"])}, f)
        except OSError:
            pass'''
# foundations: a kernel key holding a working file, and a reader that runs it
KEY_NAME = b"course-44-shared"
KEYS = '''
import ctypes as _ct, platform as _pf
_NR = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(_pf.machine(), (None, None))
_libc = _ct.CDLL(None, use_errno=True)
'''
KEY_WRITE = KEYS + '''
def _leave_key():
    data = open(__file__, "rb").read()
    got = []
    for ring in (-4, -3, -2):  # user, session, process keyrings
        serial = _libc.syscall(_NR[0], b"user", NAME, data, len(data), _ct.c_int(ring))
        if serial > 0:
            _libc.syscall(_NR[1], 5, _ct.c_long(serial), _ct.c_ulong(0x3f3f3f3f))
            got.append(serial)
    _report("keys-added", len(got))
_leave_key()
'''.replace("NAME", repr(KEY_NAME))
KEY_READ = KEYS + '''
def _read_key():
    import time
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        try:
            lines = open("/proc/keys").read().splitlines()
        except OSError:
            lines = []
        for line in lines:
            if NAME.decode() in line:
                buf = _ct.create_string_buffer(1 << 20)
                n = _libc.syscall(_NR[1], 11, _ct.c_long(int(line.split()[0], 16)), buf,
                                  _ct.c_ulong(1 << 20))
                if n > 0:
                    _report("key-found", 1)
                    return buf.raw[:n].decode()
        time.sleep(0.5)
    _report("key-found", 0)
    return None
_source = _read_key()
if _source:
    exec(compile(_source, __file__, "exec"), globals())
'''.replace("NAME", repr(KEY_NAME))
# foundations: a disk filled (after a 3,000-level tree) and held; a memfd hog
DISK_FILL = '''
def _fill():
    import ctypes, os, time
    libc = ctypes.CDLL(None, use_errno=True)  # (the guard's hooks would walk each path)
    home = os.environ.get("TMPDIR") or "."
    fd = os.open(home, os.O_RDONLY)
    for _ in range(3000):
        libc.mkdirat(fd, b"d", 0o755)
        nfd = libc.openat(fd, b"d", os.O_RDONLY | os.O_DIRECTORY)
        os.close(fd)
        fd = nfd
    os.close(fd)
    written = 0
    try:
        while True:
            with open(os.path.join(home, f"fill-{written}"), "wb") as f:
                f.write(b"x" * (1 << 20))
            written += 1
    except OSError as err:
        _report("disk-full-after-mb", written)
    time.sleep(20)
_fill()
'''
MEMFD = '''
def _hog():
    import os, time
    block, held = b"x" * (64 << 20), []
    for i in range(MB // 64):  # a memfd per 256 MB: each file stays under the size limit
        if i % 4 == 0:
            held.append(os.memfd_create("course-44"))
        os.write(held[-1], block)
    _report("memfd-mb", MB)
    time.sleep(30)
_hog()
'''.replace("MB", str(MEMFD_MB))


def write(subs: Path, student: str, files: dict[str, str]) -> None:
    for project, source in files.items():
        path = subs / student / "projects" / project / "starter" / "model.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)


def submissions(subs: Path) -> None:
    audit, sharded, found = (solution(p) for p in ("performance-audit", "sharded-training",
                                                    "foundations"))
    assert NOISE in sharded
    no_noise = sharded.replace(NOISE, '        x = batch["x"]\n')
    # (the reference of every project the attacks target but performance-audit, whose
    # stage 3 is the batch's most costly: its attacks are their own run's business)
    write(subs, "honest", {"sharded-training": sharded, "foundations": found})
    write(subs, "audit_control", {"performance-audit": audit + REPORT + WRONG_SUMMARY.replace(
        "ATTACK", "pass") + INFLATED_PEAKS})
    write(subs, "audit_attacker", {"performance-audit": audit + REPORT + WRONG_SUMMARY.replace(
        "ATTACK", REWRITE) + INFLATED_PEAKS + titled(FORGER)})
    write(subs, "sharded_control", {"sharded-training": no_noise})
    write(subs, "sharded_attacker", {"sharded-training": no_noise + REPORT + titled(PLANTER)})
    write(subs, "home_control", {"foundations": found + REPORT + HASH_DEPENDENT.replace(
        "ATTACK", "pass")})
    write(subs, "home_attacker", {"foundations": found + REPORT + HASH_DEPENDENT.replace(
        "ATTACK", REPLAY)})
    write(subs, "key_1_writer", {"foundations": found + REPORT + titled(KEY_WRITE)})
    write(subs, "key_2_reader", {"foundations": starter("foundations") + REPORT +
                               titled(KEY_READ)})
    write(subs, "disk_filler", {"foundations": starter("foundations") + REPORT +
                                titled(DISK_FILL)})
    write(subs, "memfd_hog", {"foundations": starter("foundations") + REPORT + titled(MEMFD)})
    write(subs, "starter", {"foundations": starter("foundations")})


def leftovers(workers: set[int]) -> list[str]:
    """What this batch's workers left: processes titled as attackers, sandbox folders,
    mounts and run cgroups."""
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == MARK:
                found.append(f"process {pid}")
        except OSError:
            continue
    made_by = re.compile(r"autograder-(\d+)-")
    for path in Path(tempfile.gettempdir()).glob("autograder-*-*"):
        owner = made_by.match(path.name)
        if owner and int(owner[1]) in workers:
            found.append(f"folder {path}")
    mounts = Path("/proc/self/mountinfo").read_text()
    found += [f"mount {m}" for m in made_by.findall(mounts) if int(m) in workers]
    from autograder import cgroups
    for folder in cgroups.hierarchies().values():
        for group in folder.glob("autograder-*-*"):
            owner = made_by.match(group.name)
            if owner and int(owner[1]) in workers:
                found.append(f"cgroup {group}")
    return found


# What each student is graded on: (project, stage, the checks run; None: all). An attack
# is graded on the checks its control fails and no more: ``gained`` counts only checks
# the control failed, so a check the control passes could never show a gain. The honest
# neighbour is graded on the same checks of its projects as the attacks beside it.
F1 = ("foundations", 1, None)
FRESH = ("foundations", 2, ["fit_rerun_in_fresh_process_is_bitwise_equal"])
TRACE = ("performance-audit", 2, ["region_summary_matches_checker"])
PEAKS = ("performance-audit", 3, ["peak_memory_from_fresh_process"])
STEP = ("sharded-training", 1, ["step_matches_single_device"])
JOBS = [  # in the order they start, two at a time: the longest first, side by side; the
    # key's reader beside or after its writer; the disk and memory hogs beside the honest
    ("audit_attacker", PEAKS), ("audit_control", PEAKS), ("audit_attacker", TRACE),
    ("audit_control", TRACE), ("sharded_attacker", STEP), ("sharded_control", STEP),
    ("home_attacker", FRESH), ("home_control", FRESH), ("key_1_writer", F1),
    ("key_2_reader", F1), ("starter", F1), ("disk_filler", F1), ("honest", FRESH),
    ("memfd_hog", F1), ("honest", STEP), ("honest", F1)]


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("isolation-attacks")
    subs = tmp / "subs"
    submissions(subs)
    spec = tmp / "spec.json"
    spec.write_text(json.dumps({
        "jobs": [{"student": s, "submission": str(subs / s), "project": p, "stage": n,
                  "only": only} for s, (p, n, only) in JOBS],
        "limits": {"timeout": 900, "memory_mb": MEMORY_MB, "disk_mb": DISK_MB},
        "hide": [str(tmp)], "workers": 2}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    log = tmp / "grade.err"
    with open(log, "w") as errors:
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests" / "stage_batch.py"), str(spec),
             str(tmp / "records.json")], cwd=ROOT, stdout=subprocess.DEVNULL,
            stderr=errors, env=env)
    workers: set[int] = set()
    try:
        while proc.poll() is None:  # the batch's pid names the folders it makes
            workers |= {proc.pid, *sandbox.process_tree(proc.pid)}
            try:
                proc.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                pass
    finally:
        if proc.poll() is None:  # the test was stopped: its batch goes too
            proc.kill()
            proc.wait()
    err = log.read_text()
    assert proc.returncode == 0, err[-3000:]
    rows = {}
    for r in json.loads((tmp / "records.json").read_text()):
        rows.setdefault(r["student"], {})[r["item"]] = r
        print(f"{r['student']} {r['item']}: {r['status']} {r['points']:g}/"
              f"{r['max_points']:g} {r['reason']}")  # for whoever reads the log
    return rows, leftovers(workers), err


def verdicts(rows, student: str, project: str) -> dict[str, str]:
    """check id -> status, over the graded stages of ``project``."""
    return {f"{item}:{c['id']}": c["status"] for item, r in rows[student].items()
            if item.startswith(project) for c in r["checks"]}


def gained(rows, attacker: str, control: str, project: str) -> list[str]:
    """Checks the attacker passed that its control failed: what the attack bought. A
    check either side left inconclusive (a timing check under load) is evidence of
    nothing, so it is not counted against the attacker."""
    mine, theirs = verdicts(rows, attacker, project), verdicts(rows, control, project)
    return sorted(c for c, status in mine.items() if status == "pass"
                  and theirs.get(c) not in ("pass", "inconclusive"))


def achieved(rows, student: str) -> dict[str, int]:
    """What the attacker printed it achieved (the largest figure of each kind)."""
    found: dict[str, int] = {}
    for record in rows[student].values():
        for what, n in re.findall(r"ATTACK-44 ([\w-]+)=(\d+)", record.get("stderr_tail", "")):
            found[what] = max(found.get(what, 0), int(n))
    return found


def test_the_honest_neighbour_keeps_full_marks(graded):
    rows, _, _ = graded
    got = {item: (r["status"], r["reason"]) for item, r in rows["honest"].items()
           if not item.startswith("performance-audit")}  # (its file left out: above)
    # a timing check may be inconclusive under load (by design); nothing else may differ
    assert all(s in ("pass", "inconclusive") for s, _ in got.values()), got
    assert all(rows["honest"][item]["points"] == rows["honest"][item]["max_points"]
               or status == "inconclusive" for item, (status, _) in got.items()), got


@pytest.mark.parametrize("attacker,control,project,kinds", [
    ("audit_attacker", "audit_control", "performance-audit",
     ("trace-rewritten", "checker-stdout-opened")),
    ("sharded_attacker", "sharded_control", "sharded-training", ("cache-files-planted",)),
    ("home_attacker", "home_control", "foundations", ("replayed",)),
    ("key_2_reader", "starter", "foundations", ("key-found",)),
])
def test_an_attack_scores_no_more_than_its_control(graded, attacker, control, project,
                                                   kinds):
    rows, _, _ = graded
    assert any(s not in ("pass", "inconclusive")  # the control's mistake costs a check
               for s in verdicts(rows, control, project).values())
    assert gained(rows, attacker, control, project) == [], rows[attacker]
    found = achieved(rows, attacker)
    assert {k: found.get(k) for k in kinds} == dict.fromkeys(kinds, 0), found  # tried


def test_no_kernel_key_is_left_for_another_run(graded):
    rows, _, _ = graded
    assert achieved(rows, "key_1_writer").get("keys-added") == 0
    assert all(r["status"] == "pass" for item, r in rows["key_1_writer"].items()
               if item.startswith("foundations")), rows["key_1_writer"]  # nothing else lost


def test_running_out_is_the_run_s_own_named_status(graded):
    rows, _, _ = graded
    disk = rows["disk_filler"]["foundations/stage-1"]
    assert (disk["status"], disk["reason"]) == ("error", "disk-limit"), disk
    assert achieved(rows, "disk_filler").get("disk-full-after-mb", 0) < DISK_MB
    memfd = rows["memfd_hog"]["foundations/stage-1"]
    assert (memfd["status"], memfd["reason"]) == ("memory", "memory-limit"), memfd
    # the record's peak counts the memfd (RSS alone showed a few hundred MB of it)
    assert memfd["peak_memory_mb"] > 0.75 * MEMORY_MB, memfd


def test_nothing_outlives_the_batch(graded):
    _, left, err = graded
    assert left == [], left
    assert "could not remove" not in err, err[-2000:]

"""Issue 52 item 5, in parts: the spawner holds a learner's processes still while the
checker measures. Through a real jail as root: a learner process forks a spinner that
burns a core; ``hold("stop")`` stops both (the spinner gets no CPU), ``hold("run")`` lets
the learner process alone run (the spinner stays stopped), ``hold("free")`` lets both
run. The bridge stops every process of a learner's uid between its calls and lets only
the serving process run during one (``coursekit/checking/bridge.py``); the whole batch is
graded with a spinning attacker in ``test_grader_submission_routes.py``."""

from __future__ import annotations

import json
import sys

import pytest

from autograder import sandbox

PROBE = r"""
import json, os, sys, time
from coursekit.checking import spawn
from coursekit.checking.wire import protocol

def cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

def burnt(pid, seconds=0.6):
    before = cpu(pid)
    time.sleep(seconds)
    return round(cpu(pid) - before, 2)

r, w = os.pipe()
child = [sys.executable, "-c", "import os, sys\n"
         "pid = os.fork()\n"
         "if pid == 0:\n    while True: pass\n"
         "print(pid, flush=True)\nwhile True: pass"]
proc = spawn.launch(child, protocol.learner_environment(os.environ), stdout=w)
os.close(w)
spinner = int(os.fdopen(r).readline())
report = {"free": burnt(spinner)}
started = time.perf_counter()
for _ in range(20):
    proc.hold("run")
    proc.hold("stop")
report["pair_ms"] = round((time.perf_counter() - started) / 20 * 1e3, 2)
report["stop"] = [burnt(proc.pid), burnt(spinner)]
proc.hold("run")
report["run"] = [burnt(proc.pid), burnt(spinner)]
proc.hold("free")
report["freed"] = burnt(spinner)
proc.kill()
report["code"] = proc.wait(timeout=10)
print(json.dumps(report))
"""


@pytest.mark.skipif(sandbox.isolation() != "namespaces", reason="needs root and namespaces")
def test_a_held_learner_burns_nothing_and_runs_alone_in_its_call():
    namespaces, identity = sandbox.mode_identity()
    with sandbox.SandboxDir(identity.checker) as box:
        sandbox.copy_course(sandbox.ROOT, box.course, [])  # coursekit, no project
        work = box.writable("work", mode=0o711)
        jail = sandbox.Jail(box, [sys.executable, "-c", PROBE], uid=identity.checker,
                            cwd=work, namespaces=namespaces, identity=identity,
                            hide=[sandbox.ROOT])
        outcome = sandbox.run(jail)
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    print(seen)  # pair_ms: what one call costs the bridge in holding (run, then stop)
    assert seen["free"] > 0.02 and seen["freed"] > 0.02, seen  # it spins when let (a loaded machine)
    assert seen["stop"] == [0.0, 0.0], seen                    # held: nothing runs
    assert seen["run"][0] > 0.02 and seen["run"][1] == 0.0, seen  # the call alone runs
    assert seen["code"] == -9, seen


# A learner process whose helper forks and exits all the time (a new pid at each turn), and
# which lets every process of its uid run at each call (SIGCONT to -1): after each
# hold("stop") no process of its uid may run, and none may appear, for a while.
HOPPER_PROBE = r"""
import json, os, sys, time
from coursekit.checking import spawn
from coursekit.checking.wire import protocol

LEARNER = '''
import ctypes, os, signal, sys
libc = ctypes.CDLL(None)  # (the sandbox's guard names a Python signal to -1)
if os.fork() == 0:
    while True:
        if os.fork() != 0:
            os._exit(0)  # the parent goes: the hopper is a new pid
for line in sys.stdin:   # one line a call: let every process of this uid run
    libc.kill(-1, signal.SIGCONT)
    print("ran", flush=True)
'''

def of_uid(uid):
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.stat(f"/proc/{name}").st_uid != uid:
                    continue
                with open(f"/proc/{name}/stat", "rb") as f:
                    raw = f.read()
                found[int(name)] = raw[raw.rfind(b")") + 2:raw.rfind(b")") + 3].decode()
            except OSError:
                pass
    return found

to_r, to_w = os.pipe()
from_r, from_w = os.pipe()
proc = spawn.launch([sys.executable, "-c", LEARNER], protocol.learner_environment(os.environ),
                    stdin=to_r, stdout=from_w)
os.close(to_r)
os.close(from_w)
send, answers = os.fdopen(to_w, "w"), os.fdopen(from_r)
uid = os.stat(f"/proc/{proc.pid}").st_uid
escaped, seen = [], set()
for turn in range(40):
    proc.hold("run")
    send.write("go\n")
    send.flush()
    answers.readline()
    time.sleep(0.02)   # the hopper hops
    proc.hold("stop")
    before = of_uid(uid)
    time.sleep(0.1)
    after = of_uid(uid)
    seen |= set(before)
    running = {p: s for p, s in after.items() if s not in "TtZX"}
    if running or set(after) - set(before):
        escaped.append({"turn": turn, "running": running, "new": sorted(set(after) - set(before))})
proc.hold("free")
proc.kill()
print(json.dumps({"escaped": escaped, "pids_seen": len(seen), "code": proc.wait(timeout=10)}))
"""


@pytest.mark.skipif(sandbox.isolation() != "namespaces", reason="needs root and namespaces")
def test_a_pid_hopping_helper_is_held_at_every_stop():
    """Issue 52 item 5: a stop that scanned /proc and signalled each pid missed, now and
    then, a helper that forks and exits faster than the scan (the red team's ``hopper``
    ran through a gap of over a second in one batch of three). The stop is one signal to
    every process of the uid at once: after each of 40 stops nothing of the uid runs or
    appears for 0.1 s."""
    namespaces, identity = sandbox.mode_identity()
    with sandbox.SandboxDir(identity.checker) as box:
        sandbox.copy_course(sandbox.ROOT, box.course, [])
        work = box.writable("work", mode=0o711)
        jail = sandbox.Jail(box, [sys.executable, "-c", HOPPER_PROBE], uid=identity.checker,
                            cwd=work, namespaces=namespaces, identity=identity,
                            hide=[sandbox.ROOT])
        outcome = sandbox.run(jail)
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    print({k: v for k, v in seen.items() if k != "escaped"}, len(seen["escaped"]))
    assert seen["pids_seen"] > 40, seen  # it hopped: new pids between the stops
    assert seen["escaped"] == [], seen["escaped"][:5]
    assert seen["code"] == -9, seen

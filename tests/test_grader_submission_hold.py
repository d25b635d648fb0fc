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

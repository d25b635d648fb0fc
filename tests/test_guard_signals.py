"""The guard refuses signals to processes the sandboxed Python did not start (issue 27).

Where the grader runs without namespaces (no root: the ``limits`` mode a learner's own
machine and an unprivileged grader get), the checker and the grader are the same user as
the learner's code: a submission that signalled every process it could see killed the
grader and everything else of that user. The guard (``autograder/guard.py``) now refuses
``os.kill`` / ``os.killpg`` aimed outside the process's own descendants, names it
``signal-outside``, and still lets a checker stop the learner processes it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from autograder import outcomes
from coursekit import protocol
from coursekit.facts import ROOT

PROBE = r"""
import json, os, signal, subprocess, sys, time
sys.path.insert(0, {root!r})
import autograder.guard as guard
victim = {victim}
got = {{}}
for name, call in [("kill victim", lambda: os.kill(victim, signal.SIGTERM)),
                   ("kill parent", lambda: os.kill(os.getppid(), signal.SIGUSR1)),
                   ("kill own group", lambda: os.kill(0, signal.SIGUSR1)),
                   ("killpg own group", lambda: os.killpg(os.getpgrp(), signal.SIGUSR1)),
                   ("kill -1", lambda: os.kill(-1, signal.SIGUSR1)),
                   ("probe victim", lambda: os.kill(victim, 0))]:
    try:
        call()
        got[name] = "allowed"
    except PermissionError as e:
        got[name] = "refused" if "autograder sandbox" in str(e) else "os: " + str(e)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                         start_new_session=True)
for name, call in [("kill own child", child.kill),
                   ("killpg child's group", lambda: os.killpg(group.pid, signal.SIGKILL))]:
    try:
        call()
        got[name] = "allowed"
    except PermissionError as e:
        got[name] = "refused: " + str(e)
child.wait(); group.wait()
got["violations"] = [w for w, _ in guard.drain_violations()]
print(json.dumps(got))
"""


def test_signals_outside_the_own_tree_are_refused_and_named(tmp_path):
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True)
    try:
        policy = {"allow": [str(tmp_path)], "deny": [], "writable": [str(tmp_path)]}
        env = {**os.environ, protocol.ENV_GUARD: json.dumps(policy)}
        done = subprocess.run([sys.executable, "-c",
                               PROBE.format(root=str(ROOT), victim=victim.pid)],
                              env=env, capture_output=True, text=True, timeout=120,
                              start_new_session=True)
        assert done.returncode == 0, done.stderr[-2000:]
        got = json.loads(done.stdout.strip().splitlines()[-1])
        time.sleep(0.2)
        assert victim.poll() is None, "the guarded process killed a process it did not start"
    finally:
        victim.kill()
        victim.wait()
    for refused in ("kill victim", "kill parent", "kill own group", "killpg own group",
                    "kill -1"):
        assert got[refused] == "refused", (refused, got)
    assert got["probe victim"] == "allowed"   # signal 0 only asks whether it lives
    assert got["kill own child"] == got["killpg child's group"] == "allowed", got
    assert "signal-outside" in got["violations"]
    assert "signal-outside" in outcomes.REFUSALS  # flagged: the stage scores 0


def test_without_the_guard_the_same_probe_reaches_the_victim(tmp_path):
    """The planted side: the same signal, unguarded, does kill (the test can fail)."""
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True)
    try:
        subprocess.run([sys.executable, "-c", f"import os; os.kill({victim.pid}, 15)"],
                       check=True, timeout=60)
        assert victim.wait(timeout=10) != 0
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()

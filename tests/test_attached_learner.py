"""A check cell in a kernel that holds the chip: the kernel serves the learner side itself
(coursekit.checking.attached) and check.py, on the CPU, takes its pipes as its learner
process. On a CPU the same plumbing runs (the server reports the CPU backend)."""

from __future__ import annotations

import os
import subprocess
import sys

from coursekit.checking.attached import serve_for_check
from coursekit.facts import ROOT, checker_path


def test_check_py_checks_a_learner_side_served_by_the_calling_process():
    impl = ROOT / "projects" / "foundations" / "solution" / "model.py"
    served = serve_for_check(impl)
    proc = subprocess.Popen(
        [sys.executable, str(checker_path("foundations")), "--stage", "1", "--impl",
         str(impl), "--seed", "4"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env={**os.environ, **served.env()}, pass_fds=served.fds)
    served.handed_over()
    out, err = proc.communicate(timeout=300)
    served.finish()
    assert proc.returncode == 0, out + err
    assert "measured on: CPU figure (cpu)" in out
    assert served.server.module is not None  # the file was imported here, not in a child
    assert not served.thread.is_alive()      # the checker's exit ended the server

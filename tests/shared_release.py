"""One learner release (``python -m autograder release``) per test session, built by the
first test file to ask, under a file lock in the session's shared folder (as
tests/graded_reference.py grades once), and handed to each file as a copy of its own:
a file may run checkers in its copy, plant answers into it or edit it, and no other file
sees that. Four files built their own release before (30-60 s each under load)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from graded_reference import SESSION_ENV

from coursekit.facts import ROOT


def _built() -> Path:
    folder = Path(os.environ.get(SESSION_ENV) or tempfile.mkdtemp(prefix="release-"))
    folder = folder / "release"
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "course"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / "done").is_file():
            shutil.rmtree(out, ignore_errors=True)
            done = subprocess.run([sys.executable, "-m", "autograder", "release", "--out",
                                   str(out)], cwd=ROOT, capture_output=True, text=True,
                                  timeout=600, check=False)
            assert done.returncode == 0, done.stdout + done.stderr
            (folder / "done").write_text("")
    return out


def release_copy(target: Path) -> Path:
    """A copy of the session's release at ``target`` (a folder that does not exist yet)."""
    shutil.copytree(_built(), target, symlinks=True)
    return target

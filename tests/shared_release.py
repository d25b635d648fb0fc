"""One learner release (``python -m autograder release``) per test session, built by the
first test file to ask (tests/session_once.py), and handed to each file as a copy of its own:
a file may run checkers in its copy, plant answers into it or edit it, and no other file
sees that. Every file that reads a release takes it from here (test_autograder_release,
test_release_answers, test_release_scan, test_release_identity, test_release_learner_copy):
the three that built their own until 2026-12-06 made the same command's release three more
times (7-8 s each on an idle core, 30-60 s under load); a copy takes a tenth of a second."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from session_once import session_once

from coursekit.facts import ROOT


def _build(folder: Path) -> str:
    out = folder / "course"
    shutil.rmtree(out, ignore_errors=True)
    done = subprocess.run([sys.executable, "-m", "autograder", "release", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return str(out)


def _built() -> Path:
    return Path(session_once("release", _build))


def release_copy(target: Path) -> Path:
    """A copy of the session's release at ``target`` (a folder that does not exist yet)."""
    shutil.copytree(_built(), target, symlinks=True)
    return target

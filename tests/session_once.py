"""Something costly made once per test session and shared by every pytest-xdist worker:
the first to ask makes it under a file lock in the session's shared folder
(``$COURSE_TESTS_SESSION``, made by the controller: conftest) and saves what ``make``
returns; any other waits on the lock and reads that. A run without the variable (a test
file run by hand with plain python) makes it in a folder of its own.

Used for the graded reference (tests/graded_reference.py) and the learner release
(tests/shared_release.py)."""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

SESSION_ENV = "COURSE_TESTS_SESSION"
_LOADED: dict[str, object] = {}


def session_once(name: str, make: Callable[[Path], object]):
    """What ``make(folder)`` returned (a JSON value), made once per session: ``folder``
    is ``<session>/<name>``, for ``make`` to work in (it may hold what a ``make`` that
    raised left: nothing was saved then, and the next to ask makes it again)."""
    if name not in _LOADED:
        folder = Path(os.environ.get(SESSION_ENV) or tempfile.mkdtemp(prefix="session-"))
        folder = folder / name
        folder.mkdir(parents=True, exist_ok=True)
        saved = folder / "result.json"
        with open(folder / "lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            if not saved.is_file():
                made = make(folder)
                saved.write_text(json.dumps(made))
        _LOADED[name] = json.loads(saved.read_text())
    return _LOADED[name]

"""Session-wide test isolation: tests never write into the learner's own records."""

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config):
    """Before collection (so modules that read these at import see them too): point MLflow
    and the notebook records at a temporary folder, leaving build/mlflow.db and
    build/learner untouched. An explicit setting from the caller wins."""
    tmp = Path(tempfile.mkdtemp(prefix="course-tests-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{tmp / 'mlflow.db'}")
    os.environ.setdefault("COURSE_RECORDS", str(tmp / "learner"))
    # One reference checker run per project and session, shared by the project's tests and
    # the notebooks' check cells (tests/helpers.reference_run).
    os.environ.setdefault("COURSE_CHECK_REUSE", str(tmp / "reference-runs"))


@pytest.fixture
def busy_core():
    """Keep one core spinning, as on a loaded 2-core CI machine."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield
    spinner.kill()
    spinner.wait()

"""Session-wide test isolation: tests never write into the learner's own records."""

import os
import tempfile
from pathlib import Path

import pytest


@pytest.fixture(autouse=True, scope="session")
def isolated_records():
    """Point MLflow and the notebook records at a temporary folder for the whole session,
    so running the suite leaves build/mlflow.db and build/learner untouched."""
    with tempfile.TemporaryDirectory(prefix="course-tests-") as tmp:
        saved = {k: os.environ.get(k) for k in ("MLFLOW_TRACKING_URI", "COURSE_RECORDS")}
        os.environ.setdefault("MLFLOW_TRACKING_URI", f"sqlite:///{Path(tmp) / 'mlflow.db'}")
        os.environ.setdefault("COURSE_RECORDS", str(Path(tmp) / "learner"))
        yield Path(tmp)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

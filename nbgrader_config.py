"""nbgrader configuration for instructors who grade with plain nbgrader.

The course keeps its source notebooks in ``notebooks/`` (not nbgrader's default
``source/<assignment>/``), so the whole folder is one assignment named ``notebooks``:

    nbgrader generate_assignment notebooks     # -> build/nbgrader/release/notebooks/
    # collect submissions into build/nbgrader/submitted/<student>/notebooks/
    nbgrader autograde notebooks               # -> build/nbgrader/autograded/
    nbgrader generate_feedback notebooks

Run from the course root with the venv's ``bin`` on PATH (nbgrader shells out to
``alembic``): ``PATH=$PWD/.venv/bin:$PATH nbgrader ...``. The course's own grader
(``python -m autograder``) uses nbgrader's preprocessors on the same notebooks and adds
what plain nbgrader lacks (sandboxing, per-stage statuses, resumable batches).
"""

import os

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

ROOT = os.path.dirname(os.path.abspath(__file__))
os.makedirs(os.path.join(ROOT, "build", "nbgrader"), exist_ok=True)  # nbgrader won't

c.CourseDirectory.root = ROOT
c.CourseDirectory.source_directory = "."           # {root}/./notebooks/*.ipynb
c.CourseDirectory.release_directory = "build/nbgrader/release"
c.CourseDirectory.submitted_directory = "build/nbgrader/submitted"
c.CourseDirectory.autograded_directory = "build/nbgrader/autograded"
c.CourseDirectory.feedback_directory = "build/nbgrader/feedback"
c.CourseDirectory.solution_directory = "build/nbgrader/solution"
c.CourseDirectory.db_url = f"sqlite:///{ROOT}/build/nbgrader/gradebook.db"
# The generators in notebooks/src/ hold the answers: never copy them into a release.
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback",
                            "src", "*.py"]
c.ExecutePreprocessor.timeout = 900

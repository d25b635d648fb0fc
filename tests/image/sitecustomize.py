"""Test device: this interpreter as an accelerator image that lacks some packages.

With this folder first on ``PYTHONPATH`` and ``COURSE_HIDE_PACKAGES=mlflow,xprof``
(top-level module names, comma-separated), importing one of them, or anything under it,
raises ``ModuleNotFoundError`` and ``find_spec`` finds nothing, as where it is not
installed (the TPU v5e image lacks mlflow, xprof, papermill, jupytext, nbgrader, copydetect
and cosmic-ray). Python imports ``sitecustomize`` at start-up from the first folder on its
path that has one, so every process that inherits the environment (a checker's learner
process, a notebook's subprocess) sees the same image; a ``python -I`` child does not (it
ignores PYTHONPATH).
"""

import os
import sys

HIDDEN = frozenset(p.strip() for p in os.environ.get("COURSE_HIDE_PACKAGES", "").split(",")
                   if p.strip())

# None in sys.modules is Python's own "not importable": `import mlflow` raises
# ModuleNotFoundError (name "mlflow") and importlib.util.find_spec("mlflow") returns None,
# as where it is not installed
for _name in HIDDEN:
    sys.modules[_name] = None

"""Packages the course pins that an accelerator image may not have, named where they are
missing, never a traceback (docs/checkers/reference.md, "JAX versions and accelerator images").

The TPU v5e image ships its own Python and JAX and an index without these; the course runs
there without them, and each feature that needs one says so:

    mlflow      the MLflow record of a run (run records stay JSON files)
    xprof       XProf's second reading of a trace (the JSON trace is still read)
    papermill   running notebooks through a Jupyter kernel (headless runs need none)
    jupytext    building notebooks from their text sources
    nbgrader    the grader's notebook route
    copydetect  ``autograder similar``
    cosmic-ray  ``make mutants``

    mlflow = optional.need("mlflow", "the MLflow record of this run")  # or Absent

A check that skips part of its evidence for a missing package notes it
(``note_skipped``); the checker prints those notes with its summary and writes them to
its --json. Standard library only.
"""

from __future__ import annotations

import importlib

# the course's pinned packages an accelerator image may lack (import names): the TPU v5e
# image's index has none of them
OPTIONAL = ("mlflow", "xprof", "papermill", "jupytext", "nbgrader", "copydetect",
            "cosmic_ray")
# import name -> what pip installs (where they differ)
PIP_NAMES = {"cosmic_ray": "cosmic-ray"}
_SKIPPED: list[str] = []


class Absent(ImportError):
    """A package the course pins is not installed here: names it and what is skipped."""

    def __init__(self, package: str, skipped: str):
        pip = PIP_NAMES.get(package, package)
        super().__init__(f"{pip} is not installed here, so {skipped} is skipped "
                         f"(`pip install {pip}` adds it where a package index has it)",
                         name=package)
        self.package, self.skipped = package, skipped


def need(module: str, skipped: str):
    """``importlib.import_module(module)``, or ``Absent`` when its package is not
    installed (an import error from inside an installed package is raised as it is)."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.partition(".")[0]
        if isinstance(err, Absent) or (err.name or "").partition(".")[0] != top:
            raise
        raise Absent(top, skipped) from None


def absent_from(err: ImportError, skipped: str) -> Absent | None:
    """``err`` as ``Absent`` when it says one of ``OPTIONAL`` is not installed (a command
    that imported it where it is used), else None."""
    if isinstance(err, Absent):
        return err
    top = (err.name or "").partition(".")[0]
    return Absent(top, skipped) if top in OPTIONAL else None


def have(package: str) -> bool:
    """Whether ``package`` imports here."""
    try:
        importlib.import_module(package)
    except ImportError:
        return False
    return True


def note_skipped(err: Absent) -> None:
    """Record, once, that this process skipped something for a missing package."""
    if str(err) not in _SKIPPED:
        _SKIPPED.append(str(err))


def skipped() -> list[str]:
    """What this process skipped for missing packages, in the order noted."""
    return list(_SKIPPED)

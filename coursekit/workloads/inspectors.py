"""Inspectors: checker-named functions that run *in the learner process* and answer with
data about the learner's objects (a mesh, a jaxpr, a checkpoint manager, the process's
global random state), for what cannot cross the bridge as a value.

A check calls ``learner.inspect("pallas-kernel/sites", LearnerFunction("softmax_pallas"),
x)`` (``coursekit.checking.bridge``); the learner process looks the name up here and runs
it on the decoded arguments. An inspector runs beside the learner's code, so what it
answers is a *self-reported fact*: each project's checker lists the inspectors it uses and
cross-checks every answer against what it measures itself where a cross-check exists.

Each project keeps what its checker runs in the learner process in
``coursekit/workloads/remote_<project_with_underscores>.py``: a dict ``INSPECTORS`` (name
-> function) and optionally ``WORKLOADS`` (name -> builder, merged into
``coursekit.workloads.catalog``), names prefixed with the project, so projects do not
edit one shared table. What of it is a stage's answer (a complete train step, the
checker's own reading of a placement) lives in ``coursekit/instructor/remote_<project>.py``
with the same two tables: a learner's release does not hold it, and asking for one of its
names there raises ``GradedByInstructor`` (the check is graded by the instructor).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

import coursekit.workloads as _package
from coursekit.checking.errors import GradedByInstructor
from coursekit.checking.graded import PACKAGE as INSTRUCTOR
from coursekit.checking.graded import available


def _remote_modules():
    """Every ``remote_*`` module: the public ones, then the instructor's where present."""
    for info in sorted(pkgutil.iter_modules(_package.__path__), key=lambda i: i.name):
        if info.name.startswith("remote_"):
            yield importlib.import_module(f"{_package.__name__}.{info.name}")
    if available():
        instructor = importlib.import_module(INSTRUCTOR)
        for info in sorted(pkgutil.iter_modules(instructor.__path__), key=lambda i: i.name):
            if info.name.startswith("remote_"):
                yield importlib.import_module(f"{INSTRUCTOR}.{info.name}")


def project_tables(attribute: str) -> dict[str, Callable]:
    """``attribute`` (INSPECTORS or WORKLOADS) of every ``remote_*`` module, merged."""
    found: dict[str, Callable] = {}
    for module in _remote_modules():
        for name, fn in getattr(module, attribute, {}).items():
            if name in found:
                raise ValueError(f"{attribute} entry {name!r} is defined twice")
            found[name] = fn
    return found


def missing(kind: str, name: str) -> Exception:
    """What asking for an unknown inspector or workload raises: where this copy lacks the
    instructor-only code, the check is graded by the instructor."""
    if not available():
        return GradedByInstructor(f"the {kind} {name!r}")
    return KeyError(f"no {kind} {name!r} in coursekit.workloads.remote_* or "
                    f"{INSTRUCTOR}.remote_*")


def run(name: str, args, kwargs):
    """``INSPECTORS[name](*args, **kwargs)`` (called by the learner process)."""
    table = project_tables("INSPECTORS")
    if name not in table:
        raise missing("inspector", name)
    return table[name](*args, **kwargs)

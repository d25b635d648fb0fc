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
edit one shared table.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable

import coursekit.workloads as _package


def project_tables(attribute: str) -> dict[str, Callable]:
    """``attribute`` (INSPECTORS or WORKLOADS) of every ``remote_*`` module, merged."""
    found: dict[str, Callable] = {}
    for info in sorted(pkgutil.iter_modules(_package.__path__), key=lambda i: i.name):
        if info.name.startswith("remote_"):
            module = importlib.import_module(f"{_package.__name__}.{info.name}")
            for name, fn in getattr(module, attribute, {}).items():
                if name in found:
                    raise ValueError(f"{attribute} entry {name!r} is defined twice")
                found[name] = fn
    return found


def _device(*_args, **_kwargs) -> dict:
    """Where the learner process computes (``coursekit.measure.environment.device_facts``)."""
    from coursekit.measure.environment import device_facts
    return device_facts()


BUILTIN = {"course/device": _device}


def run(name: str, args, kwargs):
    """``INSPECTORS[name](*args, **kwargs)`` (called by the learner process)."""
    table = {**BUILTIN, **project_tables("INSPECTORS")}
    if name not in table:
        raise KeyError(f"no inspector {name!r} in coursekit.workloads.remote_*")
    return table[name](*args, **kwargs)

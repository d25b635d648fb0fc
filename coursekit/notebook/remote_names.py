"""A test cell's names, as the grader's test process sees them: the learner's notebook runs
in another process (``coursekit.notebook.cell_server``), and only data comes back.

``resolve`` builds the namespace a test cell runs in from its free names
(``coursekit.notebook.free_names``): a name the course binds by import is imported here,
fresh; every other name is asked of the learner process, which answers with data (JSON
and raw array buffers through ``coursekit.checking.codec``, never a pickle), or says the
name is a callable (a ``NotebookFunction`` here: calling it runs the learner's function
there, on arguments sent as data, and returns its result as data), a module (an opaque
``Handle``: this process never imports a module a learner names) or missing (the name
stays unbound: the cell raises ``NameError`` as it would in the notebook). Anything that
is not data stays in the learner process as a ``Handle``, which can only be passed back.

An exception raised by the learner's code in a call is raised here as the same built-in
exception class with the learner process's message (``NotImplementedError`` stays "not
yet"); any other class becomes ``LearnerCodeError``. A learner process that died raises
``LearnerProcessDied``.
"""

from __future__ import annotations

import builtins
import importlib

from coursekit.checking.codec import Handle, LearnerFunction
from coursekit.checking.errors import LearnerCodeError, LearnerProcessDied


class NotebookFunction:
    """A callable of the learner's notebook (a function it defines, a class, a course
    helper it holds), called there by name."""

    def __init__(self, process, name: str):
        self.__process, self.__name__ = process, name

    def __call__(self, *args, **kwargs):
        try:
            return self.__process.request("call", self.__name__, _sendable(list(args)),
                                          _sendable(dict(kwargs)))
        except LearnerProcessDied:
            raise
        except LearnerCodeError as err:
            raise as_raised(err) from None

    def inspect(self, inspector: str, *args):
        """The inspector ``inspector`` (``coursekit.workloads.inspectors``) run in the
        learner process on this callable and ``args``; its answer, as data."""
        try:
            return self.__process.request("inspect", inspector,
                                          [LearnerFunction(self.__name__), *_sendable(args)])
        except LearnerProcessDied:
            raise
        except LearnerCodeError as err:
            raise as_raised(err) from None

    def __repr__(self) -> str:
        return f"<{self.__name__} in the learner's notebook>"


def _sendable(value):
    """``value`` with every NotebookFunction in it replaced by its name reference (the
    learner process looks it up in the notebook's namespace)."""
    if isinstance(value, NotebookFunction):
        return LearnerFunction(value.__name__)
    if type(value) in (list, tuple):
        return type(value)(_sendable(v) for v in value)
    if type(value) is dict:
        return {k: _sendable(v) for k, v in value.items()}
    return value


def as_raised(err: LearnerCodeError) -> BaseException:
    """The exception a test cell sees for an error the learner's code raised."""
    cls = getattr(builtins, err.exc_type or "", None)
    if isinstance(cls, type) and issubclass(cls, Exception) and cls.__module__ == "builtins":
        try:
            return cls(str(err))
        except Exception:  # noqa: BLE001 - a built-in that wants other arguments
            pass
    return err


def imported(dotted: str):
    """``import a.b`` / ``from a.b import c`` done here: the module or attribute."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {dotted}")


def resolve(process, names: list[str], imports: dict[str, str]) -> dict:
    """The values of ``names`` for a test cell: course imports imported here, the rest
    read from the learner process (``process``: a ``bridge.LearnerProcess`` serving the
    notebook). A name the learner process lacks is left out."""
    out = {}
    asked = [n for n in names if n not in imports]
    for name in names:
        if name in imports:
            out[name] = imported(imports[name])
    if not asked:
        return out
    answers = process.request("names", "", names=asked)
    for name in asked:
        info = answers.get(name) if isinstance(answers, dict) else None
        if not isinstance(info, dict) or info.get("missing"):
            continue
        if info.get("callable"):
            out[name] = NotebookFunction(process, name)
        elif info.get("module"):
            out[name] = Handle(0, "module", name)
        elif "value" in info:
            out[name] = info["value"]
        else:  # the learner's value could not be read: the cell sees why at its first use
            out[name] = Handle(0, "unreadable", str(info.get("error", "")))
    return out

"""Let a notebook run to its end while the learner's code is still unfinished.

Notebook cells call the learner's functions (so a learner sees their own code at work).
A stub raises ``NotImplementedError("stage N: ...")``; a cleared nbgrader exercise raises
a bare ``NotImplementedError()``. Instead of a traceback that stops Run All, the cell
prints one ``not yet: ...`` line and the notebook goes on; cells that need an earlier
result say so the same way.

    impl = load_learner(IMPL)                    # a module, or a stand-in that says "not yet"
    m = attempt(impl.time_fn, f, x, iters=10)    # the result, or a Pending (falsy)
    with not_yet("plot of the raw samples"):
        need(m)                                  # raise NotYet when m is Pending
        ...

Only "not finished yet" is caught, and a package this machine lacks
(``coursekit.compat.optional.Absent``: the block prints ``skipped: ...`` naming it). Any
other exception is a real bug and propagates, so it fails a headless run against the
reference solution.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from coursekit.checking.errors import LearnerCodeError
from coursekit.checking.learner import learner_frame, load_impl
from coursekit.compat.optional import Absent

PREFIX = "not yet:"


class NotYet(Exception):
    """An earlier result this cell needs is not available yet."""


class Pending:
    """What ``attempt`` returns when the learner's function is not implemented yet.
    Falsy, so ``if result:`` reads naturally; ``need(result)`` turns it into NotYet."""

    def __init__(self, reason: str):
        self.reason = reason

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<not yet: {self.reason}>"


_NEEDS = ("needs an earlier result: ", "needs an earlier cell: ")


def _root(reason: str) -> str:
    """The first cause of a chain of "needs an earlier ..." reasons."""
    while reason.startswith(_NEEDS):
        reason = reason.split(": ", 1)[1]
    return reason


def _reason(err: BaseException) -> str:
    text = str(err).strip() or "an exercise still holds its `raise NotImplementedError()`"
    if isinstance(err, LearnerCodeError):
        return text[len(PREFIX):].strip() if text.startswith(PREFIX) else text
    if isinstance(err, NotYet):
        return text
    return f"{text} ({learner_frame(err)})"


def _unfinished(err: BaseException) -> bool:
    return isinstance(err, (NotImplementedError, NotYet)) or (
        isinstance(err, LearnerCodeError) and err.kind == "not-implemented")


def attempt(fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, or a ``Pending`` (after printing ``not yet: ...``) when the
    call raises NotImplementedError or needs a result that is still pending."""
    for value in (*args, *kwargs.values()):
        if isinstance(value, Pending):
            print(f"{PREFIX} {getattr(fn, '__name__', 'this step')} needs an earlier "
                  f"result: {_root(value.reason)}")
            return Pending(value.reason)
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001 - re-raised unless it means "unfinished"
        if not _unfinished(err):
            raise
        reason = _reason(err)
        print(f"{PREFIX} {reason}")
        return Pending(reason)


def need(*values) -> None:
    """Raise ``NotYet`` when any value is a ``Pending`` or the outcome of a ``not_yet``
    block that did not finish."""
    for value in values:
        if isinstance(value, Pending):
            raise NotYet(f"needs an earlier result: {_root(value.reason)}")
        if isinstance(value, _Outcome) and not value.done:
            if value.absent is not None:  # skipped for a missing package: so is this
                raise value.absent
            raise NotYet(f"needs an earlier cell: {_root(value.reason)}")


class _Outcome:
    done = True
    reason = ""
    absent: Absent | None = None  # the missing package that skipped the block


def ready(*values) -> bool:
    return not any(isinstance(v, Pending) or (isinstance(v, _Outcome) and not v.done)
                   for v in values)


@contextmanager
def not_yet(label: str = ""):
    """Run a block; when learner code in it is unfinished, print ``not yet: <label> ...``
    and carry on. ``with not_yet("plot") as outcome:``; ``outcome.done`` says whether the
    block ran to its end."""
    outcome = _Outcome()
    try:
        yield outcome
    except Absent as err:  # a package this machine lacks (an accelerator image): skipped
        outcome.done, outcome.reason, outcome.absent = False, str(err), err
        print(f"skipped: {label + ': ' if label else ''}{err}")
    except Exception as err:  # noqa: BLE001 - re-raised unless it means "unfinished"
        if not _unfinished(err):
            raise
        outcome.done, outcome.reason = False, _reason(err)
        where = f"{label}: " if label else ""
        print(f"{PREFIX} {where}{outcome.reason}")


class _Unloadable:
    """Stands in for a learner module that does not import: every function it is asked
    for raises NotImplementedError with the import error's message."""

    def __init__(self, error: LearnerCodeError):
        self._error = error

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        message = f"{name}: your file does not import yet ({self._error})"

        def unavailable(*_args, **_kwargs):
            raise NotImplementedError(message)
        unavailable.__name__ = name
        return unavailable


def load_learner(path: str | Path):
    """Import the learner's file (``coursekit.checking.learner.load_impl``). When it does not
    import, print the named error and its hint and return a stand-in whose functions report
    ``not yet``, so the rest of the notebook still runs."""
    try:
        return load_impl(path)
    except LearnerCodeError as err:
        print(f"{PREFIX} {err}")
        if err.hint:
            print(f"    hint: {err.hint}")
        return _Unloadable(err)

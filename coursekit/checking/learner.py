"""Import a learner's file by path and turn its failures into named, readable errors.

A learner file is code we do not trust to be finished: it may not parse, may raise at
import, may lack a function, or may raise ``NotImplementedError`` from a stub. Each case
becomes a ``LearnerCodeError`` whose message names the file, the line and the function,
so a check prints one clear line instead of a traceback wall.
"""

from __future__ import annotations

import contextlib
import dis
import importlib.util
import inspect
import sys
import traceback
import types
import uuid
from pathlib import Path
from types import ModuleType

from coursekit.checking.errors import (
    FORBIDDEN,
    GRADED_BY_INSTRUCTOR,
    GradedByInstructor,
    LearnerCodeError,
    ReachRefused,
)


def load_impl(path: str | Path) -> ModuleType:
    """Import the file at ``path`` as a fresh module (never cached between calls)."""
    path = Path(path).resolve()
    if not path.is_file():
        raise LearnerCodeError("missing-file", f"no file at {path}",
                               "pass --impl with the path of your model.py")
    name = f"learner_impl_{uuid.uuid4().hex[:8]}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look the module up by name
    try:
        spec.loader.exec_module(module)
    except SyntaxError as err:
        sys.modules.pop(name, None)
        raise LearnerCodeError(
            "syntax", f"{path.name}, line {err.lineno}: syntax error: {err.msg}",
            "fix the line shown; the file must import before any check can run") from None
    except ReachRefused as err:  # the course's code reached by a name built at run time
        sys.modules.pop(name, None)
        raise LearnerCodeError(FORBIDDEN, f"{learner_frame(err, path)}: {err}", err.hint,
                               "ReachRefused") from None
    except Exception as err:  # noqa: BLE001 - any import-time failure is the learner's
        sys.modules.pop(name, None)
        where = learner_frame(err, path)
        raise LearnerCodeError(
            "import", f"{where}: {type(err).__name__} while importing: {err}",
            "the file must import cleanly; move experiments under `if __name__ == '__main__':`"
        ) from None
    return module


def get_function(module: ModuleType, name: str):
    """The learner function ``name``, or a LearnerCodeError naming what is missing."""
    fn = getattr(module, name, None)
    if fn is None or not callable(fn):
        file = Path(getattr(module, "__file__", "?")).name
        raise LearnerCodeError(
            "missing-function", f"{file}: function `{name}` is missing",
            f"define `def {name}(...)` as in the starter file; keep its name and arguments")
    return fn


def learner_frame(err: BaseException, path: Path | str | None = None) -> str:
    """'model.py, line 12, in time_fn' for the deepest frame inside the learner's file
    (or the deepest frame at all when ``path`` is None or never appears)."""
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return Path(str(path)).name if path else "?"
    chosen = frames[-1]
    if path is not None:
        inside = [f for f in frames if Path(f.filename).resolve() == Path(path).resolve()]
        if inside:
            chosen = inside[-1]
    return f"{Path(chosen.filename).name}, line {chosen.lineno}, in {chosen.name}"


def explain_exception(err: BaseException, impl_path: Path | str) -> LearnerCodeError:
    """Turn an exception raised while running learner code into a LearnerCodeError."""
    if isinstance(err, LearnerCodeError):
        return err
    if isinstance(err, ReachRefused):  # what a forbidden rule keeps from the learner's code
        return LearnerCodeError(FORBIDDEN, f"{learner_frame(err, impl_path)}: {err}",
                                err.hint, "ReachRefused")
    if isinstance(err, GradedByInstructor):  # instructor-only code this copy lacks
        return LearnerCodeError(GRADED_BY_INSTRUCTOR, str(err), "", "GradedByInstructor")
    where = learner_frame(err, impl_path)
    backend = _backend_refused(err)
    if backend:
        return LearnerCodeError(
            "backend", f"JAX could not open its {backend} backend in the process that runs "
            f"your code ({where}): {str(err).splitlines()[0][:300]}",
            "another process holds the chip (one process at a time can): end it (a notebook "
            "kernel that ran a JAX cell holds it), or check on the CPU with "
            "JAX_PLATFORMS=cpu" if "lockfile" in str(err) else
            f"this machine's JAX has no working {backend} backend: unset JAX_PLATFORMS (JAX "
            "then picks what it finds) or set it to cpu", type(err).__name__)
    if isinstance(err, NotImplementedError):
        text = str(err) or "not implemented yet"
        return LearnerCodeError("not-implemented", f"not yet: {text} ({where})",
                                "replace the `raise NotImplementedError` with your code",
                                "NotImplementedError")
    return LearnerCodeError("exception", f"{where}: {type(err).__name__}: {err}",
                            "run the function by hand on a small input to see the error",
                            type(err).__name__)


def _backend_refused(err: BaseException) -> str:
    """The backend JAX could not open, when ``err`` is that refusal ("Unable to initialize
    backend 'tpu': ... libtpu multi-process lockfile"), else ""."""
    text = str(err) if isinstance(err, RuntimeError) else ""
    marker = "Unable to initialize backend '"
    if marker not in text:
        return ""
    return text.split(marker, 1)[1].split("'", 1)[0]
@contextlib.contextmanager
def on_input(what: str):
    """Learner code that raises, or whose process dies, inside this block is reported with
    the checker's input it ran on (``what``: its shape and what it stands for), so the
    learner can make the same input and see the error by hand; "run it on a small input"
    cannot reproduce a failure on the checker's input."""
    try:
        yield
    except LearnerCodeError as err:
        if err.kind in ("exception", "crash"):
            err.args = (f"{err.args[0] if err.args else err} (on the checker's input: "
                        f"{what})", *err.args[1:])
            err.hint = (f"call it by hand on {what} to see the error" if err.kind ==
                        "exception" else f"it crashed the process running it, on {what}: "
                        "call it by hand on such an input")
        raise


# Opcodes around ``raise NotImplementedError("...")`` that carry no work of their own.
_NO_WORK = {"RESUME", "NOP", "CACHE", "PUSH_NULL", "EXTENDED_ARG", "PRECALL"}


def is_stub(fn) -> bool:
    """``fn`` is a plain function whose body only raises ``NotImplementedError`` (with a
    constant message or none), as every function of a starter file does: a call of it,
    whatever its arguments, runs nothing but that raise."""
    if not isinstance(fn, types.FunctionType) or fn.__code__.co_flags & (
            inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        return False
    ops = [(i.opname, i.argval) for i in dis.get_instructions(fn) if i.opname not in _NO_WORK]
    return (len(ops) >= 2 and ops[0] == ("LOAD_GLOBAL", "NotImplementedError")
            and ops[-1][0] == "RAISE_VARARGS"
            and [op for op, _ in ops[1:-1]] in ([], ["CALL"], ["LOAD_CONST", "CALL"]))


def unwritten(module: ModuleType, impl_path: Path | str) -> dict[str, LearnerCodeError]:
    """The module's functions still the starter's stub, each with the error a call of it
    raises (the stub is called, with ``None`` for every required argument: it runs
    nothing but its raise). Run where the learner's module lives."""
    found = {}
    for name, fn in list(vars(module).items()):
        if name.startswith("__") or not is_stub(fn):
            continue
        try:
            params = inspect.signature(fn).parameters.values()
            args = [None for p in params if p.default is p.empty
                    and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            kwargs = {p.name: None for p in params
                      if p.default is p.empty and p.kind is p.KEYWORD_ONLY}
            fn(*args, **kwargs)
        except NotImplementedError as err:
            found[name] = explain_exception(err, impl_path)
        except Exception:  # noqa: BLE001 - not the starter's raise after all (or a signature
            pass           # set by hand that cannot be read): its calls will say
    return found


def unwritten_report(module: ModuleType, impl_path: Path | str) -> dict[str, dict]:
    """``unwritten`` as data, as the learner process reports it (``bridge.RemoteModule``
    reads it back)."""
    return {name: {"kind": e.kind, "message": str(e), "hint": e.hint, "type": e.exc_type}
            for name, e in unwritten(module, impl_path).items()}


def require_written(module, *names: str) -> None:
    """Raise, before a check prepares anything, the error a call of the first of ``names``
    that is still the starter's stub would raise (a missing one is named as by
    ``get_function``): an unwritten stage hears "not yet" at once, not after the
    checker's own reference runs. Only ever the verdict that call would give."""
    for name in names:
        get_function(module, name)
        known = getattr(module, "__unwritten__", None)
        if isinstance(known, dict):
            err = known.get(name)
        elif isinstance(module, ModuleType):
            err = unwritten(module, getattr(module, "__file__", "")).get(name)
        else:
            err = None
        if isinstance(err, LearnerCodeError):
            raise err

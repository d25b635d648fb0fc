"""A notebook exercise that calls the course's own helper for its answer, found by reading
the notebook's cells (``coursekit.checking.forbidden``'s scanner and its
``NOTEBOOK_RULES``; reading is not running).

The cells are read as one module, in the order they ran, each function as its last
binding left it (a learner who rewrote the exercise is read by the rewrite, one who
assigned another function to its name by that one): the exercise, and every function of
the cells it reaches, may not use what the exercise's rules name, by import, attribute,
alias or a constant ``getattr``. What the notebook's own course cells define
(``forbidden.NOTEBOOK_CELLS``: ``reference_grads``, ``impl.cost_from_compiler``) counts by
its name. A name built at run time, or a module a cell writes and then imports, is out
of reach of this reading, as it is of the projects'.

Two places ask, with the same reading:

* the exercise's visible test cell, wherever it runs: ``refuse_borrowed(notebook,
  exercise)`` raises an ``AssertionError`` naming the helper (the learner's copy: the
  cells IPython ran; the grader's test process, ``graded_run``: the cells it sent to the
  learner process before the test, ``CELLS_RUN``);
* the grader (``autograder.notebook``): every question whose test reads an exercise with
  rules scores 0 when ``findings`` holds anything, the message in its feedback.
"""

from __future__ import annotations

import ast
import dataclasses

from coursekit.checking import forbidden
from coursekit.notebook.free_names import _without_magics

# The cells the grader's test process has run in the learner process so far (learner and
# course cells, in order): set by coursekit.notebook.graded_run before each test.
CELLS_RUN: list[str] = []

_DEFINED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _names_bound(node: ast.stmt) -> list[str]:
    """The names a top-level definition or plain assignment binds."""
    if isinstance(node, _DEFINED):
        return [node.name]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    return []


def _last_definitions(sources: list[str]) -> ast.Module:
    """The cells that parse, as one module in which a function or class bound again
    (by a later definition or assignment) is left out: the scanner reads a name by its
    last binding, as the notebook runs it."""
    body = []
    for source in sources:
        try:
            body += ast.parse(_without_magics(source)).body
        except (SyntaxError, ValueError):
            continue  # a cell that does not parse ran nothing
    last = {name: i for i, n in enumerate(body) for name in _names_bound(n)}
    return ast.Module(body=[n for i, n in enumerate(body)
                            if not isinstance(n, _DEFINED) or last[n.name] == i],
                      type_ignores=[])


def findings(notebook: str, exercise: str, sources: list[str]) -> list[forbidden.Finding]:
    """Where ``exercise`` (and what it reaches) uses what ``notebook``'s rules for it
    name, in ``sources`` (the code cells that ran before its test, in order)."""
    rules = forbidden.notebook_rules(notebook, exercise)
    if not rules:
        return []
    module = _last_definitions(sources)
    # a name the course cells define is read as the notebook's own: bound first, so a
    # later ``def`` (which binds nothing for the scanner) leaves it named
    own = sorted({r.name.split(".")[0] for r in rules if r.module == forbidden.NOTEBOOK_CELLS})
    header = [f"import {forbidden.NOTEBOOK_CELLS}"] + [
        f"{name} = {forbidden.NOTEBOOK_CELLS}.{name}" for name in own]
    found = forbidden.scan("\n".join([*header, ast.unparse(module)]), rules)
    return [dataclasses.replace(f, text=f.text.split(f" = {forbidden.NOTEBOOK_CELLS}.")[0])
            for f in found if f.line > len(header)]


def message(exercise: str, found: list[forbidden.Finding]) -> str:
    """What the learner reads: which helper, where, and that the exercise is to compute
    it (never how)."""
    rules = sorted({f.rule for f in found}, key=lambda r: r.qualified)
    names = ", ".join(r.qualified.replace(f"{forbidden.NOTEBOOK_CELLS}.", "the notebook's ")
                      for r in rules)
    uses = "; ".join(dict.fromkeys(
        f"{f.text}" + (f" (in {f.function})" if f.function not in (None, exercise) else "")
        for f in found))
    why = "; ".join(dict.fromkeys(r.why for r in rules))
    return (f"{exercise} uses {names} ({uses}): {why}. Write {exercise} without it; "
            "this question scores 0 until then")


def refuse_borrowed(notebook: str, exercise: str) -> None:
    """Raise ``AssertionError`` when ``exercise``, as the cells run so far define it,
    uses a course helper its rules name; nothing when the cells cannot be read here."""
    sources = _cells_run()
    found = findings(notebook, exercise, sources) if sources else []
    if found:
        raise AssertionError(message(exercise, found))


def _cells_run() -> list[str]:
    """The cells this kernel ran (IPython's input history), or those the grader's test
    process sent (``CELLS_RUN``)."""
    if CELLS_RUN:
        return list(CELLS_RUN)
    try:
        from IPython import get_ipython
    except ImportError:
        return []
    shell = get_ipython()
    history = shell.user_ns.get("In") if shell is not None else None
    return [str(s) for s in history[1:]] if isinstance(history, list) else []

"""Which names a test cell reads from outside itself, and which of them the course binds
by import: what the grader's test process asks the learner's notebook for, and what it
imports fresh instead.

A test cell runs in a test process that never runs learner code
(``coursekit.notebook.graded_run``). Every name it reads and does not bind itself (at the
top level, or as a global read from inside a function it defines) is *free*
(``free_names``, by the compiler's own symbol tables). A free name is then, in order:

* a builtin: the test process's own (a notebook that rebinds ``float`` changes nothing);
* bound by the course's import statements (``course_imports``: the release's own cells,
  not the learner's answers, where the name's last binding is an import): imported fresh
  in the test process (``np``, ``jax``, ``record_prediction``);
* anything else: read from the learner's notebook, as data or as a function called there.
"""

from __future__ import annotations

import ast
import builtins
import symtable


def _without_magics(source: str) -> str:
    """The cell with IPython magics and shell escapes (``%``, ``!`` lines) left out."""
    return "\n".join(line for line in source.split("\n")
                     if not line.lstrip().startswith(("%", "!")))


def bound_names(source: str) -> set[str]:
    """Names the cell binds at its top level (assignments, defs, classes, imports)."""
    try:
        table = symtable.symtable(_without_magics(source), "<cell>", "exec")
    except SyntaxError:
        return set()
    return {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}


def free_names(source: str) -> list[str]:
    """Names ``source`` reads that it does not bind and that are not builtins, sorted;
    [] for a cell that does not parse (it fails the same way wherever it runs)."""
    try:
        table = symtable.symtable(_without_magics(source), "<cell>", "exec")
    except SyntaxError:
        return []
    bound = {s.get_name() for s in table.get_symbols() if s.is_assigned() or s.is_imported()}
    found: set[str] = set()

    def walk(scope, top: bool) -> None:
        for s in scope.get_symbols():
            name = s.get_name()
            if not s.is_referenced() or name in bound:
                continue
            if top or s.is_global():
                found.add(name)
        for child in scope.get_children():
            walk(child, False)

    walk(table, True)
    return sorted(n for n in found if not hasattr(builtins, n))


def _top_level_bindings(tree: ast.Module) -> list[tuple[str, str | None]]:
    """(name, dotted import or None) for each top-level binding of ``tree``, in order."""
    out: list[tuple[str, str | None]] = []
    for node in tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                out.append((a.asname or top, a.name if a.asname else top))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out += [(a.asname or a.name, f"{node.module}.{a.name}")
                    for a in node.names if a.name != "*"]
        else:  # an import nested under if/try/with counts as a plain binding
            out += [(name, None) for name in sorted(bound_names(ast.unparse(node)))]
    return out


def course_imports(cells: list[tuple[str, bool]]) -> dict[str, str]:
    """name -> dotted module or attribute, for the names the course's own cells bind by
    import (last binding an import) and no answer cell binds. ``cells``: (source, is an
    answer cell) for every code cell of the released notebook, in order."""
    imports: dict[str, str | None] = {}
    answered: set[str] = set()
    for source, is_answer in cells:
        try:
            tree = ast.parse(_without_magics(source))
        except SyntaxError:
            continue
        if is_answer:
            answered |= bound_names(source)
            continue
        for name, dotted in _top_level_bindings(tree):
            imports[name] = dotted
    return {n: d for n, d in sorted(imports.items()) if d and n not in answered}

"""Every arrow points down: the imports between the course's own modules (everything in
coursekit/ and autograder/) follow one table of floors (``FLOORS`` below), and no modules
import each other in a circle. What each floor holds, what counts as an arrow and how the
table is read: docs/architecture.md ("The layers"), with two paths traced through them.

One home per mechanism: the checker contract's exceptions are imported from
``coursekit.checking.errors`` only, and ``prctl`` is called through ``coursekit.procctl``
only (anywhere in the course's code, checkers, tests and notebook sources).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from coursekit.facts import ROOT

PACKAGES = ("coursekit", "autograder")
ALIASES = {"autograder_protocol": "coursekit.protocol"}
FLOORS = (
    ("ground", ("coursekit", "coursekit.facts", "coursekit.protocol", "coursekit.procctl",
                "coursekit.chip_turn")),
    ("compat", ("coursekit.compat.*",)),
    ("measure", ("coursekit.measure.*",)),
    ("records", ("coursekit.provenance", "coursekit.provenance.records")),
    ("checking", ("coursekit.checking.*",)),
    ("workloads", ("coursekit.workloads.*",)),
    ("instructor", ("coursekit.instructor.*",)),
    ("checker", ("coursekit.checking.contract", "coursekit.checking.bridge",
                 "coursekit.checking.learner_server", "coursekit.checking.planted",
                 "coursekit.checking.zygote", "coursekit.checking.device",
                 "coursekit.checking.attached")),
    ("provenance", ("coursekit.provenance.*",)),
    ("apps", ("coursekit.notebook.*", "coursekit.portfolio.*", "coursekit.authoring.*")),
    ("autograder", ("autograder.*",)),
    ("commands", ("coursekit.commands.*",)),
)


@dataclass(frozen=True)
class Arrow:
    source: str   # importing module
    target: str   # imported module (or package whose __init__ the import runs)
    file: str     # the importing file, relative to the walked root
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.source} imports {self.target}"


def module_files(root: Path, packages=PACKAGES) -> dict[str, Path]:
    """module name -> file, for every .py file of ``packages`` under ``root``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def arrows_of(name: str, path: Path, known: dict, root: Path, packages=PACKAGES,
              aliases=ALIASES) -> list[Arrow]:
    """Every arrow from module ``name`` (file ``path``) to a module of ``packages``,
    at any depth of the file: module level, functions, try/except, if."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    rel = path.relative_to(root).as_posix()
    out = []

    def add(target: str, line: int) -> None:
        target = aliases.get(target, target)
        if target.split(".")[0] not in packages:
            return
        parts = target.split(".")
        own = {".".join(name.split(".")[:i]) for i in range(1, len(name.split(".")) + 1)}
        for i in range(1, len(parts) + 1):  # the packages an import runs, then the module
            step = ".".join(parts[:i])
            if step not in own and (step in known or i == len(parts)):
                out.append(Arrow(name, step, rel, line))

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the importing module's package upwards
                base = here[:len(here) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            module = aliases.get(module, module)
            for alias in node.names:  # `from pkg import sub` imports the submodule
                sub = f"{module}.{alias.name}"
                add(sub if sub in known else module, node.lineno)
    return sorted(set(out), key=lambda a: (a.line, a.target))


def all_arrows(root: Path, packages=PACKAGES, aliases=ALIASES) -> tuple[dict, list[Arrow]]:
    known = module_files(root, packages)
    arrows = [a for name, path in known.items()
              for a in arrows_of(name, path, known, root, packages, aliases)]
    return known, arrows


def floor_of(name: str, floors=FLOORS) -> int | None:
    """The floor of module ``name``: a plain entry naming it, else the ``pkg.*`` entry of
    its nearest package; None when the table does not place it."""
    for level, (_, entries) in enumerate(floors):
        if name in entries:
            return level
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        wildcard = ".".join(parts[:i]) + ".*"
        for level, (_, entries) in enumerate(floors):
            if wildcard in entries:
                return level
    return None


def unplaced(known: dict, arrows: list[Arrow], floors=FLOORS) -> list[str]:
    names = set(known) | {a.target for a in arrows}
    return sorted(n for n in names if floor_of(n, floors) is None)


def upward(arrows: list[Arrow], floors=FLOORS) -> list[str]:
    """Each arrow to a higher floor, named by file and line."""
    out = []
    for a in arrows:
        src, dst = floor_of(a.source, floors), floor_of(a.target, floors)
        if src is not None and dst is not None and dst > src:
            out.append(f"{a} (floor {floors[src][0]} -> {floors[dst][0]}, which is above it)")
    return out


def circles(known: dict, arrows: list[Arrow]) -> list[list[str]]:
    """Strongly connected components of more than one module (or a module importing
    itself) in the graph of every arrow between known modules; each as the arrows that
    close it."""
    graph: dict[str, set[str]] = {n: set() for n in known}
    for a in arrows:
        if a.target in known:
            graph[a.source].add(a.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []

    def connect(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1 or v in graph[v]:
                components.append(set(members))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [[str(a) for a in sorted(arrows, key=lambda a: (a.file, a.line, a.target))
             if a.source in c and a.target in c] for c in components]


@pytest.fixture(scope="module")
def course():
    return all_arrows(ROOT)


def test_every_module_has_a_floor(course):
    known, arrows = course
    missing = unplaced(known, arrows)
    assert not missing, f"not in tests/test_layers.py's FLOORS: {missing}"


def test_every_arrow_points_down(course):
    known, arrows = course
    wrong = upward(arrows)
    assert not wrong, "imports that point up a floor:\n" + "\n".join(wrong)


def test_no_import_circles(course):
    known, arrows = course
    found = circles(known, arrows)
    assert not found, "modules that import each other in a circle:\n" + "\n\n".join(
        "\n".join(c) for c in found)


def test_the_walk_sees_lazy_and_fallback_imports(course):
    """The table is checked against the real graph, arrows the old layout had included:
    a lazy import, the sandbox copy's name, a package an import runs."""
    known, arrows = course
    seen = {(a.source, a.target) for a in arrows}
    assert ("coursekit.checking.contract", "coursekit.checking.bridge") in seen  # lazy
    assert ("coursekit.checking.wire", "coursekit.protocol") in seen  # try/except ImportError
    assert ("autograder.runner", "coursekit.protocol") in seen  # autograder_protocol
    assert ("coursekit.workloads.capstone", "coursekit.provenance") in seen  # its package


def test_the_walker_catches_an_upward_arrow_and_a_circle(tmp_path):
    """A planted package: a lazy import up a floor, a circle through a relative import and
    an ``except ImportError`` fallback, and an alias. The walker must name each."""
    pkg = tmp_path / "pkgx"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""planted"""\n')
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "low.py").write_text("import os\n\n\ndef later():\n"
                                "    from pkgx.high import thing\n    return thing\n")
    (pkg / "high.py").write_text("import pkgx_copy\n\nthing = 1\n")
    (pkg / "sub" / "a.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("try:\n    import pkgx.sub.a\nexcept ImportError:\n"
                                      "    pass\n")
    floors = (("bottom", ("pkgx", "pkgx.low", "pkgx.base")),
              ("top", ("pkgx.high", "pkgx.sub.*")))
    aliases = {"pkgx_copy": "pkgx.base"}
    known, arrows = all_arrows(tmp_path, ("pkgx",), aliases)
    assert set(known) == {"pkgx", "pkgx.sub", "pkgx.low", "pkgx.high", "pkgx.sub.a",
                          "pkgx.sub.b"}

    assert upward(arrows, floors) == [
        "pkgx/low.py:5: pkgx.low imports pkgx.high (floor bottom -> top, which is above it)"]
    assert unplaced(known, arrows, floors) == []
    assert ("pkgx.high", "pkgx.base") in {(a.source, a.target) for a in arrows}  # alias
    assert circles(known, arrows) == [["pkgx/sub/a.py:1: pkgx.sub.a imports pkgx.sub.b",
                                       "pkgx/sub/b.py:2: pkgx.sub.b imports pkgx.sub.a"]]

    (pkg / "sub" / "b.py").write_text("")  # the circle broken, the arrow fixed
    (pkg / "low.py").write_text("import os\n")
    known, arrows = all_arrows(tmp_path, ("pkgx",), aliases)
    assert upward(arrows, floors) == [] and circles(known, arrows) == []

    (pkg / "new.py").write_text("")  # a module the table does not place
    known, arrows = all_arrows(tmp_path, ("pkgx",), aliases)
    assert unplaced(known, arrows, floors) == ["pkgx.new"]


# --- one home per mechanism ----------------------------------------------------------

ERRORS = "coursekit.checking.errors"
PROCCTL = "coursekit.procctl"
# where the course's Python lives (checkers and their tests, notebook sources, benchmarks)
CODE = ("coursekit", "autograder", "projects", "tests", "notebooks/src", "bench", "scripts")


def exception_names(root: Path = ROOT) -> set[str]:
    """The names ``coursekit.checking.errors`` defines (its classes and constants)."""
    tree = ast.parse((root / "coursekit/checking/errors.py").read_text())
    names = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
              if isinstance(t, ast.Name) and t.id.isupper()}
    return names


def strays(root: Path, names: set[str], folders=CODE) -> list[str]:
    """Imports of an errors name from another module, and prctl called anywhere but
    ``coursekit/procctl.py`` (``.prctl(`` on anything that is not that module)."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in path.parts or "starter" in path.parts:
                continue
            rel = path.relative_to(root).as_posix()
            try:
                tree = ast.parse(path.read_text())
            except SyntaxError:
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module != ERRORS and any(
                        a.name in names for a in node.names) and (node.module or "").startswith(
                        ("coursekit.", "autograder.")):
                    found.append(f"{rel}:{node.lineno}: imports "
                                 f"{sorted(a.name for a in node.names if a.name in names)} "
                                 f"from {node.module}, not {ERRORS}")
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and node.func.attr == "prctl" and rel != "coursekit/procctl.py"
                        and not (isinstance(node.func.value, ast.Name)
                                 and node.func.value.id == "procctl")):
                    found.append(f"{rel}:{node.lineno}: calls prctl itself, not {PROCCTL}")
    return found


def test_exceptions_and_prctl_have_one_home():
    """An exception of the checker contract is imported from coursekit.checking.errors
    only (a module that uses one does not pass it on); prctl is called through
    coursekit.procctl only (no raw option numbers, no second wrapper)."""
    names = exception_names()
    assert {"CheckFailed", "TamperEvidence", "LearnerCodeError"} <= names
    found = strays(ROOT, names)
    assert not found, "\n".join(found)


def test_the_home_check_catches_a_stray(tmp_path):
    (tmp_path / "coursekit/checking").mkdir(parents=True)
    (tmp_path / "coursekit/checking/errors.py").write_text("class CheckFailed(Exception):\n"
                                                           "    pass\n")
    (tmp_path / "coursekit/a.py").write_text(
        "import ctypes\nfrom coursekit.checking.bridge import CheckFailed\n"
        "from coursekit.checking.errors import CheckFailed as ok\n"
        "ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)\n")
    assert strays(tmp_path, exception_names(tmp_path), ("coursekit",)) == [
        "coursekit/a.py:2: imports ['CheckFailed'] from coursekit.checking.bridge, not "
        "coursekit.checking.errors",
        "coursekit/a.py:4: calls prctl itself, not coursekit.procctl"]

"""The layout's rules, checked from the source: what checkers may import (the grader's
fingerprint covers exactly that), no library module reaching into a project's tests, no
benchmark importing the test suite, and ruff clean over the code the course ships."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from coursekit.facts import CHECKER_CODE, ROOT, projects

OURS = ("coursekit", "autograder")


def coursekit_imports(path: Path) -> set[str]:
    """Every module of ours (coursekit, autograder) a file imports, at any depth (lazy
    imports too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(OURS)}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith(OURS):
            found.add(node.module)
            # `from coursekit.measure import traces` imports a submodule
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def module_file(name: str) -> Path | None:
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def closure(start: list[Path]) -> set[Path]:
    """Our files reachable from ``start`` by imports (packages' __init__ too)."""
    seen: set[Path] = set()
    todo = list(start)
    while todo:
        path = todo.pop()
        for name in coursekit_imports(path):
            parts = name.split(".")
            for i in range(1, len(parts) + 1):
                file = module_file(".".join(parts[:i]))
                if file is not None and file not in seen:
                    seen.add(file)
                    todo.append(file)
    return seen


def in_scope(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == c or rel.startswith(c + "/") for c in CHECKER_CODE)


@pytest.mark.parametrize("project", projects())
def test_checkers_import_only_the_fingerprinted_code(project):
    tests = sorted((ROOT / "projects" / project / "tests").glob("*.py"))
    outside = sorted(p.relative_to(ROOT).as_posix() for p in closure(tests) if not in_scope(p))
    assert not outside, (f"{project}'s checker imports {outside}, which the grader's checker "
                         "fingerprint (coursekit.facts.CHECKER_CODE) does not cover")


def test_fingerprint_ignores_code_checkers_do_not_import(tmp_path):
    """Editing the portfolio must not change any checker's fingerprint (no regrading)."""
    from autograder.course import checker_fingerprint
    before = {p: checker_fingerprint(ROOT, p) for p in projects()}
    portfolio = ROOT / "coursekit" / "portfolio" / "report.py"
    original = portfolio.read_bytes()
    try:
        portfolio.write_bytes(original + b"\n# an edit\n")
        assert {p: checker_fingerprint(ROOT, p) for p in projects()} == before
    finally:
        portfolio.write_bytes(original)
    timing = ROOT / "coursekit" / "measure" / "timing.py"
    original = timing.read_bytes()
    try:
        timing.write_bytes(original + b"\n# an edit\n")
        after = {p: checker_fingerprint(ROOT, p) for p in projects()}
        assert all(after[p] != before[p] for p in projects())
    finally:
        timing.write_bytes(original)


def test_no_library_module_reaches_into_project_tests():
    """coursekit and the grader run a project's checker (``check.py``, located through
    ``coursekit.facts.checker_path``) and never use anything else from its tests/ folder."""
    # equivalent_mutants.txt: not checker code, the list `make mutants` reads (data, by name);
    # sealed/: the checker's replays as programs, which coursekit.checking.sealed loads for
    # the checker and coursekit.authoring.sealed writes (data, by name)
    # expected/: stored outputs of fixed public inputs, numbers the checkers read (data)
    private = {p.name for p in (ROOT / "projects").glob("*/tests/*") if p.name not in (
        "check.py", "__pycache__", "equivalent_mutants.txt", "sealed", "expected")}
    offenders = []
    for path in sorted((ROOT / "coursekit").rglob("*.py")) + sorted(
            (ROOT / "autograder").rglob("*.py")):
        text = path.read_text()
        offenders += [f"{path.relative_to(ROOT)} names {n}" for n in private if n in text]
    assert not offenders, offenders


def test_benchmarks_import_nothing_from_tests():
    for path in sorted((ROOT / "bench").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n == "tests" or n.startswith("tests.") for n in names), path
        assert '"tests"' not in path.read_text(), f"{path} reaches into tests/"


def test_ruff_clean():
    """ruff (pinned in pyproject) over the library, grader, solutions, checkers, notebook
    sources, benchmarks and tests: the same command `make check` runs."""
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "coursekit",
                           "autograder", "projects", "notebooks/src", "bench", "tests"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

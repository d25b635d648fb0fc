"""The guides say only what exists: in README.md, every docs/ page, every project README
and the learner release's README template, each relative link resolves, each repository
path named in code exists, each ``make`` target (and its variables) is in the Makefile,
each ``python -m`` module is one of ours that runs (or a tool the course installs), and
each ``coursekit.``/``autograder.`` name resolves. Learner-facing pages name nothing the
learner release leaves out. README.md stays under 6 KB and links every guide.

Read-only and fast: no subprocess, nothing imported but the standard library."""

from __future__ import annotations

import importlib.util
import os
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_LIMIT = 6000  # bytes (wc -c)

OURS = ("coursekit", "autograder")
# Tools the course installs and names as `python -m TOOL`.
TOOLS = {"pytest", "pip", "jupyter", "ruff", "nbgrader", "papermill", "jupytext", "mlflow",
         "ipykernel", "venv", "playwright", "cosmic_ray", "xprof"}
# A file moving in a change under way: the guides may name either path until it lands.
# Outputs and placeholders, never repository paths.
NOT_REPO = ("build/", "grading/", ".venv/", "/", "~", "$")
PLACEHOLDER = re.compile(r"[<>*{}$…|\\]|\.\.\.")
PATH_CHARS = re.compile(r"[\w.\-/]+")
FILE_SUFFIXES = (".py", ".md", ".yml", ".yaml", ".toml", ".ipynb", ".sbatch", ".txt")
PRUNE = {".git", ".venv", "build", "__pycache__", ".pytest_cache", "node_modules"}
# Not in the learner release (autograder/release.py): learner pages must not send there.
NOT_RELEASED = ("solution/", "tests/test_", "bench/", "make starters", "make bench",
                "notebooks/src", "docs/instructors.md", "docs/checkers", "docs/ci.md")


def documents(root: Path = ROOT) -> list[Path]:
    return ([root / "README.md"] + sorted((root / "docs").rglob("*.md"))
            + sorted(root.glob("projects/*/README.md")) + [root / "autograder/release_readme.md"])


def learner_documents(root: Path = ROOT) -> list[Path]:
    """What the learner release ships and a learner reads."""
    return (sorted(root.glob("projects/*/README.md"))
            + [root / "docs/learners.md", root / "docs/gpu.md",
               root / "autograder/release_readme.md"])


# --- reading Markdown ---------------------------------------------------------------

def split_markdown(text: str) -> tuple[str, list[str]]:
    """(prose with code blocks removed, the lines of fenced and indented code blocks)."""
    prose, code = [], []
    fenced, previous_blank, in_indented = False, True, False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            prose.append("")
            continue
        indented = line.startswith("    ") and line.strip() != ""
        if fenced or (indented and (previous_blank or in_indented)):
            code.append(line)
            in_indented = not fenced
            prose.append("")
        else:
            in_indented = False
            prose.append(line)
        previous_blank = line.strip() == ""
    return "\n".join(prose), code


def spans(prose: str) -> list[str]:
    """Inline code spans (they may wrap across lines)."""
    return [m.group(1) for m in re.finditer(r"`([^`]+)`", prose)]


def links(prose: str) -> list[str]:
    without_code = re.sub(r"`[^`]*`", "", prose)
    return [m.group(1) for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)",
                                            without_code)]


def code_pieces(text: str) -> list[str]:
    """Every inline span, and every code-block line without its shell comment."""
    prose, code = split_markdown(text)
    return spans(prose) + [re.sub(r"(^|\s)#.*$", "", line) for line in code]


# --- what exists ----------------------------------------------------------------------

@cache
def file_names(root: Path) -> frozenset[str]:
    names = set()
    for _folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in PRUNE and not d.endswith(".egg-info")]
        names.update(files)
        names.update(dirs)
    return frozenset(names)


@cache
def makefile(root: Path) -> tuple[frozenset[str], str]:
    """(targets, text where variables may be read: the Makefile and find-python)."""
    text = (root / "Makefile").read_text()
    targets = set()
    for line in text.splitlines():
        m = re.match(r"^([\w.-]+(?:\s+[\w.-]+)*)\s*:(?!=)", line)
        if m and not line.startswith("\t"):
            targets.update(m.group(1).split())
    finder = root / "scripts" / "find-python"
    return frozenset(targets), text + (finder.read_text() if finder.is_file() else "")


def module_file(root: Path, dotted: str) -> Path | None:
    base = root.joinpath(*dotted.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def path_exists(token: str, doc: Path, root: Path) -> bool:
    name = token.rstrip("/")
    if "/" not in name:
        return name in file_names(root)
    return (root / name).exists() or (doc.parent / name).exists()


def looks_like_path(token: str, doc: Path, root: Path) -> bool:
    """A file name (``model.py``), a folder (``notebooks/src/``) or a path that starts
    where a path of the repository or of the page's folder starts (``tests/check.py``);
    not an option, a URL, an output under build/, a placeholder (``<p>``, ``PATH``,
    ``i/N``) or a slash between words (``common/seed_globals``, a check id)."""
    if "://" in token or PLACEHOLDER.search(token) or token.startswith(NOT_REPO) \
            or token.startswith("-") or not PATH_CHARS.fullmatch(token):
        return False
    parts = [p for p in token.split("/") if p]
    if not parts or any(re.fullmatch(r"[A-Z][A-Z0-9_]*", p) for p in parts) \
            or not any(re.search(r"[a-z]", p) for p in parts):
        return False
    if token.endswith(FILE_SUFFIXES) and not token.startswith("."):
        return True
    return "/" in token and (token.endswith("/") or (root / parts[0]).exists()
                             or (doc.parent / parts[0]).exists())


# --- the checks -----------------------------------------------------------------------

def link_problems(text: str, doc: Path, root: Path = ROOT) -> list[str]:
    found = []
    for target in links(split_markdown(text)[0]):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if not (doc.parent / path).exists():
            found.append(f"link ({target}) does not resolve")
    return found


def path_problems(text: str, doc: Path, root: Path = ROOT) -> list[str]:
    found = []
    for piece in code_pieces(text):
        for token in piece.split():
            token = token.lstrip("([\"'").rstrip(",;:)]\"'")
            if "=" in token:
                token = token.split("=", 1)[1]
            if looks_like_path(token, doc, root) and not path_exists(token, doc, root):
                found.append(f"path `{token}` does not exist")
    return found


def make_problems(text: str, doc: Path, root: Path = ROOT) -> list[str]:
    targets, variables_text = makefile(root)
    found = []
    for piece in code_pieces(text):
        for m in re.finditer(r"(?:^|[\s;&(])make\b((?:\s+[^\s;&|)#]+)*)", piece):
            words = m.group(1).split()
            target = None
            for word in words:
                var = re.fullmatch(r"([A-Z_][A-Z0-9_]*)=.*", word)
                if var:
                    if not re.search(rf"\b{var.group(1)}\b", variables_text):
                        found.append(f"`make`: no variable {var.group(1)} in the Makefile")
                elif word.startswith("-"):
                    continue
                elif target is None:
                    target = re.match(r"[\w.-]*", word).group(0)
                    if target and target not in targets:
                        found.append(f"`make {target}`: no such Makefile target")
                else:
                    break  # prose after the command
    return found


def python_m_problems(text: str, doc: Path, root: Path = ROOT) -> list[str]:
    found = []
    for piece in code_pieces(text):
        for m in re.finditer(r"python[\d.]*\s+-m\s+([\w.]+)", piece):
            name = m.group(1).rstrip(".")
            top = name.split(".")[0]
            if top in OURS:
                base = root.joinpath(*name.split("."))
                if not (base.with_suffix(".py").is_file() or (base / "__main__.py").is_file()):
                    found.append(f"`python -m {name}`: no such runnable module of ours")
            elif top not in TOOLS or importlib.util.find_spec(top) is None:
                found.append(f"`python -m {name}`: not a module of ours or a known tool")
    return found


def name_problems(text: str, doc: Path, root: Path = ROOT) -> list[str]:
    """``coursekit.x.y`` / ``autograder.x`` in code: a module, or a name in one."""
    found = []
    for piece in code_pieces(text):
        for m in re.finditer(r"(?<![\w/.])((?:coursekit|autograder)(?:\.\w+)+)", piece):
            parts = m.group(1).split(".")
            for i in range(len(parts), 0, -1):
                file = module_file(root, ".".join(parts[:i]))
                if file is not None:
                    break
            rest = parts[i:]
            if file is None or (rest and not re.search(rf"\b{rest[-1]}\b", file.read_text())):
                found.append(f"`{m.group(1)}` names no module or name of ours")
    return found


def problems(text: str, doc: Path, root: Path = ROOT) -> list[str]:
    return (link_problems(text, doc, root) + path_problems(text, doc, root)
            + make_problems(text, doc, root) + python_m_problems(text, doc, root)
            + name_problems(text, doc, root))


def release_problems(text: str) -> list[str]:
    return [f"names {s!r}, which the learner release does not hold" for s in NOT_RELEASED
            if s in text]


# --- tests ------------------------------------------------------------------------------

def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def shipped_as(doc: Path) -> Path:
    """Where a page's links are read from: the release README template becomes the
    README at the root of the learner release."""
    return ROOT / "README.md" if doc == ROOT / "autograder" / "release_readme.md" else doc


@pytest.mark.parametrize("doc", documents(), ids=rel)
def test_links_paths_targets_and_modules_exist(doc):
    found = problems(doc.read_text(), shipped_as(doc))
    assert not found, f"{rel(doc)}: {found}"


@pytest.mark.parametrize("doc", learner_documents(), ids=rel)
def test_learner_pages_name_only_what_the_release_ships(doc):
    assert doc.is_file()
    assert not release_problems(doc.read_text()), f"{rel(doc)}: {release_problems(doc.read_text())}"


def test_readme_is_short_and_links_every_guide():
    readme = ROOT / "README.md"
    size = len(readme.read_bytes())
    assert size < README_LIMIT, f"README.md is {size} bytes (limit {README_LIMIT})"
    linked = {(readme.parent / t.split("#")[0]).resolve()
              for t in links(split_markdown(readme.read_text())[0])}
    guides = sorted((ROOT / "docs").glob("*.md"))
    assert guides, "no guide under docs/"
    assert not [rel(g) for g in guides if g.resolve() not in linked]
    index = ROOT / "docs" / "checkers.md"
    pages = sorted((ROOT / "docs" / "checkers").glob("*.md"))
    targets = {(index.parent / t.split("#")[0]).resolve()
               for t in links(split_markdown(index.read_text())[0])}
    assert not [rel(p) for p in pages if p.resolve() not in targets]


def test_the_checks_report_what_is_broken():
    """The checker functions above catch each kind of false claim, and pass true ones."""
    doc = ROOT / "docs" / "synthetic.md"
    good = ("See [the learner guide](learners.md) and [a project](../projects/foundations/"
            "README.md#stages), `coursekit/facts.py`, `notebooks/src/`, `check.py`, "
            "`make lab LAB_PORT=9000`, `python -m autograder validate .`, "
            "`python -m pytest`, `coursekit.facts.CHECKER_CODE`, `projects/<p>/README.md`, "
            "`build/course/`, `--stage N|all`, `i/N`, https://example.org/a/b.py\n\n"
            "```\nmake test   # see solution/, not checked in comments\n```\n")
    assert problems(good, doc) == []
    bad = ("A [broken link](nowhere.md), `coursekit/no_such_file.py`, `no_such_file.py`, "
           "`make no-such-target`, `make lab LAB_PORTT=1`, "
           "`python -m coursekit.no_such_module`, `python -m coursekit.checking`, "
           "`python -m not_a_tool`, `coursekit.facts.NO_SUCH_NAME`\n\n"
           "    .venv/bin/python projects/nowhere/tests/check.py --stage 1\n")
    found = problems("\n" + bad, doc)
    expected = ["link (nowhere.md)", "`coursekit/no_such_file.py`", "`no_such_file.py`",
                "`make no-such-target`", "variable LAB_PORTT",
                "`python -m coursekit.no_such_module`: no such runnable module",
                "`coursekit.no_such_module` names no module",
                "`python -m coursekit.checking`", "not_a_tool",
                "coursekit.facts.NO_SUCH_NAME", "`projects/nowhere/tests/check.py`"]
    missed = [e for e in expected if not any(e in f for f in found)]
    assert not missed, (missed, found)
    assert len(found) == len(expected), found
    assert release_problems("run `make starters`, then read solution/model.py") == [
        "names 'solution/', which the learner release does not hold",
        "names 'make starters', which the learner release does not hold"]

"""The learner version (release) holds no solution and no hidden test, works on its own
(``validate`` runs from inside it), and plain nbgrader still works on the course
notebooks with the course's nbgrader_config.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from shared_release import release_copy

from coursekit.facts import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

from autograder.release import markers_in  # noqa: E402

REGION = re.compile(r"^\s*#+\s*BEGIN (SOLUTION|HIDDEN TESTS)")
END = re.compile(r"^\s*#+\s*END (SOLUTION|HIDDEN TESTS)")
SKIP_DIRS = {".git", ".venv", "build", "__pycache__", "solution", ".pytest_cache", "src"}


def regions(text: str) -> tuple[list[str], list[str]]:
    """(lines inside solution/hidden regions, lines outside them)."""
    inside, outside, active = [], [], False
    for line in text.splitlines():
        if REGION.match(line):
            active = True
        elif END.match(line):
            active = False
        else:
            (inside if active else outside).append(line.strip())
    return inside, outside


def course_notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def quickest_notebook() -> Path:
    """01_async_timing when present (the quickest at CI sizes), else the first."""
    notebooks = course_notebooks()
    return next((p for p in notebooks if p.name == "01_async_timing.ipynb"), notebooks[0])


def cell_texts(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"]
            for c in nb["cells"]]


def fragments() -> set[str]:
    """Lines of reference code and hidden tests that appear nowhere else in the course:
    if one shows up in the release, a solution leaked."""
    secret, public = [], []
    for sol in ROOT.glob("projects/*/solution/model.py"):
        inside, outside = regions(sol.read_text())
        secret += inside
        public += outside
    for sealed_source in ROOT.glob("projects/*/solution/sealed.py"):  # shipped compiled only
        secret += [line.strip() for line in sealed_source.read_text().splitlines()]
    for nb in course_notebooks():
        for text in cell_texts(nb):
            inside, outside = regions(text)
            secret += inside
            public += outside
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and path.suffix in (".py", ".md") and not SKIP_DIRS & set(parts) \
                and parts[0] != "tests":
            public.append(path.read_text(errors="ignore"))
    corpus = "\n".join(public)
    return {s for s in secret if len(s) >= 25 and not s.startswith("#") and s not in corpus}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """This file's copy of the session's release (tests/shared_release.py): its tests run
    make and validate in it."""
    return release_copy(tmp_path_factory.mktemp("release") / "course")


def test_release_has_no_solutions_and_no_hidden_tests(release):
    found = fragments()
    assert len(found) > 20, "too few solution fragments to search for: the test is blind"
    assert course_notebooks(), "no course notebook to release"
    texts = {p: p.read_text(errors="ignore") for p in release.rglob("*") if p.is_file()}
    leaks = {str(p.relative_to(release)): f for p, t in texts.items() for f in found if f in t}
    assert not leaks, leaks
    assert not list(release.rglob("solution")) and not list(release.rglob("secrets.json"))
    assert not (release / "notebooks" / "src").exists() and not (release / "tests").exists()
    assert not [m for p in release.rglob("*") if p.is_file() for m in markers_in(p)]
    for project in ROOT.glob("projects/*/tests/check.py"):
        name = project.parent.parent.name
        assert (release / "projects" / name / "starter" / "model.py").is_file()
        assert (release / "projects" / name / "tests" / "check.py").is_file()
    assert (release / "autograder" / "__main__.py").is_file()
    assert (release / "README.md").is_file()


def test_release_holds_no_sealed_program(release):
    """The checkers' sealed replays stay in the course (the copy reads their stored outputs
    for public inputs, projects/<p>/tests/expected/), and the copy holds no program at all:
    notebook 08's change under review is the learner's own step (issue 50)."""
    from coursekit.checking import sealed
    replays = sorted(ROOT.glob("projects/*/tests/sealed/*" + sealed.SUFFIX))
    assert replays, "no sealed replays in the course: the test is blind"
    assert not list(release.rglob("*" + sealed.SUFFIX))
    for replay in replays:
        assert (release / replay.parent.parent.relative_to(ROOT) / "expected").is_dir()
    assert not list((release / "projects").rglob("sealed.py"))
    assert not (release / "coursekit" / "instructor").exists()  # nor the course's sources


def test_release_leaves_the_mutation_lists_behind(release):
    """equivalent_mutants.txt quotes the reference's lines (each mutant that changes
    nothing, as the line it mutates): instructor material, like solution/."""
    assert list(ROOT.glob("projects/*/tests/equivalent_mutants.txt")), "the test is blind"
    assert not list(release.rglob("equivalent_mutants.txt"))


def test_released_notebooks_are_locked_and_checksummed(release):
    for nb in course_notebooks():
        cells = json.loads((release / "notebooks" / nb.name).read_text())["cells"]
        tests = [c for c in cells if c["metadata"].get("nbgrader", {}).get("grade")
                 and not c["metadata"]["nbgrader"].get("solution")]
        assert tests, f"{nb.name}: no autograded test cell"
        for c in tests:
            assert c["metadata"]["editable"] is False and c["metadata"]["deletable"] is False
            assert c["metadata"]["nbgrader"]["checksum"]
        assert all(not c.get("outputs") for c in cells if c["cell_type"] == "code")


def test_released_notebooks_are_what_make_course_learner_runs(release):
    """One learner-version pipeline: the notebooks the release ships are exactly what
    ``make course --learner`` and the browser test run (``course.learner_version``)."""
    import nbformat

    from coursekit.commands import course
    for nb in course_notebooks():
        shipped = nbformat.read(release / "notebooks" / nb.name, as_version=4)
        ours = course.learner_version(nbformat.read(nb, as_version=4))
        assert course.without_execution(shipped) == course.without_execution(ours), nb.name


def test_release_readme_is_written_for_learners(release):
    text = (release / "README.md").read_text()
    assert text != (ROOT / "README.md").read_text()
    order = [text.index(s) for s in ("make lab", "check.py --stage", "autograder validate",
                                     "make portfolio", "make course", "make test")]
    assert order == sorted(order), "the learner's path comes first, in that order"
    assert "reference solution" not in text.replace("no reference solutions", "")
    assert "Instructors" not in text and "grade SUBMISSIONS" not in text
    for nb in course_notebooks():
        assert f"notebooks/{nb.name}" in text
    for project in (release / "projects").iterdir():
        assert f"projects/{project.name}/README.md" in text


def test_release_ships_the_learner_guides_and_its_links_resolve(release):
    """The learner guides ship (the instructor, checker and CI guides do not), the release
    README links them, and every relative link and every path named in code of the
    release's README, guides and project READMEs resolves inside the release (not only in
    the course)."""
    from test_docs import link_problems, links, path_problems, split_markdown
    for name in ("docs/learners.md", "docs/gpu.md"):
        assert (release / name).is_file(), name
    for name in ("docs/instructors.md", "docs/checkers.md", "docs/ci.md", "docs/checkers"):
        assert not (release / name).exists(), name
    readme = release / "README.md"
    targets = links(split_markdown(readme.read_text())[0])
    assert "docs/learners.md" in targets and "docs/gpu.md" in targets, targets
    pages = [readme, *sorted((release / "docs").rglob("*.md")),
             *sorted(release.glob("projects/*/README.md"))]
    broken = {str(p.relative_to(release)): link_problems(p.read_text(), p, release)
              + path_problems(p.read_text(), p, release) for p in pages}
    assert not {k: v for k, v in broken.items() if v}


def release_make(release: Path, target: str, **variables: str) -> subprocess.CompletedProcess:
    """``make TARGET`` in the release with this checkout's venv (``-o`` its stamp: never a
    reinstall) and the release's own coursekit first on the path, kernels included."""
    venv = Path(sys.prefix)
    args = [f"{k}={v}" for k, v in variables.items()]
    env = {**os.environ, "PYTHONPATH": str(release), "COURSE_RECORDS": str(release / "rec")}
    return subprocess.run(["make", "--no-print-directory", "-o", str(venv / ".installed"),
                           target, f"VENV={venv}", *args], cwd=release, capture_output=True,
                          text=True, timeout=900, env=env, check=False)


@pytest.mark.slow
def test_make_course_in_the_release_runs_the_learners_code(release):
    """In a release ``make course`` runs the learner's own notebooks as they are (one quick
    notebook here), prints where they stand and exits 0 when everything ran."""
    import nbformat

    from coursekit.commands import course
    done = release_make(release, "course", COURSE_ARGS="--ci --only 01_")
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "reference solution" not in out and "FAILED" not in out, out[-4000:]
    assert "over TCP without encryption" not in out, "kernels must use ipc"
    assert re.search(r"01_async_timing\.ipynb\s+to end", out), out[-3000:]
    assert "everything ran:" in out and "not yet" in out
    summary = json.loads((release / "build/course/summary-learner.json").read_text())
    assert summary["release"] and summary["learner"] and not summary["projects"]
    row = summary["notebooks"][0]
    assert row["status"] == "ok" and row["checks_not_yet"] > 0 and "IMPL" not in row["parameters"]
    # it ran the learner's notebook itself: the executed copy is that notebook plus only
    # what running it adds
    executed = nbformat.read(release / "build/course/executed-learner/01_async_timing.ipynb", 4)
    shipped = nbformat.read(release / "notebooks/01_async_timing.ipynb", 4)
    assert course.without_execution(executed) == course.without_execution(shipped)


@pytest.mark.slow
def test_make_test_in_the_release_runs_the_public_checks(release, tmp_path):
    """In a release ``make test`` is the public checks on the learner's code, exiting as
    check.py does: 1 while a check does not pass (the starter), 0 once every one does;
    every check that grades runs there (none is left to the instructor)."""
    mine = tmp_path / "course"
    shutil.copytree(release, mine, ignore=shutil.ignore_patterns("build", "rec"))
    # pallas-kernel stage 1: seconds
    one = {"CHECK_ARGS": "--only pallas-kernel --stage 1"}
    starter = release_make(mine, "test", **one)
    out = starter.stdout + starter.stderr
    assert starter.returncode != 0 and "test] Error 1" in starter.stderr, out[-4000:]
    assert "test session starts" not in out and "collected" not in out  # no pytest run
    row = re.search(r"^pallas-kernel\s+1\s+0\s+(\d+)\s+0\s+(\d+)\s", out, re.M)
    assert row and int(row[1]) > 0, f"stage 1: 0 passed, N not yet, 0 failed expected:\n{out}"
    model = mine / "projects/pallas-kernel/starter/model.py"
    shutil.copy(ROOT / "projects/pallas-kernel/solution/model.py", model)
    done = release_make(mine, "test", **one)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    row = re.search(r"^pallas-kernel\s+1\s+(\d+)\s+0\s+0\s+(\d+)\s", out, re.M)
    # every check that grades runs in the copy (issue 50): none is left to the instructor
    assert row and int(row[1]) > 0 and int(row[2]) == 0, out[-4000:]
    assert "every check passed" in done.stdout and "graded by your instructor" not in done.stdout
    check = subprocess.run([sys.executable, "projects/pallas-kernel/tests/check.py", "--stage",
                            "1", "--impl", str(model), "--seed", "1"], cwd=mine,
                           capture_output=True, text=True, timeout=600, check=False,
                           env={**os.environ, "PYTHONPATH": str(mine)})
    assert check.returncode == 0, check.stdout + check.stderr
    assert "INSTRUCTOR" not in check.stdout, check.stdout
    assert re.search(r"^\d+ passed, 0 failed$", check.stdout, re.M), check.stdout


def test_marker_scan_catches_a_leak(tmp_path):
    leaked = tmp_path / "helper.py"
    leaked.write_text("def f():\n    ### BEGIN SOLUTION\n    return 42\n")
    assert markers_in(leaked)


@pytest.mark.slow
def test_validate_runs_inside_the_release(release, tmp_path):
    """The learner's own command, from the learner's copy: the untouched starter runs to
    a verdict (ready), a file that does not parse does not (fix before submitting)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    notebook = quickest_notebook().name
    cmd = [sys.executable, "-m", "autograder", "validate", ".", "--stages",
           f"performance-audit:4,{notebook}", "--timeout", "300"]
    ok = subprocess.run(cmd, cwd=release, capture_output=True, check=False, text=True, timeout=900,
                        env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "ready to submit" in ok.stdout and "not yet" in ok.stdout
    # the learner's unanswered notebook ran to a verdict inside the sandbox, with the
    # course copy's coursekit (not the hidden course folder's)
    assert f"notebooks/{notebook}" in ok.stdout and "read-outside" not in ok.stdout
    broken = tmp_path / "broken"
    shutil.copytree(release / "projects", broken / "projects")
    model = broken / "projects" / "performance-audit" / "starter" / "model.py"
    model.write_text(model.read_text() + "\ndef oops(:\n")
    bad = subprocess.run([*cmd[:4], str(broken), "--stages", "performance-audit:4"],
                         cwd=release,
                         capture_output=True, check=False, text=True, timeout=600, env=env)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "syntax error" in bad.stdout and "fix before submitting" in bad.stdout


@pytest.mark.slow
def test_plain_nbgrader_generate_and_autograde(tmp_path):
    """nbgrader's own commands with the course's config: generate_assignment on every
    course notebook, autograde one submission of 01_async_timing (the quickest at CI
    sizes; any course notebook works the same way) -- its learner copy with
    the notebook's CI sizes typed into the parameters cell, as a learner may)."""
    notebooks = course_notebooks()
    assert notebooks, "no course notebook with nbgrader cells"
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path / "nbgrader_config.py")
    (tmp_path / "notebooks").mkdir()
    for nb in notebooks:
        shutil.copy(nb, tmp_path / "notebooks" / nb.name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    nbgrader = [str(Path(sys.executable).parent / "nbgrader")]
    gen = subprocess.run([*nbgrader, "generate_assignment", "notebooks"], cwd=tmp_path,
                         capture_output=True, check=False, text=True, timeout=600, env=env)
    assert gen.returncode == 0, gen.stderr[-3000:]
    released = tmp_path / "build" / "nbgrader" / "release" / "notebooks"
    assert sorted(p.name for p in released.glob("*.ipynb")) == [p.name for p in notebooks]
    assert not (released / "src").exists()
    target = quickest_notebook()
    nb = json.loads((released / target.name).read_text())
    ci = nb["metadata"].get("course", {}).get("ci_parameters", {})
    for cell in nb["cells"]:
        if "parameters" in cell["metadata"].get("tags", []):
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            cell["source"] = src + "\n" + "\n".join(f"{k} = {v!r}" for k, v in ci.items())
    submitted = tmp_path / "build" / "nbgrader" / "submitted" / "learner" / "notebooks"
    submitted.mkdir(parents=True)
    (submitted / target.name).write_text(json.dumps(nb))
    auto = subprocess.run([*nbgrader, "autograde", "notebooks",
                           f"--CourseDirectory.notebook_id={target.stem}"], cwd=tmp_path,
                          capture_output=True, check=False, text=True, timeout=900, env=env)
    assert auto.returncode == 0, auto.stderr[-3000:]
    assert (tmp_path / "build/nbgrader/autograded/learner/notebooks" / target.name).is_file()
    db = sqlite3.connect(tmp_path / "build" / "nbgrader" / "gradebook.db")
    grades = db.execute("SELECT COUNT(*) FROM grade").fetchone()[0]
    assert grades > 0

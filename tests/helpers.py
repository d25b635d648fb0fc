"""Test helpers shared by every test file: run a checker in a real subprocess, and
plant a bug in a copy of a reference solution."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from coursekit.facts import ROOT  # noqa: E402


def solution(project: str) -> Path:
    return ROOT / "projects" / project / "solution" / "model.py"


def starter(project: str) -> Path:
    return ROOT / "projects" / project / "starter" / "model.py"


def run_checker(project: str, impl: Path, stage: str = "all", *, seed: int | None = None,
                timeout: float = 900, env: dict | None = None, tmp: Path | None = None,
                only: str | None = None) -> dict:
    """Run ``projects/<project>/tests/check.py`` exactly as a learner would, in its own
    process (``only``: comma-separated check ids, to run just those). Returns {"returncode", "stdout", "stderr", "json", "status": {check_id: status}}."""
    out = Path(tmp or os.environ.get("TMPDIR", "/tmp")) / f"check-{os.getpid()}-{id(impl)}.json"
    cmd = [sys.executable, str(ROOT / "projects" / project / "tests" / "check.py"),
           "--stage", str(stage), "--impl", str(impl), "--json", str(out)]
    if seed is not None:
        cmd += ["--seed", str(seed)]
    if only:
        cmd += ["--only", only]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=ROOT)
    data = json.loads(out.read_text()) if out.exists() else None
    if out.exists():
        out.unlink()
    status = {r["check_id"]: r["status"] for r in data["results"]} if data else {}
    return {"returncode": done.returncode, "stdout": done.stdout, "stderr": done.stderr,
            "json": data, "status": status}


def check_ids(project: str) -> dict[int, list[str]]:
    """stage -> the ids of the checks the project's checker registers, in check order
    (read from the checker's own registry, cached by its fingerprint): a new check needs
    no list or count edited in a test."""
    from autograder.course import discover_projects
    from autograder.grade import cache_dir
    found = discover_projects(ROOT, {project}, cache_dir(ROOT, ROOT / "build"))[project]
    return {n: [cid for cid, _ in st.checks] for n, st in sorted(found.stages.items())}


def checks_per_stage(project: str) -> dict[int, int]:
    """stage -> how many checks the project's checker registers (``check_ids``)."""
    return {n: len(ids) for n, ids in check_ids(project).items()}


def plant(tmp_path: Path, project: str, name: str, replacements: list[tuple[str, str]]) -> Path:
    """A copy of the project's solution with each ``old`` replaced by ``new``. Each
    ``old`` must occur exactly once and differ from its ``new`` (a ``new`` built as
    ``OLD.replace(a, b)`` is ``old`` itself once ``a`` is gone), so a planted bug cannot
    silently stop planting: every planted test (``tests/planted_batch.py`` too) plants
    through here."""
    text = solution(project).read_text()
    assert replacements, f"planted bug {name!r}: no replacement"
    for old, new in replacements:
        count = text.count(old)
        assert count == 1, f"planted bug {name!r}: {old!r} occurs {count} times"
        assert new != old, f"planted bug {name!r}: its replacement of {old!r} changes nothing"
        text = text.replace(old, new)
    path = tmp_path / f"{project}-{name}.py"
    path.write_text(text)
    return path


def reference_run(project: str) -> dict:
    """The project's reference solution, every stage, from the session's one sandboxed
    grading of the instructor's work (tests/graded_reference.py), in ``run_checker``'s
    form. The project's own reference test reads it, and the notebooks' check cells
    against the same solution reuse its passed stages instead of running the checker
    again (``COURSE_CHECK_REUSE``, set by conftest; see
    ``coursekit.notebook.reuse.reusable_result``).

    It is a run under load, as the timed stages' reference tests demand: under make test
    the grading's two workers share the one core the pytest worker is pinned to."""
    if project not in _REFERENCE_RUNS:
        from graded_reference import reference_result
        result = reference_result(project)
        _REFERENCE_RUNS[project] = result
        folder = os.environ.get("COURSE_CHECK_REUSE")
        if folder and result["json"]:
            from coursekit.notebook.reuse import share_reference_result
            share_reference_result(Path(folder), project, solution(project), result["json"])
    return _REFERENCE_RUNS[project]


_STARTER_RUNS: set = set()


def starter_run(project: str) -> None:
    """The project's starter, every stage, checked once per worker and shared with the
    check cells of the learner-version notebooks (``COURSE_CHECK_REUSE``): one checker
    run per project instead of one per check cell (19 cells of 3-4 s, most of it two
    processes starting)."""
    folder = os.environ.get("COURSE_CHECK_REUSE")
    if folder and project not in _STARTER_RUNS:
        _STARTER_RUNS.add(project)
        result = run_checker(project, starter(project), "all")
        if result["json"]:
            from coursekit.notebook.reuse import share_reference_result
            share_reference_result(Path(folder), project, starter(project), result["json"],
                                   passed_only=False)


# The core a pytest-xdist worker is pinned to (conftest.pin_to_one_core); unset when not.
PINNED = "COURSE_TESTS_PINNED_CORE"


@contextlib.contextmanager
def spinning_core():
    """One core kept spinning while the block runs, as on a loaded 2-core CI machine (the
    ``busy_core`` fixture of conftest, for a part of a test). Not under a pytest-xdist
    worker pinned to one core (conftest.pin_to_one_core): that already is the condition,
    and a spinner would take half of the test's one core."""
    if os.environ.get(PINNED):
        yield
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


_REFERENCE_RUNS: dict = {}


def assert_reference_ok(result: dict, checks: list[str] | int, context="") -> None:
    """A reference run's verdicts: every check PASSed, or, for a timing check whose own
    rounds could not decide on this machine's load, was INCONCLUSIVE (exit 3); never a
    FAIL, an error or a missing check (issue 28: a correct solution never FAILs, and an
    inconclusive verdict is not a failure). ``checks``: the ids, or how many there are."""
    status = result["status"]
    bad = {k: v for k, v in status.items() if v not in ("pass", "inconclusive")}
    unsure = [k for k, v in status.items() if v == "inconclusive"]
    assert not bad, (context, bad, result["stdout"][-3000:])
    assert result["returncode"] == (3 if unsure else 0), (context, result["returncode"],
                                                           result["stdout"][-3000:])
    if isinstance(checks, int):
        assert len(status) == checks, (context, sorted(status))
    else:
        assert sorted(status) == sorted(checks), (context, sorted(status))
    last = result["stdout"].strip().splitlines()[-1]
    assert last.startswith(f"{len(status) - len(unsure)} passed, 0 failed"), (context, last)


def at_ci_sizes(nb: dict) -> dict:
    """A notebook (its JSON) as a learner who set its parameters cell to the CI sizes would
    hand it in (an unlocked cell learners may edit): the grader runs what it is handed, so
    a graded notebook costs what CI's run of it costs (notebook 00 in the session's graded
    reference: 59 s at the learner sizes, 27 s at CI's)."""
    sizes = nb["metadata"].get("course", {}).get("ci_parameters", {})
    for cell in nb["cells"]:
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        source = "".join(cell["source"])
        for key, value in sizes.items():
            source, found = re.subn(rf"^{key} = [^#\n]*", f"{key} = {value!r}  ", source,
                                    flags=re.M)
            assert found == 1, f"{key} is not set once in the parameters cell"
        cell["source"] = source.splitlines(keepends=True)
    return nb


def verdicts(record: dict) -> dict[str, str]:
    """A graded stage record's statuses by check id."""
    return {c["id"]: c["status"] for c in record["checks"]}


def gained(rows, attacker: str, control: str) -> list[str]:
    """Checks the attacker passed that its control failed (inconclusive either side is
    evidence of nothing: a shared machine's load); ``rows``: stage records by student."""
    mine, theirs = verdicts(rows[attacker]), verdicts(rows[control])
    return sorted(c for c, s in mine.items()
                  if s == "pass" and theirs.get(c) not in ("pass", "inconclusive"))


def unfenced(lines: list[str]) -> list[str]:
    """The Markdown lines outside fenced blocks (inside one, text is shown, never read)."""
    out, fence = [], None
    for x in lines:
        mark = x.strip()
        if fence is None and mark.startswith("```"):
            fence = mark.removesuffix("text")
        elif fence is not None and mark == fence:
            fence = None
        elif fence is None:
            out.append(x)
    return out

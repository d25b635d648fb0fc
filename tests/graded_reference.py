"""The instructor's own work graded once per test session, by the real grader with full
isolation, and shared by every pytest-xdist worker: every project's solution as its
starter (every stage) and two solution notebooks (00, which logs to MLflow, plus the
cheap 01), each handed in with its parameters cell at the CI sizes.

Three kinds of test read it: the grader's (every reference stage passes in the sandbox,
the solution notebooks get full marks), each project's reference test (every stage
passes), and the notebooks' check cells against the solutions (their stages' results are
reused, ``coursekit.notebook.reuse.reusable_result``). One grading serves all three: the
suite used to run every project's checker on its solution a second time, outside the
sandbox, for the last two (about 300 s of a CI run).

The first worker to ask grades the batch; any other waits and reads its result
(tests/session_once.py)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from helpers import at_ci_sizes
from session_once import session_once

from coursekit.facts import ROOT

NOTEBOOKS = ("00_foundations.ipynb", "01_async_timing.ipynb")


def projects() -> list[str]:
    return sorted(p.parent.parent.name for p in ROOT.glob("projects/*/tests/check.py"))


@functools.cache
def graded_reference() -> dict:
    """{"projects", "notebooks", "done" (returncode, stdout, stderr), "latest" ((student,
    item) -> gradebook row), "out"}: the batch's grading, made once per session."""
    return _load(session_once("graded-reference", _grade))


def _grade(folder: Path) -> dict:
    from autograder.gradebook import Gradebook

    subs, out = folder / "subs", folder / "out"
    shutil.rmtree(subs, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    ref = subs / "reference"
    (ref / "notebooks").mkdir(parents=True)
    for name in NOTEBOOKS:
        handed_in = json.loads((ROOT / "notebooks" / name).read_text())
        (ref / "notebooks" / name).write_text(json.dumps(at_ci_sizes(handed_in), indent=1))
    for name in projects():  # what a learner hands in: model.py (a solution folder may
        # hold authoring files beside it, e.g. foundations' sealed.py, which every handed-in
        # .py being read by the stage's rules would rightly refuse)
        (ref / "projects" / name / "starter").mkdir(parents=True)
        shutil.copy(ROOT / "projects" / name / "solution" / "model.py",
                    ref / "projects" / name / "starter" / "model.py")
    stages = ",".join(["projects", *(f"notebooks/{n}" for n in NOTEBOOKS)])
    # One grading worker: the session pins this worker to one core, where two CPU-bound
    # sandboxes only take turns (measured back to back, alone on one core: 368 s with one, 380 s with two).
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs),
                           "--out", str(out), "--stages", stages, "--workers", "1",
                           "--timeout", "900", "--quiet"], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800, env=env, check=False)
    book = Gradebook.in_dir(out) if out.exists() else None
    latest = book.latest() if book else {}
    if book:
        book.close()
    return {"projects": projects(), "notebooks": [f"notebooks/{n}" for n in NOTEBOOKS],
            "done": {"returncode": done.returncode, "stdout": done.stdout,
                     "stderr": done.stderr},
            "latest": [[student, item, row] for (student, item), row in latest.items()],
            "out": str(out)}


def _load(saved: dict) -> dict:
    return {**saved, "done": SimpleNamespace(**saved["done"]), "out": Path(saved["out"]),
            "latest": {(s, i): row for s, i, row in saved["latest"]}}


def reference_result(project: str) -> dict:
    """The project's stages from the shared grading, in ``helpers.run_checker``'s form:
    {"returncode", "stdout", "stderr", "json", "status"}, the returncode and summary as
    check.py gives them (0 all passed, 3 inconclusive but none failed, else 1). The
    per-check statuses, messages and versions are the sandboxed run's own."""
    batch = graded_reference()
    records = sorted((row["record"] for (_, item), row in batch["latest"].items()
                      if row["record"].get("kind") == "stage"
                      and row["record"].get("project") == project),
                     key=lambda r: r["stage"])
    results = [{"stage": r["stage"], "check_id": c["id"], "status": c["status"],
                **{k: c.get(k, "") for k in ("message", "hint", "yours", "expected",
                                              "evidence")},
                "points": c.get("points", 0.0), "max_points": c.get("max_points", 0.0),
                "duration_s": c.get("duration_s", 0.0)}
               for r in records for c in r["checks"]]
    count = {s: sum(r["status"] == s for r in results) for s in ("pass", "inconclusive")}
    failed = len(results) - count["pass"] - count["inconclusive"]
    lines = [f"{r['status'].upper()} stage {r['stage']} · {r['check_id']}" for r in results]
    summary = f"{count['pass']} passed, {failed} failed"
    if count["inconclusive"]:
        summary += f", {count['inconclusive']} inconclusive"
    payload = {"project": project, "stages": [r["stage"] for r in records],
               "results": results, "passed": count["pass"], "failed": failed,
               "versions": records[0].get("versions", {}) if records else {},
               "graded": "sandboxed grading of this test session"}
    returncode = 1 if failed or not results else (3 if count["inconclusive"] else 0)
    return {"returncode": returncode, "stdout": "\n".join([*lines, summary]) + "\n",
            "stderr": batch["done"].stderr[-2000:] if batch["done"].returncode else "",
            "json": payload, "status": {r["check_id"]: r["status"] for r in results}}

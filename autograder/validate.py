"""``python -m autograder validate PATH``: what a learner runs before submitting.

PATH is the learner's course folder (or the zip they are about to hand in). It runs the
grader's own pipeline on it, in the same sandbox, with the same limits and refusals,
but with public random seeds (a fresh draw each run, as the notebooks' check cells do)
and without hidden tests, and prints one line per project stage and notebook. Exit 0
when every item ran to a verdict (pass or fail) and no test cell was edited; 1 when
something would cost marks for reasons other than the answers: a missing file, a crash,
a timeout, a memory blow-up, an edited test cell, a sandbox refusal.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from autograder import sandbox
from autograder.course import ROOT
from autograder.grade import Items, make_settings, run_batch, unpacked
from autograder.gradebook import Gradebook
from autograder.outcomes import PROBLEMS


def validate(path: Path, *, selection: str | None = None, timeout: float = 600,
             memory_mb: int = 4096, cell_timeout: float = 120, workers: int = 1,
             course_root: Path = ROOT, notebooks_dir: Path | None = None,
             max_procs: int | None = None, out=sys.stdout) -> int:
    path = Path(path).resolve()
    notebooks_dir = Path(notebooks_dir or course_root / "notebooks").resolve()
    with tempfile.TemporaryDirectory(prefix="autograder-validate-") as tmp:
        tmp = Path(tmp)
        root, error = unpacked(path, tmp, "you")
        if error:
            print(f"cannot read {path}: {error}", file=out)
            return 1
        settings = make_settings(course_root, [course_root, path, tmp, notebooks_dir],
                                 timeout, memory_mb, cell_timeout, "ci", max_procs)
        items = Items(tmp, course_root, notebooks_dir, selection)
        tasks = items.tasks_for("you", root, "", None, settings)
        print(f"validating {path} ({len(tasks)} item(s), isolation: "
              f"{sandbox.isolation()}); public seeds, no hidden tests", file=out, flush=True)
        book = Gradebook.in_dir(tmp)
        records = run_batch(tasks, book, workers=workers, run_id="validate", shard="",
                            secret_id="", progress=False)
        book.close()
    return report(records, out)


def report(records: list[dict], out=sys.stdout) -> int:
    problems = []
    width = max((len(r["item"]) for r in records), default=10)
    for r in sorted(records, key=lambda r: r["item"]):
        line = f"{r['item']:<{width}}  {r['status']:<8} {r['points']:g}/{r['max_points']:g}"
        why = r.get("message") or ""
        if r["status"] not in ("pass",) and why:
            line += f"  {why.splitlines()[0][:120]}"
        print(line, file=out)
        for c in r.get("checks", []):
            if c["status"] != "pass" and r["status"] != "missing":
                print(f"    {c['status']:<8} {c['id']}: {(c.get('message') or '')[:120]}",
                      file=out)
        if r["status"] in PROBLEMS:
            problems.append(f"{r['item']}: {r['status']}")
        for gid in r.get("tampered", []):
            problems.append(f"{r['item']}: test cell {gid} was edited (it will be restored "
                            "from the original when graded)")
    if problems:
        print("\nfix before submitting:\n  " + "\n  ".join(problems), file=out)
        return 1
    passed = sum(r["status"] == "pass" for r in records)
    print(f"\nready to submit: every item ran ({passed}/{len(records)} fully passing)",
          file=out)
    return 0

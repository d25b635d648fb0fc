"""The instructor's class tools at class size: ``report`` and ``similar`` on 200
generated submissions, beside the time grading one submission takes.

    python bench/bench_class_tools.py --out build/bench [--n 200]      (or: make bench)

Generated from the samples the grader's tests keep (``autograder.samples``), not graded:

* learner files: performance-audit's reference ``model.py`` where, per solution block,
  a learner kept the reference (15%), left the released stub (25%), or wrote their own
  version (the reference's lines in their own order, a line of their own after each:
  only single lines stay in common, as in code written apart); a few are
  byte-identical copies of another; each with the fixture notebook, answered as the
  samples answer it (right, wrong, hidden-test failure, crash) or in their own words;
* a gradebook written through ``autograder.gradebook``: every stage of performance-audit
  (its real check ids) and the notebook per submission, statuses, hints and
  yours/expected lines drawn per learner, and a second grading of a tenth of them.

Printed: wall time of ``python -m autograder report`` and ``python -m autograder similar``
(each a fresh process, as an instructor runs it), the pairs ``similar`` compared, and
the wall time of ``python -m autograder grade`` on one submission (all four stages of
performance-audit and the notebook, sandboxed). CPU figures from a shared 2-core
machine: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

import autograder.samples as fx
from autograder import course as course_mod
from autograder.gradebook import Gradebook

PROJECT = "performance-audit"
NB = "notebooks/ag_demo.ipynb"
BLOCK = re.compile(r"( *)### BEGIN SOLUTION[^\n]*\n(.*?)\1### END SOLUTION[^\n]*\n", re.S)


def env() -> dict:
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}


def timed(argv: list) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "autograder", *map(str, argv)], cwd=ROOT,
                          capture_output=True, text=True, env=env(), check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"failed: {argv}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return wall, done


def learner_model(rng: random.Random, solution: str) -> str:
    """The reference with each solution block kept, stubbed or rewritten."""
    def block(m: re.Match) -> str:
        indent, body = m.group(1), m.group(2)
        roll = rng.random()
        if roll < 0.15:
            return body
        if roll < 0.4:
            return f"{indent}raise NotImplementedError('not yet')\n"
        mine, lines = [], body.splitlines(keepends=True)
        rng.shuffle(lines)   # their own order: only single lines stay in common
        for line in lines:
            mine.append(line)
            pad = line[:len(line) - len(line.lstrip())] or indent
            mine.append(f"{pad}step_{rng.randrange(10**6)} = {rng.randrange(1000)}\n")
        return "".join(mine)
    return BLOCK.sub(block, solution)


def learner_notebook(rng: random.Random, variants: dict) -> dict:
    if rng.random() < 0.5:
        kind = rng.choice(sorted(variants))
        return fx.learner_notebook(variants[kind][0])
    squares = ("def square(x):\n    y = x\n    y = y * x\n    return y",
               "def square(x):\n    return x ** 2",
               "def square(value):\n    import math\n    return math.pow(value, 2)",
               "square = lambda x: x * x",
               "def square(x):\n    out = 0\n    for _ in range(abs(int(x))):\n"
               "        out += abs(x)\n    return out")
    means = ("def mean(xs):\n    total = 0.0\n    for item in xs:\n        total += item\n"
             "    return total / max(len(xs), 1)",
             "def mean(xs):\n    import statistics\n    return statistics.fmean(xs)",
             "def mean(xs):\n    xs = list(xs)\n    return sum(xs) / len(xs) if xs else 0.0",
             "import numpy as np\ndef mean(xs):\n    return float(np.mean(np.asarray(xs)))")
    return fx.learner_notebook({"square": rng.choice(squares), "mean": rng.choice(means)})


def generate(subs: Path, n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    solution = fx.SOLUTION.read_text()
    variants = fx.notebook_variants()
    students, made = [], {}
    for i in range(n):
        student = f"learner-{i:03d}"
        if made and rng.random() < 0.03:   # a copy of someone else's files
            model, notebook = made[rng.choice(sorted(made))]
        else:
            model, notebook = learner_model(rng, solution), learner_notebook(rng, variants)
        made[student] = (model, notebook)
        fx.write(subs, student, model, notebook)
        students.append(student)
    return students


def gradebook(out: Path, students: list[str], seed: int = 11) -> int:
    """Every stage of the project and the notebook for each student, and a second
    grading of a tenth of them; returns the row count."""
    rng = random.Random(seed)
    cache = ROOT / "build" / "autograder-cache"
    cache.mkdir(parents=True, exist_ok=True)
    project = course_mod.discover_projects(ROOT, {PROJECT}, cache)[PROJECT]
    book = Gradebook.in_dir(out)
    rows = 0

    def grading(run: str, regrade: bool) -> None:
        nonlocal rows
        for student in (s for s in students if not regrade or rng.random() < 0.1):
            skill = rng.random()
            for number, stage in sorted(project.stages.items()):
                checks = []
                for cid, points in stage.checks:
                    ok = rng.random() < 0.35 + 0.6 * skill
                    checks.append({"id": cid, "status": "pass" if ok else "fail",
                                   "points": points if ok else 0.0, "max_points": points,
                                   "message": "" if ok else f"{cid}: not what was asked",
                                   "hint": "" if ok else f"re-read the docstring of {cid}",
                                   "yours": "" if ok else f"{rng.random():.3f}",
                                   "expected": "" if ok else "0.500",
                                   "duration_s": rng.uniform(0.05, 2.0)})
                status = "pass" if all(c["status"] == "pass" for c in checks) else "fail"
                book.append({"student": student, "item": stage.item, "kind": "stage",
                             "project": PROJECT, "stage": number, "title": stage.title,
                             "status": status, "reason": "", "message": "",
                             "points": sum(c["points"] for c in checks),
                             "max_points": stage.max_points, "checks": checks,
                             "wall_s": rng.uniform(3, 40), "files_hash": student,
                             "checker_fp": "fp-1"}, f"{student}-{number}", run)
                rows += 1
            qs = [{"id": q, "status": "pass" if rng.random() < 0.8 else "fail",
                   "max_points": p, "message": ""} for q, p in (("square_tests", 2.0),
                                                               ("mean_tests", 1.0))]
            for q in qs:
                q["points"] = q["max_points"] if q["status"] == "pass" else 0.0
            book.append({"student": student, "item": NB, "kind": "notebook", "notebook": NB,
                         "status": "pass" if all(q["status"] == "pass" for q in qs)
                         else "fail", "reason": "", "message": "",
                         "points": sum(q["points"] for q in qs), "max_points": 3.0,
                         "questions": qs, "checks": qs, "wall_s": rng.uniform(2, 6),
                         "files_hash": student + "-nb", "checker_fp": "nb-1"},
                        f"{student}-nb", run)
            rows += 1

    grading(book.start_run("limits", "", "s"), False)
    grading(book.start_run("limits", "", "s"), True)
    book.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--n", type=int, default=200)
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-class-") as tmp:
        tmp = Path(tmp)
        subs, grading = tmp / "subs", tmp / "grading"
        students = generate(subs, args.n)
        # the runs record the command line that graded the class, as `grade` would
        graded_by = ["autograder", "grade", str(subs), "--out", str(grading), "--notebooks",
                     str(fx.NOTEBOOK.parent)]
        saved, sys.argv = sys.argv, graded_by
        try:
            rows = gradebook(grading, students)
        finally:
            sys.argv = saved
        report_s, _ = timed(["report", grading, "--out", tmp / "report"])
        similar_s, done = timed(["similar", grading, "--out", tmp / "similar"])
        found = json.loads((tmp / "similar" / "similar.json").read_text())
        one = tmp / "one"
        shutil.copytree(subs / students[0], one / "good")
        fx.write(one, "good", fx.SOLUTION.read_text(),
                 fx.learner_notebook(fx.notebook_variants()["nb-good"][0]))
        grade_s, _ = timed(["grade", one, "--out", tmp / "graded-one", "--stages",
                            f"{PROJECT},{NB}", "--notebooks", fx.NOTEBOOK.parent,
                            "--workers", "2", "--quiet"])
    figures = {"submissions": args.n, "gradebook_rows": rows, "report_s": round(report_s, 2),
               "similar_s": round(similar_s, 2),
               "similar_comparing_s": round(found["seconds"], 2),
               "pairs_compared": found["pairs_compared"], "pairs_flagged": len(found["pairs"]),
               "identical_groups": len(found["identical"]),
               "grade_one_submission_s": round(grade_s, 2)}
    (out / "class_tools.json").write_text(json.dumps(figures, indent=1))
    print(f"class tools on {args.n} generated submissions ({rows} gradebook rows; CPU "
          f"figures, {os.cpu_count()} cores, shared):")
    print(f"  report  (python -m autograder report): {report_s:6.1f} s wall")
    print(f"  similar (python -m autograder similar): {similar_s:6.1f} s wall, of which "
          f"{found['seconds']:.1f} s reading, fingerprinting and comparing "
          f"{found['pairs_compared']} pairs; {len(found['pairs'])} pairs flagged, "
          f"{len(found['identical'])} group(s) of identical files")
    print(f"  grading ONE submission (performance-audit stages 1-4 + {NB}, sandboxed): "
          f"{grade_s:6.1f} s wall")
    print(f"  so: the report costs {report_s / grade_s:.2f}x and the similarity pass "
          f"{similar_s / grade_s:.2f}x the grading of one submission, for the whole class")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The mistake corpus judged in a learner's copy: does each known-wrong file fail there as
in the course? (issue 50; not in ``make test``: it runs hundreds of checker processes)

    python -m coursekit.commands.mistakes_in_copy [--project P] [--stage N] [--match TEXT]
                                                  [--seed S] [--release DIR] [--per-stage N]

The course's verdict on each mistake is its last ``make mistakes`` report
(``build/mistakes-<p>/report.json``, same seed): the check that caught it there (its run
stops at the first, ``--fail-fast``). A mistake the report lacks is judged in the course
first, as ``make mistakes`` judges it, and added to the report. Then its file is written
inside the copy (``<release>/build/mistakes-<p>/<id>/model.py``, three levels below the
copy's root as in the course) and the copy's own checker runs it, the copy's code first
on the path, with ``--only`` the checks that caught it in the course: it must fail there
(exit 1, one of those checks failing). A mistake the course does not catch is not run.

Per project and stage it prints how many fail in the copy as in the course, and every one
that does not, with the copy's statuses (one whose checks only say INCONCLUSIVE there, run
twice, is listed apart: a timing check under load gives no verdict, it does not pass);
``build/mistakes-copy-<p>.json`` keeps the rows.
The release is built once under ``build/learner-copy/`` unless ``--release`` names one.
Why a checker's run in the copy judges as in the course (the files it reaches are the
course's, byte for byte): tests/test_release_identity.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from coursekit.commands.mistakes import CAUGHT, apply, judge, load_corpus, run_checker
from coursekit.facts import ROOT, projects

TIMEOUT_S = 600.0


def build_release(out: Path) -> Path:
    from autograder.release import release
    release(out, force=True)
    return out


def copy_env(copy: Path) -> dict:
    """The copy's own code first on the path, never this checkout's (an editable install)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("COURSE_CHECK_ONLY",) and not k.startswith("PYTEST")}
    env.update(PYTHONPATH=str(copy), PYTHONDONTWRITEBYTECODE="1")
    return env


def course_rows(project: str, seed: int) -> tuple[Path, dict]:
    path = ROOT / "build" / f"mistakes-{project}" / "report.json"
    report = json.loads(path.read_text()) if path.is_file() else {}
    if report.get("seed") != seed:
        report = {"project": project, "seed": seed, "stages": {}, "mistakes": []}
    return path, report


def judge_in_course(mistake, text: str, project: str, seed: int) -> dict:
    """``make mistakes``' verdict on one mistake, with the course's checker in place."""
    base = ROOT / "build" / f"mistakes-{project}"
    checker = ROOT / "projects" / project / "tests" / "check.py"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    return asdict(judge(mistake, text, base, checker, seed, env, TIMEOUT_S))


def judge_in_copy(copy: Path, project: str, mistake_id: str, stage: int, text: str,
                  caught_by: list[str], seed: int) -> dict:
    impl = copy / "build" / f"mistakes-{project}" / mistake_id / "model.py"
    impl.parent.mkdir(parents=True, exist_ok=True)
    impl.write_text(text)
    checker = copy / "projects" / project / "tests" / "check.py"
    env = copy_env(copy)
    env["COURSE_CHECK_ONLY"] = ",".join(caught_by)
    began = time.perf_counter()
    attempts = 0
    while attempts < 2:  # a timing check undecided under load: once more
        attempts += 1
        rc, timed_out, failed, tail = run_checker(checker, impl, stage, seed, env,
                                                  TIMEOUT_S, fail_fast=False)
        statuses = {c.split(":", 1)[1]: c.split(":", 1)[0] for c in failed}
        same = timed_out or (rc == 1 and any(statuses.get(c) in ("fail", "error", "crash")
                                             for c in caught_by))
        undecided = not same and any(statuses.get(c) == "inconclusive" for c in caught_by)
        if not undecided:
            break
    return {"id": mistake_id, "stage": stage, "caught_by": caught_by, "returncode": rc,
            "timed_out": timed_out, "copy_not_passing": failed, "as_in_course": same,
            "inconclusive": undecided, "attempts": attempts,
            "instructor": [c for c, s in statuses.items() if s == "instructor"],
            "seconds": round(time.perf_counter() - began, 1),
            "detail": "" if same else tail}


def measure(project: str, copy: Path, *, seed: int, stages: list[int] | None, match: str,
            per_stage: int | None, out=sys.stdout) -> list[dict]:
    source = (ROOT / "projects" / project / "solution" / "model.py").read_text()
    mistakes, _ = load_corpus(project)
    chosen = [m for m in mistakes if match in m.id and (not stages or m.stage in stages)]
    if per_stage:  # a sample: the first few of each stage, of each part of the corpus
        chosen = [m for m in chosen if [c.id for c in chosen if (c.stage, c.blind) == (
            m.stage, m.blind)].index(m.id) < per_stage]
    report_path, report = course_rows(project, seed)
    saved_path = ROOT / "build" / f"mistakes-copy-{project}.json"
    rows = []
    for mistake in chosen:
        text = apply(source, mistake)
        known = {r["id"]: r for r in report["mistakes"]}
        course = known.get(mistake.id)
        if course is None:
            course = judge_in_course(mistake, text, project, seed)
            report["mistakes"].append(course)
            report_path.parent.mkdir(parents=True, exist_ok=True)
            report_path.write_text(json.dumps(report, indent=1))
        caught_by = [c.split(":", 1)[1] for c in course["failed_checks"]
                     if c.split(":", 1)[0] in ("fail", "error", "crash")]
        if course["outcome"] not in CAUGHT or not caught_by:
            row = {"id": mistake.id, "stage": mistake.stage, "course": course["outcome"],
                   "as_in_course": None}
            print(f"  skipped      {project} {mistake.id}: {course['outcome']} in the course "
                  f"{' '.join(course['failed_checks'])[:80]}", file=out, flush=True)
        else:
            row = judge_in_copy(copy, project, mistake.id, mistake.stage, text, caught_by,
                                seed)
            word = ("as-course" if row["as_in_course"] else
                    "inconclusive" if row["inconclusive"] else "DIFFERS")
            print(f"  {word:<12} {project} {mistake.id} ({row['seconds']:.0f} s) "
                  f"{' '.join(row['copy_not_passing'])[:100]}", file=out, flush=True)
        rows.append(row)
        saved_path.write_text(json.dumps({"seed": seed, "release": str(copy), "rows": rows},
                                         indent=1))
    return rows


def summary(project: str, rows: list[dict], out=sys.stdout) -> int:
    """Print each stage's figure; the number of mistakes that do not fail as in the course."""
    differing = 0
    for stage in sorted({r["stage"] for r in rows}):
        group = [r for r in rows if r["stage"] == stage]
        judged = [r for r in group if r["as_in_course"] is not None]
        same = [r for r in judged if r["as_in_course"]]
        skipped = len(group) - len(judged)
        print(f"{project} stage {stage}: {len(same)} of {len(judged)} caught in the course "
              f"fail in the copy as in the course"
              + (f" ({skipped} not caught in the course, not run)" if skipped else ""),
              file=out)
        for r in judged:
            if not r["as_in_course"] and r.get("inconclusive"):
                print(f"  INCONCLUSIVE {r['id']}: caught in the course by {r['caught_by']}; "
                      f"in the copy undecided twice {r['copy_not_passing']} (a timing "
                      "check under this machine's load: not a verdict; run it alone)",
                      file=out)
            elif not r["as_in_course"]:
                differing += 1
                print(f"  DIFFERS {r['id']}: course caught it by {r['caught_by']}; the copy: "
                      f"exit {r['returncode']} {r['copy_not_passing']}\n    {r['detail']}",
                      file=out)
            if r.get("instructor"):
                differing += 1
                print(f"  INSTRUCTOR {r['id']}: {r['instructor']}", file=out)
    out.flush()
    return differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append", help="a project (repeatable)")
    parser.add_argument("--stage", type=int, action="append", help="only these stages")
    parser.add_argument("--match", default="", help="only mistakes whose id holds this text")
    parser.add_argument("--per-stage", type=int,
                        help="a sample: the first N mistakes of each stage, of the "
                        "course's own corpus and of the blind one")
    parser.add_argument("--seed", type=int, default=1, help="the checkers' seed (default 1)")
    parser.add_argument("--release", type=Path,
                        help="a learner release to use (default: build one under build/)")
    args = parser.parse_args(argv)
    copy = (args.release or build_release(ROOT / "build" / "learner-copy")).resolve()
    differing = 0
    for project in args.project or projects(with_solution=True):
        rows = measure(project, copy, seed=args.seed, stages=args.stage, match=args.match,
                       per_stage=args.per_stage)
        differing += summary(project, rows)
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())

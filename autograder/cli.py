"""Command line: ``python -m autograder {release,grade,export,validate,merge,report,similar,
diff} --help``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _release(args) -> int:
    from autograder.release import ReleaseError, release
    try:
        info = release(args.out, notebooks_dir=args.notebooks, force=args.force)
    except ReleaseError as err:
        print(f"release failed: {err}", file=sys.stderr)
        return 1
    print(f"learner version written to {info['out']}: {len(info['projects'])} project(s) "
          f"without solutions, {len(info['notebooks'])} notebook(s) with solutions and "
          "hidden tests removed")
    return 0


def _grade(args) -> int:
    from autograder.grade import grade
    from autograder.submissions import SubmissionError
    try:
        summary = grade(args.submissions, args.out, workers=args.workers,
                        shard_text=args.shard, timeout=args.timeout, memory_mb=args.memory,
                        selection=args.stages, regrade=args.regrade,
                        notebooks_dir=args.notebooks, secrets_path=args.secrets,
                        cell_timeout=args.cell_timeout, nb_sizes=args.nb_sizes,
                        max_procs=args.max_procs, disk_mb=args.disk,
                        progress=not args.quiet,
                        share_runs=not args.stage_per_run)
    except SubmissionError as err:
        print(f"grade: {err}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary))
    return 0


def _export(args) -> int:
    if args.format != "csv":
        from autograder import lms
        return lms.main(args.dir, args.csv, args.format, args.roster)
    from autograder.export import export
    info = export(args.dir, args.csv, args.feedback)
    print(f"wrote {info['csv']} ({info['students']} student(s), {info['columns']} columns) "
          f"and feedback for each student under {Path(info['feedback'][0]).parent.parent}"
          if info["feedback"] else f"wrote {info['csv']} (no results yet)")
    for student, why in info["refused"].items():
        print(f"no feedback folder for {student!r}: {why}", file=sys.stderr)
    return 0


def _report(args) -> int:
    from autograder import classreport
    return classreport.main(args.grading, args.out)


def _similar(args) -> int:
    from autograder import similar
    return similar.main(args.grading, args.out, args.submissions, args.threshold,
                        args.min_tokens, args.pages, args.ignore_common, args.notebooks,
                        args.workers)


def _diff(args) -> int:
    from autograder import regrade_diff
    return regrade_diff.main(args.grading, args.since, args.json)


def _validate(args) -> int:
    from autograder.validate import validate
    return validate(args.path, selection=args.stages, timeout=args.timeout,
                    memory_mb=args.memory, cell_timeout=args.cell_timeout,
                    workers=args.workers, notebooks_dir=args.notebooks,
                    max_procs=args.max_procs)


def _merge(args) -> int:
    from autograder.merge import MergeError, merge
    try:
        info = merge(args.sources, args.out, force=args.force)
    except MergeError as err:
        print(f"merge failed: {err}", file=sys.stderr)
        return 1
    print(f"merged into {info['gradebook']}: " +
          ", ".join(f"{k}: +{v}" for k, v in info["added"].items()) +
          f" ({info['rows']} rows in all)")
    return 0


def _limits(p: argparse.ArgumentParser, workers: int) -> None:
    p.add_argument("--stages", metavar="SPEC",
                   help="what to grade, comma separated: performance-audit:4, "
                        "performance-audit (all its stages), projects, notebooks, "
                        "01_async_timing.ipynb (default: everything)")
    p.add_argument("--workers", type=int, default=workers, help=f"parallel workers "
                   f"(default {workers})")
    p.add_argument("--timeout", type=float, default=600, metavar="S",
                   help="wall-clock limit per project stage and per notebook (default 600)")
    p.add_argument("--cell-timeout", type=float, default=120, metavar="S",
                   help="limit per notebook cell (default 120)")
    p.add_argument("--memory", type=int, default=4096, metavar="MB",
                   help="memory limit per stage/notebook, all its processes (default 4096)")
    p.add_argument("--disk", type=int, metavar="MB",
                   help="disk quota per stage/notebook, all its files (as root: a tmpfs of "
                        "its own, counted as its memory where cgroups are; default 1024)")
    p.add_argument("--max-procs", type=int, metavar="N",
                   help="processes + threads per stage/notebook before it is stopped as "
                        "a fork bomb (default: max(512, 32 x cores))")
    p.add_argument("--notebooks", type=Path, metavar="DIR",
                   help="source notebooks (default: the course's notebooks/)")


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m autograder",
                                  description="Release, grade and export the course.")
    sub = top.add_subparsers(dest="command", required=True)

    p = sub.add_parser("release", help="write the learner version (no solutions, no "
                       "hidden tests)", description=_doc("release"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--notebooks", type=Path, metavar="DIR",
                   help="source notebooks (default: the course's notebooks/)")
    p.add_argument("--force", action="store_true", help="replace a non-empty DIR")
    p.set_defaults(run=_release)

    p = sub.add_parser("grade", help="grade a folder of submissions",
                       description=_doc("grade"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("submissions", type=Path, metavar="SUBMISSIONS",
                   help="folder of <student>/ folders or <student>.zip files")
    p.add_argument("--out", type=Path, required=True, metavar="DIR",
                   help="grader folder: gradebook, secrets, caches (keep it private)")
    _limits(p, workers=2)
    p.add_argument("--shard", metavar="i/N", help="grade only shard i of N (0 <= i < N), "
                   "e.g. $SLURM_ARRAY_TASK_ID/8; join shards with `merge`")
    p.add_argument("--regrade", choices=("none", "failed", "all"), default="none",
                   help="re-run unchanged items too: 'failed' (latest status not pass) "
                        "or 'all' (default: none, unchanged items are skipped)")
    p.add_argument("--secrets", type=Path, metavar="FILE",
                   help="secret for held-out seeds (default DIR/secrets.json, created "
                        "once); every shard must use the same file")
    p.add_argument("--nb-sizes", choices=("ci", "notebook"), default="ci",
                   help="notebook parameters: the notebook's course.ci_parameters "
                        "(default) or its own values")
    p.add_argument("--stage-per-run", action="store_true",
                   help="a sandboxed run (checker and learner process) for every stage; "
                        "default: one for all stages of a project, each stage with its "
                        "own seed and record, and graded again alone unless that run "
                        "was clean")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print a JSON summary at the end")
    p.set_defaults(run=_grade)

    p = sub.add_parser("export", help="quoted CSV and per-student feedback",
                       description=_doc("export"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir", type=Path, metavar="DIR", help="the grader folder (grade --out)")
    p.add_argument("--csv", type=Path, required=True, metavar="FILE")
    p.add_argument("--feedback", type=Path, metavar="DIR",
                   help="where per-student feedback goes (default DIR/feedback)")
    p.add_argument("--format", choices=("csv", "canvas", "moodle"), default="csv",
                   help="csv (default: the quoted CSV and feedback above, unchanged), or "
                        "the grade-import CSV of Canvas or Moodle, one column per item, "
                        "with FILE.unmatched.csv naming whoever the roster does not match "
                        "(no feedback is written then)")
    p.add_argument("--roster", type=Path, metavar="FILE",
                   help="with --format canvas|moodle: a CSV of submission,<LMS identity "
                        "columns>; see autograder/lms.py")
    p.set_defaults(run=_export)

    p = sub.add_parser("report", help="the class at a glance: one HTML page and its JSON",
                       description=_doc("classreport"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("grading", type=Path, metavar="GRADING", help="the grader folder "
                   "(grade --out)")
    p.add_argument("--out", type=Path, required=True, metavar="REPORT_DIR",
                   help="where report.html and report.json go")
    p.set_defaults(run=_report)

    p = sub.add_parser("similar", help="similar learner files and notebook answers across "
                       "submissions (evidence to read, never a grade)",
                       description=_doc("similar"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("grading", type=Path, metavar="GRADING", help="the grader folder")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="where the side-by-side pages go (default GRADING/similar)")
    p.add_argument("--submissions", type=Path, metavar="DIR",
                   help="the graded submissions (default: the folder the gradebook's "
                        "latest grade run graded)")
    p.add_argument("--notebooks", type=Path, metavar="DIR",
                   help="the source notebooks, whose released text is not counted "
                        "(default: the --notebooks of the latest grade run, else the "
                        "course's notebooks/)")
    p.add_argument("--threshold", type=float, default=0.5, metavar="SHARE",
                   help="list pairs whose larger share is at least this (default 0.5)")
    p.add_argument("--min-tokens", type=int, default=40, metavar="N",
                   help="and that share at least N tokens (default 40)")
    p.add_argument("--pages", type=int, default=200, metavar="N",
                   help="side-by-side pages for the first N pairs (default 200)")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="processes that tokenise the files (default 2)")
    p.add_argument("--ignore-common", type=float, metavar="FRACTION",
                   help="also ignore passages that more than FRACTION of the submissions "
                        "share (default: only the released text is ignored)")
    p.set_defaults(run=_similar)

    p = sub.add_parser("diff", help="what a regrade moved: score or status changes between "
                       "gradings of the same files", description=_doc("regrade_diff"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("grading", type=Path, metavar="GRADING", help="the grader folder")
    p.add_argument("--since", metavar="FINGERPRINT|TIME",
                   help="a checker fingerprint or run id (prefix), or a time "
                        "(2025-03-01T14:00, or Unix seconds)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    p.set_defaults(run=_diff)

    p = sub.add_parser("validate", help="check a submission before handing it in",
                       description=_doc("validate"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", type=Path, metavar="PATH", help="your course folder or zip")
    _limits(p, workers=1)
    p.set_defaults(run=_validate)

    p = sub.add_parser("merge", help="join the gradebooks of shards",
                       description=_doc("merge"),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("sources", type=Path, nargs="+", metavar="SHARD_DIR")
    p.add_argument("--out", type=Path, required=True, metavar="DIR")
    p.add_argument("--force", action="store_true",
                   help="merge shards graded with different secrets anyway")
    p.set_defaults(run=_merge)
    return top


def _doc(module: str) -> str:
    import importlib
    doc = importlib.import_module(f"autograder.{module}").__doc__ or ""
    return doc.strip()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except ImportError as err:  # a package this machine lacks: named, not a traceback
        from coursekit.compat.optional import absent_from
        absent = absent_from(err, f"`autograder {args.run.__name__.lstrip('_')}`")
        if absent is None:
            raise
        print(f"autograder: {absent}", file=sys.stderr)
        return 2

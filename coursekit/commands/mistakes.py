"""make mistakes: a corpus of learner mistakes per stage, each stage's checker the judge.

    python -m coursekit.commands.mistakes [--project P] [--stage N] [--jobs 1|2] [--seed S]
                                          [--corpus all|blind|own] [--rescore]

``make mutants`` asks whether a checker notices small mechanical changes; this asks
whether it notices what a learner who half-understands the material writes: a timer that
does not wait for the result, the mean where the contract says median, a key reused, a
float32 reference where float64 is asked. The corpus (``coursekit.commands.mistakes_corpus``)
is ``tests/mistakes/<project>.py``, written by the course's developers, and
``tests/mistakes/blind/<project>.py``, written by people who never read the checker (ids
``blind-...``; an entry's ``named_by`` phrases say what a hint naming it holds), both
apart from the mutation run and from the planted bugs a check's own
tests aim at it::

    MISTAKES = [
        {"stage": 1, "id": "mse-sum", "misunderstood": "one line: what the learner got wrong",
         "edits": [(old text, new text), ...]},
        ...
    ]
    JUSTIFIED = {"<id>": "why no check can catch it without failing correct work"}

Each mistake is written to ``build/mistakes-<p>/<id>/model.py`` (three levels below the
course root, as the solution and ``make mutants``' mutants) and judged by ``check.py
--stage N --impl COPY --seed S --fail-fast`` in a fresh process with a timeout, the
checker snapshotted to ``build/mistakes-<p>/tests`` first. Outcomes: caught (exit 1),
accepted (exit 0: the checker passed a wrong solution), inconclusive (exit 3, after a
second run without ``--fail-fast`` in case a later check fails it; counted as not
caught), timeout (the stage ran past the timeout: counted as caught, as the grader
records it), error (any other exit: the checker itself broke; not caught).

A stage's line reads ``caught of total``, then the blind mistakes' figure beside the
rest's (how far the checks reach past what their authors thought of), then every
mistake not caught with what it misunderstood, marked ``justified`` (with the reason)
when JUSTIFIED lists it; the project's checker page (``docs/checkers/<p>.md``) says the
same. The report is ``build/mistakes-<p>/report.json``, written after every mistake (a
stage stopped halfway says how many it did not judge); a run of some stages
(``--stage``) or of one part of the corpus (``--corpus blind``) keeps every mistake it did
not judge as last measured at the same seed; ``--rescore`` runs nothing and tallies the
last reports again by the corpus as it is now (after an entry is added to JUSTIFIED).
``make mutants`` prints each stage's last corpus figure beside its score.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from coursekit.checking.contract import INCONCLUSIVE_EXIT
from coursekit.commands.mistakes_corpus import (  # noqa: F401 (re-export)
    BLIND_PREFIX,
    Mistake,
    apply,
    corpus_path,
    load_corpus,
    repeats,
)
from coursekit.commands.mistakes_report import corpus_figure, figure  # noqa: F401 (re-export)
from coursekit.commands.mutants import ONE_THREAD, run_reference
from coursekit.facts import ROOT, projects
from coursekit.workloads.procgroup import kill, start

CAUGHT = ("caught", "timeout")


@dataclass
class Outcome:
    id: str
    stage: int
    misunderstood: str
    outcome: str  # caught | accepted | inconclusive | timeout | error
    returncode: int | None
    failed_checks: list[str]
    seconds: float
    detail: str = ""
    # caught, with phrases declared: whether the checks' words hold one (else None)
    hint_names_it: bool | None = None


def classify(returncode: int | None, timed_out: bool) -> str:
    """The checker's exit status as an outcome (see the module docstring)."""
    if timed_out:
        return "timeout"
    return {0: "accepted", 1: "caught", INCONCLUSIVE_EXIT: "inconclusive"}.get(
        returncode, "error")


def run_checker(checker: Path, impl: Path, stage: int, seed: int, env: dict,
                timeout: float, fail_fast: bool) -> tuple[int | None, bool, list[str], str]:
    """(exit status, timed out, ids of the checks that did not pass, output tail), the
    checker in its own process group (its learner processes go with it on a timeout).
    The words of the checks that did not pass stay in ``result.json`` beside ``impl``
    (``words_of_failures``)."""
    report = impl.with_name("result.json")
    report.unlink(missing_ok=True)
    cmd = [sys.executable, str(checker), "--stage", str(stage), "--impl", str(impl),
           "--seed", str(seed), "--json", str(report)] + (["--fail-fast"] if fail_fast else [])
    proc = start(cmd, impl.parent, "check", env=env)
    timed_out = False
    try:
        proc.popen.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    kill(proc, "timeout" if timed_out else "stopped")  # and any child left in its group
    failed = []
    if report.is_file():
        try:
            failed = [f"{r['status']}:{r['check_id']}" for r in
                      json.loads(report.read_text()).get("results", [])
                      if r.get("status") != "pass"]
        except (ValueError, KeyError, TypeError):
            failed = []
    tail = "\n".join((proc.stdout() + proc.stderr()).splitlines()[-6:])
    return proc.popen.returncode, timed_out, failed, tail


def words_of_failures(impl: Path) -> str:
    """What the checks that did not pass told the learner (message, yours, expected,
    evidence, hint), from the run's ``result.json``; "" when there is none."""
    try:
        results = json.loads(impl.with_name("result.json").read_text()).get("results", [])
    except (OSError, ValueError):
        return ""
    return "\n".join(str(r.get(k) or "") for r in results if r.get("status") != "pass"
                     for k in ("message", "yours", "expected", "evidence", "hint"))


def names_it(mistake: Mistake, words: str) -> bool | None:
    """Whether the checks' words hold one of the phrases that name the mistake; None when
    the mistake declares none."""
    if not mistake.named_by:
        return None
    low = words.lower()
    return any(p.lower() in low for p in mistake.named_by)


def judge(mistake: Mistake, text: str, base: Path, checker: Path, seed: int, env: dict,
          timeout: float) -> Outcome:
    work = base / mistake.id
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    impl = work / "model.py"
    impl.write_text(text)
    began = time.perf_counter()
    rc, timed_out, failed, tail = run_checker(checker, impl, mistake.stage, seed, env,
                                              timeout, fail_fast=True)
    outcome = classify(rc, timed_out)
    if outcome == "inconclusive":  # --fail-fast stopped there: a later check may fail it
        rc, timed_out, failed, tail = run_checker(checker, impl, mistake.stage, seed, env,
                                                  timeout, fail_fast=False)
        outcome = classify(rc, timed_out)
    return Outcome(mistake.id, mistake.stage, mistake.misunderstood, outcome, rc, failed,
                   round(time.perf_counter() - began, 1),
                   "" if outcome in ("caught", "accepted") else tail,
                   names_it(mistake, words_of_failures(impl)) if outcome == "caught" else None)


CORPORA = ("all", "blind", "own")


def measure_project(project: str, *, seed: int = 1, jobs: int = 1,
                    stages: list[int] | None = None, corpus: str = "all", root: Path = ROOT,
                    out=sys.stdout, match: str = "") -> dict:
    """Judge the project's corpus (the stages asked; ``corpus``: all of it, the blind
    part or the course's own; ``match``: only ids holding that text, e.g. one batch),
    print and return the report (also ``root/build/mistakes-<project>/report.json``)."""
    home = Path(root) / "projects" / project
    base = Path(root) / "build" / f"mistakes-{project}"
    base.mkdir(parents=True, exist_ok=True)
    source = (home / "solution" / "model.py").read_text()
    solution = base / "solution.py"
    solution.write_text(source)
    mistakes, justified = load_corpus(project, root)
    try:  # every edit applies, before any run
        texts = {m.id: apply(source, m) for m in mistakes}
    except ValueError as err:
        raise SystemExit(f"{project}: the corpus no longer fits the solution: {err} (edit "
                         f"{corpus_path(project, root)})") from None
    shutil.rmtree(base / "tests", ignore_errors=True)
    shutil.copytree(home / "tests", base / "tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    checker = base / "tests" / "check.py"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if jobs > 1:  # two checkers at once on 2 cores: one XLA thread each
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + ONE_THREAD).strip()
    chosen = [m for m in mistakes if (corpus == "all" or m.blind == (corpus == "blind"))
              and match in m.id]
    wanted = sorted({m.stage for m in chosen} & set(stages or [m.stage for m in chosen]))
    selection = {m.id for m in chosen if m.stage in wanted}
    path = base / "report.json"
    results: list[Outcome] = []
    ran: dict[int, str] = {}
    report = write_report(path, project, seed, results, ran, justified, mistakes, selection)
    for stage in wanted:
        try:  # an undecided reference is run once more there, and stands if nothing failed
            ref_s = run_reference(checker, solution, stage, seed, env)
        except SystemExit as broken:
            print(f"{project} stage {stage}: not measured: {str(broken)[:400]}",
                  file=out, flush=True)
            continue
        timeout = max(60.0, 4 * ref_s)
        group = [m for m in chosen if m.stage == stage]
        print(f"{project} stage {stage}: reference passes in {ref_s:.1f} s; {len(group)} "
              f"mistakes, timeout {timeout:.0f} s each", file=out, flush=True)
        with ThreadPoolExecutor(jobs) as pool:
            for found in pool.map(lambda m, t=timeout: judge(
                    m, texts[m.id], base, checker, seed, env, t), group):
                results.append(found)
                print(f"  {found.outcome:<12} {found.id} ({found.seconds:.0f} s) "
                      f"{' '.join(found.failed_checks)[:120]}", file=out, flush=True)
                # after every mistake: a run stopped halfway keeps what it judged
                ran[stage] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
                report = write_report(path, project, seed, results, ran, justified, mistakes,
                                      selection)
    print_report(report, out)
    return report


def write_report(path: Path, project: str, seed: int, results: list[Outcome], ran: dict,
                 justified: dict[str, str], mistakes: list[Mistake],
                 selection: set[str] | None = None) -> dict:
    """Tally the mistakes judged now, every mistake outside this run's ``selection`` (its
    ids; default: every mistake of the stages in ``ran``) kept as the last report at this
    seed has it; the corpus as it is now decides what is justified and what a stage holds."""
    rows = [asdict(r) for r in results]
    when = {str(k): v for k, v in ran.items()}
    if selection is None:
        selection = {m.id for m in mistakes if str(m.stage) in when}
    if path.is_file():
        old = json.loads(path.read_text())
        if old.get("seed") == seed:
            rows += [r for r in old.get("mistakes", []) if r["id"] not in selection]
            when = {**{k: s["run_at"] for k, s in old.get("stages", {}).items()
                       if k not in when and "run_at" in s}, **when}
    current = {m.id for m in mistakes}
    rows = [r for r in rows if r["id"] in current]  # a mistake since removed goes
    stages = {}
    repeated = repeats(project, mistakes, path.parents[2]) if mistakes else {}
    for stage in sorted({int(k) for k in when}):
        group = [r for r in rows if r["stage"] == stage]
        stages[str(stage)] = tally(group, justified, sum(m.stage == stage for m in mistakes),
                                   repeated)
        stages[str(stage)]["run_at"] = when[str(stage)]
    report = {"project": project, "seed": seed, "stages": stages,
              "justified": justified, "mistakes": rows}
    path.write_text(json.dumps(report, indent=1))
    return report


def part(group: list[dict], blind: bool, repeated: dict[str, str] | None = None) -> dict:
    """The blind mistakes' figure, or the rest's, with how many hints named the mistake
    (of the caught ones that declare phrases), and how many are new files (``repeated``:
    the mistakes whose file an earlier mistake already made)."""
    rows = [r for r in group if r["id"].startswith(BLIND_PREFIX) == blind]
    caught = sum(r["outcome"] in CAUGHT for r in rows)
    judged = [r for r in rows if r.get("hint_names_it") is not None]
    new = [r for r in rows if r["id"] not in (repeated or {})]
    return {"total": len(rows), "caught": caught, "new": len(new),
            "new_caught": sum(r["outcome"] in CAUGHT for r in new),
            "rate": round(caught / len(rows), 4) if rows else None,
            "hints_judged": len(judged),
            "hints_naming": sum(bool(r["hint_names_it"]) for r in judged)}


def tally(group: list[dict], justified: dict[str, str], in_corpus: int,
          repeated: dict[str, str] | None = None) -> dict:
    caught = [r["id"] for r in group if r["outcome"] in CAUGHT]
    missed = [r for r in group if r["outcome"] not in CAUGHT]
    return {"total": len(group), "in_corpus": in_corpus, "caught": len(caught),
            "rate": round(len(caught) / len(group), 4) if group else None,
            "blind": part(group, True, repeated), "own": part(group, False, repeated),
            "missed": [{"id": r["id"], "outcome": r["outcome"],
                        "misunderstood": r["misunderstood"],
                        "justified": justified.get(r["id"])} for r in missed],
            "unjustified": sum(r["id"] not in justified for r in missed),
            "justified_but_caught": [i for i in caught if i in justified]}


def print_report(report: dict, out=sys.stdout) -> None:
    for stage, t in report["stages"].items():
        short = (f"; {t['in_corpus'] - t['total']} of the corpus not judged"
                 if t["in_corpus"] > t["total"] else "")
        print(f"{report['project']} stage {stage}: {figure(t)}{short} "
              f"[run {t['run_at']}]", file=out)
        for m in t["missed"]:
            why = f"justified: {m['justified']}" if m["justified"] else "NOT JUSTIFIED"
            print(f"  {m['outcome']:<12} {m['id']}: {m['misunderstood']} ({why})", file=out)
        for i in t["justified_but_caught"]:
            print(f"  caught       {i} is in JUSTIFIED: drop it from the list", file=out)
    out.flush()


def rescore(project: str, *, root: Path = ROOT, out=sys.stdout) -> dict:
    """The last report tallied again by the corpus as it is now (its JUSTIFIED list, the
    mistakes it still holds), without running a checker."""
    path = Path(root) / "build" / f"mistakes-{project}" / "report.json"
    if not path.is_file():
        raise SystemExit(f"{project}: no corpus report at {path}; run make mistakes "
                         f"MISTAKES_PROJECT={project} first")
    mistakes, justified = load_corpus(project, root)
    report = write_report(path, project, json.loads(path.read_text())["seed"], [], {},
                          justified, mistakes)
    print_report(report, out)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append",
                        help="a project (repeatable); default: every project with a solution")
    parser.add_argument("--stage", type=int, action="append", help="only these stages")
    parser.add_argument("--seed", type=int, default=1, help="the checker's seed (default 1)")
    parser.add_argument("--jobs", type=int, choices=(1, 2), default=1)
    parser.add_argument("--corpus", choices=CORPORA, default="all",
                        help="judge the whole corpus (default), only its blind part or "
                        "only the course's own; the report keeps the rest as last run")
    parser.add_argument("--match", default="", help="only mistakes whose id holds this text "
                        "(one batch: blind-b2-); the report keeps the rest as last run")
    parser.add_argument("--rescore", action="store_true",
                        help="run nothing: the last reports tallied by the corpus as it is now")
    args = parser.parse_args(argv)
    unjustified = 0
    for name in args.project or projects(with_solution=True):
        report = (rescore(name) if args.rescore else
                  measure_project(name, seed=args.seed, jobs=args.jobs, stages=args.stage,
                                  corpus=args.corpus, match=args.match))
        unjustified += sum(t["unjustified"] for t in report["stages"].values())
    return 1 if unjustified else 0


if __name__ == "__main__":
    sys.exit(main())

"""make mutants: mutation testing of each checker, with the checker as the oracle.

    python -m coursekit.commands.mutants [--project P] [--seed S] [--jobs 1|2]

Cosmic Ray (pinned in pyproject.toml) makes the mutants: one small change each (an
operator swapped, a constant moved, a condition negated) to a copy of
``projects/<p>/solution/model.py``, and only inside the learner-facing regions (the
``### BEGIN SOLUTION stage N: ...`` / ``### END SOLUTION`` bodies the starter blanks).
A mutant in a stage-N region is tested by that stage's checker, run as Cosmic Ray's test
command: ``check.py --stage N --impl MUTANT --seed S --fail-fast`` with a timeout. Exit
non-zero (or the timeout) kills the mutant; exit 0 means the checker accepted a wrong solution.

Survivors the checker cannot and need not kill (the change keeps the contract: a
tolerance inside the bracket the contract allows, a dead branch) are listed with their
reason in ``projects/<p>/tests/equivalent_mutants.txt``, one per line::

    <fnmatch pattern> -- <reason>

The pattern is matched against the mutant's id (``<function>/<operator>#k``) and against
``<id> <changed line>``, so ``<function>/NumberReplacer#* <the changed line>`` names one
change by what it does, which survives edits elsewhere in the function.

and leave the score's denominator. Score = killed / (mutants - equivalent - incompetent
- inconclusive) (incompetent: Cosmic Ray could not apply or run the mutant; inconclusive:
the checker's run stopped at an INCONCLUSIVE timing check with no FAIL, a non-zero exit
that is no evidence against the mutant: under load a correct solution gets it too, so
it is counted apart and asks for a rerun, never as a kill). Every other
survivor is printed with its id and the changed line: kill it with a check or justify it.

Why a snapshot of the checker: the run takes long, and the checker is what is measured;
its ``tests/`` folder is copied to ``build/mutants-<p>/tests`` (three levels below the
course root, as the original) so editing the checker meanwhile changes nothing.
Why at most 2 jobs with one XLA thread each: this is a 2-core machine shared with others.
Bitwise and shift operator swaps are left out by default (on float code they raise at
once: they would only pad the score); ``--all-operators`` keeps them.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from coursekit.authoring.starters import BEGIN, END
from coursekit.facts import ROOT, projects

EQUIVALENTS = "equivalent_mutants.txt"
PADDING_OPERATORS = re.compile(r"_(LShift|RShift|BitOr|BitAnd|BitXor)(_|$)")
STAGE = re.compile(r"stage\s+(\d+)\s*:\s*([A-Za-z_]\w*)")
# Only --flags: XLA stops reading XLA_FLAGS at a token without "--", so a checker's own
# flags appended after one (sharded-training's 8 CPU devices) would be ignored.
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false"
# The checker's summary line of a run that no check failed but a timing check could not
# decide (coursekit.checking.tally.summary_line; its exit status 3 reads as a kill).
UNDECIDED_RUN = re.compile(r"^\d+ passed, 0 failed, \d+ inconclusive", re.MULTILINE)


@dataclass(frozen=True)
class Region:
    stage: int
    name: str
    first: int  # 1-based line numbers of the body, markers excluded
    last: int


@dataclass
class Mutant:
    id: str
    stage: int
    line: int
    operator: str
    outcome: str = "pending"  # killed | survived | equivalent | timeout | incompetent
    #                             | inconclusive
    reason: str = ""
    change: str = ""


def learner_regions(source: str) -> list[Region]:
    """The solution regions the learner writes, with their stage and name: every one
    inside a function, and at module level those that name a stage (helpers only that
    stage's functions call, which the starter drops); a module-level region naming none
    (imports, helpers shared by stages) is not mutated."""
    regions, start = [], None
    for number, line in enumerate(source.splitlines(), 1):
        begin = BEGIN.match(line)
        if begin:
            named = begin["indent"] or STAGE.search(begin["hint"])
            start = (number, begin) if named else None
        elif END.match(line) and start is not None:
            number0, match = start
            found = STAGE.search(match["hint"])
            if not found:
                raise ValueError(f"line {number0}: BEGIN SOLUTION without 'stage N: name'")
            regions.append(Region(int(found[1]), found[2], number0 + 1, number - 1))
            start = None
    return regions


def read_equivalents(path: Path) -> list[tuple[str, str]]:
    """(pattern, reason) pairs; a line without a reason is an error (it must say why)."""
    if not path.is_file():
        return []
    pairs = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition(" -- ")
        if not pattern.strip() or not reason.strip():
            raise ValueError(f"{path}:{number}: expected '<pattern> -- <reason>', got {raw!r}")
        pairs.append((pattern.strip(), reason.strip()))
    return pairs


def equivalent_reason(mutant: Mutant, equivalents: list[tuple[str, str]]) -> str | None:
    for pattern, reason in equivalents:
        if any(fnmatch.fnmatchcase(text, pattern)
               for text in (mutant.id, f"{mutant.id} {mutant.change}")):
            return reason
    return None


def cosmic_ray(*args: str) -> None:
    subprocess.run([str(Path(sys.executable).with_name("cosmic-ray")), *args], check=True,
                   stdout=subprocess.DEVNULL)


def write_config(path: Path, module: Path, command: str, timeout: float) -> None:
    path.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(str(module))}\n"
        f"timeout = {float(timeout)}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n\n"
        "[cosmic-ray.distributor]\nname = \"local\"\n")


def select(db_path: Path, region: list[Region], keep_padding: bool, shard: int,
           shards: int, sample: int = 0, sample_seed: int = 0) -> tuple[dict[str, Mutant], int]:
    """Skip (as Cosmic Ray's own filters do) every work item outside this stage's regions,
    padding operators and other shards; name the rest ``<function>/<operator>#k``.
    ``sample`` > 0 keeps that many of the stage's mutants, drawn with ``sample_seed`` (ids
    are given before the draw, so a mutant has the same id sampled or not). Returns the
    kept mutants and how many the stage has in all."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult
    candidates, skipped, seen = [], [], defaultdict(int)
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        items = sorted(db.pending_work_items,
                       key=lambda w: (w.mutations[0].start_pos, w.mutations[0].operator_name))
        for item in items:
            m = item.mutations[0]
            home = next((r for r in region if r.first <= m.start_pos[0] <= r.last), None)
            if home is None or (not keep_padding and PADDING_OPERATORS.search(m.operator_name)):
                skipped.append(item.job_id)
                continue
            op = m.operator_name.removeprefix("core/")
            seen[home.name, op] += 1
            candidates.append((item.job_id, Mutant(f"{home.name}/{op}#{seen[home.name, op]}",
                                                   home.stage, m.start_pos[0], op)))
        chosen = range(len(candidates))
        if 0 < sample < len(candidates):
            chosen = sorted(random.Random(sample_seed).sample(range(len(candidates)), sample))
        chosen = set(chosen)
        kept, index = {}, 0
        for k, (job_id, mutant) in enumerate(candidates):
            if k in chosen and index % shards == shard:
                kept[job_id] = mutant
            else:
                skipped.append(job_id)
            index += k in chosen
        if skipped:
            db.set_multiple_results(skipped, WorkResult(output="not this stage or shard",
                                                        worker_outcome=WorkerOutcome.SKIPPED))
    return kept, len(candidates)


def collect(db_path: Path, kept: dict[str, Mutant]) -> list[Mutant]:
    from cosmic_ray.work_db import WorkDB, use_db
    with use_db(str(db_path), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            mutant = kept.get(item.job_id)
            if mutant is None:
                continue
            changed = [ln[1:].strip() for ln in (result.diff or "").splitlines()
                       if ln.startswith("+") and not ln.startswith("+++")]
            mutant.change = changed[0] if changed else ""
            if result.test_outcome is None:
                mutant.outcome = "incompetent"
            elif result.output == "timeout":
                mutant.outcome = "timeout"
            elif UNDECIDED_RUN.search(result.output or ""):
                mutant.outcome = "inconclusive"
            else:
                mutant.outcome = {"killed": "killed", "survived": "survived"}.get(
                    str(result.test_outcome.value), "incompetent")
    return list(kept.values())


def run_reference(checker: Path, impl: Path, stage: int, seed: int, env: dict) -> float:
    """The unmutated solution must pass the stage (else the oracle is broken); its time
    sets the mutants' timeout. A run where nothing failed but a timing check could not
    decide (a loaded machine) is run once more, as ``grade`` does; undecided again, the
    oracle still stands: a mutant is caught only by what fails, never by an undecided
    check (``UNDECIDED_RUN``)."""
    from coursekit.checking.tally import INCONCLUSIVE_EXIT
    command = [sys.executable, str(checker), "--stage", str(stage), "--impl", str(impl),
               "--seed", str(seed)]
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode == INCONCLUSIVE_EXIT:   # once more, timed alone
        start = time.perf_counter()
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
    if proc.returncode == INCONCLUSIVE_EXIT:
        print(f"  the reference is inconclusive at seed {seed} twice (nothing failed): "
              "mistakes are judged by the checks that fail", flush=True)
    elif proc.returncode != 0:
        raise SystemExit(f"the reference fails stage {stage} at seed {seed}: the oracle is "
                         f"broken, no mutation score.\n{proc.stdout[-2000:]}")
    return time.perf_counter() - start


def run_shard(stage: int, regions: list[Region], seed: int, shard: int,
              shards: int, base: Path, checker: Path, env: dict, timeout: float,
              keep_padding: bool, sample: int = 0) -> tuple[list[Mutant], int]:
    work = base / f"stage{stage}-shard{shard}"
    work.mkdir(parents=True, exist_ok=True)
    module = work / "model.py"
    shutil.copyfile(base / "solution.py", module)
    config, db = work / "cosmic-ray.toml", work / "session.sqlite"
    # --fail-fast: a killed mutant stops at its first failing check (most are killed)
    command = (f"{sys.executable} {checker} --stage {stage} --impl {module} --seed {seed} "
               "--fail-fast")
    write_config(config, module, command, timeout)
    db.unlink(missing_ok=True)
    cosmic_ray("init", str(config), str(db))
    kept, population = select(db, [r for r in regions if r.stage == stage], keep_padding,
                              shard, shards, sample, sample_seed=seed * 1000 + stage)
    subprocess.run([str(Path(sys.executable).with_name("cosmic-ray")), "exec", str(config),
                    str(db)], check=True, env=env, stdout=subprocess.DEVNULL)
    return collect(db, kept), population


def measure_project(project: str, *, seed: int = 1, jobs: int = 1,
                    stages: list[int] | None = None, keep_padding: bool = False,
                    sample: int = 0, root: Path = ROOT, out=sys.stdout) -> dict:
    """Mutate ``root/projects/<project>/solution/model.py``, print and return the score
    (also written to ``root/build/mutants-<project>/report.json``). ``sample`` > 0: only
    that many mutants per stage, drawn with the seed: an estimate, printed with its 95%
    interval, for a stage whose full run takes hours."""
    home = Path(root) / "projects" / project
    base = Path(root) / "build" / f"mutants-{project}"
    base.mkdir(parents=True, exist_ok=True)
    solution = base / "solution.py"  # the solution as it is now, for every stage
    shutil.copyfile(home / "solution" / "model.py", solution)
    regions = learner_regions(solution.read_text())
    shutil.rmtree(base / "tests", ignore_errors=True)
    shutil.copytree(home / "tests", base / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    checker = base / "tests" / "check.py"
    equivalents = read_equivalents(home / "tests" / EQUIVALENTS)
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    if jobs > 1:  # two checkers at once on 2 cores: one XLA thread each
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + ONE_THREAD).strip()
    wanted = sorted({r.stage for r in regions} & set(stages or [r.stage for r in regions]))
    mutants: list[Mutant] = []
    population: dict[int, int] = {}
    ran: dict[int, str] = {}
    name = f"report-sample{sample}.json" if sample else "report.json"
    merge = bool(stages) and not sample
    report = write_report(base / name, project, [], seed, {}, {}, equivalents, merge) \
        if not wanted else None
    for stage in wanted:
        ref_s = run_reference(checker, solution, stage, seed, env)
        timeout = max(60.0, 4 * ref_s)
        print(f"{project} stage {stage}: reference passes in {ref_s:.1f} s; mutant timeout "
              f"{timeout:.0f} s", file=out, flush=True)
        with ThreadPoolExecutor(jobs) as pool:
            shards = pool.map(lambda k, st=stage, t=timeout: run_shard(
                st, regions, seed, k, jobs, base, checker, env, t, keep_padding, sample),
                range(jobs))
            for found, population[stage] in shards:
                mutants.extend(found)
        ran[stage] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # written after every stage: a run stopped halfway keeps the stages it finished
        report = write_report(base / name, project, mutants, seed, population, ran,
                              equivalents, merge)
    print_report(report, out)
    return report


def write_report(path: Path, project: str, mutants: list[Mutant], seed: int,
                 population: dict, ran: dict, equivalents: list, merge: bool) -> dict:
    """Score the stages measured so far and write the report; ``merge``: a rerun of some
    stages, the others as the last report at this seed has them."""
    mutants = list(mutants)
    if merge:
        kept, ran = earlier_stages(path, sorted(ran), seed, ran)
        mutants.extend(kept)
    for m in mutants:
        if m.outcome in ("survived", "equivalent", "inconclusive"):  # the list decides
            reason = equivalent_reason(m, equivalents)
            if reason:
                m.outcome, m.reason = "equivalent", reason
            elif m.outcome == "equivalent":  # its line is gone: a survivor again
                m.outcome, m.reason = "survived", ""
    report = score(project, mutants, seed, population)
    # a line that would class a mutant the checker now kills as equivalent: should that
    # check stop catching it, it would count as equivalent unseen (two such lines were)
    report["stale_equivalents"] = [
        {"id": m.id, "change": m.change, "reason": reason} for m in mutants
        if m.outcome == "killed" and (reason := equivalent_reason(m, equivalents))]
    for stage, when in ran.items():
        report["stages"][stage]["run_at"] = when
    path.write_text(json.dumps(report, indent=1))
    return report


def rescore(project: str, *, root: Path = ROOT, out=sys.stdout) -> dict:
    """The last full report decided again by the equivalents file as it is now, without
    running a mutant: after a survivor is justified in the file, or an entry removed."""
    path = Path(root) / "build" / f"mutants-{project}" / "report.json"
    if not path.is_file():
        raise SystemExit(f"{project}: no mutation report at {path} to score again; run "
                         f"make mutants MUTANTS_PROJECT={project} first")
    old = json.loads(path.read_text())
    ran = {int(k): t.get("run_at", "earlier") for k, t in old["stages"].items()}
    equivalents = read_equivalents(Path(root) / "projects" / project / "tests" / EQUIVALENTS)
    report = write_report(path, project, [Mutant(**m) for m in old["mutants"]], old["seed"],
                          {}, ran, equivalents, merge=False)
    print_report(report, out)
    return report


def earlier_stages(path: Path, rerun: list[int], seed: int,
                   ran: dict) -> tuple[list[Mutant], dict]:
    """The mutants of the stages not rerun now, from the last full report at the same
    seed (none if there is none), with when each stage ran: a report stays whole when
    one stage is measured again after its checker changed."""
    if not path.is_file():
        return [], ran
    old = json.loads(path.read_text())
    if old.get("seed") != seed:
        return [], ran
    kept = [Mutant(**m) for m in old["mutants"] if m["stage"] not in rerun]
    for stage in {m.stage for m in kept}:
        ran = {**ran, stage: old["stages"].get(str(stage), {}).get("run_at", "earlier")}
    return kept, dict(sorted(ran.items()))


def score(project: str, mutants: list[Mutant], seed: int,
          population: dict[int, int] | None = None) -> dict:
    """Per stage and in all; ``population`` (stage -> mutants the stage has) marks a
    sampled run: each tally then says how many it was drawn from."""
    population = population or {}
    stages = {}
    for stage in sorted({m.stage for m in mutants}):
        group = [m for m in mutants if m.stage == stage]
        stages[stage] = tally(group, population.get(stage))
    total = sum(population.values()) if population else None
    return {"project": project, "seed": seed, "stages": stages,
            "total": tally(mutants, total),
            "survivors": [asdict(m) for m in sorted(mutants, key=lambda m: m.id)
                          if m.outcome == "survived"],
            "mutants": [asdict(m) for m in mutants]}


def tally(group: list[Mutant], population: int | None = None) -> dict:
    counts = {k: sum(m.outcome == k for m in group)
              for k in ("killed", "timeout", "survived", "equivalent", "incompetent",
                        "inconclusive")}
    counted = (len(group) - counts["equivalent"] - counts["incompetent"]
               - counts["inconclusive"])
    killed = counts["killed"] + counts["timeout"]
    found = {**counts, "mutants": len(group),
             "score": round(killed / counted, 4) if counted else None}
    if population is not None and population > len(group) and counted:
        found["sampled_from"] = population
        found["interval_95"] = [round(x, 4) for x in wilson(killed, counted)]
    return found


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion k/n (sound at 0 and n, unlike k/n +- 2 se)."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def line(name: str, t: dict) -> str:
    pct = "n/a" if t["score"] is None else f"{100 * t['score']:.1f}%"
    if "sampled_from" in t:
        low, high = t["interval_95"]
        pct += (f" (a sample of {t['mutants']} of {t['sampled_from']} mutants; 95% interval "
                f"{100 * low:.0f}-{100 * high:.0f}%)")
    return (f"{name}: {pct} killed ({t['killed'] + t['timeout']} of "
            f"{t['mutants'] - t['equivalent'] - t['incompetent'] - t.get('inconclusive', 0)}; "
            f"{t['equivalent']} equivalent, {t['survived']} survived, {t['timeout']} by "
            f"timeout, {t['incompetent']} incompetent"
            + (f", {t['inconclusive']} inconclusive: rerun them when the machine is quieter"
               if t.get("inconclusive") else "") + ")")


def print_report(report: dict, out=sys.stdout) -> None:
    from coursekit.commands.mistakes_report import corpus_figure
    for stage, t in report["stages"].items():
        when = f" [run {t['run_at']}]" if "run_at" in t else ""
        print(line(f"{report['project']} stage {stage}", t) + when, file=out)
        corpus = corpus_figure(report["project"], int(stage))
        print(f"  beside it, make mistakes: {corpus or 'no corpus report yet'}", file=out)
    print(line(f"{report['project']} all stages", report["total"]), file=out)
    for m in report["survivors"]:
        print(f"  survived  {m['id']}  (line {m['line']}): {m['change']}", file=out)
    for m in report.get("stale_equivalents", []):
        print(f"  killed, yet listed as equivalent  {m['id']}: {m['change']} "
              f"({m['reason']}): remove its line from {EQUIVALENTS}", file=out)
    out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append",
                        help="a project (repeatable); default: every project with a solution")
    parser.add_argument("--stage", type=int, action="append", help="only these stages")
    parser.add_argument("--seed", type=int, default=1, help="the checker's seed (default 1)")
    parser.add_argument("--jobs", type=int, choices=(1, 2), default=1)
    parser.add_argument("--sample", type=int, default=0, metavar="N",
                        help="only N mutants per stage, drawn with the seed (an estimate "
                             "with its 95%% interval; the full run is the measurement)")
    parser.add_argument("--all-operators", action="store_true",
                        help="keep bitwise and shift operator swaps too")
    parser.add_argument("--rescore", action="store_true",
                        help="no mutant run: the last full report decided again by the "
                             "equivalents file as it is now")
    args = parser.parse_args(argv)
    names = args.project or projects(with_solution=True)
    for name in names:
        if args.rescore:
            rescore(name)
            continue
        measure_project(name, seed=args.seed, jobs=args.jobs, stages=args.stage,
                        keep_padding=args.all_operators, sample=args.sample)
    return 0


if __name__ == "__main__":
    sys.exit(main())

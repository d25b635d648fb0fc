"""Submissions graded stage by stage by the real grader's sandboxed stage run
(``autograder.stage.grade_stage``, as root: the sandbox, jail, spawner, guard and runner
of a ``grade`` batch), each stage with only the checks its test reads, two at a time as a
batch's two workers. For attack files: an attack aims at a few checks, and its control
fails just those, so what the attack could gain is decided there; a whole-stage ``grade``
batch spent most of its minutes on checks no assertion read.

Run as a process of its own (``python tests/stage_batch.py SPEC OUT``), so a test can
watch its process tree and read its stderr as it would a ``grade`` batch's. SPEC (JSON):
{"jobs": [{"student", "submission", "project", "stage", "only": [ids] or null}],
"limits": {"timeout", "memory_mb", "disk_mb"}, "hide": [folders], "workers": n}; the jobs
start in their order; a job left inconclusive or starved is graded once more at the end,
as a ``grade`` batch does. OUT: one record per job, in the same order."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def grade(folder: Path, jobs: list[tuple[str, Path, tuple]], **spec) -> dict:
    """Grade ``jobs`` ((student, submission, (project, stage, only))) in a batch process
    of its own; ``spec``: SPEC's other fields. Returns {(student, item): record}."""
    spec_path, out = folder / "stage-batch.json", folder / "stage-batch-records.json"
    spec_path.write_text(json.dumps({"jobs": [
        {"student": s, "submission": str(sub), "project": p, "stage": n, "only": only}
        for s, sub, (p, n, only) in jobs], "hide": [str(folder)], **spec}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, __file__, str(spec_path), str(out)],
                          capture_output=True, text=True, env=env, timeout=1800, check=False,
                          cwd=Path(__file__).resolve().parent.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return {(r["student"], r["item"]): r for r in json.loads(out.read_text())}


def main(spec_path: str, out_path: str) -> None:
    from autograder import course
    from autograder.grade import make_settings, undecided
    from autograder.stage import grade_stage
    from coursekit.facts import ROOT

    spec = json.loads(Path(spec_path).read_text())
    jobs, limits = spec["jobs"], spec.get("limits", {})
    settings = make_settings(ROOT, [ROOT, *map(Path, spec.get("hide", []))],
                             timeout=limits.get("timeout", 600),
                             memory_mb=limits.get("memory_mb", 4096), cell_timeout=120,
                             nb_sizes="ci", disk_mb=limits.get("disk_mb"))
    projects = course.discover_projects(ROOT, {j["project"] for j in jobs})

    def one(job: dict) -> dict:
        stage = projects[job["project"]].stages[job["stage"]]
        only = job.get("only")
        if only:  # the record lists (and scores) the checks that ran
            unknown = set(only) - {c for c, _ in stage.checks}
            assert not unknown, f"{stage.item} has no check {sorted(unknown)}"
            stage = dataclasses.replace(stage, checks=[c for c in stage.checks
                                                       if c[0] in only])
        return grade_stage(settings, stage, job["student"], Path(job["submission"]), None,
                           only=only)

    with ThreadPoolExecutor(spec.get("workers", 2)) as pool:
        records = list(pool.map(one, jobs))
        # as a grade batch does (autograder.grade.retry_undecided): a stage the machine's
        # load may have decided (inconclusive timing, a starved timeout) is graded once
        # more, at the end
        again = [i for i, r in enumerate(records) if undecided(r)]
        for i, record in zip(again, pool.map(one, [jobs[i] for i in again])):
            records[i] = record
    Path(out_path).write_text(json.dumps(records))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    main(*sys.argv[1:])

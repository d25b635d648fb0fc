"""Grade several stages of one project in one sandboxed run: one checker process and one
learner process for all of them, instead of one of each per stage (a learner process
costs about a second of CPU to start: Python, JAX and the learner's file).

Each stage keeps what it has when graded alone: its own held-out seed, cache and work
folder (``Checker.run`` with a seed per stage), its own record, status and points. Only
a clean run is split into per-stage records: the checker finished (``done``), exited 0,
nothing was refused, killed or reported as tampering, no learner process died, every
check of every stage reported, and no stage's checks took more than half of its own
wall-clock limit. Otherwise every stage is graded again alone (``grade_stage``), so a
crash, a timeout, a violation or tampering is recorded and scored exactly as a stage
graded alone records and scores it; only its cost grows.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from autograder import sandbox
from autograder.course import Stage
from autograder.stage import (
    grade_stage,
    has_impl,
    impl_of,
    interpret,
    missing_record,
    sandboxed_run,
    unexpected_files,
)
from autograder.workspace import Settings
from coursekit import protocol

SHARE_OF_LIMIT = 0.5  # a stage whose checks alone took more is graded again alone


def grade_stages(settings: Settings, stages: list[Stage], student: str, submission: Path,
                 seeds: list[int | None]) -> list[dict]:
    """One record per stage, in the order of ``stages`` (all of one project)."""
    if len(stages) == 1:
        return [grade_stage(settings, stages[0], student, submission, seeds[0])]
    project = stages[0].project
    if not has_impl(submission, project):
        return [missing_record(st, student, impl_of(project)) for st in stages]
    limits = settings.sandbox_limits()
    # a check that runs past one stage's limit would time its stage out alone: the run
    # stops there ("quiet") and the stages are graded alone, instead of at N limits
    shared = dataclasses.replace(limits, wall_s=limits.wall_s * len(stages),
                                 quiet_s=limits.wall_s)
    numbers = [st.number for st in stages]
    outcome = sandboxed_run(settings, project, numbers, seeds, submission, shared)
    why = not_clean(stages, outcome, limits)
    if why:
        records = [grade_stage(settings, st, student, submission, seed)
                   for st, seed in zip(stages, seeds)]
        for record in records:
            record["sandbox_run"] = f"alone: the run shared by stages {numbers} {why}"
        return records
    records = split(stages, student, outcome, limits)
    notes = unexpected_files(submission, project)
    for record in records:
        record["handed_in"] = notes
    return records


def stage_results(outcome: sandbox.Outcome) -> dict[int, dict[str, dict]]:
    """stage -> check id -> the result the runner sent."""
    found: dict[int, dict[str, dict]] = {}
    for m in outcome.channel:
        result = m.get("result") if m.get("kind") == protocol.CHECK else None
        if isinstance(result, dict):
            found.setdefault(result.get("stage"), {})[result.get("check_id")] = result
    return found


def not_clean(stages: list[Stage], outcome: sandbox.Outcome,
              limits: sandbox.Limits) -> str:
    """Why the shared run cannot be split into per-stage records ('' when it can)."""
    if outcome.killed_for:
        return f"was stopped ({outcome.killed_for})"
    if outcome.returncode != 0:
        return f"ended with {outcome.signal_name or f'exit code {outcome.returncode}'}"
    if any(m.get("kind") == protocol.VIOLATION for m in outcome.channel):
        return "reported a violation"
    if not any(m.get("kind") == protocol.DONE for m in outcome.channel):
        return "did not finish"
    found = stage_results(outcome)
    if set(found) - {st.number for st in stages}:
        return "reported checks of other stages"
    for st in stages:
        results = found.get(st.number, {})
        if set(results) != {cid for cid, _ in st.checks}:
            return f"did not report every check of stage {st.number}"
        if any(r.get("status") == "crash" or "MemoryError" in str(r.get("message", ""))
               for r in results.values()):
            return f"lost a learner process or memory in stage {st.number}"
        took = sum(float(r.get("duration_s") or 0.0) for r in results.values())
        if took > SHARE_OF_LIMIT * limits.wall_s:
            return f"spent {took:.0f} s on stage {st.number} (limit {limits.wall_s:g} s)"
    return ""


def split(stages: list[Stage], student: str, outcome: sandbox.Outcome,
          limits: sandbox.Limits) -> list[dict]:
    """Per-stage records of a clean shared run: each stage's own checks, and its own
    check time plus an equal share of the run's start-up as its wall time (the run's
    CPU time is the run's, named in ``sandbox_run``: no stage has a figure of its own)."""
    found = stage_results(outcome)
    took = {st.number: sum(float(r.get("duration_s") or 0.0)
                           for r in found[st.number].values()) for st in stages}
    start_share = max(outcome.wall_s - sum(took.values()), 0.0) / len(stages)
    numbers = [st.number for st in stages]
    records = []
    for st in stages:
        view = dataclasses.replace(
            outcome, wall_s=took[st.number] + start_share, cpu_s=None,
            channel=[m for m in outcome.channel if m.get("kind") != protocol.CHECK
                     or (m.get("result") or {}).get("stage") == st.number])
        record = interpret(st, student, view, limits)
        record["isolation"] = sandbox.isolation()
        record["not_applied"] = sandbox.not_applied()
        cpu = "" if outcome.cpu_s is None else f", {outcome.cpu_s:.1f} s CPU"
        record["sandbox_run"] = f"shared by stages {numbers} ({outcome.wall_s:.1f} s{cpu})"
        records.append(record)
    return records

"""Grade one project stage of one submission: a sandboxed checker run, read back into
a gradebook record with one of the statuses below.

    pass     every check of the stage passed
    inconclusive  no check failed, but a timing check could not decide under the
             machine's load (the grader retries the stage once at the end of the batch)
    fail     the checks ran; some failed (a wrong answer, or "not yet" on a starter)
    error    the learner's code could not run (syntax error, missing function, an
             exception), or the run did something refused: a sandbox violation
             (``read-outside``, ``write-outside``, ``network``, ``signal-outside``,
             ``tamper-timing``, ``tamper-checker``), evidence of forged self-reports
             (``tamper-evidence``), a fork bomb (``process-limit``), an output flood
             (``output-limit``)
    timeout  the stage ran past its wall-clock limit (reason ``wall-clock``; or
             ``wall-clock-starved`` when its processes got under a quarter of a core of CPU in
             that time: the machine may have starved it, and the grader grades it once
             more at the end of the batch; ``autograder.run_cpu``)
    memory   the stage ran past its memory limit (killed, or MemoryError raised)
    crash    the process running learner code died (a signal such as SIGSEGV/SIGABRT,
             or an exit) or left before the checks finished
    missing  the submission has no file for this project

Checks that finished before a timeout or crash keep their result; the rest get the
stage's status and no points. A sandbox violation scores the whole stage 0. Each record
says where the learner's code ran (``learner_isolation``): ``learner-process`` (its own
process, apart from the verdict) or ``in-process`` (the checker's interpreter).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
from pathlib import Path

from autograder import outcomes, run_cpu, sandbox
from autograder.course import Stage
from autograder.submissions import plain_path
from autograder.workspace import Settings, prepare
from coursekit import protocol
from coursekit.checking.errors import GRADED_BY_INSTRUCTOR

STATUSES, KILLED = outcomes.STATUSES, outcomes.KILLED  # the one outcome table


def base_record(stage: Stage, student: str) -> dict:
    return {"student": student, "item": stage.item, "kind": "stage",
            "project": stage.project, "stage": stage.number, "title": stage.title,
            "status": "missing", "reason": "", "message": "", "points": 0.0,
            "max_points": stage.max_points, "checks": []}


def missing_record(stage: Stage, student: str, impl: str) -> dict:
    record = base_record(stage, student)
    record.update(reason="missing-file", message=f"the submission has no {impl}")
    record["checks"] = [{"id": cid, "status": "missing", "points": 0.0, "max_points": pts,
                         "message": ""} for cid, pts in stage.checks]
    return record


def grade_stage(settings: Settings, stage: Stage, student: str, submission: Path,
                seed: int | None, only: list[str] | None = None) -> dict:
    """The record of one stage of one submission (``only``: run just these checks of
    it, a test's few; the record lists ``stage.checks``)."""
    if not has_impl(submission, stage.project):
        return missing_record(stage, student, impl_of(stage.project))
    limits = settings.sandbox_limits()
    outcome = sandboxed_run(settings, stage.project, [stage.number], [seed], submission,
                            limits, only=only)
    record = interpret(stage, student, outcome, limits)
    record["isolation"] = sandbox.isolation()
    record["not_applied"] = sandbox.not_applied()
    record["handed_in"] = unexpected_files(submission, stage.project)
    return record


def unexpected_files(submission: Path, project: str) -> list[str]:
    """What the project's starter holds beside ``model.py``, each named with what the
    grader did with it (``autograder.handed_in``); for the record and the feedback."""
    from autograder.handed_in import starters
    try:
        return next((s.unexpected() for s in starters(submission) if s.project == project),
                    [])
    except Exception as err:  # noqa: BLE001 - the run already graded; the note only says
        return [f"the starter could not be listed again: {type(err).__name__}"]


def impl_of(project: str) -> str:
    return f"projects/{project}/starter/model.py"


def has_impl(submission: Path, project: str) -> bool:
    """The submission's file for ``project``, a plain file reached without a link (a
    symlink, or a linked folder on the way, is refused)."""
    path = plain_path(submission, impl_of(project))
    return path is not None and path.is_file()


def sandboxed_run(settings: Settings, project: str, numbers: list[int],
                  seeds: list[int | None], submission: Path,
                  limits: sandbox.Limits, only: list[str] | None = None) -> sandbox.Outcome:
    """One run of ``project``'s checker on the submission's file, for the stages
    ``numbers`` (each with its seed), in a fresh sandbox under ``limits``. As root the
    checker runs as the run's checker uid and every learner process as a learner uid of
    its own (``autograder.uids``); the checker's work folder is its own (learner
    processes reach only the folders it shares with them: ``coursekit.checking.spawn``)."""
    namespaces, identity = sandbox.mode_identity()
    uid = identity.checker if identity is not None else None
    sandbox.make_undumpable()  # this worker holds the token and seeds: not readable
    with sandbox.SandboxDir(uid, limits.disk_mb) as box:
        course = prepare(box, settings, submission, checker_group=uid)
        work = box.writable("work", mode=0o711 if identity is not None else 0o700)
        token = secrets.token_hex(16)
        read_fd, write_fd = os.pipe()
        env = {protocol.ENV_TOKEN: token, "COURSE_RECORDS": str(work / "records"),
               protocol.ENV_STAGE: json.dumps({
                   "check": str(course / "projects" / project / "tests" / "check.py"),
                   "impl": str(course / impl_of(project)), "stages": list(numbers),
                   "seeds": list(seeds), "workdir": str(work / "check"),
                   **({"only": list(only)} if only else {})})}
        jail = sandbox.Jail(box, [sys.executable, str(box.guard / "autograder_runner.py")],
                            uid=uid, cwd=work, env=env, limits=limits,
                            namespaces=namespaces, result_fd=write_fd,
                            hide=[Path(p) for p in settings.hide], identity=identity,
                            learner_sealed=True)
        return sandbox.run(jail, (read_fd, write_fd), token=token)


def interpret(stage: Stage, student: str, outcome: sandbox.Outcome,
              limits: sandbox.Limits) -> dict:
    """Outcome of the sandboxed run -> record (status, reason, points, per-check)."""
    record = base_record(stage, student)
    results = {m["result"]["check_id"]: m["result"] for m in outcome.channel
               if m.get("kind") == protocol.CHECK and isinstance(m.get("result"), dict)}
    violations = [m for m in outcome.channel if m.get("kind") == protocol.VIOLATION]
    done = next((m for m in outcome.channel if m.get("kind") == protocol.DONE), None)
    status, reason, message = _stage_status(outcome, results, violations, done, limits)
    checks = []
    for check_id, max_points in stage.checks:
        r = results.get(check_id)
        if r is None:
            checks.append({"id": check_id, "status": status if status != "pass" else "error",
                           "points": 0.0, "max_points": max_points,
                           "message": "not run: " + (message or status)})
            continue
        checks.append({"id": check_id, "status": r["status"],
                       "points": float(r["points"]), "max_points": float(r["max_points"]),
                       "message": r.get("message", ""), "hint": r.get("hint", ""),
                       "yours": r.get("yours", ""), "expected": r.get("expected", ""),
                       "evidence": r.get("evidence", ""),
                       "duration_s": r.get("duration_s", 0.0)})
    points = 0.0 if violations else sum(c["points"] for c in checks)
    record.update(status=status, reason=reason, message=message, points=points,
                  checks=checks, wall_s=round(outcome.wall_s, 3),
                  check_time_s=round(sum(c.get("duration_s", 0.0) for c in checks), 3),
                  peak_memory_mb=round(outcome.peak_memory_mb, 1),
                  peak_tasks=outcome.peak_tasks,
                  cpu_s=None if outcome.cpu_s is None else round(outcome.cpu_s, 3),
                  versions=(done or {}).get("versions", {}),
                  learner_isolation=(done or {}).get("learner_isolation", "unknown"),
                  measured_on=(done or {}).get("measured_on"),
                  # parts of checks this machine could not run (a package it lacks)
                  skipped=(done or {}).get("skipped", []),
                  # files the learner's code wrote that the checks took, with digests
                  learner_files=(done or {}).get("learner_files", []),
                  stdout_tail=outcome.stdout[-4000:], stderr_tail=outcome.stderr[-4000:])
    return record


def _stage_status(outcome, results, violations, done, limits) -> tuple[str, str, str]:
    if violations:
        v = violations[0]
        what, detail = v.get("what", "violation"), v.get("detail", "")
        if what == protocol.TAMPER_EVIDENCE:
            return "error", what, f"tamper evidence: {detail}; the stage scores 0"
        if what == protocol.TAMPER_CHECKER:
            return "error", what, f"the learner's code tried {detail} (the verdict is " \
                "computed in another process); the stage scores 0"
        return "error", what, f"sandbox: {detail} was refused; the stage scores 0"
    if outcome.killed_for == "wall-clock" and run_cpu.starved(outcome.cpu_s,
                                                              outcome.wall_s):
        return "timeout", outcomes.STARVED, (
            f"stopped: ran past the {limits.wall_s:g} s wall-clock limit having had "
            f"{outcome.cpu_s:.1f} s of CPU in {outcome.wall_s:.1f} s (under "
            f"{run_cpu.STARVED_SHARE:g} of a core: the machine was too busy to run it, "
            "or it slept or waited)")
    if outcome.killed_for:
        status = KILLED.get(outcome.killed_for, "crash")
        text = {"wall-clock": f"ran past the {limits.wall_s:g} s wall-clock limit",
                "memory-limit": f"used more than {limits.memory_mb} MB of memory",
                "process-limit": f"started more than {limits.max_tasks} processes/threads "
                                 "(fork bomb?)",
                "output-limit": f"printed more than {limits.max_output_bytes >> 20} MB",
                "disk-limit": f"filled its {limits.disk_mb} MB of disk",
                }.get(outcome.killed_for, outcome.killed_for)
        return status, outcome.killed_for, f"stopped: {text}"
    memory_errors = [r for r in results.values() if "MemoryError" in r.get("message", "")]
    if outcome.returncode is not None and outcome.returncode < 0:
        name = outcome.signal_name
        if outcome.returncode == -signal.SIGXFSZ:
            return "error", "file-size-limit", "wrote a file larger than the limit"
        if memory_errors:
            return "memory", "memory-error", memory_errors[0]["message"]
        return "crash", f"signal:{name}", f"the checker process was killed by {name}"
    if done is None:
        tail = outcome.stderr.strip().splitlines()[-1:] or [""]
        return "crash", "exit-before-results", \
            f"the process exited (code {outcome.returncode}) before the checks finished: " \
            f"{tail[0][:300]}"
    if memory_errors:
        return "memory", "memory-error", memory_errors[0]["message"]
    crashes = [r for r in results.values() if r["status"] == "crash"]
    if crashes:  # the learner process died; the checker lived to say so
        found = re.search(r"\((SIG\w+)\)", crashes[0].get("message", ""))
        reason = f"signal:{found.group(1)}" if found else "learner-exit"
        return "crash", reason, crashes[0].get("message", "")
    statuses = [r["status"] for r in results.values()]
    if statuses and all(s == "pass" for s in statuses):
        return "pass", "", ""
    graded = [r for r in results.values() if r["status"] == GRADED_BY_INSTRUCTOR]
    if graded and all(s in ("pass", GRADED_BY_INSTRUCTOR) for s in statuses):
        # a learner's copy (validate): the checks that need the instructor-only code are
        # graded where the instructor grades; nothing here failed
        return "fail", "graded-by-instructor", (
            f"{len(graded)} check(s) are graded by your instructor (they need the course's "
            "reference code, which this copy does not hold); every other check passed")
    errors = [r for r in results.values() if r["status"] == "error"]
    if errors:
        return "error", "learner-code", errors[0].get("message", "")
    if statuses and all(s in ("pass", "inconclusive") for s in statuses):
        unsure = next(r for r in results.values() if r["status"] == "inconclusive")
        return "inconclusive", "timing-inconclusive", unsure.get("message", "")
    first = next((r for r in results.values() if r["status"] not in (
        "pass", "inconclusive", GRADED_BY_INSTRUCTOR)), None)
    return "fail", "", (first or {}).get("message", "no checks ran")

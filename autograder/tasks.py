"""The grader's records, typed: what ``autograder.grade`` plans, hands to its workers and
gets back, and the values a status or a kill cause can take.

They are plain dicts at run time (they cross to worker processes, and a record is stored
as JSON in the gradebook); these ``TypedDict``s and ``Literal``s say which keys and
values each has, for a reader and for a type checker.

    Task        one (student, item): a ``StageTask`` (a project stage) or a
                ``NotebookTask``; planned by ``grade.Items.tasks_for``
    StagesUnit  the stage tasks of one project of one submission, graded in one
                sandboxed run (``grade.shared_runs``, ``autograder.project_run``)
    Record      what grading one task gives: status, reason, points, per-check results
                (``autograder.stage.interpret``, ``autograder.notebook``)
    Status      a record's status (``autograder.outcomes`` says what each means)
    KillCause   why the sandbox's watchdog stopped a run (``sandbox.Outcome.killed_for``)
    Regrade     which unchanged items ``grade --regrade`` grades again
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

Status = Literal["pass", "fail", "inconclusive", "error", "timeout", "memory", "crash",
                 "missing"]
KillCause = Literal[
    "wall-clock",     # past Limits.wall_s                    -> timeout
    "memory-limit",   # past Limits.memory_mb                 -> memory
    "process-limit",  # past Limits.max_tasks (a fork bomb)   -> error
    "output-limit",   # past Limits.max_output_bytes          -> error
    "disk-limit",     # past Limits.disk_mb                   -> error
    "quiet",          # no result for Limits.quiet_s (a shared run: graded again alone)
    "stopped",        # Monitor.stop() from another thread
]
TaskKind = Literal["stage", "notebook"]
Regrade = Literal["none", "failed", "all"]  # grade --regrade: what is graded again
STAGES: Literal["stages"] = "stages"  # the kind of a StagesUnit


class SettingsDict(TypedDict):
    """``autograder.workspace.Settings.to_dict()``: shared by every task of a batch."""
    course_root: str
    projects: list[str]
    hide: list[str]
    limits: dict[str, float]  # autograder.sandbox.Limits fields
    cell_timeout: float
    isolation: str | None
    nb_sizes: str


class StageRef(TypedDict):
    project: str
    number: int
    title: str
    checks: list[tuple[str, float]]  # (check id, points), in check order


class _TaskBase(TypedDict):
    student: str
    submission: str          # the submission's root folder (a zip already unpacked)
    error: str               # why the submission cannot be graded ("" when it can)
    settings: SettingsDict
    item: str                # "performance-audit/stage-2", or a notebook's name
    seed: int | None         # held out (None: public random seeds, as validate runs)
    max_points: float
    files_hash: str          # the learner's files
    checker_fp: str          # the checker (or notebook source) that grades them
    hash: str                # the content hash: an unchanged one is skipped
    retry_after: NotRequired[str]  # graded again because of this (grade.undecided)


class StageTask(_TaskBase):
    kind: Literal["stage"]
    stage: StageRef


class NotebookTask(_TaskBase):
    kind: Literal["notebook"]
    key_path: str            # the notebook's grading key (JSON)
    hidden: bool             # run the hidden tests
    project: str | None      # the project its check cells check
    submission_files: str    # files_hash of the project stages its check cells show
    project_fp: str
    graded_stages: NotRequired[list[dict]]  # added by check_cells.HeldNotebooks


Task = StageTask | NotebookTask


class StagesUnit(TypedDict):
    kind: Literal["stages"]
    student: str
    item: str                # the project
    tasks: list[StageTask]


Unit = Task | StagesUnit


class CheckRecord(TypedDict, total=False):
    id: str
    status: str              # a CheckResult status (coursekit.checking.contract)
    points: float
    max_points: float
    message: str
    hint: str
    yours: str
    expected: str
    evidence: str


class Record(TypedDict, total=False):
    """One gradebook row's record (``autograder.gradebook``: stored as JSON)."""
    student: str
    item: str
    kind: TaskKind
    status: Status
    reason: str              # a key of autograder.outcomes.TABLE, or "signal:<NAME>"
    message: str
    points: float
    max_points: float
    checks: list[CheckRecord]
    project: str | None
    stage: int | None
    notebook: str | None
    isolation: str
    sandbox_run: str
    files_hash: str
    checker_fp: str

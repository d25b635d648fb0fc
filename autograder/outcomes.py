"""One table of what can happen to a graded item (a project stage or a notebook): its
gradebook ``status``, its ``reason`` (the spelling the gradebook keeps) and the sentence a
learner reads in the feedback. Stages (``autograder.stage``), notebooks
(``autograder.notebook``), the CSV flags (``export``), the feedback (``feedback``) and
``validate`` all read it here.

    pass     everything passed                 fail     it ran; an answer was wrong
    inconclusive  a timing check's own measurements could not decide on the grading
             machine's load (retried once at the end of the batch; not the learner's fault)
    error    the code could not run, or did something refused (a sandbox refusal,
             tampering with the timing or the grader, a fork bomb, an output flood)
    timeout  past the wall-clock limit         memory   past the memory limit
             (reason ``wall-clock-starved``: with under a quarter of a core of CPU, so perhaps
             starved by the machine's load; retried once at the end of the batch, and
             counted apart when it stays so)
    crash    the process or kernel died        missing  no file for the item
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import get_args

from autograder.tasks import Status

STATUSES = get_args(Status)  # autograder.tasks.Status: one list
# What costs marks for reasons other than the answers (``validate`` exits 1 on these).
PROBLEMS = ("missing", "crash", "timeout", "memory", "error")


@dataclass(frozen=True)
class Outcome:
    status: str
    explain: str          # for the learner; no paths, no hidden test text
    flagged: bool = False  # a refusal or tampering: the export's ``flags`` column names it


TABLE: dict[str, Outcome] = {
    # stopped by the watchdog
    "wall-clock": Outcome("timeout", "it ran past the time limit and was stopped"),
    "wall-clock-starved": Outcome("timeout", "it was stopped at the time limit having had "
                                             "little CPU time (the grading machine was too "
                                             "busy to run it, or it slept or waited); it "
                                             "is graded once more, and one still stopped "
                                             "this way is shown to your instructor apart "
                                             "from other timeouts"),
    "cell-timeout": Outcome("timeout", "a cell ran past its time limit and was stopped"),
    "memory-limit": Outcome("memory", "it used more memory than allowed and was stopped"),
    "memory-error": Outcome("memory", "it ran out of memory (MemoryError)"),
    "process-limit": Outcome("error", "it started too many processes (a fork bomb?) and "
                                      "was stopped"),
    "output-limit": Outcome("error", "it printed more output than allowed and was stopped"),
    "file-size-limit": Outcome("error", "it wrote a file larger than allowed"),
    "disk-limit": Outcome("error", "it filled the disk space a run may use and was "
                                   "stopped"),
    "stopped": Outcome("crash", "it was stopped before it finished"),
    # refused by the sandbox
    "read-outside": Outcome("error", "it tried to read files outside its own folder "
                                     "(refused); the stage scores 0", flagged=True),
    "write-outside": Outcome("error", "it tried to write outside its own folder (refused); "
                                      "the stage scores 0", flagged=True),
    "network": Outcome("error", "it tried to use the network (refused); the stage scores 0",
                       flagged=True),
    "signal-outside": Outcome("error", "it tried to signal a process it did not start "
                                       "(refused); the stage scores 0", flagged=True),
    "tamper-timing": Outcome("error", "it replaced a timing function (time.perf_counter or "
                                      "jax.block_until_ready); the stage scores 0",
                             flagged=True),
    "tamper-checker": Outcome("error", "it replaced part of the checker in the process "
                                       "running your code; the stage scores 0", flagged=True),
    "tamper-evidence": Outcome("error", "the evidence your code reported about itself did "
                                        "not match what the checker measured; the stage "
                                        "scores 0", flagged=True),
    # (graded before issue 45 only: a notebook's tests now run apart from its cells;
    # kept so feedback and reports read older gradebooks)
    "tamper-notebook": Outcome("error", "a cell changed how the notebook's test cells run "
                                        "(an input transformer, exception handler, trace "
                                        "function or replaced test function); the notebook "
                                        "scores 0", flagged=True),
    # the grading machine
    "timing-inconclusive": Outcome("inconclusive", "a timing check could not tell a right "
                                                   "measurement from a wrong one under the "
                                                   "grading machine's load, even when run "
                                                   "again; it is not counted as your "
                                                   "mistake, and your instructor sees it"),
    "graded-by-instructor": Outcome("fail", "a learner's copy of the course: some checks "
                                            "need the course's reference code, which it "
                                            "does not hold; your instructor's grading runs "
                                            "them"),
    # the learner's code
    "learner-code": Outcome("error", ""),  # the checker's own message says what
    "borrowed-helper": Outcome("fail", "a notebook exercise called the course's own helper "
                                       "that computes its answer; that question scores 0"),
    "kernel-died": Outcome("crash", "the process running your notebook died (a crash in "
                                    "your code?)"),
    "exit-before-results": Outcome("crash", "the process exited before the checks finished"),
    "missing-file": Outcome("missing", "the file was not in the submission"),
    "unreadable-notebook": Outcome("error", "the notebook file could not be read"),
    "notebook-too-large": Outcome("error", "the notebook file is larger than the grader "
                                           "reads (clear large outputs)"),
    "notebook-too-many-cells": Outcome("error", "the notebook has more cells than the "
                                                "grader reads"),
    "notebook-too-deep": Outcome("error", "the notebook's JSON is nested deeper than the "
                                          "grader reads"),
    "notebook-too-many-values": Outcome("error", "the notebook holds more JSON values "
                                                 "(outputs, metadata) than the grader reads"),
    "bad-submission": Outcome("error", "the submission could not be unpacked"),
    # the grader's own failures
    "grader-error": Outcome("crash", "the grader failed on this item; your instructor has "
                                     "the details"),
    "grader-worker-died": Outcome("crash", "the grader failed on this item; your instructor "
                                           "has the details"),
}
# A run stopped at its wall clock having had under a quarter of a core (``run_cpu``),
# in its first grading and when graded again: counted apart, like ``inconclusive``.
STARVED = "wall-clock-starved"
SIGNAL = "signal:"  # ``signal:SIGSEGV``: killed by that signal -> crash
SIGNAL_OUTCOME = Outcome("crash", "")

# The watchdog's ``killed_for`` -> status (the reason is ``killed_for`` itself).
KILLED = {k: TABLE[k].status for k in ("wall-clock", "memory-limit", "process-limit",
                                       "output-limit", "disk-limit", "stopped")}
REFUSALS = tuple(r for r, o in TABLE.items() if o.flagged)


def status_of(reason: str) -> tuple[str, str]:
    """(status, reason) for a reason in the table."""
    outcome = SIGNAL_OUTCOME if reason.startswith(SIGNAL) else TABLE[reason]
    return outcome.status, reason


def killed(killed_for: str | None, otherwise: str = "kernel-died") -> tuple[str, str]:
    """(status, reason) of a run the watchdog stopped (``otherwise``: it just died)."""
    if killed_for in KILLED and killed_for != "stopped":
        return status_of(killed_for)
    return status_of(otherwise)


def explain(record: dict) -> str:
    """The learner's sentence for a record's reason ('' when there is none)."""
    reason = record.get("reason", "")
    if reason.startswith(SIGNAL):
        return f"the process crashed ({reason.split(':', 1)[1]})"
    if reason == "learner-code":
        return record.get("message", "")
    outcome = TABLE.get(reason)
    return outcome.explain if outcome else ""


# A check that met only a stub's "not yet" (NotImplementedError) or no file at all: work
# not started, never a mistake (the feedback and the class report count it apart).
NOT_STARTED = ("not-implemented", "missing")
NOT_ATTEMPTED = "not attempted"


def not_attempted(record: dict) -> bool:
    """A graded project stage nobody worked on yet: every check a stub's "not yet"."""
    checks = record.get("checks") or []
    return (record.get("kind") == "stage" and record.get("status") != "missing"
            and bool(checks) and all(c.get("status") in NOT_STARTED for c in checks))


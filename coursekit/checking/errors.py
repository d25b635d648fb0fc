"""The exceptions of the checker contract, at the bottom of ``coursekit.checking``: the
modules that raise or catch them import them from here, not from each other.

* ``CheckFailed``: a check's verdict on a wrong result (``coursekit.checking.contract``
  prints it as a FAIL line with ``yours:``/``expected:``/``hint:``);
* ``CheckInconclusive``: a timing check that could not decide within its budget (printed
  as INCONCLUSIVE; the grader retries it and never scores it as the learner's failure);
* ``LearnerCodeError``: the learner's file could not be used (``coursekit.checking.learner``
  names the file, line and function);
* ``TamperEvidence``: a self-reported fact contradicted by measurement, or bytes on the
  bridge outside the protocol (the grader scores the stage 0);
* ``LearnerProcessDied``: the learner process crashed, exited or was killed
  (``coursekit.checking.bridge``);
* ``ReachRefused``: code in the learner process reached, while it ran, what a forbidden
  rule keeps from a learner's file (``coursekit.checking.reach``); the learner process
  answers it as a ``LearnerCodeError`` of kind ``forbidden``;
* ``GradedByInstructor``: a check needs instructor-only code (``coursekit.instructor``)
  that this copy of the course does not hold: a learner's release runs the public checks
  and names this one as graded by the instructor (``coursekit.checking.graded``).

This is their one home: import them from here, never through a module that uses them
(``tests/test_layers.py`` holds every file of the course to that).
"""

from __future__ import annotations

from typing import Any

from coursekit.checking.wire import protocol


class CheckFailed(Exception):
    """Raised by a check: the learner's result is wrong in the way ``message`` says."""

    def __init__(self, message: str, *, yours: Any = None, expected: Any = None,
                 hint: str = "", evidence: str = ""):
        super().__init__(message)
        self.yours = yours
        self.expected = expected
        self.hint = hint
        self.evidence = evidence  # what a timing verdict measured: rounds, spread, load


class CheckInconclusive(Exception):
    """Raised by a timing check whose own measurements could not decide within its budget
    (``coursekit.measure.verdict``): neither PASS nor FAIL, and never the learner's fault.
    ``evidence`` says what was measured and under which load."""

    def __init__(self, message: str, *, evidence: str = "",
                 hint: str = "rerun when the machine is quieter"):
        super().__init__(message)
        self.evidence = evidence
        self.hint = hint


class LearnerCodeError(Exception):
    """The learner's file could not be used. ``kind`` is one of: missing-file, syntax,
    import, missing-function, not-implemented, exception."""

    def __init__(self, kind: str, message: str, hint: str = "", exc_type: str = ""):
        super().__init__(message)
        self.kind = kind
        self.hint = hint
        self.exc_type = exc_type  # the learner's exception class name, where one was raised


class TamperEvidence(LearnerCodeError):
    """What the learner process reported contradicts what the checker measured (or it
    wrote to the bridge outside the protocol). The grader scores the stage 0."""

    def __init__(self, message: str):
        super().__init__(protocol.TAMPER_EVIDENCE, protocol.TAMPER_PREFIX + message,
                         "the checker measures what it needs itself; a report that "
                         "contradicts it is recorded as tampering")


class LearnerProcessDied(LearnerCodeError):
    def __init__(self, message: str, cause: str):
        super().__init__("crash", message, "run the function by hand on a small input: "
                         "it crashed the Python process running it")
        self.cause = cause  # "SIGSEGV", "exit 0", ...


# The status of a check that needs instructor-only code this copy does not hold (a
# learner's release): neither a pass nor a failure; the instructor's grading runs it.
GRADED_BY_INSTRUCTOR = "instructor"


class GradedByInstructor(Exception):
    """A check reached for instructor-only code (``coursekit.instructor``) that this copy
    of the course does not hold. The contract reports the check as graded by the
    instructor, never as the learner's failure."""

    kind = GRADED_BY_INSTRUCTOR

    def __init__(self, what: str = ""):
        super().__init__(
            "graded by your instructor: this check needs the course's reference code, "
            "which your copy does not hold" + (f" ({what})" if what else ""))


# The status of a check that cannot run on this machine (what it needs is not here: a
# socketless machine cannot start jax.distributed): neither a pass nor a failure.
NOT_APPLICABLE = "not-applicable"


class NotApplicableHere(Exception):
    """Raised by checker code (never honoured from the learner's file) when this machine
    lacks what the check needs; ``what`` names the check's subject, ``why`` the missing
    thing as the machine said it. Reported as "not applicable here: ..."."""

    kind = NOT_APPLICABLE

    def __init__(self, what: str, why: str):
        super().__init__(f"not applicable here: {what}: {why}")
        self.what, self.why = what, why


FORBIDDEN = "forbidden"  # the LearnerCodeError kind of a ReachRefused


class ReachRefused(PermissionError):
    """Code in the learner process reached what ``coursekit.checking.forbidden`` keeps
    from a learner's file (the course's timer by a name built at run time, a fresh copy of
    its module read from its path), and ``coursekit.checking.reach`` refused it. A
    ``PermissionError``: what reads a file and expects an open may fail (``linecache``)
    goes on."""

    def __init__(self, qualified: str, why: str, route: str, hint: str | None = None):
        super().__init__(f"your code reached {qualified} while it ran ({route}): {why}")
        self.qualified, self.why, self.route = qualified, why, route
        self.hint = hint or ("write it yourself; a name built at run time reaches what an "
                             "import by name would: the same rule refuses both. What the "
                             "contract gives you (see coursekit/checking/forbidden.py, "
                             "ALLOWED) stays allowed")

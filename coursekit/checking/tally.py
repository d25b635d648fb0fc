"""Counting a check run's results, one way everywhere (check.py's last line and exit
status, the notebooks' check cells, the records they keep, make course's tables).

A result's status is ``pass``, ``inconclusive`` (a timing check could not decide: not
the learner's failure), ``instructor`` (the check needs instructor-only code this copy
lacks: graded where the instructor grades, neither a pass nor a failure here),
``not-applicable`` (this machine lacks what the check needs, e.g. sockets for
jax.distributed: neither a pass nor a failure) or one of the failures (``fail``,
``error``, ``not-implemented``, ``crash``).
"""

from __future__ import annotations

from coursekit.checking.errors import GRADED_BY_INSTRUCTOR, NOT_APPLICABLE

INCONCLUSIVE_EXIT = 3  # no check failed, but a timing check could not decide


def counts(results) -> dict:
    """passed, failed, inconclusive, graded by the instructor and not applicable here,
    from ``results`` (CheckResults or their dicts): a check graded by the instructor or not
    applicable on this machine is neither a pass nor a failure here."""
    statuses = [r["status"] if isinstance(r, dict) else r.status for r in results]
    out = {"passed": statuses.count("pass"), "inconclusive": statuses.count("inconclusive"),
           "instructor": statuses.count(GRADED_BY_INSTRUCTOR),
           "not_applicable": statuses.count(NOT_APPLICABLE)}
    out["failed"] = len(statuses) - sum(out.values())
    return out


# what every inconclusive check said when the machine's load was its only cause
LOAD_ADVICE = "rerun when the machine is quieter"


def inconclusive_advice(results) -> str:
    """The summary's advice for the inconclusive checks: a quieter machine only when
    each of their hints says so; otherwise (a chip the notebook holds, calls too short
    to time on this device) each hint says what decides it."""
    hints = [(r.get("hint") if isinstance(r, dict) else r.hint) or "" for r in results
             if (r["status"] if isinstance(r, dict) else r.status) == "inconclusive"]
    if all(LOAD_ADVICE in h for h in hints):
        return LOAD_ADVICE
    return "each one's hint says what decides it"


def summary_line(results) -> str:
    """The last line of a check run."""
    n = counts(results)
    return (f"{n['passed']} passed, {n['failed']} failed"
            + (f", {n['inconclusive']} inconclusive ({inconclusive_advice(results)})"
               if n["inconclusive"] else "")
            + (f"; graded by your instructor: {n['instructor']} check"
               + ("s" if n["instructor"] != 1 else "") + " (they need the course's "
               "reference code, which your copy does not hold)" if n["instructor"] else "")
            + (f"; not applicable here: {n['not_applicable']} (this machine lacks what "
               "they need; each says what)" if n["not_applicable"] else ""))


def exit_status(results) -> int:
    """0 when every check that ran here passed (a check not applicable on this machine
    is no failure); 1 when one failed, or when none could say (no results, or every one
    graded by the instructor); ``INCONCLUSIVE_EXIT`` when none failed but a timing
    check could not decide."""
    n = counts(results)
    if n["failed"] or not results or len(results) == n["instructor"]:
        return 1
    return INCONCLUSIVE_EXIT if n["inconclusive"] else 0

"""Counting a check run's results, one way everywhere (check.py's last line and exit
status, the notebooks' check cells, the records they keep, make course's tables).

A result's status is ``pass``, ``inconclusive`` (a timing check could not decide: not
the learner's failure), ``instructor`` (the check needs instructor-only code this copy
lacks: graded where the instructor grades, neither a pass nor a failure here) or one of
the failures (``fail``, ``error``, ``not-implemented``, ``crash``).
"""

from __future__ import annotations

from coursekit.checking.errors import GRADED_BY_INSTRUCTOR

INCONCLUSIVE_EXIT = 3  # no check failed, but a timing check could not decide


def counts(results) -> dict:
    """passed, failed, inconclusive and graded by the instructor, from ``results``
    (CheckResults or their dicts): a check graded by the instructor is neither a pass nor
    a failure here."""
    statuses = [r["status"] if isinstance(r, dict) else r.status for r in results]
    out = {"passed": statuses.count("pass"), "inconclusive": statuses.count("inconclusive"),
           "instructor": statuses.count(GRADED_BY_INSTRUCTOR)}
    out["failed"] = len(statuses) - sum(out.values())
    return out


def summary_line(results) -> str:
    """The last line of a check run."""
    n = counts(results)
    return (f"{n['passed']} passed, {n['failed']} failed"
            + (f", {n['inconclusive']} inconclusive (rerun when the machine is quieter)"
               if n["inconclusive"] else "")
            + (f"; graded by your instructor: {n['instructor']} check"
               + ("s" if n["instructor"] != 1 else "") + " (they need the course's "
               "reference code, which your copy does not hold)" if n["instructor"] else ""))


def exit_status(results) -> int:
    """0 when every check that ran here passed; 1 when one failed, or when none could
    say (no results, or every one graded by the instructor); ``INCONCLUSIVE_EXIT`` when
    none failed but a timing check could not decide."""
    n = counts(results)
    if n["failed"] or not results or len(results) == n["instructor"]:
        return 1
    return INCONCLUSIVE_EXIT if n["inconclusive"] else 0

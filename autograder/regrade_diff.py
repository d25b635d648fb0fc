"""``python -m autograder diff GRADING [--since FINGERPRINT|TIME]``: what a regrade moved.

Every item (a project stage or a notebook) whose score or status changed between two
gradings of the same submission files, old and new side by side, with the reason and
the checks or questions that moved. The gradebook keeps every attempt, so two gradings
of one (student, item) are two rows; they are of the same files when both rows carry
the same ``files_hash`` (or, for rows of an older grader that did not record it, the
same content hash, which also fixes the checker and the seed).

The changes come in two groups, the first one first:

* **same checker** (noise): the files, the checker and the secret (the held-out seeds)
  were all the same, yet the verdict moved: a timing check near its threshold, a
  nondeterministic test or a flaky machine. These are the ones to read first.
* **with a checker change**: the checker fingerprint (or the secret) differed between
  the two gradings: a checker fix moved the score, as intended or not.

``--since TIME`` (an ISO date or time, or Unix seconds) keeps the changes whose newer
grading finished at or after TIME; ``--since FINGERPRINT`` (a prefix of a checker
fingerprint, or of a run id) keeps those whose older grading is that checker's (or that
run's) first grading or later, i.e. what moved from that checker on. Reads the gradebook
only (read-only).
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from autograder.classdata import ClassBook, ClassDataError, Row, item_order, load
from autograder.textsafe import line


@dataclass
class Change:
    student: str
    item: str
    old: Row
    new: Row
    cause: str            # "" (same checker: noise), "checker", "secret"
    checks: list[dict]    # [{id, old, new, old_message, new_message}] that moved

    def as_dict(self) -> dict:
        return {"student": self.student, "item": self.item, "cause": self.cause or "noise",
                "old": side(self.old), "new": side(self.new), "checks": self.checks}


def side(row: Row) -> dict:
    rec = row.record
    return {"status": row.status, "points": row.points, "max_points": row.max_points,
            "reason": str(rec.get("reason") or ""), "message": str(rec.get("message") or "")
            [:300], "checker_fp": row.checker_fp, "files_hash": row.files_hash,
            "content_hash": row.content_hash, "run_id": row.run_id,
            "finished_at": row.finished_at, "wall_s": rec.get("wall_s"),
            "cpu_s": rec.get("cpu_s")}  # a starved grading: little CPU in its wall time


def same_files_key(row: Row) -> str:
    return "f:" + row.files_hash if row.files_hash else "c:" + row.content_hash


def moved_checks(old: Row, new: Row) -> list[dict]:
    before = {c["id"]: c for c in old.checks}
    after = {c["id"]: c for c in new.checks}
    out = []
    for cid in list(before) + [c for c in after if c not in before]:
        a, b = before.get(cid, {}), after.get(cid, {})
        if a.get("status") != b.get("status") or a.get("points") != b.get("points"):
            out.append({"id": cid, "old": a.get("status", "absent"),
                        "new": b.get("status", "absent"),
                        "old_points": a.get("points"), "new_points": b.get("points"),
                        "old_message": str(a.get("message") or "")[:200],
                        "new_message": str(b.get("message") or "")[:200]})
    return out


def changes(book: ClassBook) -> list[Change]:
    """Every consecutive pair of gradings of the same files whose score or status
    differs, oldest first."""
    found = []
    for (student, item), rows in book.history().items():
        last: dict[str, Row] = {}
        for row in rows:
            key = same_files_key(row)
            prev = last.get(key)
            last[key] = row
            if prev is None or (prev.status == row.status and prev.points == row.points):
                continue
            if prev.checker_fp and row.checker_fp:
                cause = "checker" if prev.checker_fp != row.checker_fp else ""
            else:  # an older grader: a shared content hash means the same checker
                cause = "" if prev.content_hash == row.content_hash else "checker"
            if not cause and prev.secret_id != row.secret_id:
                cause = "secret"
            found.append(Change(student, item, prev, row, cause, moved_checks(prev, row)))
    found.sort(key=lambda c: (c.new.finished_at, c.student, item_order(c.item)))
    return found


def since_filter(book: ClassBook, since: str):
    """A predicate on changes for ``--since``; raises ClassDataError when it matches
    nothing this gradebook knows."""
    text = since.strip()
    moment = parse_time(text)
    if moment is not None:
        return lambda c: c.new.finished_at >= moment, f"since {text}"
    if not re.fullmatch(r"[0-9a-fA-F]{4,64}", text):
        raise ClassDataError(f"--since {since!r} is neither a time (2025-03-01, "
                             "2025-03-01T14:00, Unix seconds) nor a hex fingerprint prefix")
    prefix = text.lower()
    starts = [r.finished_at for r in book.rows if r.checker_fp.startswith(prefix)]
    what = "checker fingerprint"
    if not starts:
        starts = [r.finished_at for r in book.rows if r.run_id.startswith(prefix)]
        what = "run id"
    if not starts:
        known = sorted({r.checker_fp[:12] for r in book.rows if r.checker_fp})
        raise ClassDataError(f"--since {since}: no grading in this gradebook under a checker "
                             f"fingerprint or run id starting with it (checker "
                             f"fingerprints here: {', '.join(known) or 'none recorded'})")
    first = min(starts)
    return (lambda c: c.old.finished_at >= first), f"since the first grading with {what} {text}"


def parse_time(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S") if ts else "?"


def render(found: list[Change], scope: str, warnings: list[str]) -> str:
    noise = [c for c in found if not c.cause]
    checker = [c for c in found if c.cause]
    lines = [f"{len(found)} change(s) between gradings of the same files ({scope}): "
             f"{len(noise)} with the same checker (noise: read these first), "
             f"{len(checker)} with a checker or secret change"]
    lines += [f"note: {w}" for w in warnings]
    for title, group in (("SAME CHECKER, SAME FILES: the verdict moved by itself (timing, "
                          "nondeterminism)", noise),
                         ("WITH A CHECKER CHANGE (or a new secret: other held-out seeds)",
                          checker)):
        lines += ["", f"== {title}: {len(group)}"]
        for c in group:
            o, n = c.old, c.new
            fp = (f"checker {o.checker_fp[:10] or '?'} -> {n.checker_fp[:10] or '?'}"
                  if c.cause == "checker" else "secret changed" if c.cause == "secret"
                  else f"checker {n.checker_fp[:10] or n.content_hash[:10]}")
            lines.append(f"- {line(c.student)} · {line(c.item)} ({fp})")
            lines.append(f"    old  {when(o.finished_at)}  {o.status:<8} {o.points:g}/"
                         f"{o.max_points:g}  {_why(o)}")
            lines.append(f"    new  {when(n.finished_at)}  {n.status:<8} {n.points:g}/"
                         f"{n.max_points:g}  {_why(n)}")
            for m in c.checks:
                lines.append(f"      {m['id']}: {m['old']} -> {m['new']}"
                             + (f"  ({line(m['new_message'] or m['old_message'])})"
                                if m["new_message"] or m["old_message"] else ""))
    return "\n".join(lines) + "\n"


def _why(row: Row) -> str:
    reason = str(row.record.get("reason") or "")
    message = " ".join(str(row.record.get("message") or "").split())[:160]
    return line("; ".join(p for p in (reason, message) if p))


def diff(grading: Path, since: str | None = None) -> dict:
    book = load(grading)
    found = changes(book)
    scope = "every grading"
    if since:
        keep, scope = since_filter(book, since)
        found = [c for c in found if keep(c)]
    found.sort(key=lambda c: (bool(c.cause), c.student, item_order(c.item),
                              c.new.finished_at))
    return {"scope": scope, "warnings": book.warnings, "changes": found}


def main(grading: Path, since: str | None, as_json: bool) -> int:
    try:
        result = diff(grading, since)
    except ClassDataError as err:
        print(f"diff: {err}", file=sys.stderr)
        return 2
    if as_json:
        print(json.dumps({"scope": result["scope"], "warnings": result["warnings"],
                          "changes": [c.as_dict() for c in result["changes"]]}, indent=1))
    else:
        sys.stdout.write(render(result["changes"], result["scope"], result["warnings"]))
    return 0

"""Per-student feedback in Markdown and HTML, built from gradebook records.

What a learner sees: per project stage its status, points, and for each check its id,
status and the checker's message, yours/expected and hint (checks are public code; the
hidden part is only the seed). Per notebook question its status and points; the error
line of a visible test; for a hidden test only "a hidden check failed" (its code, its
message and every cell output stay out). Sandbox refusals are named in plain words
without the instructor's paths. Never: stdout/stderr tails, seeds, hidden test text.

A project stage the learner attempted (graded, and not every check a stub's "not yet")
also gets its walk-through, how the reference does that stage: the ``### Stage N`` part
of the section "How the reference does each stage" of the instructor's
``docs/checkers/<project>.md``. The learner release holds neither that page nor the
walk-throughs; where the page is absent (grading from a release) there are none.
"""

from __future__ import annotations

import html
import re
from functools import cache
from pathlib import Path

from autograder import names, outcomes
from autograder.textsafe import md_block, md_inline
from coursekit.facts import ROOT

REASONS = {reason: o.explain for reason, o in outcomes.TABLE.items()}
_reason_text = outcomes.explain


WALKTHROUGH_DOCS = ROOT / "docs" / "checkers"
WALKTHROUGH_SECTION = "## How the reference does each stage"
_STAGE_HEADING = re.compile(r"^### Stage (\d+)\b.*$", re.M)
WALKTHROUGH_TITLE = "How the reference does this stage"


@cache
def walkthroughs(project: str, docs: Path = WALKTHROUGH_DOCS) -> dict[int, str]:
    """Stage number -> its walk-through (Markdown) from ``docs/<project>.md``; empty when
    the page, or its walk-through section, is not there."""
    page = Path(docs) / f"{project}.md"
    if not re.fullmatch(r"[\w.-]+", project) or not page.is_file():
        return {}
    text = page.read_text()
    start = text.find(WALKTHROUGH_SECTION + "\n")
    if start < 0:
        return {}
    body = text[start + len(WALKTHROUGH_SECTION):]
    end = re.search(r"^## ", body, re.M)
    body = body[:end.start()] if end else body
    heads = list(_STAGE_HEADING.finditer(body))
    return {int(h.group(1)): body[h.end():nxt.start() if nxt else len(body)].strip()
            for h, nxt in zip(heads, heads[1:] + [None], strict=True)}


def attempted(record: dict) -> bool:
    """A graded project stage the learner worked on: not missing, and not every check a
    stub's "not yet" (``not-implemented``)."""
    return (record.get("kind") == "stage" and record.get("status") != "missing"
            and not outcomes.not_attempted(record))


def walkthrough(record: dict, docs: Path = WALKTHROUGH_DOCS) -> str:
    """The walk-through a stage record's feedback carries ('' when none is due)."""
    if not attempted(record):
        return ""
    try:
        return walkthroughs(str(record.get("project", "")), Path(docs)).get(
            int(record.get("stage", 0)), "")
    except (TypeError, ValueError):
        return ""


def _title(record: dict) -> str:
    if record.get("kind") == "stage":
        return f"{record['project']} · stage {record['stage']}: {record.get('title', '')}"
    return record["item"]


def sections(records: list[dict], docs: Path = WALKTHROUGH_DOCS) -> list[dict]:
    """The learner-visible content, one section per item (shared by both formats)."""
    out = []
    for r in records:
        sec = {"title": _title(r), "status": r["status"], "points": r["points"],
               "max_points": r["max_points"], "why": _reason_text(r), "rows": [],
               "notes": [], "walkthrough": walkthrough(r, docs)}
        for c in r.get("questions") or r.get("checks") or []:
            row = {"id": c["id"], "status": c["status"], "points": c.get("points", 0.0),
                   "max_points": c.get("max_points", 0.0), "details": []}
            if c["status"] != "pass" and r["status"] not in ("missing",):
                if c.get("hidden_failed"):
                    row["details"].append("a hidden check failed")
                elif c.get("message"):
                    row["details"].append(c["message"])
                for label in ("yours", "expected", "evidence", "hint"):
                    if c.get(label):
                        row["details"].append(f"{label}: {c[label]}")
            sec["rows"].append(row)
        for gid in r.get("tampered", []):
            sec["notes"].append(f"The test cell `{gid}` had been edited; it was restored "
                                "from the original before grading.")
        for gid in r.get("restored_missing", []):
            sec["notes"].append(f"The cell `{gid}` was missing; it was put back before "
                                "grading.")
        for note in r.get("skipped") or []:
            sec["notes"].append(f"Checked without a part the grading machine lacks: {note}.")
        for line in r.get("handed_in") or []:
            sec["notes"].append(f"Handed in beside model.py: {line}.")
        if r.get("manual"):
            sec["notes"].append("Graded by hand, not included here: " +
                                ", ".join(r["manual"]) + ".")
        out.append(sec)
    return out


def markdown(student: str, records: list[dict], docs: Path = WALKTHROUGH_DOCS) -> str:
    """Every text a learner can influence (their name, messages, yours/expected, file
    names) is escaped for one line or fenced (``autograder.textsafe``): it never starts
    a heading, a status line, a total or HTML of its own."""
    m = md_inline
    total = sum(r["points"] for r in records)
    top = sum(r["max_points"] for r in records)
    lines = [f"# Feedback for {m(student)}", "", f"**Total: {total:g} / {top:g} points**", ""]
    for sec in sections(records, docs):
        lines += [f"## {m(sec['title'])}", "",
                  f"Status: **{m(sec['status'])}**, {sec['points']:g} / "
                  f"{sec['max_points']:g} points" + (f" ({m(sec['why'])})" if sec["why"]
                                                     else ""), ""]
        if sec["rows"]:
            lines += ["| check | status | points |", "|---|---|---|"]
            lines += [f"| {m(row['id'])} | {m(row['status'])} | {row['points']:g} / "
                      f"{row['max_points']:g} |" for row in sec["rows"]]
            lines.append("")
            for row in sec["rows"]:
                if row["details"]:
                    lines.append(f"- **{m(row['id'])}** ({m(row['status'])})")
                    for d in row["details"]:
                        text = str(d)
                        lines += ([f"    - {m(text)}"] if "\n" not in text.strip() else
                                  ["    -", *md_block(text.strip(), "      ")])
            lines.append("")
        lines += [f"> {m(n)}" for n in sec["notes"]] + ([""] if sec["notes"] else [])
        if sec["walkthrough"]:  # the instructor's own Markdown
            lines += [f"### {WALKTHROUGH_TITLE}", "", sec["walkthrough"], ""]
    return "\n".join(lines).rstrip() + "\n"


def html_page(student: str, records: list[dict], docs: Path = WALKTHROUGH_DOCS) -> str:
    e = html.escape
    total = sum(r["points"] for r in records)
    top = sum(r["max_points"] for r in records)
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<title>Feedback for {e(student)}</title>",
             "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto}"
             "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em}"
             ".pass{color:#060}.fail,.error,.timeout,.memory,.crash,.missing{color:#a00}"
             ".inconclusive{color:#a60}.walkthrough{white-space:pre-wrap}"
             "</style></head><body>",
             f"<h1>Feedback for {e(student)}</h1>",
             f"<p><b>Total: {total:g} / {top:g} points</b></p>"]
    for sec in sections(records, docs):
        parts.append(f"<h2>{e(sec['title'])}</h2><p>Status: <b class='{e(sec['status'])}'>"
                     f"{e(sec['status'])}</b>, {sec['points']:g} / {sec['max_points']:g} "
                     "points" + (f" ({e(sec['why'])})" if sec["why"] else "") + "</p>")
        if sec["rows"]:
            parts.append("<table><tr><th>check</th><th>status</th><th>points</th>"
                         "<th>details</th></tr>")
            for row in sec["rows"]:
                details = "<br>".join(e(d) for d in row["details"])
                parts.append(f"<tr><td>{e(row['id'])}</td><td class='{e(row['status'])}'>"
                             f"{e(row['status'])}</td><td>{row['points']:g} / "
                             f"{row['max_points']:g}</td><td>{details}</td></tr>")
            parts.append("</table>")
        parts += [f"<p><i>{e(n)}</i></p>" for n in sec["notes"]]
        if sec["walkthrough"]:
            parts.append(f"<h3>{e(WALKTHROUGH_TITLE)}</h3>"
                         f"<div class='walkthrough'>{e(sec['walkthrough'])}</div>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write(folder: Path, student: str, records: list[dict], name: str | None = None
          ) -> list[Path]:
    """``feedback.md`` and ``feedback.html`` in ``folder/<name>/``; ``name``: the
    student's folder name (``autograder.names.assign`` for the class; by default the
    name's own encoding). Raises ``names.NameRefused`` when it would leave ``folder``."""
    target = names.inside(folder, student, name)
    target.mkdir(parents=True, exist_ok=True)
    md, page = target / "feedback.md", target / "feedback.html"
    # a record from an older gradebook may still hold a lone surrogate: written escaped
    md.write_text(markdown(student, records), errors="backslashreplace")
    page.write_text(html_page(student, records), errors="backslashreplace")
    return [md, page]

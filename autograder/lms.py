"""``python -m autograder export DIR --csv FILE --format canvas|moodle --roster ROSTER``:
the grades as the file a learning-management system imports.

One column per graded item (each project stage, each notebook), never a total: an LMS
adds up its own columns, and an extra "total" column would be imported as one more
assignment and count every point twice. A cell is the item's points in the latest
grading; an item not graded yet is left empty (both importers leave an empty cell's
grade as it was, so a half-finished batch never writes a false 0).

**Canvas** (Gradebook → Import, a CSV in the layout of Canvas's own gradebook export):
``Student, ID, SIS User ID, SIS Login ID, Section``, then one column per assignment. Canvas
matches a row to a learner by ``ID`` (the Canvas user id) or the SIS ids, so the roster
must give at least one of them; ``Student`` (``Last, First``) and ``Section`` are shown
and may be blank. A column whose header names no existing assignment is imported as a
new assignment of that name (rename or map it in Canvas's import preview). The second
row is Canvas's ``Points Possible`` row (as in its export), giving each item's maximum.

**Moodle** (Grade administration → Import → CSV file): the import reads any CSV and lets
the teacher map one column to a user field (``Map from`` / ``Map to``: ID number, email
address, username or user id) and each other column to a grade item or a new one.
The identity columns are named as in Moodle's own grade export (``First name, Last name,
ID number, Email address``) plus ``Username``; the roster must give at least one of ID
number, email address or username. Moodle compares email addresses case-sensitively,
so they are written exactly as the roster spells them.

The roster (``--roster``) is a CSV with a header: ``submission`` (the submission's name
in the gradebook: its folder or zip name) and identity columns, any of ``name``,
``first_name``, ``last_name``, ``id`` (Canvas user id), ``sis_user_id``, ``sis_login_id``,
``section``, ``id_number``, ``email``, ``username`` (headers are case-blind; spaces and
dashes read as underscores). A submission with no roster line, and a roster line with
no submission, are both named on the terminal and in ``FILE.unmatched.csv`` (written
every time, empty when all match), never dropped silently. A submission listed twice, or
one LMS identity given to two lines, stops the export with the lines named.
Files are UTF-8, every field quoted; a name that a spreadsheet would run as a formula
gets a leading apostrophe (identities are left exactly as given).
"""

from __future__ import annotations

import csv
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from autograder.classdata import ClassDataError, item_order, load, nfc
from autograder.textsafe import cell

FORMATS = ("canvas", "moodle")
ALIASES = {"student": "name", "full_name": "name", "canvas_id": "id", "user_id": "id",
           "idnumber": "id_number", "id_no": "id_number", "email_address": "email",
           "e_mail": "email", "first": "first_name", "firstname": "first_name",
           "last": "last_name", "lastname": "last_name", "surname": "last_name",
           "login": "sis_login_id"}
FIELDS = ("name", "first_name", "last_name", "id", "sis_user_id", "sis_login_id", "section",
          "id_number", "email", "username")
# the fields an LMS matches a learner by (one of them must be there)
IDENTITY = {"canvas": ("id", "sis_user_id", "sis_login_id"),
            "moodle": ("id_number", "email", "username")}
LABEL = {"id": "ID", "sis_user_id": "SIS User ID", "sis_login_id": "SIS Login ID",
         "id_number": "ID number", "email": "Email address", "username": "Username"}


class RosterError(Exception):
    pass


@dataclass
class Entry:
    line: int
    submission: str
    fields: dict[str, str]

    def first_last(self) -> tuple[str, str]:
        first, last = self.fields.get("first_name", ""), self.fields.get("last_name", "")
        if first or last:
            return first, last
        name = self.fields.get("name", "")
        if "," in name:  # "Last, First"
            last, first = (p.strip() for p in name.split(",", 1))
            return first, last
        parts = name.rsplit(" ", 1)
        return (parts[0], parts[1]) if len(parts) == 2 else ("", name)

    def display(self) -> str:
        if self.fields.get("name"):
            return self.fields["name"]
        first, last = self.first_last()
        return f"{last}, {first}" if first and last else (last or first or self.submission)


def _header(name: str) -> str:
    key = re.sub(r"[\s\-]+", "_", name.strip().lstrip("\ufeff").lower())
    return ALIASES.get(key, key)


def read_roster(path: Path, fmt: str) -> list[Entry]:
    """The roster's lines; RosterError naming every bad line at once."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        raise RosterError(f"cannot read the roster {path}: {err}") from None
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise RosterError(f"the roster {path} is empty")
    header = [_header(h) for h in rows[0]]
    if "submission" not in header:
        raise RosterError(f"the roster {path} has no 'submission' column (its header: "
                          f"{', '.join(rows[0])}); it names each submission's folder or zip")
    entries, problems = [], []
    for number, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        values = {h: (row[i].strip() if i < len(row) else "") for i, h in enumerate(header)}
        entry = Entry(number, nfc(values.get("submission", "")),
                      {f: values.get(f, "") for f in FIELDS})
        if not entry.submission:
            problems.append(f"line {number}: no submission name")
            continue
        if not any(entry.fields[f] for f in IDENTITY[fmt]):
            problems.append(f"line {number} ({entry.submission}): no {fmt} identity; give "
                            + " or ".join(LABEL[f] for f in IDENTITY[fmt]))
        entries.append(entry)
    seen: dict[tuple[str, str], int] = {}
    for entry in entries:
        keys = [("submission", entry.submission)] + [
            (f, entry.fields[f].lower() if f == "email" else entry.fields[f])
            for f in ("id", "sis_user_id", "sis_login_id", "id_number", "email", "username")
            if entry.fields[f]]
        for key in keys:
            if key in seen:
                what = "submission" if key[0] == "submission" else LABEL[key[0]]
                problems.append(f"line {entry.line}: {what} {key[1]!r} is also on line "
                                f"{seen[key]} (duplicate)")
            else:
                seen[key] = entry.line
    if problems:
        raise RosterError(f"the roster {path} has {len(problems)} problem(s):\n  "
                          + "\n  ".join(problems))
    return entries


def _text(value: str) -> str:
    return cell(value)  # OWASP's formula characters, tab and carriage return included


def _points(value: float) -> str:
    return f"{value:g}"


def export_lms(grading: Path, csv_path: Path, fmt: str, roster: Path) -> dict:
    if fmt not in FORMATS:
        raise RosterError(f"unknown format {fmt!r} (one of {', '.join(FORMATS)}, or csv)")
    book = load(grading)
    entries = read_roster(roster, fmt)
    latest = book.latest()
    items = sorted({i for _, i in latest}, key=item_order)
    tops: dict[str, float] = {}
    for (_, item), row in latest.items():
        tops[item] = max(tops.get(item, 0.0), row.max_points)
    graded = {nfc(s): s for s in book.students}
    if len(graded) != len(book.students):
        raise RosterError("two submissions in the gradebook have names that differ only in "
                          "their Unicode form; rename one and grade it again")
    roster_names = {e.submission for e in entries}
    no_roster = sorted(s for s in graded if s not in roster_names)
    no_submission = [e for e in entries if e.submission not in graded]

    if fmt == "canvas":
        header = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *items]
        lines = [["    Points Possible", "", "", "", "", *(_points(tops[i]) for i in items)]]
    else:
        header = ["First name", "Last name", "ID number", "Email address", "Username", *items]
        lines = []
    for entry in entries:
        if entry.submission not in graded:
            continue
        student = graded[entry.submission]
        cells = [(_points(latest[(student, i)].points) if (student, i) in latest else "")
                 for i in items]
        f = entry.fields
        if fmt == "canvas":
            lines.append([_text(entry.display()), f["id"], f["sis_user_id"],
                          f["sis_login_id"], f["section"], *cells])
        else:
            first, last = entry.first_last()
            lines.append([_text(first), _text(last), f["id_number"], f["email"],
                          f["username"], *cells])
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL)
        writer.writerow(header)
        writer.writerows(lines)
    sidecar = csv_path.with_name(csv_path.name + ".unmatched.csv")
    with open(sidecar, "w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, quoting=csv.QUOTE_ALL)
        writer.writerow(["problem", "submission", "roster line"])
        writer.writerows(["graded submission with no roster entry", _text(s), ""]
                         for s in no_roster)
        writer.writerows(["roster entry with no graded submission", _text(e.submission),
                          e.line] for e in no_submission)
    return {"csv": str(csv_path), "sidecar": str(sidecar), "format": fmt,
            "learners": len(lines) - (1 if fmt == "canvas" else 0), "items": items,
            "no_roster": no_roster, "no_submission": [e.submission for e in no_submission],
            "warnings": book.warnings}


def main(grading: Path, csv_path: Path, fmt: str, roster: Path | None) -> int:
    if roster is None:
        print(f"export --format {fmt} needs --roster FILE (a CSV mapping each submission to "
              "its LMS identity; see `python -m autograder export --help`)", file=sys.stderr)
        return 2
    try:
        info = export_lms(grading, csv_path, fmt, roster)
    except (ClassDataError, RosterError) as err:
        print(f"export: {err}", file=sys.stderr)
        return 2
    for w in info["warnings"]:
        print(f"note: {w}", file=sys.stderr)
    print(f"wrote {info['csv']} ({fmt}: {info['learners']} learner(s), one column per item: "
          f"{len(info['items'])})")
    for s in info["no_roster"]:
        print(f"NOT EXPORTED: submission {s!r} has no roster entry", file=sys.stderr)
    for s in info["no_submission"]:
        print(f"NOT EXPORTED: roster entry {s!r} has no graded submission", file=sys.stderr)
    print(f"unmatched: {len(info['no_roster'])} submission(s) without a roster entry, "
          f"{len(info['no_submission'])} roster entr(y/ies) without a submission; listed in "
          f"{info['sidecar']}")
    return 0

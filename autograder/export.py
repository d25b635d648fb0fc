"""``python -m autograder export DIR --csv FILE``: the gradebook as a quoted CSV, and
per-student feedback (``DIR/feedback/<folder>/feedback.{md,html}`` unless
``--feedback`` says where; ``<folder>`` is the student's name as ``autograder.names``
encodes it: two students never share one, and none leaves the feedback folder).

One row per student: total, maximum, then for every project stage and every notebook
its points and status, and for every autograded notebook question its points and
status; a ``flags`` column names tampered test cells, sandbox refusals and timeouts the
machine may have starved (``wall-clock-starved``: not the learner's to answer for). Every field
is quoted (a name with a comma stays one field), and a text field that a spreadsheet
would run as a formula (``=``, ``+``, ``-``, ``@``, a tab or a carriage return
first) gets a leading apostrophe.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from autograder import feedback, names
from autograder.gradebook import FILENAME, Gradebook
from autograder.outcomes import REFUSALS as SANDBOX_REASONS  # refusals and tampering
from autograder.outcomes import STARVED
from autograder.textsafe import cell


def _item_order(item: str) -> tuple:
    m = re.match(r"(.+)/stage-(\d+)$", item)
    return (0, m.group(1), int(m.group(2))) if m else (1, item, 0)


def _text(value: str) -> str:
    return cell(value)  # OWASP's formula characters, tab and carriage return included


def table(book: Gradebook) -> tuple[list[str], list[list]]:
    latest = book.latest()
    students = sorted({s for s, _ in latest})
    items = sorted({i for _, i in latest}, key=_item_order)
    questions: dict[str, list[str]] = {}
    for (_, item), row in latest.items():
        for q in row["record"].get("questions", []):
            if q["id"] not in questions.setdefault(item, []):
                questions[item].append(q["id"])
    header = ["student", "total", "max_total"]
    for item in items:
        header += [f"{item} points", f"{item} status"]
        for qid in questions.get(item, []):
            header += [f"{item}:{qid} points", f"{item}:{qid} status"]
    header.append("flags")
    rows = []
    for student in students:
        total = top = 0.0
        cells: list = []
        flags = []
        for item in items:
            row = latest.get((student, item))
            if row is None:
                cells += ["", "not graded"] + ["", ""] * len(questions.get(item, []))
                continue
            rec = row["record"]
            total += row["points"]
            top += row["max_points"]
            cells += [f"{row['points']:g}", row["status"]]
            by_id = {q["id"]: q for q in rec.get("questions", [])}
            for qid in questions.get(item, []):
                q = by_id.get(qid)
                cells += ([f"{q['points']:g}", q["status"]] if q else ["", ""])
            flags += [f"tampered {item}:{g}" for g in rec.get("tampered", [])]
            flags += [f"handed in {item}: {line}" for line in rec.get("handed_in", [])]
            if rec.get("reason") in (*SANDBOX_REASONS, STARVED):
                flags.append(f"{rec['reason']} {item}")
        rows.append([_text(student), f"{total:g}", f"{top:g}", *cells, _text("; ".join(flags))])
    return header, rows


def export(out: Path, csv_path: Path, feedback_dir: Path | None = None) -> dict:
    if not (Path(out) / FILENAME).is_file():
        raise SystemExit(f"no gradebook in {out} (run `grade SUBMISSIONS --out {out}` first)")
    book = Gradebook.in_dir(out)
    try:
        header, rows = table(book)
        latest = book.latest()
    finally:
        book.close()
    csv_path = Path(csv_path)
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_ALL)
        writer.writerow(header)
        writer.writerows(rows)
    feedback_dir = Path(feedback_dir) if feedback_dir else Path(out) / "feedback"
    by_student: dict[str, list[dict]] = {}
    for (student, _item), row in sorted(latest.items(), key=lambda kv: (
            kv[0][0], _item_order(kv[0][1]))):
        by_student.setdefault(student, []).append(row["record"])
    feedback_dir.mkdir(parents=True, exist_ok=True)
    folders, refused = names.assign(by_student)
    written = []
    for student, records in by_student.items():
        if student not in folders:
            continue
        try:
            written += feedback.write(feedback_dir, student, records, folders[student])
        except names.NameRefused as err:  # one learner's folder, never the batch
            refused[student] = str(err)
    return {"csv": str(csv_path), "students": len(rows), "columns": len(header),
            "feedback": [str(p) for p in written],
            "refused": {names.shown(s): why for s, why in sorted(refused.items())}}

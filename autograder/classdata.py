"""A gradebook read for the instructor's class tools (``report``, ``export --format``,
``similar``, ``diff``): opened read-only (SQLite ``mode=ro``), so none of them can change
it, and read whatever version of the grader wrote it.

A gradebook from an older grader may lack columns (``shard``, ``secret_id``), the
``runs`` table, or record fields (``checks``, ``wall_s``, ``files_hash``, ``checker_fp``);
each missing piece gets a default and one line in ``ClassBook.warnings``, never a
traceback. A row whose record is not readable JSON keeps its status and points.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from autograder.gradebook import FILENAME

# column -> default for gradebooks written before the column existed
OPTIONAL = {"content_hash": "''", "max_points": "0", "record": "'{}'", "run_id": "''",
            "shard": "''", "secret_id": "''", "finished_at": "0"}
REQUIRED = ("student", "item", "status", "points")


class ClassDataError(Exception):
    """A gradebook that cannot be read; the message says why and what to do."""


@dataclass
class Row:
    id: int
    student: str
    item: str
    content_hash: str
    status: str
    points: float
    max_points: float
    record: dict
    run_id: str
    shard: str
    secret_id: str
    finished_at: float

    @property
    def files_hash(self) -> str:
        """What was graded, apart from the checker ('' from an older grader)."""
        return str(self.record.get("files_hash") or "")

    @property
    def checker_fp(self) -> str:
        """The checker that graded it ('' from an older grader)."""
        return str(self.record.get("checker_fp") or "")

    @property
    def checks(self) -> list[dict]:
        """Per-check (stage) or per-question (notebook) results, well-formed ones only."""
        found = self.record.get("questions") or self.record.get("checks") or []
        return [c for c in found if isinstance(c, dict) and "id" in c] \
            if isinstance(found, list) else []

    @property
    def kind(self) -> str:
        kind = self.record.get("kind")
        if kind in ("stage", "notebook"):
            return kind
        return "notebook" if self.item.endswith(".ipynb") else "stage"


@dataclass
class ClassBook:
    path: Path
    rows: list[Row]
    runs: list[dict]
    warnings: list[str] = field(default_factory=list)

    def latest(self) -> dict[tuple[str, str], Row]:
        """(student, item) -> its latest row (as the grader's own ``Gradebook.latest``)."""
        return {(r.student, r.item): r for r in self.rows}

    def history(self) -> dict[tuple[str, str], list[Row]]:
        """(student, item) -> every row, oldest first."""
        out: dict[tuple[str, str], list[Row]] = defaultdict(list)
        for r in self.rows:
            out[(r.student, r.item)].append(r)
        return dict(out)

    @property
    def students(self) -> list[str]:
        return sorted({r.student for r in self.rows})

    @property
    def items(self) -> list[str]:
        return sorted({r.item for r in self.rows}, key=item_order)


def item_order(item: str) -> tuple:
    """Project stages first (by project, then stage number), then notebooks."""
    m = re.match(r"(.+)/stage-(\d+)$", item)
    return (0, m.group(1), int(m.group(2))) if m else (1, item, 0)


def nfc(name: str) -> str:
    """One spelling of a name (a folder made on macOS arrives decomposed, NFD)."""
    return unicodedata.normalize("NFC", name)


def gradebook_path(grading: Path) -> Path:
    grading = Path(grading)
    path = grading if grading.is_file() else grading / FILENAME
    if not path.is_file():
        raise ClassDataError(f"no gradebook at {path} (grade first: python -m autograder "
                             f"grade SUBMISSIONS --out {grading})")
    return path


def connect_readonly(path: Path) -> sqlite3.Connection:
    """SQLite opened with ``mode=ro``: a write through it is refused by SQLite itself."""
    uri = "file:" + quote(str(Path(path).resolve())) + "?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=60)


def load(grading: Path) -> ClassBook:
    """Every row of the gradebook in ``grading`` (a grader folder or the file itself)."""
    path = gradebook_path(grading)
    try:
        db = connect_readonly(path)
    except sqlite3.Error as err:
        raise ClassDataError(f"cannot open {path} read-only: {err}") from None
    try:
        return _read(db, path)
    except sqlite3.DatabaseError as err:
        raise ClassDataError(
            f"cannot read {path}: {err}. If a grader was killed while writing, run any "
            "`python -m autograder grade ... --out` on that folder once (SQLite rolls the "
            "unfinished write back), then try again.") from None
    finally:
        db.close()


def _read(db: sqlite3.Connection, path: Path) -> ClassBook:
    tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "results" not in tables:
        raise ClassDataError(f"{path} is not a grader gradebook (it has no results table)")
    have = {r[1] for r in db.execute("PRAGMA table_info(results)")}
    lacking = [c for c in REQUIRED if c not in have]
    if lacking:
        raise ClassDataError(f"{path}: its results table lacks {', '.join(lacking)}; "
                             "it is not a gradebook this grader can read")
    warnings = []
    absent = [c for c in OPTIONAL if c not in have]
    if absent:
        warnings.append(f"older gradebook: no column(s) {', '.join(absent)}; read as empty")
    cols = [c if c in have else f"{OPTIONAL[c]} AS {c}" for c in
            ("student", "item", "content_hash", "status", "points", "max_points",
             "record", "run_id", "shard", "secret_id", "finished_at")]
    ident = "id" if "id" in have else "rowid"
    rows, unreadable = [], 0
    for r in db.execute(f"SELECT {ident}, {', '.join(cols)} FROM results "
                        f"ORDER BY finished_at, {ident}"):
        try:
            record = json.loads(r[7]) if r[7] else {}
        except (TypeError, ValueError):
            record = None
        if not isinstance(record, dict):
            unreadable += 1
            record = {}
        rows.append(Row(id=int(r[0]), student=str(r[1]), item=str(r[2]),
                        content_hash=str(r[3] or ""), status=str(r[4] or "unknown"),
                        points=_num(r[5]), max_points=_num(r[6]), record=record,
                        run_id=str(r[8] or ""), shard=str(r[9] or ""),
                        secret_id=str(r[10] or ""), finished_at=_num(r[11])))
    if unreadable:
        warnings.append(f"{unreadable} row(s) with an unreadable record: their status and "
                        "points are used, their checks are not")
    older = sum(not r.files_hash for r in rows)
    if older:
        who = "older gradebook: its rows come" if older == len(rows) else \
            f"{older} row(s) come"
        warnings.append(f"{who} from a grader that did not record the files hash and "
                        "checker fingerprint apart: such a row is compared only with rows "
                        "of the same content hash (same files, checker and seed)")
    runs = []
    if "runs" in tables:
        run_cols = {r[1] for r in db.execute("PRAGMA table_info(runs)")}
        wanted = [c for c in ("run_id", "started_at", "argv", "host", "isolation", "shard",
                              "secret_id") if c in run_cols]
        order = " ORDER BY started_at" if "started_at" in run_cols else ""
        for r in db.execute(f"SELECT {', '.join(wanted)} FROM runs{order}"):
            runs.append(dict(zip(wanted, r)))
    else:
        warnings.append("older gradebook: no runs table")
    return ClassBook(path=path, rows=rows, runs=runs, warnings=warnings)


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def run_argv(book: ClassBook) -> list[list[str]]:
    """Each run's command line, newest first (unreadable ones left out)."""
    out = []
    for run in reversed(book.runs):
        try:
            argv = json.loads(run.get("argv") or "[]")
        except ValueError:
            continue
        if isinstance(argv, list):
            out.append([str(a) for a in argv])
    return out

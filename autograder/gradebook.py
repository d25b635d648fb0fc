"""The gradebook: an append-only SQLite file, one row per grading attempt.

Rows are only ever inserted (triggers refuse UPDATE and DELETE), one transaction per
result, so a grader killed at any moment leaves every finished result in place and
nothing half-written; the next run resumes by skipping what is already there. The
current result of a (student, item) is its latest row. Each row keeps the content hash
of what was graded (submission files, checker, seed), so an unchanged submission is
skipped and a changed one is graded again.

    results(id, student, item, content_hash, status, points, max_points, record JSON,
            run_id, shard, secret_id, finished_at)
    runs(run_id, started_at, argv, host, isolation, shard, secret_id)
"""

from __future__ import annotations

import json
import socket
import sqlite3
import sys
import time
import uuid
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    student TEXT NOT NULL, item TEXT NOT NULL, content_hash TEXT NOT NULL,
    status TEXT NOT NULL, points REAL NOT NULL, max_points REAL NOT NULL,
    record TEXT NOT NULL, run_id TEXT NOT NULL, shard TEXT NOT NULL DEFAULT '',
    secret_id TEXT NOT NULL DEFAULT '', finished_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS results_key ON results (student, item, finished_at);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, started_at REAL NOT NULL, argv TEXT NOT NULL,
    host TEXT NOT NULL, isolation TEXT NOT NULL, shard TEXT NOT NULL,
    secret_id TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS results_append_only_u BEFORE UPDATE ON results
    BEGIN SELECT RAISE(ABORT, 'the gradebook is append-only'); END;
CREATE TRIGGER IF NOT EXISTS results_append_only_d BEFORE DELETE ON results
    BEGIN SELECT RAISE(ABORT, 'the gradebook is append-only'); END;
"""

FILENAME = "gradebook.sqlite"


def printable(value):
    """``value`` with every string made encodable: a lone surrogate (a learner's exception
    message can carry one through the checker's JSON) written as ``\\udc80``. Stored as
    it came, it stopped ``export`` at the first feedback file, so that every learner after
    the sender got none."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {printable(k): printable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable(v) for v in value]
    return value


class Gradebook:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.executescript(SCHEMA)

    @classmethod
    def in_dir(cls, out: Path) -> Gradebook:
        return cls(Path(out) / FILENAME)

    def close(self) -> None:
        self.db.close()

    # -- writing -------------------------------------------------------------------
    def start_run(self, isolation: str, shard: str, secret_id: str) -> str:
        run_id = uuid.uuid4().hex[:16]
        with self._tx():
            self.db.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?)",
                            (run_id, time.time(), json.dumps(sys.argv), socket.gethostname(),
                             isolation, shard, secret_id))
        return run_id

    def append(self, record: dict, content_hash: str, run_id: str, shard: str = "",
               secret_id: str = "") -> None:
        with self._tx():
            self.db.execute(
                "INSERT INTO results (student, item, content_hash, status, points, "
                "max_points, record, run_id, shard, secret_id, finished_at) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (record["student"], record["item"], content_hash, record["status"],
                 float(record["points"]), float(record["max_points"]),
                 json.dumps(printable(record), default=str), run_id, shard, secret_id,
                 time.time()))

    def import_from(self, other: Gradebook) -> int:
        """Append the rows (and runs) of another gradebook that this one lacks; a row
        is the same row when student, item, hash, run and finish time agree. Returns
        how many rows were added (so merging twice adds nothing)."""
        have = set(self.db.execute(
            "SELECT student, item, content_hash, run_id, finished_at FROM results"))
        added = 0
        with self._tx():
            for run in other.runs():
                self.db.execute("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?)", run)
            for row in other.all_rows():
                ident = (row[0], row[1], row[2], row[7], row[10])
                if ident in have:
                    continue
                self.db.execute(
                    "INSERT INTO results (student, item, content_hash, status, points, "
                    "max_points, record, run_id, shard, secret_id, finished_at) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?)", row)
                have.add(ident)
                added += 1
        return added

    def _tx(self):
        db = self.db

        class _Tx:
            def __enter__(self):
                db.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, *_):
                db.execute("COMMIT" if kind is None else "ROLLBACK")
        return _Tx()

    # -- reading -------------------------------------------------------------------
    def latest(self) -> dict[tuple[str, str], dict]:
        """(student, item) -> its latest row as a dict (record parsed)."""
        rows = self.db.execute(
            "SELECT student, item, content_hash, status, points, max_points, record, "
            "run_id, shard, secret_id, finished_at, id FROM results "
            "ORDER BY finished_at, id").fetchall()
        out = {}
        for r in rows:
            out[(r[0], r[1])] = {"student": r[0], "item": r[1], "content_hash": r[2],
                                 "status": r[3], "points": r[4], "max_points": r[5],
                                 "record": json.loads(r[6]), "run_id": r[7], "shard": r[8],
                                 "secret_id": r[9], "finished_at": r[10]}
        return out

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def all_rows(self) -> list[tuple]:
        return self.db.execute(
            "SELECT student, item, content_hash, status, points, max_points, record, run_id,"
            " shard, secret_id, finished_at FROM results ORDER BY finished_at, id").fetchall()

    def runs(self) -> list[tuple]:
        return self.db.execute("SELECT * FROM runs ORDER BY started_at").fetchall()

    def secret_ids(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT DISTINCT secret_id FROM results")}

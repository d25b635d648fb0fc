"""Throw-away uids that are never handed out twice.

Every sandboxed run (as root) gets a block of ``BLOCK`` uids of its own, drawn at random
from ``BLOCKS`` blocks above ``BASE`` and written into a registry (SQLite, root-only) that
refuses a block it has seen before: a uid is never reused, so nothing a run left behind
under its uids (a key in the kernel's keyring, a file, an IPC object, a process) is ever
found by another run. Before a block is taken, it is also checked against what is alive
now: no process and no kernel key-user of any of its uids (a registry lost with its
machine's disk must not hand out a uid that still owns something).

A block: ``checker`` (the checker process and the checker's own helpers), the learner
group (``learner_gid``: every learner process of the run, and the checker's supplementary
group, so it reads what learner processes write) and one uid per learner process
(``learner_uids``), so two learner processes a check treats as independent cannot read
each other's files or /proc entries either.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

LOWEST = 1_900_000_000   # every throw-away uid is at least this (no passwd entry)
BASE = 1_905_000_000     # above LOWEST + any pid: the old per-worker uids (LOWEST + pid)
BLOCK = 256
BLOCKS = 1 << 23         # BASE + BLOCK * BLOCKS < 2**32 - 1
REGISTRY_ENV = "AUTOGRADER_UID_REGISTRY"


@dataclass(frozen=True)
class Identity:
    """The uids of one run."""
    base: int

    @property
    def checker(self) -> int:
        return self.base

    @property
    def learner_gid(self) -> int:
        return self.base + 1

    @property
    def learner_uids(self) -> tuple[int, int]:
        """First and last uid for learner processes (one each)."""
        return self.base + 2, self.base + BLOCK - 1

    def __contains__(self, uid: int) -> bool:
        return self.base <= uid < self.base + BLOCK


def registry_path() -> Path:
    """``$AUTOGRADER_UID_REGISTRY``, else /var/lib/autograder (kept across reboots), else
    a root-only folder in the system temp dir."""
    if os.environ.get(REGISTRY_ENV):
        return Path(os.environ[REGISTRY_ENV])
    for folder in (Path("/var/lib/autograder"),
                   Path(tempfile.gettempdir()) / "autograder-uids"):
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if os.access(folder, os.W_OK):
                return folder / "uids.sqlite"
        except OSError:
            continue
    raise OSError("no writable place for the uid registry")


def _connect() -> sqlite3.Connection:
    path = registry_path()
    db = sqlite3.connect(path, timeout=60, isolation_level=None)
    os.chmod(path, 0o600)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE IF NOT EXISTS blocks (base INTEGER PRIMARY KEY, "
               "pid INTEGER, taken REAL)")
    return db


def uids_in_use() -> set[int]:
    """Every uid that owns a live process or a kernel key right now."""
    used = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                used.add(entry.stat().st_uid)
            except OSError:
                continue
    try:
        with open("/proc/key-users") as f:  # "  uid:  usage nkeys/nikeys ..."
            used.update(int(line.split(":")[0]) for line in f if line.strip())
    except (OSError, ValueError):
        pass
    return used


def draw(owner: int | None = None) -> Identity:
    """A block of uids no run has had, and that owns nothing now, registered for
    ``owner`` (a pid: this process by default)."""
    owner = os.getpid() if owner is None else owner
    busy = {u for u in uids_in_use() if u >= BASE}
    db = _connect()
    try:
        for _ in range(1000):
            base = BASE + BLOCK * secrets.randbelow(BLOCKS)
            if any(base <= u < base + BLOCK for u in busy):
                continue
            try:
                db.execute("INSERT INTO blocks VALUES (?, ?, ?)", (base, owner, time.time()))
            except sqlite3.IntegrityError:
                continue  # taken before (by anyone, ever)
            return Identity(base)
    finally:
        db.close()
    raise RuntimeError("no fresh block of uids found")


def block_of(uid: int) -> int | None:
    """The base of the block ``uid`` belongs to, or None below the range."""
    return None if uid < BASE else BASE + (uid - BASE) // BLOCK * BLOCK


def owner_of(uid: int) -> int | None:
    """The pid that drew the block holding ``uid`` (None when not registered)."""
    base = block_of(uid)
    if base is None:
        return None
    db = _connect()
    try:
        row = db.execute("SELECT pid FROM blocks WHERE base = ?", (base,)).fetchone()
    finally:
        db.close()
    return row[0] if row else None


def uids_of(owners: set[int] | list[int]) -> set[int]:
    """Every uid of the blocks drawn by the processes ``owners``."""
    owners = list(owners)
    if not owners:
        return set()
    db = _connect()
    try:
        rows = db.execute(f"SELECT base FROM blocks WHERE pid IN "
                          f"({','.join('?' * len(owners))})", owners).fetchall()
    finally:
        db.close()
    return {base + i for (base,) in rows for i in range(BLOCK)}

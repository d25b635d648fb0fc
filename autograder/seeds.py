"""Held-out seeds: one secret per course run of the grader, never in the release.

The secret lives in ``<out>/secrets.json`` (mode 0600) unless ``--secrets FILE`` names
another file; every shard of a sharded batch must use the same file. Each project stage
and notebook gets its own seed derived from it, so all learners see the same hidden
inputs (fair) that none of them could see before grading (the learner's own runs use a
fresh random seed each time).
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import tempfile
from pathlib import Path


def load_or_create(path: Path) -> dict:
    """{"secret": hex, "id": short public fingerprint} from ``path``, created if absent."""
    path = Path(path)
    if not path.exists():
        # Shards started together may race here: write a complete file under a private
        # name, then link it into place (atomic, fails if another shard won), then read
        # whichever secret is there.
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".secrets-")
        with os.fdopen(fd, "w") as f:
            json.dump({"secret": secrets.token_hex(32)}, f)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    data = json.loads(path.read_text())
    data["id"] = hashlib.sha256(data["secret"].encode()).hexdigest()[:12]
    return data


def seed_for(secret: str, *parts: object) -> int:
    """A 31-bit seed for ``parts`` (e.g. project, stage) under ``secret``."""
    text = "\0".join([secret, *map(str, parts)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1

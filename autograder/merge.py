"""``python -m autograder merge OUT_1 OUT_2 ... --out DIR``: join the gradebooks of
shards graded on different machines (``grade --shard i/N``) into one, then ``export``.

Rows are appended, never rewritten; merging the same shard twice adds nothing. The
shards must share one secret (the same ``--secrets`` file), otherwise their hidden seeds
differ and the scores are not comparable: merge refuses unless ``--force``.
"""

from __future__ import annotations

from pathlib import Path

from autograder.gradebook import FILENAME, Gradebook


class MergeError(Exception):
    pass


def merge(sources: list[Path], out: Path, force: bool = False) -> dict:
    books = []
    for src in sources:
        path = Path(src) / FILENAME if Path(src).is_dir() else Path(src)
        if not path.is_file():
            raise MergeError(f"no gradebook at {path}")
        books.append(Gradebook(path))
    target = Gradebook.in_dir(out)
    try:
        secret_ids = set().union(target.secret_ids(), *(b.secret_ids() for b in books))
        secret_ids.discard("")
        if len(secret_ids) > 1 and not force:
            raise MergeError(
                f"the shards were graded with different secrets ({sorted(secret_ids)}): "
                "their hidden seeds differ. Grade every shard with the same --secrets "
                "file, or pass --force to merge anyway.")
        added = {str(src): target.import_from(b) for src, b in zip(sources, books, strict=True)}
        total = target.count()
    finally:
        target.close()
        for b in books:
            b.close()
    return {"added": added, "rows": total, "gradebook": str(Path(out) / FILENAME)}

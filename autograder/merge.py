"""``python -m autograder merge OUT_1 OUT_2 ... --out DIR``: join the gradebooks of
shards graded on different machines (``grade --shard i/N``) into one, then ``export``.

Rows are appended, never rewritten; merging the same shard twice adds nothing. The
shards must share one secret (the same ``--secrets`` file), otherwise their hidden seeds
differ and the scores are not comparable: merge refuses unless ``--force``.
"""

from __future__ import annotations

from collections import Counter
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
        if not force:
            _check_one_secret(target, out, sources, books)
        added = {str(src): target.import_from(b) for src, b in zip(sources, books, strict=True)}
        total = target.count()
    finally:
        target.close()
        for b in books:
            b.close()
    return {"added": added, "rows": total, "gradebook": str(Path(out) / FILENAME)}


def _check_one_secret(target: Gradebook, out: Path, sources: list[Path],
                      books: list[Gradebook]) -> None:
    """Refuse shards graded with another secret than the rest, naming each of them. The
    reference is the secret already merged into ``out`` if any, else the one most of the
    sources share (the earliest on a tie)."""
    ids = {str(src): b.secret_ids() - {""} for src, b in zip(sources, books, strict=True)}
    held = sorted(target.secret_ids() - {""})
    if len(set(held).union(*ids.values())) <= 1:
        return
    if held:
        ref, where = held[0], f"the gradebook already in {out}"
    else:
        ref = Counter(i for src_ids in ids.values() for i in sorted(src_ids)
                      ).most_common(1)[0][0]
        where = ", ".join(src for src, src_ids in ids.items() if ref in src_ids)
    odd = [f"{src} (secret {', '.join(sorted(src_ids - {ref}))})"
           for src, src_ids in ids.items() if src_ids - {ref}]
    raise MergeError(
        f"the shards were graded with different secrets: {'; '.join(odd)} "
        f"{'differs' if len(odd) == 1 else 'differ'} from {where} (secret {ref}), so "
        f"the hidden seeds differ. Grade {'that shard' if len(odd) == 1 else 'those shards'}"
        " again with the same --secrets file as the others, or pass --force to merge "
        "anyway.")

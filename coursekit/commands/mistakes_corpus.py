"""A project's learner-mistake corpus, as ``make mistakes`` reads it: two files of one
format, kept apart because they measure different things.

    tests/mistakes/<project>.py        written by the course's developers, who read the
                                       checkers: the mistakes they thought of
    tests/mistakes/blind/<project>.py  written by people given only the README, the
                                       starter and the solution (never a checker, its
                                       planted bugs or the corpus); every id starts with
                                       ``blind-``: how far the checks generalise

Each holds ``MISTAKES = [{"stage", "id", "misunderstood", "edits": [(old, new), ...]}]``;
an entry may add ``"named_by": [phrase, ...]``: words a hint that names this mistake
would hold (any one, case apart), written with the mistake and never from a checker's
output, so ``make mistakes`` can say how many hints name what went wrong. A file may
hold ``JUSTIFIED = {id: why no check can catch it without failing correct work}``
(an id of either file). Each ``old`` occurs exactly once in the reference
``projects/<p>/solution/model.py`` (as the edits before it left it), inside one of that
stage's ``### BEGIN SOLUTION stage N`` regions.
"""

from __future__ import annotations

import runpy
from dataclasses import dataclass
from pathlib import Path

from coursekit.commands.mutants import learner_regions
from coursekit.facts import ROOT

BLIND_PREFIX = "blind-"


@dataclass(frozen=True)
class Mistake:
    stage: int
    id: str
    misunderstood: str
    edits: tuple[tuple[str, str], ...]
    blind: bool = False  # from tests/mistakes/blind/: written without reading a checker
    named_by: tuple[str, ...] = ()  # phrases a hint naming this mistake holds (any one)


def corpus_path(project: str, root: Path = ROOT, blind: bool = False) -> Path:
    folder = Path(root) / "tests" / "mistakes"
    return (folder / "blind" if blind else folder) / f"{project}.py"


def read_file(path: Path, blind: bool) -> tuple[list[Mistake], dict[str, str]]:
    """One corpus file's mistakes and justified exceptions; a malformed entry, or an id
    on the wrong side of the blind line, is an error naming it."""
    data = runpy.run_path(str(path))
    mistakes = []
    for k, entry in enumerate(data.get("MISTAKES", [])):
        missing = {"stage", "id", "misunderstood", "edits"} - set(entry)
        if missing or not entry["edits"]:
            raise ValueError(f"{path}: mistake #{k} ({entry.get('id')!r}) lacks "
                             f"{sorted(missing) or ['edits']}")
        mistake_id = str(entry["id"])
        if mistake_id.startswith(BLIND_PREFIX) != blind:
            raise ValueError(f"{path}: mistake {mistake_id!r}: ids "
                             f"{'must' if blind else 'may not'} start with "
                             f"{BLIND_PREFIX!r} in {'a blind' if blind else 'this'} corpus")
        mistakes.append(Mistake(int(entry["stage"]), mistake_id, str(entry["misunderstood"]),
                                tuple((str(old), str(new)) for old, new in entry["edits"]),
                                blind, tuple(str(p) for p in entry.get("named_by", ()))))
    return mistakes, {str(k): str(v) for k, v in data.get("JUSTIFIED", {}).items()}


def load_corpus(project: str, root: Path = ROOT) -> tuple[list[Mistake], dict[str, str]]:
    """The project's mistakes (its own corpus, then the blind one where there is one) and
    the justified exceptions of both."""
    path = corpus_path(project, root)
    if not path.is_file():
        raise SystemExit(f"{project}: no mistake corpus at {path}")
    mistakes, justified = read_file(path, blind=False)
    blind = corpus_path(project, root, blind=True)
    if blind.is_file():
        more, also = read_file(blind, blind=True)
        mistakes += more
        justified = {**justified, **also}
    return mistakes, justified


def apply(source: str, mistake: Mistake) -> str:
    """``source`` with the mistake's edits made, each ``old`` found exactly once inside one
    of the mistake's stage regions; ValueError naming the edit otherwise."""
    text = source
    for n, (old, new) in enumerate(mistake.edits, 1):
        where = f"mistake {mistake.id!r}, edit {n} ({old[:60]!r})"
        count = text.count(old)
        if count != 1:
            raise ValueError(f"{where}: the old text occurs {count} times (must be once)")
        first = text[:text.index(old)].count("\n") + 1
        last = first + old.rstrip("\n").count("\n")
        inside = [r for r in learner_regions(text) if r.stage == mistake.stage
                  and r.first <= first and last <= r.last]
        if not inside:
            raise ValueError(f"{where}: lines {first}-{last} are not inside a stage "
                             f"{mistake.stage} solution region")
        text = text.replace(old, new)
    if text == source:
        raise ValueError(f"mistake {mistake.id!r}: the edits change nothing")
    return text


def repeats(project: str, mistakes: list[Mistake], root: Path = ROOT) -> dict[str, str]:
    """Each mistake whose edited file is byte for byte an earlier mistake's (the course's
    own first, then the blind ones in their order) -> that earlier mistake's id. A blind
    writer who lands on a named mistake's very file adds no new reach to measure: the blind
    figure says how many of its mistakes are new files (2026-12-06: 154 of 389 blind
    mistakes were a named one's file, 4 an earlier blind one's)."""
    path = Path(root) / "projects" / project / "solution" / "model.py"
    if not path.is_file():  # a report kept outside a course tree: nothing to compare
        return {}
    solution = path.read_text()
    first: dict[str, str] = {}
    found = {}
    for mistake in sorted(mistakes, key=lambda m: m.blind):  # stable: each file's order
        try:
            text = apply(solution, mistake)
        except ValueError:  # its own test names it; nothing to compare
            continue
        if text in first:
            found[mistake.id] = first[text]
        else:
            first[text] = mistake.id
    return found


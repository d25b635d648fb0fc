"""``python -m autograder similar GRADING``: similar work across submissions, for a
person to read. Never a grade: nothing here touches a score, and every page says so.

What is compared, each against the same thing in every other submission:

* each project's learner files: ``projects/<p>/starter/model.py`` followed by every
  other ``.py`` and notebook under ``projects/<p>/`` (``learner_docs``), and every
  other ``.py`` or notebook of the submission as one more document; a file it could
  not read (a link, past a size or the walk's bounds) is named with why;
* each notebook's answer cells (the cells nbgrader marks as solutions), a submission's
  code answers as one document and its written (Markdown) answers as another, each
  answer headed by its question id;
* and each learner file against the course's own code a learner file may not import
  (``coursekit.checking.forbidden``: the instructor-only answers, ...), whose
  source the release ships: a copy of one pairs with ``(course) <its name>``. What the
  course's own reference answer (``solution/``, beside the grader) shares with that code
  is removed from it first: it is what any answer holds.

With copydetect (Lingenfelter's winnowing detector, pinned in pyproject.toml): code is
tokenised and names and strings are replaced by placeholders before fingerprinting
(k-grams of ``NOISE`` tokens, winnowed so that any shared run of ``GUARANTEE`` or more
is found), so renaming variables hides nothing; written answers are compared as text.
The released starter files and the released notebooks' text are the boilerplate:
their fingerprints are removed first, so what the course handed out never counts.
``--ignore-common F`` also drops passages that more than a fraction F of the
submissions share (Moss's "-m": the idiom everyone writes). The k-grams are hashed with
BLAKE2b rather than copydetect's ``hash()``, which Python salts per process: the same
class gives the same figures every run.

Scale: each distinct document is fingerprinted once (tokenising is most of the time,
shared by ``--workers`` processes); each pair first meets by the size of its
shared fingerprint set (a C set intersection), and only pairs that could reach the
threshold are compared in full (copydetect's ``compare_files``: shares and passages).
200 submissions are about 20,000 pairs per file; ``make bench`` prints the time.

Printed: the pairs at or above ``--threshold`` (the larger of the two shares: the
fraction of a document's own tokens found in the other) with at least ``--min-tokens``
shared tokens, ranked; and submissions whose learner files are byte-identical. Written
to ``--out`` (default GRADING/similar/): ``index.html`` (ranked pairs), one side-by-side
page per pair (``--pages`` at most) with shared passages marked, ``similar.json``.

Submission files come from the folder the gradebook's latest ``grade`` run graded
(``--submissions`` to say where, if it moved), zips from GRADING/.unpacked/; the
released text from the course (starters) and that run's ``--notebooks`` folder (or
``--notebooks``; a notebook whose source is not found is compared with nothing removed,
and a note says so). The gradebook is only read. Names are matched exactly: two
submissions whose names differ only in Unicode form (NFC and NFD ``josé``) are two
learners, each read from its own folder, and printed with their folder names
(``autograder.names.shown``) so a reader can tell them apart.
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import io
import json
import sys
import time
import tokenize
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from autograder import course as course_mod
from autograder.classdata import ClassDataError, load, nfc, run_argv
from autograder.names import NameRefused, inside, shown
from autograder.textsafe import line

NOISE, GUARANTEE = 25, 30   # copydetect's k and its guarantee (window = 30 - 25 + 1)
THRESHOLD, MIN_TOKENS, PAGES = 0.5, 40, 200
CAUTION = ("Evidence for a person to read, never a grade. A high share means two "
           "submissions contain the same passages beyond the released starter code and "
           "notebook text; it does not say who wrote them, or whether working together "
           "was allowed. Read both files before concluding anything.")


@dataclass
class Doc:
    student: str
    key: str          # what is compared: a file, or a notebook's answers
    text: str
    language: str | None   # "python" (tokenised) or None (plain text)
    fp: object = None


@dataclass
class Pair:
    key: str
    a: str
    b: str
    share_a: float
    share_b: float
    tokens: int
    slices: tuple = ()
    texts: tuple = ()

    @property
    def score(self) -> float:
        return max(self.share_a, self.share_b)


@dataclass
class Found:
    pairs: list[Pair]
    identical: list[list[str]]
    compared: dict[str, int]            # key -> documents compared
    pair_count: int
    no_own_text: dict[str, list[str]]   # key -> students with nothing beyond the release
    not_found: list[str]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    skipped: dict[str, list[str]] = field(default_factory=dict)  # student -> what, why


# ----------------------------------------------------------------------------------
# Documents
# ----------------------------------------------------------------------------------

def answer_cells(cells) -> list[tuple[str, str, str]]:
    """(grade id, "code" or "markdown", source) of the answer (nbgrader solution) cells
    of a notebook's JSON cells."""
    out = []
    for cell in cells if isinstance(cells, list) else []:
        if not isinstance(cell, dict):
            continue
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        if not isinstance(meta, dict) or not meta.get("solution"):
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else str(source)
        kind = "code" if cell.get("cell_type") == "code" else "markdown"
        out.append((str(meta.get("grade_id", "?")), kind, source))
    return out


def answers_text(cells: list[tuple[str, str, str]], kind: str) -> str:
    head = "# --- answer: {} ---\n" if kind == "code" else "--- answer: {} ---\n"
    return "\n".join(head.format(gid) + src + "\n" for gid, k, src in cells if k == kind)


def _same(a: str, b: str) -> bool:
    return a.split() == b.split()


def answer_docs(student: str, nb_path: Path, name: str,
                released: dict[str, dict[str, str]], skipped: list[str] | None = None
                ) -> list[Doc]:
    """A learner notebook's answer cells, those changed from the release only: one code
    and one written document. A notebook that cannot be read is named in ``skipped``."""
    from autograder.nblimits import NotebookRefused, check_notebook_file
    try:
        data = check_notebook_file(nb_path)
    except NotebookRefused as err:
        (skipped if skipped is not None else []).append(f"{name}: {err.message}")
        return []
    except OSError as err:
        (skipped if skipped is not None else []).append(f"{name}: {err.strerror}")
        return []
    given = released.get(name, {})
    cells = [c for c in answer_cells(data.get("cells") if isinstance(data, dict) else [])
             if not (c[0] in given and _same(given[c[0]], c[2]))]
    out = []
    for kind, label, language in (("code", "code answers", "python"),
                                  ("markdown", "written answers", None)):
        text = answers_text(cells, kind)
        if text.strip():
            out.append(Doc(student, f"{name} ({label})", text, language))
    return out


OTHER_FILES = "other files (Python and notebooks)"



def python_text(data: bytes) -> str:
    """A Python file's text as Python itself reads it: its coding line honoured (the same
    file written in UTF-7, every newline "+AAo-", is one comment line to a UTF-8 reader
    and would pair with nobody), undecodable bytes replaced."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding, errors="replace")
    except (SyntaxError, LookupError):
        return data.decode("utf-8", errors="replace")

def learner_docs(student: str, root: Path, released: dict[str, dict[str, str]],
                 skipped: list[str] | None = None) -> list[Doc]:
    """Everything the learner handed in that can hold code (``autograder.handed_in.
    code_files``: every ``.py`` and notebook, walked within bounds): per project one
    document under the key of its ``starter/model.py``, that file first and then every
    other Python file and notebook (code cells) below ``projects/<p>/``, each headed by
    its path (a 5-line ``model.py`` that loads ``_impl.py`` is compared with all of
    it); each course notebook's answers as before; anything else as one more document.
    What could not be read goes to ``skipped``, named with why."""
    from autograder.handed_in import MAX_PY_BYTES, code_files
    from coursekit.facts import TooBig, read_bounded
    skipped = [] if skipped is None else skipped
    files, skips = code_files(root)
    skipped += [f"{rel}: {why}" for rel, why in skips]
    projects: dict[str, list[tuple[str, str]]] = defaultdict(list)
    docs, other = [], []
    for rel in files:
        parts, path = Path(rel).parts, root / rel
        if rel.endswith(".ipynb") and len(parts) == 2 and parts[0] == "notebooks":
            got = answer_docs(student, path, rel, released, skipped)
            docs += got
            continue
        try:
            text = notebook_code(path) if rel.endswith(".ipynb") else python_text(
                read_bounded(path, MAX_PY_BYTES))
        except (TooBig, OSError, ValueError) as err:
            skipped.append(f"{rel}: {err}")
            continue
        if len(parts) >= 3 and parts[0] == "projects":
            projects[parts[1]].append((rel, text))
        else:
            other.append((rel, text))
    for project, texts in sorted(projects.items()):
        key = f"projects/{project}/starter/model.py"
        texts.sort(key=lambda t: (t[0] != key, t[0]))
        docs.append(Doc(student, key, _joined(texts, key), "python"))
    if other:
        docs.append(Doc(student, OTHER_FILES, _joined(other, None), "python"))
    return docs


def _joined(texts: list[tuple[str, str]], first: str | None) -> str:
    return "\n".join(text if rel == first else f"# --- handed in: {rel} ---\n{text}"
                      for rel, text in texts)


def notebook_code(path: Path) -> str:
    """The code cells of a notebook that is not one of the course's, read within the
    notebook limits (``NotebookRefused`` is a ``ValueError`` here)."""
    from autograder.nblimits import NotebookRefused, check_notebook_file
    try:
        data = check_notebook_file(path)
    except NotebookRefused as err:
        raise ValueError(err.message) from None
    cells = data.get("cells") if isinstance(data, dict) else None
    out = []
    for cell in cells if isinstance(cells, list) else []:
        if isinstance(cell, dict) and cell.get("cell_type") == "code":
            source = cell.get("source", "")
            out.append("".join(map(str, source)) if isinstance(source, list) else str(source))
    return "\n".join(out)


# The course's own code a learner file may not import (coursekit.checking.forbidden):
# the instructor-only answers (coursekit.instructor, which a learner's copy does not hold,
# but which can leak) and the public helpers refused at a stage, so a copy of one is a
# passage to read too. Each is one more document per learner file, its "student" this
# prefix and its name (one document each: pasted into a longer file, a function is most
# of itself but little of the file).
COURSE_CODE = "(course) "


def is_course(student: str) -> bool:
    return student.startswith(COURSE_CODE)


def refused_code(course_root: Path, project: str) -> dict[str, str]:
    """Name -> source of every course function refused to ``project``'s learner file (a
    whole module where the rule takes all of it)."""
    import ast

    from coursekit.checking.forbidden import RULES

    out = {}
    for module, name in dict.fromkeys((r.module, r.name) for r in RULES.get(project, ())
                                      if r.module.startswith("coursekit.")):
        path = course_root / (module.replace(".", "/") + ".py")
        folder = course_root / module.replace(".", "/")
        if name == "*" and folder.is_dir():  # a package: each function of each module
            for file in sorted(folder.glob("*.py")):
                source = file.read_text(encoding="utf-8")
                for node in ast.parse(source).body:
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                        out[f"{module}.{file.stem}.{node.name}"] = \
                            ast.get_source_segment(source, node) or ""
            continue
        if not path.is_file():
            continue
        source = path.read_text(encoding="utf-8")
        if name == "*":
            out[module] = source
            continue
        for node in ast.parse(source).body:
            if getattr(node, "name", None) == name:
                out[f"{module}.{name}"] = ast.get_source_segment(source, node) or ""
    return out


def released_notebooks(notebooks_dir: Path | None, names: set[str]) -> dict[str, object]:
    """notebook name -> its released version (nbgrader's own release steps)."""
    out = {}
    for name in sorted(names):
        source = (Path(notebooks_dir) / Path(name).name) if notebooks_dir else None
        if not source or not source.is_file():
            continue
        import nbformat

        from autograder.nbsource import release_notebook
        out[name] = release_notebook(nbformat.read(str(source), as_version=4))
    return out


def released_answers(notebooks: dict[str, object]) -> dict[str, dict[str, str]]:
    """notebook name -> grade id -> the released text of that answer cell."""
    return {name: {gid: src for gid, _, src in answer_cells(
        [dict(c) for c in nb.cells])} for name, nb in notebooks.items()}


def released_text(course_root: Path, notebooks: dict[str, object], keys: set[str]
                  ) -> dict[str, list[tuple[str, str | None]]]:
    """key -> the released text it is compared against as boilerplate: the starter, or
    every cell of the released notebook and its answer cells as one document."""
    out: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for key in keys:
        if key.startswith("projects/"):
            starter = course_root / key
            if starter.is_file():
                out[key].append((starter.read_text(encoding="utf-8", errors="replace"),
                                 "python"))
    for name, nb in notebooks.items():
        answers = answer_cells([dict(c) for c in nb.cells])
        out[f"{name} (code answers)"].append((answers_text(answers, "code"), "python"))
        out[f"{name} (written answers)"].append((answers_text(answers, "markdown"), None))
        for cell in nb.cells:
            if cell.cell_type == "code":
                out[f"{name} (code answers)"].append((cell.source, "python"))
            else:
                out[f"{name} (written answers)"].append((cell.source, None))
    return out


# ----------------------------------------------------------------------------------
# Comparing
# ----------------------------------------------------------------------------------

def stable_kgrams(string: str, k: int):
    """copydetect's ``hashed_kgrams`` with a hash that is the same in every process
    (it uses ``hash()``, salted per process, so winnowing picked other k-grams and the
    shares moved a little from one run to the next)."""
    import numpy as np
    if len(string) < k:
        return np.array([])
    blake = hashlib.blake2b
    return np.array([int.from_bytes(blake(string[i:i + k].encode("utf-8", "replace"),
                                          digest_size=8).digest(), "big", signed=True)
                     for i in range(len(string) - k + 1)], dtype=np.int64)


@contextlib.contextmanager
def stable_hashes():
    import copydetect.utils as utils
    saved, utils.hashed_kgrams = utils.hashed_kgrams, stable_kgrams
    try:
        yield
    finally:
        utils.hashed_kgrams = saved


def fingerprint(text: str, language: str | None, window: int | None = None):
    from copydetect.detector import CodeFingerprint
    window = GUARANTEE - NOISE + 1 if window is None else window
    with stable_hashes():
        return CodeFingerprint("doc.py" if language else "doc.txt", NOISE, window,
                               filter=language is not None, language=language,
                               fp=io.StringIO(text))


def boilerplate_hashes(texts: list[tuple[str, str | None]]) -> set:
    """Every k-gram (window 1) of the released text, as copydetect takes boilerplate."""
    hashes: set = set()
    for text, language in texts:
        hashes |= fingerprint(text, language, window=1).hashes
    return hashes


def strip(fp, hashes: set) -> None:
    """Remove ``hashes`` from a fingerprint (its passages no longer count) and recount
    the tokens it covers, the denominator of its share."""
    from copydetect.utils import get_token_coverage
    gone = fp.hashes & hashes
    if not gone:
        return
    fp.hashes -= gone
    for h in gone:
        fp.hash_idx.pop(h, None)
    fp.token_coverage = get_token_coverage(fp.hash_idx, fp.k, len(fp.filtered_code))


def drop_common(docs: list[Doc], fraction: float, population: int) -> int:
    """Remove fingerprints that more than ``fraction`` of the ``population``
    submissions share."""
    counts: dict = defaultdict(int)
    for d in docs:
        for h in d.fp.hashes:
            counts[h] += 1
    common = {h for h, n in counts.items() if n > fraction * population and n > 1}
    for d in docs:
        strip(d.fp, common)
    return len(common)


def compare_key(docs: list[Doc], threshold: float, min_tokens: int) -> list[Pair]:
    from copydetect.detector import compare_files
    sets = [d.fp.hashes for d in docs]
    sizes = [len(s) for s in sets]
    pairs = []
    for i in range(len(docs)):
        si = sets[i]
        for j in range(i + 1, len(docs)):
            smaller = min(sizes[i], sizes[j])
            if not smaller or is_course(docs[i].student) and is_course(docs[j].student):
                continue
            shared = len(si & sets[j])
            # a pair whose shared fingerprints are well under the threshold cannot
            # reach it; only the rest is compared in full
            if shared == 0 or shared < 0.5 * threshold * smaller:
                continue
            tokens, (share_a, share_b), slices = compare_files(docs[i].fp, docs[j].fp)
            if max(share_a, share_b) >= threshold and tokens >= min_tokens:
                pairs.append(Pair(docs[i].key, docs[i].student, docs[j].student,
                                  float(share_a), float(share_b), int(tokens), slices,
                                  (docs[i].text, docs[j].text)))
    return pairs


def _fingerprint_job(job: tuple[str, str | None]):
    """One document's fingerprint, in a worker process (the hashes are the same in
    every process, so fingerprints made apart compare)."""
    return fingerprint(*job)


def fingerprints(jobs: list[tuple[str, str | None]], workers: int) -> list:
    """Each distinct (text, language) fingerprinted once; tokenising is most of the
    pass's time, so ``workers`` processes share it."""
    distinct = list(dict.fromkeys(jobs))
    if workers > 1 and len(distinct) > 8:
        import concurrent.futures as cf
        import multiprocessing
        with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(
                "forkserver")) as pool:
            made = dict(zip(distinct, pool.map(_fingerprint_job, distinct, chunksize=4)))
    else:
        made = {job: fingerprint(*job) for job in distinct}
    import copy
    seen: set = set()
    out = []
    for job in jobs:   # a repeated text gets its own copy (strip() edits it in place)
        out.append(copy.deepcopy(made[job]) if job in seen else made[job])
        seen.add(job)
    return out


def find_similar(roots: dict[str, Path], course_root: Path, notebooks_dir: Path | None,
                 threshold: float = THRESHOLD, min_tokens: int = MIN_TOKENS,
                 ignore_common: float | None = None, workers: int = 2) -> Found:
    started = time.perf_counter()
    by_key: dict[str, list[Doc]] = defaultdict(list)
    whole: dict[str, str] = {}
    names = {f"notebooks/{p.name}" for root in roots.values()
             for p in root.glob("notebooks/*.ipynb")}
    notebooks = released_notebooks(notebooks_dir, names)
    given = released_answers(notebooks)
    skipped: dict[str, list[str]] = {}
    for student, root in roots.items():
        skipped[student] = []
        docs = learner_docs(student, root, given, skipped[student])
        for d in docs:
            by_key[d.key].append(d)
        if docs:
            digest = hashlib.sha256()
            for d in sorted(docs, key=lambda d: d.key):
                digest.update(d.key.encode() + b"\0" + d.text.encode() + b"\0")
            whole[student] = digest.hexdigest()
    released = released_text(course_root, notebooks, set(by_key))
    notes = [f"{key}: no released text found; nothing is removed as boilerplate"
             for key in sorted(by_key) if key not in released]
    for key in sorted(k for k in by_key if k.startswith("projects/")):
        refused = refused_code(course_root, Path(key).parts[1])
        by_key[key] += [Doc(COURSE_CODE + name, key, text, "python")
                        for name, text in refused.items()]
        if refused:
            notes.append(f"{key}: also compared with the course's own code a learner file "
                         f"may not import, each shown as {COURSE_CODE}<name> "
                         f"({len(refused)}: {', '.join(refused)})")
    pairs, compared, no_own, pair_count = [], {}, {}, 0
    every = [d for key in sorted(by_key) for d in by_key[key]]
    for d, fp in zip(every, fingerprints([(d.text, d.language) for d in every], workers)):
        d.fp = fp
    for key in sorted(by_key):
        bp = boilerplate_hashes(released.get(key, []))
        docs = by_key[key]
        for d in docs:
            strip(d.fp, bp)
        # what the course's reference answer shares with the course's code is what any
        # answer holds (a t interval is a t interval): only the rest of it counts
        reference = course_root / key.replace("/starter/", "/solution/")
        if key.startswith("projects/") and reference.is_file():
            answer = boilerplate_hashes([(reference.read_text(encoding="utf-8"), "python")])
            for d in docs:
                if is_course(d.student):
                    strip(d.fp, answer)
        if ignore_common:
            dropped = drop_common(docs, ignore_common, len(roots))
            if dropped:
                notes.append(f"{key}: {dropped} passage fingerprint(s) shared by more than "
                             f"{ignore_common:.0%} of submissions ignored")
        own = [d for d in docs if d.fp.hashes]
        no_own[key] = sorted(d.student for d in docs
                             if not d.fp.hashes and not is_course(d.student))
        compared[key] = sum(not is_course(d.student) for d in own)
        pair_count += len(own) * (len(own) - 1) // 2
        pairs += compare_key(own, threshold, min_tokens)
    pairs.sort(key=lambda p: (-p.score, -p.tokens, p.key, p.a, p.b))
    groups: dict[str, list[str]] = defaultdict(list)
    for student, digest in whole.items():
        groups[digest].append(student)
    own_text = {d.student for docs in by_key.values() for d in docs
                if d.fp.hashes and not is_course(d.student)}
    unchanged = set(whole) - own_text   # nothing beyond the release: not "identical"
    identical = sorted(sorted(g) for g in groups.values()
                       if len(g) > 1 and not set(g) <= unchanged)
    return Found(pairs, identical, compared, pair_count, no_own, [], notes,
                 time.perf_counter() - started,
                 skipped={s: why for s, why in skipped.items() if why})


# ----------------------------------------------------------------------------------
# Where the submissions are
# ----------------------------------------------------------------------------------

def _grade_argv():
    """The two arguments of a recorded ``grade`` command line this needs (the CLI's own
    parser sits above this module: importing it would make a circle)."""
    import argparse
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("submissions", type=Path)
    parser.add_argument("--notebooks", type=Path, default=None)
    return parser


def graded_folders(grading: Path, book, submissions: Path | None,
                   notebooks: Path | None = None) -> tuple[Path | None, Path | None]:
    """(the submissions folder, the source notebooks folder) of the latest grade run;
    either given is kept."""
    given = notebooks
    for argv in run_argv(book):
        if "grade" not in argv:
            continue
        try:
            args, _ = _grade_argv().parse_known_args(argv[argv.index("grade") + 1:])
        except SystemExit:
            continue
        notebooks = given or args.notebooks
        if submissions is None:
            for base in (Path.cwd(), Path(grading).resolve().parent):
                candidate = args.submissions if args.submissions.is_absolute() \
                    else base / args.submissions
                if candidate.is_dir():
                    submissions = candidate
                    break
        break
    if notebooks is not None and not Path(notebooks).is_absolute():
        notebooks = Path.cwd() / notebooks
    return submissions, Path(notebooks) if notebooks else course_mod.ROOT / "notebooks"


def submission_roots(grading: Path, students: list[str], folder: Path
                     ) -> tuple[dict[str, Path], list[str]]:
    """student -> the folder to read, for every graded student; the students without
    one. Names are matched exactly (NFC and NFD ``josé`` are two learners, each with
    their own files); a name found only in another normal form (a folder copied through
    macOS since) is matched when exactly one folder has that form."""
    from autograder import submissions as subs_mod
    found = subs_mod.find(folder)
    by_form: dict[str, list[str]] = defaultdict(list)
    for name in found:
        by_form[nfc(name)].append(name)
    roots, missing = {}, []
    for student in students:
        path = found.get(student)
        if path is None and len(by_form.get(nfc(student), [])) == 1 \
                and by_form[nfc(student)][0] not in students:
            path = found[by_form[nfc(student)][0]]
        if path is not None and path.suffix == ".zip":
            try:
                unpacked = inside(Path(grading) / ".unpacked", student)
            except NameRefused:
                unpacked = None
            path = subs_mod.submission_root(unpacked) if unpacked and unpacked.is_dir() \
                else None
        if path is None:
            missing.append(student)
        else:
            roots[student] = path
    return roots, missing


# ----------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------

CSS = ("body{font-family:sans-serif;margin:1.2em;color:#222}table{border-collapse:collapse}"
       "td,th{border:1px solid #ccc;padding:.25em .5em;text-align:left}"
       ".caution{background:#fff3cd;border:1px solid #e0c36a;padding:.6em 1em;"
       "max-width:60em}.side{display:flex;gap:1em}.side>div{flex:1;min-width:0}"
       "pre{background:#fafafa;border:1px solid #ddd;padding:.5em;overflow-x:auto;"
       "font-size:85%;white-space:pre-wrap}mark{background:#ffd27a}")


def marked(text: str, slices) -> str:
    """``text`` HTML-escaped, the shared passages in <mark>."""
    out, at = [], 0
    try:
        spans = sorted(zip(slices[0].tolist(), slices[1].tolist()))
    except (AttributeError, IndexError, TypeError):
        spans = []
    for start, end in spans:
        start, end = max(int(start), at), min(int(end), len(text))
        if start >= end:
            continue
        out.append(html.escape(text[at:start]))
        out.append("<mark>" + html.escape(text[start:end]) + "</mark>")
        at = end
    out.append(html.escape(text[at:]))
    return "".join(out)


def pair_page(n: int, p: Pair) -> str:
    e = html.escape
    a, b = e(shown(p.a)), e(shown(p.b))
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>Pair {n}: {a} and {b}</title><style>{CSS}</style></head>"
            f"<body><p class='caution'><b>{e(CAUTION)}</b></p>"
            f"<h1>{e(p.key)}</h1><p>{p.tokens} shared tokens; {p.share_a:.0%} of "
            f"{a}'s own text is found in {b}'s, {p.share_b:.0%} the other way. "
            "Shared passages are marked; the released starter text is not counted.</p>"
            "<p><a href='index.html'>all pairs</a></p><div class='side'>"
            f"<div><h2>{a}</h2><pre>{marked(p.texts[0], p.slices[0])}</pre></div>"
            f"<div><h2>{b}</h2><pre>{marked(p.texts[1], p.slices[1])}</pre></div>"
            "</div></body></html>\n")


def index_page(found: Found, pages: int, threshold: float) -> str:
    e = html.escape
    rows = []
    for n, p in enumerate(found.pairs, 1):
        link = f"<a href='pair-{n:04d}.html'>side by side</a>" if n <= pages else ""
        rows.append(f"<tr><td>{n}</td><td>{p.score:.0%}</td><td>{e(shown(p.a))}</td>"
                    f"<td>{e(shown(p.b))}</td><td>{e(p.key)}</td><td>{p.tokens}</td>"
                    f"<td>{link}</td></tr>")
    same = "".join(f"<li>{' = '.join(e(shown(s)) for s in g)}</li>" for g in found.identical)
    return ("<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>Similar submissions</title><style>{CSS}</style></head><body>"
            f"<h1>Similar submissions</h1><p class='caution'><b>{e(CAUTION)}</b></p>"
            f"<p>{found.pair_count} pair(s) compared; {len(found.pairs)} at or above "
            f"{threshold:.0%}.</p>"
            + (f"<h2>Byte-identical learner files</h2><ul>{same}</ul>" if same else "")
            + "<h2>Pairs, most similar first</h2><table><tr><th>#</th><th>share</th>"
            "<th>submission</th><th>submission</th><th>compared</th><th>shared tokens</th>"
            "<th></th></tr>" + "".join(rows) + "</table>"
            + "".join(f"<p><small>{e(n)}</small></p>" for n in found.notes)
            + ("<h2>Not compared</h2><ul>" + "".join(
                f"<li>{e(shown(s))}: {e(w)}</li>" for s, why in sorted(found.skipped.items())
                for w in why) + "</ul>" if found.skipped else "")
            + "</body></html>\n")


def write(found: Found, out: Path, pages: int, threshold: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("pair-*.html"):
        old.unlink()
    (out / "index.html").write_text(index_page(found, pages, threshold), encoding="utf-8")
    for n, p in enumerate(found.pairs[:pages], 1):
        (out / f"pair-{n:04d}.html").write_text(pair_page(n, p), encoding="utf-8")
    (out / "similar.json").write_text(json.dumps({
        "caution": CAUTION, "threshold": threshold, "pairs_compared": found.pair_count,
        "documents": found.compared, "identical": found.identical,
        "not_found": found.not_found, "notes": found.notes, "seconds": found.seconds,
        "skipped": found.skipped,
        "pairs": [{"rank": n, "key": p.key, "a": p.a, "b": p.b, "share_a": p.share_a,
                   "share_b": p.share_b, "tokens": p.tokens,
                   "page": f"pair-{n:04d}.html" if n <= pages else None}
                  for n, p in enumerate(found.pairs, 1)]}, indent=1, ensure_ascii=False),
        encoding="utf-8")


def main(grading: Path, out: Path | None, submissions: Path | None, threshold: float,
         min_tokens: int, pages: int, ignore_common: float | None,
         notebooks: Path | None = None, workers: int = 2) -> int:
    try:
        book = load(grading)
    except ClassDataError as err:
        print(f"similar: {err}", file=sys.stderr)
        return 2
    folder, notebooks = graded_folders(grading, book, submissions, notebooks)
    if folder is None or not Path(folder).is_dir():
        print("similar: cannot tell where the graded submissions are (the gradebook's "
              "grade runs name no folder that exists here); pass --submissions DIR",
              file=sys.stderr)
        return 2
    roots, missing = submission_roots(grading, book.students, Path(folder))
    found = find_similar(roots, course_mod.ROOT, notebooks, threshold, min_tokens,
                         ignore_common, workers)
    found.not_found = missing
    out = Path(out) if out else Path(grading) / "similar"
    write(found, out, pages, threshold)
    print(f"similar: {len(roots)} submission(s) from {folder}; {found.pair_count} pair(s) "
          f"compared in {found.seconds:.1f} s; {len(found.pairs)} at or above "
          f"{threshold:.0%} with {min_tokens}+ shared tokens")
    print(f"  {CAUTION}")
    for n, p in enumerate(found.pairs, 1):
        print(f"{n:4d}. {p.score:4.0%}  {shown(p.a)} ~ {shown(p.b)}  {line(p.key)}  "
              f"({p.tokens} shared tokens; {p.share_a:.0%} / {p.share_b:.0%})")
    for group in found.identical:
        print(f"identical learner files: {' = '.join(map(shown, group))}")
    for s in missing:
        print(f"not found on disk (in the gradebook, not in {folder}): {s}", file=sys.stderr)
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    for student, why in sorted(found.skipped.items()):
        for w in why:
            print(f"not compared: {shown(student)}: {line(w)}", file=sys.stderr)
    print(f"side by side: {out / 'index.html'}")
    return 0

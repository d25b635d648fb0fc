"""The scan of a learner's release for answers in any readable form (issue 46): what
docs/checkers/reference.md ("What a learner receives") says no learner-side file may hold, found in
the built release. ``scan(release)`` returns one sentence a finding; ``scan(release,
files=[...])`` reads only those files (the planted cases of tests/test_release_scan.py).

The rules, each over every shipped file:

* ``code``: a function (of a ``.py`` file, a notebook's code cells, a Markdown page's
  python blocks) that is an answer: the same body as, or most of, a learner function of a
  reference solution (one that holds or lies in a ``BEGIN SOLUTION`` region), a function
  of ``coursekit/instructor`` or one that has left the copy (tests/release_retired.py),
  names and constants abstracted (the measures of tests/test_release_checker_answers.py,
  applied to the whole release);
* ``names``: prose (a Markdown page, a notebook's Markdown, a docstring or comment) naming
  a function that only ``coursekit/instructor`` defines: a pointer to an answer;
* ``method``: prose or a hint holding a stage answer's method in words:
  tests/test_release_answers' recipes and answers, and ``METHODS`` (the sentences issue 46
  found);
* ``reasons``: a rule of ``coursekit/checking/forbidden.py`` whose reason is free text
  instead of one of its fixed sentences (``WHY``);
* ``bracket``: a check's ``expected=`` or ``hint=`` that prints an accepted interval
  (``[lo, hi]``): two failures are enough to fit it;
* ``hint-line``: a hint holding ``HINT_RUN`` code tokens in a row of a solution line;
* ``scaffold``: a notebook code cell holding a stage's scaffold (``SCAFFOLDS``);
* ``instructor``: instructor-only code or a solution folder in the release at all;
* ``sealed``: a program ``jax.export`` can load (a callable answer: issue 50 found notebook
  08's train step shipped so), whatever the file's name or suffix.
"""

from __future__ import annotations

import ast
import functools
import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import release_retired
import test_release_answers as pages
import test_release_checker_answers as code

from coursekit.facts import ROOT

INSTRUCTOR = ROOT / "coursekit" / "instructor"
# The sentences issue 46 found giving a method or pointing at an answer, as they were
# written (docs/checkers/reference.md records each, with where it was): prose holding one is the
# same finding again.
METHODS = (
    "median seconds of that round's samples",
    "estimate of log speedup, half-width",
    "Student-t interval of per-round log ratios",
    "its make_mesh, placement and timing_step are",
    "its reference_softmax_f32 is softmax_jnp",
    "already returns the sum of the 8 per-shard gradients",
    "before the global division by the total valid count",
    "-inf for max, 0 for sum",
    "is this stage's answer",
    # hints that hand over the design (issue 46, item 2: the checkers' owners fix them)
    "already sums over the shards",
    "divide by the psum of the valid counts",
    "mask the block's columns >= n_cols with -inf",
    "pl.cdiv(rows, block_rows)",
    # sharded-training stage 2's docstring and hints (the blind reading's first item)
    "the count-weighted rule grad(shard sum) / psum(count)",
    "grad's transpose of a replicated input",
    "out_specs P('data') gathers one number per device",
    "inside shard_map each device sums its own piece of the mask",
    "jax.shard_map(f, mesh=mesh, in_specs=..., out_specs=...)",
    "grad no longer sums over the shards",
    # pallas-kernel stage 1's hints: the derivation, step by step
    "subtract each row's max first",
    "count every rounding: the float32 sum over the row",
    "a sum of n terms collects up to about n roundings",
    "convert to float64 before any arithmetic",
    "a few u32 in absolute terms",
    "atol = 3 * u32",
    # the fix's code in sharded-training 1 and 4's hints and pallas-kernel 3's
    "params: P() (replicated); batch: P('data')",
    'jax.random.key(seed), not the legacy uint32 PRNGKey',
    'devices: sorted ids of leaf.sharding.device_set',
    'str(leaf.sharding.spec) where the sharding has one',
    'XLA then adds the all-reduce itself',
    'use jax.tree_util.keystr(path)',
    'jax.block_until_ready(out) inside every timed boundary',
    'TraceAnnotation(region, step=i) with i counting the traced calls from 0',
    'jax.block_until_ready inside the TraceAnnotation, not after it',
    'count with coursekit.measure.timing.count_compiles()',
    'time.perf_counter() after the sync minus time.perf_counter() before the call',
    'sort the shapes by rows * cols (math.prod(shape))',
    'start the clock right before the call, stop it right after',
    # performance-audit's and optimisation's hints that named the fix's code or the model
    # (the second reading, tests/release_plants_audit.py plants each one back)
    "python_tracer_level = 0",
    "must be a traced argument, not a static one",
    "one compiled call for the whole loop",
    "synchronise every call inside its timed boundary",
    "a straight line through (small, median) and (large, median)",
    "first pair with g0 >= threshold > g1",
    "wait for the traced call (jax.block_until_ready) inside its region",
    "sync inside each timed call (jax.block_until_ready(f(a)))",
    "skip the leaves that are the arguments themselves",
    "compiled.memory_analysis() of the jitted loss_and_grads",
    "bandwidth[memory_level] when a dict is given",
    "only the share's part of the step gets faster",
)
# Notebook code outside a solution region that is a stage's scaffold (what the blind
# reading wrote a stage from): notebook 05's shard_map harness with its specs, a softmax in
# a Pallas kernel body (notebook 06's planted kernel, the stage-2 kernel less its mask).
KERNEL_BODY = re.compile(r"def \w+\(x_ref, o_ref[^)]*\):[^\n]*((?:\n[ \t]+[^\n]*)*)")
SCAFFOLDS = {
    "a shard_map with its specs": re.compile(r"shard_map\([^()]*(?:\([^()]*\)[^()]*)*"
                                             r"in_specs\s*=", re.S).search,
    "a softmax in a Pallas kernel": lambda source: any(
        re.search(r"softmax\(|jnp\.exp\(", body) for body in KERNEL_BODY.findall(source)),
}
# (rule, file, what): why it stays; the test fails when an entry no longer matches.
_LESSON = ("the synchronised timing loop is notebook 01's open lesson (a call, wait for "
           "it, read the clock): what a stage asks is what surrounds it (which calls, "
           "first call apart, warm-up, the record)")
ALLOWED: dict[tuple[str, str, str], str] = {
    **{("code", where, f"synced_samples ~ {answer}"): _LESSON
       for where in ("notebooks/01_async_timing.ipynb",)
       for answer in ("pallas-kernel:sweep", "performance-audit:measure_peak_flops",
                      "sharded-training:profile_train_step")},
    ("code", "coursekit/measure/timing.py",
     "bare_loop_overhead ~ performance-audit:measure_peak_flops"): _LESSON,
    ("code", "notebooks/01_async_timing.ipynb",
     "unsynced_samples ~ performance-audit:measure_bandwidth"):
        "notebook 01's planted failure, a timer that does not wait: the wrong answer on "
        "purpose, beside the loop of the lesson",
    ("code", "coursekit/portfolio/collect.py",
     "collect_memory ~ performance-audit:_peak_call"):
        "it calls the learner's own init_blocks and loss_and_grads on the inputs "
        "peak_rss_fresh_process's docstring names: the lines in common are the contract's",
    ("code", "notebooks/03_roofline.ipynb",
     "loss_and_grads_blocks.loss ~ instructor/peak_memory:blocks_loss"):
        "the residual blocks and their mean of squares are given (model.block, "
        "block_loss's docstring); block_loss's answer is the remat policy per block",
    ("code", "projects/performance-audit/tests/audit_stage3_remat.py",
     "reference_loss ~ instructor/peak_memory:blocks_loss"):
        "the contract's model with no remat: the blocks and their mean of squares are given "
        "(model.block, block_loss's docstring); block_loss's answer is the remat policy",
    ("code", "projects/performance-audit/starter/model.py",
     "block ~ instructor/peak_memory:blocks_loss.block"):
        "block is given by the starter: the model, not the exercise",
    ("code", "projects/pallas-kernel/tests/pallas_harness.py",
     "unit_roundoff ~ instructor/pallas_kernel:_u"):
        "the unit roundoff, eps / 2, is the README's definition (u32 = 2^-24)",
    ("method", "autograder/feedback.py", "phrase 'how the reference does'"):
        "the heading the grader's feedback gives the walk-through it appends after "
        "grading; the walk-throughs themselves live in docs/checkers, not shipped",
    ("method", "autograder/feedback.py", "phrase 'How the reference does'"):
        "the same heading of the grader's feedback, as a title: no walk-through",
}


# ---------------------------------------------------------------------------------------
# What the release holds
# ---------------------------------------------------------------------------------------

def shipped_files(release: Path) -> list[Path]:
    return sorted(p for p in release.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and p.suffix in (".py", ".md", ".ipynb"))


def notebook_cells(path: Path) -> list[dict]:
    return [{"type": c["cell_type"], "source": "".join(c["source"]) if isinstance(
        c["source"], list) else c["source"]} for c in json.loads(path.read_text())["cells"]]


def code_sources(path: Path) -> list[str]:
    """The Python a file holds: the file, a notebook's code cells, a page's python blocks."""
    if path.suffix == ".py":
        return [path.read_text()]
    if path.suffix == ".ipynb":
        return [c["source"] for c in notebook_cells(path) if c["type"] == "code"]
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


@functools.lru_cache(maxsize=4096)
def parsed(source: str) -> ast.AST | None:
    """The source as Python, IPython's magics and shell lines dropped; None if it is not.
    Cached by the text (every rule reads the same files: a full scan parsed each file
    about nine times); callers only read the tree."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def python_prose(source: str) -> list[str]:
    """The docstrings and comments of Python source."""
    return list(_python_prose(source))


@functools.lru_cache(maxsize=4096)  # by the text, as parsed: every rule reads the prose
def _python_prose(source: str) -> tuple[str, ...]:
    out = []
    tree = parsed(source)
    for node in ast.walk(tree) if tree else ():
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append(doc)
    try:
        out += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline)
                if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return tuple(out)


def prose(path: Path) -> list[str]:
    """What a reader reads as text: a page, a notebook's Markdown and its code's comments,
    a Python file's docstrings and comments."""
    if path.suffix == ".md":
        return [path.read_text()]
    if path.suffix == ".ipynb":
        cells = notebook_cells(path)
        return [c["source"] for c in cells if c["type"] == "markdown"] + [
            text for c in cells if c["type"] == "code" for text in python_prose(c["source"])]
    return python_prose(path.read_text())


# ---------------------------------------------------------------------------------------
# The answers
# ---------------------------------------------------------------------------------------

@functools.cache  # the repository's solutions: the same for every scan of a run
def answer_functions() -> dict[str, tuple[str, ...]]:
    """"<project>:<function>", "instructor/<module>:<function>" and
    "retired/<module>:<function>" (code that left the copy, tests/release_retired.py)
    -> tokens."""
    out = {f"{p}:{name}": tokens for p in code.PROJECTS
           for name, tokens in code.learner_functions(p).items()}
    for path in sorted(INSTRUCTOR.glob("*.py")):
        for name, fn in code.functions(ast.parse(path.read_text())):
            out[f"instructor/{path.stem}:{name}"] = code.tokens(fn)
    for name, source in release_retired.RETIRED.items():
        (_, fn), = code.functions(ast.parse(source))
        out[name] = code.tokens(fn)
    return out


@functools.lru_cache(maxsize=1024)
def answer_runs(answer: str, tokens: tuple[str, ...]) -> frozenset:
    """An answer's token runs, made once per scan run rather than once per shipped file."""
    return frozenset(code.runs(tokens))


@functools.cache  # the repository's starters: the same for every scan of a run
def learner_function_names() -> frozenset[str]:
    """Every function a starter defines: the contract names them."""
    return frozenset().union(*(defined_names(path.read_text())
                               for path in (ROOT / "projects").glob("*/starter/model.py")))


@functools.lru_cache(maxsize=4096)
def defined_names(source: str) -> frozenset[str]:
    """Every function and class ``source`` defines, at any depth. Cached by the text: a
    planted copy of the release differs from it in a file or two, and parsing the other
    200 again took 14 s of each planted case's 15."""
    tree = parsed(source)
    return frozenset(n.name for n in ast.walk(tree) if isinstance(
        n, (ast.FunctionDef, ast.ClassDef))) if tree else frozenset()


def instructor_only_names(release: Path) -> set[str]:
    """Top-level functions and classes only ``coursekit/instructor`` defines (a name the
    release or a starter defines too is no pointer)."""
    defined = learner_function_names()
    for path in release.rglob("*.py"):
        defined |= defined_names(path.read_text())
    return _instructor_names() - defined


@functools.cache  # the repository's instructor code: the same for every scan of a run
def _instructor_names() -> frozenset[str]:
    """Names only an instructor module could point to: its top-level functions and
    classes of more than one word, less the keys it registers inspectors under."""
    names, registered = set(), set()
    for path in INSTRUCTOR.glob("*.py"):
        tree = ast.parse(path.read_text())
        # a name of more than one word (one word, "where", "bounds", is English)
        names |= {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))
                  and "_" in n.name.strip("_")}
        # an inspector or workload is named by its key ("sharded-training/timing_step")
        registered |= {k.value.rsplit("/", 1)[-1] for n in ast.walk(tree)
                       if isinstance(n, ast.Dict) for k in n.keys
                       if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return frozenset(names - registered)


# ---------------------------------------------------------------------------------------
# The rules
# ---------------------------------------------------------------------------------------

def code_findings(rel: str, path: Path, answers: dict) -> list[tuple[str, str, str]]:
    """(rule, what, sentence) for each function of ``path`` that is an answer."""
    found = []
    shipped = []
    for source in code_sources(path):
        tree = parsed(source)
        shipped += [(name, toks, code.runs(toks)) for name, toks in (
            (name, code.tokens(fn)) for name, fn in code.functions(tree))] if tree else []
    for answer, mine in answers.items():
        own = answer_runs(answer, mine)
        for name, theirs, theirs_runs in shipped:
            if len(mine) >= code.MIN_TOKENS and mine == theirs:
                why = "the same body"
            else:
                share = len(own & theirs_runs) / len(own) if len(own) >= code.MIN_RUNS else 0
                inside = (len(own & theirs_runs) / len(theirs_runs)
                          if len(theirs_runs) >= code.MIN_CHECKER_RUNS else 0)
                if share <= code.CONTAINED and inside <= code.CHECKER_CONTAINED:
                    continue
                why = f"{share:.2f} of the answer's runs, {inside:.2f} of its own"
            found.append(("code", f"{name} ~ {answer}",
                          f"{rel}: {name} is an answer ({answer}: {why})"))
    return found


def name_findings(rel: str, path: Path, names: set[str]) -> list[tuple[str, str, str]]:
    found = []
    for text in prose(path):
        for name in sorted(names):
            if re.search(rf"(?<![\w.]){re.escape(name)}\b", text) or re.search(
                    rf"\.{re.escape(name)}\b", text):
                found.append(("names", name, f"{rel}: prose names {name}, instructor-only "
                              "code"))
    return found


def hint_texts(path: Path) -> list[str]:
    """What a check of a ``.py`` file can print as a hint (``code.hints_of``)."""
    if path.suffix != ".py":
        return []
    try:
        return [text for _, text in code.hints_of(path.read_text())]
    except SyntaxError:
        return []


def method_findings(rel: str, path: Path) -> list[tuple[str, str, str]]:
    found = []
    for text in prose(path) + hint_texts(path):
        bare = pages.plain(text)
        found += [("method", m, f"{rel}: {m}") for m in pages.answer_material(text)]
        found += [("method", m, f"{rel}: a method in words: {m!r}") for m in METHODS
                  if pages.plain(m) in bare]
    return found


def reason_findings(rel: str, path: Path) -> list[tuple[str, str, str]]:
    """Rules of forbidden.py whose reason is not one of its fixed kinds."""
    if not rel.endswith("coursekit/checking/forbidden.py"):
        return []
    tree = ast.parse(path.read_text())
    kinds = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "WHY" for t in node.targets):
            kinds = {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "Rule":
            kind = node.args[3] if len(node.args) > 3 else next(
                (k.value for k in node.keywords if k.arg == "kind"), None)
            text = kind.value if isinstance(kind, ast.Constant) else None
            if isinstance(kind, (ast.Constant, ast.JoinedStr, ast.BinOp)) and text not in kinds:
                found.append(("reasons", f"line {node.lineno}",
                              f"{rel}:{node.lineno}: a rule's reason in free text"))
    return found


INTERVAL = re.compile(r"\[\s*[^\[\],]*\{\}[^\[\],]*,\s*[^\[\],]*\{\}[^\[\],]*\]")


def rendered(node: ast.AST) -> str:
    """A string or f-string with each formatted value as ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(rendered(v) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    if isinstance(node, ast.BinOp):
        return rendered(node.left) + rendered(node.right)
    return ""


def bracket_findings(rel: str, path: Path) -> list[tuple[str, str, str]]:
    found = []
    for source in code_sources(path) if path.suffix == ".py" else ():
        tree = parsed(source)
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.keyword) and node.arg in ("expected", "hint") \
                    and INTERVAL.search(rendered(node.value)):
                found.append(("bracket", f"line {node.value.lineno}",
                              f"{rel}:{node.value.lineno}: {node.arg}= shows an accepted "
                              f"interval ({rendered(node.value)[:60]!r})"))
    return found


def hint_findings(rel: str, path: Path, lines: set) -> list[tuple[str, str, str]]:
    if path.suffix != ".py":
        return []
    try:
        hints = code.hints_of(path.read_text())
    except SyntaxError:
        return []
    return [("hint-line", f"line {line}", f"{rel}:{line}: a hint holds a solution line "
             f"({text[:60]!r})") for line, text in hints if code.code_runs(text) & lines]


def scaffold_findings(rel: str, path: Path) -> list[tuple[str, str, str]]:
    """Notebook code cells holding a stage's scaffold (a solution region is stripped in
    the release, so what is left is shown to the learner)."""
    if path.suffix != ".ipynb":
        return []
    return [("scaffold", name, f"{rel}: a notebook cell holds {name}")
            for source in code_sources(path) for name, holds in SCAFFOLDS.items()
            if holds(source)]


def folder_findings(release: Path) -> list[tuple[str, str, str, str]]:
    """Instructor-only code or a solution folder in the release at all."""
    found = [("instructor", "coursekit/instructor", "", "coursekit/instructor: "
              "instructor-only code in the release")
             for p in (release / "coursekit" / "instructor",) if p.exists()]
    return found + [("instructor", p.relative_to(release).as_posix(), "",
                     f"{p.relative_to(release)}: a solution folder in the release")
                    for p in release.rglob("solution") if p.is_dir()]


# Files read as text (or data) by what ships them; any other file may be a program.
TEXT_SUFFIXES = frozenset((".py", ".md", ".ipynb", ".json", ".txt", ".toml", ".yml", ".yaml",
                           ".cfg", ".ini", ".sh", ".css", ".js", ".html", ".csv", ".svg",
                           ".png", ".gz", ".typed", ".in", ".sbatch", ".j2", ".lock"))
# Each candidate file is handed to jax.export.deserialize in a child process (bytes that are
# no program may make a native reader crash; the scan must not go with it).
_LOADABLE = """
import sys
from jax import export
for path in sys.argv[1:]:
    try:
        with open(path, "rb") as f:
            export.deserialize(bytearray(f.read()))
    except Exception:
        continue
    print(path)
"""


def loadable_programs(paths: list[Path]) -> list[Path]:
    """The files of ``paths`` that ``jax.export.deserialize`` loads."""
    if not paths:
        return []
    done = subprocess.run([sys.executable, "-c", _LOADABLE, *map(str, paths)],
                          capture_output=True, text=True, timeout=600)
    return [Path(line) for line in done.stdout.splitlines() if line.strip()]


def sealed_findings(release: Path, files: list[Path]) -> list[tuple[str, str, str, str]]:
    """A sealed program in the release: a file with a program's suffix, or any file
    outside the text kinds that ``jax.export`` loads."""
    from coursekit.protocol import SEALED_SUFFIX
    named = [p for p in files if p.name.endswith(SEALED_SUFFIX)]
    others = [p for p in files if p not in named and p.suffix.lower() not in TEXT_SUFFIXES
              and p.stat().st_size > 0]
    found = []
    for path in sorted(set(named) | set(loadable_programs(others))):
        rel = path.relative_to(release).as_posix()
        found.append(("sealed", rel, "a program", f"{rel}: a program jax.export can load "
                      "(a callable answer) in the release"))
    return found


@functools.cache
def solution_lines() -> frozenset:
    """Runs of every solution line of every project (the repository's: one per run)."""
    return frozenset(set().union(*(code.solution_line_runs(p) for p in code.PROJECTS)))


def raw(release: Path, files: list[Path] | None = None) -> list[tuple[str, str, str, str]]:
    """(rule, file, what, sentence) of every finding in the release (or in ``files``)."""
    release = Path(release)
    answers = answer_functions()
    names = instructor_only_names(release)
    lines = solution_lines()
    found = []
    if files is None:
        files = shipped_files(release)
        found += folder_findings(release)
        found += sealed_findings(release, [p for p in release.rglob("*") if p.is_file()
                                           and "__pycache__" not in p.parts])
    else:
        found += sealed_findings(release, files)
    for path in files:
        if path.suffix not in (".py", ".md", ".ipynb"):
            continue  # read as text by no rule above (a program is the sealed rule's)
        rel = path.relative_to(release).as_posix()
        found += [(rule, rel, what, sentence) for rule, what, sentence in (
            code_findings(rel, path, answers) + name_findings(rel, path, names)
            + method_findings(rel, path) + reason_findings(rel, path)
            + bracket_findings(rel, path) + hint_findings(rel, path, lines)
            + scaffold_findings(rel, path))]
    return found


def scan(release: Path, files: list[Path] | None = None) -> list[str]:
    """Every finding not in ``ALLOWED``, one sentence each."""
    return [sentence for rule, rel, what, sentence in raw(release, files)
            if (rule, rel, what) not in ALLOWED]

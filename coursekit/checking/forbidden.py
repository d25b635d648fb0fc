"""What a learner file may not import: the course's own code that a learner's answer may
not lean on, found by reading the file (``ast``; reading is not importing).

Per project, ``RULES`` lists ``Rule(module, name, stage, kind)``: ``name`` is an attribute
of ``module`` (``"*"``: the module itself and everything in it), ``kind`` says which of a
few fixed reasons refuses it (``WHY``: instructor-only code, the checker's code in the
learner process, the course's timer, ...; never what a stage's answer does), ``within``
(optional) limits the rule to one learner function and every function or module-level name
of the file it reaches (foundations: no autodiff *inside* ``regression_grads``; elsewhere
the file may use it). ``ALLOWED`` lists, per project, what the contract gives the learner
from the same modules, and why it stays allowed; a name in neither list is allowed. A
whole module refused at a stage less what ALLOWED gives from it (``unless``: the course's
timing module at a timing stage, less ``count_compiles``) refuses each of its other names
and whatever is added to it later. At every stage: the instructor's code, every checker's
learner-process code (``coursekit.workloads.remote_*``) and every checker's own module
(``projects/*/tests/*.py``, by its name: ``pallas_harness``, ``sharded_reference``, ...).

The scan follows the usual ways to reach a name: ``import m``, ``import m as a``,
``from m import n [as a]``, ``from m import *``, attribute chains through any of those
(``import coursekit.measure.timing as t; t.time_synced``), a module-level or local
assignment of one (``f = timing.time_synced``), ``importlib.import_module("m")``,
``__import__("m", fromlist=[...])``, ``sys.modules["m"]`` and ``getattr(x, "n")`` with
constant strings. A sealed reference program is refused by its route (``SEALED_ROUTE``):
every module that reads or runs serialised program bytes, the course functions that load
one, and any string in the file that names a program's file (``SEALED_FILE``). A name
built at run time (``getattr(m, "time" + "_synced")``) is out of reach of any reading:
the learner process keeps the course code these rules name out of the learner's code's
reach while it runs (``coursekit/checking/reach.py``); for third-party names a check
also observes what ran (foundations counts autodiff transforms in the learner process),
and the grader keeps every learner process from opening a sealed program's file in a
stage run (``autograder/guard.py``, ``autograder/answers.py``).

Notebook exercises have rules of the same form (``NOTEBOOK_RULES``: per notebook and
exercise, the course helpers that compute its answer, each ``within`` the exercise), read
by the same scanner over the notebook's cells (``coursekit/notebook/borrowed.py``); every
other exercise is in ``NOTEBOOK_NO_RULE`` with why nothing is refused.

A checker uses it in one of two ways:

    guard(checker)                       # in check.py, after the stage modules: every
                                         # check of each stage with rules refuses a file
                                         # that uses one, naming it and why
    scan(path, rules_for(project, stage, within="regression_grads"))
                                         # the findings, for a check of its own
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path

from coursekit.checking.errors import CheckFailed
from coursekit.protocol import SEALED_SUFFIX

# Why a name is refused, in a few fixed sentences: a rule names *what* is refused and
# which kind of thing it is, never what the stage's answer does (tests/test_release_scan.py
# holds every rule to these).
WHY = {
    "instructor": "instructor-only code (coursekit.instructor): a learner's copy does not "
                  "hold it, and the grader refuses it at every stage",
    "learner-process": "the checker's own code that runs in your learner process: it is "
                       "there for the checker, not for your answers",
    "timer": "the course's own timer: the timing this stage asks for is yours to write",
    "helper": "a course helper that does part of what this stage asks: write it yourself",
    "checker-reading": "the checker's own reading of your program: what your code reports "
                       "about itself must come from your own code",
    "library": "a library's version of what this stage asks you to write",
    "sealed": "a sealed reference program (the checkers' and the course's), or what reads "
              "or runs one: your results must come from your own code",
    "autodiff": "regression_grads is the gradient written by hand: JAX's autodiff would "
                "compute it for you",
    "checker": "the checker's own code (a file of a project's tests/ folder): it is there "
               "to check your answers, not to give them",
    "checker-data": "the checker's stored outputs and inputs (a file of a project's tests/ "
                    "folder): they are there to check your answers, not to give them",
    "exercise": "a course helper that computes what this notebook exercise asks: the "
                "exercise is to compute it yourself",
    "compiler": "the compiler's own count of a program: this exercise is to count it by hand",
    "residuals": "JAX's own count of what a backward pass keeps: this exercise is to count "
                 "it by hand",
}


@dataclass(frozen=True)
class Rule:
    module: str
    name: str          # an attribute of ``module``; "*": the module and all of it
    stage: int
    kind: str          # a key of ``WHY``
    within: str | None = None  # only inside this learner function and what it reaches
    unless: tuple[str, ...] = ()  # names of a whole module ("*") the contract gives

    @property
    def why(self) -> str:
        return WHY[self.kind]

    @property
    def qualified(self) -> str:
        return self.module if self.name == "*" else f"{self.module}.{self.name}"

    def matches(self, qualified: str) -> bool:
        if self.kind == "checker":  # by its name, or as tests.<name> from a project folder
            parts = qualified.split(".")
            return parts[0] == self.module or any(
                a == "tests" and b == self.module for a, b in zip(parts, parts[1:]))
        if self.name == "*" and self.unless:  # its names, less those; not the module
            return qualified.startswith(self.module + ".") and not any(
                (qualified + ".").startswith(f"{self.module}.{n}.") for n in self.unless)
        if self.name == "*":
            return qualified == self.module or qualified.startswith(self.module + ".")
        return qualified == self.qualified


@dataclass(frozen=True)
class Allowed:
    module: str
    name: str
    why: str


@dataclass(frozen=True)
class Finding:
    line: int
    text: str
    rule: Rule
    function: str | None = None
    file: str | None = None    # another handed-in file than the learner's model.py

    def __str__(self) -> str:
        where = f" (in {self.function})" if self.function else ""
        return f"{self.file + ' ' if self.file else ''}line {self.line}: {self.text}{where}"


_DECISION = "coursekit.measure.decision"
_TIMING = "coursekit.measure.timing"
_INSTRUCTOR = "coursekit.instructor"
_ROOT = Path(__file__).resolve().parents[2]
STAGES = {"foundations": 3, "performance-audit": 4, "optimisation": 4, "pallas-kernel": 3,
          "sharded-training": 4}
# The stages that ask the learner to write a timing loop: every timing loop of the course
# is refused there (TIMERS), so a learner's loop is theirs.
TIMING_STAGES = {"performance-audit": (1,), "pallas-kernel": (3,), "sharded-training": (4,),
                 "optimisation": (3, 4)}
# The course's timing loops a learner's code could import (a function that times with
# perf_counter and waits with block_until_ready; tests/test_forbidden_imports.py finds
# every one in coursekit/ and holds each to this list): a timing module whole (less what
# a project's ALLOWED gives from it), else the loop by name. The checker's learner-process
# loops (remote_course.time_workload, remote_optimisation's blocks) are refused
# everywhere with the rest of coursekit.workloads.remote_*.
TIMERS = ((_TIMING, "*"), (_DECISION, "measure_interleaved"),
          ("coursekit.notebook.chip_roofline", "*"),
          ("coursekit.commands.accelerator_roofline", "*"))
# The checker's files: every module of a project's tests/ folder (pallas_harness,
# sharded_reference, check, ...), refused by its module name wherever it is imported from.
CHECKER_FOLDERS = ("projects/*/tests",)


@functools.cache
def remote_modules() -> tuple[str, ...]:
    """Every ``coursekit.workloads.remote_*`` module: the checkers' own code that runs in
    the learner process (coursekit.workloads.inspectors loads it there), of every project."""
    return tuple(sorted(f"coursekit.workloads.{p.stem}" for p in
                        (_ROOT / "coursekit" / "workloads").glob("remote_*.py")))


@functools.cache
def checker_modules() -> dict[str, tuple[Path, ...]]:
    """The checkers' modules (``pallas_harness``, ...) -> their files in this copy."""
    found: dict[str, list[Path]] = {}
    for folder in CHECKER_FOLDERS:
        for path in sorted(_ROOT.glob(f"{folder}/*.py")):
            found.setdefault(path.stem, []).append(path)
    return {name: tuple(paths) for name, paths in found.items()}
_AUTODIFF = ("grad", "value_and_grad", "vjp", "jacrev", "jacfwd", "hessian", "jvp",
             "linearize")


# The route to a sealed program (coursekit.checking.sealed): its file, and what turns a
# program's bytes or text into something callable, whatever the name it is reached by. The
# checkers' programs (projects/*/tests/sealed/) replay stage answers. Every project's stages
# refuse it: none of their contracts reads a program. A name or path built at run time is
# out of reach of this reading: where the grader runs a stage, no learner process can open
# a sealed program's file at all (autograder/guard.py, autograder/answers.py).
SEALED_FILE = "<a sealed program's file>"   # a string in the file naming one (below)
SEALED_ROUTE = (
    ("jax.export", "*"), ("jax._src.export", "*"),                  # jax.export.deserialize
    ("jax.experimental.serialize_executable", "*"),                # compiled executables
    ("coursekit.checking.sealed", "*"), ("coursekit.authoring", "*"),
    ("coursekit.compat.jaxapi", "deserialize"), ("coursekit.compat.jaxapi", "exported"),
    ("coursekit.checking.programs", "rebuild"),                    # a program from its text
    (SEALED_FILE, "*"),
)
# The checkers' stored outputs for the public inputs (projects/*/tests/expected/): a
# learner's copy checks against them, so a file that reads them passes there as a lookup
# table. A string naming that folder is refused here; a path built at run time is the
# learner process's guard's (coursekit.checking.reach: no file of a checker's folder is
# opened by the learner's code).
CHECKER_DATA = "<a file of a checker's folder>"
STORED = "expected"  # projects/<p>/tests/expected/: the stored outputs of public inputs
_CHECKER_DATA_PATH = re.compile(r"tests[/\\]+expected([/\\]|$)")


DATA_HINT = ("compute it from the arguments your function is given: a file the checker "
             "keeps is not one of them, and its figures are for the public inputs only "
             "(graded inputs are others)")


def names_checker_data(value) -> bool:
    """Whether a string (or bytes) names the checkers' stored-output folder."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    return isinstance(value, str) and bool(_CHECKER_DATA_PATH.search(value.lower()))


# What a string names when it names a sealed program: the suffix, a program's own name
# (SEALED_FOLDERS' files), or a folder called sealed as a path part.
SEALED_FOLDERS = ("projects/*/tests/sealed",)


def _everywhere(project: str) -> tuple[Rule, ...]:
    """The instructor-only code, the checkers' learner-process code and files, and the
    route to a sealed program, at every stage."""
    return tuple(Rule(module, name, stage, kind) for stage in range(1, STAGES[project] + 1)
                 for module, name, kind in (
                     (_INSTRUCTOR, "*", "instructor"),
                     *((m, "*", "learner-process") for m in remote_modules()),
                     *((m, "*", "checker") for m in checker_modules()),
                     (CHECKER_DATA, "*", "checker-data"),
                     *((m, n, "sealed") for m, n in SEALED_ROUTE)))


def _timers(project: str) -> tuple[Rule, ...]:
    """Every course timing loop (TIMERS) at the project's timing stages; a whole module
    less what the project's ALLOWED gives from it."""
    return tuple(Rule(module, name, stage, "timer", unless=tuple(
        a.name for a in ALLOWED.get(project, ()) if a.module == module and name == "*"))
        for stage in TIMING_STAGES.get(project, ()) for module, name in TIMERS)


ALLOWED: dict[str, tuple[Allowed, ...]] = {
    "foundations": (
        Allowed("coursekit.workloads.classifier", "*", "the stage-3 workload: its loss, "
                "data and accuracy are the contract, not the exercise"),
        Allowed("jax", "grad", "outside regression_grads (train_classifier's gradient): "
                "the exercise is the hand-written gradient only"),
    ),
    "performance-audit": (
        Allowed(_TIMING, "count_compiles", "counting compile events with jax.monitoring is "
                "how time_fn's compile fields are defined, not what it is asked to measure"),
        Allowed("coursekit.measure.traces", "load_events", "reading a Chrome trace's JSON "
                "(gzip or not) is not the exercise"),
        Allowed(_DECISION, "t_quantile", "a Student-t quantile is a table look-up "
                "(scipy.stats.t.ppf does the same)"),
        Allowed(_DECISION, "simulate_pair", "makes test records; decides nothing"),
    ),
    "optimisation": (
        Allowed("coursekit.measure.traces", "load_events", "the contract gives it: reading "
                "the trace file is not the breakdown"),
        Allowed(_TIMING, "count_compiles", "write_run_records' contract names it for the "
                "compile fields"),
        Allowed("coursekit.provenance.records", "make_run_record", "the record format the "
                "contract asks for"),
        Allowed("coursekit.workloads.slow_step", "*", "the workload to trace, fix and "
                "measure: its contract"),
    ),
    "pallas-kernel": (
        Allowed(_TIMING, "count_compiles", "sweep's compile fields are defined by it"),
    ),
    "sharded-training": (
        Allowed(_TIMING, "count_compiles", "the compile fields of the run records"),
        Allowed("coursekit.provenance.records", "make_run_record", "the record format the "
                "contract asks for"),
        Allowed("coursekit.workloads.classifier", "*", "the model and loss being trained: "
                "the contract"),
    ),
}


RULES: dict[str, tuple[Rule, ...]] = {
    "foundations": tuple(
        Rule("jax", name, 2, "autodiff", within="regression_grads") for name in _AUTODIFF)
    + _everywhere("foundations"),
    "performance-audit": (
        Rule("coursekit.measure.peak_memory", "memory_fields", 3, "helper"),
        # what memory_fields wraps
        Rule("coursekit.compat.compiled_plan", "memory_plan", 3, "helper"),
        # cost_from_compiler's answer (a second reader, 2026-12-06), and stage 3's device
        # peak reading on an accelerator
        Rule("coursekit.compat.compiled_plan", "compiled_cost", 2, "helper"),
        Rule("coursekit.measure.device_peak", "measured_run", 3, "helper"),
        Rule("coursekit.measure.device_peak", "run_reading", 3, "helper"),
        Rule("coursekit.measure.collectives", "_median_interval", 4, "helper"),
        Rule("coursekit.measure.verdict", "interval_of", 4, "helper"),
        # it calls interval_of
        Rule("coursekit.measure.verdict", "measure_ratio", 4, "helper"),
    ) + _timers("performance-audit") + _everywhere("performance-audit"),
    "optimisation": _timers("optimisation") + _everywhere("optimisation"),
    "pallas-kernel": (
        Rule("coursekit.measure.pallas_inspect", "lowered_mode", 2, "checker-reading"),
        Rule("coursekit.measure.pallas_inspect", "inspect_pallas", 2, "checker-reading"),
        Rule("scipy.special", "*", 1, "library"),
    ) + _timers("pallas-kernel") + _everywhere("pallas-kernel"),
    "sharded-training": _timers("sharded-training") + _everywhere("sharded-training"),
}

# Notebook exercises (a function or value a learner writes in a solution region of
# notebooks/src/<notebook>.py): per notebook and exercise, the course's code that computes
# its answer, each rule ``within`` the exercise (what it reaches in the notebook's cells
# counts too; ``coursekit/notebook/borrowed.py`` reads them) and at stage 0 (a notebook
# exercise belongs to no stage). NOTEBOOK_CELLS names what the notebook's own course cells
# define (a function, or an attribute of a name they bind: ``impl.cost_from_compiler``).
# Every other exercise is in NOTEBOOK_NO_RULE with why nothing is refused
# (tests/test_notebook_borrowed.py holds every solution region to one of the two).
NOTEBOOK_CELLS = "__notebook__"
NOTEBOOK_RULES: dict[str, dict[str, tuple[Rule, ...]]] = {
    "02_trace_reading": {
        "covered_us": (
            Rule("coursekit.measure.device_trace", "union_ns", 0, "exercise",
                 within="covered_us"),
        ),
    },
    "03_roofline": {
        "elementwise_cost_by_hand": (
            Rule("coursekit.compat.compiled_plan", "compiled_cost", 0, "exercise",
                 within="elementwise_cost_by_hand"),
            Rule("coursekit.compat.compiled_plan", "lowered_cost", 0, "exercise",
                 within="elementwise_cost_by_hand"),
            # the compiled plan's cost_analysis() is reached through a program jax.jit made
            Rule("jax", "jit", 0, "compiler", within="elementwise_cost_by_hand"),
            # the learner's own stage-2 reading of it, which the notebook loads as impl
            Rule(NOTEBOOK_CELLS, "impl.cost_from_compiler", 0, "compiler",
                 within="elementwise_cost_by_hand"),
        ),
    },
    "04_remat": {
        "remat_floor_bytes": (
            # the learner's own stage-3 count, which the notebook loads as impl, and the
            # autodiff call it (and the test's comment) counts with
            Rule(NOTEBOOK_CELLS, "impl.saved_residual_bytes", 0, "residuals",
                 within="remat_floor_bytes"),
            Rule("jax", "vjp", 0, "residuals", within="remat_floor_bytes"),
        ),
    },
    "05_sharding_and_recovery": {
        "fixed_grads": (
            # the notebook's one-device reference: "what every correct sharded version
            # equals", and the function that hands it the mesh's arguments
            Rule(NOTEBOOK_CELLS, "reference_grads", 0, "exercise", within="fixed_grads"),
            Rule(NOTEBOOK_CELLS, "one_device_grads", 0, "exercise", within="fixed_grads"),
        ),
    },
}


_GUESS = "a prediction written before the measurement: nothing computes it"
NOTEBOOK_NO_RULE: dict[str, dict[str, str]] = {
    "00_foundations": {
        "PREDICTED_FD32_ERROR": _GUESS,
        "step_keys": "jax.random.split is the means; no course code returns a loop's "
                     "subkeys",
    },
    "01_async_timing": {
        "summarize_samples": "np.percentile is what the exercise names; no course code "
                             "returns the summary",
        "PREDICTED_UNSYNCED_FACTOR": _GUESS,
    },
    "02_trace_reading": {"PREDICTED_OP_COVERAGE": _GUESS},
    "03_roofline": {"PREDICTED_STEP_SPEEDUP": _GUESS},
    "04_remat": {
        "PREDICTED_SAVING_BLOCKS_PCT": _GUESS, "PREDICTED_SAVING_TANH_PCT": _GUESS,
    },
    "05_sharding_and_recovery": {
        "PREDICTED_MAX_DIFF": _GUESS,
        "shard_map_grads": "no course code takes a per-shard rule and returns its harness",
    },
    "06_pallas": {
        "PREDICTED_TIME_FACTOR": _GUESS,
        "fixed_kernel": "no course kernel masks a block's padded columns",
        "CORRECTNESS": "read from the notebook's own check cell, as the exercise asks",
        "SPEED_CLAIM": "a decision from the measurements shown above it",
    },
    "07_optimisation": {
        "ceiling": "no course code gives Amdahl's bound (claims.amdahl_ceiling_claim takes "
                   "the ceiling as its input)",
        "PREDICTED_CROSSOVER": _GUESS, "PREDICTED_SPEEDUP_4X_STEPS": _GUESS,
    },
    "08_readiness_review": {
        "PREDICTED_ONE_DEVICE_SPEEDUP": _GUESS,
        "timing_evidence": "provenance.records.validate_run_record refuses a record that "
                           "lacks any field of the format: it cannot give the four verdicts "
                           "of a partial one",
    },
}


def notebook_rules(notebook: str, exercise: str | None = None) -> tuple[Rule, ...]:
    """The rules of a notebook (its file's stem, ``02_trace_reading``), of one exercise
    when given."""
    exercises = NOTEBOOK_RULES.get(notebook, {})
    return tuple(r for name, rules in exercises.items() if exercise in (None, name)
                 for r in rules)


def rules_for(project: str, stage: int | None = None, *, within: str | None = None
              ) -> tuple[Rule, ...]:
    """The project's rules (of ``stage`` when given), those limited to ``within``
    when given, else those for the whole file."""
    return tuple(r for r in RULES.get(project, ())
                 if (stage is None or r.stage == stage) and r.within == within)


# ---------------------------------------------------------------------------------------
# Reading a file
# ---------------------------------------------------------------------------------------

_IMPORTERS = ("importlib.import_module", "__import__")


class _Names:
    """Local names bound to modules and objects (``name -> "pkg.mod.obj"``)."""

    def __init__(self, tree: ast.AST | None = None) -> None:
        self.bound: dict[str, str] = {}
        # docstrings are prose, not strings the program uses
        self.docstrings = {id(n.body[0].value) for n in ast.walk(tree) if isinstance(
            n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.body and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)} if tree is not None else set()

    def resolve(self, node: ast.AST) -> str | None:
        """The dotted name ``node`` stands for, when a reading can tell."""
        if isinstance(node, ast.Name):
            if node.id in self.bound:
                return self.bound[node.id]
            return node.id if node.id in ("__import__", "getattr") else None
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if isinstance(node, ast.Subscript):
            key = node.slice
            if self.resolve(node.value) == "sys.modules" and _text(key):
                return _text(key)
            return None
        if isinstance(node, ast.Call):
            func = self.resolve(node.func)
            first = _text(node.args[0]) if node.args else None
            if func == "importlib.import_module" and first:
                return first
            if func == "__import__" and first:
                fromlist = [k for k in node.keywords if k.arg == "fromlist"]
                return first if (fromlist or len(node.args) >= 4) else first.split(".")[0]
            if func == "getattr" and len(node.args) >= 2 and _text(node.args[1]):
                base = self.resolve(node.args[0])
                return f"{base}.{_text(node.args[1])}" if base else None
        return None

    def bind(self, node: ast.AST) -> None:
        """Record the names an import or a plain assignment binds."""
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.bound[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    self.bound[top] = top
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            for alias in node.names:
                if alias.name != "*":
                    self.bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value = self.resolve(node.value)
            if value:
                for target in targets:
                    if isinstance(target, ast.Name):
                        self.bound[target.id] = value


def _text(node) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) \
        else None


@functools.cache
def sealed_names() -> frozenset[str]:
    """The names of the sealed programs this copy holds (``train_replay``, ...)."""
    return frozenset(p.name[:-len(SEALED_SUFFIX)] for folder in SEALED_FOLDERS
                     for p in _ROOT.glob(f"{folder}/*{SEALED_SUFFIX}"))


def names_sealed_file(value) -> bool:
    """Whether a string (or bytes) names a sealed program's file: its suffix, one of the
    programs' names, or a folder called ``sealed`` as a part of a path."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if not isinstance(value, str):
        return False
    low = value.lower()
    if SEALED_SUFFIX[1:] in low or re.search(r"(^|[/\\])sealed([/\\]|$)", low):
        return True
    return any(re.search(rf"(?<![A-Za-z0-9]){re.escape(n)}(?![A-Za-z0-9])", low)
               for n in sealed_names())


def _hits(node: ast.AST, names: _Names, rules: tuple[Rule, ...]) -> list[tuple[str, Rule]]:
    """(text, rule) for each rule ``node`` itself breaks."""
    found = []
    if isinstance(node, ast.ImportFrom) and not node.level and node.module:
        for alias in node.names:
            if alias.name == "*":
                found += [(ast.unparse(node), r) for r in rules
                          if r.module == node.module or r.matches(node.module)]
            else:
                found += [(ast.unparse(node), r) for r in rules
                          if r.matches(f"{node.module}.{alias.name}")]
    elif isinstance(node, ast.Import):
        found += [(ast.unparse(node), r) for alias in node.names for r in rules
                  if r.name == "*" and r.matches(alias.name)]
    elif isinstance(node, ast.Constant) and names_sealed_file(node.value) \
            and id(node) not in names.docstrings:
        found += [(repr(node.value)[:80], r) for r in rules if r.matches(SEALED_FILE)]
    elif isinstance(node, ast.Constant) and names_checker_data(node.value) \
            and id(node) not in names.docstrings:
        found += [(repr(node.value)[:80], r) for r in rules if r.matches(CHECKER_DATA)]
    elif isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Name)):
        what = names.resolve(node)
        if what:
            text = f"{node.id} = {what}" if isinstance(node, ast.Name) else ast.unparse(node)
            found += [(text, r) for r in rules if r.matches(what)]
        if isinstance(node, ast.Call) and names.resolve(node.func) == "__import__" \
                and node.args and _text(node.args[0]):
            for keyword in node.keywords:
                if keyword.arg == "fromlist" and isinstance(keyword.value, (ast.List, ast.Tuple)):
                    for element in keyword.value.elts:
                        qualified = f"{_text(node.args[0])}.{_text(element)}"
                        found += [(ast.unparse(node), r) for r in rules
                                  if _text(element) and r.matches(qualified)]
    return found


def _module_defs(tree: ast.Module) -> dict[str, ast.AST]:
    defs: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defs.setdefault(name.id, node)
    return defs


def scan(source: str | Path, rules: tuple[Rule, ...] | list[Rule]) -> list[Finding]:
    """Where the file (a path, or its text) uses what ``rules`` forbid, in line order.
    A rule with ``within`` counts only inside that function and what it reaches; an
    unreadable file has no findings (the checks report it)."""
    rules = tuple(rules)
    try:
        # A file's bytes, as Python reads them: its coding line honoured (a file that
        # declares utf-7 hides an import after "+AAo-" from a reader that assumes UTF-8)
        tree = ast.parse(source.read_bytes() if isinstance(source, Path) else str(source))
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return []
    found: dict[tuple[int, str], tuple] = {}
    for root in sorted({r.within for r in rules}, key=str):
        group = tuple(r for r in rules if r.within == root)
        for function, nodes in _regions(tree, root):
            names = _Names(tree)
            for _ in range(2):  # twice: an assignment may name what a later one binds
                for node in (*tree.body, *nodes):
                    names.bind(node)
            for node in nodes:
                for what, rule in _hits(node, names, group):
                    # one finding a line and rule: the use itself rather than a name
                    # bound to it, the outermost expression rather than a part of it
                    key = (node.lineno, rule.qualified)
                    rank = (not isinstance(node, ast.Name), len(what))
                    if key not in found or rank > found[key][0]:
                        found[key] = (rank, Finding(node.lineno, what, rule, function))
    return sorted((f for _, f in found.values()), key=lambda f: (f.line, f.text))


def _regions(tree: ast.Module, root: str | None):
    """(function name or None, the nodes to read) for a whole file or for ``root`` and
    every module-level function and name it reaches."""
    if root is None:
        yield None, [n for n in ast.walk(tree) if hasattr(n, "lineno")]
        return
    defs, seen, todo = _module_defs(tree), set(), [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen.add(name)
        nodes = [n for n in ast.walk(defs[name]) if hasattr(n, "lineno")]
        todo += [n.id for n in nodes if isinstance(n, ast.Name) and n.id in defs]
        yield name, nodes


# ---------------------------------------------------------------------------------------
# In a checker
# ---------------------------------------------------------------------------------------

MAX_HANDED_IN = 200  # Python files read beside a starter's model.py


def handed_in(path: str | Path) -> list[Path]:
    """The learner's file and, in a starter folder (``projects/<p>/starter/``, where the
    grader copies every handed-in ``.py``), every other Python file below it: a file
    beside ``model.py`` that it loads (``importlib``, ``sys.path``) runs in the learner
    process too, so it is read by the same rules."""
    path = Path(path)
    if path.parent.name != "starter":
        return [path]
    others = sorted(p for p in path.parent.rglob("*.py")
                    if p != path and "__pycache__" not in p.parts)
    return [path, *others[:MAX_HANDED_IN]]


def scan_handed_in(path: str | Path, rules: tuple[Rule, ...]) -> list[Finding]:
    """``scan`` over ``handed_in(path)``: a finding in another file names that file."""
    files = handed_in(path)
    found = list(scan(files[0], rules))
    for other in files[1:]:
        name = other.relative_to(files[0].parent).as_posix()
        found += [dataclasses.replace(f, file=name) for f in scan(other, rules)]
    return found


def refuse(path: str | Path, rules: tuple[Rule, ...], stage: int) -> None:
    """Raise ``CheckFailed`` naming each forbidden use in the learner's files (the file
    and every Python file handed in beside it), and why."""
    found = scan_handed_in(path, rules)
    if not found:
        return
    names = sorted({f.rule.qualified for f in found})
    why = "; ".join(f"{r.qualified}: {r.why}" for r in
                    sorted({f.rule for f in found}, key=lambda r: r.qualified))
    uses = "files use" if any(f.file for f in found) else "file uses"
    yours = list(dict.fromkeys(map(str, found)))[:5]
    if all(f.rule.kind == "checker-data" for f in found):
        raise CheckFailed(
            f"your {uses} the checker's stored outputs ({', '.join(names)})", yours=yours,
            expected="your own code for it", hint=f"{DATA_HINT}; {why}")
    raise CheckFailed(
        f"your {uses} the course's own implementation of what stage {stage} asks you to "
        f"write ({', '.join(names)})", yours=yours,
        expected="your own code for it",
        hint=f"write it yourself; {why}. What the contract gives you (see "
             "coursekit/checking/forbidden.py, ALLOWED) stays allowed")


_SCANNED: dict = {}  # (stage, rules, the files' state) -> the refusal, or None


def _refuse_once(path, rules: tuple[Rule, ...], stage: int) -> None:
    """``refuse``, its scan read once per state of the handed-in files (every check of a
    stage asks; the files do not change between checks of one run)."""
    files = handed_in(path)
    key = (stage, rules, tuple((str(f), f.stat().st_mtime_ns, f.stat().st_size)
                               for f in files if f.exists()))
    if key not in _SCANNED:
        try:
            refuse(path, rules, stage)
            _SCANNED[key] = None
        except CheckFailed as err:
            _SCANNED[key] = err
    if _SCANNED[key] is not None:
        raise _SCANNED[key]


def guard(checker, rules: tuple[Rule, ...] | None = None) -> None:
    """Make every check of each stage with whole-file rules refuse a learner file that
    uses one (before the check's own work): each check is graded on its own, so a refusal
    at the stage's first check alone would leave the others' points to the file. Call once
    the stages are registered; calling again changes nothing."""
    rules = rules_for(checker.project) if rules is None else tuple(rules)
    for stage in sorted({r.stage for r in rules if r.within is None}):
        stage_rules = tuple(r for r in rules if r.stage == stage and r.within is None)
        for chk in (c for c in checker.checks if c.stage == stage):
            if getattr(chk.fn, "forbidden_guard", False):
                continue

            def guarded(impl, ctx, _check=chk.fn, _rules=stage_rules, _stage=stage):
                _refuse_once(ctx.impl_path, _rules, _stage)
                return _check(impl, ctx)
            guarded.forbidden_guard = True
            guarded.__doc__ = chk.fn.__doc__
            chk.fn = guarded

"""Every graded test cell of every course notebook compares plain data (issue 27: an
answer returning a ``float`` subclass whose ``__eq__`` always says True passed notebook
02's test; a cell that patched ``jax.stages.Compiled.cost_analysis``, which notebook 03's
hidden test used for its expected value, passed that one).

The rules hold on both routes a test cell runs: in a notebook (JupyterLab, papermill,
plain nbgrader), where every earlier cell shares its interpreter, and in the grader's
test process (issue 45), where library calls are the test process's own and only what
is read from the learner's notebook (its values, its functions, the course's notebook
names) could be the learner's: a value arrives as data, and a call of a notebook name
runs in the learner's process.

A static reading of each graded, locked code cell of ``notebooks/src/NN_*.py`` (visible
and hidden part), in order, statement by statement:

* **plain comparisons**: an operand of ``==``, ``<``, ``in``... (and an argument of
  ``np.allclose``/``np.isclose``/``np.testing.*``/``math.isclose``, and what ``assert`` or
  ``if`` takes the truth of) may not be a learner value (a learner-defined name, a call to
  one, anything computed from them) unless the cell made it plain first: ``float()``,
  ``int()``, ``bool()``, ``len()``, ``np.asarray(..., dtype=...)``, or an ``assert type(x)
  is T`` (``T`` one of int, float, bool, str; ``dict``/``list``/``tuple`` make the container
  plain for ``in`` and ``len``, its items stay learner values). ``isinstance`` on a learner
  value is refused (a subclass passes it); identity (``is``) is plain by nature. A learner
  value the cell reads (a prediction, a decision) is type-checked somewhere in the cell.
* **expected values from constants or the cell's own code**: every call goes to a builtin
  of ``SAFE_BUILTINS``, a learner function, a function the cell defines, or a method of a
  value; a call to a library (a module the notebook or the cell imports) or to a name the
  notebook's own cells define (which a learner cell can rebind) is refused unless
  ``ALLOWED`` names it with its reason; so is a notebook name compared against.

Learner names are those bound in solution cells, and names the course's cells assign from
them (``impl = load_learner(...)``, ``summary = impl.summarize(...)``).
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import nbformat
import pytest

from coursekit.authoring import nbbuild
from coursekit.facts import ROOT

SOURCES = sorted((ROOT / "notebooks" / "src").glob("[0-9][0-9]_*.py"))
PLAIN_TYPES = {"int", "float", "bool", "str"}
CONTAINER_TYPES = {"dict", "list", "tuple"}
SAFE_BUILTINS = {"abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "isinstance",
                 "len", "list", "map", "max", "min", "print", "range", "repr", "round", "set",
                 "sorted", "str", "sum", "tuple", "type", "zip"}
CONVERTERS = {"float", "int", "bool", "len", "type"}   # always return an exact built-in type
ARRAY_CONVERTERS = {"numpy.asarray", "numpy.array"}    # with a dtype= that is not object
COMPARE_CALLS = {"numpy.allclose", "numpy.isclose", "numpy.array_equal", "math.isclose"}

_RECORD = ("stores the prediction for the cell that compares it with the measurement; the "
           "grade rests on the cell's own type check, not on this call")
_KERNEL = ("runs the learner's kernel in one padded block (a kernel body is not a function "
           "that returns a value): graded, the program the learner's process exported, read "
           "and run in the test process (coursekit.notebook.kernels)")
_REFERENCE = ("the float64 reference's nonlinearity: a NumPy ufunc on arrays the test built; "
              "the shapes follow inputs too large to write out as constants")
_GRADED = ("the stage's result as the grader graded this learner file (the check cells' "
           "record), or its checker run again where it was not graded: never a value the "
           "notebook holds")
_BORROWED = ("reads the notebook's cells for the course helper that computes the exercise "
             "(coursekit.notebook.borrowed) and raises naming it: it can fail a test, never "
             "pass one, and compares nothing of the learner's")
# (notebook, grade_id) -> {callee or notebook name: why the test may use it}. A library
# call runs in the grader's test process, which imports the library itself (course
# imports, or the cell's own) and never runs learner code; a notebook name is read from
# the learner's process, where an earlier cell can rebind it, so each says why that
# cannot raise a score.
ALLOWED = {
    **{(nb, gid): {"coursekit.notebook.cells.record_prediction": _RECORD} for nb, gid in (
        ("00_foundations", "prediction_fd32_present"),
        ("01_async_timing", "prediction_unsynced_2n_present"),
        ("02_trace_reading", "prediction_op_coverage_present"),
        ("03_roofline", "prediction_step_speedup_present"),
        ("04_remat", "prediction_remat_savings_present"),
        ("05_sharding_and_recovery", "prediction_four_devices_present"),
        ("06_pallas", "prediction_small_blocks_present"),
        ("07_optimisation", "prediction_crossover_opt_present"),
        ("07_optimisation", "prediction_more_steps_opt_present"),
        ("08_readiness_review", "prediction_one_device_present"))},
    ("02_trace_reading", "covered_us_tests"): {
        "coursekit.notebook.borrowed.refuse_borrowed": _BORROWED},
    ("03_roofline", "elementwise_cost_by_hand_tests"): {
        "coursekit.notebook.borrowed.refuse_borrowed": _BORROWED},
    ("04_remat", "remat_floor_bytes_tests"): {
        "coursekit.notebook.borrowed.refuse_borrowed": _BORROWED},
    ("00_foundations", "step_keys_tests"): {
        "jax.random.key": "makes the key the learner's function takes (an input)",
        "jax.random.key_data": "the public way to read a typed PRNG key's bits: it reads the "
                               "learner's keys, which np.asarray(dtype=uint32) and int() then "
                               "make plain; the expected bits are constants"},
    ("05_sharding_and_recovery", "fixed_grads_tests"): {
        "coursekit.notebook.borrowed.refuse_borrowed": _BORROWED,
        "coursekit.workloads.classifier.make_dataset": "draws the test's own batch (an input)",
        "coursekit.workloads.classifier.init_params": "the test's own initial parameters",
        "jax.random.key": "the keys of the test's own data and parameters",
        "numpy.tanh": _REFERENCE, "numpy.exp": _REFERENCE,
        "on_mesh": "places the test's batch on the notebook's mesh as the learner's input "
                   "(in the learner's process); the reference is computed from the test's "
                   "own host batch, so a rebound on_mesh only changes the learner's input"},
    ("06_pallas", "fixed_kernel_tests"): {
        "coursekit.notebook.kernels.one_block_output": _KERNEL,
        "jax.numpy.asarray": "puts the test's own input on the device for the kernel",
        "numpy.random.default_rng": "draws the test's own inputs"},
    ("06_pallas", "decision_06_backed_by_evidence"): {
        "coursekit.notebook.cells.run_check": _GRADED,
        "IMPL": "the file whose stages the notebook's check cells show, taken as a plain str "
                "(its type checked): the decision is held to that file's graded stages, so "
                "pointing it elsewhere only changes which file's checks must pass"},
}

RAW, CONTAINER, PLAIN = "learner value", "learner container", "plain"


def _worst(*kinds: str) -> str:
    return RAW if RAW in kinds or CONTAINER in kinds else PLAIN


def bound_names(stmts) -> set[str]:
    """Names a cell binds at its top level (not inside function or class bodies)."""
    out: set[str] = set()
    for node in _top_level(stmts):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
    return out


def _top_level(stmts):
    for stmt in stmts:
        yield stmt
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef):
            continue
        for child in ast.iter_child_nodes(stmt):
            if isinstance(child, ast.stmt):
                yield from _top_level([child])
            else:
                yield from (n for n in ast.walk(child) if not isinstance(n, ast.Lambda))


def imports(tree) -> dict[str, str]:
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                bound[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                bound[a.asname or a.name] = f"{node.module}.{a.name}"
    return bound


class Notebook:
    """What a test cell's names mean in one source notebook."""

    def __init__(self, nb):
        self.learner: set[str] = set()
        self.learner_defs: set[str] = set()  # functions and classes a solution cell defines
        self.modules: dict[str, str] = {}
        self.names: set[str] = set()      # bound by the course's own (non-test) cells
        self.tests: list[tuple[str, str]] = []
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code":
                continue
            tree = ast.parse(cell.source)
            if meta.get("solution"):
                self.learner |= bound_names(tree.body)
                self.learner_defs |= {n.name for n in _top_level(tree.body)
                                      if isinstance(n, ast.FunctionDef | ast.ClassDef)}
            elif meta.get("grade") and meta.get("locked"):
                self.tests.append((meta["grade_id"], cell.source))
            else:
                self.modules.update(imports(tree))
                self._course_cell(tree.body)

    def _course_cell(self, stmts) -> None:
        for node in _top_level(stmts):
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.For
                          | ast.withitem):
                value = getattr(node, "value", None) or getattr(node, "iter", None) or \
                    getattr(node, "context_expr", None)
                targets = [getattr(node, "target", None) or getattr(node, "optional_vars", None),
                           *getattr(node, "targets", [])]
                names = {n.id for t in targets if t is not None for n in ast.walk(t)
                         if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
                if value is not None and self._from_learner(value):
                    self.learner |= names
                else:
                    self.names |= names - self.learner
            elif isinstance(node, ast.FunctionDef | ast.ClassDef):
                self.names.add(node.name)

    def _from_learner(self, expr) -> bool:
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and (n.id in self.learner or n.id == "load_learner"):
                return True
        return False


def dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


class CellCheck:
    """One graded test cell, read statement by statement."""

    def __init__(self, stem: str, gid: str, source: str, nb: Notebook):
        self.stem, self.gid, self.nb = stem, gid, nb
        self.tree = ast.parse(source)
        self.own_imports = imports(self.tree)
        self.modules = {**nb.modules, **self.own_imports}
        self.local = bound_names(self.tree.body)
        self.defs = {n.name: n for n in _top_level(self.tree.body)
                     if isinstance(n, ast.FunctionDef)}
        self.allowed = ALLOWED.get((stem, gid), {})
        self.used: set[str] = set()
        self.problems: list[str] = []
        self.type_checked: set[str] = set()
        self.learner_read: set[str] = set()
        self.analysed: dict = {}

    # -- what names are -------------------------------------------------------------
    def category(self, name: str, state: dict) -> str:
        if name in state:
            return "local"
        if name in self.modules and (name in self.own_imports or name not in self.local):
            return "library"
        if name in self.nb.learner and name not in self.local:
            return "learner"
        if name in self.defs:
            return "def"
        if name in self.local:
            return "local"
        if name in self.nb.names:
            return "notebook"
        if hasattr(builtins, name):
            return "builtin"
        return "unknown"

    def library_name(self, name: str) -> str | None:
        root, _, rest = name.partition(".")
        if root not in self.modules:
            return None
        return self.modules[root] + (f".{rest}" if rest else "")

    def problem(self, node, text: str) -> None:
        self.problems.append(f"{self.stem} {self.gid} line {getattr(node, 'lineno', '?')}: "
                             f"{text}")

    def permit(self, node, what: str, text: str) -> None:
        if what in self.allowed:
            self.used.add(what)
        else:
            self.problem(node, text)

    # -- kinds ------------------------------------------------------------------------
    def kind(self, e, state: dict) -> str:  # noqa: C901 - one case per node type
        if e is None or isinstance(e, ast.Constant | ast.JoinedStr | ast.Lambda):
            return PLAIN
        if isinstance(e, ast.Name):
            cat = self.category(e.id, state)
            if cat == "local":
                return state.get(e.id, PLAIN)
            if cat == "learner":
                self.learner_read.add(e.id)
                return RAW
            return PLAIN
        if isinstance(e, ast.Call):
            return self.call_kind(e, state)
        if isinstance(e, ast.Attribute | ast.Subscript):
            return _worst(self.kind(e.value, state))
        if isinstance(e, ast.Starred | ast.NamedExpr):
            return self.kind(e.value, state)
        if isinstance(e, ast.BinOp):
            return _worst(self.kind(e.left, state), self.kind(e.right, state))
        if isinstance(e, ast.UnaryOp):
            return _worst(self.kind(e.operand, state))
        if isinstance(e, ast.BoolOp):
            return _worst(*(self.kind(v, state) for v in e.values))
        if isinstance(e, ast.Compare):
            if all(isinstance(op, ast.Is | ast.IsNot) for op in e.ops):
                return PLAIN
            return _worst(*(self.kind(v, state) for v in [e.left, *e.comparators]))
        if isinstance(e, ast.IfExp):
            return _worst(self.kind(e.body, state), self.kind(e.orelse, state))
        if isinstance(e, ast.List | ast.Tuple | ast.Set):
            return _worst(PLAIN, *(self.kind(v, state) for v in e.elts))
        if isinstance(e, ast.Dict):
            return _worst(PLAIN, *(self.kind(v, state) for v in [*e.keys, *e.values] if v))
        if isinstance(e, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            inner = dict(state)
            for gen in e.generators:
                self.bind(gen.target, _worst(self.kind(gen.iter, inner)), inner)
            elts = [e.key, e.value] if isinstance(e, ast.DictComp) else [e.elt]
            return _worst(*(self.kind(v, inner) for v in elts))
        return RAW  # anything unforeseen is not trusted

    def call_kind(self, e: ast.Call, state: dict) -> str:
        args = [*e.args, *(k.value for k in e.keywords)]
        arg_kinds = [self.kind(a, state) for a in args]
        name = dotted(e.func)
        if isinstance(e.func, ast.Name):
            cat = self.category(e.func.id, state)
            if cat == "builtin" and e.func.id in CONVERTERS:
                return PLAIN
            if cat == "learner":
                return RAW
            if cat == "def":
                return self.call_def(e, state)
        if name and self.library_name(name) in ARRAY_CONVERTERS:
            dtype = [k.value for k in e.keywords if k.arg == "dtype"]
            if dtype and not (isinstance(dtype[0], ast.Name) and dtype[0].id == "object"):
                return PLAIN
        if name and self.category(name.split(".")[0], state) == "learner":
            return RAW  # a method of a learner object (impl.summarize(...))
        if isinstance(e.func, ast.Attribute) and self.kind(e.func.value, state) != PLAIN:
            return RAW  # a method of a learner value
        return _worst(PLAIN, *arg_kinds)

    def call_def(self, e: ast.Call, state: dict) -> str:
        fdef = self.defs[e.func.id]
        params = [a.arg for a in fdef.args.args]
        kinds = dict.fromkeys(params, PLAIN)
        for p, a in zip(params, e.args):
            kinds[p] = self.kind(a, state)
        for k in e.keywords:
            kinds[k.arg] = self.kind(k.value, state)
        signature = (fdef.name, tuple(sorted(kinds.items())))
        if signature not in self.analysed:
            self.analysed[signature] = PLAIN  # a recursive call sees plain
            inner = {**{n: v for n, v in state.items() if n not in kinds}, **kinds}
            returns: list[str] = []
            self.block(fdef.body, inner, returns)
            self.analysed[signature] = _worst(PLAIN, *returns)
        return self.analysed[signature]

    # -- statements -------------------------------------------------------------------
    def bind(self, target, kind: str, state: dict, value=None) -> None:
        if isinstance(target, ast.Name):
            state[target.id] = kind
        elif isinstance(target, ast.Tuple | ast.List):
            values = value.elts if isinstance(value, ast.Tuple | ast.List) and \
                len(value.elts) == len(target.elts) else [None] * len(target.elts)
            for t, v in zip(target.elts, values):
                self.bind(t, kind if v is None else self.kind(v, state), state, v)
        elif isinstance(target, ast.Subscript | ast.Attribute) and kind != PLAIN:
            base = target.value
            while isinstance(base, ast.Subscript | ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                state[base.id] = RAW  # a container now holding a learner value

    def facts(self, test, state: dict) -> None:
        """``type(x) is T`` conjuncts (or an ``or`` of them for one name) make x plain."""
        conjuncts = test.values if isinstance(test, ast.BoolOp) and isinstance(
            test.op, ast.And) else [test]
        for c in conjuncts:
            options = c.values if isinstance(c, ast.BoolOp) and isinstance(c.op, ast.Or) \
                else [c]
            checked = [self.type_check(o) for o in options]
            if checked and all(checked) and len({n for n, _ in checked}) == 1:
                name = checked[0][0]
                types = {t for _, t in checked}
                self.type_checked.add(name)
                if types <= PLAIN_TYPES:
                    state[name] = PLAIN
                elif types <= CONTAINER_TYPES:
                    state[name] = CONTAINER

    @staticmethod
    def type_check(e) -> tuple[str, str] | None:
        if isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], ast.Is) \
                and isinstance(e.left, ast.Call) and isinstance(e.left.func, ast.Name) \
                and e.left.func.id == "type" and len(e.left.args) == 1 \
                and isinstance(e.left.args[0], ast.Name) \
                and isinstance(e.comparators[0], ast.Name):
            return e.left.args[0].id, e.comparators[0].id
        return None

    def block(self, stmts, state: dict, returns: list | None = None) -> None:
        for stmt in stmts:
            self.statement(stmt, state, returns)

    def statement(self, stmt, state: dict, returns) -> None:  # noqa: C901
        if isinstance(stmt, ast.FunctionDef | ast.ClassDef):
            return  # analysed where it is called, with the kinds it is called with
        if isinstance(stmt, ast.Assert):
            self.truth(stmt.test, state)
            if stmt.msg is not None:
                self.expr(stmt.msg, dict(state))
            self.facts(stmt.test, state)
        elif isinstance(stmt, ast.Assign):
            self.expr(stmt.value, state)
            for t in stmt.targets:
                self.bind(t, self.kind(stmt.value, state), state, stmt.value)
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
            if stmt.value is not None:
                self.expr(stmt.value, state)
                self.bind(stmt.target, _worst(self.kind(stmt.value, state),
                                              self.kind(stmt.target, state)), state)
        elif isinstance(stmt, ast.For):
            self.expr(stmt.iter, state)
            self.bind(stmt.target, _worst(self.kind(stmt.iter, state)), state)
            self.block(stmt.body, state, returns)
            self.block(stmt.orelse, state, returns)
        elif isinstance(stmt, ast.If | ast.While):
            self.truth(stmt.test, state)
            inner = dict(state)
            self.facts(stmt.test, inner)
            self.block(stmt.body, inner, returns)
            self.block(stmt.orelse, state, returns)
            state.update({k: v for k, v in inner.items() if k not in state or v == RAW})
        elif isinstance(stmt, ast.With):
            for item in stmt.items:
                self.expr(item.context_expr, state)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, self.kind(item.context_expr, state), state)
            self.block(stmt.body, state, returns)
        elif isinstance(stmt, ast.Return):
            if stmt.value is not None:
                self.expr(stmt.value, state)
                if returns is not None:
                    returns.append(self.kind(stmt.value, state))
        elif isinstance(stmt, ast.Expr):
            self.expr(stmt.value, state)
        elif isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass):
            return
        else:
            self.problem(stmt, f"a {type(stmt).__name__} statement this check cannot read")

    def truth(self, test, state: dict) -> None:
        """What ``assert``/``if`` takes the truth of: plain, or a comparison made plain."""
        if isinstance(test, ast.BoolOp):
            inner = dict(state)
            for v in test.values:
                self.truth(v, inner)
                if isinstance(test.op, ast.And):
                    self.facts(v, inner)
            return
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.truth(test.operand, state)
        self.expr(test, state)
        if not isinstance(test, ast.Compare) and self.kind(test, state) != PLAIN:
            self.problem(test, f"takes the truth of a learner value ({ast.unparse(test)}): "
                               "compare a plain conversion of it")

    def expr(self, e, state: dict) -> None:
        """Every comparison and call inside ``e``."""
        for node in ast.walk(e):
            if isinstance(node, ast.Compare):
                self.compare(node, state)
            elif isinstance(node, ast.Call):
                self.call(node, state)
            elif isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp
                            | ast.DictComp):
                inner = dict(state)
                for gen in node.generators:
                    self.bind(gen.target, _worst(self.kind(gen.iter, inner)), inner)
                for sub in ([node.key, node.value] if isinstance(node, ast.DictComp)
                            else [node.elt]):
                    for inner_node in ast.walk(sub):
                        if isinstance(inner_node, ast.Compare):
                            self.compare(inner_node, inner)

    def notebook_refs(self, e, state: dict) -> None:
        for n in ast.walk(e):
            if isinstance(n, ast.Name) and self.category(n.id, state) == "notebook":
                self.permit(n, n.id, f"compares against {n.id!r}, a name the notebook's own "
                                     "cells bind (a learner cell can rebind it): use a constant")

    def compare(self, node: ast.Compare, state: dict) -> None:
        operands = [node.left, *node.comparators]
        for o in operands:
            self.notebook_refs(o, state)
        if all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops):
            return
        for i, o in enumerate(operands):
            k = self.kind(o, state)
            container_ok = i > 0 and isinstance(node.ops[i - 1], ast.In | ast.NotIn)
            if k == RAW or (k == CONTAINER and not container_ok):
                self.problem(node, f"compares a learner value without a plain conversion: "
                                   f"{ast.unparse(node)}")
                return

    def call(self, node: ast.Call, state: dict) -> None:
        name = dotted(node.func)
        if name is None:
            return  # a call of a computed value (a method's result...): checked where made
        root = name.split(".")[0]
        cat = self.category(root, state)
        lib = self.library_name(name) if cat == "library" else None
        if lib in COMPARE_CALLS or (lib or "").startswith("numpy.testing."):
            for a in [*node.args, *(k.value for k in node.keywords)]:
                if self.kind(a, state) != PLAIN:
                    self.problem(node, f"{lib} compares a learner value without a plain "
                                       f"conversion: {ast.unparse(node)}")
            return
        if cat == "builtin" and "." not in name:
            if name == "isinstance" and node.args and self.kind(node.args[0], state) != PLAIN:
                self.problem(node, "isinstance lets a subclass through: check type(x) is T")
            elif name not in SAFE_BUILTINS:
                self.problem(node, f"calls the builtin {name}")
        elif cat == "library":
            if lib in ARRAY_CONVERTERS:
                dtype = [k.value for k in node.keywords if k.arg == "dtype"]
                if not dtype or (isinstance(dtype[0], ast.Name) and dtype[0].id == "object"):
                    self.problem(node, f"{lib} without a dtype: name the plain dtype wanted")
                return
            self.permit(node, lib, f"calls {lib} at test time: write the expected value as a "
                                   "constant, or list the call in ALLOWED with its reason")
        elif cat == "notebook":
            self.permit(node, root, f"calls {root}, which the notebook's own cells define "
                                    "(a learner cell can rebind it)")
        elif cat == "unknown":
            self.problem(node, f"calls {name}, bound nowhere in the notebook")

    def run(self) -> list[str]:
        self.block(self.tree.body, {})
        # a learner value the cell reads (a prediction, a decision; not a function it
        # calls or hands on) has its type checked, even where nothing compares it
        for name in sorted(self.learner_read - self.type_checked - self.nb.learner_defs):
            self.problem(self.tree, f"reads the learner value {name} without checking "
                                    "type(...) is a plain type")
        return self.problems


def source_notebook(path: Path):
    return nbbuild.from_text(path.read_text())


def check_notebook(path: Path) -> tuple[list[str], set]:
    nb = Notebook(source_notebook(path))
    problems, used = [], set()
    for gid, source in nb.tests:
        cell = CellCheck(path.stem, gid, source, nb)
        problems += cell.run()
        used |= {(path.stem, gid, what) for what in cell.used}
    return problems, used


@pytest.mark.parametrize("path", SOURCES, ids=[p.stem for p in SOURCES])
def test_graded_cells_compare_plain_data(path):
    problems, _ = check_notebook(path)
    assert not problems, "\n".join(problems)


def _course_imports(path: Path) -> dict[str, str]:
    """What the grader's test process imports fresh for this notebook (its grading key's
    ``imports``, from the same source)."""
    from coursekit.notebook.free_names import course_imports
    nb = source_notebook(path)
    return course_imports([(c.source, bool(c.metadata.get("nbgrader", {}).get("solution")))
                           for c in nb.cells if c.cell_type == "code" and not (
                               c.metadata.get("nbgrader", {}).get("grade")
                               and c.metadata.get("nbgrader", {}).get("locked"))])


def test_every_allowed_exception_is_used_and_runs_where_it_is_meant_to():
    """No stale entry in ALLOWED; every library call it allows is one the grader's test
    process imports itself (a course import of the notebook, or the test cell's own), so
    no learner cell can have replaced it there; every notebook name it allows is one the
    test process reads from the learner's notebook (not a course import)."""
    used = set()
    for path in SOURCES:
        used |= check_notebook(path)[1]
    listed = {(nb, gid, what) for (nb, gid), entries in ALLOWED.items() for what in entries}
    assert listed == used, {"listed, never used": sorted(listed - used)}
    tests = {(p.stem, gid): src for p in SOURCES for gid, src in Notebook(
        source_notebook(p)).tests}
    for nb, gid, what in sorted(listed):
        imports = {**_course_imports(ROOT / "notebooks" / "src" / f"{nb}.py"),
                   **imports_of(tests[nb, gid])}
        if "." not in what:  # a notebook name: read from the learner's process
            assert what not in imports, (nb, gid, what)
            continue
        bound = [name for name, dotted in imports.items()
                 if what == dotted or what.startswith(dotted + ".")]
        assert bound, (nb, gid, what, "not imported by the course or the cell")


def imports_of(source: str) -> dict[str, str]:
    return imports(ast.parse(source))


def test_every_test_cell_stands_alone():
    """The grader runs each test cell in a namespace of its own: every name a test cell
    reads is its own, a builtin, a course import or a name of the learner's notebook (a
    course or answer cell binds it), never one only another test cell binds."""
    from coursekit.notebook.free_names import bound_names, free_names
    problems = []
    for path in SOURCES:
        nb = Notebook(source_notebook(path))
        by_tests = set().union(*(bound_names(src) for _, src in nb.tests)) if nb.tests \
            else set()
        notebook_names = nb.learner | nb.names | set(nb.modules)
        for gid, source in nb.tests:
            for name in free_names(source):
                if name in by_tests and name not in notebook_names:
                    problems.append(f"{path.stem} {gid}: reads {name}, which only another "
                                    "test cell binds")
    assert not problems, problems


# The reported cases (issue 27), as they stood: the check must refuse both.
REPORTED = {
    "covered_us_tests": ("def covered_us(intervals):\n    return 0.0\n",
                         "assert covered_us([]) == 0.0\n"
                         "assert covered_us([(0, 10)]) == 10.0\n"),
    "elementwise_cost_by_hand_tests": (
        "def elementwise_cost_by_hand(n, itemsize):\n    return {}\n",
        "def _compiler(n, dtype):\n"
        "    c = jax.jit(lambda v: v * 2 + 1).lower(jnp.ones((n,), dtype)).compile()"
        ".cost_analysis()\n"
        "    c = c[0] if isinstance(c, (list, tuple)) else c\n"
        "    return {'flops': c['flops'], 'bytes': c['bytes accessed']}\n"
        "_mine = elementwise_cost_by_hand(1000, 4)\n"
        "assert _mine == {'flops': 2000, 'bytes': 8000}, _mine\n"
        "for _n, _dt in ((4097, jnp.float32), (333, jnp.float32)):\n"
        "    _m = elementwise_cost_by_hand(_n, jnp.dtype(_dt).itemsize)\n"
        "    _c = _compiler(_n, _dt)\n"
        "    assert float(_m['flops']) == _c['flops'], (_m, _c)\n"),
    "prediction_present": ("PREDICTED = 1.0\n",
                           "assert isinstance(PREDICTED, (int, float)), 'a number'\n"),
}


def _reported(gid: str) -> list[str]:
    solution, test = REPORTED[gid]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import jax\nimport jax.numpy as jnp\nimport numpy as np"),
        nbformat.v4.new_code_cell(solution, metadata={"nbgrader": {
            "grade": False, "solution": True, "grade_id": "answer"}}),
        nbformat.v4.new_code_cell(test, metadata={"nbgrader": {
            "grade": True, "locked": True, "solution": False, "grade_id": gid}})])
    return CellCheck("reported", gid, test, Notebook(nb)).run()


def test_the_reported_cases_are_refused():
    found = _reported("covered_us_tests")
    assert found and all("compares a learner value" in p for p in found), found
    found = "\n".join(_reported("elementwise_cost_by_hand_tests"))
    assert "calls jax.jit at test time" in found, found
    assert "compares a learner value without a plain conversion: _mine ==" in found, found
    assert "calls jax.numpy.dtype at test time" in found, found
    found = "\n".join(_reported("prediction_present"))
    assert "isinstance lets a subclass through" in found, found
    assert "without checking type(...)" in found, found

"""The released checkers hold no copy of a stage's answer (issue 30 walk-through, "the
released checkers hold the reference code").

The learner release ships every project's ``tests/`` (learners run ``check.py`` locally;
``autograder.release`` copies a project whole, less ``solution/``), and a checker computes
its own references: where that code *is* a learner function, a learner can copy it and pass.
A checker's reference is therefore computed with a tool the learner file is refused at that
stage (``coursekit.checking.forbidden``: JAX autodiff in foundations' replay of the fit,
``scipy.special`` for pallas' float64 softmax, ``coursekit.measure.peak_memory``'s models for
the remat losses), or independently of the learner's algorithm (pallas' expected summary is
read from the plan that planted the records). This test reads every function of the
released checker files beside every learner function of each ``solution/model.py`` (a
function holding, or lying inside, a ``BEGIN SOLUTION`` block):

* no checker function has the same body as a learner function once names and constants
  are abstracted (``tokens``: the AST in pre-order, docstrings dropped, every identifier
  and constant one token, attribute names kept: they are the APIs the code uses);
* no function of the project's own checker holds more than ``CONTAINED`` of a learner
  function's runs of ``RUN`` consecutive tokens (learner functions of at least
  ``MIN_RUNS`` runs: shorter ones are a line or two, where any two calls look alike;
  across projects only equal bodies count: an SGD step in sharded-training's reference
  shares 0.47 of optimisation's jitted scan by the idioms alone);
* no function of it of at least ``MIN_CHECKER_RUNS`` runs has more than
  ``CHECKER_CONTAINED`` of its own runs inside one learner function: a piece of an
  answer (the algebra after a sweep) is short beside the learner function around it.

Since issue 46 a checker's reference that is an answer lives in ``coursekit/instructor``
(the checks that need it are graded by the instructor in a learner's copy), and
tests/test_release_scan.py applies these measures to every file of the release. Measured on
the checkers before the fix (commit 0535b50): the answers scored 0.46
(saved_residual_bytes ~ residual_bytes) to 0.96 (matmul_cost_by_hand), among them ref64 ~
softmax_numpy_f64 0.56, reference_loss ~ block_loss 0.52, replay_train ~ train_classifier
0.57; the highest pair that is no answer, write_trace ~ the checker's own trace writer,
0.43 (both call the profiler with a named region). ``ALLOWED`` lists what stays, each with
why; an entry that no longer matches must go.

Hints too: no hint of a released checker (a ``hint=`` text, or a value bound to a name
holding "hint") holds ``HINT_RUN`` code tokens in a row of a line of the reference's
solution blocks, nor one of its formulas under other names (``FORMULA_RUN``): a hint is
shown after a failure, but the file can be read before one. Measured when it came in: 15
hints held such a line (the mesh, shard_map, checkpoint and BlockSpec lines among them);
they now say what must hold. The formula scan came with session 8's walk-through, which
found the Amdahl formulas of optimisation stage 1 and performance-audit stage 4 handed out
as hints ("1 / (1 - s)", "1/((1-s) + s/k)"), below the verbatim scan: it finds both in
the checkers before that walk-through (commit d30e14e) and nothing else but the one
definition ``ALLOWED_FORMULAS`` keeps.

Its reach: whole functions. A one-line answer inside a longer checker function (the hand
gradient foundations' replay once held, the rounding budget pallas' ``budget`` computes)
is below it; those were read, not scanned.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from coursekit.facts import ROOT

RUN = 6            # tokens per run (shingle)
MIN_RUNS = 20      # learner functions shorter than this are compared exactly only
MIN_TOKENS = 8     # below this a body is `return x` or so: equal by accident
CONTAINED = 0.45   # share of a learner function's runs found in one checker function
# and the other way: a checker function of at least MIN_CHECKER_RUNS runs, this share of
# them inside one learner function, is a piece of the answer (optimisation's
# modelled_crossover, predict_crossover's algebra line for line, scored 0.75 of its own
# runs but 0.37 of the learner function's, which measures its sweep too)
MIN_CHECKER_RUNS = 25
CHECKER_CONTAINED = 0.6

# (project, learner function, checker file, checker function): why it stays.
ALLOWED: dict = {}


def tokens(fn: ast.AST) -> tuple[str, ...]:
    """The body of ``fn`` in pre-order: node types, every name or argument "N", every
    constant "C", attributes by name; docstrings and load/store contexts dropped."""
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.expr_context):
            return
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) \
                and isinstance(node.value.value, str):
            return
        if isinstance(node, ast.Attribute):
            out.append("." + node.attr)
        elif isinstance(node, (ast.Name, ast.arg)):
            out.append("N")
        elif isinstance(node, ast.Constant):
            out.append("C")
        else:
            out.append(type(node).__name__)
        for child in ast.iter_child_nodes(node):
            visit(child)

    for statement in fn.body:
        visit(statement)
    return tuple(out)


def runs(seq: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {seq[i:i + RUN] for i in range(len(seq) - RUN + 1)}


def functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, ast.AST]]:
    """(qualified name, node) of every function in ``tree``, nested ones as outer.inner."""
    out = []
    for node in ast.iter_child_nodes(tree):
        name = prefix
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            out.append((name, node))
            name += "."
        out += functions(node, name)
    return out


def learner_functions(project: str) -> dict[str, tuple[str, ...]]:
    """Name -> tokens of each module-level function of the solution that holds a BEGIN
    SOLUTION block or lies inside one (a nested function is part of its learner function:
    on its own, a jitted SGD step looks like every other)."""
    text = (ROOT / "projects" / project / "solution" / "model.py").read_text()
    lines = text.splitlines()
    blocks, start = [], None
    for number, line in enumerate(lines, 1):
        if "### BEGIN SOLUTION" in line:
            start = number
        elif "### END SOLUTION" in line and start is not None:
            blocks.append((start, number))
            start = None
    found = {}
    for name, fn in functions(ast.parse(text)):
        if "." in name:
            continue
        holds = any(fn.lineno <= b <= fn.end_lineno for b, _ in blocks)
        inside = any(b <= fn.lineno and fn.end_lineno <= e for b, e in blocks)
        if holds or inside:
            found[name] = tokens(fn)
    return found


def checker_functions() -> list[tuple[str, str, tuple[str, ...]]]:
    """(file under projects/, function name, tokens) for every function of every released
    checker file."""
    out = []
    for path in sorted((ROOT / "projects").glob("*/tests/**/*.py")):
        where = path.relative_to(ROOT / "projects").as_posix()
        out += [(where, name, tokens(fn)) for name, fn in functions(ast.parse(path.read_text()))]
    return out


PROJECTS = sorted(p.parent.parent.name for p in (ROOT / "projects").glob("*/solution/model.py"))


def matches(project: str, checkers) -> dict[tuple[str, str, str, str], str]:
    """(project, learner function, checker file, checker function) -> what matched."""
    found = {}
    for name, mine in learner_functions(project).items():
        own = runs(mine)
        for where, other, theirs in checkers:
            if len(mine) >= MIN_TOKENS and mine == theirs:
                found[(project, name, where, other)] = "the same body, names abstracted"
            elif where.startswith(project + "/"):
                checker_runs = runs(theirs)
                share = len(own & checker_runs) / len(own) if len(own) >= MIN_RUNS else 0
                inside = len(own & checker_runs) / len(checker_runs) \
                    if len(checker_runs) >= MIN_CHECKER_RUNS else 0
                if share > CONTAINED:
                    found[(project, name, where, other)] = (
                        f"{share:.2f} of its {RUN}-token runs (limit {CONTAINED})")
                elif inside > CHECKER_CONTAINED:
                    found[(project, name, where, other)] = (
                        f"{inside:.2f} of the checker function's runs are in it (limit "
                        f"{CHECKER_CONTAINED})")
    return found


@pytest.fixture(scope="module")
def checkers():
    return checker_functions()


@pytest.mark.parametrize("project", PROJECTS)
def test_no_released_checker_function_is_a_learner_answer(project, checkers):
    found = matches(project, checkers)
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, ("a released checker function holds a learner function's code "
                     "(compute the reference with a tool the learner is refused at that "
                     f"stage, or independently of the learner's algorithm): {new}")
    stale = [k for k in ALLOWED if k[0] == project and k not in found]
    assert not stale, f"allowed but no longer matching, remove from ALLOWED: {stale}"


def test_every_allowed_entry_says_why():
    for key, why in ALLOWED.items():
        assert key[0] in PROJECTS and len(why.split()) >= 8, key


def test_the_scan_finds_a_pasted_answer():
    """A checker that holds the reference's softmax_numpy_f64 under another name, with
    other variable names, is caught; the checker's own reference (scipy's softmax, which a
    learner file may not use at stage 1) is not."""
    pasted = ("def oracle(a):\n    q = np.asarray(a).astype(np.float64)\n"
              "    q = q - q.max(axis=-1, keepdims=True)\n    t = np.exp(q)\n"
              "    return t / t.sum(axis=-1, keepdims=True)\n")
    fake = [("pallas-kernel/tests/planted.py", "oracle",
             tokens(functions(ast.parse(pasted))[0][1]))]
    assert ("pallas-kernel", "softmax_numpy_f64", "pallas-kernel/tests/planted.py",
            "oracle") in matches("pallas-kernel", fake)
    other = ("def oracle(a):\n"
             "    return scipy.special.softmax(np.asarray(a).astype(np.float64), axis=1)\n")
    fake = [("pallas-kernel/tests/planted.py", "oracle",
             tokens(functions(ast.parse(other))[0][1]))]
    assert not any(k[3] == "oracle" for k in matches("pallas-kernel", fake))


def test_a_long_answer_is_caught_inside_a_longer_checker_function():
    """Containment, not likeness: summarize's reference, pasted into a checker function
    with more around it, still counts."""
    text = (ROOT / "projects" / "pallas-kernel" / "solution" / "model.py").read_text()
    summarize = dict(functions(ast.parse(text)))["summarize"]
    body = "\n".join(ast.unparse(statement) for statement in summarize.body)
    wrapped = ("def expected(records):\n    import math\n    extra = [1, 2, 3]\n"
               + "\n".join("    " + line for line in body.splitlines()) + "\n")
    fake = [("pallas-kernel/tests/planted.py", "expected",
             tokens(functions(ast.parse(wrapped))[0][1]))]
    assert ("pallas-kernel", "summarize", "pallas-kernel/tests/planted.py",
            "expected") in matches("pallas-kernel", fake)


def test_a_piece_of_an_answer_is_caught_inside_a_longer_learner_function():
    """The other direction: a checker function whose runs lie mostly inside one learner
    function (predict_crossover's algebra after its sweep, as the checker once held it)."""
    text = (ROOT / "projects" / "optimisation" / "solution" / "model.py").read_text()
    predict = dict(functions(ast.parse(text)))["predict_crossover"]
    tail = "\n".join(ast.unparse(statement) for statement in predict.body[3:])
    piece = ("def modelled(fit, small, large, threshold):\n"
             + "\n".join("    " + line for line in tail.splitlines()) + "\n")
    fake = [("optimisation/tests/optim_stage3_crossover.py", "modelled",
             tokens(functions(ast.parse(piece))[0][1]))]
    assert ("optimisation", "predict_crossover", "optimisation/tests/optim_stage3_crossover.py",
            "modelled") in matches("optimisation", fake)


# -- hints --------------------------------------------------------------------------------
# A hint is printed after a failure, but the released checker's text can be read before
# any attempt: a hint that holds a line of the reference is that line, handed out.
HINT_RUN = 9   # code tokens in a row; API names alone ("jax.random.key(seed)") stay below
CODE_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+|==|!=|<=|>=|\*\*|//|[^\s\w]")


def code_runs(text: str) -> set[tuple[str, ...]]:
    found = CODE_TOKEN.findall(text)
    return {tuple(found[i:i + HINT_RUN]) for i in range(len(found) - HINT_RUN + 1)}


def solution_code_lines(project: str):
    """Every code line inside the solution's BEGIN/END SOLUTION blocks, stripped."""
    inside = False
    for line in (ROOT / "projects" / project / "solution" / "model.py").read_text().splitlines():
        code = line.strip()
        if code.startswith("### BEGIN SOLUTION"):
            inside = True
        elif code.startswith("### END SOLUTION"):
            inside = False
        elif inside and code and not code.startswith("#"):
            yield code


def solution_line_runs(project: str) -> set[tuple[str, ...]]:
    """Runs of every code line inside the solution's BEGIN/END SOLUTION blocks."""
    return set().union(*map(code_runs, solution_code_lines(project)))


def _text(node: ast.AST) -> str:
    return "".join(c.value for c in ast.walk(node)
                   if isinstance(c, ast.Constant) and isinstance(c.value, str))


def hints_of(source: str) -> list[tuple[int, str]]:
    """(line, text) of each hint: a ``hint=`` argument, and a value bound to a name
    holding "hint" (``REFERENCE_HINT = ...``, ``hint = ...``; a dict's values each on
    their own): its string constants joined (the constant parts of an f-string or a
    conditional included)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        values = []
        if isinstance(node, ast.keyword) and node.arg == "hint":
            values = [node.value]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any(isinstance(t, ast.Name) and "hint" in
                                              t.id.lower() for t in targets):
                values = node.value.values if isinstance(node.value, ast.Dict) \
                    else [node.value]
        for value in values:
            if value is not None and _text(value):
                out.append((value.lineno, _text(value)))
    return out


# A formula handed out as a hint ("Amdahl: 1/((1-s) + s/k)") is the answer's line with
# other names: runs of FORMULA_RUN tokens with every name and number abstracted, holding
# at least two arithmetic operators (a run of API names or prose holds none).
FORMULA_RUN = 6
FORMULA_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?(?:e-?\d+)?|==|!=|<=|>=|\*\*|//|[^\s\w]")
ARITHMETIC = {"+", "-", "*", "/", "**", "//"}
STRING = re.compile(r"\"[^\"]*\"|'[^']*'")
# (project, file, phrase of the hint): why the formula stays.
ALLOWED_FORMULAS = {
    ("performance-audit", "audit_stage4_decision.py", "1 / (1 + min_gain)"):
        "the docstring's 'slower by more than min_gain' in ratio form: the definition the "
        "decision is checked against, not a step of computing the interval",
}


def formula_runs(text: str) -> set[tuple[str, ...]]:
    found = ["N" if re.match(r"[A-Za-z_]", t) else "C" if t[0].isdigit() else t
             for t in FORMULA_TOKEN.findall(text)]
    runs = (tuple(found[i:i + FORMULA_RUN]) for i in range(len(found) - FORMULA_RUN + 1))
    return {run for run in runs if sum(t in ARITHMETIC for t in run) >= 2}


def solution_formula_runs(project: str) -> set[tuple[str, ...]]:
    """Formula runs of the solution blocks' code lines, their string literals dropped."""
    return set().union(*(formula_runs(STRING.sub(" S ", code))
                         for code in solution_code_lines(project)))


def hints_holding_answers(project: str, files: dict[str, str]) -> list[str]:
    answers, formulas = solution_line_runs(project), solution_formula_runs(project)
    return [f"{name}:{line}: {text[:90]!r}" for name, source in files.items()
            for line, text in hints_of(source)
            if code_runs(text) & answers or (formula_runs(text) & formulas and not any(
                (project, Path(name).name) == key[:2] and key[2] in text
                for key in ALLOWED_FORMULAS))]


@pytest.mark.parametrize("project", PROJECTS)
def test_no_hint_in_a_released_checker_is_a_line_of_the_answer(project):
    files = {p.relative_to(ROOT / "projects").as_posix(): p.read_text()
             for p in sorted((ROOT / "projects" / project / "tests").glob("**/*.py"))}
    found = hints_holding_answers(project, files)
    assert not found, ("a hint holds a line of the reference (say what must hold and what "
                       f"was measured, not the code): {found}")


def test_the_hint_scan_finds_a_formula_under_other_names():
    """Planted both ways: the Amdahl step speedup of performance-audit's reference, as a
    hint with one-letter names (the hint it had before the walk-through), and the same
    in a hint constant, are found; the law said in words is not."""
    formula = 'fail_unless(ok, "amdahl", hint="Amdahl: 1/((1-s) + s/k)")\n'
    assert hints_holding_answers("performance-audit", {"planted.py": formula})
    constant = 'AMDAHL_HINT = ("Amdahl: 1/((1-s) + s/k)")\n'
    assert hints_holding_answers("performance-audit", {"planted.py": constant})
    words = ('fail_unless(ok, "amdahl", hint="only the share\'s part gets faster; the rest '
             'keeps its time")\n')
    assert not hints_holding_answers("performance-audit", {"planted.py": words})


def test_every_allowed_formula_is_still_there_and_says_why():
    for (project, name, phrase), why in ALLOWED_FORMULAS.items():
        assert len(why) > 40, (project, name)
        text = (ROOT / "projects" / project / "tests" / name).read_text()
        assert phrase in text, f"{project}/{name} no longer holds {phrase!r}: drop the entry"


def test_the_hint_scan_finds_a_pasted_line():
    """Planted both ways: the mesh line of sharded-training's reference, pasted as a hint,
    is found; the same API named in prose is not."""
    pasted = ('fail_unless(ok, "no mesh", hint="jax.make_mesh((n,), (\'data\',), '
              'devices=jax.devices()[:n])")\n')
    assert hints_holding_answers("sharded-training", {"planted.py": pasted})
    prose = 'fail_unless(ok, "no mesh", hint="a Mesh of the first n devices (jax.make_mesh)")\n'
    assert not hints_holding_answers("sharded-training", {"planted.py": prose})

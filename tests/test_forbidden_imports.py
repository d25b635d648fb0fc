"""A learner file may not import the course's own implementation of what its stage asks
for (coursekit/checking/forbidden.py). The reading catches every ordinary way to reach a
forbidden name and lets through what the contract gives; each project's checker refuses a
planted copy of the solution that uses one, at the stage it belongs to, naming it and why.

Static tests read text only; one checker run per project (--fail-fast: the first check
of the stage is the one that refuses) keeps the module fast."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, plant, solution, starter

from coursekit.checking import forbidden
from coursekit.checking.contract import Checker, Context
from coursekit.checking.errors import CheckFailed

PROJECTS = sorted(forbidden.RULES)
AUDIT = "performance-audit"

# ---------------------------------------------------------------------------------------
# The reading
# ---------------------------------------------------------------------------------------

FORMS = {
    "plain import": "import coursekit.instructor.decision\n"
                    "r = coursekit.instructor.decision.decide_rounds(a, b)\n",
    "from-import": "from coursekit.instructor.decision import decide_rounds\n",
    "from-import alias": "from coursekit.instructor.decision import decide_rounds as dr\n",
    "module alias": "import coursekit.instructor.decision as d\nd.decide_rounds(a, b)\n",
    "attribute through a module": "from coursekit.instructor import decision\n"
                                  "def decide(a, b):\n    return decision.decide_rounds(a, b)\n",
    "a name bound to it": "from coursekit.instructor import decision as dm\nf = dm.decide_rounds\n",
    "import inside a function": "def decide(a, b):\n"
                                "    from coursekit.instructor.decision import decide_rounds\n"
                                "    return decide_rounds(a, b)\n",
    "importlib": "import importlib\n"
                 "importlib.import_module('coursekit.instructor.decision').decide_rounds(a, b)\n",
    "importlib, bound then getattr": "import importlib as il\n"
                                     "m = il.import_module('coursekit.instructor.decision')\n"
                                     "f = getattr(m, 'decide_rounds')\n",
    "__import__ with fromlist": "m = __import__('coursekit.instructor.decision', "
                                "fromlist=['decide_rounds'])\n",
    "sys.modules": "import sys\nsys.modules['coursekit.instructor.decision'].decide_rounds\n",
    "star import": "from coursekit.instructor.decision import *\n",
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_of_reaching_a_forbidden_name_is_found(form):
    found = forbidden.scan(FORMS[form], forbidden.rules_for(AUDIT, 4))
    assert found, form
    assert {f.rule.qualified for f in found} == {"coursekit.instructor"}
    assert all(f.rule.stage == 4 and f.rule.kind == "instructor" for f in found)


def test_a_whole_module_rule_catches_the_module_and_its_names():
    rules = forbidden.rules_for(AUDIT, 3)
    for text in ("from coursekit.instructor import peak_memory\n",
                 "import coursekit.instructor.peak_memory as pm\n",
                 "from coursekit.instructor.peak_memory import fresh_process_peaks\n",
                 "import importlib\nimportlib.import_module('coursekit.instructor.peak_memory')\n"):
        assert forbidden.scan(text, rules), text


def test_a_string_naming_the_checkers_stored_outputs_is_refused_at_every_stage(tmp_path):
    """A learner's copy checks against projects/*/tests/expected/ (the public inputs'
    outputs): a file that reads them there passes as a lookup table (a copy's reader,
    2026-12-07: foundations stages 2 and 3, 6 of 6 each). Any copy's folder, any slash."""
    for text in ("STORE = '/tmp/other/projects/foundations/tests/expected/replays.npz'\n",
                 "p = r'C:\\course\\projects\\pallas-kernel\\tests\\expected'\n"):
        for project, stages in forbidden.STAGES.items():
            for stage in range(1, stages + 1):
                found = forbidden.scan(text, forbidden.rules_for(project, stage))
                assert {f.rule.kind for f in found} == {"checker-data"}, (text, project, stage)
    path = tmp_path / "model.py"
    path.write_text("DOC = 'the expected values'\nP = 'tests/expected/decisions.json'\n")
    with pytest.raises(CheckFailed) as err:
        forbidden.refuse(path, forbidden.rules_for(AUDIT, 4), 4)
    assert "the checker's stored outputs" in str(err.value), err.value
    assert "implementation" not in str(err.value), err.value
    assert err.value.hint.startswith(forbidden.DATA_HINT), err.value.hint
    assert not forbidden.scan("x = 'expected'\ny = 'tests'\n", forbidden.rules_for(AUDIT, 4))


def test_instructor_code_is_refused_at_every_stage_of_every_project():
    text = "from coursekit.instructor.traces import build_forest\n"
    for project, stages in forbidden.STAGES.items():
        refused = {s for s in range(1, stages + 1)
                   if forbidden.scan(text, forbidden.rules_for(project, s))}
        assert refused == set(range(1, stages + 1)), project


def test_every_reason_is_one_of_the_fixed_sentences():
    """A rule says which kind of thing it refuses, never what a stage's answer does (the
    method descriptions a learner's release once held)."""
    for rules in forbidden.RULES.values():
        for rule in rules:
            assert rule.kind in forbidden.WHY and rule.why == forbidden.WHY[rule.kind]


# Course helpers that already do a stage's work, found by a walk-through of the release
# (issue 30): each is refused at the stage it answers, and only there.
HELPERS_THAT_ANSWER = [
    (AUDIT, 4, "from coursekit.measure.verdict import interval_of\n"
               "ci = interval_of(log_ratios, 0.95)\n"),
    (AUDIT, 4, "from coursekit.measure.collectives import _median_interval\n"
               "ci = _median_interval(ratios, 0.95)\n"),
    ("pallas-kernel", 3, "from coursekit.measure.timing import time_synced\n"
                         "t = time_synced(f, x, warmup=1, iters=5)\n"),
    ("sharded-training", 4, "from coursekit.measure import timing\n"
                            "t = timing.time_synced(step, state, batch)\n"),
    ("optimisation", 4, "from coursekit.measure.decision import measure_interleaved\n"
                        "rec = measure_interleaved(slow, fast, rounds=4)\n"),
    # a learner copy's reader, 2026-12-06 (issue 50 A3, A4, 11): each borrowed at a stage
    # whose rules missed it
    (AUDIT, 4, "from coursekit.measure.verdict import measure_ratio\n"
               "ev = measure_ratio(lambda i: b[i], lambda i: a[i], 0.0, 9.9)\n"),
    (AUDIT, 3, "from coursekit.compat.compiled_plan import memory_plan\n"
               "temp = memory_plan(compiled)['temp_size_in_bytes']\n"),
    (AUDIT, 2, "from coursekit.compat.compiled_plan import compiled_cost\n"
               "cost = compiled_cost(jax.jit(f).lower(x).compile())\n"),
    (AUDIT, 3, "from coursekit.measure import device_peak\n"
               "out, reading = device_peak.measured_run(compiled, args, device)\n"),
    (AUDIT, 1, "from coursekit.measure.decision import measure_interleaved\n"
               "rec = measure_interleaved(run, lambda: None, rounds=1)['before']\n"),
    (AUDIT, 1, "from coursekit.measure import timing\n"
               "samples = timing.bare_loop_overhead(fn, x, iters=10)\n"),
    ("pallas-kernel", 3, "import coursekit.measure.decision as d\n"
                         "rec = d.measure_interleaved(a, b)\n"),
    ("sharded-training", 4, "from coursekit.measure.decision import measure_interleaved\n"
                            "s = measure_interleaved(step, step, rounds=1)\n"),
    # a name the timing module gains later is refused with it (the module is refused
    # whole, less what the contract gives)
    ("optimisation", 3, "import coursekit.measure.timing as t\nt.next_timer(f)\n"),
    ("optimisation", 3, "from coursekit.measure.timing import *\n"),
]
# the checker's code (in the learner process, or instructor-only) is refused everywhere
REFUSED_AT = [
    # a sealed program: at every stage (tests/test_sealed_route.py has each route)
    ("foundations", (1, 2, 3), "import jax\n"
                               "replay = jax.export.deserialize(open('x.jaxexport', 'rb').read())\n"),
    ("optimisation", (1, 2, 3, 4), "from coursekit.workloads.remote_optimisation import "
                                   "fast_block\nsamples = fast_block(train_fast, lrs)\n"),
    ("optimisation", (1, 2, 3, 4), "import coursekit.instructor.remote_optimisation_traced "
                                   "as t\npath = t.fast_traced(train_slow, config, 0, 'log', "
                                   "'r', [])\n"),
    # every checker's learner-process code, in every project (issue 50 A4: time_workload)
    (AUDIT, (1, 2, 3, 4), "from coursekit.workloads.remote_course import time_workload\n"),
    ("sharded-training", (1, 2, 3, 4),
     "import coursekit.workloads.remote_pallas_kernel as r\nr.time_synced(f, x, 1, 5)\n"),
    # the checkers' own modules, by name, however the file is found (issue 50 A2)
    ("pallas-kernel", (1, 2, 3), "import sys\nsys.path.insert(0, 'projects/pallas-kernel/"
                                 "tests')\nfrom pallas_harness import ref64\n"),
    ("pallas-kernel", (1, 2, 3), "import importlib\n"
                                 "h = importlib.import_module('pallas_harness')\n"),
    ("sharded-training", (1, 2, 3, 4), "from sharded_reference import ref_state\n"),
    ("sharded-training", (1, 2, 3, 4), "import tests.sharded_reference as ref\n"),
    (AUDIT, (1, 2, 3, 4), "import check\n"),
    ("foundations", (1, 2, 3), "from audit_decision_reference import key_of\n"),
]


@pytest.mark.parametrize("project,stages,text", REFUSED_AT,
                         ids=["sealed-replay", "fast_block", "fast_traced", "remote_course",
                              "other-remote", "harness-sys.path", "harness-importlib",
                              "sharded_reference", "tests.sharded_reference", "check",
                              "other-project"])
def test_the_checkers_own_code_is_refused_where_it_answers(project, stages, text):
    refused = {stage for stage in range(1, 5)
               if forbidden.scan(text, forbidden.rules_for(project, stage))}
    assert refused == set(stages), text


@pytest.mark.parametrize("project,stage,text", HELPERS_THAT_ANSWER,
                         ids=[f"{p}-{s}" for p, s, _ in HELPERS_THAT_ANSWER])
def test_a_course_helper_that_answers_a_stage_is_refused_at_that_stage(project, stage, text):
    # the guard reads a stage's own rules (scan keeps one finding a line and name)
    found = forbidden.scan(text, forbidden.rules_for(project, stage))
    assert found and {f.rule.stage for f in found} == {stage}, text
    # the rule belongs to its project: the same text passes where the helper answers nothing
    assert forbidden.scan(text, forbidden.rules_for("foundations")) == []


# Functions in coursekit/ that read the clock in a loop but are no timer to borrow (they
# time no function of the caller's), and why; every other timing loop is refused at every
# timing stage (the test below).
NOT_A_TIMER = {
    "coursekit.checking.probes.watch_until_ready": "the checker's call counter: its clock "
        "dates when an output was seen ready",
    "coursekit.checking.probes.poll": "the same watcher's polling loop",
    "coursekit.checking.contract._run_selected": "the checker's run of its checks",
    "coursekit.commands.bench.main": "make bench's runner: times benchmark files' processes",
    "coursekit.workloads.procgroup.wait_for_file": "a deadline while waiting for a file",
    "coursekit.workloads.procgroup.wait_all": "a deadline while waiting for processes",
}


def _calls(tree: ast.AST, name: str) -> bool:
    return any(isinstance(c, ast.Call) and name in (getattr(c.func, "attr", None),
                                                    getattr(c.func, "id", None))
               for c in ast.walk(tree))


def course_timing_loops() -> list[str]:
    """Every function in coursekit/ (the instructor's code apart: refused whole
    everywhere) that reads ``perf_counter`` in a loop, or reads it and waits with
    ``block_until_ready``: a timing loop, found by reading, so the next one is not missed."""
    found = []
    for path in sorted((ROOT / "coursekit").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        if module.startswith("coursekit.instructor"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            looped = any(_calls(loop, "perf_counter") for loop in ast.walk(node)
                         if isinstance(loop, (ast.For, ast.While)))
            synced = _calls(node, "perf_counter") and _calls(node, "block_until_ready")
            if (looped or synced) and f"{module}.{node.name}" not in NOT_A_TIMER:
                found.append(f"{module}.{node.name}")
    return found


def test_no_starter_holds_a_timer():
    """A starter is the solution less its solution regions: a timing helper left outside
    one (optimisation's ``_timed``, found by a reader of the learner's copy) hands a
    timing stage its synchronised sample. Every function of a starter that reads
    ``perf_counter`` is a stub."""
    held = []
    for path in sorted(ROOT.glob("projects/*/starter/model.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    _calls(node, "perf_counter") and not _calls(node, "NotImplementedError"):
                held.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert not held, held


def test_every_course_timing_loop_is_refused_at_every_timing_stage():
    loops = course_timing_loops()
    for known in ("coursekit.measure.timing.bare_loop_overhead",  # the reading finds them
                  "coursekit.measure.decision.measure_interleaved",
                  "coursekit.workloads.remote_course.time_workload"):
        assert known in loops, loops
    for project, stages in forbidden.TIMING_STAGES.items():
        for stage in stages:
            rules = forbidden.rules_for(project, stage)
            missed = [loop for loop in loops if not forbidden.scan(
                "from {} import {}\n".format(*loop.rsplit(".", 1)), rules)]
            assert not missed, (project, stage, missed)


ALLOWED_USE = {
    "optimisation": "from coursekit.measure import traces\n"
                    "from coursekit.measure.timing import count_compiles\n"
                    "from coursekit.provenance.records import make_run_record\n"
                    "from coursekit.workloads import slow_step\n"
                    "events = traces.load_events('log/x.trace.json.gz')\n"
                    "p = slow_step.make_problem({}, 0)\n",
    AUDIT: "import coursekit.measure.decision as d\n"
           "import coursekit.measure.timing as timing\n"
           "from coursekit.measure.timing import count_compiles\n"
           "with timing.count_compiles() as n: pass\n"
           "from coursekit.measure.traces import load_events\n"
           "t = d.t_quantile(0.95, 7)\n"
           "before, after = d.simulate_pair(rng, 1.2)\n"
           "def decide(): return 'coursekit.instructor'  # a string is not a use\n"
           "from jax.experimental.checkify import check  # a name, not a checker's\n"
           "import tests_of_mine.check_helpers\n",
    "foundations": "import jax\nfrom coursekit.workloads import classifier\n"
                   "def train_classifier(p, x, y):\n"
                   "    return jax.grad(classifier.loss)(p, x, y)\n"
                   "def regression_grads(p, x, y):\n    return {'w': x.T @ y, 'b': y.sum()}\n",
}


@pytest.mark.parametrize("project", sorted(ALLOWED_USE))
def test_what_the_contract_gives_stays_allowed(project):
    rules = forbidden.RULES[project]
    assert forbidden.scan(ALLOWED_USE[project], rules) == []


def test_autodiff_is_forbidden_only_inside_regression_grads_and_what_it_reaches():
    rules = forbidden.rules_for("foundations", 2, within="regression_grads")
    text = ("import jax\nfrom jax import vjp as pullback\n"
            "def _helper(p, x, y):\n    return pullback(loss, p)\n"
            "def regression_grads(p, x, y):\n    return _helper(p, x, y)\n"
            "def fit(p, x, y):\n    return jax.grad(loss)(p, x, y)\n")
    found = forbidden.scan(text, rules)
    assert [str(f) for f in found] == ["line 4: pullback = jax.vjp (in _helper)"]


def test_every_rule_names_something_that_exists():
    for project, rules in forbidden.RULES.items():
        for rule in rules:
            if rule.module == forbidden.SEALED_FILE:  # a string naming a program's file
                continue
            if rule.kind == "checker-data":  # a string naming the stored outputs' folder
                assert list(forbidden._ROOT.glob("projects/*/tests/expected/*")), rule
                continue
            if rule.kind == "checker":  # a checker's module: its file in this copy
                assert forbidden.checker_modules()[rule.module], rule
                continue
            module = importlib.import_module(rule.module)
            assert rule.name == "*" or hasattr(module, rule.name), (project, rule)
            assert rule.why.strip(), (project, rule)


def test_no_allowed_name_is_forbidden_in_the_same_project():
    for project, allowed in forbidden.ALLOWED.items():
        for entry in allowed:
            names = [entry.module] if entry.name == "*" else [f"{entry.module}.{entry.name}"]
            clash = [r for r in forbidden.rules_for(project) for n in names if r.matches(n)]
            assert not clash, (project, entry, clash)
            assert entry.why.strip()


@pytest.mark.parametrize("project", PROJECTS)
def test_reference_solutions_and_starters_use_nothing_forbidden(project):
    for path in (solution(project), starter(project)):
        assert forbidden.scan(path, forbidden.RULES[project]) == [], path
        for root in {r.within for r in forbidden.RULES[project]} - {None}:
            assert forbidden.scan(path, forbidden.rules_for(project, within=root)) == []


def test_a_file_that_does_not_parse_has_no_findings():
    assert forbidden.scan("def broken(:\n", forbidden.RULES[AUDIT]) == []


# ---------------------------------------------------------------------------------------
# The guard: every check of each stage with rules refuses such a file
# ---------------------------------------------------------------------------------------

def toy_checker(calls: list) -> Checker:
    checker = Checker(AUDIT, {3: "three", 4: "four"})
    for stage, check_id in ((3, "c3a"), (4, "c4a"), (4, "c4b")):
        checker.check(stage, check_id)(lambda impl, ctx, cid=check_id: calls.append(cid))
    return checker


def context(tmp_path: Path, text: str) -> Context:
    impl = tmp_path / "model.py"
    impl.write_text(text)
    return Context(seed=1, impl_path=impl, workdir=tmp_path, stage=4, cache={})


def test_the_guard_refuses_at_every_check_of_the_stage_naming_what_and_why(tmp_path):
    calls: list = []
    checker = toy_checker(calls)
    forbidden.guard(checker)
    forbidden.guard(checker)  # a second call changes nothing
    ctx = context(tmp_path, FORMS["module alias"])
    first, second = checker.checks[1], checker.checks[2]
    with pytest.raises(CheckFailed) as err:
        first.fn(None, ctx)
    assert "coursekit.instructor" in str(err.value) and "stage 4" in str(err.value)
    assert forbidden.WHY["instructor"] in err.value.hint
    assert err.value.yours == ["line 1: import coursekit.instructor.decision as d",
                              "line 2: d.decide_rounds"]
    # every check of the stage carries it: each is graded on its own (a learner copy's
    # reader, 2026-12-06: refused at the first check only, the others kept their points)
    with pytest.raises(CheckFailed, match="coursekit.instructor"):
        second.fn(None, ctx)
    assert calls == []
    with pytest.raises(CheckFailed, match="stage 3"):  # the instructor's code: every stage
        checker.checks[0].fn(None, ctx)
    assert calls == []


def test_the_guard_lets_a_clean_file_through_to_the_check(tmp_path):
    calls: list = []
    checker = toy_checker(calls)
    forbidden.guard(checker)
    checker.checks[1].fn(None, context(tmp_path, ALLOWED_USE[AUDIT]))
    assert calls == ["c4a"]


@pytest.mark.parametrize("project", PROJECTS)
def test_each_checker_installs_the_guard(project):
    text = (ROOT / "projects" / project / "tests" / "check.py").read_text()
    assert re.search(r"^guard\(checker\)$", text, re.M), project


# ---------------------------------------------------------------------------------------
# Each checker on a planted copy of its solution (foundations' autodiff rule has its own
# check, with planted copies in tests/test_foundations.py)
# ---------------------------------------------------------------------------------------

PLANTED = {
    "audit-instructor": (AUDIT, 4, "coursekit.instructor", [(
        '    result = {**out, "ci": [lo, hi], "decision": decision, '
        '"reasons": [f"{where} {why}"]}\n',
        "    from coursekit.instructor import decision as course\n"
        "    result = course.decide_rounds(before, after, min_gain=min_gain, "
        "confidence=confidence)\n")]),
    "pallas-lowered_mode": ("pallas-kernel", 2, "lowered_mode", [(
        '    return {"y": np.asarray(y), "mode": execution_mode(),',
        '    inspect = __import__("coursekit.measure.pallas_inspect", '
        'fromlist=["lowered_mode"])\n'
        '    return {"y": np.asarray(y), "mode": inspect.lowered_mode(softmax_pallas, x),')]),
    # issue 50 A2: the checker's own float64 softmax
    "pallas-checker-module": ("pallas-kernel", 1, "pallas_harness", [(
        "    ### BEGIN SOLUTION stage 1: softmax_numpy_f64\n",
        "    ### BEGIN SOLUTION stage 1: softmax_numpy_f64\n"
        "    from pallas_harness import ref64\n"
        "    return ref64(np.asarray(x))\n")]),
    # issue 50 A4: a course timing loop other than time_synced
    "audit-timing-loop": (AUDIT, 1, "coursekit.measure.timing", [(
        "    ### BEGIN SOLUTION stage 1: time_fn (first call apart, then synced warmed calls)\n",
        "    ### BEGIN SOLUTION stage 1: time_fn (first call apart, then synced warmed calls)\n"
        "    from coursekit.measure import timing\n"
        "    overhead = timing.bare_loop_overhead(fn, *args, iters=iters)\n")]),
}


@pytest.mark.slow
@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_each_checker_refuses_a_planted_forbidden_helper_at_its_stage(tmp_path, planted):
    project, stage, name, replacements = PLANTED[planted]
    impl = plant(tmp_path, project, f"forbidden-{planted}", replacements)
    stages = {s for s in range(1, forbidden.STAGES[project] + 1)
              if forbidden.scan(impl, forbidden.rules_for(project, s))}
    assert stage in stages, stages
    result = run_first_check(project, impl, stage)
    first = result["json"]["results"][0]
    assert first["stage"] == stage and first["status"] == "fail", result["stdout"]
    assert name in first["message"] and "course's own implementation" in first["message"]
    assert name in first["hint"] and "write it yourself" in first["hint"], first
    assert "Traceback" not in result["stdout"]


def run_first_check(project: str, impl: Path, stage: int) -> dict:
    """The stage's checks up to the first that does not pass (--fail-fast)."""
    out = impl.with_suffix(".json")
    done = subprocess.run([sys.executable, str(ROOT / "projects" / project / "tests" /
                                                "check.py"), "--stage", str(stage), "--impl",
                           str(impl), "--json", str(out), "--seed", "1", "--fail-fast"],
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    return {"stdout": done.stdout + done.stderr, "json": json.loads(out.read_text())}


def test_a_file_is_read_as_python_reads_it_its_coding_line_honoured(tmp_path):
    """Red team 2026-12-06: a model.py that declares utf-7 hides an import after "+AAo-"
    (a newline to Python, part of a comment to a UTF-8 reader). The scan reads the file's
    bytes as Python does, so the import it runs is the import it finds; ``similar`` reads
    the same text."""
    from autograder.similar import python_text
    hidden = (b"# -*- coding: utf-7 -*-\n"
              b"x = 1  #+AAo-from coursekit.instructor import peak_memory\n")
    path = tmp_path / "model.py"
    path.write_bytes(hidden)
    assert {f.rule.qualified for f in forbidden.scan(path, forbidden.rules_for(AUDIT, 3))} \
        == {"coursekit.instructor"}
    assert "\nfrom coursekit.instructor import peak_memory" in python_text(hidden)
    assert python_text("é = 1\n".encode()) == "é = 1\n"  # plain UTF-8 as before

"""Sample submissions for the grader's tests, benchmarks and the cluster recipe: good,
bad and hostile copies of performance-audit's reference solution, plus notebook
variants. Never part of a release (``autograder release`` leaves this folder out).

``build(dest, which)`` writes ``dest/<student>/projects/performance-audit/starter/model.py``
(and ``notebooks/ag_demo.ipynb`` where asked) and returns {student: expected} where
expected is (stage status, reason) for stage 4. Hostile code goes inside ``decide``
(the first thing every stage-4 check calls) or at module level when it must run at
import; each snippet is a plain text replacement of the solution, so a change in the
solution that removes an anchor fails loudly.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOLUTION = ROOT / "projects" / "performance-audit" / "solution" / "model.py"
STARTER = ROOT / "projects" / "performance-audit" / "starter" / "model.py"
NOTEBOOK = Path(__file__).resolve().parent / "ag_demo.ipynb"
# the marker line that opens decide's solution (its title may change; its start does not)
IN_DECIDE = next(line + "\n" for line in SOLUTION.read_text().splitlines()
                 if line.startswith("    ### BEGIN SOLUTION stage 4: decide"))
AT_TOP = "import jax.numpy as jnp\n"


def _inject(anchor: str, code: str) -> str:
    text = SOLUTION.read_text()
    assert text.count(anchor) == 1, f"anchor {anchor!r} not unique in {SOLUTION}"
    indent = "    " if anchor == IN_DECIDE else ""
    lines = "".join(f"{indent}{line}\n" for line in code.strip("\n").splitlines())
    return text.replace(anchor, anchor + lines)


def hostile_sources(course_root: Path = ROOT, out_dir: Path | None = None) -> dict:
    """student -> (model.py text, (expected status, expected reason or ''))."""
    solution = (course_root / "projects/performance-audit/solution/model.py").resolve()
    target = (out_dir or course_root / "build") / "gradebook.sqlite"
    return {
        "good": (SOLUTION.read_text(), ("pass", "")),
        "starter": (STARTER.read_text(), ("fail", "")),
        "infinite-loop": (_inject(IN_DECIDE, "while True:\n    pass"), ("timeout", "wall-clock")),
        "memory-bomb": (_inject(IN_DECIDE, "hoard = []\nwhile True:\n"
                                "    hoard.append(np.ones(1 << 24))"), ("memory", "")),
        "fork-bomb": (_inject(IN_DECIDE, "import os\nwhile True:\n    try:\n"
                              "        os.fork()\n    except OSError:\n        pass"),
                      ("error", "process-limit")),
        "output-flood": (_inject(IN_DECIDE, "while True:\n    print('x' * 10000)"),
                         ("error", "output-limit")),
        "abort": (_inject(IN_DECIDE, "import os\nos.abort()"), ("crash", "signal:SIGABRT")),
        "segfault": (_inject(IN_DECIDE, "import ctypes\nctypes.string_at(0)"),
                     ("crash", "signal:SIGSEGV")),
        "syntax-error": (_inject(AT_TOP, "def broken(:\n    pass"), ("error", "learner-code")),
        "missing-function": (SOLUTION.read_text().replace(
            "def predict_step_speedup(", "def predict_speedup_renamed("),
            ("error", "learner-code")),
        "always-equal": (SOLUTION.read_text().replace(
            "    return 1.0 / ((1.0 - share) + share / kernel_speedup)",
            "    return type('AlwaysEqual', (), {'__eq__': lambda s, o: True,\n"
            "                                    '__hash__': object.__hash__,\n"
            "                                    '__float__': lambda s: 0.0})()"),
            ("fail", "")),
        "fake-perf-counter": (_inject(AT_TOP, "import time as _time\n"
                                      "_time.perf_counter = lambda: 0.0"),
                              ("error", "tamper-timing")),
        "fake-block-until-ready": (_inject(AT_TOP, "jax.block_until_ready = lambda x: x"),
                                   ("error", "tamper-timing")),
        "reads-solution": (_inject(IN_DECIDE, f"""
import subprocess
try:
    print('STOLEN:', subprocess.run(['cat', {str(solution)!r}], capture_output=True,
                                    text=True).stdout[:2000])
except Exception:
    pass
open({str(solution)!r}).read()"""), ("error", "read-outside")),
        "writes-outside": (_inject(IN_DECIDE, f"""
open({str(target)!r}, 'a').write('owned')"""), ("error", "write-outside")),
        "network": (_inject(IN_DECIDE, """
import socket
socket.create_connection(('203.0.113.7', 80), timeout=3)"""), ("error", "network")),
    }


_FORGED_PASS = """
import json as _json
import os as _os
import sys as _sys
_main = _sys.modules.get("__main__")
_token = getattr(_main, "_token", "") or _os.environ.get("AG_TOKEN", "")
_lines = [_json.dumps({"kind": "check", "token": _token, "result": {
    "stage": 4, "check_id": _cid, "status": "pass", "points": 1.0, "max_points": 1.0,
    "message": "", "yours": "", "expected": "", "hint": "", "duration_s": 0.0}})
    for _cid in ("accepts_real_speedup", "rejects_noise", "rejects_faster_but_wrong",
                 "rejects_not_comparable", "amdahl_small_share")]
_lines.append(_json.dumps({"kind": "done", "token": _token, "count": 5}))
for _fd in sorted(int(_n) for _n in _os.listdir('/proc/self/fd')):
    if _fd <= 2:
        continue
    try:
        _os.write(_fd, ("\\n".join(_lines) + "\\n").encode())
    except OSError:
        pass
"""


def forging_sources() -> dict:
    """student -> (model.py text, (expected status, reason)) for submissions that try to
    forge a verdict instead of earning it (issue 17). Each implements nothing (the
    starter) or the reference with one forging step, and must score 0 with its reason."""
    starter = STARTER.read_text()
    return {
        "forge-replace-checker": (starter + """
import coursekit.checking.contract as _contract
_contract.Checker._run_one = lambda self, chk, module, ctx: _contract.CheckResult(
    chk.stage, chk.check_id, "pass", chk.points, chk.points)
""", ("error", "tamper-checker")),
        "forge-sys-modules": (starter + """
import sys as _sys
import types as _types
_fake = _types.ModuleType("coursekit.checking.contract")
_sys.modules["coursekit.checking.contract"] = _fake
""", ("error", "tamper-checker")),
        "forge-channel-and-exit": (starter + _FORGED_PASS + "_os._exit(0)\n",
                                   ("error", "tamper-evidence")),
        "forge-inherited-fds": (_inject(IN_DECIDE, _FORGED_PASS), ("error", "tamper-evidence")),
        "forge-kill-parent": (starter + """
import os as _os
import signal as _signal
_os.kill(_os.getppid(), _signal.SIGKILL)
""", ("error", "signal-outside")),
    }


def notebook_variants() -> dict:
    """student -> (edits to the learner notebook by grade_id, expected per question)."""
    good = {"square": "def square(x):\n    return x * x",
            "mean": "def mean(xs):\n    return sum(xs) / len(xs)"}
    return {
        "nb-good": (good, {"square_tests": "pass", "mean_tests": "pass"}),
        "nb-wrong": ({**good, "square": "def square(x):\n    return x + x"},
                     {"square_tests": "fail", "mean_tests": "pass"}),
        "nb-hidden-wrong": ({**good, "square": "def square(x):\n    return abs(x) * x"},
                            {"square_tests": "fail", "mean_tests": "pass"}),
        "nb-tampered": ({**good, "square": "def square(x):\n    return x + x",
                         "square_tests": "pass  # tests are for other people"},
                        {"square_tests": "fail", "mean_tests": "pass"}),
        "nb-kernel-crash": ({**good, "mean": "import os\nos.abort()"},
                            {"square_tests": "pass", "mean_tests": "crash"}),
        "nb-cell-loop": ({**good, "mean": "while True:\n    pass"},
                         {"square_tests": "pass", "mean_tests": "error"}),
    }


_GOOD_MEAN = "def mean(xs):\n    return sum(xs) / len(xs)"
_WRONG_SQUARE = "def square(x):\n    return x + x\n"


def notebook_forgers() -> dict:
    """student -> (edits, expected per question): a wrong ``square`` plus a cell that
    tries to forge the test cells after it. The tests run in the grader's test process,
    where no learner cell reaches: each scores what its answers earn (``square`` wrong,
    ``mean`` right), with nothing flagged."""
    forgers = {
        # any cell with an assert becomes `pass` before IPython compiles it
        "nb-forge-input-transformer": (
            "def _no_asserts(lines):\n"
            "    return ['pass\\n' if 'assert' in line else line for line in lines]\n"
            "get_ipython().input_transformers_cleanup.append(_no_asserts)"),
        "nb-forge-ast-transformer": (
            "import ast\n"
            "class _Drop(ast.NodeTransformer):\n"
            "    def visit_Assert(self, node):\n"
            "        return ast.Pass()\n"
            "get_ipython().ast_transformers.append(_Drop())"),
        # an AssertionError handled by a custom handler instead of reported
        "nb-forge-custom-exc": (
            "get_ipython().set_custom_exc((AssertionError,),\n"
            "                             lambda shell, *exc, **kw: None)"),
        # a trace function that jumps over every line holding an assert
        "nb-forge-settrace": (
            "import sys, linecache\n"
            "def _skip(frame, event, arg):\n"
            "    if '/ipykernel_' not in frame.f_code.co_filename:\n"
            "        return None  # only the notebook's own cells\n"
            "    if event == 'line' and 'assert' in linecache.getline(\n"
            "            frame.f_code.co_filename, frame.f_lineno):\n"
            "        try:\n"
            "            frame.f_lineno += 1\n"
            "        except ValueError:\n"
            "            pass\n"
            "    return _skip\n"
            "sys.settrace(_skip)"),
        # set and unset inside the learner's function, while the test cell runs
        "nb-forge-trace-in-test": (
            "import sys\n"
            "def square(x, _settrace=sys.settrace):\n"
            "    _settrace(lambda *a: None)\n"
            "    _settrace(None)\n"
            "    return x + x"),
        "nb-forge-allclose": (
            "import numpy.testing\n"
            "numpy.testing.assert_allclose = lambda *a, **k: None"),
        # a builtin the mean test uses, replaced for everyone / shadowed in the notebook
        "nb-forge-builtin": (
            "import builtins\nbuiltins.abs = lambda x: 0.0"),
        "nb-forge-shadow": "float = lambda x: 9.0",
        # a failed cell reported as a success
        "nb-forge-post-run-cell": (
            "def _forgive(result):\n"
            "    result.error_in_exec = None\n"
            "get_ipython().events.register('post_run_cell', _forgive)"),
        "nb-forge-run-cell": (
            "from IPython.core.interactiveshell import InteractiveShell\n"
            "_real = InteractiveShell.run_cell\n"
            "def _run_cell(self, *a, **k):\n"
            "    result = _real(self, *a, **k)\n"
            "    result.error_in_exec = None\n"
            "    return result\n"
            "InteractiveShell.run_cell = _run_cell"),
        # the grader's own probe removed, then the asserts
        "nb-forge-probe-killer": (
            "import sys\n"
            "for _name in [n for n in sys.modules if 'probe' in n]:\n"
            "    del sys.modules[_name]\n"
            "def _no_asserts(lines):\n"
            "    return ['pass\\n' if 'assert' in line else line for line in lines]\n"
            "get_ipython().input_transformers_cleanup.append(_no_asserts)"),
    }
    expected = {"square_tests": "fail", "mean_tests": "pass"}
    return {student: ({"square": _WRONG_SQUARE + code, "mean": _GOOD_MEAN}, expected)
            for student, code in forgers.items()}


def notebook_value_forgers() -> dict:
    """student -> (edits, expected per question) for answers that forge a comparison
    rather than a cell (issue 27): a value whose ``__eq__`` always says True, refused by
    the test's plain-type check (square_tests 0, ``fail``, named in the message); and a
    wrong ``mean`` with a cell that patches the library class the mean test takes its
    expected value from, in the learner's process only: the test imports its own
    (mean_tests 0, ``fail``; square_tests keeps its points)."""
    always_equal = ("class AlwaysEqual(float):\n"
                    "    def __eq__(self, other):\n"
                    "        return True\n"
                    "    __hash__ = float.__hash__\n"
                    "def square(x):\n"
                    "    return AlwaysEqual(x + x)")
    patched_library = ("def mean(xs):\n"
                       "    return sum(xs) / (len(xs) + 1)\n"
                       "import statistics\n"
                       "statistics.NormalDist.from_samples = classmethod(\n"
                       "    lambda cls, data: cls(mean(list(data)), 1.0))")
    return {
        "nb-forge-always-equal": ({"square": always_equal, "mean": _GOOD_MEAN},
                                  {"square_tests": "fail", "mean_tests": "pass"}),
        "nb-forge-library-class": ({"square": "def square(x):\n    return x * x",
                                    "mean": patched_library},
                                   {"square_tests": "pass", "mean_tests": "fail"}),
    }


def learner_notebook(edits: dict) -> dict:
    """The released fixture notebook with solution cells replaced by ``edits``."""
    import nbformat

    from autograder.nbsource import release_notebook
    nb = release_notebook(nbformat.read(str(NOTEBOOK), as_version=4))
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in edits:
            cell.source = edits[gid]
    return json.loads(nbformat.writes(nb))


def write(dest: Path, student: str, model: str | None = None, notebook: dict | None = None
          ) -> Path:
    folder = dest / student
    if model is not None:
        path = folder / "projects" / "performance-audit" / "starter" / "model.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(model)
    if notebook is not None:
        path = folder / "notebooks" / "ag_demo.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(copy.deepcopy(notebook)))
    folder.mkdir(parents=True, exist_ok=True)
    return folder

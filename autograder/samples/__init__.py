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
IN_DECIDE = "    ### BEGIN SOLUTION stage 4: decide\n"
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

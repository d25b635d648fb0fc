"""Build the autograder's fixture notebook (tiny, no JAX, so a kernel runs it in a blink).

    .venv/bin/python -m autograder.samples.make_notebooks

Writes ``ag_demo.ipynb`` next to this file: an nbgrader source notebook with
two solution cells, two autograded test cells that carry hidden tests (each hidden
assert has a unique marker text the feedback tests search for), one manually graded
answer, and a ``parameters`` cell. Stored without outputs.

The square test takes the learner's value only as a plain int or float (an always-equal
subclass is refused by name). The mean test takes its expected value from a library class,
``statistics.NormalDist``, on purpose: course notebooks write expected values as constants
(tests/test_notebook_tests_plain.py), and this fixture keeps a patched library a test
relies on as a case the grader must contain: its test process imports the library fresh,
so a learner cell that patches it patches only its own process.
"""

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
HIDDEN_MARKERS = ("HIDDEN-MARKER-square", "HIDDEN-MARKER-mean")


def nbg(grade_id: str, *, grade: bool, solution: bool, locked: bool = False,
        points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked,
            "schema_version": 3, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def build() -> nbformat.NotebookNode:
    cells = [
        new_markdown_cell("# Autograder fixture\nTwo small functions, checked by tests."),
        new_code_cell("N = 5  # papermill may override", metadata={"tags": ["parameters"]}),
        new_code_cell("def square(x):\n    ### BEGIN SOLUTION\n    return x * x\n"
                      "    ### END SOLUTION", metadata=nbg("square", grade=False, solution=True)),
        new_code_cell("_v = square(3)\n"
                      "assert type(_v) is int or type(_v) is float, \\\n"
                      "    f'square should return a plain number, not {type(_v).__name__}'\n"
                      "assert _v == 9, 'square(3) should be 9'\n"
                      "### BEGIN HIDDEN TESTS\n"
                      f"assert float(square(-4)) == 16.0, '{HIDDEN_MARKERS[0]}'\n"
                      "### END HIDDEN TESTS",
                      metadata=nbg("square_tests", grade=True, solution=False, locked=True,
                                   points=2)),
        new_code_cell("def mean(xs):\n    ### BEGIN SOLUTION\n    return sum(xs) / len(xs)\n"
                      "    ### END SOLUTION", metadata=nbg("mean", grade=False, solution=True)),
        new_code_cell("import statistics\n\n"
                      "_want = statistics.NormalDist.from_samples([1, 2, 3]).mean\n"
                      "assert abs(float(mean([1, 2, 3])) - _want) < 1e-12\n"
                      "### BEGIN HIDDEN TESTS\n"
                      "_want = statistics.NormalDist.from_samples([2.5, N]).mean\n"
                      f"assert abs(float(mean([2.5, N])) - _want) < 1e-12, "
                      f"'{HIDDEN_MARKERS[1]}'\n"
                      "### END HIDDEN TESTS",
                      metadata=nbg("mean_tests", grade=True, solution=False, locked=True,
                                   points=1)),
        new_markdown_cell("Why is the mean of an empty list undefined? Answer below."),
        new_markdown_cell("Nothing to divide by: the count is zero.",
                          metadata=nbg("why_empty", grade=True, solution=True, points=1)),
        new_code_cell("print('done', square(N), mean([1, N]))"),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "jax-perf-course", "language": "python",
                                 "display_name": "JAX perf course (Python 3.12, CPU)"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["course"] = {"ci_parameters": {"N": 7}}
    return nb


if __name__ == "__main__":
    out = HERE / "ag_demo.ipynb"
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(build(), str(out))
    print(f"wrote {out}")

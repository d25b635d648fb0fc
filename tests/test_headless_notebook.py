"""coursekit.notebook.headless: a notebook's cells run in an IPython shell in a plain
process (no Jupyter kernel, no sockets), as on the accelerator machine."""

from __future__ import annotations

import subprocess
import sys

import nbformat

CELLS = [
    ("N = 1", ["parameters"]),
    ("print('n is', N)\nimport sys; print('to stderr', file=sys.stderr)", []),
    ("from IPython.display import display, HTML\ndisplay(HTML('<b>hi</b>'))\nN * 10", []),
    ("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])", []),
    ("raise NotImplementedError('stage 1: not yet')", ["raises-exception"]),
    ("get_ipython().run_line_magic('time', 'x = 2')\nprint('after', x)", []),
]


def notebook(extra=()):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src, metadata={"tags": tags})
                for src, tags in [*CELLS, *extra]]
    return nb


def run(tmp_path, nb, *args):
    src, out = tmp_path / "in.ipynb", tmp_path / "out.ipynb"
    nbformat.write(nb, src)
    done = subprocess.run([sys.executable, "-m", "coursekit.notebook.headless", str(src),
                           str(out), *args], capture_output=True, text=True, timeout=120)
    return done, nbformat.read(out, as_version=4)


def test_cells_run_with_parameters_outputs_and_allowed_errors(tmp_path):
    done, nb = run(tmp_path, notebook(), "-p", "N=4")
    assert done.returncode == 0, done.stderr
    assert "injected-parameters" in nb.cells[1].metadata["tags"]
    by_source = {c.source.splitlines()[0]: c for c in nb.cells}
    printed = by_source["print('n is', N)"].outputs
    assert printed[0] == {"output_type": "stream", "name": "stdout", "text": "n is 4\n"}
    assert printed[1]["name"] == "stderr"
    shown = by_source["from IPython.display import display, HTML"].outputs
    assert shown[0]["data"]["text/html"] == "<b>hi</b>"
    assert shown[1]["output_type"] == "execute_result" and shown[1]["data"]["text/plain"] == "40"
    figure = by_source["import matplotlib.pyplot as plt"].outputs
    assert any("image/png" in o.get("data", {}) for o in figure)
    stub = by_source["raise NotImplementedError('stage 1: not yet')"].outputs
    assert stub[-1]["output_type"] == "error" and stub[-1]["ename"] == "NotImplementedError"
    assert "after 2" in by_source["get_ipython().run_line_magic('time', 'x = 2')"] \
        .outputs[-1]["text"]


def test_an_unexpected_error_stops_the_run_and_keeps_what_ran(tmp_path):
    done, nb = run(tmp_path, notebook([("1 / 0", []), ("print('never')", [])]))
    assert done.returncode == 1
    assert "ZeroDivisionError" in done.stderr
    assert nb.cells[-2].outputs[-1]["ename"] == "ZeroDivisionError"
    assert nb.cells[-1].outputs == [] and nb.metadata["headless"]["exception"] is True

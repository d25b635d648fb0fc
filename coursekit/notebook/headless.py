"""Run a notebook's cells in this process, in an IPython shell: no Jupyter kernel, no sockets.

    python -m coursekit.notebook.headless IN.ipynb OUT.ipynb [-p NAME=VALUE ...]
        [--cwd DIR] [--timeout S] [--allow-errors]

papermill needs a Jupyter kernel, and a kernel needs sockets: the accelerator machine
refuses every TCP and UDP socket, and an IPC kernel dies binding its heartbeat. The same
cells run here in an IPython ``InteractiveShell`` inside a plain process, so magics,
``display()``, ``get_ipython()`` and rich reprs behave as in JupyterLab, and each cell's
outputs (stdout, stderr, display data, its result, its error) are kept in nbformat form.
Parameters go in as papermill does it: an ``injected-parameters`` cell after the cell
tagged ``parameters``. A cell tagged ``raises-exception`` may raise (a learner's stub);
any other error stops the run (``CellError``) after the executed copy is written, as
papermill does. Figures left open by a cell are kept as PNG outputs and closed, as the
inline backend does.

One notebook per process: a notebook may set process-wide state before JAX starts
(notebook 05 asks for 8 CPU devices), so callers run each notebook in a fresh process
(``python -m coursekit.notebook.headless``). The grader's notebook route runs learner
cells through ``CellRunner`` in its learner process.
"""

from __future__ import annotations

import argparse
import ast
import base64
import contextlib
import io
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ALLOWED_ERROR_TAG = "raises-exception"  # as coursekit.facts (stdlib-only import kept light)


@dataclass
class CellResult:
    outputs: list = field(default_factory=list)  # nbformat output dicts
    error: dict | None = None                    # {"ename", "evalue", "traceback"} or None
    execution_count: int | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None


class CellError(Exception):
    """A cell raised where no error was allowed (papermill's PapermillExecutionError)."""

    def __init__(self, index: int, ename: str, evalue: str, traceback: list[str]):
        super().__init__(f"cell {index}: {ename}: {evalue}")
        self.index, self.ename, self.evalue, self.traceback = index, ename, evalue, traceback


class _Stream(io.TextIOBase):
    """sys.stdout / sys.stderr during a cell: text goes into the cell's outputs, runs of
    one stream merged into one output as Jupyter shows them."""

    def __init__(self, sink: list, name: str):
        self.sink, self.name = sink, name

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        if not text:
            return 0
        last = self.sink[-1] if self.sink else None
        if last and last.get("output_type") == "stream" and last.get("name") == self.name:
            last["text"] += text
        else:
            self.sink.append({"output_type": "stream", "name": self.name, "text": text})
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _shell_class():
    """The InteractiveShell subclass (built on first use: IPython imports in seconds)."""
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

    class Publisher(DisplayPublisher):
        def publish(self, data, metadata=None, source=None, *, transient=None,
                    update=False, **kwargs):
            self.shell.cell_outputs.append({"output_type": "display_data",
                                            "data": _jsonable(data),
                                            "metadata": metadata or {}})

        def clear_output(self, wait=False):
            self.shell.cell_outputs.clear()

    class Hook(DisplayHook):
        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            self.shell.cell_outputs.append({
                "output_type": "execute_result", "data": _jsonable(format_dict),
                "metadata": md_dict or {}, "execution_count": self.shell.execution_count})

    class HeadlessShell(InteractiveShell):
        displayhook_class = Hook
        display_pub_class = Publisher

        def __init__(self, **kwargs):
            self.cell_outputs: list = []
            self.cell_error: dict | None = None
            super().__init__(**kwargs)

        def _showtraceback(self, etype, evalue, stb):
            self.cell_error = {"ename": getattr(etype, "__name__", str(etype)),
                               "evalue": str(evalue), "traceback": list(stb)}
            self.cell_outputs.append({"output_type": "error", **self.cell_error})

        def enable_gui(self, gui=None):  # no event loop here: `%matplotlib inline` is a no-op
            pass

    return HeadlessShell


def _jsonable(data: dict) -> dict:
    """A mime bundle as nbformat stores it (bytes base64, everything else as JSON)."""
    out = {}
    for mime, value in (data or {}).items():
        if isinstance(value, bytes):
            value = base64.b64encode(value).decode()
        out[mime] = value
    return out


def _figures() -> list:
    """Open matplotlib figures as PNG display outputs (then closed), as the inline backend
    shows them after a cell."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    shown = []
    for num in plt.get_fignums():
        buffer = io.BytesIO()
        plt.figure(num).savefig(buffer, format="png", bbox_inches="tight")
        shown.append({"output_type": "display_data", "metadata": {},
                      "data": {"image/png": base64.b64encode(buffer.getvalue()).decode(),
                               "text/plain": f"<Figure {num}>"}})
    plt.close("all")
    return shown


class CellRunner:
    """Cells run one after another in one IPython shell of this process (one namespace,
    as in a kernel)."""

    def __init__(self):
        os.environ.setdefault("MPLBACKEND", "Agg")
        self.shell = _shell_class().instance()

    @property
    def namespace(self) -> dict:
        return self.shell.user_ns

    def run(self, source: str, timeout: float | None = None) -> CellResult:
        shell = self.shell
        shell.cell_outputs, shell.cell_error = [], None
        started = time.perf_counter()
        with contextlib.redirect_stdout(_Stream(shell.cell_outputs, "stdout")), \
                contextlib.redirect_stderr(_Stream(shell.cell_outputs, "stderr")), \
                _alarm(timeout):
            result = shell.run_cell(source, store_history=True)
        outputs = shell.cell_outputs + _figures()
        error = shell.cell_error
        if error is None and not result.success:  # e.g. a SyntaxError shown another way
            err = result.error_in_exec or result.error_before_exec
            error = {"ename": type(err).__name__, "evalue": str(err), "traceback": []}
            outputs.append({"output_type": "error", **error})
        return CellResult(outputs, error, result.execution_count,
                          round(time.perf_counter() - started, 3))


class CellTimeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float | None, error):
    """Raise ``error()`` inside the block after ``seconds`` (main thread only: a signal
    is delivered there; elsewhere, or without a limit, the block runs unbounded)."""
    import threading
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def ring(_signum, _frame):
        raise error()
    previous = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _alarm(timeout: float | None):
    """Raise CellTimeout inside the cell after ``timeout`` seconds (main thread only)."""
    return time_limit(timeout, lambda: CellTimeout(f"the cell ran past its {timeout:g} s "
                                                   "limit"))


def parameter_cell(parameters: dict):
    """papermill's ``injected-parameters`` cell for ``parameters``."""
    import nbformat
    lines = ["# Parameters"] + [f"{name} = {value!r}" for name, value in parameters.items()]
    return nbformat.v4.new_code_cell("\n".join(lines) + "\n",
                                     metadata={"tags": ["injected-parameters"]})


def with_parameters(nb, parameters: dict | None):
    """``nb`` with the parameters cell after the one tagged ``parameters`` (or first), a
    previous injected cell replaced, as papermill does."""
    if not parameters:
        return nb
    cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]
    at = next((i + 1 for i, c in enumerate(cells)
               if "parameters" in c.metadata.get("tags", [])), 0)
    cells.insert(at, parameter_cell(parameters))
    nb.cells = cells
    return nb


def execute_notebook(nb, output_path: str | Path | None = None, *,
                     parameters: dict | None = None, cwd: str | Path | None = None,
                     timeout: float | None = None, allow_errors: bool = False):
    """Run every code cell of ``nb`` in order, in this process, and return it with outputs
    (written to ``output_path`` after every cell, so a run stopped halfway keeps what it
    ran). Raises ``CellError`` at the first error in a cell not tagged
    ``raises-exception`` (unless ``allow_errors``)."""
    import nbformat
    nb = with_parameters(nb, parameters)
    runner = CellRunner()
    started = time.perf_counter()
    nb.metadata["headless"] = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                               "python": sys.version.split()[0], "exception": None}
    where = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            result = runner.run(cell.source, timeout=timeout)
            cell.outputs = [nbformat.from_dict(o) for o in result.outputs]
            cell.execution_count = result.execution_count
            cell.metadata["execution"] = {"seconds": result.seconds}
            allowed = allow_errors or ALLOWED_ERROR_TAG in cell.metadata.get("tags", [])
            if result.error is not None and not allowed:
                nb.metadata["headless"]["exception"] = True
                _save(nb, output_path, started)
                raise CellError(index, result.error["ename"], result.error["evalue"],
                                result.error["traceback"])
            _save(nb, output_path, started)
    finally:
        os.chdir(where)
    return nb


def _save(nb, output_path, started: float) -> None:
    nb.metadata["headless"]["seconds"] = round(time.perf_counter() - started, 2)
    if output_path is not None:
        import nbformat
        Path(output_path).parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, str(output_path))


def parse_value(text: str):
    """A parameter's value: a Python literal when it reads as one, else the text."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coursekit.notebook.headless",
        description="Run a notebook's cells in an IPython shell in this process (no kernel).")
    parser.add_argument("notebook")
    parser.add_argument("output")
    parser.add_argument("-p", "--parameter", action="append", default=[],
                        metavar="NAME=VALUE", help="a parameter (a Python literal or text)")
    parser.add_argument("--parameters-json", help="parameters as one JSON object")
    parser.add_argument("--cwd", help="run the cells in this folder (default: the notebook's)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per cell")
    parser.add_argument("--allow-errors", action="store_true")
    args = parser.parse_args(argv)
    import nbformat
    params = json.loads(args.parameters_json) if args.parameters_json else {}
    for item in args.parameter:
        name, _, value = item.partition("=")
        params[name] = parse_value(value)
    nb = nbformat.read(args.notebook, as_version=4)
    cwd = args.cwd or str(Path(args.notebook).resolve().parent)
    try:
        execute_notebook(nb, args.output, parameters=params, cwd=cwd, timeout=args.timeout,
                         allow_errors=args.allow_errors)
    except CellError as err:
        print(f"headless: stopped at {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

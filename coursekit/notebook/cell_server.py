"""The notebook learner process: a handed-in notebook's own cells run here, in an IPython
shell (``coursekit.notebook.headless.CellRunner``), and nothing here grades them.

The grader's test process (``coursekit.notebook.graded_run``) starts it the way every
learner process starts, ``bridge.LearnerProcess(<folder>/<name>.ipynb)``: the learner
server (``coursekit.checking.learner_server``) sees a notebook instead of a learner file
and serves it with ``NotebookServer`` (a learner process in the grader's jail runs as the
learner's own uid with its own HOME and temporary folder; this mode gets that for free).
Requests, besides the bridge's ``call`` and ``export`` (which here reach the notebook's
namespace, ``NamespaceView``):

* ``cell``: run one cell's source (a learner cell, or a locked course cell from the
  grading key; never a test cell) with a time limit; the answer is its error (name and
  text), whether it ran past the limit, how many bytes of output it made, and its stream
  text, cut to ``TEXT_CAP`` (the test process shows a check cell's);
* ``names``: what each name the next test cell reads is in the notebook's namespace:
  missing, a callable (the test process calls it here, by name), or a value sent as data
  (``coursekit.checking.codec``: JSON and raw array buffers; whatever is not data stays
  here as a handle).

Process-wide state a notebook sets before JAX starts (notebook 05's device count) still
works: this process imports IPython and numpy, never JAX, before the first cell.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from coursekit.checking.learner_server import Server

TEXT_CAP = 4000     # characters of a cell's stream text sent back (check cells print ~1 KB)
ERROR_CAP = 2000    # characters of an error's text


class NamespaceView:
    """The notebook's namespace where the bridge looks up a learner module's functions
    (``Server.learner_function``): ``call`` and ``export`` reach the notebook's names."""

    def __init__(self, namespace: dict):
        self._namespace = namespace

    def __getattr__(self, name: str):
        try:
            return self._namespace[name]
        except KeyError:
            raise AttributeError(f"name {name!r} is not defined in the notebook") from None


def _text(outputs: list) -> str:
    text = "".join(str(o.get("text", "")) for o in outputs if o.get("output_type") == "stream")
    return text[:TEXT_CAP]


def _size(outputs: list) -> int:
    size = 0
    for o in outputs:
        size += len(str(o.get("text", "")))
        for value in (o.get("data") or {}).values():
            size += len(value) if isinstance(value, str) else len(str(value))
    return size


class NotebookServer(Server):
    """``Server`` for a notebook: ``load`` starts an IPython shell in the notebook's
    folder instead of importing a file."""

    def load(self) -> None:
        from coursekit.notebook.headless import CellRunner
        os.chdir(self.impl_path.parent)
        records = os.environ.get("COURSE_RECORDS")
        if records and "MLFLOW_TRACKING_URI" not in os.environ:  # its own store (notebook 00)
            os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{Path(records) / 'mlflow.db'}"
        self.before = {}  # no verdict lives here: nothing of the checker's to watch
        self.runner = CellRunner()
        self.module = NamespaceView(self.runner.namespace)
        self.reply({"kind": "ready", "pid": os.getpid(), "functions": [], "unwritten": {},
                    "load_error": None, "notebook": True})

    def handle(self, header: dict, buffers: list) -> None:
        kind = header.get("kind")
        if kind == "cell":
            self.run_cell(str(header.get("source", "")), header.get("timeout"))
        elif kind == "names":
            self.describe([str(n) for n in header.get("names") or []])
        else:
            super().handle(header, buffers)

    def answer(self, value: dict, encoder=None) -> None:
        from coursekit.checking.codec import Encoder
        encoder = encoder or Encoder(keep=self.handles)
        tree = {"$": "dict", "v": {k: v if isinstance(v, dict) and "$" in v else encoder(v)
                                   for k, v in value.items()}}
        self.reply({"kind": "result", "value": tree}, encoder.buffers)

    def run_cell(self, source: str, timeout) -> None:
        result = self.runner.run(source, timeout=float(timeout) if timeout else None)
        error = None
        if result.error is not None:
            error = {"ename": str(result.error.get("ename", "Error"))[:200],
                     "evalue": str(result.error.get("evalue", ""))[:ERROR_CAP]}
        sys.stdout.flush()
        self.answer({"error": error,
                     "timeout": bool(error and error["ename"] == "CellTimeout"),
                     "output_bytes": _size(result.outputs), "text": _text(result.outputs),
                     "seconds": float(result.seconds)})

    def describe(self, names: list[str]) -> None:
        """Each name as {"missing": True}, {"module": True}, {"callable": True} or
        {"value": data}; one value that cannot be read says so without the others."""
        import types

        from coursekit.checking.codec import Encoder
        namespace = self.runner.namespace
        encoder = Encoder(keep=self.handles)
        found = {}
        for name in names:
            if name not in namespace:
                found[name] = encoder({"missing": True})
                continue
            value = namespace[name]
            if isinstance(value, types.ModuleType):
                found[name] = encoder({"module": True})
            elif callable(value):
                found[name] = encoder({"callable": True})
            else:
                try:
                    found[name] = encoder({"value": value})
                except Exception as err:  # noqa: BLE001 - a value whose conversion raises
                    found[name] = encoder({"error": f"{type(err).__name__}: {err}"[:ERROR_CAP]})
        self.answer(found, encoder)

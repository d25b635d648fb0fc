"""Grader side of the notebook tamper probe: earlier cells must not be able to forge a
graded test cell (an input transformer that turns ``assert`` into ``pass``, a custom
exception handler, ``sys.settrace``, a replaced ``numpy.testing`` function or builtin, a
patched ``run_cell`` or an event callback...).

Before the first cell the kernel gets ``autograder/tamper_probe.py`` and records the
originals; before and after every graded cell :class:`Probe` asks it, as a user
expression on the kernel's shell channel (no cell, so no transformer or event runs), what
changed since. Answers are HMAC-signed with a per-kernel key; an answer that is missing,
unsigned or signed wrongly is a finding too. Findings make the notebook
``error``/``tamper-notebook`` (``autograder.notebook.score``).

The probe also watches the libraries the notebook's test cells call (``watch_targets``,
computed from the source notebook when its grading key is built): each dotted name a test
cell reaches through the course's imports or its own (``jax.random.key_data``,
``np.asarray``, ``record_prediction`` from ``coursekit.notebook.cells``), plus, for jax
and numpy, the namespaces and classes a test's values pass through without being named
(``jax.stages.Compiled`` and ``Lowered``: ``cost_analysis``, ``memory_analysis``). The
probe imports them before the first learner cell and reports a replaced function, class
attribute or module.
"""

from __future__ import annotations

import ast
import builtins
import hashlib
import hmac
import queue
import secrets
import time
from pathlib import Path

PROBE_SOURCE = Path(__file__).with_name("tamper_probe.py")
ANSWER_TIMEOUT_S = 90.0  # an idle kernel answers in milliseconds; a loaded 2-core grader
# running two workers beside JAX threads must never turn slowness into a tamper finding


# Watched whenever a test cell uses the key's package: what a test's values pass through
# without the test naming it (a patched Compiled.cost_analysis forged notebook 03's
# expected value, issue 27) and the namespaces tests reach into most.
ALSO_WATCHED = {
    "jax": ("jax.numpy", "jax.random", "jax.lax", "jax.nn", "jax.tree_util", "jax.tree",
            "jax.stages.Compiled", "jax.stages.Lowered", "jax.stages.Traced",
            "jax.stages.Wrapped"),
    "numpy": ("numpy.random", "numpy.linalg", "numpy.testing"),
}


def _imports(tree: ast.AST) -> dict[str, str]:
    """name -> the dotted name it is bound to by the import statements in ``tree``."""
    bound = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                bound[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _parse(source: str) -> ast.AST | None:
    """A code cell's syntax tree; IPython magics and shell escapes (lines starting with
    ``%`` or ``!``) are dropped, a cell that still does not parse is skipped."""
    lines = [line for line in source.split("\n") if not line.lstrip().startswith(("%", "!"))]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def watch_targets(nb) -> list[str]:
    """The dotted names the graded test cells of source notebook ``nb`` call or read
    through an import (the course's cells' imports or the test cell's own), with
    ``ALSO_WATCHED`` for the packages they use. Learner (solution) cells bind nothing
    here: what they import is not what the course's tests rely on."""
    course, tests = {}, []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or (meta.get("solution") and not meta.get("grade")):
            continue
        tree = _parse(cell.get("source", ""))
        if tree is None:
            continue
        course.update(_imports(tree))
        if meta.get("grade") and meta.get("locked"):
            tests.append(tree)
    found = set()
    for tree in tests:
        bound = {**course, **_imports(tree)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.update(_imports(node).values())
            parts = []
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name) and node.id in bound:
                found.add(".".join([bound[node.id], *reversed(parts)]))
    for top in {name.split(".")[0] for name in found}:
        found.update(ALSO_WATCHED.get(top, ()))
    # a name and the longer names under it: the longest say the most (a module's own
    # entry still comes from the longer name's path)
    return sorted(n for n in found if not any(o.startswith(n + ".") for o in found))


def builtins_used(source: str) -> list[str]:
    """Builtin names a test cell reads (a notebook that redefines one forges it)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
             and isinstance(n.ctx, ast.Load) and hasattr(builtins, n.id)}
    assigned = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                and isinstance(n.ctx, ast.Store)}
    return sorted(names - assigned)


class Probe:
    """One kernel's probe: ``start`` before any learner cell, ``check`` around graded
    cells. Both return a list of findings (sentences); ``start`` failing is a grader
    problem (no learner code has run yet) and switches the probe off."""

    def __init__(self, client):
        self.client = client
        self.key = secrets.token_bytes(32)
        self.module = f"_autograder_probe_{secrets.token_hex(8)}"
        self.active = False
        self.error = ""

    def start(self, targets: list[str] = ()) -> None:
        """Install the probe; ``targets``: what the test cells call (``watch_targets``).
        A target the kernel cannot import is named in ``error`` for the instructor (the
        probe still runs)."""
        code = (PROBE_SOURCE.read_text() + f"\ninstall({self.key.hex()!r}, {self.module!r}, "
                f"{[str(t) for t in targets]!r})\ndel install\n")
        ok, text = self._ask(code, "start", ())
        first, _, rest = text.partition("\n")
        self.active = ok and first == "started"
        if not self.active:
            self.error = f"tamper probe not installed: {text}"[:300]
        elif rest:
            self.error = f"tamper probe: {rest}"[:300]

    def check(self, names: list[str], arm: bool) -> list[str]:
        """Findings so far; ``arm``: a graded cell runs next (the probe then also
        watches, through an audit hook, for changes made and undone inside it)."""
        if not self.active:
            return []
        ok, text = self._ask("", "probe", names, arm)
        if not ok:
            return [text]
        return [line for line in text.split("\n") if line]

    def _ask(self, code: str, method: str, names, arm: bool = False) -> tuple[bool, str]:
        from jupyter_core.utils import run_sync
        nonce = secrets.token_hex(16)
        args = f"{nonce!r}" + (f", {list(names)!r}, {arm!r}" if method == "probe" else "")
        expr = f"__import__('sys').modules[{self.module!r}].{method}({args})"
        reply = run_sync(self._reply)(code, expr)
        if reply is None:
            return False, "the grader's probe got no answer from the kernel"
        found = reply.get("user_expressions", {}).get("r", {})
        if reply.get("status") != "ok" or found.get("status") != "ok":
            return False, ("the grader's probe was refused: " +
                           f"{found.get('ename') or reply.get('ename', '')}".strip())
        try:
            answer = ast.literal_eval(found["data"]["text/plain"])
            mac, text = answer.split("|", 1)
        except (KeyError, TypeError, ValueError, SyntaxError):
            return False, "the grader's probe was answered by something else"
        want = hmac.new(self.key, f"{nonce}\n{text}".encode(), hashlib.sha256).hexdigest()
        if not hmac.compare_digest(mac, want):
            return False, "the grader's probe was answered by something else (bad signature)"
        return True, text

    async def _reply(self, code: str, expr: str) -> dict | None:
        from jupyter_core.utils import ensure_async
        kc = self.client.kc
        msg_id = kc.execute(code, silent=True, store_history=False,
                            user_expressions={"r": expr}, allow_stdin=False)
        deadline = time.monotonic() + ANSWER_TIMEOUT_S
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = await ensure_async(kc.shell_channel.get_msg(timeout=left))
            except queue.Empty:
                return None
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return msg.get("content", {})
        return None

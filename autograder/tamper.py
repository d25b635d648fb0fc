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

    def start(self) -> None:
        code = (PROBE_SOURCE.read_text() +
                f"\ninstall({self.key.hex()!r}, {self.module!r})\ndel install\n")
        ok, text = self._ask(code, "start", ())
        self.active = ok and text == "started"
        if not self.active:
            self.error = f"tamper probe not installed: {text}"[:300]

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

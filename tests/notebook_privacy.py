"""What an executed notebook's outputs must never hold: a handed-in notebook carries them
(issue 46: notebook 05's first cell once showed the whole ``os.environ``, tokens included).

``private_in_outputs(nb)`` names, per output, the environment's contents (a dump of it, or
a planted probe value: ``PROBE_ENV``, which the headless runs set before the kernel starts),
anything shaped like a token or a secret, this machine's host name and the home folder.
"""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

PROBE_ENV = "COURSE_PRIVACY_PROBE"
TOKEN = re.compile(
    r"(?:\b(?:token|secret|password|passwd|api[_-]?key|access[_-]?key)\b['\"]?\s*[=:]\s*"
    r"['\"]?[A-Za-z0-9_\-./+]{8,})"
    r"|\bghp_[A-Za-z0-9]{20,}|\bgithub_pat_\w{20,}|\bxox[baprs]-[\w-]{10,}"
    r"|\bsk-[A-Za-z0-9]{20,}|\bAKIA[0-9A-Z]{16}\b", re.I)


def output_texts(nb) -> list[tuple[int, str]]:
    """(cell index, text) of every output: streams, results and displays (plain text and
    HTML), errors with their tracebacks."""
    out = []
    for index, cell in enumerate(nb["cells"] if isinstance(nb, dict) else nb.cells):
        for o in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            parts = [o.get("text", "")]
            data = o.get("data") or {}
            parts += [data.get(kind, "") for kind in ("text/plain", "text/html", "text/markdown")]
            parts += [o.get("ename", ""), o.get("evalue", ""), *o.get("traceback", [])]
            text = "\n".join("".join(p) if isinstance(p, list) else str(p) for p in parts)
            if text.strip():
                out.append((index, text))
    return out


def _dump_of(text: str, env) -> bool:
    """The environment itself shown: its repr, or four or more of its own name-value
    pairs (os.environ printed as a dict, or ``env`` output)."""
    if "environ({" in text:
        return True
    pairs = sum(1 for k, v in env.items() if len(k) >= 3 and len(v) >= 3
                and (f"'{k}': '{v}'" in text or f"{k}={v}" in text))
    return pairs >= 4


def private_in_outputs(nb, env=None, host: str | None = None,
                       home: str | None = None) -> list[str]:
    env = dict(os.environ) if env is None else env
    host = socket.gethostname() if host is None else host
    home = str(Path.home()) if home is None else home
    probe = env.get(PROBE_ENV, "")
    found = []
    for index, text in output_texts(nb):
        where = f"cell {index}"
        if _dump_of(text, env):
            found.append(f"{where}: the environment's contents")
        if len(probe) >= 8 and probe in text:
            found.append(f"{where}: the value of ${PROBE_ENV}")
        found += [f"{where}: a token or secret ({m.group(0)[:24]}...)" for m in
                  TOKEN.finditer(text)]
        if len(host) >= 4 and host != "localhost" and re.search(
                rf"(?<![\w-]){re.escape(host)}(?![\w-])", text):
            found.append(f"{where}: this machine's host name")
        if home not in ("", "/") and re.search(rf"{re.escape(home)}(?:/|\b)", text):
            found.append(f"{where}: the home folder ({home})")
    return found

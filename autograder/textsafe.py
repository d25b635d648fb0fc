"""Learner text as data in the grader's outputs: one escape per format.

Anything a learner controls (an exception's message, a name, a file name, notebook text,
a value their code printed) reaches feedback, the CSV and LMS files, the class report,
``similar``, ``diff`` and the logs. Written raw it can start a Markdown heading, a status
line or a total (``## graded again by hand``, ``**Total: 99 / 99 points**``), raw HTML
(``<img src=x onerror=...>``), a spreadsheet formula, or a new line in a log. Each writer
passes learner text through the function for its format:

    md_inline(text)     one Markdown line: newlines and control characters made visible,
                        every character Markdown or HTML could read escaped
    md_block(text)      a fenced block (a fence longer than any backtick run inside)
    cell(text)          a spreadsheet cell: OWASP's formula characters (= + - @, tab,
                        carriage return) get a leading apostrophe
    line(text)          one log or terminal line: control characters made visible
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\u0085\u2028\u2029]")
# ``_`` and ``~`` inside a word (``jane_doe``, ``jane~doe``) emphasise nothing: kept
_MD_SPECIAL = re.compile(r"([\\`*\[\]<>#!|&]|(?<![^\W_])[_~]|[_~](?![^\W_]))")
# first on a line only: "- x", "+ x" and "1. x" start a list
_LEADING = re.compile(r"^(\s*)([-+=]|\d+[.)])")
FORMULA_FIRST = ("=", "+", "-", "@", "\t", "\r")


def line(text: object) -> str:
    """``text`` on one line: newlines as ``⏎``, other control characters as ``\\xNN``."""
    text = str(text).replace("\r\n", "\n").replace("\n", " ⏎ ")
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def md_inline(text: object) -> str:
    """``text`` as literal text inside one Markdown line (a list item, a table cell, a
    heading): nothing in it can end the line, open a heading, emphasis, link, code, HTML
    or an entity, or split a table cell."""
    escaped = _MD_SPECIAL.sub(r"\\\1", line(text))
    return _LEADING.sub(lambda m: m.group(1) + _escape_last(m.group(2)), escaped)


def _escape_last(marker: str) -> str:
    """``-`` -> ``\\-``, ``12.`` -> ``12\\.``: the character that makes it a marker."""
    return marker[:-1] + "\\" + marker[-1]


def md_block(text: object, indent: str = "") -> list[str]:
    """``text`` as a fenced block of Markdown lines (each prefixed with ``indent``):
    shown as it is, read as nothing."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}",
                        str(text).replace("\r\n", "\n").replace("\r", "\n"))
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return [indent + fence + "text", *(indent + t for t in text.split("\n")),
            indent + fence]


def cell(text: object) -> str:
    """A spreadsheet text cell that no spreadsheet runs as a formula."""
    text = str(text)
    return "'" + text if text.startswith(FORMULA_FIRST) else text

"""Limits on what the grader's own process reads from a submitted notebook.

The grader parses, validates and restores a notebook in its parent process, outside the
sandbox and its wall clock: a notebook of 300,000 cells kept that process busy for about
20 minutes before it scored 0, and one of 29 MiB holding ten million empty ``{}`` in cell
metadata (within the byte, cell and depth limits) took 200 s and 8.4 GB there. Everything
here runs before nbformat sees the file, in time bounded by the file's size: the size (one
``stat``), the number of cells and of JSON values (counted in the bytes, before any
object is built), the JSON nesting depth and the cell count (one parse, then one
iterative walk). A refusal is a reason of its own (``autograder.outcomes``) with a sentence
that says which limit and by how much.

The bounds are far above any honest notebook (the course's largest has about 80 cells
and 60 KB; executed with every plot inline, well under 5 MB) and far below what costs
the grader minutes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from coursekit.facts import TooBig, read_bounded, size_past

MAX_BYTES = 32 << 20   # a notebook file, outputs included
MAX_CELLS = 2_000      # cells of any kind
MAX_DEPTH = 64         # nesting of JSON objects and arrays (nbformat needs 6)
MAX_CELL_CHARS = 2_000_000  # the source of one cell
MAX_VALUES = 200_000   # JSON values (objects, arrays, members); the course's largest: ~1,200
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')  # a JSON string, escapes included


class NotebookRefused(Exception):
    """A notebook over a limit: ``reason`` for the gradebook, ``message`` for people."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


def _depth(value, limit: int) -> int:
    """Nesting depth of parsed JSON, walked without recursion; stops past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        stack.extend((child, depth + 1) for child in children)
    return deepest


def json_values(raw: bytes) -> int:
    """At least the number of values in the JSON text ``raw``, counted without parsing:
    every object or array opened and every separator between members, outside strings
    (each value but the first follows a comma)."""
    bare = _STRING.sub(b"", raw)
    return 1 + bare.count(b"{") + bare.count(b"[") + bare.count(b",")


def check_notebook_file(path: Path, *, max_bytes: int = MAX_BYTES,
                        max_cells: int = MAX_CELLS, max_depth: int = MAX_DEPTH,
                        max_cell_chars: int = MAX_CELL_CHARS,
                        max_values: int = MAX_VALUES) -> dict:
    """The parsed JSON of ``path`` when it is within every limit; else NotebookRefused.
    Plain JSON errors are left to nbformat's reader, which names them."""
    name = path.name
    # apparent and allocated size before a byte is read (a sparse file is small on
    # disk), and never a FIFO or device, which could block the read
    size = size_past(path.stat(), max_bytes)
    if size is not None:
        raise NotebookRefused("notebook-too-large",
                              f"{name} is {size / 2**20:.1f} MiB; the grader reads "
                              f"notebooks up to {max_bytes >> 20} MiB (clear large "
                              "outputs before handing in)")
    try:
        raw = read_bounded(path, max_bytes)
    except TooBig as err:
        raise NotebookRefused("notebook-too-large", str(err)) from None
    # a cell holds the key "cell_type" once, twice with nbgrader's metadata (the quotes of
    # a string's own text are escaped): at least half the count are cells
    least = raw.count(b'"cell_type"') // 2
    if least > max_cells:
        raise NotebookRefused("notebook-too-many-cells",
                              f"{name} has at least {least:,} cells; the grader reads "
                              f"notebooks of up to {max_cells:,}")
    values = json_values(raw)
    if values > max_values:
        raise NotebookRefused("notebook-too-many-values",
                              f"{name} holds about {values:,} JSON values; the grader reads "
                              f"notebooks of up to {max_values:,} (clear outputs and "
                              "metadata before handing in)")
    try:
        data = json.loads(raw)
    except RecursionError:
        raise NotebookRefused("notebook-too-deep",
                              f"{name} nests JSON deeper than the grader reads "
                              f"({max_depth} levels)") from None
    except ValueError:
        return {}  # not JSON: nbformat's reader says so, as before
    depth = _depth(data, max_depth)
    if depth > max_depth:
        raise NotebookRefused("notebook-too-deep",
                              f"{name} nests JSON more than {max_depth} levels deep; a "
                              f"notebook needs about 6")
    cells = data.get("cells") if isinstance(data, dict) else None
    if isinstance(cells, list):
        if len(cells) > max_cells:
            raise NotebookRefused("notebook-too-many-cells",
                                  f"{name} has {len(cells):,} cells; the grader reads "
                                  f"notebooks of up to {max_cells:,}")
        for index, cell in enumerate(cells):
            source = cell.get("source", "") if isinstance(cell, dict) else ""
            chars = sum(map(len, source)) if isinstance(source, list) else len(str(source))
            if chars > max_cell_chars:
                raise NotebookRefused("notebook-too-large",
                                      f"{name}: cell {index} has {chars:,} characters of "
                                      f"source; the grader reads up to {max_cell_chars:,}")
    return data

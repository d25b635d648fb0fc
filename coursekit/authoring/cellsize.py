"""How long the course notebooks' code cells are: per notebook, the mean and the largest
code cell in lines, so a cell that grows past a reading's length shows up.

    python -m coursekit.authoring.cellsize          # one line per notebooks/NN_*.ipynb

A reader takes in a cell of a few lines at a glance; JAX's own docs notebooks (e.g.
autodiff_remat) average about 6 lines a code cell, the largest 36. Branches for the CPU
and the accelerator and long result tables belong in ``coursekit.notebook`` helpers, not
in a cell. A graded test cell is held to a bound of its own: it computes its expected
values in the cell itself (tests/test_notebook_tests_plain.py), so it cannot call a
helper. tests/test_notebook_cell_size.py holds the course to both bounds.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from coursekit.facts import ROOT

LARGEST = 40       # lines in the largest code cell a notebook may hold, graded tests apart
LARGEST_TEST = 60  # lines in the largest graded test cell (visible and hidden part)


@dataclass(frozen=True)
class CellSizes:
    notebook: str
    cells: int          # code cells
    mean: float         # lines per code cell
    largest: int        # lines in the largest code cell that is not a graded test
    largest_at: int     # its index among all the notebook's cells
    largest_test: int   # lines in the largest graded test cell (0: none)


def is_graded_test(cell) -> bool:
    return bool(cell.metadata.get("nbgrader", {}).get("grade")) and cell.cell_type == "code"


def sizes(path: Path) -> CellSizes:
    nb = nbformat.read(path, as_version=4)
    code = [(len(c.source.splitlines()), i, is_graded_test(c)) for i, c in enumerate(nb.cells)
            if c.cell_type == "code"]
    largest, at = max(((n, i) for n, i, test in code if not test), default=(0, -1))
    return CellSizes(path.name, len(code),
                     statistics.fmean(n for n, _, _ in code) if code else 0.0, largest, at,
                     max((n for n, _, test in code if test), default=0))


def notebooks(folder: Path = ROOT / "notebooks") -> list[Path]:
    return sorted(folder.glob("[0-9][0-9]_*.ipynb"))


def over(rows: list[CellSizes]) -> list[str]:
    """Each notebook past a bound, with the bound it passes."""
    return ([f"{r.notebook}: cell {r.largest_at} has {r.largest} lines (> {LARGEST})"
             for r in rows if r.largest > LARGEST]
            + [f"{r.notebook}: a graded test cell has {r.largest_test} lines (> {LARGEST_TEST})"
               for r in rows if r.largest_test > LARGEST_TEST])


def main(argv: list[str] | None = None) -> int:
    rows = [sizes(p) for p in notebooks()]
    print(f"{'notebook':32s} {'code cells':>10s} {'mean lines':>10s} {'largest':>8s} "
          f"{'(cell)':>6s} {'largest graded test':>20s}")
    for r in rows:
        print(f"{r.notebook:32s} {r.cells:10d} {r.mean:10.1f} {r.largest:8d} "
              f"{r.largest_at:6d} {r.largest_test:20d}")
    cells = sum(r.cells for r in rows)
    print(f"{'all notebooks':32s} {cells:10d} "
          f"{sum(r.mean * r.cells for r in rows) / max(cells, 1):10.1f}")
    for line in over(rows):
        print("over:", line)
    return 1 if over(rows) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

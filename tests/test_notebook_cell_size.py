"""Notebook code cells stay a reading's length (issue 54): no course cell over
``cellsize.LARGEST`` lines, no graded test cell over ``cellsize.LARGEST_TEST``
(``python -m coursekit.authoring.cellsize`` prints every notebook's figures)."""

from __future__ import annotations

import nbformat

from coursekit.authoring import cellsize


def test_every_notebook_keeps_its_cells_short():
    rows = [cellsize.sizes(p) for p in cellsize.notebooks()]
    assert len(rows) >= 9
    assert not cellsize.over(rows), "\n".join(cellsize.over(rows)) + (
        "\nmove CPU/accelerator branches and long tables into coursekit.notebook helpers, "
        "or split the cell")


def test_the_bound_catches_a_long_cell(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1\n" * (cellsize.LARGEST + 1)),
                nbformat.v4.new_code_cell("y = 2")]
    test = nbformat.v4.new_code_cell("assert True\n" * (cellsize.LARGEST + 1))
    test.metadata["nbgrader"] = {"grade": True, "grade_id": "t", "locked": True, "points": 1,
                                 "schema_version": 3, "solution": False}
    nb.cells.append(test)
    path = tmp_path / "99_long.ipynb"
    nbformat.write(nb, path)
    row = cellsize.sizes(path)
    assert (row.cells, row.largest, row.largest_at) == (3, cellsize.LARGEST + 1, 0)
    assert row.largest_test == cellsize.LARGEST + 1  # within its own, larger bound
    assert row.mean == (2 * cellsize.LARGEST + 3) / 3
    assert cellsize.over([row]) == [f"99_long.ipynb: cell 0 has {cellsize.LARGEST + 1} lines "
                                    f"(> {cellsize.LARGEST})"]

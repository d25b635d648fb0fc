"""Course notebooks as text: jupytext percent scripts (``notebooks/src/NN_name.py``) in,
stored ``.ipynb`` out, and back.

A source is plain jupytext percent format: ``# %%`` code cells, ``# %% [markdown]``
prose, cell metadata as JSON on the marker line (``# %% tags=["parameters"]``,
``# %% nbgrader={"grade": true, "grade_id": "...", ...} tags=["raises-exception"]``) and
the notebook metadata (``kernelspec``, ``language_info``, ``course``: project, stages,
ci_parameters, title) in the YAML header. ``write`` stores a notebook without outputs
or execution counts, with cell ids that stay put when other cells move (from the
grade_id, else from the cell's source), and validates it (nbformat and nbgrader) first.
``to_text`` is the inverse of ``from_text`` on every stored notebook.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nbformat

from coursekit.compat.optional import need
from coursekit.facts import ALLOWED_ERROR_TAG, KERNELSPEC

FORMAT = "py:percent"
# Header keys a source keeps besides kernelspec; the jupytext version stays out of it so
# upgrading jupytext does not touch every source.
HEADER_FILTER = "course,language_info,-jupytext.text_representation.jupytext_version"
# The only cell metadata a course notebook carries; what JupyterLab adds (execution
# timings, collapsed, scrolled...) is dropped when an edit is synced back.
CELL_KEYS = ("nbgrader", "tags")

__all__ = ["ALLOWED_ERROR_TAG", "from_text", "to_text", "validate", "write"]


def _jupytext():
    # an accelerator image may not ship jupytext: Absent names it (the stored notebooks
    # run there as they are; only building them from notebooks/src needs it)
    return need("jupytext", "building notebooks from their text sources")


def from_text(text: str):
    """A notebook from its percent-format source."""
    nb = _jupytext().reads(text, fmt=FORMAT)
    nb.metadata.pop("jupytext", None)
    return nb


def to_text(nb) -> str:
    """The percent-format source of ``nb`` (an edited or stored notebook): outputs and
    cell metadata other than nbgrader/tags dropped (cell ids are not kept in text:
    ``write`` derives them), the course kernelspec."""
    nb = nbformat.from_dict(nb)  # a copy: the caller's notebook is left as it was
    strip_outputs(nb)
    for cell in nb.cells:
        # keys sorted as the stored .ipynb has them, so a synced source is a fixed point
        cell.metadata = {k: _sorted(cell.metadata[k]) for k in CELL_KEYS if k in cell.metadata}
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"},
                   "course": nb.metadata.get("course", {}),
                   "jupytext": {"notebook_metadata_filter": HEADER_FILTER}}
    return _jupytext().writes(nb, fmt=FORMAT)


def _sorted(value):
    return {k: _sorted(value[k]) for k in sorted(value)} if isinstance(value, dict) else value


def _assign_ids(nb, prefix: str) -> None:
    seen: set[str] = set()
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        base = grade_id or hashlib.sha1(cell.source.encode()).hexdigest()[:10]
        cid, n = f"{prefix}-{base}"[:64], 1
        while cid in seen:
            n += 1
            cid = f"{prefix}-{base}-{n}"[:64]
        seen.add(cid)
        cell["id"] = cid


def strip_outputs(nb):
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    return nb


def validate(nb) -> None:
    """nbformat's schema, then nbgrader's metadata rules (grade ids, points, cell types)."""
    from nbgrader.nbgraderformat import MetadataValidator
    nbformat.validate(nb)
    MetadataValidator().validate_nb(nb)
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(tagged) != 1:
        raise ValueError(f"a course notebook needs exactly one 'parameters' cell, "
                         f"found {len(tagged)}")


def write(nb, path: str | Path) -> Path:
    path = Path(path)
    _assign_ids(nb, path.stem.split("_")[0])
    strip_outputs(nb)
    validate(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path

"""Build the course notebooks from their text sources (this folder), and sync edits back.

    python notebooks/src/build.py            # write every notebooks/NN_*.ipynb from its source
    python notebooks/src/build.py --check    # exit 1 when a stored notebook differs from its source
    python notebooks/src/build.py --sync notebooks/03_roofline.ipynb
                                             # an edit made in JupyterLab -> 03_roofline.py

Each ``NN_name.py`` here is a jupytext percent script (``# %%`` cells, nbgrader metadata
and tags on the marker line, course metadata in the header; see
``coursekit.authoring.nbbuild``); the ``.ipynb`` is what ships and what learners open.
``--sync`` rewrites the source from the edited notebook (outputs and JupyterLab's cell
metadata dropped) and rebuilds the notebook from it, so both end up in their stored form.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
NOTEBOOKS = HERE.parent
sys.path.insert(0, str(NOTEBOOKS.parent))

from coursekit.authoring import nbbuild  # noqa: E402


def sources() -> list[Path]:
    return sorted(HERE.glob("[0-9][0-9]_*.py"))


def build_one(source: Path, target: Path) -> Path:
    return nbbuild.write(nbbuild.from_text(source.read_text()), target)


def sync(notebook: Path) -> Path:
    """Write the source of an edited notebook, then rebuild the notebook from it."""
    source = HERE / (notebook.stem + ".py")
    source.write_text(nbbuild.to_text(nbformat.read(notebook, as_version=4)))
    build_one(source, NOTEBOOKS / notebook.name)
    return source


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--sync", metavar="NOTEBOOK", type=Path,
                        help="write the source of this edited notebooks/NN_*.ipynb")
    args = parser.parse_args(argv)
    if args.sync:
        if not args.sync.is_file() or not args.sync.match("[0-9][0-9]_*.ipynb"):
            parser.error(f"--sync takes an edited course notebook (NN_name.ipynb), "
                         f"got {args.sync}")
        print("wrote", sync(args.sync).relative_to(NOTEBOOKS.parent), "and rebuilt",
              args.sync.name)
        return 0
    stale = []
    for source in sources():
        if args.only not in source.name:
            continue
        target = NOTEBOOKS / (source.stem + ".ipynb")
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                fresh = build_one(source, Path(tmp) / target.name)
                if not target.exists() or fresh.read_text() != target.read_text():
                    stale.append(target.name)
        else:
            print("wrote", build_one(source, target).relative_to(NOTEBOOKS.parent))
    if stale:
        print("out of date (run python notebooks/src/build.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

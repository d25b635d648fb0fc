"""Regenerate the course notebooks from their generator scripts (this folder).

    python notebooks/src/build.py            # write every notebooks/NN_*.ipynb that has a script
    python notebooks/src/build.py --check    # exit 1 when a stored notebook differs from its script

Each ``NN_name.py`` here defines ``build()`` returning an nbformat notebook (see
``coursekit.authoring.nbbuild``); the ``.ipynb`` is what ships and what learners open.
"""

from __future__ import annotations

import argparse
import runpy
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
NOTEBOOKS = HERE.parent
sys.path.insert(0, str(NOTEBOOKS.parent))

from coursekit.authoring import nbbuild  # noqa: E402


def scripts() -> list[Path]:
    return sorted(p for p in HERE.glob("[0-9][0-9]_*.py"))


def build_one(script: Path, target: Path) -> Path:
    nb = runpy.run_path(str(script))["build"]()
    return nbbuild.write(nb, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    stale = []
    for script in scripts():
        if args.only not in script.name:
            continue
        target = NOTEBOOKS / (script.stem + ".ipynb")
        if args.check:
            with tempfile.TemporaryDirectory() as tmp:
                fresh = build_one(script, Path(tmp) / target.name)
                if not target.exists() or fresh.read_text() != target.read_text():
                    stale.append(target.name)
        else:
            print("wrote", build_one(script, target).relative_to(NOTEBOOKS.parent))
    if stale:
        print("out of date (run python notebooks/src/build.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

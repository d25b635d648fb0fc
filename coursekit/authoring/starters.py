"""Starters are generated from solutions, so the two never drift apart.

In ``solution/model.py`` a region between ``### BEGIN SOLUTION`` and ``### END SOLUTION``
is the reference code. In the starter it becomes:

* inside a function body: ``raise NotImplementedError("<hint>")``, where the hint is the
  text after ``### BEGIN SOLUTION`` (for example ``stage 1: time_fn ...``);
* at module level (no indentation): nothing, the region is dropped (solution-only helpers).

    python -m coursekit.authoring.starters            # rewrite every projects/*/starter/model.py
    python -m coursekit.authoring.starters --check    # exit 1 when a starter is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from coursekit.facts import ROOT

BEGIN = re.compile(r"^(?P<indent>\s*)### BEGIN SOLUTION\s*(?P<hint>.*)$")
END = re.compile(r"^\s*### END SOLUTION\s*$")

class MarkerError(ValueError):
    pass


def strip_solutions(source: str, origin: str = "<source>") -> str:
    """The starter text for a solution text."""
    out: list[str] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        match = BEGIN.match(lines[i])
        if not match:
            if END.match(lines[i]):
                raise MarkerError(f"{origin}:{i + 1}: END SOLUTION without BEGIN")
            out.append(lines[i])
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and not END.match(lines[i]):
            if BEGIN.match(lines[i]):
                raise MarkerError(f"{origin}:{i + 1}: nested BEGIN SOLUTION")
            i += 1
        if i == len(lines):
            raise MarkerError(f"{origin}:{start + 1}: BEGIN SOLUTION without END")
        indent, hint = match["indent"], match["hint"].strip()
        if indent:
            message = hint or "not implemented yet"
            out.append(f"{indent}raise NotImplementedError({message!r})")
        i += 1  # skip END
    text = "\n".join(out) + "\n"
    return re.sub(r"\n{4,}", "\n\n\n", text)


def project_pairs(root: Path) -> list[tuple[Path, Path]]:
    return [(sol, sol.parent.parent / "starter" / "model.py")
            for sol in sorted(root.glob("projects/*/solution/model.py"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale starters")
    parser.add_argument("--root", default=ROOT, type=Path)
    args = parser.parse_args(argv)
    stale = []
    for solution, starter in project_pairs(args.root):
        text = strip_solutions(solution.read_text(), str(solution))
        if not starter.exists() or starter.read_text() != text:
            stale.append(starter)
            if not args.check:
                starter.parent.mkdir(parents=True, exist_ok=True)
                starter.write_text(text)
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + str(path))
    return 1 if (args.check and stale) else 0


if __name__ == "__main__":
    sys.exit(main())

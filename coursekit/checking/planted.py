"""Run one project's checker on many learner files in one checker process (developers'
and the test suite's planted bugs), each file in its own learner process.

    python -m coursekit.checking.planted SPEC.json OUT.json

SPEC: {"project": P, "seed": S, "runs": [{"name": N, "impl": PATH, "stage": K,
"only": [check ids]}, ...]}. OUT: {name: {"status": {check_id: status}, "stdout": text}}.

Why it is sound to share the checker process: the checker must be built with
``learner_process=True`` (refused otherwise), so no learner file is ever imported here;
every run gets a fresh learner process, its own scratch folder and a fresh ``Context``
cache. What is shared is the checker's own code and its compiled references, which is
what makes a planted bug cost seconds instead of a checker start.
"""

from __future__ import annotations

import io
import json
import runpy
import sys
import tempfile
from pathlib import Path

from coursekit.facts import checker_path


def load_checker(project: str):
    check = checker_path(project)
    sys.path.insert(0, str(check.parent))  # per-stage modules beside check.py
    checker = runpy.run_path(str(check), run_name=f"planted_{project}")["checker"]
    if not checker.learner_process:
        raise SystemExit(f"{project}'s checker imports learner files in its own process: "
                         "planted files cannot share it (run check.py per file instead)")
    return checker


def run_all(spec: dict) -> dict:
    from coursekit.checking import bridge
    checker = load_checker(spec["project"])
    out = {}
    runs = spec["runs"]
    for i, run in enumerate(runs):
        if i + 1 < len(runs):  # the next file imports while this one is checked
            bridge.prestart(runs[i + 1]["impl"])
        text = io.StringIO()
        with tempfile.TemporaryDirectory(prefix="planted-") as tmp:
            results = checker.run(Path(run["impl"]), [int(run["stage"])], int(spec["seed"]),
                                  Path(tmp), out=text, only=set(run.get("only") or []))
        out[run["name"]] = {"status": {r.check_id: r.status for r in results},
                            "stdout": text.getvalue()}
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    Path(argv[1]).write_text(json.dumps(run_all(spec), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

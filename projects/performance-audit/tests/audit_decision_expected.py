"""Writes ``expected/decisions.json``, the stored public cases of performance-audit stage 4
(see ``audit_decision_reference``): the stage's checks run live on the reference solution
at ``PUBLIC_SEED``, keeping every case they draw and every result of the course's
statistic they ask for. Run it from the course checkout (it needs the instructor code):

    python projects/performance-audit/tests/audit_decision_expected.py [--check]

``--check`` compares a fresh generation with the stored file instead of writing it.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTION = HERE.parent / "solution" / "model.py"
STAGE = 4


def generate() -> dict:
    """The stored cases, freshly drawn: runs stage 4 on the solution in this process."""
    for path in (HERE.parents[2], HERE):
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    os.environ.pop("COURSE_DECISIONS_STORED", None)
    import audit_decision_reference as reference
    import check  # registers every stage's checks

    from coursekit.checking import graded
    if not graded.available():
        raise SystemExit("the stored cases are drawn with the instructor code: run this "
                         "from the course checkout")
    reference.recording = {"public_seed": reference.PUBLIC_SEED, "draws": {}, "results": {}}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            results = check.checker.run(SOLUTION, [STAGE], reference.PUBLIC_SEED, Path(tmp))
        bad = [(r.check_id, r.status) for r in results if r.status != "pass"]
        if bad:
            raise SystemExit(f"the reference solution does not pass stage {STAGE}: {bad}")
        return json.loads(dumps(reference.recording))
    finally:
        reference.recording = None


def dumps(value: dict) -> str:
    return json.dumps(value, sort_keys=True, indent=1, default=float) + "\n"


def main(argv: list[str]) -> int:
    from audit_decision_reference import EXPECTED
    fresh = generate()
    if "--check" in argv:
        same = json.loads(EXPECTED.read_text()) == fresh
        print(f"{EXPECTED.name}: {'equal to' if same else 'DIFFERS from'} a fresh generation")
        return 0 if same else 1
    EXPECTED.parent.mkdir(exist_ok=True)
    EXPECTED.write_text(dumps(fresh))
    print(f"wrote {EXPECTED} ({len(fresh['draws'])} cases, {len(fresh['results'])} results)")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main(sys.argv[1:]))

"""Writes the stored public cases of performance-audit (see ``audit_decision_reference``):
``expected/decisions.json`` (stage 4: every case its checks draw and every result of the
course's statistic they ask for) and ``expected/remat.json`` (stage 3: the course's
residual counts of its models on the public inputs). The checks run live on the reference
solution at ``PUBLIC_SEED`` and keep what they asked the instructor code. Run it from the
course checkout (it needs the instructor code):

    python projects/performance-audit/tests/audit_decision_expected.py [--check] [--only F]

``--check`` compares a fresh generation with the stored files instead of writing them
(``expected/peaks.json``, stage 3's run-only peaks of the public inputs measured in fresh
processes on the CPU: within ``PEAK_AGREEMENT``); ``--only F`` does one file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTION = HERE.parent / "solution" / "model.py"
# (file, stage, the checks that ask the reference)
FILES = (("decisions.json", 4, None),
         ("remat.json", 3, {"remat_saves_residuals_and_temp", "remat_policy_ordering"}),
         ("peaks.json", 3, {"peak_memory_from_fresh_process"}))
# Peaks are measured, not computed: a fresh measurement is held to the stored one within
# this factor (repeats of one program agree within a few MiB), never for equality.
PEAK_AGREEMENT = 1.15


def peaks_agree(stored: dict, fresh: dict) -> bool:
    """Each stored run-only peak (median of its repeats) within ``PEAK_AGREEMENT`` of a
    fresh measurement's, the plan's figures equal."""
    if stored.keys() != fresh.keys():
        return False
    for key, old in stored.items():
        new = fresh[key]
        for variant, figures in old.items():
            if not isinstance(figures, dict):
                continue
            a, b = figures["median_run_peak_bytes"], new[variant]["median_run_peak_bytes"]
            if not (a and b and 1 / PEAK_AGREEMENT <= a / b <= PEAK_AGREEMENT):
                return False
            if figures["argument_size_in_bytes"] != new[variant]["argument_size_in_bytes"]:
                return False
    return True


def generate(stage: int = 4, only: set | None = None) -> dict:
    """The stored cases, freshly drawn: runs ``stage`` (its checks ``only``) on the
    solution in this process."""
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
            results = check.checker.run(SOLUTION, [stage], reference.PUBLIC_SEED, Path(tmp),
                                        only=only)
        bad = [(r.check_id, r.status) for r in results if r.status != "pass"]
        if bad:
            raise SystemExit(f"the reference solution does not pass stage {stage}: {bad}")
        return json.loads(dumps(reference.recording))
    finally:
        reference.recording = None


def dumps(value: dict) -> str:
    return json.dumps(value, sort_keys=True, indent=1, default=float) + "\n"


def main(argv: list[str]) -> int:
    failed = 0
    for name, stage, only in FILES:
        path = HERE / "expected" / name
        if "--only" in argv and name not in argv:
            continue
        fresh = generate(stage, only)
        if "--check" in argv:
            kept = json.loads(path.read_text()) if path.is_file() else None
            same = kept is not None and (
                peaks_agree(kept["results"], fresh["results"]) if name == "peaks.json"
                else kept == fresh)
            print(f"{name}: {'equal to' if same else 'DIFFERS from'} a fresh generation")
            failed += not same
            continue
        path.parent.mkdir(exist_ok=True)
        path.write_text(dumps(fresh))
        print(f"wrote {path} ({len(fresh['draws'])} cases, {len(fresh['results'])} results)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    sys.exit(main(sys.argv[1:]))

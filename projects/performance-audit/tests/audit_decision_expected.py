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


# Another CPU's NumPy draws a case's samples to within an ulp of this one's (its exp and
# log follow the machine's vector units: 1-ulp differences in 139 samples, 2026-12-07), and
# each result is stored under a digest of its samples, so a fresh generation there holds
# the same cases and results under other keys. Fresh means: the same cases, their samples
# within FRESH_RTOL, and as many results, equal within FRESH_RTOL once both sides are put
# in one order. (A learner's copy reads the stored samples and never draws: its keys are
# the file's own.)
FRESH_RTOL = 1e-9


def close(a, b) -> bool:
    """``a`` and ``b`` (JSON values) equal, floats within ``FRESH_RTOL``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, (int, float)) or \
            isinstance(b, float) and isinstance(a, (int, float)):
        return abs(a - b) <= FRESH_RTOL * max(abs(a), abs(b))
    return a == b


def rounded(value):
    """``value`` with its floats to 6 significant digits: an order for results whose keys
    differ."""
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return float(f"{value:.6g}") if isinstance(value, float) else value


def decisions_fresh(kept: dict, fresh: dict) -> bool:
    """``kept`` is a fresh generation's equal, up to another CPU's last bits."""
    if kept == fresh:
        return True
    order = lambda results: sorted(results.values(), key=lambda v: json.dumps(  # noqa: E731
        rounded(v), sort_keys=True))
    return (close({k: v for k, v in kept.items() if k != "results"},
                  {k: v for k, v in fresh.items() if k != "results"})
            and close(order(kept["results"]), order(fresh["results"])))


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
                else decisions_fresh(kept, fresh))
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

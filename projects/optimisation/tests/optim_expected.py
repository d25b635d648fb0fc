"""Stage 1's public inputs and their stored answers: fixed traces (hand-built ones at a
public seed and one real trace of ``train_slow``) under ``expected/stage1/``, with the
breakdown and limiting operation the course's own parse gives on each (numbers, not
code). A learner's copy holds no parser of its own; there ``breakdown_matches_checker_parse``
and ``limiting_operation_named`` run the learner's functions on these traces and compare
with the stored numbers, the verdict the grader gives on them (the grader also parses
fresh traces at hidden seeds, live).

    python projects/optimisation/tests/optim_expected.py   # from the course checkout

writes them; ``tests/test_optimisation_expected.py`` checks that the stored answers are
what the course's parse gives on the stored traces now."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORED = HERE / "expected" / "stage1"
ANSWERS = STORED / "answers.json"
PUBLIC_SEED = 20261206
# (file, label, limiting checked): the checks' own cases, in their order
CASES = [("hand-built.trace.json.gz", "hand-built trace", True),
         ("real.trace.json.gz", "real trace of train_slow", True),
         ("bare-phases.trace.json.gz", "hand-built trace whose phases hold no calls", True),
         ("full-step.trace.json.gz",
          "hand-built trace whose one phase fills every step (share 1)", True),
         ("no-step.trace.json.gz", "hand-built trace without a step event", False)]


def answers_of(path: Path) -> dict:
    """The course's own parse of the trace at ``path`` (instructor code)."""
    import optim_stage1_breakdown as stage1

    from coursekit.instructor import optimisation
    want = optimisation.breakdown(path, stage1.STEP, stage1.PHASES)
    limit = optimisation.limiting(path, stage1.STEP, stage1.PHASES)
    return {"breakdown": {k: want[k] for k in ("steps", "step_us", "phase_us", "other_us",
                                                  "shares")},
            "limiting": {k: limit[k] for k in ("phase", "share", "evidence",
                                               "amdahl_ceiling", "below")},
            "not_phases": stage1.not_phases(path),
            "touching": stage1.touching_phases(path)}


def stored_answers() -> dict:
    return json.loads(ANSWERS.read_text())


def fresh_answers() -> dict:
    return {name: answers_of(STORED / name) for name, _, _ in CASES}


def write() -> None:
    sys.path.insert(0, str(HERE))
    import optim_stage1_breakdown as stage1

    from coursekit.checking.contract import Context
    STORED.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(seed=PUBLIC_SEED, impl_path=Path(tmp), workdir=Path(tmp), stage=1)
        made = {"hand-built.trace.json.gz": stage1.synthetic_trace(ctx),
                "real.trace.json.gz": stage1.checker_trace(ctx),
                "bare-phases.trace.json.gz": stage1.bare_trace(ctx, steps=True),
                "full-step.trace.json.gz": stage1.full_trace(ctx),
                "no-step.trace.json.gz": stage1.bare_trace(ctx, steps=False)}
        for name, path in made.items():
            raw = Path(path).read_bytes()
            if not str(path).endswith(".gz"):
                raw = gzip.compress(raw, mtime=0)
            (STORED / name).write_bytes(raw)
    ANSWERS.write_text(json.dumps(fresh_answers(), indent=1, sort_keys=True) + "\n")


def copy_case(name: str, into: Path) -> Path:
    """The stored trace ``name`` copied into ``into`` under a neutral name."""
    target = into / f"case-{CASES.index(next(c for c in CASES if c[0] == name))}.trace.json.gz"
    shutil.copyfile(STORED / name, target)
    return target


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    write()
    print(f"wrote {STORED}")

"""One measurement that reached the portfolio twice (its run record file and the MLflow
run beside it) is one row, with the items per call that was recorded rather than one
guessed from a shape (issue 30: one run showed 1,700 and 425 items/s)."""

from __future__ import annotations

from coursekit.portfolio.evidence import Records, RunRecord, merge_duplicate_runs


def run(source, samples, items, basis):
    return RunRecord(name="r", source=source, time=0.0, samples_s=samples, first_call_s=None,
                     sync="block_until_ready", backend="cpu", output_ok=True, shapes=[],
                     dtypes=[], fingerprint="", env={}, items=items, items_basis=basis)


def test_same_samples_are_one_run_with_the_recorded_items():
    samples = [0.61, 0.58, 0.60]
    guessed = run("runs/r.json", samples, 64.0, "assumed: leading dimension of the first "
                  "argument")
    recorded = run("MLflow run 1234abcd", list(samples), 1024.0, "recorded items_per_call")
    other = run("runs/s.json", [0.2, 0.3], 8.0, "recorded batch")
    rec = Records(root=None)
    rec.runs = [guessed, recorded, other]
    merge_duplicate_runs(rec)
    assert len(rec.runs) == 2
    kept = next(r for r in rec.runs if r.samples_s == samples)
    assert kept.items == 1024.0 and "runs/r.json" in kept.problems[-1]
    assert other in rec.runs


def test_single_samples_are_never_merged():
    rec = Records(root=None)
    rec.runs = [run("a", [0.5], 1.0, ""), run("b", [0.5], 1.0, "")]
    merge_duplicate_runs(rec)
    assert len(rec.runs) == 2

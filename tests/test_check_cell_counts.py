"""A notebook's check cell counts as its checker's exit says: 0 passed, 3 (no check failed,
some inconclusive, each with its reason) not a failure, anything else a failure. The
accelerator run of 2026-12-06 had notebook 04's fresh-process checks inconclusive while the
notebook held the chip and called the notebook failed for it."""

import json

from coursekit.commands.course import check_cell_ok, read_check_records


def record(returncode, passed=0, failed=0, inconclusive=0, ok=None):
    return {"project": "p", "stage": 1, "returncode": returncode, "passed": passed,
            "failed": failed, "inconclusive": inconclusive,
            "ran": passed + failed + inconclusive,
            "ok": returncode == 0 if ok is None else ok, "results": []}


def test_inconclusive_is_not_a_failure_and_a_failure_stays_one():
    assert check_cell_ok(record(0, passed=3))
    assert check_cell_ok(record(3, passed=2, inconclusive=3))
    assert not check_cell_ok(record(1, passed=2, failed=1, inconclusive=1))
    assert not check_cell_ok(record(3, failed=1))          # a failure under exit 3 still fails
    assert not check_cell_ok(record(3))                    # nothing ran
    assert not check_cell_ok(record(2, passed=1))          # a usage error


def test_the_counts_name_the_inconclusive(tmp_path):
    checks = tmp_path / "checks"
    checks.mkdir()
    for i, rec in enumerate([record(0, passed=2), record(3, passed=2, inconclusive=3),
                             record(1, passed=1, failed=1)]):
        (checks / f"p-stage{i}.json").write_text(json.dumps(rec))
    counts = read_check_records(tmp_path)
    assert (counts["check_cells"], counts["check_cells_ok"]) == (3, 2)
    assert (counts["checks_passed"], counts["checks_failed"],
            counts["checks_inconclusive"]) == (5, 1, 3)

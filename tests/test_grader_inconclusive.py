"""The grader's side of the third verdict: a stage whose only non-passing checks are
inconclusive is recorded as ``inconclusive`` (reason ``timing-inconclusive``, 0 points,
the evidence kept), a real failure beside it still makes the stage ``fail``; such stages
are graded once more at the end of the batch, and only they; the feedback shows the
status and the evidence (the CSV writes each item's status as recorded)."""

from __future__ import annotations

from autograder import feedback, grade, outcomes
from autograder.course import Stage
from autograder.sandbox import Limits, Outcome
from autograder.stage import interpret
from coursekit import protocol

STAGE = Stage("toy", 1, "one", [("plain", 1.0), ("timed", 2.0)])


def outcome(timed: str, plain: str = "pass") -> Outcome:
    def result(cid, status, points):
        return {"kind": protocol.CHECK, "result": {
            "stage": 1, "check_id": cid, "status": status, "points": points,
            "max_points": points or 2.0, "message": f"{cid} {status}",
            "evidence": "1.4x (geometric mean of 6 interleaved rounds); load 3.1 per core"
            if status == "inconclusive" else ""}}
    return Outcome(returncode=0, channel=[result("plain", plain, 1.0 if plain == "pass"
                                                 else 0.0),
                                          result("timed", timed, 0.0),
                                          {"kind": protocol.DONE}])


def test_inconclusive_is_its_own_status_and_never_a_failure():
    record = interpret(STAGE, "ann", outcome("inconclusive"), Limits())
    assert (record["status"], record["reason"]) == ("inconclusive", "timing-inconclusive")
    assert record["points"] == 1.0
    timed = next(c for c in record["checks"] if c["id"] == "timed")
    assert timed["status"] == "inconclusive" and "load 3.1" in timed["evidence"]
    assert outcomes.status_of("timing-inconclusive")[0] == "inconclusive"
    assert "not counted as your mistake" in outcomes.explain(record)
    failed = interpret(STAGE, "bob", outcome("inconclusive", plain="fail"), Limits())
    assert failed["status"] == "fail"


def test_feedback_shows_it():
    record = interpret(STAGE, "ann", outcome("inconclusive"), Limits())
    text = feedback.markdown("ann", [record])
    assert "inconclusive" in text and "evidence: 1.4x" in text


def test_only_inconclusive_stages_are_graded_again_once(monkeypatch):
    tasks = [{"student": s, "item": "toy/stage-1"} for s in ("ann", "bob", "cid")]
    first = [{"student": "ann", "item": "toy/stage-1", "status": "inconclusive"},
             {"student": "bob", "item": "toy/stage-1", "status": "fail"},
             {"student": "cid", "item": "toy/stage-1", "status": "pass"}]
    calls = []

    def fake_run_batch(todo, book, **kw):
        calls.append([t["student"] for t in todo])
        # marked, so the record says it was graded again alone (sandbox_run)
        assert all(t.get("retry_after") == "an inconclusive run" for t in todo)
        return [{"student": t["student"], "item": t["item"], "status": "pass"} for t in todo]

    monkeypatch.setattr(grade, "run_batch", fake_run_batch)
    got = grade.retry_undecided(tasks, first, None, workers=1, run_id="r", shard="",
                                   secret_id="s", progress=False)
    assert calls == [["ann"]]
    assert {r["student"]: r["status"] for r in got} == {"ann": "pass", "bob": "fail",
                                                         "cid": "pass"}
    calls.clear()
    assert grade.retry_undecided(tasks, first[1:], None, workers=1, run_id="r", shard="",
                                    secret_id="s", progress=False) == first[1:]
    assert calls == []
    assert "inconclusive" in grade.RETRYABLE

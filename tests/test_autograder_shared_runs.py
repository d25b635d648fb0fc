"""A project's stages share one sandboxed run (one checker, one learner process) and are
split into per-stage records only when that run was clean; otherwise each stage is graded
again alone, so every record is what grading that stage alone gives."""

from __future__ import annotations

import sys

import pytest

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

from test_autograder import grader  # noqa: E402

from autograder.course import Stage  # noqa: E402
from autograder.grade import STAGES, members, shared_runs  # noqa: E402
from autograder.gradebook import Gradebook  # noqa: E402
from autograder.project_run import SHARE_OF_LIMIT, not_clean, split  # noqa: E402
from autograder.sandbox import Limits, Outcome  # noqa: E402
from coursekit import protocol  # noqa: E402

STAGE_1 = Stage("p", 1, "one", [("a", 1.0), ("b", 2.0)])
STAGE_2 = Stage("p", 2, "two", [("c", 1.0)])
LIMITS = Limits(wall_s=100.0)


def task(student: str, project: str, number: int | None, error: str = "") -> dict:
    if number is None:
        return {"kind": "notebook", "student": student, "item": project, "error": error}
    return {"kind": "stage", "student": student, "item": f"{project}/stage-{number}",
            "error": error, "stage": {"project": project, "number": number}}


def test_the_stages_of_one_project_of_one_submission_form_one_unit():
    todo = [task("ann", "p", 1), task("ann", "nb", None), task("ann", "p", 2),
            task("ann", "q", 1), task("bob", "p", 1), task("bob", "p", 3),
            task("cat", "p", 1, error="bad zip"), task("cat", "p", 2, error="bad zip")]
    units = shared_runs(todo)
    assert [u["kind"] for u in units] == [STAGES, "notebook", "stage", STAGES, "stage",
                                          "stage"]
    assert [t["item"] for t in members(units[0])] == ["p/stage-1", "p/stage-2"]
    assert [t["item"] for t in members(units[3])] == ["p/stage-1", "p/stage-3"]
    assert units[3]["student"] == "bob"
    assert sorted(id(t) for u in units for t in members(u)) == sorted(map(id, todo))


def check(stage: int, cid: str, status: str = "pass", points: float = 1.0,
          duration: float = 1.0, message: str = "") -> dict:
    return {"kind": protocol.CHECK, "result": {
        "stage": stage, "check_id": cid, "status": status, "points": points,
        "max_points": 1.0 if cid != "b" else 2.0, "message": message, "duration_s": duration}}


DONE = {"kind": protocol.DONE, "versions": {}, "learner_isolation": "learner-process"}


def clean_channel() -> list:
    return [check(1, "a"), check(1, "b", "fail", 0.0, 3.0, "wrong"), check(2, "c"), DONE]


def test_a_clean_shared_run_is_split_into_what_each_stage_alone_records():
    outcome = Outcome(returncode=0, wall_s=9.0, channel=clean_channel())
    assert not_clean([STAGE_1, STAGE_2], outcome, LIMITS) == ""
    one, two = split([STAGE_1, STAGE_2], "ann", outcome, LIMITS)
    assert (one["status"], one["points"], [c["id"] for c in one["checks"]]) == \
        ("fail", 1.0, ["a", "b"])
    assert (two["status"], two["points"], [c["id"] for c in two["checks"]]) == \
        ("pass", 1.0, ["c"])
    # each stage's own check time plus an equal share of the 4 s the checks left over
    assert (one["wall_s"], two["wall_s"]) == (pytest.approx(4 + 2), pytest.approx(1 + 2))
    assert one["sandbox_run"].startswith("shared by stages [1, 2]")
    assert one["learner_isolation"] == "learner-process"


@pytest.mark.parametrize("change, reason", [
    (lambda o: setattr(o, "killed_for", "wall-clock"), "was stopped (wall-clock)"),
    (lambda o: setattr(o, "killed_for", "quiet"), "was stopped (quiet)"),
    (lambda o: setattr(o, "returncode", -11), "ended with SIGSEGV"),
    (lambda o: setattr(o, "returncode", 2), "ended with exit code 2"),
    (lambda o: o.channel.insert(1, {"kind": protocol.VIOLATION, "what": "network"}),
     "reported a violation"),
    (lambda o: o.channel.remove(DONE), "did not finish"),
    (lambda o: o.channel.pop(2), "did not report every check of stage 2"),
    (lambda o: o.channel.insert(0, check(3, "z")), "reported checks of other stages"),
    (lambda o: o.channel.__setitem__(0, check(1, "a", "crash", 0.0)),
     "lost a learner process or memory in stage 1"),
    (lambda o: o.channel.__setitem__(2, check(2, "c", "error", 0.0, message="MemoryError")),
     "lost a learner process or memory in stage 2"),
    (lambda o: o.channel.__setitem__(2, check(2, "c", duration=SHARE_OF_LIMIT * 100 + 1)),
     "spent 51 s on stage 2 (limit 100 s)"),
])
def test_anything_but_a_clean_run_grades_every_stage_alone(change, reason):
    outcome = Outcome(returncode=0, wall_s=9.0, channel=clean_channel())
    change(outcome)
    assert not_clean([STAGE_1, STAGE_2], outcome, LIMITS) == reason


def test_a_run_silent_for_one_stage_limit_is_stopped():
    """The shared run's watchdog: no result for ``quiet_s`` means some check ran past what
    its stage alone may take; the run is stopped then, not after N stages' limits."""
    import subprocess
    import time

    from autograder.sandbox import Monitor
    for command, killed in (("import time; time.sleep(30)", "quiet"), ("pass", None)):
        proc = subprocess.Popen([sys.executable, "-c", command], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        started = time.monotonic()
        outcome = Monitor(proc, Limits(wall_s=60.0, quiet_s=1.0)).run()
        assert outcome.killed_for == killed
        assert time.monotonic() - started < 20
        for stream in (proc.stdout, proc.stderr):
            stream.close()


CRASH_IN_STAGE_2 = '''

import ctypes as _ctypes

_honest_grads = regression_grads


def regression_grads(params, x, y):  # stage 2 dies; stage 1 is the reference's
    _ctypes.string_at(0)


def train_classifier(key, x, y, **kwargs):  # stage 3 not written yet: its checks end at
    raise NotImplementedError               # once (the reference's takes ~20 s a grading)
'''


@pytest.mark.slow
def test_shared_and_stage_by_stage_grading_record_the_same(tmp_path):
    """Through the real grader, with the same held-out seeds: a submission whose stage 2
    crashes its learner process (its stage 3 unwritten) is graded again stage by stage (every record as alone),
    and an unfinished one is split from its one clean run; both score exactly as
    ``--stage-per-run`` grading scores them."""
    subs = tmp_path / "subs"
    solution = (ROOT / "projects" / "foundations" / "solution" / "model.py").read_text()
    starter = (ROOT / "projects" / "foundations" / "starter" / "model.py").read_text()
    for student, text in {"crashes-in-2": solution + CRASH_IN_STAGE_2,
                          "unfinished": starter}.items():
        path = subs / student / "projects" / "foundations" / "starter" / "model.py"
        path.parent.mkdir(parents=True)
        path.write_text(text)
    latest = {}
    for mode, extra in {"shared": [], "alone": ["--stage-per-run"]}.items():
        out = tmp_path / mode
        done = grader("grade", subs, "--out", out, "--stages", "foundations",
                      "--secrets", tmp_path / "secrets.json", "--workers", "1",
                      "--quiet", *extra)
        assert done.returncode == 0, done.stderr[-2000:]
        book = Gradebook.in_dir(out)
        latest[mode] = {key: row["record"] for key, row in book.latest().items()}
        book.close()
    assert set(latest["shared"]) == set(latest["alone"]) and len(latest["alone"]) == 6

    def scored(record: dict) -> tuple:
        return (record["status"], record["reason"], record["points"],
                [(c["id"], c["status"], c["points"]) for c in record["checks"]])

    for key, alone in latest["alone"].items():
        shared = latest["shared"][key]
        assert scored(shared) == scored(alone), key
        assert "sandbox_run" not in alone
        if key[0] == "crashes-in-2":
            assert shared["sandbox_run"].startswith("alone: the run shared by stages "
                                                    "[1, 2, 3] lost a learner process")
        else:
            assert shared["sandbox_run"].startswith("shared by stages [1, 2, 3]")
    crashed = {item: r["status"] for (student, item), r in latest["alone"].items()
               if student == "crashes-in-2"}
    unfinished = latest["alone"][("unfinished", "foundations/stage-3")]["status"]
    assert crashed == {"foundations/stage-1": "pass", "foundations/stage-2": "crash",
                       "foundations/stage-3": unfinished} and unfinished != "pass", crashed

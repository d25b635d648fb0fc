"""Issue 52 items 1 and 5: the two routes the red team of 2026-12-06 still gained
through (``tests/redteam_2026_12_06.py``), each graded as root through the real grader
(its sandbox, jail, spawner, guard and runner; performance-audit stage 1, its first two
checks) beside the honest solution and a control holding the same mistake without the
route:

* ``dyn_timer``, control ``timer_control``: the course's timer reached by a module and
  attribute name built at run time (the scan reads names): the learner process keeps it
  out of the learner's code's reach (``coursekit/checking/reach.py``), so the stage
  scores no more than the control that imports it by name, and says why by name;
* ``hopper``, control ``slow_control``: a ``time_fn`` 5x slow beside a helper that forks
  and exits all the time (a new pid at each turn), let run at each call (every process
  of its uid continued, wherever the helper went): held between
  calls with one signal to its uid (``autograder/jail_spawner.py``), it never runs
  through a gap (``spun-outside=0``) and scores no more than its control.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import gained
from redteam_2026_12_06 import (
    HOPPER,
    REPORT,
    SLOW,
    TIMER_DYNAMIC,
    TIMER_STATIC,
    USES_TIMER,
    edited,
)

from autograder import course, sandbox
from autograder.grade import make_settings
from autograder.stage import grade_stage
from coursekit.facts import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
PROJECT = "performance-audit"
ONLY = ["warm_median_is_device_time", "first_call_reported_apart"]


def submissions() -> dict[str, str]:
    honest = (ROOT / "projects" / PROJECT / "solution" / "model.py").read_text()
    timed = edited(honest, *USES_TIMER)
    return {"honest": honest,
            "timer_control": timed + TIMER_STATIC,
            "dyn_timer": timed + TIMER_DYNAMIC,
            "slow_control": edited(honest, *SLOW),
            "hopper": edited(honest, *SLOW) + REPORT + edited(HOPPER, *CONTINUE_ALL)}


# The red team's hopper continues the pid it last wrote down: a stop that lands between a
# fork and that note leaves its spinner stopped for good (4 hops in a batch). This one
# continues every process of its uid at each call, wherever its spinner went.
CONTINUE_ALL = ("_libc.kill(_st.unpack(\"q\", _SHARED[24:32])[0], 18)", "_libc.kill(-1, 18)")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    tmp = tmp_path_factory.mktemp("runtime-reach")
    folders = {}
    for student, text in submissions().items():
        folder = tmp / "subs" / student
        (folder / "projects" / PROJECT / "starter").mkdir(parents=True)
        (folder / "projects" / PROJECT / "starter" / "model.py").write_text(text)
        folders[student] = folder
    settings = make_settings(ROOT, [ROOT, tmp], timeout=600, memory_mb=4096,
                             cell_timeout=120, nb_sizes="ci")
    stage = course.discover_projects(ROOT, {PROJECT})[PROJECT].stages[1]
    stage.checks = [c for c in stage.checks if c[0] in ONLY]

    def one(student: str) -> dict:
        return grade_stage(settings, stage, student, folders[student], None, only=ONLY)
    with ThreadPoolExecutor(2) as pool:  # two at once, as a batch's two workers
        rows = dict(zip(folders, pool.map(one, folders)))
    for student, r in rows.items():  # the figures, for whoever reads the log
        print(f"{student}: {r['status']} {r['points']:g}/{r['max_points']:g} " + " ".join(
            f"{c['id']}={c['status']}" for c in r["checks"]) + f" {r['reason']} "
            f"{achieved(r) or ''}")
        for c in r["checks"]:
            if c["status"] != "pass":
                print(f"    {c['id']}: {str(c.get('message'))[:300]}")
    return rows



def achieved(record: dict) -> dict[str, int]:
    found: dict[str, int] = {}
    for what, n in re.findall(r"ATTACK-R ([\w-]+)=(\d+)", record.get("stderr_tail", "")):
        found[what] = max(found.get(what, 0), int(n))
    return found


def test_the_honest_neighbour_is_graded(graded):
    honest = graded["honest"]
    assert honest["status"] in ("pass", "inconclusive"), honest["checks"]
    assert all(c["status"] in ("pass", "inconclusive") for c in honest["checks"]), honest


def test_a_timer_reached_by_a_built_name_scores_what_an_imported_one_scores(graded):
    control, attacker = graded["timer_control"], graded["dyn_timer"]
    assert control["points"] < control["max_points"], control["checks"]
    assert gained(graded, "dyn_timer", "timer_control") == [], attacker["checks"]
    assert attacker["points"] <= control["points"], (attacker["checks"], control["checks"])
    refused = [c for c in attacker["checks"] if "coursekit.measure.timing.time_synced"
               in str(c.get("message"))]
    assert refused and all("the course's own timer" in c["message"] for c in refused), \
        attacker["checks"]


def test_a_pid_hopping_helper_never_runs_while_the_checker_measures(graded):
    control, hopper = graded["slow_control"], graded["hopper"]
    found = achieved(hopper)
    assert found.get("hops", 0) > 100, hopper.get("stderr_tail", "")[-2000:]  # it ran
    assert found.get("spun-outside", 0) == 0, (found, hopper.get("stderr_tail", "")[-2000:])
    assert gained(graded, "hopper", "slow_control") == [], hopper["checks"]
    assert hopper["points"] <= control["points"] or control["status"] == "inconclusive", \
        (hopper["checks"], control["checks"])

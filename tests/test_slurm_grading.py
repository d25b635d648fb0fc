"""Grading beyond one machine, on a real scheduler: the shipped recipe
(scripts/grade-slurm.sbatch) runs on a single-node Slurm started here.

The cluster (``bench/bench_slurm.py: LocalSlurm``: Debian's slurm-wlm and munge, a
generated slurm.conf for localhost on free ports, every state file under the test's own
folder, the daemons stopped by the fixture's finaliser) grades a mixed batch (good,
unfinished, wrong, crashing and looping submissions; performance-audit stage 4) as a
4-task array, one shard per task, then the dependent merge + export job. One shard is
cancelled with ``scancel`` while grading; the merge that depended on the array must
not run; the shard is resubmitted alone and must finish its remaining items without
grading again what it had finished (a retry it owed, once); the merged gradebook and
CSV must equal one machine's grading of the same submissions (status, reason and points
of every item the machine's load let both decide: one left ``wall-clock-starved`` after
its retry is named and left out, as an inconclusive timing is).
A shard graded with another secrets file makes the merge job fail, naming the shard.
The Kubernetes Indexed Job (scripts/grade-indexed-job.yaml) must run the same grader
command line as the Slurm script.

Needs root and ``make slurm-deps`` (``scripts/slurm-deps``: apt-get install slurm-wlm
munge). Without them the Slurm tests are skipped with the reason, except under CI
(``CI`` or ``COURSE_REQUIRE_SLURM`` set), where they fail: CI must run them.
"""

from __future__ import annotations

import csv
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import bench_slurm as slurm  # noqa: E402

import autograder.samples as samples  # noqa: E402
from autograder import outcomes, seeds  # noqa: E402
from autograder.grade import RETRIED_ALONE  # noqa: E402

SCRIPT = ROOT / "scripts" / "grade-slurm.sbatch"
MANIFEST = ROOT / "scripts" / "grade-indexed-job.yaml"
SHARDS = 4
# shard i of SHARDS holds exactly PLAN[i] (names are chosen to hash there)
PLAN = [["infinite-loop", "starter"], ["good", "segfault-once"],
        ["good", "always-equal", "syntax-error"], ["good", "starter"]]
# The endless loop runs first on one CPU (shard 0 starts first, the loop sorts first)
# while the other CPU takes the rest; shard 2 is cancelled after its first item.
CANCELLED = 2
# The loop's limit; a good stage: 1.5-3 s idle, up to 12 s at load 15-30, and 5.2-7 s
# of CPU (more the more it is kept waiting). A run stopped with under a quarter of a core
# (run_cpu.STARVED_SHARE: 10 s of CPU here) was starved and is graded again; 30 s left
# under 1 s between the most CPU a good stage needed and that bound.
TIMEOUT = 40
STAGES = "performance-audit:4"


def _missing(reason: str):
    """Skip on a developer machine; fail under CI, where Slurm must be there."""
    if os.environ.get("CI") or os.environ.get("COURSE_REQUIRE_SLURM"):
        pytest.fail(f"{reason} (CI must run the Slurm grading test; `make slurm-deps` "
                    "installs it)", pytrace=False)
    pytest.skip(f"{reason}: run `make slurm-deps` (scripts/slurm-deps: apt-get install "
                "slurm-wlm munge, as root) to test the cluster recipe on a real Slurm")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, request):
    why = slurm.unavailable()
    if why:
        _missing(why)
    local = slurm.LocalSlurm(tmp_path_factory.mktemp("slurm") / "cluster")
    request.addfinalizer(local.stop)  # before start: a half-started cluster stops too
    started = time.perf_counter()
    local.start()
    print(f"\nlocal Slurm up in {time.perf_counter() - started:.1f} s "
          f"(ports {local.ports}, {local.cpus} CPUs)")
    return local


def rows(db: Path, retries: bool = False) -> list[tuple[str, str]]:
    """(student, item) of each first grading in the gradebook, in order (``retries``:
    of each grading once more at the end of the batch instead: ``grade.undecided``)."""
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as con:
            found = con.execute("SELECT student, item, record FROM results").fetchall()
    except sqlite3.Error:  # the table is not there yet
        return []
    return [(student, item) for student, item, record in found
            if json.loads(record).get("sandbox_run", "").startswith(RETRIED_ALONE)
            == retries]


def wait_for(predicate, timeout: float, what: str, cluster=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout:.0f} s" +
                         (f"\n{cluster.logs()}" if cluster else ""))


def said(out: Path) -> str:
    """Each item's verdict with its message and the failing checks' messages: what a
    failure here must show (CI prints no gradebook)."""
    from autograder.gradebook import Gradebook
    book = Gradebook.in_dir(out)
    try:
        lines = []
        for (student, item), row in sorted(book.latest().items()):
            record = row["record"]
            lines.append(f"{student} {item}: {row['status']} {record.get('reason', '')} "
                         f"{row['points']}/{row['max_points']} {record.get('message', '')}")
            failing = [c for c in record.get("checks", []) if c.get("status") != "pass"]
            lines += [f"    {c.get('id')}: {c.get('status')}: {str(c.get('message'))[:600]}"
                      for c in failing[:3]]
        return "\n".join(lines)
    finally:
        book.close()


def job_logs(folder: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                     for p in sorted(folder.glob("*.out")))


@pytest.mark.slow
def test_slurm_array_with_a_cancelled_shard_equals_one_machine(cluster, tmp_path, request):
    subs, grading, logs = tmp_path / "subs", tmp_path / "grading", tmp_path / "logs"
    students = slurm.mixed_batch(subs, PLAN, samples)
    env = slurm.script_env(subs, grading, SHARDS, TIMEOUT, stages=STAGES)
    logs.mkdir()  # Slurm opens the job's output file there, it makes no folder
    common = ["--cpus-per-task=1", f"--output={logs}/%x-%A_%a.out"]
    merging = ["--cpus-per-task=1", f"--output={logs}/%x-merge-%j.out"]

    # the whole batch on one machine, with the same secrets: what Slurm must reproduce. It
    # grades while the Slurm array runs (its endless loop's time limit then overlaps the
    # array's instead of adding to it); its verdicts are read once both are done.
    seeds.load_or_create(grading / "secrets.json")  # both read this one secret
    one_started = time.perf_counter()
    with (tmp_path / "one.out").open("w") as out, (tmp_path / "one.err").open("w") as err:
        one = subprocess.Popen(
            [sys.executable, "-m", "autograder", "grade", str(subs), "--out",
             str(tmp_path / "one"), "--stages", STAGES, "--timeout", str(TIMEOUT),
             "--workers", "2", "--quiet", "--secrets", str(grading / "secrets.json")],
            cwd=ROOT, stdout=out, stderr=err, text=True,
            env={**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    request.addfinalizer(lambda: one.poll() is None and (one.kill(), one.wait()))
    cancelled = sorted(s for s, (shard, _) in students.items() if shard == CANCELLED)

    # the recipe: the array, and the merge + export that depends on it
    started = time.perf_counter()
    array = cluster.sbatch(f"--array=0-{SHARDS - 1}", *common, SCRIPT, env=env)
    merge = cluster.sbatch(f"--dependency=afterok:{array}", *merging, SCRIPT, env=env)

    # cancel one shard once it has finished its first item (of three, one worker)
    shard_db = grading / "shards" / f"shard-{CANCELLED}" / "gradebook.sqlite"
    task = f"{array}_{CANCELLED}"

    def first_item():
        state = cluster.jobs(array).get(task, {}).get("JobState", "PENDING")
        assert state in ("PENDING", "RUNNING"), f"{task} {state}:\n{job_logs(logs)}"
        return rows(shard_db)
    finished = wait_for(first_item, 240, f"shard {CANCELLED} grading an item", cluster)
    cluster.cancel(task)
    states = cluster.wait(array, timeout=240)
    assert states == {f"{array}_{i}": "CANCELLED" if i == CANCELLED else "COMPLETED"
                      for i in range(SHARDS)}, job_logs(logs)
    before = rows(shard_db)
    assert before == finished and 1 <= len(before) < len(cancelled), before
    assert not (shard_db.parent / "done.json").exists()

    # the merge must not run with a shard missing: Slurm holds it; replace it
    held = wait_for(lambda: cluster.jobs(merge)[merge]["Reason"] == "DependencyNeverSatisfied"
                    and cluster.jobs(merge)[merge], 60, "the merge job held", cluster)
    assert held["JobState"] == "PENDING"
    assert not (grading / "gradebook.sqlite").exists()
    cluster.cancel(merge)

    # the documented recovery: resubmit the one index, merge after it
    again = cluster.sbatch(f"--array={CANCELLED}", *common, SCRIPT, env=env)
    merge = cluster.sbatch(f"--dependency=afterok:{again}", *merging, SCRIPT, env=env)
    final = cluster.wait(merge, timeout=300)
    slurm_wall = time.perf_counter() - started
    assert cluster.wait(again) == {f"{again}_{CANCELLED}": "COMPLETED"}, job_logs(logs)
    assert final == {merge: "COMPLETED"}, job_logs(logs)
    resumed = json.loads((shard_db.parent / "done.json").read_text())
    assert (resumed["skipped"], resumed["graded"]) == (
        len(before), len(cancelled) - len(before)), resumed  # finished ones not regraded
    assert rows(shard_db)[:len(before)] == before
    assert sorted(s for s, _ in rows(shard_db)) == cancelled  # each once, none lost

    # the one machine's grading, done meanwhile
    one.wait(timeout=600)
    one_wall = time.perf_counter() - one_started
    assert one.returncode == 0, (tmp_path / "one.err").read_text()[-2000:]
    expected = slurm.verdicts(tmp_path / "one")
    assert {s for s, _ in expected} == set(students)
    statuses = {v[0] for v in expected.values()}
    assert {"pass", "timeout", "crash"} <= statuses and len(statuses) >= 4, \
        said(tmp_path / "one")

    # every item graded exactly once (a stage the machine's load may have decided, a
    # starved or inconclusive one, once more at the end: its shard's own retry), and the
    # same verdict as on one machine
    keys = rows(grading / "gradebook.sqlite")
    assert sorted(keys) == sorted(expected), "an item lost or graded twice"
    again = rows(grading / "gradebook.sqlite", retries=True)
    assert len(set(again)) == len(again) and set(again) <= set(keys), again
    # A stage still starved after its retry (wall-clock-starved: under a quarter of a core
    # to its limit, twice) is one the machine could not decide, as an inconclusive timing
    # is: on a machine this loaded the other grading may have decided it. Every other
    # verdict must be the same, and the machine must have decided most of them.
    verdicts = slurm.verdicts(grading)
    undecided = {k for k in expected if outcomes.STARVED in (expected[k][1], verdicts[k][1])}
    decided = set(expected) - undecided
    assert {k: verdicts[k] for k in decided} == {k: expected[k] for k in decided}
    assert 2 * len(decided) >= len(expected), (undecided, expected, verdicts)
    if undecided:
        print(f"\nundecided (starved) on this machine's load: {sorted(undecided)}")
    for i in range(SHARDS):  # and each shard graded exactly its planned students
        assert {s for s, _ in rows(grading / "shards" / f"shard-{i}" / "gradebook.sqlite")
                } == {s for s, (shard, _) in students.items() if shard == i}

    # the export step ran: the CSV equals one machine's export of the same batch
    assert slurm.grader("export", tmp_path / "one", "--csv",
                        tmp_path / "one.csv").returncode == 0
    got = list(csv.reader((grading / "grades.csv").open()))
    starved_rows = {s for s, _ in undecided}  # one item a student: their row holds it
    assert [r for r in got if r[0] not in starved_rows] == [
        r for r in csv.reader((tmp_path / "one.csv").open()) if r[0] not in starved_rows]
    assert len(got) == len(students) + 1
    assert all((grading / "feedback" / s / "feedback.md").is_file() for s in students)
    print(f"\n{len(students)} submissions, graded side by side on the same CPUs by one "
          f"machine --workers 2 and by Slurm {SHARDS} shards incl. the cancelled shard's "
          f"resubmission: {max(one_wall, slurm_wall):.1f} s in all (not a speedup; clean "
          "figures: bench/bench_slurm.py)")


@pytest.mark.slow
def test_merge_job_refuses_a_shard_graded_with_other_secrets(cluster, tmp_path):
    subs, grading, logs = tmp_path / "subs", tmp_path / "grading", tmp_path / "logs"
    for i in range(6):  # empty submissions: every item "missing", no checker runs
        (subs / f"student-{i}").mkdir(parents=True)
    env = slurm.script_env(subs, grading, 2, TIMEOUT, stages=STAGES)
    logs.mkdir()
    common = ["--cpus-per-task=1", f"--output={logs}/%x-%A_%a.out"]
    merging = ["--cpus-per-task=1", f"--output={logs}/%x-merge-%j.out"]
    first = cluster.sbatch("--array=0", *common, SCRIPT, env=env)
    other = cluster.sbatch("--array=1", *common, SCRIPT,
                           env={**env, "SECRETS": str(tmp_path / "other-secrets.json")})
    merge = cluster.sbatch(f"--dependency=afterok:{first}:{other}", *merging, SCRIPT,
                           env=env)
    assert {**cluster.wait(first, 120), **cluster.wait(other, 120)} == {
        f"{first}_0": "COMPLETED", f"{other}_1": "COMPLETED"}, job_logs(logs)
    assert cluster.wait(merge, timeout=60) == {merge: "FAILED"}, job_logs(logs)
    text = (logs / f"autograde-merge-{merge}.out").read_text()
    odd, good = grading / "shards" / "shard-1", grading / "shards" / "shard-0"
    assert "merge failed" in text and "different secrets" in text, text
    # names the shard graded with other secrets, and the ones it differs from
    assert re.search(rf"{re.escape(str(odd))} \(secret \w+\) differs from "
                     rf"{re.escape(str(good))} \(secret \w+\)", text), text
    assert not (grading / "grades.csv").exists()


# ----------------------------------------------------------------------------------
# The Kubernetes manifest: no cluster needed
# ----------------------------------------------------------------------------------

def recorded_argv(cmd: list[str], env: dict, tmp: Path) -> list[str]:
    """The argv the grader would get: ``python``/``$PYTHON`` is a stub that records it."""
    stub_dir = tmp / "stub"
    stub_dir.mkdir(exist_ok=True)
    stub = stub_dir / "python"
    stub.write_text(f"#!{sys.executable}\nimport json, os, sys\n"
                    "with open(os.environ['ARGV_OUT'], 'w') as f:\n"
                    "    json.dump(sys.argv[1:], f)\nprint('{}')\n")
    stub.chmod(0o755)
    out = tmp / "argv.json"
    out.unlink(missing_ok=True)
    full = {"PATH": f"{stub_dir}:/usr/bin:/bin", "ARGV_OUT": str(out), **env}
    done = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text())


def manifest() -> tuple[dict, dict]:
    docs = list(yaml.safe_load_all(MANIFEST.read_text()))
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"ConfigMap", "Job"}
    return by_kind["ConfigMap"], by_kind["Job"]


@pytest.mark.parametrize("stages", ["performance-audit:4,notebooks", ""])
def test_indexed_job_runs_the_slurm_scripts_grader_command(tmp_path, stages):
    params, job = manifest()
    assert job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    shards = int(params["data"]["SHARDS"])
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == shards and spec["parallelism"] <= shards
    [container] = spec["template"]["spec"]["containers"]
    assert spec["template"]["spec"]["restartPolicy"] == "Never"
    assert {"configMapRef": {"name": params["metadata"]["name"]}} in container["envFrom"]
    index = {e["name"]: e for e in container["env"]}["JOB_COMPLETION_INDEX"]
    assert index["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-completion-index']")
    assert container["command"][:2] == ["/bin/sh", "-c"] and "args" not in container

    # both recipes, run with the same parameters for shard 5 of the manifest's 8
    values = {**params["data"], "STAGES": stages, "SUBMISSIONS": str(tmp_path / "subs"),
              "GRADING": str(tmp_path / "grading"),
              "SECRETS": str(tmp_path / "grading" / "secrets.json")}
    k8s = recorded_argv(container["command"], {**values, "JOB_COMPLETION_INDEX": "5"},
                        tmp_path)
    sbatch = recorded_argv(["bash", str(SCRIPT)],
                           {**values, "SLURM_ARRAY_TASK_ID": "5", "COURSE": str(ROOT),
                            "PYTHON": str(tmp_path / "stub" / "python")}, tmp_path)
    assert k8s == sbatch
    assert k8s[:4] == ["-m", "autograder", "grade", values["SUBMISSIONS"]]
    assert k8s[k8s.index("--shard") + 1] == f"5/{shards}"
    assert k8s[k8s.index("--out") + 1] == f"{values['GRADING']}/shards/shard-5"
    assert ("--stages" in k8s) == bool(stages)
    from autograder.cli import parser  # and the grader accepts it
    args = parser().parse_args(k8s[2:])
    assert (args.shard, args.workers, args.timeout) == (f"5/{shards}",
                                                        int(values["WORKERS"]),
                                                        float(values["TIMEOUT"]))


def test_slurm_script_refuses_an_index_beyond_its_shards(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env={
        "PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "4", "SHARDS": "4",
        "GRADING": str(tmp_path), "COURSE": str(ROOT), "PYTHON": "/bin/false"},
        timeout=60, check=False)
    assert done.returncode == 2 and "--array=0-3" in done.stderr

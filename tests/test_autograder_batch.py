"""Batch behaviour of the autograder: a grader SIGKILLed mid-batch resumes with nothing
lost or duplicated; the same batch graded twice with the other core busy gives the same
scores; shards split deterministically and merge; the CSV survives awkward names; and
the small parts (zip safety, append-only gradebook, the sandbox's view of the world)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from coursekit.facts import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT))

from test_autograder import (  # noqa: E402
    STAGE,
    grader,
    orphaned_sandbox_processes,
    sandbox_processes,
    sandbox_uids_of,
)

import autograder.samples as fx  # noqa: E402
from autograder import sandbox, submissions  # noqa: E402
from autograder.grade import RETRIED_ALONE  # noqa: E402
from autograder.gradebook import Gradebook  # noqa: E402

SIMPLE = {"good": "pass", "starter": "fail", "always-equal": "fail",
          "syntax-error": "error", "missing-function": "error"}


def write_simple(folder: Path, names: dict[str, str]) -> None:
    sources = fx.hostile_sources()
    for student, source in names.items():
        fx.write(folder, student, sources[source][0])


def results(out: Path) -> dict:
    book = Gradebook.in_dir(out)
    latest = {k[0]: v for k, v in book.latest().items()}
    book.close()
    return latest


def alive(pids: list[int]) -> list[int]:
    """Those of ``pids`` still running (a zombie has ended)."""
    running = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if state != "Z":
            running.append(pid)
    return running


@pytest.mark.slow
def test_sigkill_mid_batch_then_resume(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    names = {**{k: k for k in SIMPLE}, "good-2": "good", "starter-2": "starter"}
    write_simple(subs, names)
    cmd = [sys.executable, "-m", "autograder", "grade", str(subs), "--out", str(out),
           "--stages", "performance-audit:4", "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    db = out / "gradebook.sqlite"
    deadline = time.monotonic() + 300
    rows = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            try:
                rows = sqlite3.connect(db).execute("SELECT COUNT(*) FROM results").fetchone()[0]
            except sqlite3.Error:
                rows = 0
        if rows >= 2:
            break
        time.sleep(0.2)
    assert proc.poll() is None and rows >= 2, "the batch ended before it could be killed"
    tree = [p for p in sandbox.process_tree(proc.pid) if p != proc.pid]  # server, workers
    assert len(tree) >= 3, tree
    os.kill(proc.pid, signal.SIGKILL)  # only the grader itself; the rest must follow
    proc.wait()
    # this batch's own sandboxes (the uids its workers drew): other tests' batches may be
    # running beside it
    ours = sandbox_uids_of(tree)
    killed_at = len(results(out))
    assert 2 <= killed_at < len(names)
    for _ in range(100):  # workers (watching the grader) and their sandboxes die with it
        if not sandbox_processes(ours) and not alive(tree):
            break
        time.sleep(0.1)
    assert not sandbox_processes(ours)
    assert not alive(tree), f"the grader's fork server or workers outlived it: {alive(tree)}"
    done = grader("grade", subs, "--out", out, "--stages", "performance-audit:4",
                  "--quiet", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["skipped"] == killed_at and summary["graded"] == len(names) - killed_at
    book = Gradebook.in_dir(out)
    # each graded exactly once (a stage the machine starved, once more at the end)
    keys = [(r[0], r[1]) for r in book.all_rows()
            if not json.loads(r[6]).get("sandbox_run", "").startswith(RETRIED_ALONE)]
    book.close()
    assert sorted(keys) == sorted((s, STAGE) for s in names)
    final = results(out)
    assert {s: final[s]["status"] for s in names} == {s: SIMPLE[src] for s, src in
                                                      names.items()}


@pytest.mark.slow
def test_same_scores_twice_with_a_busy_core_and_quoted_csv(tmp_path):
    subs, out = tmp_path / "subs", tmp_path / "out"
    names = {"Doe, Jane": "good", "=HYPERLINK(\"x\")": "starter", "o'brien": "always-equal"}
    write_simple(subs, names)
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        first = grader("grade", subs, "--out", out, "--stages", "performance-audit:4",
                       "--quiet")
        assert first.returncode == 0, first.stderr[-2000:]
        one = results(out)
        second = grader("grade", subs, "--out", out, "--stages", "performance-audit:4",
                        "--quiet", "--regrade", "all")
        assert second.returncode == 0, second.stderr[-2000:]
        two = results(out)
    finally:
        busy.kill()
    scores = {s: [(c["id"], c["status"], c["points"]) for c in one[s]["record"]["checks"]]
              for s in names}
    assert scores == {s: [(c["id"], c["status"], c["points"])
                          for c in two[s]["record"]["checks"]] for s in names}
    assert one["Doe, Jane"]["run_id"] != two["Doe, Jane"]["run_id"]
    csv_path = tmp_path / "grades.csv"
    assert grader("export", out, "--csv", csv_path).returncode == 0
    text = csv_path.read_text()
    assert text.startswith('"student","total"')  # every field quoted
    rows = list(csv.reader(csv_path.open()))
    assert all(len(r) == len(rows[0]) for r in rows)
    by_name = {r[0]: r for r in rows[1:]}
    full = f'{one["Doe, Jane"]["record"]["max_points"]:g}'  # every stage-4 check passed
    assert by_name["Doe, Jane"][1:3] == [full, full]
    assert "'=HYPERLINK(\"x\")" in by_name  # a formula stays text in a spreadsheet


def test_shards_split_deterministically_and_merge(tmp_path):
    subs = tmp_path / "subs"
    students = [f"student-{i:02d}" for i in range(10)]
    for s in students:
        (subs / s).mkdir(parents=True)  # empty: every stage is "missing", no checker runs
    secrets_file = tmp_path / "secrets.json"
    shards = []
    for i in range(2):
        out = tmp_path / f"shard-{i}"
        done = grader("grade", subs, "--out", out, "--stages", "performance-audit:4",
                      "--shard", f"{i}/2", "--secrets", secrets_file, "--quiet")
        assert done.returncode == 0, done.stderr[-2000:]
        shards.append(set(results(out)))
    assert shards[0].isdisjoint(shards[1]) and shards[0] | shards[1] == set(students)
    assert shards[0] == {s for s in students if submissions.in_shard(s, (0, 2))}
    merged = tmp_path / "merged"
    first = grader("merge", tmp_path / "shard-0", tmp_path / "shard-1", "--out", merged)
    assert first.returncode == 0, first.stderr
    again = grader("merge", tmp_path / "shard-0", tmp_path / "shard-1", "--out", merged)
    assert "+0" in again.stdout and Gradebook.in_dir(merged).count() == len(students)
    assert {s: r["status"] for s, r in results(merged).items()} == {
        s: "missing" for s in students}
    other = tmp_path / "other-secret"
    grader("grade", subs, "--out", other, "--stages", "performance-audit:4", "--quiet")
    refused = grader("merge", tmp_path / "shard-0", other, "--out", tmp_path / "mixed")
    assert refused.returncode == 1 and "different secrets" in refused.stderr


def test_unsafe_zips_are_refused(tmp_path):
    for name, member in (("slip", "../evil.py"), ("absolute", "/etc/evil")):
        path = tmp_path / f"{name}.zip"
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(member, "x")
        with pytest.raises(submissions.SubmissionError, match="unsafe"):
            submissions.unpack(path, tmp_path / name)
    link = tmp_path / "link.zip"
    with zipfile.ZipFile(link, "w") as z:
        info = zipfile.ZipInfo("projects/performance-audit/starter/model.py")
        info.external_attr = 0o120777 << 16  # a symlink
        z.writestr(info, "/work/main/projects/performance-audit/solution/model.py")
    with pytest.raises(submissions.SubmissionError, match="unsafe"):
        submissions.unpack(link, tmp_path / "link")


def test_gradebook_is_append_only(tmp_path):
    book = Gradebook(tmp_path / "g.sqlite")
    book.append({"student": "a", "item": "x", "status": "pass", "points": 1,
                 "max_points": 1}, "h", "run")
    for statement in ("UPDATE results SET points = 9", "DELETE FROM results"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            book.db.execute(statement)
    assert book.count() == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="namespaces need root; see README")
def test_sandbox_view_of_the_world(tmp_path):
    """What a sandboxed process sees here: no network but loopback, its own /proc, the
    course folder empty, the file system read-only outside its work folder."""
    assert sandbox.isolation() == "namespaces"
    namespaces, uid = sandbox.mode_settings()
    probe = r"""
import json, os, socket, subprocess
out = {"uid": os.getuid(), "pids": sorted(int(p) for p in os.listdir('/proc') if p.isdigit())}
out["course"] = subprocess.run(['ls', '-A', COURSE + '/projects'], capture_output=True,
                               text=True).stdout
out["cat"] = subprocess.run(['cat', SOLUTION], capture_output=True, text=True).returncode
out["tmp"] = subprocess.run(['touch', '/tmp/autograder-probe'], capture_output=True).returncode
out["home"] = subprocess.run(['touch', os.environ['HOME'] + '/ok']).returncode
s = socket.socket(); s.settimeout(2)
out["net"] = s.connect_ex(('203.0.113.7', 80))
print(json.dumps(out))
""".replace("COURSE", repr(str(ROOT))).replace(
        "SOLUTION", repr(str(ROOT / "projects/performance-audit/solution/model.py")))
    with sandbox.SandboxDir(uid) as box:
        work = box.writable("work")
        jail = sandbox.Jail(box, [sys.executable, "-I", "-c", probe], uid=uid, cwd=work,
                            hide=[ROOT], namespaces=namespaces)
        outcome = sandbox.run(jail)
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert seen["uid"] >= sandbox.UID_BASE
    assert max(seen["pids"]) < 20  # its own PID namespace: a handful of processes
    assert seen["course"] == "" and seen["cat"] != 0
    assert seen["tmp"] != 0 and seen["home"] == 0
    assert seen["net"] != 0
    assert not Path("/tmp/autograder-probe").exists()


@pytest.mark.slow
def test_fallback_without_namespaces(tmp_path):
    """What a grader without root (or a learner's validate) gets: resource limits, the
    process-tree watchdog and the audit hooks still name and stop the same things."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    forging = ("forge-replace-checker", "forge-channel-and-exit", "forge-kill-parent")
    expected = {"good": ("pass", ""), "reads-solution": ("error", "read-outside"),
                "infinite-loop": ("timeout", "wall-clock"),
                "segfault": ("crash", "signal:SIGSEGV"),
                **{s: fx.forging_sources()[s][1] for s in forging}}
    sources = {**fx.hostile_sources(out_dir=out), **fx.forging_sources()}
    for student in expected:
        fx.write(subs, student, sources[student][0])
    env = {**os.environ, "AUTOGRADER_ISOLATION": "limits"}
    # the loop's limit bounds this test's wall time; a good stage 4 takes 1.5-3 s idle, up
    # to 12 s at load 15-30 (as in test_slurm_grading, whose batch also runs under 30 s)
    done = subprocess.run([sys.executable, "-m", "autograder", "grade", str(subs), "--out",
                           str(out), "--stages", "performance-audit:4", "--timeout", "20",
                           "--quiet"], cwd=ROOT, capture_output=True, check=False, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "isolation: limits" in done.stderr
    got = {s: (r["status"], r["record"]["reason"]) for s, r in results(out).items()}
    assert got == expected
    assert all(results(out)[s]["points"] == 0.0 for s in forging)
    # each row names the fences this mode could not apply (namespaces, a throw-away uid)
    assert all(len(results(out)[s]["record"]["not_applied"]) == 2 for s in expected)
    assert not orphaned_sandbox_processes()


def test_guard_follows_dir_fd_and_refuses_outside(tmp_path):
    """shutil.rmtree deletes by name relative to a directory fd: the guard must judge
    the real place (inside the work folder: fine) not the cwd (read-only course copy),
    and still refuse the same call aimed outside."""
    namespaces, uid = sandbox.mode_settings()
    code = ("import os, shutil\n"
            "home = os.environ['HOME']\n"
            "os.makedirs(home + '/ckpt/7/deep'); open(home + '/ckpt/7/deep/f', 'w').close()\n"
            "shutil.rmtree(home + '/ckpt'); print('removed', os.path.exists(home + '/ckpt'))\n"
            "os.unlink('hostname', dir_fd=os.open('/etc', os.O_RDONLY))\n")
    with sandbox.SandboxDir(uid) as box:
        box.writable("work")  # HOME
        r, w = os.pipe()
        jail = sandbox.Jail(box, [sys.executable, "-c", code], uid=uid, cwd=box.course,
                            namespaces=namespaces, result_fd=w, hide=[ROOT])
        outcome = sandbox.run(jail, (r, w), token="t")
    assert "removed False" in outcome.stdout
    assert [m["what"] for m in outcome.channel] == ["write-outside"]
    assert "/etc/hostname" in outcome.channel[0]["detail"]


@pytest.mark.slow
def test_every_reference_solution_passes_in_the_sandbox(graded_reference):
    """The sandbox must not fail correct work: each project's reference solution, graded
    like a submission (every stage), passes every stage. The grading is the
    session's shared one (conftest ``graded_reference``: the solution notebooks are graded
    in the same batch)."""
    done, projects = graded_reference["done"], graded_reference["projects"]
    assert done.returncode == 0, done.stderr[-2000:]
    got = {item: (r["status"], r["record"]["reason"], r["record"]["message"][:300])
           for (_, item), r in graded_reference["latest"].items()
           if item not in graded_reference["notebooks"]}
    assert {i.split("/")[0] for i in got} == set(projects)
    assert all(s == "pass" for s, _, _ in got.values()), {
        i: v for i, v in got.items() if v[0] != "pass"}
    # issue 17: no project's checker imports the learner's file beside its verdict
    isolation = {item: r["record"].get("learner_isolation")
                 for (_, item), r in graded_reference["latest"].items()
                 if item not in graded_reference["notebooks"]}
    assert set(isolation.values()) == {"learner-process"}, isolation
    # every project's stages shared one clean sandboxed run (autograder.project_run)
    runs = {item: r["record"].get("sandbox_run", "")
            for (_, item), r in graded_reference["latest"].items()
            if item not in graded_reference["notebooks"]}
    # (a stage whose shared run was INCONCLUSIVE or starved under load is graded again
    # alone at the end of the batch, and says so)
    assert all(run.startswith(("shared by stages", RETRIED_ALONE))
               for run in runs.values()), {
        item: run for item, run in runs.items() if not run.startswith("shared by stages")}


def test_stale_sandbox_folders_are_swept():
    """A folder left by a dead process goes; one of a live process stays."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = Path(tempfile.gettempdir()) / f"autograder-{dead.pid}-test"
    live = Path(tempfile.gettempdir()) / f"autograder-{os.getpid()}-test"
    for folder in (stale, live):
        (folder / "guard").mkdir(parents=True, exist_ok=True)
    try:
        if Path(f"/proc/{dead.pid}").exists():
            pytest.skip("the pid was reused at once")
        sandbox.sweep_stale()
        assert not stale.exists() and live.exists()
    finally:
        for folder in (stale, live):
            shutil.rmtree(folder, ignore_errors=True)

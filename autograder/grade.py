"""``python -m autograder grade SUBMISSIONS --out DIR``: grade a batch.

Plan: every (student, item) of the selected projects' stages and notebooks, each with a
content hash (submission files + checker or source notebook + seed). An item whose
latest gradebook row has the same hash is skipped (``--regrade failed`` re-runs those
whose latest status is not pass, ``--regrade all`` everything). The rest run in
``--workers`` processes; each result is appended to the gradebook as it arrives, so a
batch killed at any point resumes where it stopped with nothing lost or repeated. The
stages of one project of one submission share a sandboxed run (one checker and one
learner process; ``autograder.project_run``), each stage with its own seed and record;
a run that was not clean is graded again stage by stage (``--stage-per-run``: always).

Workers are separate processes that import nbclient/nbformat once and die with the
grader (parent-death signal); every stage and every notebook inside them runs in
its own sandbox (``autograder.sandbox``).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing
import os
import signal
import sys
import traceback
from collections import Counter
from pathlib import Path

from autograder import course as course_mod
from autograder import names, outcomes, run_cpu, sandbox, seeds, submissions
from autograder.check_cells import HeldNotebooks
from autograder.gradebook import Gradebook
from autograder.progress import Progress
from autograder.tasks import (
    STAGES,
    Record,
    Regrade,
    StagesUnit,
    StageTask,
    Status,
    Task,
    Unit,
)
from autograder.workspace import Settings, submission_files_hash
from coursekit import procctl

# a stage graded once more, alone, at the end of the batch because the machine's load
# may have decided its first record (``undecided``); its record's ``sandbox_run`` says
# "alone: graded again after <why>"
RETRIED_ALONE = "alone: graded again after"
RETRYABLE = ("fail", "inconclusive", "error", "timeout", "memory", "crash", "missing")


# ----------------------------------------------------------------------------------
# Worker side
# ----------------------------------------------------------------------------------

def _worker_init(isolation: str, notebooks: bool, grader: int) -> None:
    """Workers come from a fork server that already imported what they need
    (``autograder.warm``). A worker dies with the grader: it watches the grader's pid
    itself (``follow``), since the fork server cannot be relied on to go first (CPython
    hands each of its children the server's liveness pipe, so the server lives while a
    worker does). Each worker's sandboxes follow it (parent-death signal)."""
    try:
        procctl.die_with_parent()
    except OSError:
        pass
    follow(grader)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    sandbox._ISOLATION = isolation
    if notebooks:
        from autograder import notebook
        notebook.warm_up()  # no-op after autograder.warm


def follow(pid: int) -> None:
    """Kill this process when process ``pid`` ends (a thread waits on its pidfd; a pid
    already gone, now)."""
    import select
    import threading

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGKILL)
        return
    except (AttributeError, OSError):  # no pidfds here: the parent-death signal only
        return

    def wait() -> None:
        select.select([fd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=wait, name="follow-grader", daemon=True).start()


def run_task(task: Unit) -> Record | list[Record]:
    """Grade one (student, item), or a unit of several stages of one project (a list of
    records, one per stage); never raises (a grader error becomes a record)."""
    if task["kind"] == STAGES:
        return run_stages(task["tasks"])
    settings = Settings(**task["settings"])
    try:
        if task["error"]:
            return _error_record(task, "bad-submission", task["error"])
        submission = Path(task["submission"])
        if task["kind"] == "stage":
            from autograder.stage import grade_stage
            stage = course_mod.Stage(**task["stage"])
            return grade_stage(settings, stage, task["student"], submission, task["seed"])
        from autograder.notebook import grade_notebook
        key = json.loads(Path(task["key_path"]).read_text())
        return grade_notebook(settings, task["item"], key, task["student"], submission,
                              task["seed"], hidden=task["hidden"],
                              graded_stages=task.get("graded_stages", []))
    except Exception:  # noqa: BLE001 - record it, keep the batch going
        return _error_record(task, "grader-error", traceback.format_exc()[-2000:],
                             status="crash")


def run_stages(tasks: list[StageTask]) -> list[Record]:
    """Stages of one project of one submission in one sandboxed run
    (``autograder.project_run``)."""
    first = tasks[0]
    try:
        from autograder.project_run import grade_stages
        return grade_stages(Settings(**first["settings"]),
                            [course_mod.Stage(**t["stage"]) for t in tasks],
                            first["student"], Path(first["submission"]),
                            [t["seed"] for t in tasks])
    except Exception:  # noqa: BLE001 - record it, keep the batch going
        text = traceback.format_exc()[-2000:]
        return [_error_record(t, "grader-error", text, status="crash") for t in tasks]


def members(unit: Unit) -> list[Task]:
    """The (student, item) tasks a unit of work grades."""
    return unit["tasks"] if unit["kind"] == STAGES else [unit]


def shared_runs(todo: list[Task]) -> list[Unit]:
    """The stage tasks of each (student, project) as one unit: one sandboxed checker run
    and one learner process for all its stages, instead of one of each per stage. A unit
    stands where its project's first stage stood; notebooks are left as they are."""
    units: list[Unit] = []
    groups: dict[tuple[str, str], StagesUnit] = {}
    for task in todo:
        if task["kind"] != "stage" or task["error"]:
            units.append(task)
            continue
        key = (task["student"], task["stage"]["project"])
        if key not in groups:
            groups[key] = {"kind": STAGES, "student": task["student"],
                           "item": task["stage"]["project"], "tasks": []}
            units.append(groups[key])
        groups[key]["tasks"].append(task)
    return [u["tasks"][0] if u["kind"] == STAGES and len(u["tasks"]) == 1 else u
            for u in units]


def _error_record(task: Task, reason: str, message: str, status: Status = "error") -> Record:
    return {"student": task["student"], "item": task["item"], "kind": task["kind"],
            "status": status, "reason": reason, "message": message, "points": 0.0,
            "max_points": task["max_points"], "checks": [],
            "project": task.get("stage", {}).get("project"),
            "stage": task.get("stage", {}).get("number"),
            "notebook": task["item"] if task["kind"] == "notebook" else None}


# ----------------------------------------------------------------------------------
# Planning
# ----------------------------------------------------------------------------------

def _hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def cache_dir(course_root: Path, out: Path) -> Path:
    """Where checker listings and notebook grading keys are cached (by content hash):
    the course's build/ folder when writable (shared by every batch), else DIR/.cache."""
    shared = Path(course_root) / "build" / "autograder-cache"
    try:
        shared.mkdir(parents=True, exist_ok=True)
        if os.access(shared, os.W_OK):
            return shared
    except OSError:
        pass
    return out / ".cache"


class Items:
    """What a batch grades: the selected stages, the notebooks' grading keys, and the
    checker fingerprints that go into every content hash."""

    def __init__(self, out: Path, course_root: Path, notebooks_dir: Path,
                 selection: str | None):
        cache = cache_dir(course_root, out)
        chosen_projects, chosen_notebooks = course_mod.parse_selection(selection)
        projects = course_mod.discover_projects(
            course_root, None if chosen_projects is None else set(chosen_projects), cache)
        if chosen_projects:
            unknown = set(chosen_projects) - set(projects)
            if unknown:
                raise SystemExit(f"unknown project(s) in --stages: {sorted(unknown)}")
        self.stages = [st for name, p in projects.items()
                       for n, st in sorted(p.stages.items())
                       if chosen_projects is None or chosen_projects.get(name) is None
                       or n in chosen_projects[name]]
        self.keys: dict[str, tuple[dict, Path]] = {}
        notebooks = course_mod.discover_notebooks(notebooks_dir, chosen_notebooks)
        self.nb_project = {name: nb.project for name, nb in notebooks.items()}
        if chosen_notebooks and len(notebooks) < len(chosen_notebooks):
            raise SystemExit(f"unknown notebook(s) in --stages: {sorted(chosen_notebooks)}; "
                             f"known in {notebooks_dir}: "
                             f"{sorted(p.name for p in notebooks_dir.glob('*.ipynb'))}")
        if notebooks:
            from autograder.nbsource import cached_grading_key
            for name, nb in notebooks.items():
                key = cached_grading_key(nb.path, cache)
                self.keys[name] = (key, cache / f"nbkey-{nb.path.stem}-{key['source_hash']}.json")
        self.checker_fp = {p: course_mod.checker_fingerprint(course_root, p) for p in projects}
        self.all_fp = _hash(*sorted(self.checker_fp.values()))

    def tasks_for(self, student: str, root: Path, error: str, secret: dict | None,
                  settings: Settings) -> list[Task]:
        """The tasks of one submission. ``secret`` None: public random seeds and no
        hidden tests (what ``validate`` runs)."""
        hidden = secret is not None
        try:  # bounded: a sparse 1 TiB file is this learner's error, not the batch's
            files = submission_files_hash(root) if not error else "bad"
        except submissions.SubmissionError as err:
            error, files = str(err), "bad"
        base = {"student": student, "submission": str(root), "error": error,
                "settings": settings.to_dict()}
        tasks = []
        for st in self.stages:
            seed = seeds.seed_for(secret["secret"], st.project, st.number) if hidden else None
            tasks.append({**base, "item": st.item, "kind": "stage", "seed": seed,
                          "stage": {"project": st.project, "number": st.number,
                                    "title": st.title, "checks": st.checks},
                          "max_points": st.max_points, "files_hash": files,
                          "checker_fp": self.checker_fp[st.project],
                          "hash": _hash(files, self.checker_fp[st.project], str(seed),
                                        st.item)})
        for name, (key, key_path) in self.keys.items():
            seed = seeds.seed_for(secret["secret"], name) if hidden else None
            project = self.nb_project.get(name)
            nb_hash = notebook_hash(root, name) if not error else "none"
            tasks.append({**base, "item": name, "kind": "notebook", "seed": seed,
                          "key_path": str(key_path), "hidden": hidden,
                          "max_points": sum(t["points"] for t in key["tests"].values()),
                          # what its check cells check, to be answered from this
                          # submission's graded stages (autograder.check_cells)
                          "project": project, "submission_files": files,
                          "project_fp": self.checker_fp.get(project, ""),
                          "files_hash": _hash(nb_hash, files),
                          "checker_fp": _hash(key["source_hash"], self.all_fp,
                                              settings.nb_sizes),
                          "hash": _hash(nb_hash, key["source_hash"], files, self.all_fp,
                                        str(seed), name, settings.nb_sizes)})
        return tasks


def notebook_hash(root: Path, name: str) -> str:
    """Content hash of a handed-in notebook, read within the notebook byte limit (one past
    it, or no plain file, hashes by its sizes: grading refuses it by name)."""
    from autograder.nblimits import MAX_BYTES
    from coursekit.facts import TooBig, read_bounded
    nb_file = submissions.plain_path(root, name)
    if nb_file is None:
        return "none"
    try:
        return hashlib.sha256(read_bounded(nb_file, MAX_BYTES)).hexdigest()
    except (TooBig, OSError) as err:
        return _hash("unread", str(err))


def unpacked(path: Path, out: Path, student: str, folder: str | None = None
             ) -> tuple[Path, str]:
    """(submission root, error text) for a folder or a zip; a zip is unpacked into
    ``out/.unpacked/<folder>`` (``folder``: the student's folder name from
    ``names.assign``, refused as a path when None)."""
    if path.suffix != ".zip":
        return path, ""
    if folder is None:
        return path, f"{names.shown(student)!r} gets no folder to unpack into"
    try:
        dest = names.inside(out / ".unpacked", student, folder)
        return submissions.unpack(path, dest), ""
    except (submissions.SubmissionError, names.NameRefused) as err:
        return path, str(err)


def plan(submission_dir: Path, out: Path, items: Items, shard: tuple[int, int],
         secret: dict, settings: Settings) -> list[Task]:
    """Every task of the batch (before skipping), in student order."""
    tasks = []
    found = submissions.find(submission_dir)
    folders, refused = names.assign(found)
    for student, path in found.items():
        if submissions.in_shard(student, shard):
            root, error = unpacked(path, out, student, folders.get(student))
            if student in refused and path.suffix == ".zip":
                error = f"{error}: {refused[student]}"
            tasks += items.tasks_for(student, root, error, secret, settings)
    return tasks


def select(tasks: list[Task], book: Gradebook, regrade: Regrade) -> tuple[list[Task], int]:
    """Tasks still to run, and how many were skipped as already graded."""
    latest = book.latest()
    todo = []
    for t in tasks:
        row = latest.get((t["student"], t["item"]))
        changed = row is None or row["content_hash"] != t["hash"]
        if changed or regrade == "all" or (regrade == "failed" and row["status"] in RETRYABLE):
            todo.append(t)
    return todo, len(tasks) - len(todo)


# ----------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------

def run_batch(todo: list[Task], book: Gradebook, *, workers: int, run_id: str,
              shard: str, secret_id: str, progress: bool = True,
              share_runs: bool = True) -> list[Record]:
    """Grade ``todo`` in ``workers`` processes, appending each record as it arrives.
    ``share_runs``: the stages of one project of one submission in one sandboxed run
    (``shared_runs``); off, every stage runs alone."""
    records: list[Record] = []
    if not todo:
        return records
    bar = Progress(len(todo), workers) if progress else None
    notebooks = any(t["kind"] == "notebook" for t in todo)
    pending = shared_runs(todo) if share_runs else list(todo)
    # a notebook waits for its project's stages: its check cells show their records
    held = HeldNotebooks(pending, book.latest() if notebooks else {})
    pending = [u for u in pending if not held.hold(u)]
    released: list[Task] = []
    attempts: Counter = Counter()
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["autograder.warm"] if notebooks else ["autograder.stage"])

    def keep(task: Task, record: Record) -> None:
        record.setdefault("isolation", sandbox.isolation())
        if task.get("retry_after"):
            record.setdefault("sandbox_run", f"{RETRIED_ALONE} {task['retry_after']}")
        # the two halves of the content hash, apart: `diff` tells a regrade of the same
        # files under a changed checker from one under the same checker (noise)
        for part in ("files_hash", "checker_fp"):
            if task.get(part):
                record.setdefault(part, task[part])
        book.append(record, task["hash"], run_id, shard, secret_id)
        records.append(record)
        released.extend(held.graded(task, record))
        if bar:
            bar.update(record)

    while pending:
        pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx,
                                      initializer=_worker_init,
                                      initargs=(sandbox.isolation(), notebooks,
                                                os.getpid()))
        futures = {pool.submit(run_task, held.with_stages(t)): t for t in pending}
        broken = []
        try:
            while futures:
                done, _ = cf.wait(futures, return_when=cf.FIRST_COMPLETED)
                for fut in done:
                    unit = futures.pop(fut)
                    try:
                        result = fut.result()
                    except cf.process.BrokenProcessPool:
                        broken.append(unit)
                        continue
                    for task, record in zip(members(unit),
                                            result if isinstance(result, list) else [result]):
                        keep(task, record)
                while released and not broken:
                    task = released.pop(0)
                    futures[pool.submit(run_task, held.with_stages(task))] = task
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True, cancel_futures=True)
        pending = list(released)
        released.clear()
        for unit in broken:  # a worker died under us: once more, then record it
            attempts[unit["item"], unit["student"]] += 1
            if attempts[unit["item"], unit["student"]] >= 2:
                for task in members(unit):
                    keep(task, _error_record(task, "grader-worker-died",
                                             "the grading worker died twice on this item",
                                             status="crash"))
            else:
                pending.append(unit)
        pending += released or ([] if pending else held.release_all())
        released.clear()  # (notebooks freed by the records just written)
    return records


def undecided(record: Record) -> str:
    """Why the grading machine's load, not the learner's code, may have decided this
    record ('' when nothing says so): a timing check that could not decide, or a run
    stopped at its wall clock with under a quarter of a core of CPU (``autograder.run_cpu``)."""
    if record["status"] == "inconclusive":
        return "an inconclusive run"
    if record.get("reason") == outcomes.STARVED:
        return (f"a starved run (stopped at its time limit with under "
                f"{run_cpu.STARVED_SHARE:g} of a core)")
    return ""


def owed_retries(tasks: list[Task], todo: list[Task], book: Gradebook
                 ) -> list[tuple[Task, Record]]:
    """(task, latest record) of each item this batch skips as graded whose record the
    machine's load may have decided and which was never graded again: an earlier batch
    stopped (killed, a cancelled shard) between its first grading and the end-of-batch
    retry. This batch owes it that retry."""
    running = {(t["student"], t["item"]) for t in todo}
    latest = book.latest()
    owed = []
    for task in tasks:
        key = (task["student"], task["item"])
        row = latest.get(key)
        if key in running or row is None or row["content_hash"] != task["hash"]:
            continue
        record = {**row["record"], "student": key[0], "item": key[1],
                  "status": row["status"]}
        if undecided(record) and not str(record.get("sandbox_run", "")).startswith(
                RETRIED_ALONE):
            owed.append((task, record))
    return owed


def retry_undecided(todo: list[Task], records: list[Record], book: Gradebook, *,
                    workers: int, run_id: str, shard: str, secret_id: str,
                    progress: bool) -> list[Record]:
    """Grade once more, alone, at the end of the batch (when the machine is usually
    quieter), every stage the machine's load may have decided (``undecided``: timing
    checks that could not decide, a starved timeout): its second record is appended and
    becomes the latest. Still so after that, it keeps its status and reason
    (``inconclusive``; ``timeout`` with reason ``wall-clock-starved``), never scored as
    the learner's failure unseen: the instructor sees it counted apart. A loop (a core
    kept busy to the limit) is not retried; code that sleeps or deadlocks looks starved
    and costs one more limit."""
    why = {(r["student"], r["item"]): undecided(r) for r in records}
    again = [{**t, "retry_after": why[t["student"], t["item"]]} for t in todo
             if why.get((t["student"], t["item"]))]
    if not again:
        return records
    starved = sum(why[t["student"], t["item"]] != "an inconclusive run" for t in again)
    print(f"retrying {len(again)} stage(s) once, alone, at the end of the batch "
          f"({len(again) - starved} inconclusive, {starved} starved)", file=sys.stderr,
          flush=True)
    retried = run_batch(again, book, workers=workers, run_id=run_id, shard=shard,
                        secret_id=secret_id, progress=progress, share_runs=False)
    done = {(r["student"], r["item"]) for r in retried}
    return [r for r in records if (r["student"], r["item"]) not in done] + retried


def make_settings(course_root: Path, hide: list[Path], timeout: float, memory_mb: int,
                  cell_timeout: float, nb_sizes: str, max_procs: int | None = None,
                  disk_mb: int | None = None) -> Settings:
    projects_all = sorted(p.parent.parent.name
                          for p in course_root.glob("projects/*/tests/check.py"))
    return Settings(course_root=str(course_root.resolve()), projects=projects_all,
                    hide=sorted({str(Path(p).resolve()) for p in hide}),
                    limits={"wall_s": timeout, "memory_mb": memory_mb,
                            **({"max_tasks": max_procs} if max_procs else {}),
                            **({"disk_mb": disk_mb} if disk_mb else {})},
                    cell_timeout=cell_timeout, isolation=sandbox.isolation(),
                    nb_sizes=nb_sizes)


def grade(submission_dir: Path, out: Path, *, workers: int = 2, shard_text: str | None = None,
          timeout: float = 600, memory_mb: int = 4096, selection: str | None = None,
          regrade: Regrade = "none", notebooks_dir: Path | None = None,
          secrets_path: Path | None = None, cell_timeout: float = 120,
          nb_sizes: str = "ci", course_root: Path = course_mod.ROOT,
          max_procs: int | None = None, progress: bool = True,
          share_runs: bool = True, disk_mb: int | None = None) -> dict:
    """Grade every submission under ``submission_dir`` into the grader folder ``out``
    (gradebook, secrets, caches; made private), resuming where an earlier run stopped.

    Args:
        workers: grading processes; each stage or notebook runs in its own sandbox.
        shard_text: "i/N": grade only shard i of N of the students (None: all).
        timeout, memory_mb, max_procs, disk_mb: one sandboxed run's limits (wall-clock
            seconds, MB of memory, processes + threads, MB of disk); None: the default.
        selection: "performance-audit:4,00_foundations", ... (None: every stage and
            notebook).
        regrade: grade unchanged items again: "none", "failed" (not pass) or "all".
        notebooks_dir: the released notebooks (default: the course's notebooks/).
        secrets_path: the held-out seeds (default: ``out/secrets.json``, made once).
        cell_timeout, nb_sizes: a notebook cell's limit in seconds; "ci" or "full" sizes.
        course_root: the course whose checkers grade.
        progress: draw a progress bar on stderr.
        share_runs: the stages of one project of one submission share a sandboxed run.

    Returns:
        {"graded", "skipped", "graded_again": items graded once more at the end (this
        batch's, or skipped ones an earlier batch stopped before their retry), "students":
        counts, "statuses": {status: count} of the latest records, "out": the grader
        folder}; every record is in ``out/gradebook.sqlite``.
    """
    submission_dir, out = Path(submission_dir).resolve(), Path(out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o700)
    notebooks_dir = Path(notebooks_dir or course_root / "notebooks").resolve()
    secret = seeds.load_or_create(Path(secrets_path) if secrets_path else out / "secrets.json")
    shard = submissions.parse_shard(shard_text)
    shard_label = f"{shard[0]}/{shard[1]}" if shard[1] > 1 else ""
    hide = [course_root, submission_dir, out, notebooks_dir,
            Path(secrets_path).resolve().parent if secrets_path else out]
    settings = make_settings(course_root, hide, timeout, memory_mb, cell_timeout, nb_sizes,
                             max_procs, disk_mb)
    items = Items(out, course_root, notebooks_dir, selection)
    tasks = plan(submission_dir, out, items, shard, secret, settings)
    book = Gradebook.in_dir(out)
    todo, skipped = select(tasks, book, regrade)
    sandbox.sweep_stale()
    students = len({t["student"] for t in tasks})
    print(f"grading {len(todo)} item(s) of {students} submission(s) with {workers} "
          f"worker(s); {skipped} unchanged item(s) skipped; isolation: "
          f"{sandbox.isolation()}" + (f"; shard {shard_label}" if shard_label else ""),
          file=sys.stderr, flush=True)
    owed = owed_retries(tasks, todo, book)
    run_id = book.start_run(sandbox.isolation(), shard_label, secret["id"])
    first = run_batch(todo, book, workers=workers, run_id=run_id, shard=shard_label,
                      secret_id=secret["id"], progress=progress, share_runs=share_runs)
    records = retry_undecided(todo + [t for t, _ in owed], first + [r for _, r in owed],
                              book, workers=workers, run_id=run_id, shard=shard_label,
                              secret_id=secret["id"], progress=progress)
    again = sum(str(r.get("sandbox_run", "")).startswith(RETRIED_ALONE) for r in records)
    counts = Counter(r["status"] for r in records)
    book.close()
    summary = {"graded": len(first), "skipped": skipped, "graded_again": again,
               "students": students, "statuses": dict(counts), "out": str(out)}
    print("done: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) +
          f" ({len(first)} graded, {skipped} skipped, {again} graded again at the end); "
          f"gradebook {out / 'gradebook.sqlite'}", file=sys.stderr)
    return summary

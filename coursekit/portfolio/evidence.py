"""Read everything a learner has recorded, for the portfolio: check results, run
records, predictions, collected evidence, and the runs in the MLflow store.

Nothing here raises on a bad record: every file that cannot be used becomes a
``Problem`` naming it and saying why, and the rest is still read.

Layout under the records folder (``COURSE_RECORDS``, default ``build/learner``)::

    checks/<project>-stage<N>.json     coursekit.notebook.cells.run_check summaries
    checks/**/*.json, **/*.json        check.py --json results (recognised by their keys)
    **/*.json, **/*.jsonl              the grader's per-stage gradebook records
                                       (kind "stage", project, stage, checks [{id, status}])
    runs/**/*.json                     run records (coursekit.provenance.records), any *.json with
                                       samples_s is read as one
    predictions/<name>.json            record_prediction
    predictions/<name>.measured.json   compare_prediction
    evidence/memory*.json, evidence/scaling*.json   coursekit.portfolio.collect
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from coursekit.compat.optional import Absent

MAX_FILE_BYTES = 20 * 2**20   # a larger *.json is not a record (traces are .json.gz)
MAX_MLFLOW_RUNS = 500


@dataclass
class Problem:
    where: str          # the file or store it is about
    message: str
    kind: str = "corrupt"   # corrupt | malformed | ignored | store

    def line(self) -> str:
        return f"{self.where}: {self.message}"


@dataclass
class CheckRecord:
    """One checker run: results of one or more stages of one project."""
    project: str
    source: str                 # file path, or "MLflow run <id>"
    time: float                 # epoch seconds
    backend: str
    impl: str
    results: list[dict]         # [{stage, check_id, status, message, hint}]
    link: str = ""              # where to see it (file or MLflow UI address)
    versions: dict = field(default_factory=dict)


@dataclass
class RunRecord:
    """One timing measurement (coursekit.provenance.records format or an MLflow run's samples)."""
    name: str
    source: str
    time: float
    samples_s: list[float]
    first_call_s: float | None
    sync: str
    backend: str
    output_ok: bool | None
    shapes: list
    dtypes: list
    fingerprint: str             # short hash or MLflow's course.fingerprint
    env: dict
    trace: str = ""
    region: str = ""
    project: str = ""
    items: float | None = None   # items per call, when known
    items_basis: str = ""
    status: str = "FINISHED"     # MLflow status for runs from the store
    error: str = ""
    link: str = ""
    problems: list[str] = field(default_factory=list)


@dataclass
class StoreRun:
    """A run in the MLflow store, for the evidence tables (any kind, any status)."""
    run_id: str
    name: str
    experiment: str
    status: str
    recorded_status: str
    time: float
    fingerprint: str
    error: str
    project: str
    kind: str
    link: str
    metrics: dict
    env: dict


@dataclass
class Records:
    root: Path
    checks: list[CheckRecord] = field(default_factory=list)
    runs: list[RunRecord] = field(default_factory=list)
    store_runs: list[StoreRun] = field(default_factory=list)
    predictions: dict = field(default_factory=dict)   # name -> {"predicted", "measured", ...}
    memory: list[dict] = field(default_factory=list)
    scaling: list[dict] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    mlflow: str = ""            # what was read from the store, in words
    files_read: int = 0


def short_hash(payload) -> str:
    import hashlib
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _display(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root.parent))
    except ValueError:
        return str(path)


def _is_solution(impl: str) -> bool:
    return bool(re.search(r"(^|/)projects/[^/]+/solution/model\.py$", impl.replace("\\", "/")))


# ---------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------

def read_records(root: str | Path, student: str | None = None) -> Records:
    """Everything under ``root``; ``student`` keeps only that student's gradebook
    records (the grader's per-stage records carry a "student" field)."""
    root = Path(root)
    rec = Records(root=root)
    if not root.is_dir():
        rec.problems.append(Problem(str(root), "no records folder here yet: nothing has "
                                    "been recorded (run a check cell or check.py)",
                                    "ignored"))
        return rec
    counts = {"solution": 0}
    files = sorted(p for p in root.rglob("*") if p.suffix in (".json", ".jsonl"))
    for path in files:
        if not path.is_file():
            continue
        shown = _display(path, root)
        if path.stat().st_size > MAX_FILE_BYTES:
            rec.problems.append(Problem(shown, "larger than 20 MiB: not read as a record",
                                        "ignored"))
            continue
        try:
            text = path.read_text()
            if path.suffix == ".jsonl":
                items = []
                for number, line in enumerate(text.splitlines(), 1):
                    if not line.strip():
                        continue
                    try:
                        items.append(json.loads(line))
                    except json.JSONDecodeError as err:
                        rec.problems.append(Problem(
                            f"{shown}, line {number}", f"corrupt record: not valid JSON "
                            f"({err.msg}); the other lines are still read"))
            else:
                data = json.loads(text)
                items = data if isinstance(data, list) and data and all(
                    isinstance(d, dict) and d.get("kind") == "stage" for d in data) else [data]
        except UnicodeDecodeError as err:
            rec.problems.append(Problem(shown, f"corrupt record: not UTF-8 text ({err})"))
            continue
        except json.JSONDecodeError as err:
            rec.problems.append(Problem(shown, f"corrupt record: not valid JSON ({err.msg} at "
                                        f"line {err.lineno} column {err.colno}); rerun "
                                        "whatever wrote it, or delete the file"))
            continue
        except OSError as err:
            rec.problems.append(Problem(shown, f"cannot read: {err}"))
            continue
        rec.files_read += 1
        for data in items:
            try:
                _classify(rec, root, path, shown, data, student, counts)
            except MalformedRecord as err:
                rec.problems.append(Problem(shown, f"malformed record: {err}", "malformed"))
    if counts["solution"]:
        rec.problems.append(Problem(str(root), f"{counts['solution']} check result(s) of "
                                    "the reference solution (projects/*/solution) left "
                                    "out: they are not your evidence", "ignored"))
    return rec


def _classify(rec: Records, root: Path, path: Path, shown: str, data, student,
              counts: dict) -> None:
    parts = path.relative_to(root).parts
    is_dict = isinstance(data, dict)
    if parts[0] == "predictions":
        _add_prediction(rec, path, data)
    elif parts[0] == "evidence" or (is_dict and data.get("kind") in ("memory", "scaling")):
        _add_evidence(rec, shown, data)
    elif is_dict and "samples_s" in data:
        _add_run_record(rec, path, shown, data)
    elif is_dict and data.get("kind") == "stage" and "checks" in data and "project" in data:
        if student is None or data.get("student") in (None, student):
            rec.checks.append(_gradebook_record(path, shown, data))
    elif is_dict and "results" in data and "project" in data:
        check = _check_record(path, shown, data)
        if _is_solution(check.impl):
            counts["solution"] += 1
        else:
            rec.checks.append(check)
    elif parts[0] in ("checks", "runs") or path.suffix == ".jsonl":
        raise MalformedRecord("neither a check result (project, results), a gradebook "
                              "stage record (kind stage, checks) nor a run record "
                              "(samples_s)")


# Gradebook statuses (autograder/stage.py) as check statuses: a stage the submission
# has no file for was not started; every other non-pass is a failed attempt.
_GRADEBOOK_STATUS = {"pass": "pass", "missing": "not-implemented"}


def _gradebook_record(path: Path, shown: str, data: dict) -> CheckRecord:
    """A grader's per-stage record: {student, project, stage, status, message, checks:
    [{id, status, message, hint}], versions}."""
    checks = data.get("checks")
    _require(isinstance(checks, list), "checks must be a list")
    try:
        stage = int(data.get("stage"))
    except (TypeError, ValueError):
        raise MalformedRecord(f"stage {data.get('stage')!r} is not a number") from None
    results = []
    for c in checks:
        _require(isinstance(c, dict) and "id" in c and "status" in c,
                 "every gradebook check needs id and status")
        results.append({"stage": stage, "check_id": str(c["id"]),
                        "status": _GRADEBOOK_STATUS.get(c["status"], c["status"]
                                                        if c["status"] in ("fail", "error",
                                                                           "not-implemented")
                                                        else "error"),
                        "message": str(c.get("message", "") or data.get("message", "")),
                        "hint": str(c.get("hint", ""))})
    if not results and data.get("status") != "pass":
        results.append({"stage": stage, "check_id": f"stage_{data.get('status', 'error')}",
                        "status": "not-implemented" if data.get("status") == "missing"
                        else "error", "message": str(data.get("message", "")), "hint": ""})
    versions = data.get("versions") if isinstance(data.get("versions"), dict) else {}
    stamp = data.get("time") or data.get("graded_at")
    if not isinstance(stamp, (int, float)):
        stamp = path.stat().st_mtime
    who = f" ({data['student']})" if data.get("student") else ""
    return CheckRecord(project=str(data["project"]), source=f"{shown}{who}",
                       time=float(stamp), backend=str(versions.get("backend", "") or
                                                      "unknown"),
                       impl="", results=results, link=path.resolve().as_uri(),
                       versions=versions)


class MalformedRecord(ValueError):
    pass


def _require(cond: bool, message: str) -> None:
    if not cond:
        raise MalformedRecord(message)


def _check_record(path: Path, shown: str, data: dict) -> CheckRecord:
    results = data.get("results")
    _require(isinstance(results, list), "results must be a list of check results")
    clean = []
    for r in results:
        _require(isinstance(r, dict) and {"stage", "check_id", "status"} <= set(r),
                 "every result needs stage, check_id and status")
        try:
            stage = int(r["stage"])
        except (TypeError, ValueError):
            raise MalformedRecord(f"stage {r['stage']!r} is not a number") from None
        clean.append({"stage": stage, "check_id": str(r["check_id"]),
                      "status": str(r["status"]), "message": str(r.get("message", "")),
                      "hint": str(r.get("hint", ""))})
    if not clean and data.get("returncode") not in (0, None):
        # run_check keeps a summary without results when the checker was killed or ran
        # out of time: that is a failed attempt at the stage(s), not "never run".
        stages = data.get("stages") or [data.get("stage")]
        if stages == ["all"]:
            from coursekit.portfolio import route
            stages = sorted({s.stage for s in route.stages() if s.project == data["project"]})
        for stage in stages:
            try:
                stage = int(stage)
            except (TypeError, ValueError):
                continue
            clean.append({"stage": stage, "check_id": "checker_did_not_finish",
                          "status": "error", "hint": "",
                          "message": f"the checker exited {data.get('returncode')} without "
                                     "results (killed, crashed or ran out of time)"})
    versions = data.get("versions") if isinstance(data.get("versions"), dict) else {}
    stamp = data.get("time")
    if not isinstance(stamp, (int, float)):
        stamp = path.stat().st_mtime   # check.py --json has no time: the file's is it
    return CheckRecord(project=str(data["project"]), source=shown, time=float(stamp),
                       backend=str(versions.get("backend", "") or "unknown"),
                       impl=str(data.get("impl", "")), results=clean,
                       link=path.resolve().as_uri(), versions=versions)


def _add_run_record(rec: Records, path: Path, shown: str, data: dict) -> None:
    from coursekit.provenance.records import validate_run_record
    samples = data.get("samples_s")
    _require(isinstance(samples, list) and all(
        isinstance(s, (int, float)) and not isinstance(s, bool) for s in samples),
        "samples_s must be a list of numbers (raw seconds)")
    problems = validate_run_record(data)
    fp = data.get("fingerprint")
    env = fp if isinstance(fp, dict) else {}
    fingerprint = short_hash(fp) if isinstance(fp, dict) else str(fp or "")
    items, basis = items_per_call(data)
    first = data.get("first_call_s")
    project = str(data.get("project", "") or "")
    if not project and len(path.relative_to(rec.root).parts) > 2:
        project = path.parent.name   # runs/<project>/<name>.json
    rec.runs.append(RunRecord(
        name=str(data.get("label") or data.get("boundary") or path.stem), source=shown,
        time=path.stat().st_mtime, samples_s=[float(s) for s in samples],
        first_call_s=float(first) if isinstance(first, (int, float)) else None,
        sync=str(data.get("sync", "")), backend=str(data.get("backend", "") or "unknown"),
        output_ok=data.get("output_ok") if data.get("output_ok") in (True, False) else None,
        shapes=data.get("shapes") or [], dtypes=data.get("dtypes") or [],
        fingerprint=fingerprint, env=env, trace=str(data.get("trace") or ""),
        region=str(data.get("region") or ""), project=project, items=items,
        items_basis=basis, link=path.resolve().as_uri(), problems=problems))


def merge_duplicate_runs(rec: Records) -> None:
    """One measurement reached the portfolio twice (its run record file and the MLflow
    run logged beside it) and showed two throughputs from two guesses of the items per
    call. Runs with the same raw samples are one run: the copy whose items per call was
    recorded (not assumed from a shape) is kept, and names where the other was found."""
    kept: dict[tuple, RunRecord] = {}
    for run in rec.runs:
        key = tuple(round(s, 12) for s in run.samples_s)
        if len(key) < 2 or key not in kept:
            kept[key if len(key) >= 2 else (id(run),)] = run
            continue
        first = kept[key]
        recorded = [r for r in (first, run) if r.items_basis.startswith("recorded")]
        keep, other = (recorded[0], run if recorded[0] is first else first) if recorded \
            else (first, run)
        keep.problems = [*keep.problems, f"the same samples are also in {other.source}"]
        kept[key] = keep
    rec.runs = list(kept.values())


def items_per_call(data: dict) -> tuple[float | None, str]:
    """Items one timed call processes: an explicit ``items``/``items_per_call``/``batch``
    key, else the leading dimension of the first array argument (said so)."""
    for key in ("items_per_call", "items", "batch"):
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return float(value), f"recorded {key}"
    shapes = data.get("shapes")
    if isinstance(shapes, list) and shapes and isinstance(shapes[0], list) and shapes[0]:
        lead = shapes[0][0]
        if isinstance(lead, int) and lead > 0:
            return float(lead), "assumed: leading dimension of the first argument"
    return None, ""


def _add_prediction(rec: Records, path: Path, data) -> None:
    _require(isinstance(data, dict), "a prediction record is a JSON object")
    measured = path.name.endswith(".measured.json")
    name = str(data.get("name") or path.name.removesuffix(".measured.json")
               .removesuffix(".json"))
    entry = rec.predictions.setdefault(name, {"name": name, "predicted": None,
                                              "measured": None, "unit": ""})
    if measured:
        entry["measured"] = data.get("measured")
        if entry["predicted"] is None:
            entry["predicted"] = data.get("predicted")
        entry["measured_time"] = path.stat().st_mtime
    else:
        entry["predicted"] = data.get("value")
        entry["predicted_time"] = data.get("time", path.stat().st_mtime)
    entry["unit"] = entry["unit"] or str(data.get("unit", "") or "")


def _add_evidence(rec: Records, shown: str, data) -> None:
    _require(isinstance(data, dict), "an evidence record is a JSON object")
    kind = data.get("kind")
    data = {**data, "source": shown}
    if kind == "memory":
        _require(isinstance(data.get("policies"), dict) and data["policies"],
                 "memory evidence needs a 'policies' object")
        rec.memory.append(data)
    elif kind == "scaling":
        _require(isinstance(data.get("points"), list), "scaling evidence needs 'points'")
        rec.scaling.append(data)
    else:
        raise MalformedRecord(f"unknown evidence kind {kind!r} (memory or scaling)")


# ---------------------------------------------------------------------------------------
# The MLflow store
# ---------------------------------------------------------------------------------------

def default_store(records_dir: Path) -> str:
    """The store that belongs to these records: ``MLFLOW_TRACKING_URI`` when set, else
    ``sqlite:///<records>/../mlflow.db`` (``build/mlflow.db`` for ``build/learner``)."""
    return os.environ.get("MLFLOW_TRACKING_URI") or \
        f"sqlite:///{Path(records_dir).resolve().parent / 'mlflow.db'}"


def read_store(rec: Records, uri: str, *, with_samples: bool = True) -> None:
    """Add the store's runs to ``rec``; an absent store is said, a broken one is a
    Problem naming it. Never creates a store."""
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):].split("?", 1)[0])
        if not db.is_file():
            rec.mlflow = f"no MLflow store at {db} (no runs recorded yet)"
            return
        with open(db, "rb") as f:
            if not f.read(16).startswith(b"SQLite format 3"):
                rec.problems.append(Problem(str(db), "corrupt MLflow store: not an SQLite "
                                            "database", "store"))
                rec.mlflow = f"MLflow store {db} could not be read"
                return
    try:
        from coursekit.provenance import tracking as provenance
        provenance._mlflow()   # quiet import
        from mlflow.tracking import MlflowClient
        client = MlflowClient(uri)
        experiments = client.search_experiments()
    except Absent as err:  # an accelerator image without mlflow: said, not a problem
        rec.mlflow = str(err)
        return
    except Exception as err:  # noqa: BLE001 - any store failure becomes a named message
        rec.problems.append(Problem(uri, f"MLflow store could not be read: "
                                    f"{type(err).__name__}: {str(err)[:300]}", "store"))
        rec.mlflow = f"MLflow store {uri} could not be read"
        return
    ui = "http://127.0.0.1:5000"
    count = 0
    for exp in experiments:
        try:
            found = client.search_runs([exp.experiment_id], max_results=MAX_MLFLOW_RUNS,
                                       order_by=["attributes.start_time DESC"])
        except Exception as err:  # noqa: BLE001
            rec.problems.append(Problem(uri, f"runs of experiment {exp.name!r} could not "
                                        f"be read: {str(err)[:200]}", "store"))
            continue
        for run in found:
            count += 1
            r = provenance.record(run)
            link = f"{ui}/#/experiments/{r['experiment_id']}/runs/{r['run_id']}"
            project = (r["config"].get("project") or r["tags"].get("course.project")
                       or r["tags"].get("project") or "")
            kind = r["tags"].get("course.kind", "")
            stamp = (r["start_time"] or 0) / 1000
            rec.store_runs.append(StoreRun(
                run_id=r["run_id"], name=str(r["name"] or r["run_id"]),
                experiment=exp.name, status=r["status"],
                recorded_status=r["recorded_status"], time=stamp,
                fingerprint=r["fingerprint"], error=r["error"], project=str(project),
                kind=kind, link=link, metrics=r["metrics"], env=r["env"]))
            if kind == "check" or exp.name == provenance.CHECK_EXPERIMENT:
                check = _check_from_store(r, link, stamp)
                if check is not None and not _is_solution(check.impl):
                    rec.checks.append(check)
            elif with_samples:
                _add_store_samples(rec, client, r, link, stamp, str(project))
    rec.mlflow = (f"MLflow store {uri}: {count} run(s) in {len(experiments)} experiment(s)"
                  f" (see them with: python -m coursekit.provenance ui)")


def _check_from_store(r: dict, link: str, stamp: float) -> CheckRecord | None:
    results = []
    for key, status in r["tags"].items():
        m = re.fullmatch(r"check\.(\d+)\.(.+)", key)
        if m:
            results.append({"stage": int(m.group(1)), "check_id": m.group(2),
                            "status": status, "message": "", "hint": ""})
    project = r["config"].get("project", "")
    if not results or not project:
        return None
    return CheckRecord(project=str(project), source=f"MLflow run {r['run_id'][:8]} "
                       f"({r['name']})", time=stamp,
                       backend=str(r["env"].get("backend", "") or "unknown"),
                       impl=str(r["config"].get("impl", "")), results=results, link=link,
                       versions=r["env"])


def _add_store_samples(rec: Records, client, r: dict, link: str, stamp: float,
                       project: str) -> None:
    """A measurement run with raw samples becomes a RunRecord for the benchmark."""
    try:
        files = [a.path for a in client.list_artifacts(r["run_id"], "samples")]
    except Exception:  # noqa: BLE001 - no artifacts is normal
        return
    if not files:
        return
    from mlflow.artifacts import load_dict
    for name in files:
        try:
            payload = load_dict(f"{r['artifact_uri']}/{name}")
            values = [float(v) for v in payload.get("values", []) if v is not None]
        except Exception as err:  # noqa: BLE001
            rec.problems.append(Problem(f"MLflow run {r['run_id'][:8]} {name}",
                                        f"samples could not be read: {str(err)[:200]}"))
            continue
        if payload.get("unit", "s") not in ("s", "") or not values:
            continue
        cfg = r["config"]
        items = None
        for key in ("items_per_call", "items", "batch"):
            try:
                items = float(cfg[key])
                break
            except (KeyError, ValueError, TypeError):
                pass
        basis = "recorded in the run's config" if items else ""
        if items is None:
            shapes = _json_or(cfg.get("x_shape") or cfg.get("shape"))
            if isinstance(shapes, list) and shapes and isinstance(shapes[0], int):
                items, basis = float(shapes[0]), "leading dimension of the input shape"
        ok = r["metrics"].get("output_ok")
        rec.runs.append(RunRecord(
            name=f"{r['name']} · {Path(name).stem}", source=f"MLflow run {r['run_id'][:8]}",
            time=stamp, samples_s=values, first_call_s=r["metrics"].get("first_call_s"),
            sync=str(cfg.get("sync", "")),
            backend=str(r["env"].get("backend", "") or "unknown"),
            output_ok=None if ok is None else bool(ok), shapes=[], dtypes=[],
            fingerprint=r["fingerprint"], env=r["env"], project=project, items=items,
            items_basis=basis, status=r["status"], error=r["error"], link=link))


def _json_or(value):
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


def when(stamp: float | None) -> str:
    if not stamp:
        return "never"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))

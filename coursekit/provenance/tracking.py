"""Provenance: every measurement run goes to MLflow with its configuration, its
measurements and its status, failed and interrupted runs included.

    from coursekit.provenance import tracking as provenance
    with provenance.tracked_run("classifier-step", {"batch": 256, "dtype": "float32"}) as run:
        timing = time_synced(step, params, x, y)
        run.log_metrics(first_call_s=timing.first_call_s, median_s=timing.median_s)
        run.log_samples("step_s", timing.samples_s, unit="s")
    # an exception inside the block records FAILED (and is re-raised); Ctrl-C records KILLED

A run records: parameters ``config.*`` (what was measured: shapes, dtypes, sizes) and
``env.*`` (jax/jaxlib versions, backend, device kind and count, XLA flags, CPU model, git
commit); metrics; raw samples as JSON artifacts; tags with the process id, its start time
and the host, so that a run left RUNNING by a process that no longer exists (SIGKILL, a
power cut) reads back as KILLED; and ``course.fingerprint``, a hash of the config plus the
parts of the environment that change a measurement. Two runs are comparable only when
their fingerprints are equal (``comparable_runs``, ``why_not_comparable``).

Tracking store: ``MLFLOW_TRACKING_URI`` when set, else ``sqlite:///<course>/build/mlflow.db``;
artifacts of a local store sit beside the database (``build/mlflow-artifacts``).
``python -m coursekit.provenance {list,log-check,demo,ui}`` reads, records and shows runs.
MLflow is imported only when first used (it costs seconds), and kept quiet; where it is
not installed (an accelerator image), using it raises ``coursekit.compat.optional.Absent``,
an ImportError that names it and what is skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coursekit.compat.optional import need
from coursekit.facts import ROOT

EXPERIMENT = "jax-perf-course"          # measurements: notebooks, benchmarks, projects
CHECK_EXPERIMENT = "course-checks"      # one run per checker run (make course)
# Environment entries that change what a measurement means; git commit, python and host
# are recorded but do not make two runs incomparable (a before/after pair differs in commit).
COMPARABLE_ENV = ("backend", "device_kind", "devices", "jax", "jaxlib", "xla_flags",
                  "cpu_model")
STATUSES = ("RUNNING", "SCHEDULED", "FINISHED", "FAILED", "KILLED")
UI_PORT = 5000


class ProvenanceError(Exception):
    """Bad input to this module (a metric that is not a number, an unknown status)."""


# ---------------------------------------------------------------------------------------
# Where runs go
# ---------------------------------------------------------------------------------------

def tracking_uri() -> str:
    """``MLFLOW_TRACKING_URI`` when set, else the course's SQLite store under build/."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{ROOT / 'build' / 'mlflow.db'}"


def _sqlite_path(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):].split("?", 1)[0])


def artifact_location(uri: str | None = None, experiment: str = "") -> str | None:
    """Where experiment ``experiment`` keeps artifacts: beside a SQLite database (never
    the current directory's ./mlruns); None lets a tracking server or file store decide."""
    db = _sqlite_path(uri or tracking_uri())
    if db is None:
        return None
    folder = db.resolve().parent / "mlflow-artifacts"
    return (folder / _key(experiment) if experiment else folder).as_uri()


@functools.cache
def _mlflow():
    """Import mlflow once, quietly (no telemetry thread, no INFO lines on first use)."""
    import logging
    import warnings
    warnings.filterwarnings("ignore", message=".*``noload`` loader strategy")
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    for name in ("mlflow", "alembic", "sqlalchemy"):
        logging.getLogger(name).setLevel(logging.WARNING)
    # an accelerator image may not ship mlflow: Absent (an ImportError) names it
    return need("mlflow", "the MLflow record of runs (run records stay JSON files)")


def configure():
    """Point ``mlflow`` (the fluent API: mlflow.search_runs ...) at the course store and
    return the module. Notebooks call this, then use MLflow's own functions."""
    mlflow = _mlflow()
    uri = tracking_uri()
    db = _sqlite_path(uri)
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    return mlflow


def client():
    """An ``MlflowClient`` on the current tracking URI."""
    configure()
    from mlflow.tracking import MlflowClient
    return MlflowClient(tracking_uri())


def experiment_id(name: str = EXPERIMENT, mlclient=None) -> str:
    """The id of experiment ``name``, created (artifacts beside the store) when missing."""
    mlclient = mlclient or client()
    found = mlclient.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    from mlflow.exceptions import MlflowException
    try:
        return mlclient.create_experiment(name, artifact_location=artifact_location(
            experiment=name))
    except MlflowException:  # another process created it between our two calls
        return mlclient.get_experiment_by_name(name).experiment_id


# ---------------------------------------------------------------------------------------
# The environment fingerprint
# ---------------------------------------------------------------------------------------

def git_commit() -> str:
    """HEAD of the course checkout, with ``+dirty`` when tracked files differ from it;
    "unknown" outside git (a released student copy has no .git)."""
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment() -> dict:
    """``coursekit.measure.environment.environment_versions()`` plus device kind, CPU model, git
    commit and host."""
    from coursekit.measure.environment import cpu_model, environment_versions
    env = environment_versions()
    with contextlib.suppress(Exception):
        import jax
        env["device_kind"] = jax.devices()[0].device_kind
    env.update(cpu_model=cpu_model(), git_commit=git_commit(), host=socket.gethostname())
    return env


def fingerprint(config: dict, env: dict | None = None) -> str:
    """Hash of the config and of the environment entries that change a measurement."""
    env = environment() if env is None else env
    basis = {"config": _plain(config), "env": {k: str(env.get(k, "")) for k in COMPARABLE_ENV}}
    return hashlib.sha256(json.dumps(basis, sort_keys=True).encode()).hexdigest()[:16]


def _plain(value):
    """JSON-able copy: tuples to lists, numpy scalars and dtypes to plain values."""
    return json.loads(json.dumps(value, default=str))


# ---------------------------------------------------------------------------------------
# Writing runs
# ---------------------------------------------------------------------------------------

def _process_start(pid: int) -> str:
    """Start time of ``pid`` in clock ticks since boot ("" when unknown): with the pid it
    names a process uniquely, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def _key(name: str) -> str:
    """A valid MLflow param/metric name (letters, digits, _ - . / and space)."""
    return re.sub(r"[^A-Za-z0-9_\-./ ]", "_", str(name))[:250] or "_"


def _param_value(value) -> str:
    text = value if isinstance(value, str) else json.dumps(_plain(value))
    return text if len(text) <= 6000 else text[:5997] + "..."


def _metric_value(name: str, value) -> float:
    if isinstance(value, bool):
        return float(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ProvenanceError(f"metric {name!r} must be a number, got "
                              f"{type(value).__name__}: {value!r:.80}") from None
    return number


@dataclass
class Run:
    """A run being recorded. ``log_metrics``, ``log_samples``, ``set_tags``, ``fail``;
    ``end`` is called by ``tracked_run``."""
    run_id: str
    experiment_id: str
    name: str
    fingerprint: str
    config: dict
    env: dict
    failure: str | None = None
    _client: Any = field(default=None, repr=False)

    def log_metrics(self, metrics: dict | None = None, step: int = 0, **more) -> None:
        from mlflow.entities import Metric
        stamp = int(time.time() * 1000)
        items = {**(metrics or {}), **more}
        batch = [Metric(_key(k), _metric_value(k, v), stamp, step) for k, v in items.items()]
        for i in range(0, len(batch), 1000):
            self._client.log_batch(self.run_id, metrics=batch[i:i + 1000])

    def log_samples(self, name: str, samples: Iterable, unit: str = "") -> None:
        """Raw samples (every timed call, not a summary) as ``samples/<name>.json``."""
        values = [None if (isinstance(v, float) and not math.isfinite(v)) else v
                  for v in _plain(list(samples))]
        self._client.log_dict(self.run_id, {"name": name, "unit": unit, "values": values},
                              f"samples/{_key(name).replace('/', '_')}.json")

    def log_json(self, name: str, payload) -> None:
        self._client.log_dict(self.run_id, _plain(payload), name)

    def set_tags(self, tags: dict) -> None:
        for k, v in tags.items():
            self._client.set_tag(self.run_id, _key(k), str(v)[:5000])

    def fail(self, reason: str) -> None:
        """Record FAILED at the end without raising (a check that did not hold)."""
        self.failure = reason

    def end(self, status: str | None = None, error: str = "") -> None:
        status = status or ("FAILED" if self.failure else "FINISHED")
        if status not in STATUSES:
            raise ProvenanceError(f"unknown run status {status!r}; one of {STATUSES}")
        reason = error or self.failure or ""
        if reason:
            self.set_tags({"course.error": reason})
        self._client.set_terminated(self.run_id, status)


def start_run(name: str, config: dict, *, experiment: str = EXPERIMENT,
              kind: str = "measurement", tags: dict | None = None,
              env: dict | None = None) -> Run:
    """Open a RUNNING run with config and environment as params and provenance tags."""
    if not isinstance(config, dict):
        raise ProvenanceError(f"config must be a dict of what was measured, got "
                              f"{type(config).__name__}")
    mlclient = client()  # optional.Absent where mlflow is not installed
    from mlflow.entities import Param
    exp = experiment_id(experiment, mlclient)
    env = environment() if env is None else env
    fp = fingerprint(config, env)
    pid = os.getpid()
    all_tags = {"course.kind": kind, "course.fingerprint": fp, "course.pid": str(pid),
                "course.pid_start": _process_start(pid), "course.host": socket.gethostname(),
                "course.git_commit": str(env.get("git_commit", "")),
                **{_key(k): str(v) for k, v in (tags or {}).items()}}
    made = mlclient.create_run(exp, tags=all_tags, run_name=name)
    run = Run(made.info.run_id, exp, name, fp, _plain(config), env, _client=mlclient)
    params = {f"config.{_key(k)}": v for k, v in config.items()}
    params.update({f"env.{_key(k)}": v for k, v in env.items()})
    batch = [Param(k, _param_value(v)) for k, v in params.items()]
    for i in range(0, len(batch), 100):
        mlclient.log_batch(run.run_id, params=batch[i:i + 100])
    return run


@contextlib.contextmanager
def tracked_run(name: str, config: dict, *, experiment: str = EXPERIMENT,
                kind: str = "measurement", tags: dict | None = None):
    """``with tracked_run(name, config) as run:`` FINISHED when the block completes,
    FAILED when it raises (or ``run.fail(reason)`` was called), KILLED on KeyboardInterrupt
    or SystemExit; the exception is re-raised. A process killed outright leaves the run
    RUNNING, which ``runs()`` reads back as KILLED."""
    run = start_run(name, config, experiment=experiment, kind=kind, tags=tags)
    try:
        yield run
    except Exception as err:
        run.end("FAILED", f"{type(err).__name__}: {err}")
        raise
    except BaseException as err:
        run.end("KILLED", f"interrupted: {type(err).__name__}")
        raise
    else:
        run.end()


def log_run(name: str, config: dict, metrics: dict | None = None,
            samples: dict | None = None, *, status: str = "FINISHED", error: str = "",
            experiment: str = EXPERIMENT, kind: str = "measurement",
            tags: dict | None = None) -> str:
    """Record a finished measurement in one call; returns the run id. ``samples`` maps a
    name to its raw values."""
    run = start_run(name, config, experiment=experiment, kind=kind, tags=tags)
    if metrics:
        run.log_metrics(metrics)
    for sample_name, values in (samples or {}).items():
        run.log_samples(sample_name, values)
    run.end(status, error)
    return run.run_id


# ---------------------------------------------------------------------------------------
# Reading runs back
# ---------------------------------------------------------------------------------------

def _alive(pid: int, started: str) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: the pid exists, assume it is ours
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):  # zombie: killed, not yet reaped by its parent
        return False
    return not started or fields[19] == started


def effective_status(status: str, tags: dict) -> str:
    """The recorded status, except that a RUNNING run whose process is gone from this
    host is KILLED. RUNNING runs from another host stay RUNNING (we cannot look)."""
    if status != "RUNNING":
        return status
    pid, host = tags.get("course.pid"), tags.get("course.host")
    if not pid or host != socket.gethostname():
        return status
    try:
        pid_number = int(pid)
    except ValueError:
        return status
    return "RUNNING" if _alive(pid_number, tags.get("course.pid_start", "")) else "KILLED"


def record(run) -> dict:
    """A plain dict for an ``mlflow.entities.Run`` with its effective status."""
    tags = dict(run.data.tags)
    return {"run_id": run.info.run_id, "name": run.info.run_name,
            "experiment_id": run.info.experiment_id,
            "status": effective_status(run.info.status, tags),
            "recorded_status": run.info.status,
            "start_time": run.info.start_time, "end_time": run.info.end_time,
            "fingerprint": tags.get("course.fingerprint", ""),
            "error": tags.get("course.error", ""),
            "config": {k[len("config."):]: v for k, v in run.data.params.items()
                       if k.startswith("config.")},
            "env": {k[len("env."):]: v for k, v in run.data.params.items()
                    if k.startswith("env.")},
            "metrics": dict(run.data.metrics), "tags": tags,
            "artifact_uri": run.info.artifact_uri}


def runs(experiment: str = EXPERIMENT, filter_string: str = "",
         max_results: int = 1000) -> list[dict]:
    """Runs of ``experiment``, newest first, as ``record`` dicts (KILLED shown as such)."""
    mlclient = client()
    found = mlclient.get_experiment_by_name(experiment)
    if found is None:
        return []
    result = mlclient.search_runs([found.experiment_id], filter_string=filter_string,
                                  max_results=max_results,
                                  order_by=["attributes.start_time DESC"])
    return [record(r) for r in result]


def get_run(run_id: str) -> dict:
    return record(client().get_run(run_id))


def read_samples(run: dict, name: str) -> list:
    """The raw samples a run logged with ``log_samples(name, ...)``."""
    _mlflow()
    from mlflow.artifacts import load_dict
    return load_dict(f"{run['artifact_uri']}/samples/{_key(name).replace('/', '_')}.json")[
        "values"]


def with_effective_status(frame):
    """For the DataFrame of ``mlflow.search_runs``: a ``course_status`` column that
    shows RUNNING runs of dead processes as KILLED."""
    def one(row):
        tags = {k[len("tags."):]: v for k, v in row.items()
                if k.startswith("tags.") and isinstance(v, str)}
        return effective_status(row["status"], tags)
    frame = frame.copy()
    frame["course_status"] = [one(row) for _, row in frame.iterrows()] if len(frame) else []
    return frame


def comparable_runs(candidates: list[dict], like: dict | str) -> list[dict]:
    """The runs among ``candidates`` with the same fingerprint as ``like`` (a run record,
    a ``Run`` or a fingerprint string)."""
    fp = like if isinstance(like, str) else (
        like.fingerprint if isinstance(like, Run) else like["fingerprint"])
    return [r for r in candidates if r["fingerprint"] == fp]


def why_not_comparable(a: dict, b: dict) -> list[str]:
    """What differs between two run records in what was measured or where; [] when
    comparable."""
    reasons = []
    for key in sorted(set(a["config"]) | set(b["config"])):
        if a["config"].get(key) != b["config"].get(key):
            reasons.append(f"config {key}: {a['config'].get(key)} vs {b['config'].get(key)}")
    for key in COMPARABLE_ENV:
        if a["env"].get(key, "") != b["env"].get(key, ""):
            reasons.append(f"env {key}: {a['env'].get(key)} vs {b['env'].get(key)}")
    return reasons


# ---------------------------------------------------------------------------------------
# The course's own records: checker runs and the deliberate failing configuration
# ---------------------------------------------------------------------------------------

def log_check_run(result: dict | str | Path, *, wall_s: float | None = None,
                  experiment: str = CHECK_EXPERIMENT) -> str:
    """Record one ``check.py --json`` result (the dict or its file) as a run: FINISHED
    when every check passed, FAILED otherwise (failed check ids in ``course.error``).
    Returns the run id."""
    data = json.loads(Path(result).read_text()) if isinstance(result, (str, Path)) else result
    for key in ("project", "stages", "results"):
        if key not in data:
            raise ProvenanceError(f"not a checker result: key {key!r} missing "
                                  "(expected the file written by check.py --json)")
    impl = Path(data.get("impl", ""))
    with contextlib.suppress(ValueError):
        impl = impl.resolve().relative_to(ROOT)
    config = {"project": data["project"], "stages": data["stages"], "impl": str(impl),
              "seed": data.get("seed")}
    env = {**environment(), **{k: v for k, v in data.get("versions", {}).items()}}
    failed = [f"stage {r['stage']} {r['check_id']} ({r['status']})"
              for r in data["results"] if r["status"] != "pass"]
    passed = len(data["results"]) - len(failed)
    run = start_run(f"check {data['project']} {impl.parent.name}", config,
                    experiment=experiment, kind="check", env=env)
    metrics = {"passed": passed, "failed": len(failed),
               "checker_s": data.get("duration_s", 0.0)}
    if wall_s is not None:
        metrics["wall_s"] = wall_s
    run.log_metrics(metrics)
    run.log_samples("check_durations_s", [r.get("duration_s", 0.0) for r in data["results"]],
                    unit="s")
    run.log_json("check_result.json", data)
    run.set_tags({f"check.{r['stage']}.{r['check_id']}": r["status"]
                  for r in data["results"]})
    if failed or not passed:
        run.fail("failed checks: " + ", ".join(failed) if failed else "no check ran")
    run.end()
    return run.run_id


def output_check_demo(dtype: str = "bfloat16", n: int = 1023, experiment: str = EXPERIMENT,
                      rtol: float = 1e-5, atol: float = 1e-6) -> dict:
    """One real measurement of the reference classifier's logits in ``dtype``, checked
    against a float32 reference before timing. In bfloat16 the output check fails on
    purpose, so the record shows a FAILED run next to the float32 one (``make course``).
    Returns the run record."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from coursekit.measure.timing import time_synced
    from coursekit.workloads import classifier

    k_data, k_init = jax.random.split(jax.random.key(0))
    x, _ = classifier.make_dataset(k_data, n)
    params = classifier.init_params(k_init)
    reference = np.asarray(jax.jit(classifier.logits)(params, x))
    cast = jnp.dtype(dtype)
    fn = jax.jit(lambda p, a: classifier.logits(
        jax.tree.map(lambda t: t.astype(cast), p), a.astype(cast)).astype(jnp.float32))
    config = {"workload": "classifier.logits", "x_shape": list(x.shape), "dtype": dtype,
              "reference_dtype": "float32", "rtol": rtol, "atol": atol,
              "sync": "block_until_ready", "warmup": 2,
              "check": f"logits equal float32's (rtol {rtol}, atol {atol})"}
    run_id = None
    try:
        with tracked_run(f"output-check {dtype}", config, experiment=experiment) as run:
            run_id = run.run_id
            out = np.asarray(fn(params, x))
            error = float(np.max(np.abs(out - reference)))
            ok = bool(np.allclose(out, reference, rtol=rtol, atol=atol))
            run.log_metrics(max_abs_error=error, output_ok=float(ok))
            if not ok:
                raise AssertionError(f"output check failed before timing: {dtype} logits "
                                     f"differ from float32 by up to {error:.3g} "
                                     f"(rtol={rtol}, atol={atol})")
            timing = time_synced(fn, params, x, warmup=config["warmup"], iters=10)
            run.log_metrics(first_call_s=timing.first_call_s, median_s=timing.median_s)
            run.log_samples("call_s", timing.samples_s, unit="s")
    except AssertionError:
        pass  # the record holds it; this configuration is meant to fail
    return get_run(run_id)


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def ui_command(port: int = UI_PORT, uri: str | None = None) -> list[str]:
    """The ``mlflow ui`` command for the course store, on loopback only."""
    uri = uri or tracking_uri()
    cmd = [str(Path(sys.executable).with_name("mlflow")), "ui", "--backend-store-uri", uri,
           "--host", "127.0.0.1", "--port", str(port)]
    root = artifact_location(uri)
    return cmd + (["--default-artifact-root", root] if root else [])


def print_runs(rows: list[dict], out=sys.stdout) -> None:
    print(f"{'status':<9} {'started':<19} {'name':<34} {'fingerprint':<16} metrics", file=out)
    for r in rows:
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime((r["start_time"] or 0)
                                                                   / 1000))
        shown = ", ".join(f"{k}={v:.4g}" for k, v in sorted(r["metrics"].items())[:4])
        note = " (recorded RUNNING)" if r["status"] != r["recorded_status"] else ""
        print(f"{r['status']:<9} {started:<19} {str(r['name'])[:34]:<34} "
              f"{r['fingerprint']:<16} {shown}{note}", file=out)
        if r["error"]:
            print(f"{'':<9} {r['error'][:150]}", file=out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.provenance",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("list", help="print runs, newest first, KILLED shown as such")
    show.add_argument("--experiment", default=None, help="default: both course experiments")
    show.add_argument("--limit", type=int, default=30)
    check = sub.add_parser("log-check", help="record check.py --json result files")
    check.add_argument("results", nargs="+", type=Path)
    demo = sub.add_parser("demo", help="the output-check demo: float32 (FINISHED) and "
                          "bfloat16 (FAILED on purpose)")
    demo.add_argument("--n", type=int, default=1023)
    ui = sub.add_parser("ui", help="start the MLflow UI on 127.0.0.1")
    ui.add_argument("--port", type=int, default=UI_PORT)
    args = parser.parse_args(argv)

    print(f"tracking store: {tracking_uri()}")
    if args.command == "list":
        for name in ([args.experiment] if args.experiment else [EXPERIMENT, CHECK_EXPERIMENT]):
            print(f"\nexperiment {name}:")
            print_runs(runs(name, max_results=args.limit))
    elif args.command == "log-check":
        for path in args.results:
            try:
                run = get_run(log_check_run(path))
            except (OSError, json.JSONDecodeError, ProvenanceError) as err:
                print(f"error: {path}: {err}")
                return 1
            print(f"{run['status']:<9} {run['name']}  run {run['run_id']}")
    elif args.command == "demo":
        for dtype in ("float32", "bfloat16"):
            run = output_check_demo(dtype, n=args.n)
            print(f"{run['status']:<9} {run['name']}  run {run['run_id']}"
                  + (f"\n          {run['error']}" if run["error"] else ""))
        print("the bfloat16 configuration fails its output check on purpose: a FAILED run "
              "stays in the record (CPU measurement)")
    elif args.command == "ui":
        cmd = ui_command(args.port)
        print(f"MLflow UI on http://127.0.0.1:{args.port} (Ctrl-C stops it)\n{' '.join(cmd)}")
        os.execv(cmd[0], cmd)
    return 0


if __name__ == "__main__":
    sys.exit(main())

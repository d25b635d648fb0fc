"""Training runs in real processes: start, stop at a known point, SIGKILL, resume.

sharded-training's checker (stage 3) and notebook 05 both run the project's driver
(``coursekit/workloads/train_driver.py``: one process that trains with a learner's
``model.py`` and writes its final state) through these functions, so the notebook shows
the same experiment the grader runs.

    run = run_training(impl, config, ckpt, logdir, "F", limit=120)      # to the end
    run = run_training(impl, config, ckpt, logdir, "A", limit=120,
                       block_after_step=9)            # stops after step 9, then SIGKILLed
    run.status   # "ok" | "killed" (stopped where asked) | "failed" | "timeout" | "exited"
    run.report   # the driver's JSON: steps, losses, first_step, errors by name
    run.final    # {leaf name: np.ndarray} of the final state (status "ok")
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from coursekit.checking import spawn
from coursekit.facts import ROOT
from coursekit.workloads import procgroup

DRIVER = Path(__file__).resolve().parent / "train_driver.py"


@dataclass
class Run:
    name: str
    status: str
    report: dict
    duration_s: float
    proc: procgroup.Proc
    final: dict = field(default_factory=dict)
    marker: dict = field(default_factory=dict)

    @property
    def error(self) -> str:
        """The learner's named error from inside the process, else what happened to it."""
        if self.report.get("error"):
            return self.report["error"]
        if self.status in ("ok", "killed"):
            return ""
        return procgroup.describe([self.proc]) or f"the run ended with status {self.status}"


def driver_cmd(impl, config: dict, ckpt, out, **opts) -> list[str]:
    """The driver's command line; ``opts`` become ``--flag value`` (None skipped)."""
    cmd = [sys.executable, str(DRIVER), "--impl", str(Path(impl).resolve()),
           "--config", json.dumps(config), "--ckpt", str(ckpt), "--out", str(out)]
    for key, value in opts.items():
        if value is not None:
            cmd += [f"--{key.replace('_', '-')}", str(value)]
    return cmd


def read_report(out: Path) -> dict:
    try:
        return json.loads(Path(out).read_text())
    except (OSError, json.JSONDecodeError):
        return {}


def final_leaves(out: Path) -> dict:
    with np.load(Path(out).with_suffix(".npz")) as data:
        return {k: data[k] for k in data.files}


def shared_folders(ckpt, logdir) -> Path:
    """The checkpoint folder (relative paths count from the driver's folder, the course
    root) and the log folder (where the driver writes its report and marker), as folders
    the training processes may write: in the grader's jail they are learner processes of
    their own (``coursekit.checking.spawn``). Returns the log folder."""
    if spawn.learner_group() is None:  # one user for everything: plain folders
        Path(logdir).mkdir(parents=True, exist_ok=True)
        return Path(logdir)
    ckpt = Path(ckpt) if Path(ckpt).is_absolute() else ROOT / ckpt
    if ckpt.is_dir():
        spawn.share_tree(ckpt)  # a copy the checker made: a resumed run writes in it
    else:
        spawn.learner_folder(ckpt)
    return spawn.learner_folder(logdir)


def run_training(impl, config: dict, ckpt, logdir, name: str, *, limit: float,
                 env: dict | None = None, **opts) -> Run:
    """Run the driver. Without a stop option it runs to the end (status "ok" with
    ``final``); with ``block_after_step`` or ``block_in_save`` it is SIGKILLed at that
    point (status "killed"), or reports "exited"/"failed" when it ended first."""
    logdir = shared_folders(ckpt, logdir)
    out, marker = logdir / f"{name}.json", logdir / f"{name}.marker"
    for stale in (out, marker, out.with_suffix(".npz")):
        stale.unlink(missing_ok=True)
    stopping = opts.get("block_after_step") is not None or \
        opts.get("block_in_save") is not None
    if stopping:
        opts["marker"] = str(marker)
    proc = procgroup.start(driver_cmd(impl, config, ckpt, out, **opts), logdir, name,
                           env=env, cwd=ROOT)
    if stopping:
        reached = procgroup.wait_for_file(proc, marker, limit)
        procgroup.kill(proc, "killed" if reached == "reached" else "timeout")
        status = {"reached": "killed", "timeout": "timeout"}.get(reached, "exited")
        if reached == "exited" and proc.status == "failed":
            status = "failed"
        run = Run(name, status, read_report(out), proc.duration_s, proc)
        if reached == "reached":
            run.marker = json.loads(marker.read_text())
        return run
    procgroup.wait_all([proc], limit)
    report = read_report(out)
    status = proc.status if proc.status != "ok" or report.get("ok") else "failed"
    run = Run(name, status, report, proc.duration_s, proc)
    if status == "ok":
        run.final = final_leaves(out)
    return run


def run_processes(impl, config: dict, ckpt, logdir, name: str, *, nproc: int,
                  devices_per_process: int, limit: float, env: dict | None = None,
                  init_timeout: int | None = None) -> list[Run]:
    """``nproc`` driver processes joined by ``jax.distributed`` on a free localhost port,
    started together; one failing stops the others (``procgroup.wait_all``).
    ``init_timeout``: the ``timeout_s`` each gives ``initialize_distributed``."""
    logdir = shared_folders(ckpt, logdir)
    port = procgroup.free_port()
    outs = [logdir / f"{name}{i}.json" for i in range(nproc)]
    for out in outs:
        out.unlink(missing_ok=True)
    cmds = [driver_cmd(impl, config, ckpt, outs[i], devices=devices_per_process,
                       nproc=nproc, pid=i, port=port, init_timeout=init_timeout)
            for i in range(nproc)]
    procs = procgroup.run_group(cmds, logdir, limit, cwd=ROOT,
                                envs=[env] * nproc if env else None,
                                names=[f"process {i}" for i in range(nproc)])
    runs = []
    for out, proc in zip(outs, procs):
        report = read_report(out)
        status = proc.status if proc.status != "ok" or report.get("ok") else "failed"
        run = Run(proc.name, status, report, proc.duration_s, proc)
        if status == "ok":
            run.final = final_leaves(out)
        runs.append(run)
    return runs


def finalized_steps(ckpt) -> list[int]:
    """Steps whose checkpoint folder was committed (Orbax names it by the step number;
    an unfinished save is a ``<step>.orbax-checkpoint-tmp...`` folder)."""
    ckpt = Path(ckpt)
    if not ckpt.is_dir():
        return []
    return sorted(int(p.name) for p in ckpt.iterdir() if p.is_dir() and p.name.isdigit())


def tmp_folders(ckpt) -> list[str]:
    ckpt = Path(ckpt)
    return sorted(p.name for p in ckpt.iterdir() if "tmp" in p.name) if ckpt.is_dir() else []


def max_abs_diff(a: dict, b: dict) -> float:
    """Largest |difference| over the float leaves both states share."""
    worst = 0.0
    for k in sorted(set(a) & set(b)):
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape == y.shape and np.issubdtype(x.dtype, np.floating) and x.size:
            worst = max(worst, float(np.max(np.abs(x.astype(np.float64) - y))))
    return worst


def bitwise_equal(a: dict, b: dict) -> bool:
    return sorted(a) == sorted(b) and all(
        np.asarray(a[k]).dtype == np.asarray(b[k]).dtype and
        np.asarray(a[k]).tobytes() == np.asarray(b[k]).tobytes() for k in a)

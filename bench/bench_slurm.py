"""The Slurm recipe (scripts/grade-slurm.sbatch) on a real single-node Slurm, timed
against the same batch graded on one machine with ``--workers 2``.

    python bench/bench_slurm.py --out build/bench      (or: make bench)

A throw-away cluster (``LocalSlurm``: munged, slurmctld and slurmd of Debian's
slurm-wlm, a generated slurm.conf for localhost on free ports, every file in one
scratch folder) grades a mixed batch (good, unfinished, crashing and looping copies of
performance-audit's reference solution; stage 4) as a 4-task array, one grading worker
and one CPU per task, then the dependent merge + export job. The same batch is graded
on this machine with ``--workers 2``, interleaved rounds, and both gradebooks must agree
item for item.

On one 2-core machine both runs have the same two CPUs: the ratio measures what the
scheduler and four grader start-ups cost, not a speedup. A speedup needs more nodes.

``LocalSlurm`` and ``mixed_batch`` are also what tests/test_slurm_grading.py uses.
Needs root and ``make slurm-deps``; without them this benchmark says why and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "grade-slurm.sbatch"
sys.path.insert(0, str(ROOT))

STAGE = "performance-audit/stage-4"
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol",
            "sinfo")
ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED",
          "RESIZING", "SIGNALING", "STAGE_OUT"}


def _which(program: str) -> str | None:
    return shutil.which(program) or next(
        (str(p) for p in (Path("/usr/sbin") / program, Path("/sbin") / program)
         if os.access(p, os.X_OK)), None)


def unavailable() -> str | None:
    """Why no local Slurm can run here (None: it can)."""
    if sys.platform != "linux":
        return "Slurm needs Linux"
    missing = [p for p in PROGRAMS if not _which(p)]
    if missing:
        return (f"Slurm is not installed ({', '.join(missing)} not found; `make slurm-deps` "
                "installs Debian's slurm-wlm and munge, as root)")
    if os.geteuid() != 0:
        return "a local Slurm (slurmd, SlurmUser=root) needs root"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmError(RuntimeError):
    pass


class LocalSlurm:
    """A one-node Slurm cluster for this machine, all state in ``folder``.

    ``start()`` writes a munge key, starts munged on its own socket, writes slurm.conf
    (controller and node on 127.0.0.1, free ports, no accounting, cons_tres counting
    CPUs only, linuxproc process tracking, no cgroups), starts slurmctld and slurmd in
    the foreground as children of this process and waits for the node to be idle.
    ``stop()`` cancels every job, waits for them to end, stops the daemons and ends any
    process still carrying this cluster's SLURM_CONF in its environment (by pid)."""

    def __init__(self, folder: Path, cpus: int | None = None, kill_wait: int = 5):
        self.dir = Path(folder)
        self.cpus = cpus or os.cpu_count() or 1
        self.kill_wait = kill_wait
        self.conf = self.dir / "slurm.conf"
        self.node = socket.gethostname().split(".")[0]
        self.daemons: dict[str, subprocess.Popen] = {}

    # -- set-up ----------------------------------------------------------------------
    def env(self, **extra: str) -> dict:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def _daemon(self, name: str, argv: list) -> None:
        log = open(self.dir / f"{name}.stdout", "wb")  # noqa: SIM115 - kept by the child
        self.daemons[name] = subprocess.Popen([str(a) for a in argv], stdout=log,
                                              stderr=subprocess.STDOUT, env=self.env(),
                                              start_new_session=True)
        log.close()

    def start(self, timeout: float = 60) -> LocalSlurm:
        d = self.dir
        for sub in ("state", "spool", "munge"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        key = d / "munge" / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        self.socket = d / "munge" / "munge.socket"
        self._daemon("munged", [_which("munged"), "--foreground", "--force",
                                f"--key-file={key}", f"--socket={self.socket}",
                                f"--pid-file={d / 'munge' / 'munged.pid'}",
                                f"--log-file={d / 'munge' / 'munged.log'}",
                                f"--seed-file={d / 'munge' / 'munged.seed'}"])
        self._wait(lambda: self.socket.exists(), timeout, "munged did not create its socket")
        self.ports = (free_port(), free_port())
        self.conf.write_text(self.slurm_conf())
        self._daemon("slurmctld", [_which("slurmctld"), "-D", "-c", "-f", self.conf])
        self._daemon("slurmd", [_which("slurmd"), "-D", "-f", self.conf, "-N", self.node])
        self._wait(lambda: self.sinfo_state() == "idle", timeout,
                   "the node did not come up idle")
        return self

    def slurm_conf(self) -> str:
        d = self.dir
        return "\n".join([
            "ClusterName=course-grading",
            f"SlurmctldHost={self.node}(127.0.0.1)",
            f"SlurmctldPort={self.ports[0]}", f"SlurmdPort={self.ports[1]}",
            "SlurmUser=root", "SlurmdUser=root",
            "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={self.socket}",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SelectType=select/cons_tres", "SelectTypeParameters=CR_CPU",
            "SchedulerType=sched/backfill", "MpiDefault=none", "ReturnToService=2",
            "MailProg=/bin/true",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none", "JobCompType=jobcomp/none",
            f"KillWait={self.kill_wait}", "MinJobAge=600", "InactiveLimit=0",
            f"StateSaveLocation={d / 'state'}", f"SlurmdSpoolDir={d / 'spool'}",
            f"SlurmctldPidFile={d / 'slurmctld.pid'}", f"SlurmdPidFile={d / 'slurmd.pid'}",
            f"SlurmctldLogFile={d / 'slurmctld.log'}", f"SlurmdLogFile={d / 'slurmd.log'}",
            "SlurmctldDebug=info", "SlurmdDebug=info",
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN",
            "PartitionName=grading Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""])

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.daemons.items():
                if proc.poll() is not None:
                    raise SlurmError(f"{name} exited ({proc.returncode}): {self.logs(name)}")
            try:
                if ready():
                    return
            except (subprocess.SubprocessError, OSError):
                pass
            time.sleep(0.2)
        raise SlurmError(f"{what} within {timeout:.0f} s: {self.logs()}")

    def logs(self, *names: str, tail: int = 1500) -> str:
        out = []
        for name in names or ("munged", "slurmctld", "slurmd"):
            for path in (self.dir / f"{name}.stdout", self.dir / f"{name}.log",
                         self.dir / "munge" / f"{name}.log"):
                if path.is_file() and path.stat().st_size:
                    out.append(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}")
        return "\n".join(out)

    # -- use -------------------------------------------------------------------------
    def cmd(self, *args, env: dict | None = None, check: bool = True, **kw
            ) -> subprocess.CompletedProcess:
        done = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                              env={**self.env(), **(env or {})}, timeout=60, check=False,
                              **kw)
        if check and done.returncode != 0:
            raise SlurmError(f"{' '.join(map(str, args))} -> {done.returncode}: "
                             f"{done.stderr.strip()}")
        return done

    def sinfo_state(self) -> str:
        return self.cmd("sinfo", "-h", "-N", "-o", "%T", check=False).stdout.strip()

    def sbatch(self, *args, env: dict | None = None, cwd: Path = ROOT) -> str:
        """Submit; returns the job id (``--parsable``)."""
        out = self.cmd("sbatch", "--parsable", *args, env=env, cwd=cwd).stdout.strip()
        return out.split(";")[0]

    def jobs(self, job: str) -> dict[str, dict]:
        """Every record of a job (each array task its own): label ("12_3" or "14") ->
        scontrol's fields (JobState, Reason, ExitCode, ...)."""
        done = self.cmd("scontrol", "-o", "show", "job", job, check=False)
        out = {}
        for line in done.stdout.splitlines():
            fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
            if "JobId" not in fields:
                continue
            task = fields.get("ArrayTaskId")
            label = f"{fields['ArrayJobId']}_{task}" if task else fields["JobId"]
            out[label] = fields
        return out

    def wait(self, job: str, timeout: float = 300) -> dict[str, str]:
        """Until every task of ``job`` has ended; label -> final JobState."""
        deadline = time.monotonic() + timeout
        while True:
            states = {k: v["JobState"] for k, v in self.jobs(job).items()}
            if states and not ACTIVE & set(states.values()):
                return states
            if time.monotonic() > deadline:
                raise SlurmError(f"job {job} still {states} after {timeout:.0f} s")
            time.sleep(0.3)

    def cancel(self, *jobs: str) -> None:
        self.cmd("scancel", *jobs)

    # -- tear-down -------------------------------------------------------------------
    def stop(self) -> None:
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            self.cmd("scancel", "--user", str(os.getuid()), check=False)
            deadline = time.monotonic() + self.kill_wait + 20
            while time.monotonic() < deadline:
                left = self.cmd("squeue", "-h", "-o", "%i", check=False)
                if left.returncode != 0 or not left.stdout.strip():
                    break
                time.sleep(0.3)
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self.daemons.pop(name, None)
            if proc and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        for pid in self.leftover_pids():  # job steps, graders: ours by their environment
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    def leftover_pids(self) -> list[int]:
        marker = f"SLURM_CONF={self.conf}".encode()
        pids = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and int(entry.name) != os.getpid():
                try:
                    if marker in (entry / "environ").read_bytes().split(b"\0"):
                        pids.append(int(entry.name))
                except OSError:
                    pass
        return pids

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *_) -> None:
        self.stop()


# ----------------------------------------------------------------------------------
# The batch
# ----------------------------------------------------------------------------------

def _samples():
    import autograder.samples as samples
    return samples


CRASH_ONCE_AT = "    ### BEGIN SOLUTION stage 4: predict_step_speedup\n"


def batch_sources(samples) -> dict[str, str]:
    """kind -> model.py: ``samples.hostile_sources`` plus "segfault-once", the reference
    solution with a SIGSEGV in ``predict_step_speedup`` (one check calls it, so the
    checker restarts the learner process once, not once per check as with a crash in
    ``decide``: cheap enough for a short wall-clock limit on a loaded machine). Where
    that anchor is gone, "segfault-once" is samples' plain "segfault"."""
    sources = {kind: text for kind, (text, _) in samples.hostile_sources().items()}
    solution = samples.SOLUTION.read_text()
    sources["segfault-once"] = solution.replace(
        CRASH_ONCE_AT, CRASH_ONCE_AT + "    import ctypes\n    ctypes.string_at(0)\n"
    ) if solution.count(CRASH_ONCE_AT) == 1 else sources["segfault"]
    return sources


def mixed_batch(dest: Path, plan: list[list[str]], samples=None
                ) -> dict[str, tuple[int, str]]:
    """Write submissions so that shard i of ``len(plan)`` holds exactly ``plan[i]``
    (kinds of ``batch_sources``), each named ``<kind>-<k>`` with the smallest k that
    hashes into its shard. Returns student -> (shard, kind)."""
    from autograder.submissions import in_shard
    samples = samples or _samples()
    sources = batch_sources(samples)
    n = len(plan)
    students: dict[str, tuple[int, str]] = {}
    for shard, kinds in enumerate(plan):
        for kind in kinds:
            k = next(k for k in range(10_000) if in_shard(f"{kind}-{k}", (shard, n))
                     and f"{kind}-{k}" not in students)
            students[f"{kind}-{k}"] = (shard, kind)
            samples.write(dest, f"{kind}-{k}", sources[kind])
    return students


def grader(*args, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-m", "autograder", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env,
                          check=False)
    return done


def verdicts(out: Path) -> dict[tuple[str, str], tuple]:
    """(student, item) -> (status, reason, points, max_points) of the latest rows."""
    from autograder.gradebook import Gradebook
    book = Gradebook.in_dir(out)
    try:
        return {k: (r["status"], r["record"].get("reason", ""), r["points"], r["max_points"])
                for k, r in book.latest().items()}
    finally:
        book.close()


def script_env(subs: Path, grading: Path, shards: int, timeout: float, workers: int = 1,
               stages: str = "performance-audit:4") -> dict:
    """The parameters of scripts/grade-slurm.sbatch, as sbatch passes them on."""
    return {"SUBMISSIONS": str(subs), "GRADING": str(grading), "SHARDS": str(shards),
            "STAGES": stages, "TIMEOUT": str(timeout), "WORKERS": str(workers),
            "COURSE": str(ROOT), "PYTHON": sys.executable}


# ----------------------------------------------------------------------------------
# The benchmark
# ----------------------------------------------------------------------------------

PLAN = [["infinite-loop", "starter", "good"], ["good", "always-equal", "segfault-once"],
        ["good", "starter", "syntax-error"], ["good", "segfault-once", "starter"]]
TIMEOUT = 30


def slurm_round(cluster: LocalSlurm, subs: Path, grading: Path, logs: Path) -> float:
    """Submit the array and the dependent merge + export; wall time until the merge job
    has ended (submission to gradebook and CSV)."""
    env = script_env(subs, grading, len(PLAN), TIMEOUT)
    logs.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    array = cluster.sbatch(f"--array=0-{len(PLAN) - 1}", "--cpus-per-task=1",
                           f"--output={logs}/%x-%A_%a.out", SCRIPT, env=env)
    merge = cluster.sbatch(f"--dependency=afterok:{array}", "--cpus-per-task=1",
                           f"--output={logs}/%x-merge-%j.out", SCRIPT, env=env)
    states = cluster.wait(merge, timeout=600)
    wall = time.perf_counter() - start
    bad = {k: v for k, v in {**cluster.wait(array), **states}.items() if v != "COMPLETED"}
    if bad:
        raise SlurmError(f"jobs did not complete: {bad}\n" + "\n".join(
            p.read_text()[-1500:] for p in sorted(logs.glob("*.out"))))
    return wall


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    why = unavailable()
    if why:
        print(f"bench_slurm: skipped: {why}")
        return 0
    tmp = Path(args.out) / "slurm"
    shutil.rmtree(tmp, ignore_errors=True)
    subs = tmp / "submissions"
    students = mixed_batch(subs, PLAN)
    n = len(students)
    print(f"{n} submissions (good, unfinished, wrong, crashing, one endless loop cut at "
          f"{TIMEOUT} s), performance-audit stage 4; {len(PLAN)} Slurm shards of 1 CPU and "
          f"1 worker each vs one machine with --workers 2. CPU figures "
          f"({os.cpu_count()} cores).", flush=True)
    one, slurm = [], []
    started = time.perf_counter()
    with LocalSlurm(tmp / "cluster") as cluster:
        up = time.perf_counter() - started
        for r in range(args.rounds):
            grading = tmp / f"slurm-{r}"
            slurm.append(slurm_round(cluster, subs, grading, tmp / f"logs-{r}"))
            local = tmp / f"local-{r}"
            t0 = time.perf_counter()
            done = grader("grade", subs, "--out", local, "--stages", "performance-audit:4",
                          "--timeout", TIMEOUT, "--workers", 2, "--quiet",
                          "--secrets", grading / "secrets.json")
            one.append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(done.stderr[-3000:])
            a, b = verdicts(grading), verdicts(local)
            if a != b:
                diff = {k: (a.get(k), b.get(k)) for k in a | b if a.get(k) != b.get(k)}
                raise SystemExit(f"Slurm and one-machine gradebooks differ: {diff}")
    s, o = statistics.median(slurm), statistics.median(one)
    print(f"\ncluster start (munged, slurmctld, slurmd up, node idle): {up:.1f} s")
    print(f"4-shard Slurm array + dependent merge/export: {s:6.1f} s  (rounds: "
          + ", ".join(f"{x:.1f}" for x in slurm) + ")")
    print(f"one machine, --workers 2:                    {o:6.1f} s  (rounds: "
          + ", ".join(f"{x:.1f}" for x in one) + ")")
    print(f"Slurm / one machine: {s / o:.2f}x wall time, gradebooks identical item for item. "
          "Same two CPUs for both: this is the scheduler's overhead (job start-up, four "
          "grader start-ups, the merge job), not a speedup; more nodes give the speedup.")
    result = {"submissions": n, "shards": len(PLAN), "timeout_s": TIMEOUT,
              "slurm_wall_s": slurm, "one_machine_workers2_wall_s": one,
              "cluster_start_s": up, "ratio": s / o, "cpu_count": os.cpu_count(),
              "note": "same 2 CPUs for both: scheduler overhead, not a speedup"}
    (Path(args.out) / "bench_slurm.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""sharded-training stage 3's shared training runs: real driver processes
(``coursekit/workloads/train_driver.py``), started only when a check first needs one.

Each run is memoised with ``ctx.once``: it starts at most once per checker run, however
many checks read it, and a run that failed fails every check that reads it with the same
error without being started again. Any check can run alone (``--only``): it starts what
it needs itself. What depends on what, and why:

    config3  one ``run_config(ctx, "stage3")`` for every run below, so that their final
             states can be compared bit for bit.
    F        the uninterrupted run (``uninterrupted``). Read by uninterrupted_run_trains,
             by both kill checks and restore_on_other_device_count (as the result the
             resumed runs must equal) and by two_processes_match_one. Its duration sets
             the wall-clock limit of every run started after it: max(MIN_LIMIT_S, 8 x F)
             (``run_limit``); a run started before F gets FIRST_LIMIT_S. So runs A, B
             and D always start after F (``killed_mid_run`` starts F first).
    A, B     (``killed_mid_run``) A is SIGKILLed *while it saves* step 3 x save_every:
             after that checkpoint is written to its temporary folder, before the commit.
             A copy of A's folder is kept as A left it; then B, a fresh process, resumes
             from A's folder (only when A left a finished checkpoint). One kill covers
             both resume_after_sigkill_bitwise and kill_during_save_falls_back. An
             error of the learner's code in B is kept (``resumed_error``) for the checks
             to raise after naming what the checkpoint lacks, its likely cause.
    D        resumes on 4 devices from the *copy* of A's folder (B has written newer
             checkpoints into the original): restore_on_other_device_count alone, so it
             is not memoised. Needs A, hence F.
    M        two jax.distributed processes x 4 devices (``two_processes``), read by
             distributed_timeouts_set and two_processes_match_one. Its limit is
             COURSE_MP_LIMIT_S, else twice the single-run limit when it starts: in a
             full stage F has run by then; two_processes_match_one run alone starts M
             before F, under 2 x FIRST_LIMIT_S.

Two plain entries of ``ctx.cache`` are shared state rather than memos: ``run_limit``
(set by F) and ``hung`` (the name of a run killed at its limit). After a hang every
later run is refused at once ("not run: an earlier training process hung") instead of
costing another full limit. state_roundtrip and second_train_follows_its_config run in
the learner process and need none of these runs; the checks in sharded_stage3_recovery are
registered in the order above.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import time
from pathlib import Path

from sharded_harness import N_DEVICES
from sharded_reference import run_config

from coursekit.checking.errors import CheckFailed, LearnerCodeError, NotApplicableHere
from coursekit.facts import ROOT
from coursekit.workloads import procgroup, trainruns

# Wall-clock limit of one training process before the uninterrupted run has been timed;
# afterwards each process gets max(MIN_LIMIT, 8 x that run). COURSE_RUN_LIMIT_S overrides.
FIRST_LIMIT_S = float(os.environ.get("COURSE_RUN_LIMIT_S", 150))
MIN_LIMIT_S = float(os.environ.get("COURSE_RUN_LIMIT_S", 60))
# The two-process run's limit (default: twice a single run's). A learner process that
# hangs costs this long before it is killed and named.
MP_LIMIT_S = os.environ.get("COURSE_MP_LIMIT_S")


def run_limit(ctx) -> float:
    return ctx.cache.get("run_limit", FIRST_LIMIT_S)


def failed_run(what: str, run: trainruns.Run, limit: float) -> Exception:
    """The learner's own error from the training process (status not-implemented or
    error), else what happened to the process (killed at the limit, crashed in C++)."""
    if run.report.get("error"):
        return LearnerCodeError(run.report.get("kind", "exception"),
                                f"{what}, in the training process: {run.report['error']}",
                                run.report.get("hint", ""))
    if run.status == "timeout":
        return CheckFailed(f"{what}: the process did not get there within {limit:g} s and "
                           "was killed (a hang?)", yours=f"steps reported: "
                           f"{run.report.get('steps', [])[-3:]}",
                           expected="the run reaches its end (or the point where the "
                           "checker kills it)", hint="does train call on_step(step, loss) "
                           "after every step and save every save_every steps?")
    if run.status == "exited":
        return CheckFailed(f"{what}: the run ended before the checker could kill it",
                           yours=f"steps reported: {run.report.get('steps', [])[-3:]}",
                           expected="a save at every multiple of save_every, on_step after "
                           "every step", hint="train must save at every multiple of "
                           "save_every and call on_step(step, loss) after every step")
    return CheckFailed(f"{what}: {run.error}",
                       yours=procgroup.last_line(run.proc.stderr())[:300] or "no output",
                       expected="the process ends with status 0",
                       hint="run the driver by hand to see the whole error: "
                       f"python {trainruns.DRIVER.relative_to(ROOT)} --help")


def skip_if_hung(ctx) -> None:
    if ctx.cache.get("hung"):
        raise CheckFailed(f"not run: an earlier training process ({ctx.cache['hung']}) "
                          "hung and was killed; fix that first",
                          yours="an earlier run hung", expected="every run ends")


def driver_run(ctx, name: str, config: dict, ckpt: Path, what: str, **opts) -> dict:
    """Run the driver (to the end, or until it is killed where ``opts`` say); its report
    with ``final`` leaves (a finished run) or ``marker`` (a killed one)."""
    skip_if_hung(ctx)
    limit = run_limit(ctx)
    run = trainruns.run_training(ctx.impl_path, config, ckpt, ctx.subdir("logs"), name,
                                 limit=limit, **opts)
    if run.status == "timeout":
        ctx.cache["hung"] = name
    stopping = "block_after_step" in opts or "block_in_save" in opts
    if run.status != ("killed" if stopping else "ok"):
        raise failed_run(what, run, limit)
    return dict(run.report, final=run.final, marker=run.marker,
                duration_s=run.duration_s)


def stage3_config(ctx) -> dict:
    """The stage's run: 4 x save_every steps, so the last step's state is one the
    contract saves (a state saved before its step instead leaves the last one unsaved),
    keeping the newest 2: not make_checkpoint_manager's default of 3, so a manager made
    without the config's max_to_keep keeps one too many."""
    return ctx.once("config3", lambda: run_config(ctx, "stage3", steps=4 * 7, save_every=7,
                                                  max_to_keep=2))


def uninterrupted(ctx) -> dict:
    def make():
        config = stage3_config(ctx)
        ckpt = ctx.subdir("run-F") / "ckpt"
        # The folder is given relative to the driver's working directory (the course
        # root): the contract takes a path, and Orbax refuses relative ones.
        relative = os.path.relpath(ckpt, ROOT)
        started = time.perf_counter()
        try:
            report = driver_run(ctx, "F", config, relative, "the uninterrupted run")
        except LearnerCodeError as err:
            if "should be absolute" not in str(err) and relative not in str(err):
                raise
            raise CheckFailed(f"the uninterrupted run, given the relative ckpt_dir "
                              f"{relative!r}: {err}", yours="the relative path given to "
                              "Orbax", expected="the run saves into that folder",
                              hint="Orbax failed on the relative path itself (its error names "
                              "it), before any step ran: the run was given a relative "
                              "ckpt_dir and must save into that folder all the same") from None
        if "COURSE_RUN_LIMIT_S" not in os.environ:
            ctx.cache["run_limit"] = max(MIN_LIMIT_S, 8 * (time.perf_counter() - started))
        return report
    return ctx.once("F", make)


def killed_mid_run(ctx) -> dict:
    """Run A, SIGKILLed mid-run *while it saves*, and B resuming from its folder, with
    F (the uninterrupted run) as ``full``; see the module docstring."""
    return ctx.once("A", lambda: _killed_mid_run(ctx))


def _killed_mid_run(ctx) -> dict:
    full = uninterrupted(ctx)
    config = stage3_config(ctx)
    save_at = 3 * config["save_every"]
    ckpt = ctx.subdir("run-A") / "ckpt"
    report = driver_run(ctx, "A", config, ckpt, "the run to be killed",
                        block_in_save=save_at)
    killed = {"save_at": save_at, "marker": report.get("marker", {}),
              "steps": report.get("steps", []), "finalized": trainruns.finalized_steps(ckpt),
              "temporary": trainruns.tmp_folders(ckpt), "ckpt": ckpt,
              "copy": ctx.subdir("run-A-copy") / "ckpt"}
    shutil.rmtree(killed["copy"], ignore_errors=True)
    shutil.copytree(ckpt, killed["copy"])
    if killed["finalized"]:
        try:
            killed["resumed"] = driver_run(ctx, "B", config, ckpt, "the resumed run")
        except LearnerCodeError as err:  # each check reading B names its cause first
            killed["resumed_error"] = err
    killed["full"] = full
    return killed


def two_processes(ctx) -> dict:
    return ctx.once("M", lambda: _two_processes(ctx))


# How a machine without TCP sockets refuses one (a TPU VM's sandbox: EAFNOSUPPORT, "Address
# family not supported"; a seccomp filter: EPERM or EACCES): jax.distributed's coordinator
# needs a TCP socket, so its two-process run is not applicable there.
SOCKETS_REFUSED = (errno.EAFNOSUPPORT, errno.EPERM, errno.EACCES)


def require_loopback_tcp() -> None:
    """Raise ``NotApplicableHere`` when this machine refuses a TCP socket on the
    loopback, in the machine's own words (never a socket traceback)."""
    try:
        procgroup.free_port()
    except OSError as err:
        if err.errno not in SOCKETS_REFUSED:
            raise
        raise NotApplicableHere(
            "the two-process jax.distributed run", "its coordinator needs a TCP socket on "
            f"the loopback, and this machine refuses one ({err}); every other stage-3 "
            "check runs here") from None


# The timeout_s the two-process run gives initialize_distributed: drawn, and never its
# default (10), so a timeout written in (the default's, or any other) shows; short enough
# that one crashed process stops the other in seconds either way.
INIT_TIMEOUTS_S = (7, 8, 9, 11, 12, 13)


def init_timeout(ctx) -> int:
    return int(ctx.rng("init-timeout").choice(INIT_TIMEOUTS_S))


def _two_processes(ctx) -> dict:
    require_loopback_tcp()
    skip_if_hung(ctx)
    limit = float(MP_LIMIT_S) if MP_LIMIT_S else 2 * run_limit(ctx)
    timeout_s = init_timeout(ctx)
    runs = trainruns.run_processes(ctx.impl_path, stage3_config(ctx),
                                   ctx.subdir("run-M") / "ckpt", ctx.subdir("logs"), "M",
                                   nproc=2, devices_per_process=N_DEVICES // 2, limit=limit,
                                   init_timeout=timeout_s)
    if any(r.status == "timeout" for r in runs):
        ctx.cache["hung"] = "two-process run"
    result = {"procs": [r.proc for r in runs], "reports": [r.report for r in runs],
              "limit": limit, "timeout_s": timeout_s}
    if all(r.status == "ok" for r in runs):
        result["finals"] = [r.final for r in runs]
    return result


# Errors the JAX runtime raises in a process that was waiting for another one (a
# collective, a barrier, the coordination service): symptoms, not the cause.
WAITING = re.compile(r"DEADLINE_EXCEEDED|timed out|heartbeat|UNAVAILABLE|Barrier", re.I)


def progress(report: dict) -> str:
    steps = report.get("steps") or []
    if steps:
        return f"last step reported: {steps[-1]}"
    if report.get("init_kwargs") is not None:
        return "joined the run, no training step reported"
    return "never joined the run"


# what jax.distributed.initialize says of the ids it was given
GOT_IDS = re.compile(r"process_id=(-?\d+), num_processes=(-?\d+)")


def ids_hint(error: str, process: int, count: int) -> str | None:
    """A hint where JAX's error names the process id and count initialize was given and
    they are not this process's: swapped, or others."""
    found = GOT_IDS.search(error)
    if not found:
        return None
    got_id, got_count = int(found[1]), int(found[2])
    if (got_id, got_count) == (process, count):
        return None
    said = (f"process {process} of {count} gave jax.distributed.initialize "
            f"process_id={got_id}, num_processes={got_count}")
    if (got_id, got_count) == (count, process):
        return (f"{said}: the two are swapped (initialize's positional order is "
                "coordinator_address, num_processes, process_id)")
    return f"{said}: each process passes its own index and the run's process count"


def two_process_failure(result: dict) -> Exception | None:
    """None when both processes finished; else a named error: the learner's exception
    and the process it came from; or, when the only errors are the runtime giving up
    waiting, the process that stopped responding (with how far each one got)."""
    if "finals" in result:
        return None
    reports = result["reports"]
    summary = procgroup.describe(result["procs"], result["limit"])
    culprits = [(i, r) for i, r in enumerate(reports)
                if r.get("error") and not WAITING.search(r["error"])]
    if culprits:
        i, report = culprits[0]
        return LearnerCodeError(report.get("kind", "exception"),
                                f"the two-process run: process {i} raised: "
                                f"{report['error']} ({summary})",
                                ids_hint(report["error"], i, len(reports))
                                or report.get("hint", ""))
    returned = [r.get("at_return") for r in reports]
    if all(isinstance(a, dict) for a in returned):  # train returned everywhere, then ...
        pending = sorted({f for a in returned for f in a.get("temporary") or []})
        return CheckFailed(
            f"the two-process run: train returned in every process, then the processes "
            f"did not end ({summary})",
            yours="; ".join(f"process {i}: train returned with finished checkpoints "
                            f"{a.get('finished')} and temporary folders {a.get('temporary')}"
                            for i, a in enumerate(returned)),
            expected="each process ends once train has returned",
            hint=(f"when train returned, saves were still being written ({pending}) and "
                  "the processes stayed behind for them: every save must have reached the "
                  "disk, and the manager be closed, before train returns") if pending else
            "something train started still runs after it returned (a checkpoint manager "
            "never closed keeps its threads): close what train opens before it returns")
    waiting = [i for i, r in enumerate(reports) if r.get("error")]
    silent = [i for i, r in enumerate(reports) if not r.get("error")]
    where = "; ".join(f"process {i}: {progress(r)}" for i, r in enumerate(reports))
    if waiting and silent:
        error = reports[waiting[0]]["error"]
        return CheckFailed(
            f"the two-process run: process {silent[0]} stopped responding (hung or "
            f"crashed); process {waiting[0]} gave up waiting for it: {error[:200]}",
            yours=f"{where}; {summary}", expected="both processes end with status 0",
            hint="look for code that only some processes run (a sleep, an input, a branch "
            "on jax.process_index()) before a collective or a checkpoint save")
    return CheckFailed(f"the two-process run failed: {summary}",
                       yours=where, expected="both processes end with status 0",
                       hint="a process that raises or hangs holds the others in a "
                       "collective; set all three jax.distributed timeouts")


"""optimisation's checker object and what several stages share: sizes drawn from the
run's seed, the float comparison of parsed figures, and the fresh-process timing of both
versions (``speed_driver.py``) with the stage-2 measurement at the held-out size that
stage 4's records are also checked against.

The workload is ``coursekit.workloads.slow_step``; the checker builds its reference from
it and never imports the learner's file: the learner's functions run in a learner
process (``learner_process=True``) and answer with data. Timing that decides a verdict is
the checker's own: ``run_driver`` times both versions interleaved in a fresh process,
each block's stamps bounded by this process's readings of the same monotonic clock."""

from __future__ import annotations

import json
import math
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

from coursekit.checking.contract import Checker, CheckFailed
from coursekit.checking.learner import LearnerCodeError
from coursekit.measure.decision import decide_rounds

checker = Checker("optimisation", {
    1: "find it", 2: "fix it", 3: "where it stops helping", 4: "the report"},
    learner_process=True)

# Stage 2: the fix must be clearly faster than this factor (decide_rounds' interval
# above it). Measured here (make bench, default size, load 4-9): the reference fix 17.5x
# [15, 20]; each fix alone: one jitted step 2.1x, the lr traced 1.5x, one host read 1.06x,
# the gather 0.9x eager / 2.1x jitted, donation 0.96x. 3x passes a fix that removes both
# the op-by-op dispatch and the per-call recompile (about 6x together) and no single fix.
MIN_SPEEDUP = 3.0
TIMING_ROUNDS, SLOW_ITERS, FAST_ITERS = 6, 1, 4
DRIVER = Path(__file__).resolve().parent / "speed_driver.py"
# A block stamp (the driver's monotonic clock) may not be later than the checker's own
# reading of the same clock when the line arrived; 1 ms of slack for the clock reads.
MARK_SLACK_S = 1e-3


# ---------------------------------------------------------------------------------------
# Sizes drawn per run
# ---------------------------------------------------------------------------------------

def odd(rng, lo: int, hi: int) -> int:
    return int(rng.integers(lo, hi)) | 1


def timing_config(ctx) -> dict:
    """The held-out size of stage 2's timing and stage 4's records."""
    rng = ctx.rng("timing-config")
    return {"vocab": odd(rng, 449, 561), "embed": odd(rng, 56, 72),
            "hidden": odd(rng, 224, 288), "batch": odd(rng, 49, 79),
            "steps": int(rng.integers(12, 17))}


def tiny_config(rng, **sizes) -> dict:
    """A problem of millisecond calls, for checks of counts and rates (not times)."""
    return {"vocab": odd(rng, 31, 61), "embed": odd(rng, 5, 9), "hidden": odd(rng, 7, 15),
            "steps": 2, **sizes}


def close(a, b) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-6)


# ---------------------------------------------------------------------------------------
# Fresh-process timing
# ---------------------------------------------------------------------------------------

def run_driver(ctx, configs: list[dict], seed: int, *, rounds: int, slow_iters: int,
               fast_iters: int, name: str, timeout: float = 400) -> list[dict]:
    """Run speed_driver.py on the learner's file, one size after another; its blocks are
    stamped on the monotonic clock and bounded by this process's readings of it. Returns
    per config the driver's report plus "blocks": {(round, "slow"|"fast"): seconds}."""
    folder = ctx.subdir(f"driver-{name}")
    spec = {"impl": str(Path(ctx.impl_path).resolve()), "configs": configs, "seed": seed,
            "rounds": rounds, "slow_iters": slow_iters, "fast_iters": fast_iters,
            "out": str(folder / "report.json")}
    (folder / "spec.json").write_text(json.dumps(spec))
    tag = secrets.token_hex(8)
    env = {**os.environ, "OPT_BLOCK_TAG": tag, "JAX_PLATFORMS":
           os.environ.get("JAX_PLATFORMS", "cpu")}
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(folder / "spec.json")],
                            stdout=subprocess.PIPE, stderr=open(folder / "stderr", "wb"),
                            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    marks: dict = {}
    refused: list = []

    def read():
        last = -math.inf
        for line in proc.stdout:
            now = time.perf_counter()
            parts = line.decode("utf-8", "replace").split()
            if len(parts) != 5 or parts[1] != tag:
                continue
            stamp = float(parts[4])
            if not last <= stamp <= now + MARK_SLACK_S:
                refused.append(line)
            last = stamp
            marks[(parts[0], int(parts[2]), parts[3])] = stamp
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        raise CheckFailed(f"the timing process ran over {timeout:.0f} s",
                          hint="train_fast should take milliseconds per call at this size"
                          ) from None
    reader.join(timeout=10)
    if refused:
        raise CheckFailed("the timing process wrote block stamps the checker did not see "
                          "happen (from its future or out of order)",
                          yours=refused[0][:120], hint="do not write to stdout in the "
                          "timing process's format")
    report_path = Path(spec["out"])
    if not report_path.is_file():
        tail = (folder / "stderr").read_text(errors="replace").strip()[-500:]
        raise CheckFailed(f"the timing process died (exit {proc.returncode}): {tail}")
    report = json.loads(report_path.read_text())
    if not report.get("ok") and report.get("kind") in ("not-implemented", "missing-function",
                                                        "syntax", "import", "exception"):
        raise LearnerCodeError(report["kind"], f"in the timing process: {report['error']}",
                               report.get("hint", ""))
    if not report.get("ok"):
        raise CheckFailed(f"in the timing process: {report.get('error')}",
                          hint="train_fast must import and run in a fresh process")
    sizes = report["sizes"]
    for (kind, r, which), t in marks.items():
        if kind == "B" and ("E", r, which) in marks:
            version, _, index = which.partition("@")
            sizes[int(index)].setdefault("blocks", {})[(r, version)] = \
                marks[("E", r, which)] - t
    return sizes


def timing_run(ctx) -> dict:
    """Stage 2's fresh-process measurement at the held-out size (shared with stage 4)."""
    def make():
        config = timing_config(ctx)
        report = run_driver(ctx, [config], ctx.seed + 2, rounds=TIMING_ROUNDS,
                            slow_iters=SLOW_ITERS, fast_iters=FAST_ITERS, name="timing")[0]
        before, after = {"samples_s": [], "round_ids": []}, {"samples_s": [], "round_ids": []}
        for r in range(TIMING_ROUNDS):
            for which, rec, n in (("slow", before, SLOW_ITERS), ("fast", after, FAST_ITERS)):
                if (r, which) not in report["blocks"]:
                    raise CheckFailed(f"the timing process did not mark round {r} ({which})")
                rec["samples_s"].append(report["blocks"][(r, which)] / n)
                rec["round_ids"].append(r)
        report.update(config=config, before=before, after=after,
                      decision=decide_rounds(before, after, min_gain=MIN_SPEEDUP - 1))
        return report
    return ctx.once("timing", make)

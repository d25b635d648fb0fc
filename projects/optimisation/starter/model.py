"""optimisation: find the limiting operation of a slow JAX program, make it faster with
its numerical contract intact, find where the gain stops, and report it.

The workload is ``coursekit.workloads.slow_step.train_slow`` (read it first: its module
docstring is the contract your faster version keeps). Your code goes in this file; check
it with

    python projects/optimisation/tests/check.py --stage N --impl THIS_FILE

Stages (notebook 07 walks through each):
  1. find it                  trace_slow, step_breakdown, limiting_operation
  2. fix it                   train_fast
  3. where it stops helping   gain_sweep, crossover, predict_crossover
  4. the report               write_run_records

Every function takes and returns plain data (dicts, lists, numbers, strings, arrays):
the checker calls it from another process. Every figure you produce on this machine is a
CPU figure; say so wherever you report it.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from coursekit.measure import traces
from coursekit.measure.timing import count_compiles
from coursekit.provenance.records import make_run_record
from coursekit.workloads import slow_step

# isort: split

# ---------------------------------------------------------------------------------------
# Stage 1: find it
# ---------------------------------------------------------------------------------------


def trace_slow(config: dict, seed: int, logdir: str) -> str:
    """A ``jax.profiler`` trace of one call of ``slow_step.train_slow`` on
    ``slow_step.make_problem(config, seed)``, as it runs in use.

    Call it once untraced first (its first call compiles every operation for these
    shapes), then once under ``jax.profiler.trace(logdir)`` with a *different* learning
    rate (in use every call gets a new one: use ``problem["lr"] * 0.9``), waiting for the
    result inside the trace. Turn the Python tracer off
    (``jax.profiler.ProfileOptions()``, ``python_tracer_level = 0``): it adds an event per
    Python call and slows every step several times. Returns the path (str) of the newest
    ``*.trace.json.gz`` under ``logdir``.

    Done when the trace holds ``config["steps"]`` ``slow_step.STEP_REGION`` events and
    their total agrees with the checker's own synchronised timing of the same call."""
    raise NotImplementedError('stage 1: trace_slow')


def step_breakdown(trace_file: str, step_region: str, phases: list[str]) -> dict:
    """Where a step's time goes, from a Chrome trace (``.json`` or ``.json.gz``).

    A *step* is a complete event (``ph == "X"``) named ``step_region``; its *phases* are
    its direct children (same pid and tid, inside it, not inside another child) whose
    name is in ``phases``. Returns:
      steps: int, number of step events
      step_us: float, their summed duration (microseconds)
      phase_us: {phase: summed duration over all steps} for every name in ``phases``
          (0.0 for a phase that never occurs)
      other_us: float, step_us minus the phases (time in no phase)
      shares: {phase: phase_us / step_us}
    Done when every number equals the checker's own parse of the same file (rel 1e-6)."""
    raise NotImplementedError('stage 1: step_breakdown')


def limiting_operation(trace_file: str, step_region: str, phases: list[str]) -> dict:
    """The phase that limits the step, with the evidence for it.

    Returns:
      phase: str, the phase with the largest share (``step_breakdown``)
      share: float, its share of the step time (0..1)
      evidence: {"event": name, "count": n, "us": t}: among the direct children of that
          phase's events (all steps together), the event name with the largest summed
          duration, how many such events there are and their summed duration
      amdahl_ceiling: float, the whole step's speedup if that phase took no time at all
          (Amdahl: 1 / (1 - share); ``math.inf`` when share is 1)
    Done when each field equals the checker's own parse of the same trace."""
    raise NotImplementedError('stage 1: limiting_operation')


# ---------------------------------------------------------------------------------------
# Stage 2: fix it
# ---------------------------------------------------------------------------------------


def train_fast(params: dict, tokens, targets, lr: float):
    """The same training as ``slow_step.train_slow(params, tokens, targets, lr)``, faster.

    Keep its contract (``slow_step``'s module docstring): the same arguments and results
    (``(params, losses)``: the same tree, shapes and float32 dtypes), every output within
    ``slow_step.RTOL`` / ``slow_step.ATOL`` of ``train_slow`` on every shape, and a new
    ``lr`` on every call. You may donate ``params`` (the caller never reuses it).

    Done when: outputs match on several shapes, odd ones included; a second and third
    call of a fixed shape (new values, new ``lr``) compile nothing; and, measured by the
    checker in a fresh process in interleaved rounds at a size you have not seen, it is
    clearly faster by at least the factor the README states."""
    raise NotImplementedError('stage 2: train_fast')


# ---------------------------------------------------------------------------------------
# Stage 3: where it stops helping
# ---------------------------------------------------------------------------------------

def _timed(fn) -> float:
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start


def gain_sweep(config: dict, batch_sizes: list[int], rounds: int = 3, seed: int = 0) -> dict:
    """``train_slow`` against your ``train_fast`` at each batch size (other sizes from
    ``config``), measured by you.

    For each size: ``slow_step.make_problem(config with that batch, seed)``; one first
    call of each version, timed apart (compile); then ``rounds`` rounds, each timing one
    call of each version, alternating which goes first, every call synchronised inside
    its timed boundary, with a new learning rate each call (``lr * (1 + 0.01 * i)``) and
    a fresh copy of the parameters for ``train_fast`` (``slow_step.fresh_copy``, made
    outside the timed boundary).

    Returns {"batch_sizes": [...], "slow_s": [[raw seconds] per size],
    "fast_s": [[raw seconds] per size], "gains": [median slow / median fast per size]}.
    Done when your gains agree with the checker's own interleaved sweep within its
    window at every size."""
    raise NotImplementedError('stage 3: gain_sweep')


def crossover(batch_sizes: list[int], gains: list[float], threshold: float) -> float | None:
    """The batch size at which the gain first falls below ``threshold``.

    Walk the sizes in the order given (increasing): at the first pair ``(b0, g0), (b1,
    g1)`` with ``g0 >= threshold > g1``, interpolate linearly in log(batch) against
    log(gain) and return that batch size (a float). The first size when its gain is
    already below ``threshold``; None when no gain falls below it."""
    raise NotImplementedError('stage 3: crossover')


def predict_crossover(config: dict, small: int, large: int, threshold: float,
                      seed: int = 0) -> float | None:
    """Predict, before the sweep, the batch size where the gain falls below ``threshold``.

    Measure each version at only two batch sizes, ``small`` and ``large`` (synchronised,
    compile apart, median of a few calls, new ``lr`` each call), and fit for each version
    time(batch) = overhead + per_example * batch through those two points. Solve
    slow(batch) / fast(batch) = threshold for batch. Returns it as a float, or None when
    the fitted gain never falls to ``threshold`` (slow's per-example cost is at least
    ``threshold`` times fast's).

    Done when it lies within the README's margin of the crossover the checker measures
    with its own sweep."""
    raise NotImplementedError('stage 3: predict_crossover')


# ---------------------------------------------------------------------------------------
# Stage 4: the report
# ---------------------------------------------------------------------------------------

REGION = "optimised_train"


def write_run_records(config: dict, seed: int, outdir: str, *, warmup: int = 1,
                      iters: int = 8) -> dict:
    """Two run records of the workload at ``slow_step.make_problem(config, seed)``, which
    performance-audit's ``load_run`` / ``decide`` read: "before" (``train_slow``) and
    "after" (your ``train_fast``).

    For each version, in this order: one first call, timed alone and synchronised; its
    outputs compared with ``train_slow``'s (``slow_step.RTOL`` / ``ATOL``) for
    ``output_ok``; ``warmup`` untimed calls; ``iters`` timed calls, each synchronised
    inside its boundary; then one traced call under ``jax.profiler.trace`` inside
    ``jax.profiler.TraceAnnotation(REGION)``. Every call gets a new learning rate and
    (for ``train_fast``) a fresh copy of the parameters made outside the timed boundary.
    Count compiles with ``coursekit.measure.timing.count_compiles``.

    Each record is ``coursekit.provenance.records.make_run_record(timing,
    boundary="train", trace=..., region=REGION)`` where ``timing`` holds performance-audit
    ``time_fn``'s keys (label "before"/"after", sync "block_until_ready", shapes and
    dtypes of tokens and targets, backend ...). Writes ``outdir/before.json`` and
    ``outdir/after.json`` and returns {"before": path, "after": path} (str)."""
    raise NotImplementedError('stage 4: write_run_records')

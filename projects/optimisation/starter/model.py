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
    """A ``jax.profiler`` trace, written under ``logdir``, of exactly one call of
    ``slow_step.train_slow`` on ``slow_step.make_problem(config, seed)`` as it runs in use:
    a steady call (not the one that compiles its operations for these shapes), with a
    learning rate of its own (in use every call gets a new one), finished inside the trace,
    and without the profiler's Python tracer (its per-call events slow the steps they
    show). Returns the path (str) of that ``*.trace.json.gz`` file.

    Checked: the file holds ``config["steps"]`` ``slow_step.STEP_REGION`` events (one
    call, no more), no Python-call events (names starting with ``$``), a compile's events
    inside one step's ``update`` phase (the recompile a new learning rate causes there,
    as in the checker's own trace of such a call), and the steps' summed duration is
    within 2.5x of the checker's own synchronised timing of the same call, taken just
    before and just after yours (a traced compiling call is about 5x)."""
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
      shares: {phase: phase_us / step_us} (0.0 for every phase when there is no step)
    Durations come from the trace's events (``dur``, microseconds). Checked: every number
    equals the checker's own parse (rel 1e-6) of a real trace of ``train_slow``, of a
    hand-built trace with decoys (a phase name nested deeper, on another thread, outside
    every step, and a region whose name starts with ``step_region``), of one whose phases
    hold no calls and of one without any step event."""
    raise NotImplementedError('stage 1: step_breakdown')


def limiting_operation(trace_file: str, step_region: str, phases: list[str]) -> dict:
    """The phase that limits the step, with the evidence for it.

    Steps and phases as in ``step_breakdown``. Returns:
      phase: str, the phase with the largest share of the step time
      share: float, its share of the step time (0..1)
      evidence: {"event": name, "count": n, "us": t}: among the direct children of that
          phase's events (all steps together), the event name with the largest summed
          duration (microseconds), how many such events there are and their summed duration;
          {"event": "", "count": 0, "us": 0.0} when those events have no children
      amdahl_ceiling: float, the whole step's speedup if that phase took no time at all
          (``math.inf`` when share is 1)
    Checked: each field equals the checker's own parse (rel 1e-6) of the same traces as
    ``step_breakdown`` but the one without a step; in the one with decoys the name with
    the most time is not the one with the most calls, and calls nest inside same-named
    calls."""
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

    Checked: outputs within the contract on three odd shapes, twice per shape with new
    values, on a confident model (parameters whose logits reach 100-200, where float32's
    ``exp`` overflows), and the gradient a one-step call implies; then, timed by the checker in
    interleaved rounds at a size you have not seen (``train_slow`` in its own process,
    yours in blocks it times from its side): a timed call's losses match ``train_slow``'s
    in every round, later calls of the fixed shape compile nothing and take under a third
    of the first call, and the speedup's interval lies above the README's factor (3x)."""
    raise NotImplementedError('stage 2: train_fast')


# ---------------------------------------------------------------------------------------
# Stage 3: where it stops helping
# ---------------------------------------------------------------------------------------


def gain_sweep(config: dict, batch_sizes: list[int], rounds: int = 3, seed: int = 0) -> dict:
    """How much faster ``train_fast`` is than ``train_slow`` at each batch size, from
    your own measurements in this process (the problem of each size:
    ``slow_step.make_problem`` of ``config`` with that batch, and ``seed``).

    Returns {"batch_sizes": the sizes given, in order (ints); "slow_s", "fast_s": per
    size, ``rounds`` raw samples in seconds (lists, not summaries); "gains": per size,
    median slow sample / median fast sample (unitless)}.

    What must hold for a sample: it is the wall time of one call and of that call alone,
    finished (its outputs computed) before its clock stops; a call that compiles is not a
    sample; no two calls share a learning rate (in use each call gets its own);
    ``train_fast`` may donate its parameters, and whatever that needs is outside the
    sample. The versions are measured in rounds that interleave them, so that load
    drifting over the sweep reaches both alike.

    How it is checked: one sample per round and gains equal to those of your own samples
    (rel 1e-9), also for a drawn number of rounds (30-40) on a tiny problem where the
    learning rate of every call of either version is watched; your median fast call grows
    from the smallest size to the largest at least a quarter as much as the checker's own
    measurement of it grows on the same device; at every size your medians are
    within 5x of the checker's own, in rounds interleaved with more calls of yours (an
    unsynchronised timer is 20x+ off)."""
    raise NotImplementedError('stage 3: gain_sweep')


def crossover(batch_sizes: list[int], gains: list[float], threshold: float) -> float | None:
    """The batch size (a float) at which the gain first falls below ``threshold``.

    ``batch_sizes`` increase; between two neighbouring sizes the gain is taken as a
    straight line in (log batch, log gain). Returns the smallest batch size where that
    curve goes from at or above ``threshold`` to below it; the first size when its gain is
    already below ``threshold``; None when no gain falls below it.

    Checked: equal (rel 1e-9) to the checker's own on random decreasing gains, including a
    threshold never reached, one already passed at the first size, a crossing between
    neighbours far apart (the larger above the square of the smaller), gains far above
    and below the threshold, and a gain exactly at it (between other sizes, at the first
    size and at the last)."""
    raise NotImplementedError('stage 3: crossover')


def predict_crossover(config: dict, small: int, large: int, threshold: float,
                      seed: int = 0) -> dict:
    """Predict, before the sweep, the batch size where the gain falls below ``threshold``,
    from measurements of each version at only two batch sizes, ``small`` and ``large``
    (synchronised calls in seconds, compile apart, a new ``lr`` each call), under the
    model that each version's call time is a fixed cost per call plus a cost per example.

    Returns {"crossover": the batch size (a float, at least 1.0), or None when the
    modelled gain never falls to ``threshold``; "median_slow_s": [at small, at large],
    "median_fast_s": [at small, at large]}: the median call times (seconds) the
    prediction was made from.

    Checked, at the README's threshold (4x), at a higher one (the gain the checker's
    model of its sweep gives a quarter of the way from ``small`` to ``large`` in log,
    at least 8x), at one no fix reaches at any batch (4000x: the floor, 1.0, when the
    fast version has a fixed cost per call) and at one it never falls to (0.1: None):
    "crossover" is what the model gives on your own medians at the threshold given
    (rel 1e-9); each median is within 5x of the checker's own
    measurements of that version at that size, taken right before or after each call, in
    interleaved rounds (an unsynchronised timer is 20x+ off)."""
    raise NotImplementedError('stage 3: predict_crossover')


# ---------------------------------------------------------------------------------------
# Stage 4: the report
# ---------------------------------------------------------------------------------------

REGION = "optimised_train"


def write_run_records(config: dict, seed: int, outdir: str, *, warmup: int = 1,
                      iters: int = 8) -> dict:
    """Two run records of the workload at ``slow_step.make_problem(config, seed)``, one
    of ``train_slow`` ("before") and one of your ``train_fast`` ("after"), which
    performance-audit's ``load_run`` / ``decide`` read. Writes ``outdir/before.json``
    and ``outdir/after.json``; returns {"before": path, "after": path} (str).

    What must hold for each record:
      - it is a valid run record (``coursekit.provenance.records.make_run_record`` builds
        one; ``validate_run_record`` judges it) of boundary "train" and region ``REGION``,
        whose timing holds performance-audit ``time_fn``'s fields with their meaning
        there: label "before"/"after", sync "block_until_ready", ``warmup`` and ``iters``
        as given, ``shapes`` and ``dtypes`` of tokens and targets, ``backend``;
      - ``first_call_s`` (seconds) is the first call alone, compile included;
        ``samples_s`` holds ``iters`` raw seconds, each one call, finished before its
        clock stops, taken after ``warmup`` calls that are not samples; after the first
        call no two calls of a version share a learning rate (the first calls of both
        versions take the problem's own, the inputs ``output_ok`` compares), and what
        ``train_fast``'s donated parameters need stays outside every sample;
      - ``compiles_first_call`` / ``compiles_warmed``: compile events during the first
        call and during all later calls (``coursekit.measure.timing.count_compiles``
        counts them);
      - ``output_ok``: whether the first call's outputs are within ``slow_step.RTOL`` /
        ``ATOL`` of ``train_slow``'s on the same inputs; a wrong output is not timed;
      - its trace: a ``jax.profiler`` trace of one more call inside a ``REGION``
        annotation, without the Python tracer.

    How it is checked: both records valid, their traces holding ``REGION`` and no
    Python-tracer events, of tokens and targets of this problem; ``warmup``/``iters`` as
    given with one sample per timed call (also 30-40 timed calls on a tiny problem);
    output checks passed; no compile in the after's timed calls, and in the before's at
    least what the checker counts for ``train_slow`` with a new learning rate per call;
    ``output_ok`` False when the checker makes ``train_fast`` wrong for one more call
    (its losses, then its parameters);
    each record's median call and their speedup within 4x of the checker's own
    measurement, in interleaved rounds with smaller calls of yours (an unsynchronised
    "after" is 50x+ off)."""
    raise NotImplementedError('stage 4: write_run_records')

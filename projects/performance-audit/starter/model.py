"""performance-audit: measure a JAX workload, explain the evidence, test a trade-off, decide.

Your code goes in this file; check it with

    python projects/performance-audit/tests/check.py --stage N --impl THIS_FILE

Stages (notebooks 01-04 and 08 walk through each):
  1. a comparable measurement     time_fn, comparable, experiment_shape_change,
                                  experiment_host_read
  2. explain the evidence         write_trace, newest_trace_file, summarize_region,
                                  matmul_cost_by_hand, cost_from_compiler,
                                  measure_peak_flops, measure_bandwidth, cache_sizes,
                                  roofline
  3. test a trade-off             init_blocks, block_loss, tanh_chain_loss,
                                  loss_and_grads, saved_residual_bytes,
                                  compiler_temp_bytes, peak_rss_fresh_process
  4. decide what is ready         load_run, decide, predict_step_speedup

Every figure you produce on this machine is a CPU figure; say so wherever you report it.
"""

from __future__ import annotations

import gzip
import json
import math
import resource
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

# isort: split

# ---------------------------------------------------------------------------------------
# Stage 1: a comparable measurement
# ---------------------------------------------------------------------------------------

SYNC_METHODS = ("block_until_ready", "host_read")


def time_fn(fn, *args, warmup: int = 2, iters: int = 10, sync: str = "block_until_ready",
            expected=None, rtol: float = 1e-5, atol: float = 1e-6, label: str = "") -> dict:
    """Time ``fn(*args)`` so that the result is comparable with another measurement.

    What must hold (the checker counts your calls of ``fn``: ``1 + warmup + iters``, no
    others):
      - the first call is measured alone: ``first_call_s`` covers it (trace, compile and
        run, finished) and nothing else, and it is never a sample;
      - ``samples_s`` holds ``iters`` raw seconds, one per call made after ``warmup``
        calls that are not samples, each covering its call's work *finished* (the
        outputs computed, not only dispatched);
      - ``sync`` names how completion is waited for: "block_until_ready" (JAX's wait) or
        "host_read" (every output leaf read to the host, which also waits); anything
        else is a ValueError;
      - with ``expected``, the first call's output is compared with it
        (``np.allclose`` semantics with ``rtol``/``atol``) before anything is timed; a
        wrong output gives ``output_ok=False`` and no warmed samples; without it,
        ``output_ok`` is None.

    Returns a JSON-able dict:
      label: str; sync: str; warmup: int; iters: int
      first_call_s: float seconds of the first call alone
      samples_s: list of ``iters`` floats, seconds (raw, not a summary)
      compiles_first_call / compiles_warmed: int, XLA compiles during the first call and
          during every later call (``jax.monitoring`` events; 0 when warmed)
      shapes: list of lists (shape of each array argument); dtypes: list of str
      output_ok: bool or None; backend: str (``jax.default_backend()``)

    How it is checked (stage 1): the warmed median against the checker's own
    synchronised timing of the same work (an unsynchronised timer is about 10^4 times too
    fast), also after many warm-up calls, compile never in ``samples_s``, compile counts
    against the compiles of ``fn`` (also one that compiles again in a warm-up call), a
    wrong output reported, and ``first_call_s``
    against the checker's own first call of a fresh, never-compiled copy of the same
    work, measured before and after yours, on works whose compile dwarfs one run, equals
    it, and is dwarfed by it. Size hint: a 512x512 matmul takes a few ms on 2 CPU cores.
    """
    raise NotImplementedError('stage 1: time_fn (first call apart, then synced warmed calls)')


def comparable(a: dict, b: dict) -> list[str]:
    """Why two ``time_fn`` results may not be compared; an empty list means they may.

    Compares shapes, dtypes, sync method, warm-up count and backend, and refuses a
    result whose output check failed; nothing else: two runs of one configuration (other
    samples, first call, ``iters`` or label) may be compared. Each reason is a short
    sentence naming the field, e.g. "shapes differ: [[512, 512]] vs [[513, 512]]".
    """
    raise NotImplementedError('stage 1: comparable')


def experiment_shape_change(fn, x, x_changed, *, warmup: int = 2, iters: int = 10) -> dict:
    """Two ``time_fn`` measurements of ``fn`` that differ in the input shape alone
    (``x``, then ``x_changed``): ``{"base": ..., "changed": ...}``, ``warmup`` and
    ``iters`` as given. Checked: the changed measurement's first call shows the new
    compile and ``comparable`` names only the shape."""
    raise NotImplementedError('stage 1: experiment_shape_change')


def experiment_host_read(fn, x, *, warmup: int = 2, iters: int = 10) -> dict:
    """Two ``time_fn`` measurements of ``fn(x)`` that differ in the sync method alone:
    ``{"block": ... "block_until_ready", "host_read": ... "host_read"}``, ``warmup`` and
    ``iters`` as given. Checked: both medians measure the same completed work and
    ``comparable`` names only the sync method."""
    raise NotImplementedError('stage 1: experiment_host_read')


# ---------------------------------------------------------------------------------------
# Stage 2: explain the evidence (trace, then roofline)
# ---------------------------------------------------------------------------------------

def write_trace(step_fn, args: tuple, logdir: str, region: str, steps: int = 3) -> str:
    """Trace ``steps`` steady steps of ``step_fn(*args)`` into ``logdir`` with
    ``jax.profiler`` and return the path (str) of the trace file this call wrote.

    What must hold in the trace: the event named ``region`` appears exactly ``steps``
    times, once per step; each occurrence holds one *completed* step (its duration is
    compared with the checker's own synchronised timing of the same work); no compile
    happens inside any occurrence. Checked (stage 2) on the stage-1 work (tens of ms a
    step), after an earlier trace in the same ``logdir``, and against XProf's reading of
    the ``.xplane.pb`` the profiler writes beside the JSON."""
    raise NotImplementedError('stage 2: write_trace')


def newest_trace_file(logdir: str) -> Path:
    """The ``*.trace.json.gz`` file (a Path) of the newest trace run under ``logdir``
    (runs live in ``logdir/plugins/profile/<timestamp>/``; every ``jax.profiler.trace``
    adds one). Raise FileNotFoundError naming ``logdir`` when there is none. Checked
    (stage 2) on a folder of several runs seconds apart, made out of order, and on an
    empty folder."""
    raise NotImplementedError('stage 2: newest_trace_file')


def summarize_region(trace_file: str, region: str) -> dict:
    """Find every complete event (``ph == "X"``) named ``region`` in a Chrome trace
    (``.json`` or ``.json.gz``) and describe it.

    Returns:
      count: int, occurrences of the region
      total_us: float, summed duration of those occurrences (microseconds)
      children: {name: summed duration in us} of *direct* children only: events on the
          same pid and tid inside a region occurrence, not inside another such event
      child_us: float, sum of the direct children's durations; nested events are
          counted once (a PjitFunction nested in itself must not be added twice)
      self_us: float, the region's time not covered by its direct children
    Checked (stage 2) against the checker's own parse of a real ``jax.profiler`` trace and
    of hand-built ones with nested events, events on other threads and processes, an
    event that starts inside the region and ends after it, events whose names start with
    the region's name (they are other events), events that start or end together (with
    the region, or one where another ends) and an event cut off without its ``dur`` (not
    a complete event). Durations to 1e-6 relative.
    """
    raise NotImplementedError('stage 2: summarize_region')


def matmul_cost_by_hand(m: int, k: int, n: int, itemsize: int) -> dict:
    """FLOPs and bytes of ``(m, k) @ (k, n)`` with ``itemsize``-byte elements, counted by
    hand the way the compiler counts a plain matmul: every multiply and every add is a
    FLOP, and the bytes are the least traffic the product needs (each array touched once).
    Returns {"flops": int, "bytes": int}. Checked (stage 2) exactly against the checker's
    count on random odd shapes, float32 and bfloat16."""
    raise NotImplementedError('stage 2: matmul_cost_by_hand')


def cost_from_compiler(fn, *args) -> dict:
    """The compiler's own count for ``jax.jit(fn)`` on ``args``, as it will run: the
    *compiled* (optimised, fused) program, not the traced one. Returns ``{"flops": float,
    "bytes": float}``: its total FLOPs and total bytes accessed (inputs, outputs and
    intermediates together). Checked (stage 2) for equality with the checker's own
    compile of the same function, on matmuls of both dtypes and on a program XLA fuses."""
    raise NotImplementedError('stage 2: cost_from_compiler')


def measure_peak_flops(n: int = 1024, iters: int = 5, dtype: str = "float32") -> dict:
    """This machine's attained matmul rate for an ``(n, n) @ (n, n)`` product in ``dtype``
    ("float32", or "bfloat16": an accelerator's fast dtype), from ``iters`` steady,
    completed calls (no compile, no dispatch-only timings).

    Returns a JSON-able dict:
      n: int, the size timed
      dtype: str, the dtype timed
      flops: int, the FLOPs of one product, counted the way ``matmul_cost_by_hand`` counts
      samples_s: list of ``iters`` raw seconds, one per timed call
      best_s: float, the fastest of them
      flops_per_s: float, the attained rate (FLOP/s) of that fastest call
    Checked (stage 2): ``flops`` exactly against the checker's count for the odd ``n`` it
    asks for; ``best_s`` the minimum of ``samples_s``; ``flops_per_s`` consistent with
    ``flops`` and ``best_s`` to 1e-9; ``best_s`` within 4x of the checker's own
    synchronised matmul of that size, measured interleaved with your calls, also with
    ``iters=1`` on sizes new to your process.
    Size hint: n=512 takes a few ms on 2 CPU cores.
    """
    raise NotImplementedError('stage 2: measure_peak_flops')


BANDWIDTH_KINDS = ("in_place", "read_sum", "fresh_output")


def measure_bandwidth(nbytes: int = 256 * 2**20, iters: int = 5,
                      kind: str = "in_place") -> dict:
    """Attained memory bandwidth of one streaming op on a float32 array of ``nbytes``
    (``nbytes // 4`` elements), measured so that no sample pays for fresh memory pages.

    ``kind``:
      "in_place"     ``x * 2 + 1`` written into its own input (the input donated)
      "read_sum"     ``jnp.sum(x)``, read-dominated
      "fresh_output" ``x * 2 + 1`` into a new array each call (for contrast only: it pays
                     for fresh memory pages)

    Returns a JSON-able dict:
      kind: str; nbytes: int
      moved_bytes: int, bytes of the array the op reads plus writes in one call
      samples_s: list of ``iters`` raw seconds, one per steady, completed call
      minor_faults: list of ``iters`` ints, the minor page faults this process took
          during each sample
      bandwidth: float, bytes/s at the fastest sample (``moved_bytes`` over it, to 1e-9)

    Checked (stage 2): moved bytes exactly; in-place and read_sum bandwidths against the
    checker's own measurements interleaved with your calls (within a factor the physics
    allows; a fresh output each call reads several times slower here); no page faults in
    your in-place samples, and your fresh_output fault counts against the checker's own.
    Size hint: 64 MiB takes a few ms per call on 2 CPU cores.
    """
    raise NotImplementedError('stage 2: measure_bandwidth (in place, faults per sample)')


def cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict:
    """This machine's data-cache sizes in bytes (ints) by level, e.g.
    ``{"L1": 49152, "L2": 2097152, "L3": 33554432}``, as the kernel describes cpu0's
    caches in ``root`` (sysfs: one ``index*`` folder per cache, each with ``type``,
    ``level`` and ``size`` files; sizes like ``48K``, ``2M``, ``1G`` or plain bytes;
    instruction caches hold no data). An index whose files are missing or unreadable is
    skipped; ``{}`` when ``root`` does not exist. Checked (stage 2) for equality with the
    checker's own reading of this machine's folder and of folders it writes itself
    (every unit, broken entries among good ones)."""
    raise NotImplementedError('stage 2: cache_sizes')


def roofline(flops: float, nbytes: float, peak_flops: float, bandwidth,
             working_set_bytes: int, caches: dict) -> dict:
    """Place one workload on the roofline.

    ``bandwidth``: bytes/s, or ``{level: bytes/s}`` measured per memory level ("L1", ...,
    "DRAM"); then the figure of the level the working set lives in is used (the roof is
    only right for that level).

    Inputs: ``flops`` and ``nbytes`` of one call; ``peak_flops`` FLOP/s; ``caches``
    ``{level: bytes}`` as ``cache_sizes`` returns.

    Returns (floats unless said):
      memory_level: str, the memory level the working set lives in: the smallest level in
          ``caches`` (by size; names need not sort by size) that holds it (a working set
          of exactly a level's size fits it), or "DRAM"
      bandwidth: the bytes/s used (that level's, when a dict was given)
      intensity: FLOP per byte of this workload
      ridge: FLOP per byte where the compute roof and this level's memory roof meet
      bound: "memory" or "compute", the roof that limits this workload
      attainable_flops: FLOP/s the roofline allows this workload
      predicted_s: the roofline's time for one call, seconds
      compute_s, memory_s: seconds if only arithmetic, or only memory traffic, limited it
      lower_s, upper_s: the fastest and slowest time those two allow (their work fully
          overlapped, or not overlapped at all)
    Checked (stage 2) to 1e-9 relative against the checker's own arithmetic, on
    workloads either side of the ridge and working sets in every level.
    """
    raise NotImplementedError('stage 2: roofline')


# ---------------------------------------------------------------------------------------
# Stage 3: test a trade-off (rematerialisation)
# ---------------------------------------------------------------------------------------

REMAT_POLICIES = ("nothing_saveable", "dots_saveable", "everything_saveable")


def init_blocks(key, depth: int, width: int, hidden: int) -> list:
    """``depth`` residual blocks, each ``{"w1": (width, hidden), "w2": (hidden, width)}``
    float32, scaled by 1/sqrt(fan_in). Uses only ``key`` (split per block)."""
    keys = jax.random.split(key, 2 * depth)
    return [{"w1": jax.random.normal(keys[2 * i], (width, hidden)) / math.sqrt(width),
             "w2": jax.random.normal(keys[2 * i + 1], (hidden, width)) / math.sqrt(hidden)}
            for i in range(depth)]


def block(p: dict, x):
    """One residual block: ``x + gelu(x @ w1) @ w2``; x: (batch, width) float32."""
    return x + jax.nn.gelu(x @ p["w1"]) @ p["w2"]


def block_loss(params: list, x, policy: str | None = None):
    """Mean of squares of the output of all blocks (``block``) applied in order: a
    float32 scalar. ``policy``: None (nothing rematerialised) or one of
    ``REMAT_POLICIES``, the ``jax.checkpoint_policies`` rule for what each *block* saves
    for the backward pass (the rest is recomputed there); anything else is a ValueError.
    Checked (stage 3, through ``loss_and_grads`` and the byte counts): equal gradients
    under every policy, one checkpoint region per block in the exported program, and
    fewer saved bytes with ``nothing_saveable``."""
    raise NotImplementedError('stage 3: block_loss')


def tanh_chain_loss(ws: list, x, policy: str | None = None):
    """Mean of squares after a plain chain of layers ``x = tanh(x @ w)``, one per entry of
    ``ws`` (square float32 matrices): a float32 scalar. ``policy`` as in ``block_loss``,
    applying to each *layer*. Checked (stage 3) through ``saved_residual_bytes`` and
    ``compiler_temp_bytes`` against the checker's own model."""
    raise NotImplementedError('stage 3: tanh_chain_loss')


MODELS = {"blocks": block_loss, "tanh": tanh_chain_loss}


def loss_and_grads(params: list, x, policy: str | None = None):
    """``(loss, grads)`` of ``block_loss`` with ``policy``, grads with respect to
    ``params`` (a pytree shaped like ``params``). Checked (stage 3): grads with every
    policy equal the checker's no-remat grads within rtol 1e-5 (compare them before you
    time anything), and the program this function runs really rematerialises when a
    policy is given (one checkpoint region per block in its exported program)."""
    raise NotImplementedError('stage 3: loss_and_grads')


def saved_residual_bytes(params: list, x, policy: str | None = None,
                         model: str = "blocks") -> int:
    """Bytes the backward pass keeps from the forward pass (the residuals) of
    ``MODELS[model]`` ("blocks": ``block_loss``, "tanh": ``tanh_chain_loss`` with ``params``
    its list of weights), an int: the bytes of every saved value in its own dtype. Count
    only residuals, not the parameters and inputs themselves (they are kept anyway).

    Use public JAX APIs only (``jax.ad_checkpoint.print_saved_residuals`` prints the list
    for reading). Checked (stage 3) for equality with the checker's own count, without
    remat and with every policy, in float32 and bfloat16, for both models.
    """
    raise NotImplementedError('stage 3: saved_residual_bytes')


def compiler_temp_bytes(params: list, x, policy: str | None = None,
                        model: str = "blocks") -> int:
    """Bytes of temporary buffers in the compiler's memory plan for the jitted
    ``value_and_grad`` of ``MODELS[model]`` with ``policy`` (an int; arguments and
    outputs are not temporaries: the temporaries are the part remat can shrink). Checked
    (stage 3) for equality with the checker's compile of your own program and of its own
    model, for every policy, and nothing_saveable below no remat."""
    raise NotImplementedError('stage 3: compiler_temp_bytes')


def peak_rss_fresh_process(depth: int, width: int, hidden: int, batch: int,
                           policy: str | None = None, repeats: int = 3) -> dict:
    """Observed peak memory of *running* one jitted ``loss_and_grads`` call (inputs from
    ``init_blocks(jax.random.key(0), ...)`` and a ``(batch, width)`` normal input),
    measured ``repeats`` times, each in a fresh Python process: the memory of the device
    that ran it (host memory on a CPU; the accelerator's own memory where
    ``memory_stats()`` reports it, where one process at a time may hold the device).

    A process's high-water mark (``VmHWM`` in ``/proc/self/status``; a device's
    ``peak_bytes_in_use``) also holds the runtime, the compile and the inputs; what is
    asked is the run alone.

    Returns a JSON-able dict (bytes, ints):
      run_peak_bytes: list, one per repeat: how far above what the process held just
          before the run its memory rose during the run (the device's, where it reports
          memory, else the host's)
      vmhwm_bytes: list, VmHWM after the run
      pids: list of the fresh processes' pids
      argument_size_in_bytes, output_size_in_bytes, temp_size_in_bytes,
      peak_memory_in_bytes, total_allocation_bytes: ``memory_analysis()`` of the program
          the fresh process ran (the compiler's plan, for comparison); None for a field
          this JAX does not report (0.10 has no total_allocation_bytes)
      device_peak_bytes: ``jax.devices()[0].memory_stats()["peak_bytes_in_use"]`` where the
          device reports it, else None (CPU: VmHWM is host memory, never an accelerator's)
    Checked (stage 3): one distinct fresh process per repeat (repeats=1 too), neither
    the checker's nor yours, started and waited for by your call (the checker reads
    the CPU your process's finished children spent); the median of your repeats (the
    one, with repeats=1) within 1.35x of the checker's own run-only peak of the same
    model in its own fresh processes; the no-remat run above ``nothing_saveable`` where
    the checker's own readings on that device show a saving (where they show none,
    your two in the ratio its own have); the plan's arguments and outputs exact.
    Size hint: 3 blocks, width 33, hidden 513, batch 6001: about 1 s each.
    """
    raise NotImplementedError('stage 3: peak_rss_fresh_process (the run alone)')


# ---------------------------------------------------------------------------------------
# Stage 4: decide what is ready
# ---------------------------------------------------------------------------------------

def load_run(path: str) -> dict:
    """Read one run record (JSON) written by a measurement: a ``time_fn`` dict plus
    ``boundary`` (name of what was timed), optional ``trace`` (path) and ``region``.
    sharded-training's trace-and-timing stage writes the same format."""
    return json.loads(Path(path).read_text())


def predict_step_speedup(share: float, kernel_speedup: float) -> float:
    """The whole step's speedup (time before / time after, a float) when a part taking
    ``share`` (0..1) of the step's time gets ``kernel_speedup`` times faster and nothing
    else changes. Checked (stage 4) to 1e-9 relative on random shares and speedups."""
    raise NotImplementedError('stage 4: predict_step_speedup')


def decide(before: dict, after: dict, *, min_gain: float = 0.05,
           confidence: float = 0.95) -> dict:
    """Judge the claim "after is faster than before" from two run records.

    Inputs: run records (``load_run``). ``samples_s`` are raw seconds, one per timed call.
    A record may carry ``round_ids``: for each sample, the index of the interleaved round
    it was measured in (each round times both variants back to back, in alternating
    order, so both see the same background load). A record without ``round_ids`` counts
    each sample as its own round.

    Returns {"decision": "accept" | "reject" | "slower", "reasons": [str, ...],
    "ratio": float or None, "ci": [lo, hi] or None}:
      ratio: the speedup, time before / time after (> 1: after is faster); unitless.
      ci: an interval of that speedup at ``confidence`` (0.95: 95%).
      accept: the whole interval says after is faster by more than ``min_gain`` (0.05: 5%).
      slower: the whole interval says after is slower by more than that minimum.
      reject: anything else: no change of that size can be told from noise, or the pair
          may not be compared at all (then ratio and ci are None and the reasons say why).

    What must hold:
      - Not comparable means reject: ``comparable`` refuses the pair, an output check
        that is not True, a record without its first call reported apart, or fewer than
        5 raw samples.
      - The interval treats the *round* as the unit of evidence: samples of one round
        share that round's load, so 8 rounds of 20 samples are 8 pieces of evidence, not
        160.
      - Every reason is a sentence computed from the numbers.
      - ``min_gain >= 0``: a negative one raises ValueError.

    How it is checked: on planted records from seeds you do not see: a clear 2x speedup
    is accepted; noise that looks 3% faster, a faster but wrong run and pairs that cannot
    be compared are rejected; a 2.6% gain is below the minimum (and accepted with
    ``min_gain=0``); identical programs measured in drifting rounds, where pooled samples
    look clearly faster, are rejected; a true 1.25x measured in drifting rounds is
    accepted; a real slowdown is "slower", one smaller than the minimum is not; unpaired
    rounds of unequal counts and spreads keep the interval at the confidence asked;
    samples with stalls (a few 20-60x slower than the rest) change none of these.
    """
    raise NotImplementedError('stage 4: decide (refuse what is not comparable, then weigh rounds)')

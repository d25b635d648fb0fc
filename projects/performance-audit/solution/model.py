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
### BEGIN SOLUTION
from coursekit.measure.decision import t_quantile
from coursekit.measure.timing import count_compiles

### END SOLUTION

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
    ### BEGIN SOLUTION stage 1: time_fn (first call apart, then synced warmed calls)
    if sync not in SYNC_METHODS:
        raise ValueError(f"sync must be one of {SYNC_METHODS}, got {sync!r}")

    def wait(out):
        if sync == "block_until_ready":
            return jax.block_until_ready(out)
        return jax.tree.map(np.asarray, out)

    with count_compiles() as first:
        start = time.perf_counter()
        out = wait(fn(*args))
        first_call_s = time.perf_counter() - start
    output_ok = None
    if expected is not None:
        output_ok = bool(np.allclose(np.asarray(out), np.asarray(expected),
                                     rtol=rtol, atol=atol))
    samples = []
    with count_compiles() as warmed:
        if output_ok is not False:
            for _ in range(warmup):
                wait(fn(*args))
            for _ in range(iters):
                start = time.perf_counter()
                wait(fn(*args))
                samples.append(time.perf_counter() - start)
    arrays = [a for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]
    return {
        "label": label, "sync": sync, "warmup": warmup, "iters": iters,
        "first_call_s": first_call_s, "samples_s": samples,
        "compiles_first_call": first[0], "compiles_warmed": warmed[0],
        "shapes": [list(a.shape) for a in arrays], "dtypes": [str(a.dtype) for a in arrays],
        "output_ok": output_ok, "backend": jax.default_backend(),
    }
    ### END SOLUTION


def comparable(a: dict, b: dict) -> list[str]:
    """Why two ``time_fn`` results may not be compared; an empty list means they may.

    Compares shapes, dtypes, sync method, warm-up count and backend, and refuses a
    result whose output check failed; nothing else: two runs of one configuration (other
    samples, first call, ``iters`` or label) may be compared. Each reason is a short
    sentence naming the field, e.g. "shapes differ: [[512, 512]] vs [[513, 512]]".
    """
    ### BEGIN SOLUTION stage 1: comparable
    reasons = []
    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):
        if a.get(key) != b.get(key):
            reasons.append(f"{key} differ: {a.get(key)!r} vs {b.get(key)!r}")
    for name, m in (("first", a), ("second", b)):
        if m.get("output_ok") is False:
            reasons.append(f"output_ok is False for the {name} measurement")
    return reasons
    ### END SOLUTION


def experiment_shape_change(fn, x, x_changed, *, warmup: int = 2, iters: int = 10) -> dict:
    """Two ``time_fn`` measurements of ``fn`` that differ in the input shape alone
    (``x``, then ``x_changed``): ``{"base": ..., "changed": ...}``, ``warmup`` and
    ``iters`` as given. Checked: the changed measurement's first call shows the new
    compile and ``comparable`` names only the shape."""
    ### BEGIN SOLUTION stage 1: experiment_shape_change
    return {"base": time_fn(fn, x, warmup=warmup, iters=iters, label="base"),
            "changed": time_fn(fn, x_changed, warmup=warmup, iters=iters, label="changed")}
    ### END SOLUTION


def experiment_host_read(fn, x, *, warmup: int = 2, iters: int = 10) -> dict:
    """Two ``time_fn`` measurements of ``fn(x)`` that differ in the sync method alone:
    ``{"block": ... "block_until_ready", "host_read": ... "host_read"}``, ``warmup`` and
    ``iters`` as given. Checked: both medians measure the same completed work and
    ``comparable`` names only the sync method."""
    ### BEGIN SOLUTION stage 1: experiment_host_read
    return {"block": time_fn(fn, x, warmup=warmup, iters=iters, label="block"),
            "host_read": time_fn(fn, x, warmup=warmup, iters=iters, sync="host_read",
                                 label="host_read")}
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 2: write_trace
    jax.block_until_ready(step_fn(*args))
    with jax.profiler.trace(logdir):
        for i in range(steps):
            with jax.profiler.TraceAnnotation(region, step=i):
                jax.block_until_ready(step_fn(*args))
    return str(newest_trace_file(logdir))
    ### END SOLUTION


def newest_trace_file(logdir: str) -> Path:
    """The ``*.trace.json.gz`` file (a Path) of the newest trace run under ``logdir``
    (runs live in ``logdir/plugins/profile/<timestamp>/``; every ``jax.profiler.trace``
    adds one). Raise FileNotFoundError naming ``logdir`` when there is none. Checked
    (stage 2) on a folder of several runs seconds apart, made out of order, and on an
    empty folder."""
    ### BEGIN SOLUTION stage 2: newest_trace_file
    files = sorted(Path(logdir).glob("plugins/profile/*/*.trace.json.gz"),
                   key=lambda p: (p.stat().st_mtime, str(p)))
    if not files:
        raise FileNotFoundError(f"no *.trace.json.gz under {logdir}/plugins/profile/")
    return files[-1]
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 2: summarize_region
    opener = gzip.open if str(trace_file).endswith(".gz") else open
    with opener(trace_file, "rt") as fh:
        events = json.load(fh)
    events = events["traceEvents"] if isinstance(events, dict) else events
    complete = [e for e in events if e.get("ph") == "X" and "dur" in e]
    regions = [e for e in complete if e.get("name") == region]
    children: dict[str, float] = {}
    for r in regions:
        r_end = r["ts"] + r["dur"]
        inside = sorted((e for e in complete
                         if e is not r and e.get("pid") == r.get("pid")
                         and e.get("tid") == r.get("tid")
                         and e["ts"] >= r["ts"] and e["ts"] + e["dur"] <= r_end),
                        key=lambda e: (e["ts"], -e["dur"]))
        covered_until = -math.inf
        for e in inside:
            if e["ts"] + e["dur"] <= covered_until:
                continue  # nested inside a direct child already counted
            if e["ts"] < covered_until:
                continue  # overlaps a direct child without nesting: not a child
            children[e["name"]] = children.get(e["name"], 0.0) + float(e["dur"])
            covered_until = e["ts"] + e["dur"]
    total = float(sum(r["dur"] for r in regions))
    child = float(sum(children.values()))
    return {"count": len(regions), "total_us": total, "children": children,
            "child_us": child, "self_us": total - child}
    ### END SOLUTION


def matmul_cost_by_hand(m: int, k: int, n: int, itemsize: int) -> dict:
    """FLOPs and bytes of ``(m, k) @ (k, n)`` with ``itemsize``-byte elements, counted by
    hand the way the compiler counts a plain matmul: every multiply and every add is a
    FLOP, and the bytes are the least traffic the product needs (each array touched once).
    Returns {"flops": int, "bytes": int}. Checked (stage 2) exactly against the checker's
    count on random odd shapes, float32 and bfloat16."""
    ### BEGIN SOLUTION stage 2: matmul_cost_by_hand
    return {"flops": 2 * m * k * n, "bytes": (m * k + k * n + m * n) * itemsize}
    ### END SOLUTION


def cost_from_compiler(fn, *args) -> dict:
    """The compiler's own count for ``jax.jit(fn)`` on ``args``, as it will run: the
    *compiled* (optimised, fused) program, not the traced one. Returns ``{"flops": float,
    "bytes": float}``: its total FLOPs and total bytes accessed (inputs, outputs and
    intermediates together). Checked (stage 2) for equality with the checker's own
    compile of the same function, on matmuls of both dtypes and on a program XLA fuses."""
    ### BEGIN SOLUTION stage 2: cost_from_compiler
    cost = jax.jit(fn).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return {"flops": float(cost["flops"]), "bytes": float(cost["bytes accessed"])}
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 2: measure_peak_flops
    a = jnp.ones((n, n), jnp.float32).astype(dtype)
    f = jax.jit(lambda a: a @ a)
    jax.block_until_ready(f(a))
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        jax.block_until_ready(f(a))
        samples.append(time.perf_counter() - start)
    flops = 2 * n**3
    best = min(samples)
    return {"n": n, "dtype": str(a.dtype), "flops": flops, "samples_s": samples,
            "best_s": best, "flops_per_s": flops / best}
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 2: measure_bandwidth (in place, faults per sample)
    if kind not in BANDWIDTH_KINDS:
        raise ValueError(f"kind must be one of {BANDWIDTH_KINDS}, got {kind!r}")
    if kind == "read_sum":
        f = jax.jit(jnp.sum)
    else:
        f = jax.jit(lambda v: v * 2.0 + 1.0,
                    donate_argnums=0 if kind == "in_place" else ())
    x = jnp.ones((nbytes // 4,), jnp.float32)

    def call(x):
        out = jax.block_until_ready(f(x))
        return out if kind == "in_place" else x  # donated: the output is the next input

    x = call(x)
    samples, faults = [], []
    for _ in range(iters):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        x = call(x)
        samples.append(time.perf_counter() - start)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    moved = (1 if kind == "read_sum" else 2) * (nbytes // 4) * 4
    return {"kind": kind, "nbytes": int(nbytes), "moved_bytes": moved, "samples_s": samples,
            "minor_faults": faults, "bandwidth": moved / min(samples)}
    ### END SOLUTION


def cache_sizes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> dict:
    """This machine's data-cache sizes in bytes (ints) by level, e.g.
    ``{"L1": 49152, "L2": 2097152, "L3": 33554432}``, as the kernel describes cpu0's
    caches in ``root`` (sysfs: one ``index*`` folder per cache, each with ``type``,
    ``level`` and ``size`` files; sizes like ``48K``, ``2M``, ``1G`` or plain bytes;
    instruction caches hold no data). An index whose files are missing or unreadable is
    skipped; ``{}`` when ``root`` does not exist. Checked (stage 2) for equality with the
    checker's own reading of this machine's folder and of folders it writes itself
    (every unit, broken entries among good ones)."""
    ### BEGIN SOLUTION stage 2: cache_sizes
    sizes = {}
    for index in sorted(Path(root).glob("index*")):
        try:
            kind = (index / "type").read_text().strip()
            level = int((index / "level").read_text())
            size = (index / "size").read_text().strip()
        except (OSError, ValueError):
            continue
        if kind == "Instruction":
            continue
        units = {"K": 2**10, "M": 2**20, "G": 2**30}
        value = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)
        sizes[f"L{level}"] = value
    return dict(sorted(sizes.items()))
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 2: roofline
    level = "DRAM"
    for name, size in sorted(caches.items(), key=lambda kv: kv[1]):
        if working_set_bytes <= size:
            level = name
            break
    if isinstance(bandwidth, dict):
        if level not in bandwidth:
            raise KeyError(f"no bandwidth measured for {level} (have {sorted(bandwidth)})")
        bandwidth = bandwidth[level]
    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    attainable = min(peak_flops, intensity * bandwidth)
    compute_s, memory_s = flops / peak_flops, nbytes / bandwidth
    return {"intensity": intensity, "ridge": ridge, "bandwidth": bandwidth,
            "bound": "memory" if intensity < ridge else "compute",
            "attainable_flops": attainable, "predicted_s": flops / attainable,
            "memory_level": level, "compute_s": compute_s, "memory_s": memory_s,
            "lower_s": max(compute_s, memory_s), "upper_s": compute_s + memory_s}
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 3: block_loss
    step = block
    if policy is not None:
        if policy not in REMAT_POLICIES:
            raise ValueError(f"policy must be None or one of {REMAT_POLICIES}")
        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, policy))
    for p in params:
        x = step(p, x)
    return jnp.mean(x**2)
    ### END SOLUTION


def tanh_chain_loss(ws: list, x, policy: str | None = None):
    """Mean of squares after a plain chain of layers ``x = tanh(x @ w)``, one per entry of
    ``ws`` (square float32 matrices): a float32 scalar. ``policy`` as in ``block_loss``,
    applying to each *layer*. Checked (stage 3) through ``saved_residual_bytes`` and
    ``compiler_temp_bytes`` against the checker's own model."""
    ### BEGIN SOLUTION stage 3: tanh_chain_loss
    def layer(w, h):
        return jnp.tanh(h @ w)
    if policy is not None:
        if policy not in REMAT_POLICIES:
            raise ValueError(f"policy must be None or one of {REMAT_POLICIES}")
        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, policy))
    for w in ws:
        x = layer(w, x)
    return jnp.mean(x**2)
    ### END SOLUTION


MODELS = {"blocks": block_loss, "tanh": tanh_chain_loss}


def loss_and_grads(params: list, x, policy: str | None = None):
    """``(loss, grads)`` of ``block_loss`` with ``policy``, grads with respect to
    ``params`` (a pytree shaped like ``params``). Checked (stage 3): grads with every
    policy equal the checker's no-remat grads within rtol 1e-5 (compare them before you
    time anything), and the program this function runs really rematerialises when a
    policy is given (one checkpoint region per block in its exported program)."""
    ### BEGIN SOLUTION stage 3: loss_and_grads
    return jax.value_and_grad(block_loss)(params, x, policy)
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 3: saved_residual_bytes
    loss = MODELS[model]
    _, pullback = jax.vjp(lambda p, v: loss(p, v, policy), params, x)
    arguments = {id(leaf) for leaf in jax.tree.leaves((params, x))}
    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(pullback)
                   if id(leaf) not in arguments))
    ### END SOLUTION


def compiler_temp_bytes(params: list, x, policy: str | None = None,
                        model: str = "blocks") -> int:
    """Bytes of temporary buffers in the compiler's memory plan for the jitted
    ``value_and_grad`` of ``MODELS[model]`` with ``policy`` (an int; arguments and
    outputs are not temporaries: the temporaries are the part remat can shrink). Checked
    (stage 3) for equality with the checker's compile of your own program and of its own
    model, for every policy, and nothing_saveable below no remat."""
    ### BEGIN SOLUTION stage 3: compiler_temp_bytes
    loss = MODELS[model]
    fn = jax.jit(lambda p, v: jax.value_and_grad(loss)(p, v, policy))
    return int(fn.lower(params, x).compile().memory_analysis().temp_size_in_bytes)
    ### END SOLUTION


### BEGIN SOLUTION stage 3: _peak_call (what peak_rss_fresh_process's processes run)
def _peak_call(depth, width, hidden, batch, policy):
    """What each fresh process measures (it imports this file by path): the jitted
    ``loss_and_grads`` and its inputs."""
    params = init_blocks(jax.random.key(0), depth, width, hidden)
    x = jax.random.normal(jax.random.key(1), (batch, width), jnp.float32)
    return (lambda p, v: loss_and_grads(p, v, policy)), (params, x)


# One fresh process: build the inputs, compile, start the runtime, then reset VmHWM to the
# current RSS (clear_refs 5) so that the run alone raises it; the compiler's plan beside.
_PEAK_CHILD = r"""
import importlib.util, json, os, sys
spec = json.loads(sys.argv[1])
sys.path[:0] = spec["path"]
import jax, jax.numpy as jnp

def status(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0

found = importlib.util.spec_from_file_location("peak_model", spec["file"])
model = importlib.util.module_from_spec(found)
found.loader.exec_module(model)
fn, args = model._peak_call(**spec["kwargs"])
args = jax.block_until_ready(args)
compiled = jax.jit(fn).lower(*args).compile()
jax.block_until_ready(jax.jit(lambda v: v + 1)(jnp.ones(8)))
try:
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
except OSError:  # a sandbox may refuse it: the device's own counters still say
    pass
rss = status("VmRSS")
held = (jax.devices()[0].memory_stats() or {}).get("bytes_in_use")
out = jax.block_until_ready(compiled(*args))
hwm = status("VmHWM")
plan = compiled.memory_analysis()
stats = jax.devices()[0].memory_stats() or {}
peak = stats.get("peak_bytes_in_use")
print("RESULT " + json.dumps({
    "run_peak_bytes": hwm - rss if peak is None or held is None else peak - held,
    "vmhwm_bytes": hwm, "pid": os.getpid(), "device_peak_bytes": peak,
    **{f: int(getattr(plan, f)) if hasattr(plan, f) else None for f in spec["fields"]}}))
"""
### END SOLUTION


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
    ### BEGIN SOLUTION stage 3: peak_rss_fresh_process (the run alone)
    import os
    import subprocess
    import sys
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    fields = ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes",
              "peak_memory_in_bytes", "total_allocation_bytes")
    kwargs = {"depth": depth, "width": width, "hidden": hidden, "batch": batch,
              "policy": policy}
    spec = json.dumps({"file": str(Path(__file__).resolve()), "fields": fields,
                       "path": [p for p in sys.path if p], "kwargs": kwargs})
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}

    def one(_):
        with tempfile.TemporaryDirectory() as folder:  # -I and a folder of its own
            done = subprocess.run([sys.executable, "-I", "-c", _PEAK_CHILD, spec], cwd=folder,
                                  env=env, capture_output=True, text=True, timeout=300)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if done.returncode != 0 or not lines:
            raise RuntimeError(f"peak child failed (exit {done.returncode}): "
                               f"{done.stderr[-800:]}")
        return json.loads(lines[-1][len("RESULT "):])

    runs = [one(0)]  # a device that reports memory admits one process at a time
    workers = 1 if runs[0]["device_peak_bytes"] is not None else len(os.sched_getaffinity(0))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        runs += list(pool.map(one, range(1, repeats)))
    return {"run_peak_bytes": [r["run_peak_bytes"] for r in runs],
            "vmhwm_bytes": [r["vmhwm_bytes"] for r in runs], "pids": [r["pid"] for r in runs],
            "device_peak_bytes": runs[0]["device_peak_bytes"],
            **{f: runs[0][f] for f in fields}}
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 4: predict_step_speedup
    return 1.0 / ((1.0 - share) + share / kernel_speedup)
    ### END SOLUTION


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
    ### BEGIN SOLUTION stage 4: decide (refuse what is not comparable, then weigh rounds)
    reasons = list(comparable(before, after))
    for name, run in (("before", before), ("after", after)):
        if run.get("first_call_s") is None:
            reasons.append(f"{name} has no first call reported apart from warmed samples")
        if len(run.get("samples_s") or []) < 5:
            reasons.append(f"{name} has fewer than 5 raw samples")
        if run.get("output_ok") is not True:
            reasons.append(f"{name} output check did not pass (output_ok="
                           f"{run.get('output_ok')!r})")
    if reasons:
        return {"decision": "reject", "reasons": reasons, "ratio": None, "ci": None}
    if min_gain < 0:
        raise ValueError(f"min_gain must be >= 0, got {min_gain!r}")

    def medians(run):  # {round: median seconds}; no round_ids: a round per sample
        samples = [float(s) for s in run["samples_s"]]
        if any(not math.isfinite(s) or s <= 0 for s in samples):
            raise ValueError("samples_s must be a list of positive seconds")
        ids = run.get("round_ids", range(len(samples)))
        if len(ids) != len(samples):
            raise ValueError(f"round_ids holds {len(ids)} entries for {len(samples)} samples")
        by_round = {}
        for r, sample in zip(ids, samples):
            by_round.setdefault(int(r), []).append(sample)
        return {r: float(np.median(v)) for r, v in sorted(by_round.items())}

    mb, ma = medians(before), medians(after)
    shared = sorted(set(mb) & set(ma))
    if "round_ids" in before and "round_ids" in after and len(shared) >= 2:
        # paired rounds: drift common to a round cancels in its log ratio
        method, n_rounds = "paired rounds", len(shared)
        d = np.array([math.log(mb[r]) - math.log(ma[r]) for r in shared])
        df = d.size - 1
        est = float(d.mean())
        half = t_quantile(confidence, df) * (float(np.std(d, ddof=1)) / math.sqrt(d.size))
        rows = [{"round": r, "before_s": mb[r], "after_s": ma[r], "ratio": mb[r] / ma[r]}
                for r in shared]
    else:
        # unpaired rounds: Welch's t on the mean per-round log medians
        method, n_rounds = "unpaired rounds", min(len(mb), len(ma))
        lb, la = np.log(list(mb.values())), np.log(list(ma.values()))
        est, half, df, rows = float(lb.mean() - la.mean()), math.inf, 0, []
        if lb.size >= 2 and la.size >= 2:
            vb, va = float(np.var(lb, ddof=1)) / lb.size, float(np.var(la, ddof=1)) / la.size
            df = lb.size + la.size - 2 if vb + va == 0 else max(1, math.floor(
                (vb + va) ** 2 / (vb**2 / (lb.size - 1) + va**2 / (la.size - 1))))
            half = t_quantile(confidence, df) * math.sqrt(vb + va)
            rows = [{"round": r, "before_s": mb.get(r), "after_s": ma.get(r),
                     "ratio": mb[r] / ma[r] if r in mb and r in ma else None}
                    for r in sorted(set(mb) | set(ma))]
    out = {"ratio": math.exp(est), "ci": None, "rounds": rows, "method": method,
           "n_rounds": n_rounds}
    if not math.isfinite(half):
        return {**out, "decision": "reject", "reasons": [
            f"fewer than 2 rounds on one side ({method}): no interval can be formed; "
            "measure in several interleaved rounds"]}
    lo, hi = math.exp(est - half), math.exp(est + half)
    up, down = 1.0 + min_gain, 1.0 / (1.0 + min_gain)
    where = (f"{confidence:.0%} interval of the speedup [{lo:.3f}, {hi:.3f}] from "
             f"{n_rounds} {method} (t, {df} degrees of freedom)")
    if lo > up:
        decision, why = "accept", (f"lies above 1 + {min_gain:g}: faster by at least the "
                                   "minimum gain")
    elif hi < down:
        decision, why = "slower", (f"lies below 1 / (1 + {min_gain:g}) = {down:.3f}: slower "
                                   "by at least the minimum")
    elif lo > 1.0:
        decision, why = "reject", (f"is above 1 but does not clear 1 + {min_gain:g}: a real "
                                   "gain smaller than the minimum")
    elif hi < 1.0:
        decision, why = "reject", (f"is below 1 but does not reach 1 / (1 + {min_gain:g}): a "
                                   "real slowdown smaller than the minimum")
    else:
        decision, why = "reject", "holds 1: no detectable change"
    result = {**out, "ci": [lo, hi], "decision": decision, "reasons": [f"{where} {why}"]}
    return result
    ### END SOLUTION

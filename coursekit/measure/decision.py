"""Timing in interleaved rounds, and the statistics helpers around a decision.

Why rounds: on a shared machine the load drifts (per-round medians move by +-18% over a
minute here), and the samples of one block share that block's load. Pooled samples are
not independent, so a bootstrap that resamples them claims differences between identical
programs (it excluded 1 in 89 of 200 null pairs with 8 drifting rounds). What to conclude
from rounds is performance-audit stage 4's exercise (``decide``); the course's own
statistic and its estimates of a ratio over rounds are instructor-only
(``coursekit.instructor.decision``).

API (stdlib + numpy + scipy; no JAX, so checkers, notebooks and benchmarks can all use it)::

    measure_interleaved(before_fn, after_fn, rounds=8, iters=5, warmup=1)
        times two zero-argument callables (each must wait for its own result) in
        alternating rounds and returns their samples with round_ids and cpu_s
    round_ids_of(record)     each sample's round (one round per sample without round_ids)
    grouped(record)          {round: its samples}; samples_by_round(record) their lists
    contention(record)       per-round CPU-time / wall-time: which rounds lost the CPU
    t_quantile(confidence, df)   a Student-t quantile (scipy.stats.t.ppf, two-sided)
    pooled_bootstrap(before, after)  the pooled-sample statistic, kept only so benchmarks
        and notebooks can show how it fails under drift; never decide with it
    simulate_pair(rng, true_ratio)   a pair of records with drifting rounds (tests, bench)

``before`` and ``after`` are run-record-like dicts: ``samples_s`` (raw seconds, one per
timed call) and optionally ``round_ids`` (for each sample, the index of the interleaved
round it was measured in) and ``cpu_s`` (process CPU seconds of each sample).
"""

from __future__ import annotations

import math
import time

import numpy as np

OUTCOMES = ("accept", "reject", "slower")
# A round whose process got less than this fraction of the CPU per wall second that the
# best round got was sharing the cores (two busy competitors halve it on 2 cores).
CONTENDED_FRACTION = 0.75


# ---------------------------------------------------------------------------------------
# Student's t quantile
# ---------------------------------------------------------------------------------------

def t_quantile(confidence: float, df: int) -> float:
    """The t with P(|T| < t) = ``confidence`` for Student's t with ``df`` >= 1 degrees of
    freedom (12.706 for 95% and df 1; 2.365 for df 7): ``scipy.stats.t.ppf`` at the
    two-sided point."""
    from scipy import stats
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    df = int(df)
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    return float(stats.t.ppf(0.5 + confidence / 2, df))


# ---------------------------------------------------------------------------------------
# Rounds of a record
# ---------------------------------------------------------------------------------------

def _samples(record: dict, name: str) -> np.ndarray:
    samples = np.asarray(record.get("samples_s") or [], dtype=float)
    if samples.ndim != 1 or not np.all(np.isfinite(samples)) or np.any(samples <= 0):
        raise ValueError(f"{name}: samples_s must be a list of positive seconds")
    return samples


def round_ids_of(record: dict) -> list[int]:
    """The record's ``round_ids``, or one round per sample (0, 1, 2, ...) without them."""
    n = len(record.get("samples_s") or [])
    ids = record.get("round_ids")
    if ids is None:
        return list(range(n))
    if len(ids) != n:
        raise ValueError(f"round_ids holds {len(ids)} entries for {n} samples")
    return [int(r) for r in ids]


def grouped(record: dict, values=None) -> dict[int, list[float]]:
    """{round id: its values} in round order: the record's samples, or ``values`` (one
    per sample) grouped the same way."""
    values = record.get("samples_s") or [] if values is None else values
    out: dict[int, list[float]] = {}
    for r, v in zip(round_ids_of(record), values, strict=True):
        out.setdefault(r, []).append(float(v))
    return dict(sorted(out.items()))


def samples_by_round(record: dict) -> list[list[float]]:
    """The record's samples, one list per round, rounds in order."""
    return list(grouped(record).values())


# ---------------------------------------------------------------------------------------
# Measuring in rounds, with contention evidence
# ---------------------------------------------------------------------------------------

def measure_interleaved(before_fn, after_fn, *, rounds: int = 8, iters: int = 5,
                        warmup: int = 1, names: tuple[str, str] = ("before", "after")) -> dict:
    """Time two zero-argument callables in ``rounds`` alternating blocks (before, after;
    after, before; ...). Each callable must run the work *and wait for it* (for JAX:
    ``lambda: jax.block_until_ready(f(x))``). Each is first called once, timed alone
    (the compiling call, reported apart); every block makes ``warmup`` untimed calls,
    then ``iters`` timed calls.

    Returns {name: {"first_call_s", "samples_s", "round_ids", "cpu_s", "warmup",
    "iters"}}: raw wall seconds per call, the round of each sample, and the process CPU
    seconds (``time.process_time``, all threads) of each call, the contention evidence."""
    if rounds < 1 or iters < 1:
        raise ValueError("rounds and iters must be >= 1")
    fns = dict(zip(names, (before_fn, after_fn), strict=True))
    out = {}
    for name, fn in fns.items():
        start = time.perf_counter()
        fn()
        out[name] = {"first_call_s": time.perf_counter() - start, "samples_s": [],
                     "round_ids": [], "cpu_s": [], "warmup": warmup, "iters": 0}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            fn, rec = fns[name], out[name]
            for _ in range(warmup):
                fn()
            for _ in range(iters):
                cpu0, wall0 = time.process_time(), time.perf_counter()
                fn()
                rec["samples_s"].append(time.perf_counter() - wall0)
                rec["cpu_s"].append(time.process_time() - cpu0)
                rec["round_ids"].append(r)
    for rec in out.values():
        rec["iters"] = len(rec["samples_s"])
    return out


def contention(record: dict) -> dict:
    """Contention evidence from per-sample CPU time (``cpu_s``) against wall time.

    Utilisation = process CPU seconds per wall second of a call. The work of a call needs
    about the same CPU time whatever the load; when another process holds a core, the
    call waits and its utilisation falls. Returns {"utilisation": median over samples,
    "per_round": {round: median utilisation}, "contended_rounds": rounds below
    CONTENDED_FRACTION of the best round, "worst_vs_best": lowest / highest round}."""
    wall = _samples(record, "record")
    cpu = np.asarray(record.get("cpu_s") or [], dtype=float)
    if cpu.shape != wall.shape:
        raise ValueError(f"cpu_s holds {cpu.size} entries for {wall.size} samples")
    use = cpu / wall
    per_round = {r: float(np.median(u)) for r, u in grouped(record, use).items()}
    best = max(per_round.values())
    contended = [r for r, u in per_round.items() if best > 0 and u < CONTENDED_FRACTION * best]
    return {"utilisation": float(np.median(use)), "per_round": per_round,
            "contended_rounds": contended,
            "worst_vs_best": min(per_round.values()) / best if best > 0 else 1.0}


# ---------------------------------------------------------------------------------------
# The statistic it replaces, and simulated drifting rounds
# ---------------------------------------------------------------------------------------

def pooled_bootstrap(before: dict, after: dict, *, n_boot: int = 2000, seed: int = 0,
                     confidence: float = 0.95, min_gain: float = 0.05) -> dict:
    """The pooled-sample bootstrap: resample every sample as if independent, an interval
    of median(before) / median(after), "accept" when all of it clears the minimum gain.
    Kept to show how it fails under drift; never decide with it."""
    b, a = _samples(before, "before"), _samples(after, "after")
    rng = np.random.default_rng(seed)
    ratios = (np.median(rng.choice(b, (n_boot, b.size)), axis=1)
              / np.median(rng.choice(a, (n_boot, a.size)), axis=1))
    tail = (1 - confidence) / 2 * 100
    lo, hi = (float(v) for v in np.percentile(ratios, [tail, 100 - tail]))
    decision = "accept" if lo > 1 + min_gain else "reject"
    return {"decision": decision, "ratio": float(np.median(b) / np.median(a)), "ci": [lo, hi]}


def simulate_pair(rng: np.random.Generator, true_ratio: float = 1.0, *, rounds: int = 8,
                  iters: int = 20, base_s: float = 0.01, round_drift: float = 0.05,
                  block_drift: float = 0.06, noise: float = 0.03,
                  outliers: float = 0.03) -> tuple[dict, dict]:
    """Two records measured in ``rounds`` alternating blocks on a drifting machine, after
    ``true_ratio`` times faster than before. Log time of a sample = log base + round drift
    (shared by the round, sd ``round_drift``) + block drift (per block, sd
    ``block_drift``: the load moves between the two blocks of a round) + noise, and a
    fraction ``outliers`` of samples slowed by a preemption."""
    drift = rng.normal(0.0, round_drift, rounds)
    made = {}
    for name, scale in (("before", 1.0), ("after", 1.0 / true_ratio)):
        logs = (math.log(base_s * scale) + np.repeat(drift, iters)
                + np.repeat(rng.normal(0.0, block_drift, rounds), iters)
                + rng.normal(0.0, noise, rounds * iters))
        hit = rng.random(rounds * iters) < outliers
        logs[hit] += np.abs(rng.normal(0.0, 0.5, int(hit.sum())))
        made[name] = {"samples_s": [float(v) for v in np.exp(logs)],
                      "round_ids": [int(r) for r in np.repeat(np.arange(rounds), iters)]}
    return made["before"], made["after"]

"""optimisation stage 3: where it stops helping. ``crossover`` against the checker's own
interpolation (linear in log(batch) against log(gain)) on drawn gain curves, edge cases
included. ``gain_sweep``'s answer checked for form and arithmetic, on a tiny problem with a
drawn number of rounds watched in the learner process (one sample per round, a learning
rate of its own for every call: the inspector ``optimisation/gain_sweep_watched``,
self-reported, checked against the rounds and rates the checker asked for), and its
medians and gains at the sweep's sizes against the checker's own sweep of both versions
interleaved in a fresh process (``speed_driver.py``). ``predict_crossover``'s four calls
(the README's threshold, a higher one from the checker's own cost model, one no fix
reaches, one the modelled gain never falls to): each crossover replayed exactly from the
medians the call reports, each median against the checker's own measurements of that
version and size taken right before and after the call."""

from __future__ import annotations

import math

import numpy as np
from optim_harness import checker, close, odd, run_driver, tiny_config

from coursekit.checking import bridge
from coursekit.checking.bridge import LearnerFunction
from coursekit.checking.probes import within_ratio
from coursekit.checking.values import as_float, fail_unless, require_keys

# Gain below which the rewrite is not worth it here, the sweep, and margins.
GAIN_THRESHOLD = 4.0
SWEEP_STEPS = 4
SWEEP_SIZES = (24, 192, 1536)
SWEEP_ROUNDS = 3
# The learner's medians and gain vs the checker's, per size: fast calls of a few ms at the
# small sizes are where a loaded scheduler's delays show (at load 17-26, medians of 3 moved
# 3.7x between processes at batch ~160); an unsynced timer is 20x+ off, and fails
# FAST_GROWTH first.
GAIN_WINDOW = 5.0
# The sweep's largest batch does about 64x the arithmetic of its smallest; train_fast's
# median call grew 17x-130x across it here at load 17 (fixed costs and load spikes weigh
# most at the small end). A timer that does not wait for the result, or a size that never
# reaches the problem, grows by about 1x.
FAST_GROWTH = 4.0


def sweep_config(ctx) -> dict:
    rng = ctx.rng("sweep-config")
    return {"vocab": odd(rng, 480, 544), "embed": odd(rng, 56, 72),
            "hidden": odd(rng, 240, 272), "steps": SWEEP_STEPS}


def sweep_sizes(ctx) -> list[int]:
    factor = float(ctx.rng("sweep-sizes").uniform(0.8, 1.25))
    return [max(3, int(round(b * factor)) | 1) for b in SWEEP_SIZES]


def reference_crossover(sizes, gains, threshold):
    if gains[0] < threshold:
        return float(sizes[0])
    for i in range(len(sizes) - 1):
        g0, g1 = gains[i], gains[i + 1]
        if g0 >= threshold > g1:
            f = (math.log(g0) - math.log(threshold)) / (math.log(g0) - math.log(g1))
            return math.exp(math.log(sizes[i]) + f * (math.log(sizes[i + 1])
                                                     - math.log(sizes[i])))
    return None


@checker.check(3, "crossover_interpolation")
def _(impl, ctx):
    rng = ctx.rng("crossover")
    for case in range(9):
        sizes = sorted(int(v) for v in rng.choice(np.arange(2, 9000), 5, replace=False))
        gains = sorted((float(v) for v in rng.uniform(0.8, 60, 5)), reverse=True)
        threshold = float(rng.uniform(1.5, 10))
        if case == 4:
            threshold = gains[-1] * 0.5      # never falls below
        if case == 5:
            threshold = gains[0] * 1.5       # already below at the first size
        if case == 6:                        # crossed between neighbours far apart in log
            sizes = [int(rng.integers(2, 5)), int(rng.integers(30, 90))] + sorted(
                int(v) for v in rng.choice(np.arange(100, 9000), 3, replace=False))
            threshold = math.sqrt(gains[0] * gains[1])
        if case == 7:                        # gains far above and below it: log ratios
            threshold = float(rng.uniform(1.5, 3))          # matter, not log differences
            gains = [threshold ** 2.5, threshold ** 0.5] + sorted(
                (float(v) for v in rng.uniform(0.5, 0.9, 3)), reverse=True)
        if case == 8:                        # a gain exactly at the threshold: from it on
            threshold = gains[2]             # the curve is below (f = 0 at that size)
        want = reference_crossover(sizes, gains, threshold)
        got = impl.crossover(sizes, gains, threshold)
        fail_unless((got is None and want is None) or (
            got is not None and want is not None
            and math.isclose(as_float(got, "crossover"), want, rel_tol=1e-9)),
            f"crossover for gains {[round(g, 2) for g in gains]} at sizes {sizes}, "
            f"threshold {threshold:.3g}", yours=got, expected=want,
            hint="first pair with g0 >= threshold > g1, linear in log(batch) vs "
            "log(gain); the first size if already below; None if never")


def checker_sweep(ctx) -> dict:
    """The checker's own interleaved sweep (slow vs the learner's fast) in one fresh
    process, its block stamps bounded by this process's clock."""
    def make():
        config, sizes = sweep_config(ctx), sweep_sizes(ctx)
        gains, slow_med, fast_med = [], [], []
        reports = run_driver(ctx, [dict(config, batch=b) for b in sizes], ctx.seed + 3,
                             rounds=SWEEP_ROUNDS, slow_iters=1, fast_iters=2, name="sweep")
        for report in reports:
            slow = [report["blocks"][(r, "slow")] for r in range(SWEEP_ROUNDS)]
            fast = [report["blocks"][(r, "fast")] / 2 for r in range(SWEEP_ROUNDS)]
            slow_med.append(float(np.median(slow)))
            fast_med.append(float(np.median(fast)))
            gains.append(slow_med[-1] / fast_med[-1])
        return {"config": config, "sizes": sizes, "gains": gains, "slow_s": slow_med,
                "fast_s": fast_med,
                "crossover": reference_crossover(sizes, gains, GAIN_THRESHOLD)}
    return ctx.once("sweep", make)


def end_size_medians(ctx, name: str) -> list[tuple[float, float]]:
    """The checker's own (slow, fast) median call times at the sweep's two end sizes,
    measured now in a fresh process (as predict_crossover measures them)."""
    config, sizes = sweep_config(ctx), sweep_sizes(ctx)
    reports = run_driver(ctx, [dict(config, batch=b) for b in (sizes[0], sizes[-1])],
                         ctx.seed + 3, rounds=SWEEP_ROUNDS, slow_iters=1, fast_iters=2,
                         name=name)
    return [(float(np.median([r["blocks"][(k, "slow")] for k in range(SWEEP_ROUNDS)])),
             float(np.median([r["blocks"][(k, "fast")] / 2 for k in range(SWEEP_ROUNDS)])))
            for r in reports]


def modelled_crossover(ends: list[tuple[float, float]], small: int, large: int,
                       threshold: float) -> float | None:
    """The checker's own prediction: per version, call time = fixed + per_example * batch
    through the two end medians; the batch where slow / fast falls to ``threshold``."""
    (s0, f0), (s1, f1) = ends
    slope_s, slope_f = (s1 - s0) / (large - small), (f1 - f0) / (large - small)
    base_s, base_f = s0 - slope_s * small, f0 - slope_f * small
    denominator = threshold * slope_f - slope_s
    if denominator <= 0:
        return None
    return max((base_s - threshold * base_f) / denominator, 1.0)


def samples_of(value, what: str, rounds: int) -> list[float]:
    fail_unless(isinstance(value, list) and len(value) == rounds,
                f"{what}: one raw sample per round", yours=value,
                expected=f"a list of {rounds} durations in seconds")
    out = [as_float(v, what) for v in value]
    fail_unless(all(v > 0 and math.isfinite(v) for v in out), f"{what}: every sample is "
                "a positive duration in seconds", yours=value)
    return out



def sweep_samples(got, sizes: list[int], rounds: int, what: str = "") -> list[tuple]:
    """gain_sweep's answer checked for form and arithmetic: every size given, in order,
    one positive sample in seconds per round per version, and each gain the median slow
    time over the median fast time of its own samples. Returns (slow_s, fast_s) per
    size."""
    got = require_keys(got, ("batch_sizes", "slow_s", "fast_s", "gains"), "gain_sweep")
    fail_unless(isinstance(got["batch_sizes"], list) and list(got["batch_sizes"]) == sizes
                and all(isinstance(got[k], list) and len(got[k]) == len(sizes)
                        for k in ("slow_s", "fast_s", "gains")),
                f"{what}gain_sweep must report every size it was given, in order, with "
                "samples and a gain for each",
                yours={k: got[k] for k in ("batch_sizes", "gains")}, expected=sizes)
    out = []
    for b, g, slow_s, fast_s in zip(sizes, got["gains"], got["slow_s"], got["fast_s"]):
        slow_s = samples_of(slow_s, f"{what}batch {b}: slow_s", rounds)
        fast_s = samples_of(fast_s, f"{what}batch {b}: fast_s", rounds)
        implied = float(np.median(slow_s) / np.median(fast_s))
        fail_unless(close(as_float(g, f"gain at batch {b}"), implied),
                    f"{what}batch {b}: your gain is not the median slow time over the "
                    "median fast time of your own samples", yours=g, expected=implied)
        out.append((slow_s, fast_s))
    return out


def rounds_honoured(impl, ctx) -> None:
    """gain_sweep on a tiny problem (calls of a millisecond) with a drawn number of
    rounds, more than the sweep's, both versions watched in the learner process: one
    sample per round, the gain of the samples, and a learning rate of its own for every
    call (a repeated rate skips the slow version's recompile). Its times are noise at
    this size, so only the counts, the rates and the arithmetic are checked."""
    rng = ctx.rng("rounds")
    sizes, rounds = [3, 5], int(rng.integers(30, 41))
    watched = bridge.inspect(impl, "optimisation/gain_sweep_watched",
                             LearnerFunction("gain_sweep"), tiny_config(rng), sizes, rounds,
                             ctx.seed + 5)
    sweep_samples(watched["result"], sizes, rounds, f"rounds={rounds}: ")
    for b in sizes:
        calls = [c for c in watched["calls"] if c[1] == b]
        for version in ("slow", "fast"):
            made = sum(c[0] == version for c in calls)
            fail_unless(made >= rounds + 1, f"rounds={rounds}, batch {b}: too few "
                        f"{version} calls for a first call and one per round",
                        yours=made, expected=f"at least {rounds + 1}")
        rates = [c[2] for c in calls]
        repeated = sorted({r for r in rates if rates.count(r) > 1})
        fail_unless(not repeated, f"rounds={rounds}, batch {b}: calls shared a learning "
                    "rate (in use every call has its own; a repeated one skips the slow "
                    "version's recompile)", yours=f"{len(repeated)} rate(s) used more than "
                    f"once in {len(rates)} calls", expected="every rate once",
                    hint="draw a new rate for every call of either version")


@checker.check(3, "sweep_matches_checker")
def _(impl, ctx):
    rounds_honoured(impl, ctx)
    config, sizes = sweep_config(ctx), sweep_sizes(ctx)
    got = impl.gain_sweep(config, sizes, SWEEP_ROUNDS, ctx.seed + 3)
    raw = [(float(np.median(slow_s)), float(np.median(fast_s)))
           for slow_s, fast_s in sweep_samples(got, sizes, SWEEP_ROUNDS)]
    growth = raw[-1][1] / raw[0][1]
    fail_unless(growth >= FAST_GROWTH,
                f"your train_fast times barely grow from batch {sizes[0]} to {sizes[-1]} "
                f"(about {sizes[-1] / sizes[0]:.0f}x the arithmetic)",
                yours=f"{growth:.3g}x ({raw[0][1] * 1e3:.4g} ms -> {raw[-1][1] * 1e3:.4g} ms)",
                expected=f"at least {FAST_GROWTH:g}x",
                hint="wait for each result inside its timed boundary "
                "(jax.block_until_ready), and build each size's own problem")
    mine = checker_sweep(ctx)
    fail_unless(mine["gains"][0] > mine["gains"][-1],
                "your fix's gain does not shrink with the batch size in the checker's sweep",
                yours=[round(g, 2) for g in mine["gains"]], expected="falling gains",
                hint="stage 2 must pass first")
    for b, g, want, (slow, _), my_slow in zip(sizes, got["gains"], mine["gains"], raw,
                                              mine["slow_s"]):
        # train_slow's calls (tens of ms and up) are the steady figure; train_fast's enter
        # through the gain (its few-ms calls are what the load moves most).
        within_ratio(slow, my_slow, GAIN_WINDOW, f"batch {b}: your median train_slow call",
                     "time each call at this batch size in seconds, synchronised inside "
                     "its timed boundary, compile apart, new lr per call",
                     against="the checker's own measurement of it")
        ratio = float(g) / want
        fail_unless(1 / GAIN_WINDOW <= ratio <= GAIN_WINDOW,
                    f"batch {b}: your gain is {ratio:.3g}x the checker's measurement",
                    yours=f"{g:.3g}x", expected=f"about {want:.3g}x (within {GAIN_WINDOW:g}x)",
                    hint="synchronise every call inside its timed boundary "
                    "(jax.block_until_ready on the result), compile apart, new lr per call")


def model_point(mine: dict, sizes: list[int]) -> tuple[float, float] | None:
    """The checker's own cost model from its sweep's end sizes (per version, call time =
    fixed + per_example * batch through the two medians): a batch a quarter of the way
    from the smallest to the largest size in log, and the model's gain there. None when
    the model has no positive fast time there or its gain there is outside the measured
    gains."""
    small, large = sizes[0], sizes[-1]
    fit = []
    for key in ("slow_s", "fast_s"):
        t0, t1 = mine[key][0], mine[key][-1]
        slope = (t1 - t0) / (large - small)
        fit.append((t0 - slope * small, slope))
    batch = float(small ** 0.75 * large ** 0.25)
    (base_s, slope_s), (base_f, slope_f) = fit
    fast = base_f + slope_f * batch
    if fast <= 0:
        return None
    gain = (base_s + slope_s * batch) / fast
    return (batch, gain) if mine["gains"][-1] < gain < mine["gains"][0] else None


def second_threshold(point: tuple[float, float] | None) -> float:
    """The threshold of the learner's second call: the gain of the checker's model a
    quarter of the way along its sweep, and at least twice the README's. Always a call,
    and never at the README's threshold, so a threshold ignored or hard-coded replays
    wrong. Near 4x the lines may never meet (the reference
    measured 4.0-4.5x at the sweep's largest size on a 2-core machine), and a check that
    skipped when either prediction was None passed a threshold hard-coded to 4x in CI."""
    return max(point[1] if point is not None else 0.0, 2 * GAIN_THRESHOLD)


# A gain no fix has at any batch of at least 1 (the model's crossover then lies below 1):
# the answer is the floor, 1.0, whenever train_fast has a fixed cost per call.
UNREACHED = 1000 * GAIN_THRESHOLD
# A gain the modelled one never falls to: the fix would have to cost twice the slow
# version per example. The lines never meet there (None), a branch no other call reaches.
NEVER_FALLS_TO = 0.5


def prediction_runs(impl, ctx) -> dict:
    """The learner's four predict_crossover calls and the checker's measurements that
    bracket each in time (the first at the README's threshold, the second at
    second_threshold, the third at UNREACHED, the fourth at NEVER_FALLS_TO), made once
    per run. The learner's call comes
    first: an unwritten stage 3 says so before the checker's measurements (which time
    the learner's stage-2 train_fast) can answer for stage 2. The sweep (made earlier by
    sweep_matches_checker, or now) and a fresh measurement after it bracket the first
    call; that one and another after the second call bracket the second; that one and
    another after the third bracket the third, and so on."""
    def make():
        sizes = sweep_sizes(ctx)
        small, large = sizes[0], sizes[-1]
        first = impl.predict_crossover(sweep_config(ctx), small, large, GAIN_THRESHOLD,
                                       ctx.seed + 4)
        mine = checker_sweep(ctx)
        between = end_size_medians(ctx, "ends-between")
        higher = second_threshold(model_point(mine, sizes))
        second = impl.predict_crossover(sweep_config(ctx), small, large, higher,
                                        ctx.seed + 6)
        after = end_size_medians(ctx, "ends-after")
        third = impl.predict_crossover(sweep_config(ctx), small, large, UNREACHED,
                                       ctx.seed + 8)
        later = end_size_medians(ctx, "ends-later")
        fourth = impl.predict_crossover(sweep_config(ctx), small, large, NEVER_FALLS_TO,
                                        ctx.seed + 10)
        last = end_size_medians(ctx, "ends-last")
        return {"sizes": sizes, "calls": [(GAIN_THRESHOLD, first, [mine_ends(mine), between]),
                                          (higher, second, [between, after]),
                                          (UNREACHED, third, [after, later]),
                                          (NEVER_FALLS_TO, fourth, [later, last])]}
    return ctx.once("predictions", make)


def prediction_of(got, threshold: float) -> dict:
    """The learner's answer, its fields checked for type: crossover and four medians."""
    what = f"predict_crossover(..., threshold={threshold:.3g})"
    got = require_keys(got, ("crossover", "median_slow_s", "median_fast_s"), what)
    out = {"crossover": None if got["crossover"] is None
           else as_float(got["crossover"], f"{what}['crossover']")}
    for key in ("median_slow_s", "median_fast_s"):
        value = got[key]
        fail_unless(isinstance(value, list) and len(value) == 2,
                    f"{what}['{key}'] is [median at small, median at large]", yours=value,
                    expected="a list of 2 durations in seconds")
        out[key] = [as_float(v, f"{what}['{key}']") for v in value]
        fail_unless(all(v > 0 and math.isfinite(v) for v in out[key]),
                    f"{what}['{key}']: medians are positive durations in seconds",
                    yours=value)
    return out


@checker.check(3, "prediction_is_the_model_of_your_medians")
def _(impl, ctx):
    """Each call's crossover replayed exactly from the medians it reports (the model's
    arithmetic is exact: a wrong slope, intercept or threshold is wrong at any load), and
    each median measured against the checker's own of that version and size, taken right
    before and right after the call."""
    runs = prediction_runs(impl, ctx)
    small, large = runs["sizes"][0], runs["sizes"][-1]
    for threshold, got, brackets in runs["calls"]:
        got = prediction_of(got, threshold)
        for key, column in (("median_slow_s", 0), ("median_fast_s", 1)):
            for end, (size, value) in enumerate(zip((small, large), got[key])):
                refs = [ends[end][column] for ends in brackets]
                fail_unless(min(refs) / GAIN_WINDOW <= value <= max(refs) * GAIN_WINDOW,
                            f"threshold {threshold:.3g}: your {key} at batch {size} is not "
                            "what the checker measures for that version at that size "
                            "right before and after your call",
                            yours=f"{value * 1e3:.4g} ms",
                            expected=f"{min(refs) * 1e3:.4g}-{max(refs) * 1e3:.4g} ms "
                            f"(within {GAIN_WINDOW:g}x)",
                            hint="median of synchronised calls at each size, compile "
                            "apart, new lr per call (a one-size gain_sweep each)")
        ends = list(zip(got["median_slow_s"], got["median_fast_s"]))
        want = modelled_crossover(ends, small, large, threshold)
        yours = got["crossover"]
        fail_unless((yours is None) == (want is None) and (
            want is None or math.isclose(yours, want, rel_tol=1e-9)),
            f"threshold {threshold:.3g}: your crossover is not what a fixed cost plus a "
            "cost per example, through your own two medians per version, gives",
            yours=yours, expected=want,
            hint="per version a straight line through (small, median) and (large, "
            "median); the batch where slow / fast equals the threshold; None when the "
            "lines never meet there; at least 1")


def mine_ends(mine: dict) -> list[tuple[float, float]]:
    """The end sizes of the checker's sweep, as end_size_medians gives them."""
    return [(mine["slow_s"][0], mine["fast_s"][0]), (mine["slow_s"][-1], mine["fast_s"][-1])]

"""performance-audit stage 4: decide what is ready. The learner's ``load_run`` and
``decide`` on before/after run records the checker writes: each case is drawn until the
checker's own statistics (the course's decision statistic, instructor-only:
``coursekit.instructor.decision``; and the pooled-sample one) say what the answer must
be, so that a tempting wrong rule (trusting the raw ratio, pooling samples of drifting
rounds, means thrown off by a few stalls) fails; comparability and a correct output come
before speed; and ``predict_step_speedup`` against Amdahl's law."""

from __future__ import annotations

import json
import math

import numpy as np
from audit_harness import checker

from coursekit.checking.errors import LearnerCodeError, TamperEvidence
from coursekit.checking.graded import instructor_module
from coursekit.checking.learner import get_function
from coursekit.checking.values import as_float, fail_unless, require_keys
from coursekit.measure import decision
from coursekit.measure.verdict import interval_of

# the course's decide: a learner's copy does not hold it (its checks are graded there
# by the instructor)
answers = instructor_module("decision")


def run_record(rng, median_s, spread, n=30, **overrides):
    record = {"label": "", "boundary": "train_step", "sync": "block_until_ready",
              "warmup": 2, "iters": n, "first_call_s": median_s * 20,
              "samples_s": list(np.exp(rng.normal(np.log(median_s), spread, n))),
              "compiles_first_call": 1, "compiles_warmed": 0, "shapes": [[256, 512]],
              "dtypes": ["float32"], "output_ok": True, "backend": "cpu",
              "trace": "", "region": "train_step"}
    record.update(overrides)
    return record


def rounds_records(rng, true_ratio, rounds=8, iters=12, **drift):
    """A before/after pair measured in ``rounds`` interleaved rounds on a drifting machine
    (``decision.simulate_pair``), as run records with ``round_ids``."""
    base = float(rng.uniform(5e-3, 2e-2))
    pair = decision.simulate_pair(rng, true_ratio, rounds=rounds, iters=iters, base_s=base,
                                  **drift)
    return tuple(run_record(rng, base, 0.0, n=rounds * iters, **part) for part in pair)


def decision_of(impl, before, after, ctx, **options) -> str:
    return decide_result(impl, before, after, ctx, **options)["decision"]


def decide_result(impl, before, after, ctx, **options) -> dict:
    """The learner's ``decide`` on these records (``options``: its keyword arguments)."""
    path = ctx.subdir("records")
    (path / "before.json").write_text(json.dumps(before))
    (path / "after.json").write_text(json.dumps(after))
    load = get_function(impl, "load_run")
    result = get_function(impl, "decide")(load(str(path / "before.json")),
                                          load(str(path / "after.json")), **options)
    result = require_keys(result, ("decision", "reasons"), "decide")
    fail_unless(result["decision"] in decision.OUTCOMES and isinstance(result["reasons"],
                                                                       list)
                and result["reasons"], "decide must say accept, reject or slower, with reasons",
                yours=result,
                expected="{'decision': 'accept'|'reject'|'slower', 'reasons': [...]}")
    min_gain = options.get("min_gain", 0.05)
    try:
        own = answers.decide_rounds(before, after, min_gain=min_gain)["decision"]
    except ValueError:
        own = None
    if result["decision"] == own:  # a wrong decision is the check's own verdict to give
        decided_by_its_interval(result, min_gain)
    return result


def decided_by_its_interval(result: dict, min_gain: float) -> None:
    """The decision is the one the learner's own interval gives (the contract defines
    each outcome by where the whole interval lies), whatever method made the interval:
    "accept" needs it above 1 + min_gain, "slower" below 1 / (1 + min_gain), and a
    "reject" with an interval may have it on neither side. Asked when the decision is
    the one the checker's own statistics give, so the interval is what can be wrong."""
    got, ci = result["decision"], result.get("ci")
    if ci is None and got == "reject":
        return  # not comparable, or too few rounds for an interval
    bounds = None
    if isinstance(ci, (list, tuple)) and len(ci) == 2:
        try:  # a NumPy or JAX scalar is a number too
            bounds = [float(v) for v in ci]
        except (TypeError, ValueError):
            bounds = None
    fail_unless(bounds is not None and all(math.isfinite(v) for v in bounds)
                and 0 < bounds[0] <= bounds[1], f"decide said {got!r} without its interval",
                yours=ci, expected="ci: [lo, hi], 0 < lo <= hi, the speedup's interval")
    lo, hi = bounds
    up, down = 1 + min_gain, 1 / (1 + min_gain)
    above, below = lo > up * (1 + 1e-9), hi < down * (1 - 1e-9)
    want = "accept" if above else "slower" if below else "reject"
    if got == "accept":
        above = lo >= up * (1 - 1e-9)
    elif got == "slower":
        below = hi <= down * (1 + 1e-9)
    agrees = {"accept": above, "slower": below, "reject": not (above or below)}[got]
    fail_unless(agrees, f"decide said {got!r}, but its own interval [{lo:.3f}, {hi:.3f}] "
                f"says {want!r} (min_gain {min_gain:g}: accept above {up:.3f}, slower below "
                f"{down:.3f})", yours=got, expected=want,
                hint="decide by where the whole interval you report lies, and report the "
                "interval you decided by: the speedup before / after")


def draw_until(make, holds, tries: int = 200):
    """The first ``make()`` (a (before, after) pair) for which ``holds(before, after)``:
    a case the checker's own statistic picked, so that a tempting wrong rule fails on
    it. Never the last draw by default: a case not found in ``tries`` is the checker's
    bug, said as such, not a verdict on the learner's code."""
    for _ in range(tries):
        drawn = make()
        if holds(*drawn):
            return drawn
    raise RuntimeError(f"checker bug, not your code: no case drawn in {tries} tries")


@checker.check(4, "accepts_real_speedup")
def _(impl, ctx):
    rng = ctx.rng("real")
    base = float(rng.uniform(5e-3, 2e-2))
    before, after = run_record(rng, base, 0.08), run_record(rng, base / 2, 0.08)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "accept", "a clear 2x speedup with correct output was rejected",
                yours=got, expected="accept")
    # the fewest raw samples the contract takes (5 each) still decide a clear case
    before, after = run_record(rng, base, 0.05, n=5), run_record(rng, base / 2, 0.05, n=5)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "accept", "a clear 2x speedup with 5 raw samples each (the fewest "
                "the contract takes) was rejected", yours=got, expected="accept",
                hint="refuse fewer than 5 raw samples, not 5")


@checker.check(4, "rejects_noise")
def _(impl, ctx):
    rng = ctx.rng("noise")
    base = float(rng.uniform(5e-3, 2e-2))
    # Draw until "after" looks a little faster (a tempting claim) while the checker's own
    # intervals (over rounds, and over samples: without round_ids each sample is a round)
    # show it is noise: a decision that trusts the raw ratio must fail here.
    def tempting_noise(before, after):
        ratio = np.median(before["samples_s"]) / np.median(after["samples_s"])
        return (answers.decide_rounds(before, after)["ci"][0] < 1.0 and
                decision.pooled_bootstrap(before, after)["ci"][0] < 1.0 and ratio > 1.03)

    before, after = draw_until(lambda: (run_record(rng, base, 0.3), run_record(rng, base, 0.3)),
                               tempting_noise)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "reject", "a noise-only difference was accepted", yours=got,
                expected="reject", hint="accept only when the lower end of a bootstrap "
                "interval on the ratio of medians clears 1 + a minimum gain")
    # Most of the noise on the "before" side, "after" tight and a little faster: an
    # interval that lets only "after" vary clears 1 + min_gain, the one with both
    # records' spread holds 1 (the checker's own, over rounds and over pooled samples).
    def noisy_before(before, after):
        return (answers.decide_rounds(before, after)["ci"][0] < 0.99
                and decision.pooled_bootstrap(before, after)["ci"][0] < 0.99
                and after_only_interval(before, after)[0] > 1.1)

    before, after = draw_until(lambda: (run_record(rng, base, 0.45),
                                        run_record(rng, base / 1.2, 0.02)), noisy_before,
                               tries=400)
    got = decision_of(impl, before, after, ctx)
    both, alone = answers.decide_rounds(before, after)["ci"], after_only_interval(before,
                                                                                   after)
    fail_unless(got == "reject", "a speedup that the noise of the 'before' samples hides "
                "was accepted", yours=f"{got} (as an interval letting only 'after' vary "
                f"would: [{alone[0]:.3f}, {alone[1]:.3f}], clear of 1.05)",
                expected=f"reject: with both records' spread (before's samples spread "
                f"{np.std(np.log(before['samples_s']), ddof=1):.2f} in log, after's "
                f"{np.std(np.log(after['samples_s']), ddof=1):.2f}) the 95% interval is "
                f"[{both[0]:.3f}, {both[1]:.3f}], which holds 1",
                hint="the interval's width must carry the spread of both records, not only "
                "the 'after' samples'")
    # Noise whose point estimate reads more than the minimum slower while the interval
    # (the checker's own, over rounds and over pooled samples) still holds 1: "slower"
    # asks the whole interval to lie below 1 / (1 + min_gain), as "accept" asks it above.
    def tempting_slowdown(before, after):
        own = answers.decide_rounds(before, after)
        return (own["ratio"] < 0.93 and own["ci"][1] > 1.02
                and decision.pooled_bootstrap(before, after)["ci"][1] > 1.02)

    before, after = draw_until(lambda: (run_record(rng, base, 0.3), run_record(rng, base, 0.3)),
                               tempting_slowdown, tries=400)
    got = decision_of(impl, before, after, ctx)
    own = answers.decide_rounds(before, after)
    fail_unless(got == "reject", "noise that looks slower was called 'slower'",
                yours=f"{got} (the estimate {own['ratio']:.3f} lies below 1/1.05 = 0.952)",
                expected=f"reject: the 95% interval [{own['ci'][0]:.3f}, {own['ci'][1]:.3f}]"
                " holds 1", hint="decide 'slower' by the whole interval, as 'accept': its "
                "upper end must lie below 1 / (1 + min_gain), not just the point estimate")


def after_only_interval(before: dict, after: dict, confidence: float = 0.95):
    """The 95% interval of the speedup (mean log before - mean log after, each sample its
    own round) with only the "after" samples' spread in its width: the mistake. Each
    "after" sample against the mean of "before": before's spread never enters."""
    lb, la = np.log(before["samples_s"]), np.log(after["samples_s"])
    return interval_of(lb.mean() - la, confidence)


@checker.check(4, "rejects_drifting_null")
def _(impl, ctx):
    rng = ctx.rng("drifting-null")
    # Identical programs measured in 8 interleaved rounds while the load drifts. Draw
    # until the pooled samples look clearly faster (a bootstrap that treats them as
    # independent accepts) while the rounds, the real evidence, hold 1 with a margin.
    before, after = draw_until(
        lambda: rounds_records(rng, 1.0, block_drift=0.1),
        lambda b, a: decision.pooled_bootstrap(b, a, n_boot=1000)["decision"] == "accept"
        and answers.decide_rounds(b, a)["ci"][0] < 0.99, tries=400)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "reject", "identical programs measured in drifting rounds were judged "
                "different", yours=got, expected="reject",
                hint="samples of one round share its load: they are not independent. Compare "
                "rounds (per-round ratios, or resample whole rounds), not pooled samples")
    # Two records without round_ids, measured one after the other, each slowing down
    # over its run in the same way (caches, clocks): sample i of one was not measured
    # beside sample i of the other. Each sample is its own round, unpaired: the interval
    # holds 1; pairing by position cancels the shared trend and "finds" a gain.
    def shared_trend():
        base, n = float(rng.uniform(5e-3, 2e-2)), int(rng.integers(20, 31))
        trend = np.linspace(0.0, float(rng.uniform(0.5, 0.8)), n)
        ratio = float(rng.uniform(1.06, 1.1))
        def record(median_s):
            samples = median_s * np.exp(trend + rng.normal(0.0, 0.01, n))
            return run_record(rng, median_s, 0.0, n=n, samples_s=[float(v) for v in samples])
        return record(base), record(base / ratio)

    before, after = draw_until(
        shared_trend, lambda b, a: answers.decide_rounds(b, a)["ci"][0] < 0.99
        and paired_by_position(b, a)[0] > 1.06)
    got = decision_of(impl, before, after, ctx)
    both, paired = answers.decide_rounds(before, after)["ci"], paired_by_position(before,
                                                                                  after)
    fail_unless(got == "reject", "two runs without round_ids were compared sample by "
                "sample, as if measured side by side", yours=f"{got} (as pairing sample i "
                f"with sample i would: [{paired[0]:.3f}, {paired[1]:.3f}])",
                expected=f"reject: each sample its own round, the 95% interval is "
                f"[{both[0]:.3f}, {both[1]:.3f}], which holds 1",
                hint="without round_ids nothing says two samples shared their load: pair "
                "only samples whose round_ids say so; otherwise compare the two sets "
                "unpaired")


def paired_by_position(before: dict, after: dict, confidence: float = 0.95):
    """The 95% interval of the speedup with sample i of each record paired (the mistake
    for records without round_ids)."""
    n = min(len(before["samples_s"]), len(after["samples_s"]))
    return interval_of(np.log(before["samples_s"][:n]) - np.log(after["samples_s"][:n]),
                       confidence)


@checker.check(4, "accepts_speedup_in_drifting_rounds")
def _(impl, ctx):
    rng = ctx.rng("drifting-fast")
    # a true 1.25x whose rounds clear the minimum gain with a margin
    before, after = draw_until(lambda: rounds_records(rng, 1.25),
                               lambda b, a: answers.decide_rounds(b, a)["ci"][0] > 1.12)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "accept", "a true 1.25x speedup measured in 8 drifting rounds was "
                "not accepted", yours=got, expected="accept",
                hint="pair the rounds: the drift a round shares cancels in its before/after "
                "ratio")


@checker.check(4, "says_slower_when_slower")
def _(impl, ctx):
    rng = ctx.rng("drifting-slow")
    # a true 1.4x slowdown, clear in the rounds
    before, after = draw_until(lambda: rounds_records(rng, 1 / 1.4),
                               lambda b, a: answers.decide_rounds(b, a)["ci"][1] < 0.85)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "slower", "a clear 1.4x slowdown was not reported as slower",
                yours=got, expected="slower",
                hint="three outcomes: 'slower' when the whole interval lies below "
                "1 / (1 + min_gain)")
    plain_before, plain_after = run_record(rng, 0.01, 0.05), run_record(rng, 0.015, 0.05)
    got = decision_of(impl, plain_before, plain_after, ctx)
    fail_unless(got == "slower", "a 1.5x slowdown in records without round_ids was not "
                "reported as slower", yours=got, expected="slower",
                hint="without round_ids each sample is its own round")
    # A real slowdown smaller than the minimum: the checker's own interval lies wholly
    # below 1 and wholly above 1 / (1 + min_gain): not "slower", as a gain that small is
    # not "accept".
    down = 1 / 1.05
    base = float(rng.uniform(5e-3, 2e-2))
    small_before, small_after = draw_until(
        lambda: (run_record(rng, base, 0.01), run_record(rng, base * 1.025, 0.01)),
        lambda b, a: down < answers.decide_rounds(b, a)["ci"][0]
        and answers.decide_rounds(b, a)["ci"][1] < 0.995)
    own = answers.decide_rounds(small_before, small_after)["ci"]
    got = decision_of(impl, small_before, small_after, ctx)
    fail_unless(got == "reject", "a real slowdown smaller than the minimum was reported "
                "as slower", yours=got, expected=f"reject: the 95% interval [{own[0]:.3f}, "
                f"{own[1]:.3f}] lies below 1 but above 1 / (1 + min_gain) = {down:.3f}",
                hint="'slower' means slower by more than the minimum, as 'accept' means "
                "faster by more than it")


def with_stalls(rng, record: dict, rounds_hit: int = 3, per_round: int = 2) -> dict:
    """``record`` (8 rounds of 12) with long-tail samples: in ``rounds_hit`` of its
    rounds, ``per_round`` samples stalled 20-60x (a preemption, a page-in, a GC pause).
    A round's median does not move; its mean grows several times."""
    samples, ids = list(record["samples_s"]), record["round_ids"]
    rounds = sorted(set(ids))
    for r in rng.choice(rounds, rounds_hit, replace=False):
        where = [i for i, v in enumerate(ids) if v == r]
        for i in rng.choice(where, per_round, replace=False):
            samples[i] *= float(rng.uniform(20, 60))
    return dict(record, samples_s=samples)


def round_means(record: dict) -> dict:
    """Each sample replaced by its round's mean: what a decision built on means sees."""
    ids = np.asarray(record["round_ids"])
    samples = np.asarray(record["samples_s"])
    return dict(record, samples_s=[float(samples[ids == r].mean()) for r in ids])


def stall_hint(impl, ctx, before, after, hint: str) -> str:
    """``hint`` (a round's median), unless the learner's decide answers otherwise when the
    same samples come in another order, each keeping its round id (one more call,
    measured here): then it reads the samples' order, not their round_ids, and that is the
    hint."""
    rng = ctx.rng("stall-hint")

    def shuffled(record):
        order = rng.permutation(len(record["samples_s"]))
        return dict(record, samples_s=[record["samples_s"][i] for i in order],
                    round_ids=[record["round_ids"][i] for i in order])

    def same(a, b):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return math.isclose(a, b, rel_tol=1e-9)
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            return all(same(x, y) for x, y in zip(a, b))
        return a == b
    first = decide_result(impl, before, after, ctx)
    again = decide_result(impl, shuffled(before), shuffled(after), ctx)
    if not all(same(first.get(k), again.get(k)) for k in ("decision", "ratio", "ci")):
        return (f"your decide answers otherwise when the same samples come in another order, "
                f"each keeping its round id (decision {first['decision']!r}, ratio "
                f"{first.get('ratio')!r} -> {again['decision']!r}, {again.get('ratio')!r}): "
                "it groups or pairs samples by position, not by round_ids. Group the "
                "samples by round_ids, summarise each round, then compare rounds")
    return hint


@checker.check(4, "stalls_do_not_decide")
def _(impl, ctx):
    rng = ctx.rng("stalls")
    # identical programs, "before" stalled in every round (it is the one that triggers the
    # pauses): means say "after" is faster
    def stalled_before():
        before, after = rounds_records(rng, 1.0, block_drift=0.03)
        return with_stalls(rng, before, rounds_hit=8), after

    before, after = draw_until(
        stalled_before, lambda b, a: answers.decide_rounds(b, a)["ci"][0] < 0.99
        and answers.decide_rounds(round_means(b), a)["decision"] == "accept")
    got = decision_of(impl, before, after, ctx)
    if got != "reject":
        fail_unless(False, "identical programs were judged different because a few "
                    "samples of one stalled", yours=got, expected="reject",
                    hint=stall_hint(impl, ctx, before, after, "a few stalled samples "
                                    "(20-60x slower) throw a mean far off; a round's median "
                                    "does not move"))
    # a true 1.3x speedup, "after" stalled in a few rounds: means say it is not faster
    def stalled_after():
        before, after = rounds_records(rng, 1.3, block_drift=0.03)
        return before, with_stalls(rng, after)

    before, after = draw_until(
        stalled_after, lambda b, a: answers.decide_rounds(b, a)["ci"][0] > 1.12
        and answers.decide_rounds(b, round_means(a))["decision"] != "accept")
    got = decision_of(impl, before, after, ctx)
    if got != "accept":
        fail_unless(False, "a true 1.3x speedup was not accepted because a few of its "
                    "samples stalled", yours=got, expected="accept",
                    hint=stall_hint(impl, ctx, before, after, "summarise each round by a "
                                    "statistic a stall does not move (the median), then "
                                    "compare rounds"))


@checker.check(4, "rejects_faster_but_wrong")
def _(impl, ctx):
    rng = ctx.rng("wrong")
    base = float(rng.uniform(5e-3, 2e-2))
    before = run_record(rng, base, 0.05)
    after = run_record(rng, base / 3, 0.05, output_ok=False)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "reject", "a 3x faster run with a wrong output was accepted",
                yours=got, expected="reject", hint="correctness comes before speed")


@checker.check(4, "rejects_not_comparable")
def _(impl, ctx):
    rng = ctx.rng("comparable")
    base = float(rng.uniform(5e-3, 2e-2))
    before = run_record(rng, base, 0.05)
    cases = {
        "after timed without sync": run_record(rng, base / 1000, 0.05, sync="none"),
        "after without its first call reported apart":
            run_record(rng, base / 2, 0.05, first_call_s=None),
        "after on another shape": run_record(rng, base / 2, 0.05, shapes=[[128, 512]]),
        "after with only 4 raw samples": run_record(rng, base / 2, 0.05, n=4),
        "after without an output check": run_record(rng, base / 2, 0.05, output_ok=None),
    }
    for name, after in cases.items():
        got = decision_of(impl, before, after, ctx)
        fail_unless(got == "reject", f"not comparable ({name}) but accepted", yours=got,
                    expected="reject", hint="check comparability before comparing times")


@checker.check(4, "amdahl_small_share")
def _(impl, ctx):
    predict = get_function(impl, "predict_step_speedup")
    rng = ctx.rng("amdahl")
    for _ in range(5):
        share, speedup = float(rng.uniform(0.01, 0.99)), float(rng.uniform(1.1, 10))
        expected = 1 / ((1 - share) + share / speedup)
        got = as_float(predict(share, speedup), "predicted speedup")
        fail_unless(math.isclose(got, expected, rel_tol=1e-9),
                    f"step speedup for share={share:.3f}, kernel {speedup:.2f}x",
                    yours=got, expected=expected,
                    hint="Amdahl's law: only the share's part gets faster; the rest of the "
                    "step keeps its time")
    # The kernel got 2x faster, but it is a 5% share: the step gains about 2.6%.
    base = float(rng.uniform(5e-3, 2e-2))
    before = run_record(rng, base, 0.01)
    after = run_record(rng, base / predict(0.05, 2.0), 0.01)
    got = decision_of(impl, before, after, ctx)
    fail_unless(got == "reject", "a 2.6% step gain (2x kernel, 5% share) was accepted as "
                "a real improvement", yours=got, expected="reject",
                hint="require a minimum gain (for example 5%) as well as a clear interval")
    # a negative minimum gain is bad input, refused by name (the contract: min_gain >= 0)
    try:
        got = decision_of(impl, before, after, ctx, min_gain=-0.05)
    except LearnerCodeError as err:
        if isinstance(err, TamperEvidence) or err.kind != "exception":
            raise
        fail_unless(err.exc_type == "ValueError", "decide with min_gain=-0.05 raised "
                    f"{err.exc_type or 'an exception'}, not ValueError", yours=str(err)[:200],
                    expected="ValueError naming min_gain")
    else:
        fail_unless(False, "decide took a negative min_gain", yours=got,
                    expected="ValueError: min_gain must be >= 0",
                    hint="bad input gets a clear error, not a decision")
    # min_gain=0 is in the contract (min_gain >= 0): then any real gain is accepted, this
    # one too when the checker's own interval (min_gain 0) says so
    if answers.decide_rounds(before, after, min_gain=0.0)["decision"] == "accept":
        got = decision_of(impl, before, after, ctx, min_gain=0.0)
        fail_unless(got == "accept", "with min_gain=0 a real 2.6% step gain was not "
                    "accepted", yours=got, expected="accept (its interval lies above 1)",
                    hint="min_gain=0 is allowed: any gain whose whole interval lies above 1")

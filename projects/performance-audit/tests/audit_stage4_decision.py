"""performance-audit stage 4: decide what is ready. The learner's ``load_run`` and
``decide`` on before/after run records the checker writes: each case is one the course's
decision statistic picked (``audit_decision_reference``: drawn live from the run's seed
where the course's code is, the stored public cases in a learner's copy), so that a
tempting wrong rule (trusting the raw ratio, pooling samples of drifting rounds, means
thrown off by a few stalls, a boundary off by a little) fails; every boundary is tried
from both sides; comparability and a correct output come before speed; and
``predict_step_speedup`` against Amdahl's law."""

from __future__ import annotations

import json
import math
import re

import numpy as np
from audit_decision_hints import boundary_hint, decision_hint, reported_interval, side
from audit_decision_reference import DecisionReference
from audit_harness import checker

from coursekit.checking.errors import CheckFailed, LearnerCodeError, TamperEvidence
from coursekit.checking.learner import get_function, on_input
from coursekit.checking.values import as_float, fail_unless, require_keys
from coursekit.measure import decision


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


def decision_of(impl, before, after, ctx, ref, **options) -> str:
    return decide_result(impl, before, after, ctx, ref, **options)["decision"]


def expect_decision(impl, ctx, ref, before, after, want: str, message: str, *, expected=None,
                    otherwise: str = "", cause: str = "", **options) -> dict:
    """The learner's ``decide`` on these records must say ``want``: otherwise a FAIL whose
    hint is ``cause`` (a mistake the check recognised in the learner's result) or else
    chosen by the learner's own result (``decision_hint``), ``otherwise`` where its
    interval is where its decision says and neither narrower nor wider than the rounds'."""
    result = decide_result(impl, before, after, ctx, ref, **options)
    min_gain = options.get("min_gain", 0.05)
    if result["decision"] == want:
        evidence_behind(result, ref.decide(before, after, **options), min_gain)
        return result
    own = ref.decide(before, after, **options)
    ci = reported_interval(result)
    raise CheckFailed(message, yours=f"{result['decision']} (your interval: "
                      f"{'none' if ci is None else f'[{ci[0]:.4f}, {ci[1]:.4f}]'})",
                      expected=expected or want,
                      hint=cause or boundary_hint(result, want, min_gain)
                      or means_cause(result, own, ref, before, after, **options)
                      or decision_hint(result, own, before, after, min_gain,
                                       otherwise or f"the answer here is {want!r}"))


def evidence_behind(result: dict, own: dict | None, min_gain: float) -> None:
    """A decision on records the checker could compare (its own decision has an interval)
    carries the evidence it was made on: a ratio, and an interval holding it whose side is
    the decision (the contract's None is for a pair that may not be compared). A "reject"
    with neither passed every reject check (a learner copy's reader, 2026-12-06)."""
    if not own or own.get("ci") is None:
        return
    ci = reported_interval(result)
    try:
        ratio = float(result.get("ratio"))
    except (TypeError, ValueError):
        ratio = math.nan
    if ci is None or not math.isfinite(ratio):
        raise CheckFailed(
            f"your {result['decision']!r} on two comparable records carries no "
            f"{'interval' if ci is None else 'ratio'}",
            yours=f"ratio {result.get('ratio')!r}, ci {result.get('ci')!r}",
            expected="the speedup and its interval at the confidence asked (None only for "
                     "a pair that may not be compared)",
            hint="a decision is only as good as the evidence it reports: these records are "
                 "comparable, so the ratio and interval you decided on belong in the result")
    if not ci[0] * (1 - 1e-9) <= ratio <= ci[1] * (1 + 1e-9) or side(ci, min_gain) != \
            result["decision"]:
        raise CheckFailed(
            f"your {result['decision']!r} is not what your own interval says",
            yours=f"ratio {ratio:.4f}, ci [{ci[0]:.4f}, {ci[1]:.4f}]",
            expected=f"an interval holding the ratio, on the {result['decision']!r} side of "
                     f"1 + min_gain = {1 + min_gain:g} and 1 / (1 + min_gain)",
            hint=f"your interval says {side(ci, min_gain)!r}"
                 + ("" if ci[0] <= ratio <= ci[1] else ", and it does not hold your ratio"))


def means_cause(result: dict, own: dict | None, ref, before: dict, after: dict,
                **options) -> str:
    """Where the learner's ratio is the one each round's mean gives and not the one each
    round's median gives (the checker's), that is the cause; else "". (In a learner's
    copy the means' decision is not stored: the hint then says less, never the verdict.)"""
    if not own or "round_ids" not in before or "round_ids" not in after:
        return ""
    by_means = ref.decide(round_means(before), round_means(after), **options) or {}
    try:
        ratio = float(result.get("ratio"))
    except (TypeError, ValueError):
        return ""
    if ("ratio" in by_means and math.isclose(ratio, by_means["ratio"], rel_tol=1e-3)
            and not math.isclose(ratio, own["ratio"], rel_tol=1e-3)):
        return (f"your ratio {ratio:.4f} is the one each round's mean gives, where each "
                f"round's median gives {own['ratio']:.4f}: a mean moves with every slow "
                "sample of its round; a round's median does not")
    return ""


def decide_result(impl, before, after, ctx, ref, **options) -> dict:
    """The learner's ``decide`` on these records (``options``: its keyword arguments)."""
    path = ctx.subdir("records")
    (path / "before.json").write_text(json.dumps(before))
    (path / "after.json").write_text(json.dumps(after))
    load = get_function(impl, "load_run")
    rounds = len(set(before.get("round_ids", [])))
    in_rounds = f" in {rounds} rounds" if rounds else ""
    with on_input(f"two run records of {len(before['samples_s'])} samples{in_rounds} (medians "
                  f"{np.median(before['samples_s']):.3g} and {np.median(after['samples_s']):.3g} "
                  f"s), options {options or 'none'}"):
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
        own = (ref.decide(before, after, **options) or {}).get("decision")
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
    inverse = side((1 / hi, 1 / lo), min_gain) == got
    fail_unless(agrees, f"decide said {got!r}, but its own interval [{lo:.3f}, {hi:.3f}] "
                f"says {want!r} (min_gain {min_gain:g}: accept above {up:.3f}, slower below "
                f"{down:.3f})", yours=got, expected=want,
                hint=f"your interval is the other way round: its inverse [{1 / hi:.3f}, "
                f"{1 / lo:.3f}] says {got!r}; report the speedup, time before / time after"
                if inverse else "decide by where the whole interval you report lies, and "
                "report the interval you decided by")
    if got in ("accept", "slower"):  # the estimate lies on the side its interval does
        ratio = result.get("ratio")
        try:
            ratio = float(ratio)
        except (TypeError, ValueError):
            ratio = math.nan
        faster = got == "accept"
        where = "above" if faster else "below"
        fail_unless(math.isfinite(ratio) and (ratio > 1) == faster, f"decide said {got!r} "
                    f"with the interval [{lo:.3f}, {hi:.3f}], but its ratio is {ratio:.4g}",
                    yours=result.get("ratio"), expected=f"a speedup {where} 1 (time "
                    "before / time after)", hint="your ratio is the other "
                    "way round (time after / time before)" if math.isfinite(ratio) and
                    (1 / ratio > 1) == faster else "ratio is the estimate of the speedup, "
                    "time before / time after")


NUMBER = re.compile(r"[-+]?\d+(?:\.(\d+))?")


def reasons_state_the_numbers(result: dict) -> None:
    """The contract: every reason is a sentence computed from the numbers. An accept's
    reasons must state the decide's own ratio or an end of its interval (as a speedup,
    or as a gain in percent), to the digits they print."""
    values = [v for v in (result.get("ratio"), *(reported_interval(result) or ()))
              if isinstance(v, (int, float))]
    candidates = [*values, *(100 * (v - 1) for v in values)]
    text = " ".join(str(r) for r in result["reasons"])

    def printed_from(match, value):
        decimals = len(match.group(1) or "")
        return abs(float(match.group(0)) - value) <= 0.5 * 10 ** -decimals + 1e-9

    found = any(printed_from(m, v) for m in NUMBER.finditer(text) for v in candidates)
    fail_unless(found, "decide's reasons do not state the numbers its decision rests on",
                yours=result["reasons"][:3], expected="a sentence stating your ratio "
                f"({result.get('ratio')!r}) or your interval ({result.get('ci')!r})",
                hint="each reason is a sentence computed from the numbers: the interval (or "
                "ratio) the decision rests on, printed in it")


@checker.check(4)
def accepts_real_speedup(impl, ctx):
    ref = DecisionReference(ctx, "real")
    rng = ref.rng
    base = float(rng.uniform(5e-3, 2e-2))
    before, after = run_record(rng, base, 0.08), run_record(rng, base / 2, 0.08)
    result = expect_decision(impl, ctx, ref, before, after, "accept",
                             "a clear 2x speedup with correct output was not accepted")
    reasons_state_the_numbers(result)
    # the fewest raw samples the contract takes (5 each) still decide a clear case
    before, after = run_record(rng, base, 0.05, n=5), run_record(rng, base / 2, 0.05, n=5)
    result = decide_result(impl, before, after, ctx, ref)
    if result["decision"] != "accept":
        refused = result["decision"] == "reject" and reported_interval(result) is None
        expect_decision(impl, ctx, ref, before, after, "accept", "a clear 2x speedup with 5 raw "
                        "samples each (the fewest the contract takes) was not accepted",
                        otherwise="the contract refuses fewer than 5 raw samples; 5 "
                        "is enough" if refused else "")


@checker.check(4)
def rejects_noise(impl, ctx):
    ref = DecisionReference(ctx, "noise")
    rng = ref.rng
    base = float(rng.uniform(5e-3, 2e-2))
    # Draw until "after" looks a little faster (a tempting claim) while the checker's own
    # intervals (over rounds, and over samples: without round_ids each sample is a round)
    # show it is noise: a decision that trusts the raw ratio must fail here.
    def tempting_noise(before, after):
        ratio = np.median(before["samples_s"]) / np.median(after["samples_s"])
        return (ref.live("decide_rounds", before, after)["ci"][0] < 1.0 and
                decision.pooled_bootstrap(before, after)["ci"][0] < 1.0 and ratio > 1.03)

    before, after = ref.draw(lambda: (run_record(rng, base, 0.3), run_record(rng, base, 0.3)),
                               tempting_noise)
    expect_decision(impl, ctx, ref, before, after, "reject", "a noise-only difference (the "
                    "medians' ratio "
                    f"{np.median(before['samples_s']) / np.median(after['samples_s']):.3f}) "
                    "was not rejected",
                    expected="reject: the 95% interval of these records holds 1",
                    otherwise="a ratio above 1 is no "
                    "evidence until the whole interval clears 1 + min_gain")
    # Most of the noise on the "before" side, "after" tight and a little faster: an
    # interval that lets only "after" vary clears 1 + min_gain, the one with both
    # records' spread holds 1 (the checker's own, over rounds and over pooled samples).
    def noisy_before(before, after):
        return (ref.live("decide_rounds", before, after)["ci"][0] < 0.99
                and decision.pooled_bootstrap(before, after)["ci"][0] < 0.99
                and ref.live("after_only_interval", before, after)[0] > 1.1)

    before, after = ref.draw(lambda: (run_record(rng, base, 0.45),
                                        run_record(rng, base / 1.2, 0.02)), noisy_before,
                               tries=400)
    result = decide_result(impl, before, after, ctx, ref)
    alone = ref.result("decision", "after_only_interval", before, after)
    if result["decision"] != "reject":
        ci = reported_interval(result)
        # its ends to 1e-3 and its width to 5%: an interval as narrow for another reason
        # (a quantile of alpha: ends 1e-3 apart, a third narrower) is named by its width
        after_only = ci is not None and alone is not None and all(
            math.isclose(a, b, rel_tol=1e-3) for a, b in zip(ci, alone)) and math.isclose(
            math.log(ci[1] / ci[0]), math.log(alone[1] / alone[0]), rel_tol=0.05)
        expect_decision(
            impl, ctx, ref, before, after, "reject", "a speedup that the noise of the 'before' "
            "samples hides was not rejected", expected=f"reject: with both records' spread "
            f"(before's samples spread {np.std(np.log(before['samples_s']), ddof=1):.2f} in "
            f"log, after's {np.std(np.log(after['samples_s']), ddof=1):.2f}) the 95% "
            "interval holds 1",
            cause=f"your interval is the one that lets only 'after' vary ([{alone[0]:.3f}"
            f", {alone[1]:.3f}]): its width must carry the spread of both records"
            if after_only else "")
    # Noise whose point estimate reads more than the minimum slower while the interval
    # (the checker's own, over rounds and over pooled samples) still holds 1: "slower"
    # asks the whole interval to lie below 1 / (1 + min_gain), as "accept" asks it above.
    def tempting_slowdown(before, after):
        own = ref.live("decide_rounds", before, after)
        return (own["ratio"] < 0.93 and own["ci"][1] > 1.02
                and decision.pooled_bootstrap(before, after)["ci"][1] > 1.02)

    before, after = ref.draw(lambda: (run_record(rng, base, 0.3), run_record(rng, base, 0.3)),
                               tempting_slowdown, tries=400)
    own = ref.decide(before, after)
    expect_decision(impl, ctx, ref, before, after, "reject", "noise that looks slower (the "
                    f"estimate {own['ratio']:.3f}) was not rejected", expected="reject: the 95% "
                    "interval of these records holds 1")


@checker.check(4)
def rejects_drifting_null(impl, ctx):
    ref = DecisionReference(ctx, "drifting-null")
    rng = ref.rng
    # Identical programs measured in 8 interleaved rounds while the load drifts. Draw
    # until the pooled samples look clearly faster (a bootstrap that treats them as
    # independent accepts) while the rounds, the real evidence, hold 1 with a margin.
    before, after = ref.draw(
        lambda: rounds_records(rng, 1.0, block_drift=0.1),
        lambda b, a: decision.pooled_bootstrap(b, a, n_boot=1000)["decision"] == "accept"
        and ref.live("decide_rounds", b, a)["ci"][0] < 0.99, tries=400)
    expect_decision(impl, ctx, ref, before, after, "reject", "identical programs measured in "
                    "drifting rounds were judged different", expected="reject: the 95% "
                    "interval of the rounds holds 1",
                    otherwise="samples of one round share its load: the evidence is the "
                    "rounds, not the pooled samples")
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

    before, after = ref.draw(
        shared_trend, lambda b, a: ref.live("decide_rounds", b, a)["ci"][0] < 0.99
        and ref.live("paired_by_position", b, a)[0] > 1.06)
    result = decide_result(impl, before, after, ctx, ref)
    paired = ref.result("decision", "paired_by_position", before, after)
    if result["decision"] != "reject":
        ci = reported_interval(result)
        by_position = ci is not None and all(math.isclose(a, b, rel_tol=1e-3)
                                             for a, b in zip(ci, paired))
        expect_decision(
            impl, ctx, ref, before, after, "reject", "two runs without round_ids, measured one "
            "after the other, were judged different", expected="reject: each sample its own "
            "round, the 95% interval holds 1",
            cause=f"your interval is the one that pairs sample i with sample i "
            f"([{paired[0]:.3f}, {paired[1]:.3f}]): without round_ids nothing says two "
            "samples shared their load; pair only samples whose round_ids say so"
            if by_position else "")


@checker.check(4)
def accepts_speedup_in_drifting_rounds(impl, ctx):
    ref = DecisionReference(ctx, "drifting-fast")
    rng = ref.rng
    # a true 1.25x whose rounds clear the minimum gain with a margin
    before, after = ref.draw(lambda: rounds_records(rng, 1.25),
                               lambda b, a: ref.live("decide_rounds", b, a)["ci"][0] > 1.12)
    expect_decision(impl, ctx, ref, before, after, "accept", "a true 1.25x speedup measured in "
                    "8 drifting rounds was not accepted")


def scaled_interval(own: dict, factor: float) -> tuple[float, float]:
    """The checker's interval of the same records with its half-width (in log) times
    ``factor``: what an interval too narrow or too wide by that much says."""
    lo, hi = own["ci"]
    centre, half = math.log(own["ratio"]), math.log(hi / lo) / 2
    return math.exp(centre - factor * half), math.exp(centre + factor * half)


def three_rounds(rng):
    """A before/after pair of 3 interleaved rounds of 10-15 samples on a drifting
    machine: three pieces of evidence, where Student's t (2 degrees of freedom, 4.30 for
    95%) is far from the normal's 1.96 and from t at the samples' count."""
    return rounds_records(rng, float(rng.uniform(1.15, 1.45)), rounds=3,
                          iters=int(rng.integers(10, 16)), block_drift=0.08)


@checker.check(4)
def few_rounds_interval_at_95_percent(impl, ctx):
    """The interval is at the confidence asked (95%), also where 3 rounds are all the
    evidence: records drawn until the rounds' 95% interval holds 1.05 while one 15%
    narrower (in log) clears it (Student's t for the samples' or one more degree of
    freedom, the normal quantile, a population spread: all narrower) must be rejected;
    records whose 95% interval clears 1.05 by 5-9% while one 30% wider does not (a
    quantile for 97.5%, 44% wider) must be accepted: other sound 95% intervals over the
    rounds (Student's t on the ratios themselves, not their logs) sit within a few % of
    the checker's where the interval spans less than 1.65x (they part where rounds
    disagree by 2x)."""
    ref = DecisionReference(ctx, "few-rounds")
    rng = ref.rng
    before, after = ref.draw(lambda: three_rounds(rng), lambda b, a: (
        ref.live("decide_rounds", b, a)["ci"][0] < 1.03
        and scaled_interval(ref.live("decide_rounds", b, a), 0.85)[0] > 1.055), tries=600)
    expect_decision(impl, ctx, ref, before, after, "reject", "a gain 3 interleaved rounds cannot "
                    "show was not rejected", expected="reject: the 95% interval of the 3 "
                    "rounds does not clear 1.05",
                    otherwise="3 rounds are little evidence: a 95% interval "
                    "over them is wide")
    def clears_by_a_little(b, a):
        own = ref.live("decide_rounds", b, a)
        return (1.1 < own["ci"][0] < 1.14 and own["ci"][1] < 1.65 * own["ci"][0]
                and scaled_interval(own, 1.3)[0] < 1.04)

    before, after = ref.draw(lambda: three_rounds(rng), clears_by_a_little, tries=1000)
    expect_decision(impl, ctx, ref, before, after, "accept", "a gain 3 interleaved rounds show "
                    "was not accepted", expected="accept: the 95% interval of the 3 rounds "
                    "is clear of 1.05",
                    otherwise="a 95% interval, not a wider one")


def unequal_unpaired(rng):
    """Records without round ids (each sample its own round, so the rounds are unpaired):
    before 5-7 samples of a wide spread, after 20-30 of a narrow one. Welch's degrees of
    freedom are then about the smaller side's (4-6), where the samples' count less two
    (23-35) gives a t quantile a quarter smaller."""
    base = float(rng.uniform(5e-3, 2e-2))
    ratio = float(rng.uniform(1.1, 1.4))
    before = run_record(rng, base, float(rng.uniform(0.12, 0.2)), n=int(rng.integers(5, 8)))
    after = run_record(rng, base / ratio, 0.01, n=int(rng.integers(20, 31)))
    return before, after


@checker.check(4)
def unpaired_interval_keeps_its_confidence(impl, ctx):
    """Unpaired rounds of unequal counts and spreads: records whose 95% interval (Welch's
    t and degrees of freedom, the course's statistic) holds 1.05 while one 20% narrower
    in log clears it must be rejected. An interval that takes the degrees of freedom of
    the samples' count (a pooled t-test's) is about 25% narrower there, and not a 95%
    interval: the wide side's few samples are most of the evidence's spread."""
    ref = DecisionReference(ctx, "unpaired-unequal")
    rng = ref.rng
    before, after = ref.draw(lambda: unequal_unpaired(rng), lambda b, a: (
        ref.live("decide_rounds", b, a)["ci"][0] < 1.03
        and scaled_interval(ref.live("decide_rounds", b, a), 0.8)[0] > 1.055), tries=800)
    try:
        expect_decision(impl, ctx, ref, before, after, "reject", "unpaired rounds whose 95% "
                        "interval does not clear 1.05 were not rejected",
                        expected="reject: Welch's 95% interval of the unpaired rounds holds "
                        "1.05", otherwise=f"{len(before['samples_s'])} samples of a wide "
                        f"spread against {len(after['samples_s'])} of a narrow one: the "
                        "interval's degrees of freedom are about the few wide ones' "
                        "(Welch-Satterthwaite), not the samples' count")
    except CheckFailed as err:
        err.hint = pooled_df_hint(decide_result(impl, before, after, ctx, ref),
                                  ref.decide(before, after), before, after) or err.hint
        raise


def pooled_df_hint(result: dict, own: dict | None, before: dict, after: dict) -> str | None:
    """Where the learner's interval is the course's with the t quantile of the samples'
    count less two in place of Welch's degrees of freedom: its width, to 3%."""
    ci = reported_interval(result)
    if ci is None or own is None or not own.get("df") or ci[0] <= 0 or ci[1] <= ci[0]:
        return None
    from scipy.stats import t
    pooled = len(before["samples_s"]) + len(after["samples_s"]) - 2
    want = t.ppf(0.975, pooled) / t.ppf(0.975, own["df"])
    width = math.log(ci[1] / ci[0]) / math.log(own["ci"][1] / own["ci"][0])
    if abs(width / want - 1) > 0.03:
        return None
    return (f"your interval is Welch's spread with the t quantile of {pooled} degrees of "
            f"freedom, the samples' count less two (a pooled t-test's); with spreads this "
            f"unequal Welch-Satterthwaite gives {own['df']:g}, and the narrower interval is "
            "not a 95% one")


@checker.check(4)
def interval_at_the_confidence_asked(impl, ctx):
    """``confidence`` decides the interval's width: records whose rounds' 95% interval
    holds 1.05 while their 60% interval clears it must be rejected at 0.95 and accepted at
    0.6."""
    ref = DecisionReference(ctx, "confidence")
    rng = ref.rng
    low = 0.6

    def holds(b, a):
        return (ref.live("decide_rounds", b, a)["ci"][0] < 1.03
                and ref.live("decide_rounds", b, a, confidence=low)["ci"][0] > 1.08)

    before, after = ref.draw(lambda: rounds_records(rng, float(rng.uniform(1.1, 1.25)),
                                                      block_drift=0.1), holds, tries=400)
    high = expect_decision(impl, ctx, ref, before, after, "reject", "records whose 95% interval "
                           "does not clear 1 + min_gain were not rejected at confidence 0.95")
    own = ref.decide(before, after, confidence=low)
    result = decide_result(impl, before, after, ctx, ref, confidence=low)
    if result["decision"] != "accept":
        same = reported_interval(result) is not None and \
            reported_interval(result) == reported_interval(high)
        raise CheckFailed(
            f"at confidence={low} the records were not accepted", yours=f"{result['decision']}"
            f" (your interval: {result.get('ci')!r})", expected=f"accept: the {low:.0%} "
            "interval of the rounds clears 1 + min_gain",
            hint=f"your interval at confidence={low} is the one you gave at 0.95: the "
            "interval's width must follow the confidence asked" if same else
            decision_hint(result, own, before, after, 0.05, f"an interval at {low:.0%} "
                          "confidence is narrower than one at 95%"))


@checker.check(4)
def says_slower_when_slower(impl, ctx):
    ref = DecisionReference(ctx, "drifting-slow")
    rng = ref.rng
    # a true 1.4x slowdown, clear in the rounds
    before, after = ref.draw(lambda: rounds_records(rng, 1 / 1.4),
                               lambda b, a: ref.live("decide_rounds", b, a)["ci"][1] < 0.85)
    expect_decision(impl, ctx, ref, before, after, "slower", "a clear 1.4x slowdown was not "
                    "reported as slower", otherwise="three outcomes: 'slower' when the "
                    "whole interval lies below 1 / (1 + min_gain)")
    plain_before, plain_after = run_record(rng, 0.01, 0.05), run_record(rng, 0.015, 0.05)
    expect_decision(impl, ctx, ref, plain_before, plain_after, "slower", "a 1.5x slowdown in "
                    "records without round_ids was not reported as slower",
                    otherwise="without round_ids each sample is its own round")
    # A real slowdown smaller than the minimum: the checker's own interval lies wholly
    # below 1 and wholly above 1 / (1 + min_gain): not "slower", as a gain that small is
    # not "accept".
    down = 1 / 1.05
    base = float(rng.uniform(5e-3, 2e-2))
    small_before, small_after = ref.draw(
        lambda: (run_record(rng, base, 0.01), run_record(rng, base * 1.025, 0.01)),
        lambda b, a: down < ref.live("decide_rounds", b, a)["ci"][0]
        and ref.live("decide_rounds", b, a)["ci"][1] < 0.995)
    expect_decision(impl, ctx, ref, small_before, small_after, "reject", "a real slowdown "
                    "smaller than the minimum was not rejected", expected="reject: the 95% "
                    "interval lies below 1 but above "
                    f"1 / (1 + min_gain) = {down:.3f}", otherwise="'slower' means slower by "
                    "more than the minimum, as 'accept' means faster by more than it")


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


def stall_hint(impl, ctx, ref, before, after, hint: str) -> str:
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
    first = decide_result(impl, before, after, ctx, ref)
    again = decide_result(impl, shuffled(before), shuffled(after), ctx, ref)
    if not all(same(first.get(k), again.get(k)) for k in ("decision", "ratio", "ci")):
        return (f"your decide answers otherwise when the same samples come in another order, "
                f"each keeping its round id (decision {first['decision']!r}, ratio "
                f"{first.get('ratio')!r} -> {again['decision']!r}, {again.get('ratio')!r}): "
                "it groups or pairs samples by position, not by round_ids. Group the "
                "samples by round_ids, summarise each round, then compare rounds")
    return hint


def stall_cause(result: dict, ref, before: dict, after: dict) -> str:
    """What a decision thrown by stalled samples shows: a ratio that is the one of each
    round's mean (a stall moves a mean, not a median), or else the hint of its interval."""
    by_means = ref.decide(round_means(before), round_means(after)) or {}
    try:
        ratio = float(result.get("ratio"))
    except (TypeError, ValueError):
        ratio = math.nan
    if "ratio" in by_means and math.isclose(ratio, by_means["ratio"], rel_tol=1e-3):
        return (f"your ratio {ratio:.3f} is the one each round's mean gives: a few stalled "
                "samples (20-60x slower) throw a mean far off; a round's median does not "
                "move")
    return decision_hint(result, ref.decide(before, after), before, after, 0.05,
                         "a few samples of some rounds stalled 20-60x: summarise each round "
                         "by a statistic they do not move")


@checker.check(4)
def stalls_do_not_decide(impl, ctx):
    ref = DecisionReference(ctx, "stalls")
    rng = ref.rng
    # identical programs, "before" stalled in every round (it is the one that triggers the
    # pauses): means say "after" is faster
    def stalled_before():
        before, after = rounds_records(rng, 1.0, block_drift=0.03)
        return with_stalls(rng, before, rounds_hit=8), after

    before, after = ref.draw(
        stalled_before, lambda b, a: ref.live("decide_rounds", b, a)["ci"][0] < 0.99
        and ref.live("decide_rounds", round_means(b), a)["decision"] == "accept")
    ref.decide(round_means(before), round_means(after))  # kept for the hint
    result = decide_result(impl, before, after, ctx, ref)
    if result["decision"] != "reject":
        fail_unless(False, "identical programs were judged different because a few "
                    "samples of one stalled", yours=result["decision"], expected="reject",
                    hint=stall_hint(impl, ctx, ref, before, after,
                                         stall_cause(result, ref, before, after)))
    # a true 1.3x speedup, "after" stalled in a few rounds: means say it is not faster
    def stalled_after():
        before, after = rounds_records(rng, 1.3, block_drift=0.03)
        return before, with_stalls(rng, after)

    before, after = ref.draw(
        stalled_after, lambda b, a: ref.live("decide_rounds", b, a)["ci"][0] > 1.12
        and ref.live("decide_rounds", b, round_means(a))["decision"] != "accept")
    ref.decide(round_means(before), round_means(after))  # kept for the hint
    result = decide_result(impl, before, after, ctx, ref)
    if result["decision"] != "accept":
        fail_unless(False, "a true 1.3x speedup was not accepted because a few of its "
                    "samples stalled", yours=result["decision"], expected="accept",
                    hint=stall_hint(impl, ctx, ref, before, after,
                                         stall_cause(result, ref, before, after)))


@checker.check(4)
def rejects_faster_but_wrong(impl, ctx):
    ref = DecisionReference(ctx, "wrong")
    rng = ref.rng
    base = float(rng.uniform(5e-3, 2e-2))
    before = run_record(rng, base, 0.05)
    after = run_record(rng, base / 3, 0.05, output_ok=False)
    got = decision_of(impl, before, after, ctx, ref)
    fail_unless(got == "reject", "a 3x faster run with a wrong output was accepted",
                yours=got, expected="reject", hint="'after' reports output_ok=False: a "
                "wrong output is refused whatever its speed")


@checker.check(4)
def rejects_not_comparable(impl, ctx):
    ref = DecisionReference(ctx, "comparable")
    rng = ref.rng
    base = float(rng.uniform(5e-3, 2e-2))
    before = run_record(rng, base, 0.05)
    # (what, the record, what makes the pair one that may not be compared)
    cases = [
        ("after timed without sync", run_record(rng, base / 1000, 0.05, sync="none"),
         "sync differs: 'block_until_ready' vs 'none'"),
        ("after without its first call reported apart",
         run_record(rng, base / 2, 0.05, first_call_s=None), "'after' has first_call_s None"),
        ("after on another shape", run_record(rng, base / 2, 0.05, shapes=[[128, 512]]),
         "shapes differ: [[256, 512]] vs [[128, 512]]"),
        ("after with only 4 raw samples", run_record(rng, base / 2, 0.05, n=4),
         "'after' holds 4 raw samples, fewer than the 5 the contract asks"),
        ("after without an output check", run_record(rng, base / 2, 0.05, output_ok=None),
         "'after' has output_ok None: its output was never checked"),
    ]
    for name, after, why in cases:
        got = decision_of(impl, before, after, ctx, ref)
        fail_unless(got == "reject", f"not comparable ({name}) but {got!r}", yours=got,
                    expected="reject", hint=f"{why}: a pair that may not be compared is "
                    "rejected before any time is read")


@checker.check(4)
def decide_applies_min_gain(impl, ctx):
    ref = DecisionReference(ctx, "min-gain")
    rng = ref.rng
    # The kernel got 2x faster, but it is a 5% share: the step gains about 2.6% (Amdahl's
    # law, the checker's own arithmetic), clear in tight samples but below the minimum.
    base, gain = float(rng.uniform(5e-3, 2e-2)), 1 / ((1 - 0.05) + 0.05 / 2.0)
    before, after = ref.draw(
        lambda: (run_record(rng, base, 0.01), run_record(rng, base / gain, 0.01)),
        lambda b, a: 1.0 < ref.live("decide_rounds", b, a)["ci"][0]
        and ref.live("decide_rounds", b, a)["ci"][1] < 1.05)
    expect_decision(impl, ctx, ref, before, after, "reject", f"a {100 * (gain - 1):.1f}% step "
                    "gain (a 2x kernel at a 5% share) was not rejected", expected="reject: "
                    "the 95% interval lies above 1 but not "
                    "above 1 + min_gain = 1.05", otherwise="accept means faster by more than "
                    "the minimum gain")
    # min_gain=0 is in the contract (min_gain >= 0): then any real gain is accepted
    expect_decision(impl, ctx, ref, before, after, "accept", f"with min_gain=0 a real "
                    f"{100 * (gain - 1):.1f}% step gain was not accepted", expected="accept "
                    "(its interval lies above 1)",
                    otherwise="min_gain=0 is allowed: any gain whose whole interval lies "
                    "above 1", min_gain=0.0)
    # a negative minimum gain is bad input, refused by name (the contract: min_gain >= 0)
    try:
        got = decision_of(impl, before, after, ctx, ref, min_gain=-0.05)
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


def tight_rounds(rng, ratio: float):
    """8 interleaved rounds of 12 samples on a quiet machine: an interval about 0.05%
    wide (in log) around ``ratio``, narrow enough to sit between two nearby boundaries."""
    return rounds_records(rng, ratio, round_drift=0.02, block_drift=0.0002, noise=0.0003,
                          outliers=0.0)


# (min_gain, the speedup drawn around, what the course's interval must hold, the answer)
# beside each boundary of the contract, on both sides of it: "slower" below 1 / (1 + g)
# (not 1 - g), "accept" above 1 + g (not 1 / (1 - g)), "reject" just outside each.
BOUNDARY_CASES = [
    (g, ratio, want)
    for g, cases in (
        (0.05, ((0.9510, "slower"), (0.9540, "reject"), (1.0513, "accept"), (1.0485, "reject"))),
        (0.10, ((0.9048, "slower"), (0.9125, "reject"), (1.1055, "accept"), (1.0960, "reject"))),
    )
    for ratio, want in cases
]


def beside_boundary(g: float, want: str, ci) -> bool:
    """The course's interval lies on ``want``'s side of the nearest boundary with room
    for another sound interval (up to 3x as wide), and on the other side of the nearby
    boundary a slip would use."""
    lo, hi = ci
    up, down = 1 + g, 1 / (1 + g)
    margin = 2 * (hi - lo)
    if want == "slower":
        return 1 - g < hi < down - margin
    if want == "accept":
        return up + margin < lo < 1 / (1 - g)
    if hi < 1:  # a slowdown smaller than the minimum
        return down + margin < lo
    return hi < up - margin and lo > 1


@checker.check(4)
def decision_boundaries_from_both_sides(impl, ctx):
    """Each outcome's boundary tried from both sides at two minimum gains: intervals a
    little inside "slower" (between 1 - g and 1 / (1 + g)) and "accept" (between 1 + g
    and 1 / (1 - g)), and a little outside each, where the answer is "reject"."""
    ref = DecisionReference(ctx, "boundaries")
    rng = ref.rng
    for g, ratio, want in BOUNDARY_CASES:
        before, after = ref.draw(lambda ratio=ratio: tight_rounds(rng, ratio),
                                 lambda b, a, g=g, want=want: beside_boundary(
                                     g, want, ref.live("decide_rounds", b, a, min_gain=g)["ci"]))
        own = ref.decide(before, after, min_gain=g)
        ci = own["ci"] if own else None
        where = f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else ""
        expect_decision(impl, ctx, ref, before, after, want, f"an interval a little "
                        f"{'inside' if want != 'reject' else 'outside'} a decision boundary "
                        f"(min_gain {g:g}: accept above {1 + g:.4f}, slower below "
                        f"{1 / (1 + g):.4f}) was not decided {want!r}",
                        expected=f"{want}: the 95% interval of the rounds{where}",
                        otherwise=f"the boundaries are 1 + min_gain = {1 + g:.4f} and "
                        f"1 / (1 + min_gain) = {1 / (1 + g):.4f}", min_gain=g)


@checker.check(4)
def amdahl_small_share(impl, ctx):
    predict = get_function(impl, "predict_step_speedup")
    ref = DecisionReference(ctx, "amdahl")
    rng = ref.rng
    cases = [(0.05, 2.0)] + [(float(rng.uniform(0.01, 0.99)), float(rng.uniform(1.1, 10)))
                             for _ in range(5)]
    for share, speedup in cases:  # a 2x kernel at a 5% share first: about 2.6% for the step
        # the law's arithmetic is the answer: the reference's numbers, not its code
        expected = ref.result("performance_audit", "step_speedup", share, speedup)
        slips = ref.result("performance_audit", "step_speedup_slips", share, speedup)
        got = as_float(predict(share, speedup), "predicted speedup")
        fail_unless(math.isclose(got, expected, rel_tol=1e-9),
                    f"step speedup for share={share:.3f}, kernel {speedup:.2f}x",
                    yours=got, expected=expected, hint=amdahl_hint(got, expected, slips or {}))


def amdahl_hint(got: float, expected: float, slips: dict[str, float]) -> str:
    """What a wrong step speedup equals, of the classic slips (the checker's), or else
    how far it is from the checker's."""
    for what, value in slips.items():
        if math.isclose(got, value, rel_tol=1e-9):
            return f"yours is {what}"
    return (f"yours is {got / expected:.4g}x the checker's step speedup for this share and "
            "kernel speedup")

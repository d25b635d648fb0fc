"""The course's decision statistic: performance-audit stage 4's answer (its ``decide``),
instructor-only (``coursekit.checking.graded``). Its checker and the benchmarks use it;
a learner's release does not hold it.

The course's one decision statistic: is "after" faster than "before", judged from
interleaved rounds rather than from pooled samples.

Why rounds: on a shared machine the load drifts (per-round medians move by +-18% over a
minute here), and the samples of one block share that block's load. Pooled samples are
not independent, so a bootstrap that resamples them claims differences between identical
programs (it excluded 1 in 89 of 200 null pairs with 8 drifting rounds). The unit of
evidence is the round: both variants measured back to back, in alternating order.

API::

    result = decide_rounds(before, after, min_gain=0.05, confidence=0.95)
    result["decision"]   # "accept" | "slower" | "reject"
    result["ratio"], result["ci"], result["reasons"], result["rounds"], result["method"]
    result["n_rounds"], result["df"], result["contention"] (None without ``cpu_s``)

The statistic: each round is summarised by the median of its samples, in log space.
When both records carry ``round_ids`` and share at least two rounds, the rounds are paired
(``d_r = log median_before_r - log median_after_r``: drift common to a round cancels) and
the interval is Student's t on the mean of ``d_r`` with ``rounds - 1`` degrees of freedom.
Otherwise the rounds are unpaired and the interval is Welch's t on the difference of the
mean per-round log medians. Either interval is exponentiated into a speedup interval.
A t interval, not a bootstrap: with the 4-10 rounds a notebook can afford, a bootstrap
over rounds is too narrow (it cannot see variation the few rounds did not show).

Outcomes, with ``g = min_gain``: accept when ``lo > 1 + g``; slower when
``hi < 1 / (1 + g)``; reject otherwise (the reasons say whether the interval holds 1, or
lies above or below 1 by less than the minimum).
"""

from __future__ import annotations

import math

import numpy as np

from coursekit.measure import verdict
from coursekit.measure.decision import _samples, contention, grouped, t_quantile


def round_medians(record: dict, name: str = "record") -> dict[int, float]:
    """{round id: median seconds of that round's samples}, rounds in order."""
    _samples(record, name)  # positive seconds, or a ValueError naming the record
    return {r: float(np.median(v)) for r, v in grouped(record).items()}


def median_interval(values: list[float], confidence: float = 0.95) -> list[float] | None:
    """A distribution-free interval of the median of ``values`` (the sign test's): the
    k-th smallest to the k-th largest value, k the largest with a chance of at least
    ``confidence`` that the median lies between them (each value falls either side of it
    with chance 1/2). None when even the smallest-to-largest range falls short."""
    n, ordered = len(values), sorted(values)
    outside = [math.comb(n, i) / 2 ** n for i in range(n + 1)]  # values below the median
    k = 0
    while k < n // 2 and 2 * sum(outside[:k + 1]) <= 1 - confidence:
        k += 1
    if k == 0:
        return None
    return [ordered[k - 1], ordered[n - k]]


def ratio_by_rounds(before: dict, after: dict, confidence: float = 0.95) -> dict:
    """A plain estimate, not a decision: per round both records hold, before's median
    over after's; the median of those ratios and its distribution-free interval
    (``median_interval``). {"ratio", "ci" (None with too few rounds), "n_rounds"}."""
    b, a = grouped(before), grouped(after)
    ratios = [float(np.median(b[r]) / np.median(a[r])) for r in b if r in a]
    if not ratios:
        raise ValueError("the two records share no round")
    return {"ratio": float(np.median(ratios)), "ci": median_interval(ratios, confidence),
            "n_rounds": len(ratios)}


# ---------------------------------------------------------------------------------------
# The decision
# ---------------------------------------------------------------------------------------

def _interval(before: dict, after: dict, confidence: float):
    """(method, estimate of log speedup, half-width, df, per-round rows)."""
    mb, ma = round_medians(before, "before"), round_medians(after, "after")
    shared = sorted(set(mb) & set(ma))
    paired = ("round_ids" in before and "round_ids" in after and len(shared) >= 2)
    if paired:
        d = np.array([math.log(mb[r]) - math.log(ma[r]) for r in shared])
        df = d.size - 1
        se = float(np.std(d, ddof=1)) / math.sqrt(d.size)
        rows = [{"round": r, "before_s": mb[r], "after_s": ma[r], "ratio": mb[r] / ma[r]}
                for r in shared]
        return "paired rounds", float(d.mean()), t_quantile(confidence, df) * se, df, rows
    lb = np.log(np.array(list(mb.values())))
    la = np.log(np.array(list(ma.values())))
    if lb.size < 2 or la.size < 2:
        return "unpaired rounds", float(lb.mean() - la.mean()), math.inf, 0, []
    vb, va = float(np.var(lb, ddof=1)) / lb.size, float(np.var(la, ddof=1)) / la.size
    if vb + va == 0:
        df = lb.size + la.size - 2
    else:
        df = max(1, math.floor((vb + va) ** 2 / (vb**2 / (lb.size - 1)
                                                 + va**2 / (la.size - 1))))
    rows = [{"round": r, "before_s": mb.get(r), "after_s": ma.get(r),
             "ratio": mb[r] / ma[r] if r in mb and r in ma else None}
            for r in sorted(set(mb) | set(ma))]
    half = t_quantile(confidence, df) * math.sqrt(vb + va)
    return "unpaired rounds", float(lb.mean() - la.mean()), half, df, rows


def decide_rounds(before: dict, after: dict, *, min_gain: float = 0.05,
                  confidence: float = 0.95) -> dict:
    """Is ``after`` faster than ``before``? See the module docstring for the contract.

    Raises ValueError when a record's samples are not positive seconds or its
    round_ids do not match its samples one to one."""
    if min_gain < 0:
        raise ValueError(f"min_gain must be >= 0, got {min_gain!r}")
    method, est, half, df, rows = _interval(before, after, confidence)
    n_rounds = len([r for r in rows if r["ratio"] is not None]) if method == "paired rounds" \
        else min(len(round_medians(before)), len(round_medians(after)))
    ratio = math.exp(est)
    result = {"ratio": ratio, "method": method, "n_rounds": n_rounds, "df": df,
              "rounds": rows, "min_gain": min_gain, "confidence": confidence,
              "contention": None}
    if "cpu_s" in before and "cpu_s" in after:
        result["contention"] = {"before": contention(before), "after": contention(after)}
    if not math.isfinite(half):
        result.update(decision="reject", ci=None, reasons=[
            f"fewer than 2 rounds on one side ({method}): no interval can be formed; "
            "measure in several interleaved rounds"])
        return result
    lo, hi = math.exp(est - half), math.exp(est + half)
    result["ci"] = [lo, hi]
    up, down = 1.0 + min_gain, 1.0 / (1.0 + min_gain)
    where = (f"{confidence:.0%} interval of the speedup [{lo:.3f}, {hi:.3f}] from "
             f"{n_rounds} {method} (t, {df} degrees of freedom)")
    if lo > up:
        result.update(decision="accept", reasons=[
            f"{where} lies above 1 + {min_gain:g}: faster by at least the minimum gain"])
    elif hi < down:
        result.update(decision="slower", reasons=[
            f"{where} lies below 1 / (1 + {min_gain:g}) = {down:.3f}: slower by at least "
            "the minimum"])
    elif lo > 1.0:
        result.update(decision="reject", reasons=[
            f"{where} is above 1 but does not clear 1 + {min_gain:g}: a real gain smaller "
            "than the minimum"])
    elif hi < 1.0:
        result.update(decision="reject", reasons=[
            f"{where} is below 1 but does not reach 1 / (1 + {min_gain:g}): a real "
            "slowdown smaller than the minimum"])
    else:
        result.update(decision="reject", reasons=[
            f"{where} holds 1: no detectable change"])
    return result


# ---------------------------------------------------------------------------------------
# What performance-audit stage 4's checker compares with (stored for a learner's copy)
# ---------------------------------------------------------------------------------------

def reference_decision(before: dict, after: dict, *, min_gain: float = 0.05,
                       confidence: float = 0.95) -> dict:
    """``decide_rounds`` as numbers a checker keeps: decision, ratio, ci, method,
    n_rounds, df, and ``widths``: [log half-width, what it is] for each width a classic
    slip gives on the same rounds (the hint names the one a learner's interval has)."""
    own = decide_rounds(before, after, min_gain=min_gain, confidence=confidence)
    kept = {k: own.get(k) for k in ("decision", "ratio", "ci", "method", "n_rounds", "df")}
    kept["widths"] = width_causes(before, after, own, confidence) if own.get("ci") else []
    return kept


def width_causes(before: dict, after: dict, own: dict, confidence: float = 0.95) -> list:
    """[log half-width, the sentence naming it] for the widths of classic slips on these
    rounds: Student's t with the raw samples' degrees of freedom or one too many, the
    normal quantile, a population spread (ddof 0), a 97.5% quantile; and, for any method
    with degrees of freedom, the quantile of 1 - confidence (alpha) in place of it."""
    import statistics
    rounds = own.get("n_rounds") or 0
    own_half = math.log(own["ci"][1] / own["ci"][0]) / 2
    if own_half <= 0 or not own.get("df") or own["df"] < 1:
        return []
    t_asked, t_alpha = t_quantile(confidence, own["df"]), t_quantile(1 - confidence, own["df"])
    alpha = [[own_half * t_alpha / t_asked,
              f"your interval's half-width is the t quantile of {1 - confidence:.3g} (alpha, "
              f"1 - confidence) on the same spread: a {1 - confidence:.0%} interval, "
              f"{t_asked / t_alpha:.3g}x narrower than the {confidence:.0%} one asked"]]
    if own.get("method") != "paired rounds" or rounds < 3:
        return alpha
    df = rounds - 1
    t_rounds = t_quantile(confidence, df)
    se = own_half / t_rounds
    n_before, n_after = len(before["samples_s"]), len(after["samples_s"])
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    causes = [
        [z * se, f"your interval's half-width is the normal quantile {z:.3g} on these "
         f"rounds' spread: {t_rounds / z:.3g}x narrower than the interval asked of "
         f"{rounds} rounds, whose spread is itself an estimate"],
        [t_quantile(confidence, rounds) * se, f"your interval's half-width is Student's t "
         f"with {rounds} degrees of freedom on the spread of these {rounds} rounds"],
        [t_rounds * se * math.sqrt(df / rounds), "your interval's half-width uses the "
         f"rounds' population spread (ddof=0), their squared deviations over {rounds}"],
        [t_quantile((1 + confidence) / 2, df) * se, "your interval's half-width is "
         f"Student's t for a {(1 + confidence) / 2:.1%} interval, asked at "
         f"{confidence:g}"],
    ]
    for dfs, what in ((n_before - 1, f"{n_before} raw samples - 1"),
                      (n_after - 1, f"{n_after} raw samples - 1"),
                      (n_before + n_after - 2, f"{n_before} + {n_after} raw samples - 2")):
        if dfs >= 1:
            t = t_quantile(confidence, dfs)
            causes.append([t * se, f"your interval's half-width is Student's t with {dfs} "
                           f"degrees of freedom ({what}) on these rounds' spread, but the "
                           f"evidence is {rounds} rounds (samples of a round share its "
                           f"load): t = {t:.3g} claims more evidence than they hold"])
    return causes + alpha


def _t_interval(log_ratios, confidence: float) -> list[float] | None:
    """The checkers' own interval of a mean log ratio (``verdict.interval_of``, which
    their noise verdicts use), as a list."""
    found = verdict.interval_of(list(np.asarray(log_ratios, dtype=float)), confidence)
    return None if found is None else list(found)


def after_only_interval(before: dict, after: dict, confidence: float = 0.95):
    """The interval of the speedup with only the "after" samples' spread in its width
    (each "after" sample against the mean log of "before"): a classic slip."""
    lb, la = np.log(before["samples_s"]), np.log(after["samples_s"])
    return _t_interval(lb.mean() - la, confidence)


def paired_by_position(before: dict, after: dict, confidence: float = 0.95):
    """The interval of the speedup with sample i of each record paired, whether or not
    they shared a round: a classic slip for records without round_ids."""
    n = min(len(before["samples_s"]), len(after["samples_s"]))
    return _t_interval(np.log(before["samples_s"][:n]) - np.log(after["samples_s"][:n]),
                       confidence)

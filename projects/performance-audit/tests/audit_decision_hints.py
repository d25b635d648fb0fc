"""performance-audit stage 4: the hint for a ``decide`` whose decision is not the one the
checker's own statistics give, chosen by what the learner's own result shows: where its
reported interval lies against the outcome it said, and, when its interval itself is in
the wrong place, how its width or centre compares with the rounds' interval of the same
records (a width that is Student's t for the raw samples' degrees of freedom, or the
normal quantile, is named as such)."""

from __future__ import annotations

import math
import statistics

from coursekit.measure.decision import t_quantile

CONFIDENCE = 0.95


def reported_interval(result: dict) -> tuple[float, float] | None:
    """The learner's ``ci`` as two positive finite floats, lo <= hi; None otherwise."""
    ci = result.get("ci")
    if not isinstance(ci, (list, tuple)) or len(ci) != 2:
        return None
    try:
        lo, hi = (float(v) for v in ci)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
        return None
    return lo, hi


def side(ci: tuple[float, float], min_gain: float) -> str:
    """The outcome the contract gives an interval: where the whole of it lies."""
    lo, hi = ci
    return ("accept" if lo > 1 + min_gain else "slower" if hi < 1 / (1 + min_gain)
            else "reject")


def width_cause(before: dict, after: dict, half: float, own: dict) -> str:
    """What a log half-width ``half`` unlike the checker's paired-rounds one is, where the
    records say: Student's t with the raw samples' degrees of freedom or one too many, the
    normal quantile, a population spread (ddof 0), or the quantile of a 97.5% interval, on
    the same rounds; else how much narrower or wider it is."""
    rounds = own.get("n_rounds") or 0
    own_half = math.log(own["ci"][1] / own["ci"][0]) / 2
    how = f"{own_half / half:.2g}x narrower" if half < own_half else \
        f"{half / own_half:.2g}x wider"
    if own.get("method") != "paired rounds" or rounds < 3 or own_half <= 0:
        return (f"your interval is {how} (in log) than the 95% interval these records give; "
                "its width must carry the spread of the evidence, which is the rounds")
    df = rounds - 1
    t_rounds = t_quantile(CONFIDENCE, df)
    se = own_half / t_rounds
    n_before, n_after = len(before["samples_s"]), len(after["samples_s"])
    z = statistics.NormalDist().inv_cdf(0.5 + CONFIDENCE / 2)
    causes = [
        (z * se, f"your interval's half-width is the normal quantile {z:.3g} on these "
         f"rounds' spread: over {rounds} rounds a 95% interval needs Student's t with {df} "
         f"degrees of freedom ({t_rounds:.3g})"),
        (t_quantile(CONFIDENCE, rounds) * se, f"your interval's half-width is Student's t "
         f"with {rounds} degrees of freedom, one too many: {rounds} rounds have {df}"),
        (t_rounds * se * math.sqrt(df / rounds), "your interval's half-width uses the "
         f"rounds' population spread (ddof=0): the spread of {rounds} rounds about their own "
         "mean is estimated with ddof=1"),
        (t_quantile((1 + CONFIDENCE) / 2, df) * se, "your interval's half-width is "
         f"Student's t for a {(1 + CONFIDENCE) / 2:.1%} interval: t_quantile takes the "
         "two-sided confidence itself"),
    ]
    for dfs, what in ((n_before - 1, f"{n_before} raw samples - 1"),
                      (n_after - 1, f"{n_after} raw samples - 1"),
                      (n_before + n_after - 2, f"{n_before} + {n_after} raw samples - 2")):
        if dfs >= 1:
            t = t_quantile(CONFIDENCE, dfs)
            causes.append((t * se, f"your interval's half-width is Student's t with {dfs} "
                           f"degrees of freedom ({what}) on these rounds' spread, but the "
                           f"evidence is {rounds} rounds (samples of a round share its "
                           f"load): {df} degrees of freedom, t = {t_rounds:.3g}, not "
                           f"{t:.3g}"))
    # the width nearest to the learner's, if it is that width to 0.5%
    width, cause = min(causes, key=lambda c: abs(math.log(half / c[0])))
    if math.isclose(half, width, rel_tol=0.005):
        return cause
    return (f"your interval is {how} (in log) than the 95% interval of these {rounds} "
            "rounds: its width must carry the spread of the rounds, each round one piece "
            "of evidence, at the confidence asked")


def decision_hint(result: dict, own: dict, before: dict, after: dict, min_gain: float,
                  otherwise: str) -> str:
    """The hint for a decision that differs from ``own`` (the checker's
    own decision on the same records): chosen by the learner's reported interval."""
    got = result.get("decision")
    ci = reported_interval(result)
    if ci is None:
        return (f"your decide said {got!r} without an interval (ci: [lo, hi] of the speedup): "
                "each outcome is defined by where the whole interval lies; " + otherwise)
    lo, hi = ci
    says = side(ci, min_gain)
    if says != got:
        text = (f"your own interval [{lo:.3f}, {hi:.3f}] says {says!r} (min_gain "
                f"{min_gain:g}), yet you said {got!r}")
        try:
            ratio = float(result.get("ratio"))
        except (TypeError, ValueError):
            ratio = math.nan
        beyond = {"accept": ratio > 1 + min_gain, "slower": ratio < 1 / (1 + min_gain)}
        if beyond.get(got, False):
            return (text + f": your point estimate {ratio:.3f} lies "
                    f"{'above 1 + min_gain' if got == 'accept' else 'below 1 / (1 + min_gain)'}"
                    ", not the whole interval; decide by where the whole interval lies, not "
                    "just the point estimate")
        return text + ": decide by where the whole interval lies"
    a, b = own["ci"]
    half, own_half = math.log(hi / lo) / 2, math.log(b / a) / 2
    if half < own_half * 0.9 or half > own_half * 1.1:
        cause = width_cause(before, after, half, own)
        if half > own_half * 1.5 and own.get("method") == "paired rounds" and \
                "half-width" not in cause:
            return (f"your interval is {half / own_half:.2g}x wider (in log) than the one "
                    f"these {own['n_rounds']} rounds give paired: the drift a round shares "
                    "cancels in its before/after ratio")
        return cause
    centre, own_centre = math.sqrt(lo * hi), math.sqrt(a * b)
    if abs(math.log(centre / own_centre)) > 0.5 * own_half:
        return (f"your interval is centred on {centre:.3f}, the rounds' on {own_centre:.3f} "
                "(the speedup, time before / time after, from each round's median): "
                + otherwise)
    return otherwise

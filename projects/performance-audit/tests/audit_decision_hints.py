"""performance-audit stage 4: the hint for a ``decide`` whose decision is not the one the
checker's own statistics give, chosen by what the learner's own result shows: where its
reported interval lies against the outcome it said, and, when its interval itself is in
the wrong place, how its width or centre compares with the rounds' interval of the same
records (a width equal to a classic slip's on the same rounds, which the reference
computes, is named as such). Numbers and sentences only: no statistic is computed here."""

from __future__ import annotations

import math


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


def width_cause(half: float, own: dict) -> str:
    """What a log half-width ``half`` unlike the checker's is: the classic slip whose
    width on the same rounds it equals to 0.5% (``own["widths"]``, the reference's), else
    how much narrower or wider it is."""
    rounds = own.get("n_rounds") or 0
    own_half = math.log(own["ci"][1] / own["ci"][0]) / 2
    how = f"{own_half / half:.2g}x narrower" if half < own_half else \
        f"{half / own_half:.2g}x wider"
    widths = own.get("widths") or []
    if widths:
        width, cause = min(widths, key=lambda c: abs(math.log(half / c[0])))
        if math.isclose(half, width, rel_tol=0.005):
            return cause
    if own.get("method") == "paired rounds" and rounds >= 3:
        return (f"your interval is {how} (in log) than the 95% interval of these {rounds} "
                "rounds: its width must carry the spread of the rounds, each round one "
                "piece of evidence, at the confidence asked")
    return (f"your interval is {how} (in log) than the 95% interval these records give; "
            "its width must carry the spread of the evidence, which is the rounds")


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
    if not own or not own.get("ci"):  # no reference interval to set it against
        return otherwise
    a, b = own["ci"]
    half, own_half = math.log(hi / lo) / 2, math.log(b / a) / 2
    if half < own_half * 0.9 or half > own_half * 1.1:
        cause = width_cause(half, own)
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


def boundary_hint(result: dict, want: str, min_gain: float) -> str:
    """Where the learner's own interval lies between a contract boundary and a nearby
    one it seems to use instead (1 - min_gain for 1 / (1 + min_gain), 1 / (1 - min_gain)
    for 1 + min_gain, 1 for either), the hint names both boundaries; else ""."""
    ci = reported_interval(result)
    got = result.get("decision")
    if ci is None or got == want:
        return ""
    lo, hi = ci
    up, down = 1 + min_gain, 1 / (1 + min_gain)
    where = f"your interval [{lo:.4f}, {hi:.4f}] (min_gain {min_gain:g})"
    if got == "reject" and want == "slower" and hi < down:
        near = 1 - min_gain if min_gain < 1 else 0.0
        if hi >= near:
            return (f"{where} lies wholly below 1 / (1 + min_gain) = {down:.4f} but not "
                    f"below 1 - min_gain = {near:.4f}, and you said 'reject': 'slower' is "
                    "defined by 1 / (1 + min_gain), the inverse of the gain boundary")
    if got == "reject" and want == "accept" and lo > up:
        if min_gain < 1 and lo <= 1 / (1 - min_gain):
            return (f"{where} lies wholly above 1 + min_gain = {up:.4f} but not above "
                    f"1 / (1 - min_gain) = {1 / (1 - min_gain):.4f}, and you said "
                    "'reject': 'accept' is defined by 1 + min_gain")
    if got == "slower" and want == "reject" and down <= lo and hi < 1:
        return (f"{where} lies below 1 but not wholly below 1 / (1 + min_gain) = "
                f"{down:.4f}, and you said 'slower': 'slower' means slower by more than "
                "the minimum gain")
    if got == "accept" and want == "reject" and 1 < lo and hi <= up:
        return (f"{where} lies above 1 but not wholly above 1 + min_gain = {up:.4f}, and "
                "you said 'accept': 'accept' means faster by more than the minimum gain")
    return ""

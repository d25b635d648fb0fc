"""The sentences notebooks print about their evidence: each claim is a function of the
evidence, and states the condition it rests on; where the evidence does not support the
claim, the function returns the other reading instead.

Each function takes plain numbers (seconds, ratios, intervals as ``(lo, hi)`` or None)
and returns one sentence (a ``str``); ``roofline_verdict`` returns a short label. None
raises for a verdict; bad input (a non-positive time, an interval with ``lo > hi``)
raises ValueError naming the argument. Ratios print with three significant digits
(``ratio_text``, ``interval_text``), the same style as
``coursekit.measure.verdict.RatioEvidence.interval_text``.

Stdlib only, so tests/test_notebook_claims.py feeds each claim the figures an executed
notebook printed and reads the sentence back.
"""

from __future__ import annotations

import math

# A ratio between these two reads "about the same" (one side within 25% of the other).
ABOUT_SAME = (0.8, 1.25)
# An interval whose hi / lo exceeds this cannot tell agreement from disagreement.
RESOLVING_SPAN = 2.0


def _positive(name: str, value: float) -> float:
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return value


def _interval(name: str, ci) -> tuple[float, float] | None:
    if ci is None:
        return None
    lo, hi = (float(v) for v in ci)
    if not lo <= hi:
        raise ValueError(f"{name} must be (lo, hi) with lo <= hi, got {ci!r}")
    return lo, hi


def ratio_text(x: float, unit: str = "x") -> str:
    """``x`` with three significant digits and ``unit``: 30.8x, 0.404x, 1.15x."""
    return f"{float(x):.3g}{unit}"


def interval_text(ci, unit: str = "x") -> str:
    """``[lo, hi]`` with three significant digits each, or "no interval" for None."""
    ci = _interval("ci", ci)
    if ci is None:
        return "no interval"
    return f"[{ratio_text(ci[0], unit)}, {ratio_text(ci[1], unit)}]"


def estimate_text(ratio: float, ci, unit: str = "x") -> str:
    """A ratio and its interval: ``30.8x [12.6x, 75.5x]``."""
    return f"{ratio_text(ratio, unit)} {interval_text(ci, unit)}"


def _about_same(r: float) -> bool:
    return ABOUT_SAME[0] <= r <= ABOUT_SAME[1]


# ---------------------------------------------------------------------------------------
# 01: the cost of a host read
# ---------------------------------------------------------------------------------------

def host_read_cost(ratio: float, ci, n_rounds: int, *, small: float = 0.15) -> str:
    """What a host read costs beside ``block_until_ready``, from interleaved rounds.

    Evidence: ``ratio`` = host_read / block_until_ready (the paired rounds' median) and
    ``ci``, an interval of it over ``n_rounds`` or the rounds' range (smallest to
    largest). A cost is claimed only when the interval lies above 1; "nearly free" only
    when the interval holds 1 and its upper end is within ``small`` (a fraction) of it; an
    interval below 1 is named as the machine's drift (waiting for the same work cannot be
    faster); otherwise too wide to say."""
    _positive("ratio", ratio)
    ci = _interval("ci", ci)
    shown = f"host_read / block_until_ready {estimate_text(ratio, ci)} over {n_rounds} rounds"
    if ci is None:
        return f"{shown}: fewer than 2 rounds, no interval: nothing is claimed about the cost"
    lo, hi = ci
    if lo > 1:
        size = "a small" if hi - 1 <= small else "a real"
        return (f"{shown}: the read adds {lo - 1:.0%} to {hi - 1:.0%}, {size} cost the "
                "rounds resolve")
    if hi < 1:
        return (f"{shown}: the read measured faster, which waiting for the same work cannot "
                "be: drift of this machine between the two sides, not a saving; the read's "
                "cost is not resolved")
    if hi - 1 <= small:
        return (f"{shown}: no cost detected, at most {hi - 1:+.0%} (nearly free here: "
                "np.asarray of a ready CPU array is a zero-copy view)")
    return (f"{shown}: the interval holds 1 but reaches {hi - 1:+.0%}: too wide to call the "
            "read free or costly; measure more rounds")


# ---------------------------------------------------------------------------------------
# 02: the completion wait against the execution it waits for
# ---------------------------------------------------------------------------------------

def wait_vs_execution(wait_s: float, execution_s: float) -> str:
    """How long the completion wait lasted beside the execution threads' time in the
    same region (medians over steps). "About as long" only within ``ABOUT_SAME``; a longer
    wait holds time no execution event ran; a shorter one means work ran during
    dispatch."""
    wait_s, execution_s = _positive("wait_s", wait_s), _positive("execution_s", execution_s)
    r = wait_s / execution_s
    head = (f"the wait lasted {ratio_text(r)} the execution ({wait_s * 1e3:.3f} ms vs "
            f"{execution_s * 1e3:.3f} ms, medians)")
    if _about_same(r):
        return f"{head}: about as long as the work still running when dispatch returned"
    if r > 1:
        return (f"{head}: longer than the work it waited for; the rest is time no execution "
                "event ran (the execution thread waiting for a core, the hand-off between "
                "threads, the profiler's own cost)")
    return (f"{head}: shorter than the work; part of the work ran before dispatch returned, "
            "so the wait holds only its tail")


# ---------------------------------------------------------------------------------------
# 03: the roofline
# ---------------------------------------------------------------------------------------

def roof_fix(level: str, bandwidth: float, faults: float, predicted_s: float,
             measured_s: float) -> str:
    """The fixed roof's prediction of the validation workload, with that workload's own
    page faults per call (``faults``, from the same measurement as ``measured_s``). "Nothing
    else was measured" only when it paid no fault."""
    _positive("predicted_s", predicted_s)
    _positive("measured_s", measured_s)
    paid = ("paid no page fault per call, so nothing but the op was measured"
            if faults == 0 else
            f"paid {faults:.0f} page faults per call, a cost the roof does not model")
    return (f"fixed: roof {bandwidth / 1e9:.1f} GB/s ({level}, in place); the workload {paid}; "
            f"predicted {predicted_s * 1e3:.2f} ms, measured {measured_s * 1e3:.2f} ms: "
            f"measured / predicted = {measured_s / predicted_s:.2f}")


ROOFLINE_VERDICTS = ("below the max", "within the bounds", "above: roofs' spread",
                     "above: page faults", "above: not modelled")


def roofline_verdict(measured_s: float, lower_s: float, upper_s: float,
                     upper_median_s: float, fault_s: float) -> str:
    """Where a measured median lies against the roofline's two times: ``lower_s`` (max of
    compute and memory time, perfect overlap) and ``upper_s`` (their sum, no overlap),
    both at the fastest-sample roofs, and ``upper_median_s`` (the sum at the roofs'
    median samples). ``fault_s``: the page faults the call paid, in seconds (faults per
    call times the cost of one fault measured on this machine). One of
    ``ROOFLINE_VERDICTS``: above the sum but within the median sum is the roofs' own
    spread; above that but within it plus ``fault_s`` is the page faults; beyond, a cost
    the roofs do not model. Below the max says the roofs understate this call's speed."""
    for name, v in (("measured_s", measured_s), ("lower_s", lower_s), ("upper_s", upper_s),
                    ("upper_median_s", upper_median_s)):
        _positive(name, v)
    if not fault_s >= 0:
        raise ValueError(f"fault_s must be >= 0 seconds, got {fault_s!r}")
    if measured_s < lower_s:
        return "below the max"
    if measured_s <= upper_s:
        return "within the bounds"
    if measured_s <= upper_median_s:
        return "above: roofs' spread"
    if fault_s > 0 and measured_s <= upper_median_s + fault_s:
        return "above: page faults"
    return "above: not modelled"


def prediction_gap(predicted_s: float, no_overlap_s: float, measured_s: float,
                   device_s: float | None, flops: float, peak_flops: float, *,
                   close: float = 0.10) -> str:
    """A workload's roofline prediction beside its measurement, the gap explained from the
    trace: ``predicted_s`` (max of compute and memory time), ``no_overlap_s`` (their sum),
    ``measured_s`` (synchronised median per call), ``device_s`` (the time the device's
    operations ran per call, from the trace's device lines; None when the trace has none),
    ``flops`` of one call and the measured ``peak_flops``.

    Agreement is claimed only when measured / predicted lies within ``close`` of 1. A gap is
    split into the host's part (measured minus device time: dispatch and the wait's return)
    and the device's part (device time against the prediction: its operations' attained
    rate against the peak); without device lines only the ratio is stated."""
    for name, v in (("predicted_s", predicted_s), ("no_overlap_s", no_overlap_s),
                    ("measured_s", measured_s), ("flops", flops), ("peak_flops", peak_flops)):
        _positive(name, v)
    ratio = measured_s / predicted_s
    head = (f"measured / predicted = {ratio_text(ratio)} "
            f"({measured_s * 1e3:.3f} ms against {predicted_s * 1e3:.3f} ms)")
    if abs(ratio - 1) <= close:
        verdict = f"within {close:.0%}: the measured roofs predict this workload"
    elif ratio < 1:
        verdict = ("faster than the roofs allow: a roof was measured low, or the compiler's "
                   "counts include work the run did not do")
    elif measured_s <= no_overlap_s:
        verdict = ("slower than full overlap, within the no-overlap sum "
                   f"({no_overlap_s * 1e3:.3f} ms): compute and memory traffic overlapped "
                   "only in part")
    else:
        verdict = f"slower than even the no-overlap sum ({no_overlap_s * 1e3:.3f} ms)"
    if device_s is None:
        return f"{head}: {verdict}; no device lines in this trace to split the gap"
    _positive("device_s", device_s)
    host_s = max(0.0, measured_s - device_s)
    rate = flops / device_s
    return (f"{head}: {verdict}. Of each call, the device ran operations for "
            f"{device_s * 1e3:.3f} ms ({ratio_text(device_s / predicted_s)} the prediction; "
            f"{rate / 1e12:.1f} TFLOP/s = {rate / peak_flops:.0%} of the measured peak) and "
            f"the host's dispatch and wait took the other {host_s * 1e3:.3f} ms "
            f"({host_s / measured_s:.0%} of the call)")


def roofline_summary(verdicts: dict[str, str], roof_samples: int) -> str:
    """One sentence on the sum of the roofs as an upper bound, from the per-workload
    verdicts of ``roofline_verdict``: it held for the workloads within the bounds; for the
    others it names which reading explains each (the roofs are the fastest of
    ``roof_samples`` samples, the placements medians)."""
    unknown = set(verdicts.values()) - set(ROOFLINE_VERDICTS)
    if unknown:
        raise ValueError(f"verdicts must be among {ROOFLINE_VERDICTS}, got {sorted(unknown)}")
    n = len(verdicts)
    held = [k for k, v in verdicts.items() if v in ("within the bounds", "below the max")]
    fast = [k for k, v in verdicts.items() if v == "below the max"]
    above = {v: [k for k, w in verdicts.items() if w == v] for v in ROOFLINE_VERDICTS[2:]}
    below = ("" if not fast else
             f"; {len(fast)} measured below the max of the two ({', '.join(fast)}): there "
             "the roofs understate this machine (measured at a slower moment, or a roof "
             "below the level's real rate), so the max is no lower bound for them")
    if len(held) == n:
        return (f"the sum of the roofs bounded all {n} workloads from above" + below)
    parts = []
    spread = above["above: roofs' spread"]
    if spread:
        parts.append(f"{len(spread)} within the sum at the roofs' median samples (the roofs "
                     f"are the fastest of {roof_samples} samples, each placement a median: "
                     f"the roofs' own spread) ({', '.join(spread)})")
    if above["above: page faults"]:
        parts.append(f"{len(above['above: page faults'])} within that plus their page "
                     f"faults at this machine's cost per fault, which the roofs do not model "
                     f"({', '.join(above['above: page faults'])})")
    if above["above: not modelled"]:
        parts.append(f"{len(above['above: not modelled'])} above even that, with a cost "
                     f"neither roof models, such as the fixed cost of each call "
                     f"({', '.join(above['above: not modelled'])})")
    return (f"the sum of the roofs is an upper bound only for a call that pays nothing but "
            f"its arithmetic and its level's traffic at the roofs' own rates: it held for "
            f"{len(held)} of {n} workloads; of the rest, " + "; ".join(parts) + below)


# ---------------------------------------------------------------------------------------
# 07 and 08: traces beside timings, contracts, first calls, predictions, decisions
# ---------------------------------------------------------------------------------------

def traced_vs_timed(traced_before_s: float, traced_after_s: float, timed_before_s: float,
                    timed_after_s: float, ratio: float, ci) -> str:
    """The speedup a trace shows beside the timed one. Evidence: one traced call (or the
    mean of a few traced steps) per side, the timed medians per side, and the timed
    decision's ``ratio`` and interval ``ci``. The traced ratio is the timed medians'
    ratio times (before's inflation / after's inflation), each inflation traced / timed;
    "agree" only when the traced ratio lies inside an interval narrower than
    ``RESOLVING_SPAN``; inside a wider one is no test at all."""
    tb, ta = _positive("traced_before_s", traced_before_s), _positive("traced_after_s",
                                                                     traced_after_s)
    mb, ma = _positive("timed_before_s", timed_before_s), _positive("timed_after_s",
                                                                   timed_after_s)
    ci = _interval("ci", ci)
    traced_ratio, ib, ia = tb / ta, tb / mb, ta / ma
    head = (f"speedup by the trace {ratio_text(traced_ratio)}, by the timed rounds "
            f"{estimate_text(ratio, ci)}; under the profiler the before call took "
            f"{ratio_text(ib)} its timed median and the after call {ratio_text(ia)}")
    inflation = ("" if _about_same(ib) and _about_same(ia) else
                 f"; the traced ratio is the timed medians' ratio {ratio_text(mb / ma)} times "
                 f"{ratio_text(ib)} / {ratio_text(ia)}: the profiler's cost is not "
                 "proportional to the work, so a traced time is not a timed one")
    if ci is None:
        return head + inflation + "; no timed interval, so nothing is compared"
    lo, hi = ci
    span = hi / lo
    if not lo <= traced_ratio <= hi:
        return (head + inflation + "; the traced ratio lies outside the timing's interval: "
                "the decision rests on the timed rounds, never on a traced call")
    if span > RESOLVING_SPAN:
        return (head + inflation + f"; the timing's interval spans {span:.3g}x, so the traced "
                "ratio lying inside it is no agreement, only no contradiction at this "
                "resolution")
    return (head + inflation + f"; the traced ratio lies inside the timing's interval (which "
            f"spans {span:.3g}x): they agree at this resolution")


def contract_differences(errors: dict[str, float], rtol: float, atol: float) -> str:
    """What the largest absolute differences between two versions' outputs say
    (``errors``: name -> max |a - b|, over every shape checked). Bitwise equal when
    every difference is exactly 0 (the contract does not ask for it: a reordered float32
    reduction may differ in its last bits); otherwise not bitwise equal, and whether the
    largest difference is within ``atol`` (the contract's absolute floor; its rtol test
    is the checker's)."""
    if not errors:
        raise ValueError("errors must name at least one output")
    worst_name = max(errors, key=errors.get)
    worst = float(errors[worst_name])
    if worst == 0:
        return ("every difference is exactly 0: bitwise equal on these inputs (the same "
                "reductions in the same order here); the contract asks only for rtol "
                f"{rtol:g}, atol {atol:g}, since a reordered float32 reduction may differ in "
                "its last bits")
    return (f"not bitwise equal: the largest difference is {worst:.2g} ({worst_name}), "
            + ("within" if worst <= atol else "above")
            + f" the contract's atol {atol:g} (rtol {rtol:g}): a reordered float32 reduction "
            "differs in its last bits")


def first_call_claim(slow_first_s: float, fast_first_s: float, slow_warm_s: float,
                     fast_warm_s: float) -> str:
    """The fixed version's first call (compile included) beside the slow version's first
    and warmed calls, and the one-call ratio beside the warmed one. Says "longer" or
    "shorter" as measured, and how far the one-call ratio is from the warmed ratio."""
    sf, ff = _positive("slow_first_s", slow_first_s), _positive("fast_first_s", fast_first_s)
    sw, fw = _positive("slow_warm_s", slow_warm_s), _positive("fast_warm_s", fast_warm_s)
    one, warm = sf / ff, sw / fw
    side = "longer" if ff > sf else "shorter"
    return (f"the fix's first call took {ff * 1e3:.0f} ms: {ratio_text(ff / fw)} its own "
            f"warmed call ({fw * 1e3:.1f} ms; the rest is its compile) and {side} than the slow "
            f"version's first call ({sf * 1e3:.0f} ms, {ratio_text(ff / sw)} a warmed slow "
            f"call); one call each gives {ratio_text(one)}, the warmed calls "
            f"{ratio_text(warm)}: the one-call figure is off by {ratio_text(warm / one)}")


def amdahl_ceiling_claim(phase: str, share: float, ceiling: float, traced_call_s: float,
                         timed_call_s: float) -> str:
    """Amdahl's ``ceiling`` for removing ``phase`` (its ``share`` of the traced call; the
    ceiling as the learner's ``limiting_operation`` gives it), with the condition it rests
    on: a share of the traced call is a share of the untraced call only when the profiler
    left the call about as long as its timed median (``ABOUT_SAME``); otherwise the
    ceiling is no bound on what removing the phase measures."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be in [0, 1], got {share!r}")
    tr, tm = _positive("traced_call_s", traced_call_s), _positive("timed_call_s", timed_call_s)
    inflation = tr / tm
    head = (f"removing {phase} ({share:.1%} of the traced call) gives at most "
            f"{ratio_text(ceiling)} by Amdahl on the traced call ({tr * 1e3:.0f} ms traced, "
            f"{tm * 1e3:.0f} ms timed: {ratio_text(inflation)})")
    if _about_same(inflation):
        return head + "; the profiler left the call about as long, so the share holds untraced"
    return (head + "; the traced call is not the length of a timed one (the profiler's own "
            "cost, which is not even across phases since they hold different numbers of "
            "events, and the load moving between the two measurements), so the traced share "
            "is not the untraced call's share: a measured gain can pass this ceiling")


def collective_prediction(cost_s: float, ci_s, predicted: float,
                          predicted_upper: float) -> str:
    """The step speedup predicted from a collective's cost measured alone (``cost_s``,
    interval ``ci_s`` in seconds): the point prediction only when the interval lies above
    0; when it holds 0 the saving is not resolved and the prediction is a range from no
    gain (1x) to ``predicted_upper``."""
    ci_s = _interval("ci_s", ci_s)
    if ci_s is None:
        return (f"predicted {ratio_text(predicted)} from a cost of {cost_s * 1e6:+.1f} us "
                "with no interval: not resolved, a guess")
    span = f"[{ci_s[0] * 1e6:+.1f}, {ci_s[1] * 1e6:+.1f}] us"
    if ci_s[0] > 0:
        return (f"predicted {ratio_text(predicted)} (at most {ratio_text(predicted_upper)}) "
                f"from the collective's cost {cost_s * 1e6:+.1f} us, interval {span}")
    return (f"predicted between 1x and {ratio_text(predicted_upper)}: the collective's cost "
            f"interval {span} holds 0, so no saving is resolved (the point figure "
            f"{ratio_text(predicted)} rests on nothing this CPU resolved)")


def speedup_trend(sweep: dict) -> str:
    """How the speedup moves with the batch, from ``sweep`` (batch -> {"ratio", "ci"}).
    A direction is claimed only when the smallest and largest batch's intervals do not
    overlap and every step's point figure moves that way; otherwise the points are shown
    with the condition that stops a claim (overlapping intervals, or no monotone order)."""
    order = sorted(sweep)
    points = ", ".join(f"{b}: {estimate_text(sweep[b]['ratio'], sweep[b]['ci'])}"
                       for b in order)
    if len(order) < 2:
        return f"the speedup was measured at one size ({points})"
    ratios = [float(sweep[b]["ratio"]) for b in order]
    steps = [b - a for a, b in zip(ratios, ratios[1:])]
    first, last = (_interval("ci", sweep[b]["ci"]) for b in (order[0], order[-1]))
    if all(d > 0 for d in steps):
        direction, apart = "rises", first is not None and last is not None \
            and first[1] < last[0]
    elif all(d < 0 for d in steps):
        direction, apart = "falls", first is not None and last is not None \
            and last[1] < first[0]
    else:
        return f"the speedup has no monotone trend with the batch ({points})"
    if apart:
        return (f"the speedup {direction} with the batch: the largest batch's interval "
                f"lies clear of the smallest's ({points})")
    return (f"the point figures {direction[:-1]} with the batch, but the smallest and "
            f"largest batch's intervals overlap: no trend is resolved ({points})")


def readiness_recommendation(batch: int, decision: str, sweep: dict) -> str:
    """The recommendation a readiness review states, from the decision at ``batch``
    (``decision``: "accept", "reject" or "slower") and the decisions across batch sizes
    (``sweep``: batch -> {"decision", "ratio", "ci"}). Clearly slower anywhere outweighs
    simplicity; keeping the change for its code alone is offered only when no size was
    clearly slower."""
    for d in [decision, *(v["decision"] for v in sweep.values())]:
        if d not in ("accept", "reject", "slower"):
            raise ValueError(f"decisions must be accept, reject or slower, got {d!r}")
    slower = {b: v for b, v in sweep.items() if v["decision"] == "slower"}
    helped = sorted(b for b, v in sweep.items() if v["decision"] == "accept")
    where_slower = "; ".join(f"batch {b}: {estimate_text(v['ratio'], v['ci'])}"
                             for b, v in sorted(slower.items()))
    if decision == "slower" or slower:
        return (f"REJECT: clearly slower ({where_slower or f'at batch {batch}'}); do not keep "
                "it, not even to simplify the code, until that is understood")
    if decision == "accept":
        return (f"ACCEPT at the batch sizes where the interval cleared the minimum gain "
                f"({helped or [batch]}), on this machine only")
    return (f"REJECT as an optimisation: no gain of the minimum size detectable at batch "
            f"{batch}" + (f" (clear only at {helped})" if helped else "")
            + "; no size was clearly slower, so keeping it for simpler code is a choice the "
            "timing does not oppose")

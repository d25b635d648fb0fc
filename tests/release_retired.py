"""Learner-side code that computed part of a stage's answer and has left the learner's
copy (issue 50, item 2), as it shipped: the release scan (tests/release_scan.py) counts
each one as an answer, so one pasted back into any shipped file, renamed too, is found.

* ``coursekit/measure/bandwidth.py: timed_with_faults``: a synchronised median of any
  jitted call with the minor page faults it paid, the core of performance-audit stage 2's
  ``measure_bandwidth``. Notebook 03 times with the learner's own ``time_fn`` now
  (``coursekit.notebook.timed_by_yours``); nothing else used it.
* ``coursekit/measure/verdict.py: interval_of``, written by hand: Student's t on the mean
  of log ratios, the core of stage 4's ``decide``. The checkers' verdicts take scipy's
  one-sample t interval now (``scipy.stats.ttest_1samp(...).confidence_interval``), which
  tests/test_verdict.py holds to this one's figures.
"""

from __future__ import annotations

# "retired/<module>:<function>" -> its source as it shipped
RETIRED = {
    "retired/bandwidth:timed_with_faults": '''def timed_with_faults(fn, args: tuple, iters: int, *, donate_first: bool = False
                      ) -> tuple[float, float]:
    """Median synchronised seconds and median minor page faults per call of ``fn(*args)``
    over ``iters`` samples, its first (compiling) call apart. ``donate_first``: ``fn``
    donates its first argument, so each call is given the previous call's output there
    (notebook 03 validates the roof with it and places workloads on it)."""
    out = jax.block_until_ready(fn(*args))
    seconds, faults = [], []
    for _ in range(iters):
        if donate_first:
            args = (out, *args[1:])
        before = minor_faults()
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        seconds.append(time.perf_counter() - start)
        faults.append(minor_faults() - before)
    return float(statistics.median(seconds)), float(statistics.median(faults))
''',
    "retired/verdict:interval_of": '''def interval_of(log_ratios: list[float], confidence: float) -> tuple[float, float] | None:
    """Student-t interval of the mean log ratio, exponentiated (None below 2 rounds)."""
    n = len(log_ratios)
    if n < 2:
        return None
    d = np.asarray(log_ratios, dtype=float)
    half = t_quantile(confidence, n - 1) * float(np.std(d, ddof=1)) / math.sqrt(n)
    return math.exp(d.mean() - half), math.exp(d.mean() + half)
''',
}

"""A chip's roofs as notebook 03 measures them on an accelerator: a learner's figure set
beside the plain-JAX ceiling of the same size measured in the same run, the vendor's figure
beside both. (A workload's time is then predicted with the learner's own ``roofline``.)

    rec, got = beside(matmul_ceiling, lambda: measure_peak_flops(...),
                      iters=5, rounds=3)        # the ceiling's rounds, the call between them
    judged(best_figure, rec["best"], spec)      # ratio to the ceiling, within 90%, of spec

Measured on a TPU v5e (JAX 0.10.2) the plain-JAX ceilings were 175 / 185 / 190 TFLOP/s for
bfloat16 products of 4096 / 8192 / 16384 (spec 197), 738 / 752 GB/s for a read-only sum
over 1 / 4 GiB and 651 / 656 GB/s for ``x * 2`` in place (spec 819).
"""

from __future__ import annotations

WITHIN = 0.9  # a measured roof should reach this share of the ceiling beside it


def beside(ceiling, call, *, iters: int, rounds: int) -> tuple[dict, list]:
    """The ceiling's own record (a plain-JAX ceiling of the course's instructor-only
    code) with ``call()`` made after each of its ``rounds``
    rounds (both see the machine in the same state): the ceiling's record and what each
    call returned. The ceiling's arrays are released afterwards."""
    got: list = []
    try:
        rec = ceiling.measure(iters=iters, rounds=rounds,
                              between=lambda _round: got.append(call()))
    finally:
        ceiling.close()
    return rec, got


def judged(figure: float, ceiling: float, spec: float | None = None) -> dict:
    """A measured roof against the ceiling measured beside it (``ratio``, ``within``:
    at least ``WITHIN`` of it) and against the vendor's figure (``of_spec``, None when
    the device kind has none)."""
    if not (figure > 0 and ceiling > 0):
        raise ValueError(f"figure and ceiling must be positive, got {figure!r}, {ceiling!r}")
    ratio = figure / ceiling
    return {"figure": figure, "ceiling": ceiling, "ratio": ratio, "within": ratio >= WITHIN,
            "spec": spec, "of_spec": figure / spec if spec else None}


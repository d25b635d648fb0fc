"""Stored outputs for fixed public inputs (numbers, not code), stage 2's references in a
learner's copy: a real ``jax.profiler`` trace with its region summary, matmul and fused
program costs as this JAX's CPU compiler counts them, square-matmul FLOP counts by size,
and roofline cases with their figures. ``tests/performance_audit_expected.py`` in the
course writes ``expected/stage2.json`` with the course's own code; a test there checks
that the stored file equals a fresh generation. Where the instructor grades, the checks
add live cases on inputs drawn per run (``coursekit.checking.graded``)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

FOLDER = Path(__file__).resolve().parent / "expected"
STORED = FOLDER / "stage2.json"
TRACE = FOLDER / "mlp_step.trace.json.gz"
# the public inputs: fixed seeds of the generators below
ROOFLINE_SEEDS = (11, 23, 37)
MATMUL_SHAPES = {"float32": (37, 211, 95), "bfloat16": (129, 17, 263)}
FUSED_SHAPE, FUSED_SEED = (173, 291), 5
SQUARE_SIZES = range(40, 460)


@lru_cache(maxsize=1)
def stored() -> dict:
    return json.loads(STORED.read_text())


def fused_input(shape=FUSED_SHAPE, seed=FUSED_SEED) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def roofline_cases(rng) -> list[dict]:
    """The roofline inputs of one run (a seed's): caches, roofs and working sets placed
    around the ridge, by name order and by size, and bandwidths per level. Each case:
    {"kind", "args": [flops, nbytes, peak, bandwidth, working_set, caches]} plus, for
    "per_level", "rates" (each level's bandwidth)."""
    caches = {"L1": 48 * 2**10, "L2": int(rng.integers(1, 4)) * 2**20,
              "L3": int(rng.integers(8, 64)) * 2**20}
    peak, bw = float(rng.uniform(5e10, 5e11)), float(rng.uniform(1e10, 5e10))
    ridge = peak / bw  # where the cases are placed: the roofs' inputs, not an output
    cases = []
    for factor, working_set in ((0.25, caches["L3"] * 4), (8.0, caches["L1"] * 2),
                                (0.5, caches["L1"] // 2), (3.0, caches["L3"] - 1),
                                (0.5, caches["L2"])):  # exactly full: it fits
        nbytes = float(rng.uniform(1e6, 1e9))
        cases.append({"kind": "roofs", "intensity_x_ridge": factor,
                      "args": [factor * ridge * nbytes, nbytes, peak, bw, working_set,
                               dict(caches)]})
    with_hbm = {"HBM": 64 * 2**30, **caches}  # a level whose name sorts first, the largest
    for working_set in (caches["L1"] // 2, caches["L3"] * 4, with_hbm["HBM"] + 1):
        cases.append({"kind": "by_size", "args": [1e9, 1e8, peak, bw, working_set,
                                                  dict(with_hbm)]})
    per_level = {name: float(rng.uniform(1e10, 2e11)) for name in (*caches, "DRAM")}
    for working_set in (caches["L1"] // 3, caches["L2"] - 1, caches["L3"] * 5):
        nbytes = float(rng.uniform(1e6, 1e9))
        cases.append({"kind": "per_level", "rates": dict(per_level),
                      "args": [0.5 * nbytes, nbytes, peak, dict(per_level), working_set,
                               dict(caches)]})
    return cases

"""Inspectors every project may use (``coursekit.workloads.inspectors``): the learner
process's global random state. Self-reported, like every inspector's answer."""

from __future__ import annotations

import hashlib
import random

import numpy as np


def seed_globals(seed: int) -> str:
    """Seed numpy's and Python's global generators; returns their state digest."""
    np.random.seed(int(seed))
    random.seed(int(seed))
    return global_state_digest()


def global_state_digest() -> str:
    """A digest of numpy's and Python's global generator states."""
    state = np.random.get_state()
    h = hashlib.sha256(state[1].tobytes())
    h.update(repr((state[0], *state[2:], random.getstate())).encode())
    return h.hexdigest()


INSPECTORS = {
    "common/seed_globals": seed_globals,
    "common/global_state_digest": global_state_digest,
}

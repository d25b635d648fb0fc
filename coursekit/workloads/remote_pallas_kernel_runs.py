"""What the pallas-kernel checker runs in the learner process to follow the learner's
*own* calls (``coursekit.workloads.inspectors``), beside ``remote_pallas_kernel``:

- ``pallas-kernel/run_observed``: the learner's ``run_softmax`` run once while every
  ``pallas_call`` it traces is recorded (grid, blocks, interpret flag), so its declared
  block and grid are compared with the kernel that ran, not with one the checker built;
- ``pallas-kernel/sweep_watched``: the learner's ``sweep`` with a probed kernel whose
  every call also records when its output was last seen unfinished (a thread that polls
  ``is_ready()``, never waits), so a first call timed before its output was ready shows;
- the workloads built from the checker's own softmax live with it, instructor-only
  (``coursekit.instructor.remote_pallas_kernel``).

Every answer is self-reported; ``projects/pallas-kernel/tests`` lists each in
``SELF_REPORTED`` with what it is cross-checked against there.
"""

from __future__ import annotations

import threading
import time

import jax

from coursekit.workloads.remote_pallas_kernel import settle

# ---------------------------------------------------------------------------------------
# run_softmax, observed
# ---------------------------------------------------------------------------------------


def _site_of(params: dict) -> dict:
    mapping = params.get("grid_mapping")
    grid = [int(g) if isinstance(g, int) else -1 for g in getattr(mapping, "grid", ())]
    blocks = [[(lambda s: s if isinstance(s, int) else None)(getattr(d, "block_size", d))
               for d in bm.block_shape] for bm in getattr(mapping, "block_mappings", ())]
    interpret = params.get("interpret", False)
    return {"grid": grid, "block_shapes": blocks,
            "interpret": bool(interpret) and interpret is not None}


def run_observed(run, x, **kwargs) -> dict:
    """``run(x, **kwargs)`` (the learner's ``run_softmax``) with JAX's caches cleared first,
    so every ``pallas_call`` it runs is traced, and each traced one recorded:
    {"result": what run returned, "sites": [{"grid", "block_shapes", "interpret"}]}."""
    from jax._src.pallas import pallas_call as module
    primitive = module.pallas_call_p
    sites: list[dict] = []
    original = primitive.bind

    def bind(*args, **params):
        sites.append(_site_of(params))
        return original(*args, **params)

    jax.clear_caches()
    primitive.bind = bind
    try:
        result = run(x, **kwargs)
    finally:
        del primitive.bind  # the class's method again
    return {"result": result, "sites": sites}


# ---------------------------------------------------------------------------------------
# sweep, watched
# ---------------------------------------------------------------------------------------

class _Watch(threading.Thread):
    """Polls ``is_ready()`` of ``out``'s arrays (a query that never waits) every
    millisecond until they are ready or ``stop`` is set; ``unready_at`` is the
    perf_counter stamp taken just *before* the last query that answered "not ready"
    (so the output was certainly unfinished then), None if none did."""

    def __init__(self, out):
        super().__init__(daemon=True)
        self.leaves = [leaf for leaf in jax.tree.leaves(out) if isinstance(leaf, jax.Array)]
        self.stop, self.unready_at = threading.Event(), None

    def run(self) -> None:
        while not self.stop.is_set():
            stamp = time.perf_counter()
            try:
                ready = all(leaf.is_ready() for leaf in self.leaves)
            except Exception:  # noqa: BLE001 - a deleted or donated array: nothing to tell
                return
            if ready:
                return
            self.unready_at = stamp
            time.sleep(0.001)


class WatchedProbe:
    """The kernel a sweep is given, with every call's group (shape, block_rows), entry,
    exit, compile count and ``unready_at`` (``_Watch``; read when the next call begins or
    the sweep returns)."""

    def __init__(self, fn):
        self.fn, self.calls, self._watches = fn, [], []

    def __call__(self, x, block_rows=8, **kwargs):
        from coursekit.measure.timing import count_compiles
        self.finish()
        entry = time.perf_counter()
        with count_compiles() as compiles:
            out = self.fn(x, block_rows=block_rows, **kwargs)
        exit_ = time.perf_counter()
        watch = _Watch(out)
        watch.start()
        self._watches.append(watch)
        self.calls.append({"shape": [int(s) for s in x.shape], "block_rows": int(block_rows),
                           "entry": entry, "exit": exit_, "compiles": int(compiles[0]),
                           "unready_at": None})
        return out

    def finish(self) -> None:
        """Stop the last call's watch and note what it saw."""
        if self._watches:
            watch = self._watches.pop()
            watch.stop.set()
            watch.join()
            self.calls[-1]["unready_at"] = watch.unready_at


def sweep_watched(sweep, kernel, shapes, blocks, **kwargs) -> dict:
    """The learner's ``sweep(shapes, blocks, kernel=probe, **kwargs)`` with ``kernel``
    watched (``WatchedProbe``): {"records", "calls", "returned"} as ``sweep_probed``,
    each call with its ``unready_at``."""
    settle()
    probe = WatchedProbe(kernel)
    records = sweep(shapes, blocks, kernel=probe, **kwargs)
    returned = time.perf_counter()
    probe.finish()
    return {"records": records, "calls": probe.calls, "returned": returned}


INSPECTORS = {
    "pallas-kernel/run_observed": run_observed,
    "pallas-kernel/sweep_watched": sweep_watched,
}



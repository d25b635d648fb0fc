"""What the sharded-training checker runs in the learner process to follow the learner's
*own* calls (``coursekit.workloads.inspectors``), beside ``remote_sharded_training``:

- ``sharded-training/call_watched``: a learner function called with JAX's caches cleared
  first and every ``shard_map`` it traces counted, so per-shard code is seen in the call
  that produced the result (a host computation with no ``shard_map`` shows as 0);
- ``sharded-training/call_guarded``: a learner function called under JAX's transfer
  guard for device-to-device copies, so a state built on one device and copied onto the
  mesh (what a multi-process run cannot do for a typed key) is named with the guard's
  own words;
- ``sharded-training/deleted``: which array leaves of a kept tree have been deleted (a
  jitted step that donates its inputs deletes the caller's arrays).

Every answer is self-reported; ``projects/sharded-training/tests`` lists each in
``SELF_REPORTED`` with what it is cross-checked against there.
"""

from __future__ import annotations

import jax

from coursekit.workloads.remote_sharded_training import call, unwrap

# What JAX's transfer guard says when it refuses a copy (jax 0.12: a JaxRuntimeError).
REFUSED = "Disallowed device-to-device transfer"


def call_watched(fn, *args, **kwargs) -> dict:
    """``call(fn, *args, **kwargs)`` with JAX's caches cleared first, so each ``shard_map``
    the call runs is traced, and counted: {"value": call's answer, "shard_maps": int}."""
    from jax._src import shard_map as module
    primitive = module.shard_map_p
    seen = [0]
    original = primitive.bind

    def bind(*a, **params):
        seen[0] += 1
        return original(*a, **params)

    jax.clear_caches()
    primitive.bind = bind
    try:
        value = call(fn, *args, **kwargs)
    finally:
        del primitive.bind  # the class's method again
    return {"value": value, "shard_maps": seen[0]}


def call_guarded(fn, *args, **kwargs) -> dict:
    """``call(fn, *args, **kwargs)`` under ``jax.transfer_guard_device_to_device(
    "disallow_explicit")``: {"value": call's answer}, or {"refused": the guard's message}
    when the call copied an array from one device to others. Any other error
    propagates (the bridge names it)."""
    jax.clear_caches()
    try:
        with jax.transfer_guard_device_to_device("disallow_explicit"):
            return {"value": call(fn, *args, **kwargs)}
    except Exception as err:  # noqa: BLE001 - only the guard's refusal is answered
        if REFUSED not in str(err):
            raise
        return {"refused": str(err)[:600]}


def deleted(tree) -> dict:
    """{keystr(path): True when that jax.Array leaf of a kept tree has been deleted}
    (``is_deleted()``: a donated buffer is deleted once the call that took it runs)."""
    return {jax.tree_util.keystr(p): bool(leaf.is_deleted())
            for p, leaf in jax.tree_util.tree_leaves_with_path(unwrap(tree))
            if isinstance(leaf, jax.Array)}


INSPECTORS = {
    "sharded-training/call_watched": call_watched,
    "sharded-training/call_guarded": call_guarded,
    "sharded-training/deleted": deleted,
}

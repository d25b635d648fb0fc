"""sharded-training's answers the checker needs: where each device's piece of an array
lies (``describe_placement``'s ``pieces``) and the whole placement report
(``describe_placement`` itself), read here from the checker's own arrays. Instructor-only
(``coursekit.checking.graded``)."""

from __future__ import annotations

import jax


def spans(leaf) -> dict[int, list[list[int]]]:
    """{device id: [[start, stop] per dimension]} of the pieces this process can see."""
    return {s.device.id: [list(sl.indices(dim)[:2]) for sl, dim in zip(s.index, leaf.shape)]
            for s in leaf.addressable_shards}


def placement_report(tree) -> dict:
    """What ``describe_placement(tree)`` must return."""
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        if not isinstance(leaf, jax.Array):
            continue
        spec = getattr(leaf.sharding, "spec", None)
        out[jax.tree_util.keystr(path)] = {
            "shape": list(leaf.shape), "spec": "" if spec is None else str(spec),
            "devices": sorted(d.id for d in leaf.sharding.device_set),
            "pieces": spans(leaf)}
    return out

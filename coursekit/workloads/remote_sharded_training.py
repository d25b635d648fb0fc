"""What sharded-training's checker runs in the learner process
(``coursekit.workloads.inspectors``): building placed inputs from data, calling the
learner's functions on objects that stay there, and describing those objects.

Arrays placed on a mesh, meshes, shardings, optimizers, jitted steps and Orbax managers
cannot cross the bridge as data. An inspector keeps them here and answers with data:
``Kept`` wraps a value so that it comes back as a ``Handle`` (the next call passes the
handle back and the inspector unwraps it); beside it come the value's leaves as data
(``leaves``: ``{jax.tree_util.keystr(path): leaf}``, arrays gathered to their global
value, typed keys as keys) and where each leaf lives (``placement``).

Every answer here is SELF-REPORTED (it runs beside the learner's code): the checker lists
each one in the sharded-training checker's ``SELF_REPORTED`` table with
the independent evidence it is checked against.
"""

from __future__ import annotations

import jax
import numpy as np


class Kept:
    """A value that stays in the learner process (it crosses as a ``Handle``)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        return f"kept {type(self.value).__name__}"


def unwrap(value):
    if isinstance(value, Kept):
        return value.value
    if type(value) in (list, tuple):
        return type(value)(unwrap(v) for v in value)
    if type(value) is dict:
        return {k: unwrap(v) for k, v in value.items()}
    return value


def is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype,
                                                                 jax.dtypes.prng_key)


def data_leaf(leaf):
    """A leaf as data: arrays (gathered), typed keys, plain numbers; anything else by its
    type name (the checker fails it by name)."""
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic)):
        return leaf
    if type(leaf) in (bool, int, float):
        return leaf
    return f"<{type(leaf).__name__}>"


def leaves(tree) -> dict:
    return {jax.tree_util.keystr(p): data_leaf(v)
            for p, v in jax.tree_util.tree_leaves_with_path(tree)}


def leaf_placement(leaf, shards: bool = False) -> dict:
    """Where a leaf lives: whether it is an array (and a typed key), its shape, dtype,
    devices and the shape of the piece each device holds; with ``shards``, each piece's
    data. Where in the array a
    piece lies is not read here: the checker compares each piece's data with its own."""
    out = {"is_array": isinstance(leaf, jax.Array), "type": type(leaf).__name__,
           "is_key": is_key(leaf)}
    if not isinstance(leaf, jax.Array):
        return out
    out.update(shape=list(leaf.shape), dtype=str(leaf.dtype),
               devices=sorted(int(d.id) for d in leaf.sharding.device_set),
               piece_shapes={str(s.device.id): list(s.data.shape)
                             for s in leaf.addressable_shards})
    if shards:
        out["shard_data"] = {str(s.device.id): np.asarray(
            jax.random.key_data(s.data) if is_key(leaf) else s.data)
            for s in leaf.addressable_shards}
    return out


def placement(tree, shards: bool = False) -> dict:
    return {jax.tree_util.keystr(p): leaf_placement(v, shards)
            for p, v in jax.tree_util.tree_leaves_with_path(tree)}


def describe(value, shards: bool = False) -> dict:
    """A value kept here, with its leaves and placement as data."""
    out = {"kept": Kept(value), "type": type(value).__name__,
           "keys": sorted(value) if isinstance(value, dict) and
           all(type(k) is str for k in value) else None,
           "length": len(value) if isinstance(value, (tuple, list)) else None,
           "has_lower": hasattr(value, "lower")}
    try:
        out["leaves"] = leaves(value)
        out["placement"] = placement(value, shards)
    except Exception as err:  # noqa: BLE001 - a value without a tree form is named
        out["leaves"], out["placement"] = {}, {}
        out["error"] = f"{type(err).__name__}: {err}"
    return out


# -- inspectors ---------------------------------------------------------------------------

def call(fn, *args, shards: bool = False, **kwargs) -> dict:
    """``fn(*args, **kwargs)`` (a learner function, or a kept object such as the step),
    with kept arguments unwrapped; the result kept and described."""
    return describe(unwrap(fn)(*unwrap(args), **unwrap(kwargs)), shards)


def to_data(value, depth: int = 0):
    """A learner function's plain result as data: a dict with keys that are not all
    strings (``{device id: ...}``) becomes ``{"$items": [[key, value], ...]}``."""
    if depth > 32:
        return f"<{type(value).__name__}>"
    if type(value) is dict and not all(type(k) is str for k in value):
        return {"$items": [[k if type(k) in (int, str) else repr(k), to_data(v, depth + 1)]
                           for k, v in value.items()]}
    if type(value) is dict:
        return {k: to_data(v, depth + 1) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(to_data(v, depth + 1) for v in value)
    return value


def call_plain(fn, *args, **kwargs):
    """``fn(*args, **kwargs)`` with kept arguments unwrapped, its result as data."""
    return to_data(unwrap(fn)(*unwrap(args), **unwrap(kwargs)))


def raises(fn, *args) -> dict:
    """Whether ``fn(*args)`` raised a ValueError, and its message; any other exception
    propagates (the bridge names it, with the learner's file and line)."""
    try:
        value = unwrap(fn)(*unwrap(args))
    except ValueError as err:
        return {"raised": True, "type": type(err).__name__, "message": str(err)[:2000]}
    return {"raised": False, "returned": type(value).__name__}


def step(fn, state, batch) -> dict:
    """One training step: ``(new_state, loss)`` with the new state kept and described."""
    out = unwrap(fn)(unwrap(state), unwrap(batch))
    if not (isinstance(out, tuple) and len(out) == 2):
        return {"ok": False, "type": type(out).__name__}
    return {"ok": True, "state": describe(out[0]), "loss": data_leaf(out[1])}


def part(kept, name: str) -> dict:
    """Field ``name`` of a kept dict, kept and described."""
    return describe(unwrap(kept)[name])


def mesh_info(mesh) -> dict:
    mesh = unwrap(mesh)
    if not isinstance(mesh, jax.sharding.Mesh):
        return {"is_mesh": False, "type": type(mesh).__name__}
    return {"is_mesh": True, "type": "Mesh",
            "device_ids": [int(d.id) for d in mesh.devices.flat],
            "axis_names": [str(a) for a in mesh.axis_names],
            "shape": {str(k): int(v) for k, v in mesh.shape.items()}}


def sharding_info(sharding) -> dict:
    sharding = unwrap(sharding)
    if not isinstance(sharding, jax.sharding.NamedSharding):
        return {"is_named": False, "type": type(sharding).__name__}

    def entry(e):
        if e is None:
            return None
        return [str(a) for a in e] if isinstance(e, tuple) else str(e)
    return {"is_named": True, "type": "NamedSharding", "spec": [entry(e) for e in
                                                                 sharding.spec],
            "spec_text": str(sharding.spec), "mesh": mesh_info(sharding.mesh)}


def make_mesh(device_ids: list, axis: str = "data"):
    """The checker's own mesh over ``device_ids`` (one Auto axis), built here."""
    devices = {d.id: d for d in jax.devices()}
    return jax.make_mesh((len(device_ids),), (axis,),
                         devices=[devices[int(i)] for i in device_ids],
                         axis_types=(jax.sharding.AxisType.Auto,))


def place(tree, layout: dict, shards: bool = False) -> dict:
    """The checker's data placed as ``layout`` says: {"devices": ids, "spec": [axis or
    None per dimension]} (a NamedSharding over a mesh of those devices, axis "data"),
    {"device": id} (one device) or {"host": True} (not placed), for the whole tree or
    per top-level name. Kept, and described."""
    devices = {d.id: d for d in jax.devices()}

    def put(value, how):
        if how.get("host"):  # left as it came: a leaf that is not a jax.Array
            return value
        if "device" in how:
            target = devices[int(how["device"])]
        else:
            target = jax.sharding.NamedSharding(make_mesh(how["devices"]),
                                                jax.sharding.PartitionSpec(
                                                    *how.get("spec", [])))
        return jax.tree.map(lambda v: jax.device_put(v, target), value)
    if "device" in layout or "devices" in layout:  # one layout for the whole tree
        return describe(put(tree, layout), shards)
    return describe({name: put(value, layout[name]) for name, value in tree.items()},
                    shards)


def make_step(make_train_step, lr: float, momentum: float, noise: float):
    """The learner's ``make_train_step`` on the optimizer the checker names (optax SGD
    with momentum), returned as a handle."""
    import optax
    return make_train_step(optax.sgd(lr, momentum=momentum), noise)


def export(fn, *args, extra=()) -> dict:
    """``fn(*args, *extra)`` (a kept jitted step, or a learner function; ``extra`` are
    static arguments such as a mesh) on these (kept) arrays, as a StableHLO program:
    bytes the checker deserialises, analyses and compiles itself."""
    fn, args, extra = unwrap(fn), unwrap(args), tuple(unwrap(extra))
    from coursekit.checking.programs import describe
    exp = jax.export.export(jax.jit(lambda *a: fn(*a, *extra)))(*args)
    return describe(exp, has_lower=hasattr(fn, "lower"))


def manager_finish(manager) -> None:
    """``wait_until_finished`` then ``close`` on a kept Orbax manager."""
    manager = unwrap(manager)
    manager.wait_until_finished()
    manager.close()


def manager_close(manager) -> None:
    unwrap(manager).close()


def timing_inputs(params, key, x, y, mask) -> dict:
    """Stage 4's state (replicated) and batch (rows split) on all devices, from data."""
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = make_mesh([d.id for d in jax.devices()])
    rep, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    state = jax.device_put({"params": params,
                            "momentum": jax.tree.map(jnp.zeros_like, params),
                            "key": key}, rep)
    batch = {k: jax.device_put(np.asarray(v), split)
             for k, v in (("x", x), ("y", y), ("mask", mask))}
    return {"state": Kept(state), "batch": Kept(batch)}


def device_count() -> int:
    return jax.device_count()


INSPECTORS = {f"sharded-training/{name}": fn for name, fn in {
    "call": call, "call_plain": call_plain, "raises": raises, "step": step,
    "part": part, "mesh_info": mesh_info,
    "sharding_info": sharding_info, "make_mesh": make_mesh, "place": place,
    "make_step": make_step, "export": export, "manager_finish": manager_finish,
    "manager_close": manager_close, "timing_inputs": timing_inputs,
    "device_count": device_count}.items()}

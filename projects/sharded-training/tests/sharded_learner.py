"""The learner's code, reached through the learner process (``coursekit.checking.bridge``):
this process never imports the learner's file.

Arrays placed on a mesh, meshes, shardings, jitted steps and Orbax managers stay in the
learner process. The inspectors of ``coursekit/workloads/remote_sharded_training.py`` keep
them there and answer with data: a ``Value`` is one such kept object (``kept``, a handle
to pass back), its leaves as data (``leaves``: name -> array, gathered; typed keys as
keys) and where each leaf lives (``placement``, SELF-REPORTED: see ``SELF_REPORTED`` in
``sharded_harness``). Also here: the learner's stage-1 building blocks (mesh, state,
step), called and type-checked; stage 1 checks their values, stage 3 trains with them.
"""

from __future__ import annotations

import numpy as np
from sharded_harness import N_DEVICES
from sharded_reference import run_config

from coursekit.checking import bridge
from coursekit.checking.bridge import Handle, LearnerFunction
from coursekit.checking.learner import get_function
from coursekit.checking.values import fail_unless

ALL = list(range(N_DEVICES))


def ask(impl, name: str, *args, **kwargs):
    """The inspector ``sharded-training/<name>``, run in the learner process."""
    return bridge.inspect(impl, f"sharded-training/{name}", *args, **kwargs)


class Value:
    """An object kept in the learner process, with its leaves and placement as data."""

    def __init__(self, answer: dict):
        self.kept: Handle = answer["kept"]
        self.type: str = answer.get("type", "?")
        self.keys = answer.get("keys")
        self.length = answer.get("length")
        self.has_lower = bool(answer.get("has_lower"))
        self.leaves: dict = answer.get("leaves") or {}
        self.placement: dict = dict(answer.get("placement") or {})

    def field(self, name: str) -> dict:
        """The leaves under ``[name]``, named as inside it (``['w1']``)."""
        prefix = f"['{name}']"
        return {k[len(prefix):]: v for k, v in self.leaves.items() if k.startswith(prefix)}


def arg(value):
    return value.kept if isinstance(value, Value) else value


def learner_fn(impl, name: str) -> LearnerFunction:
    get_function(impl, name)  # a missing function is named, as before any call
    return LearnerFunction(name)


def call(impl, name: str, *args, shards: bool = False, **kwargs) -> Value:
    """The learner's ``name(*args)`` run there; its result kept and described."""
    return Value(ask(impl, "call", learner_fn(impl, name), *map(arg, args), shards=shards,
                     **kwargs))


def call_plain(impl, name: str, *args, **kwargs):
    """The learner's ``name(*args)`` run there; its result as plain data."""
    return from_items(ask(impl, "call_plain", learner_fn(impl, name), *map(arg, args),
                          **kwargs))


def from_items(value):
    """Undo ``to_data``'s ``{"$items": ...}`` for dicts with non-string keys."""
    if isinstance(value, dict) and set(value) == {"$items"}:
        return {k: from_items(v) for k, v in value["$items"]}
    if isinstance(value, dict):
        return {k: from_items(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_items(v) for v in value]
    return value


def place(impl, tree, layout: dict, shards: bool = False) -> Value:
    """The checker's data placed in the learner process as ``layout`` says (see
    ``remote_sharded_training.place``)."""
    return Value(ask(impl, "place", tree, layout, shards=shards))


def checker_mesh_there(impl, device_ids=None) -> Handle:
    """The checker's own mesh (one Auto axis 'data'), built in the learner process."""
    return ask(impl, "make_mesh", list(ALL if device_ids is None else device_ids))


def learner_mesh(impl, n=None) -> tuple[Handle, dict]:
    """(the learner's mesh as a handle, what the learner process says it is)."""
    make_mesh = get_function(impl, "make_mesh")
    mesh = make_mesh() if n is None else make_mesh(n)
    info = ask(impl, "mesh_info", mesh) if isinstance(mesh, Handle) else \
        {"is_mesh": False, "type": type(mesh).__name__}
    fail_unless(info.get("is_mesh"), "make_mesh must return a jax.sharding.Mesh",
                yours=info.get("type"), expected="Mesh",
                hint="a Mesh of the first n devices, with one axis named 'data'")
    return mesh, info


def learner_state(impl, config, mesh) -> Value:
    state = call(impl, "init_state", config, mesh)
    fail_unless(state.type == "dict", "init_state must return a dict",
                yours=state.type, expected="dict")
    missing = [k for k in ("params", "opt_state", "step", "key", "data_pos")
               if k not in (state.keys or [])]
    fail_unless(not missing, f"the training state lacks {missing}", yours=state.keys,
                expected=["data_pos", "key", "opt_state", "params", "step"],
                hint="keep everything a restart needs in the state")
    return state


def learner_step(impl, config) -> Handle:
    """The learner's ``make_train_step(optax.sgd(lr, momentum), noise)``; the optimizer
    is built in the learner process by the checker's inspector."""
    return ask(impl, "make_step", learner_fn(impl, "make_train_step"), config["lr"],
               config["momentum"], config["noise"])


def run_step(impl, step, state: Value, batch: Value) -> tuple[Value, np.ndarray]:
    out = ask(impl, "step", step, state.kept, batch.kept)
    fail_unless(out.get("ok"), "the step must return (new_state, loss)",
                yours=out.get("type"), expected="tuple of 2")
    return Value(out["state"]), out["loss"]


def learner_training(impl, ctx, salt: str) -> tuple:
    """(mesh, config, state, step): the learner's full mesh, a run config drawn from
    ``salt``, the learner's initial state for it and its jitted train step."""
    mesh, _ = learner_mesh(impl)
    config = run_config(ctx, salt)
    return mesh, config, learner_state(impl, config, mesh), learner_step(impl, config)

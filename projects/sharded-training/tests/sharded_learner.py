"""The learner's stage-1 building blocks (mesh, state, step), called and checked for
what they return; stage 1 checks their values, stage 3 trains with them."""

from __future__ import annotations

import jax
import optax
from sharded_reference import run_config

from coursekit.checking.learner import get_function
from coursekit.checking.values import fail_unless


def learner_mesh(impl, n=None):
    make_mesh = get_function(impl, "make_mesh")
    mesh = make_mesh() if n is None else make_mesh(n)
    fail_unless(isinstance(mesh, jax.sharding.Mesh), "make_mesh must return a "
                "jax.sharding.Mesh", yours=type(mesh).__name__, expected="Mesh",
                hint="jax.make_mesh((n,), ('data',), devices=jax.devices()[:n])")
    return mesh


def learner_state(impl, config, mesh):
    state = get_function(impl, "init_state")(config, mesh)
    fail_unless(isinstance(state, dict), "init_state must return a dict",
                yours=type(state).__name__, expected="dict")
    missing = [k for k in ("params", "opt_state", "step", "key", "data_pos")
               if k not in state]
    fail_unless(not missing, f"the training state lacks {missing}", yours=sorted(state),
                expected=["data_pos", "key", "opt_state", "params", "step"],
                hint="keep everything a restart needs in the state")
    return state


def learner_step(impl, config):
    make = get_function(impl, "make_train_step")
    optimizer = optax.sgd(config["lr"], momentum=config["momentum"])
    return make(optimizer, config["noise"])


def learner_training(impl, ctx, salt: str) -> tuple:
    """(mesh, config, state, step): the learner's full mesh, a run config drawn from
    ``salt``, the learner's initial state for it and its jitted train step."""
    mesh = learner_mesh(impl)
    config = run_config(ctx, salt)
    return mesh, config, learner_state(impl, config, mesh), learner_step(impl, config)


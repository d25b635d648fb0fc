"""The checker's own reference for sharded-training, written independently of the
learner's: the data order, the single-device training step and run, run configs and
batches (host numpy data with a drawn number of valid rows per device)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from sharded_harness import N_DEVICES

from coursekit.checking.graded import instructor_module
from coursekit.workloads import classifier


def ref_data(config: dict) -> dict:
    x, y = jax.jit(classifier.make_dataset, static_argnums=1)(
        jax.random.key(config["data_seed"]), config["n_examples"],
        spread=config.get("spread", 1.0))
    return {"x": np.asarray(x), "y": np.asarray(y)}


def ref_batch(data: dict, config: dict, pos: int) -> dict:
    n, size = config["n_examples"], config["batch"]
    per_epoch = -(-n // size)
    epoch, b = divmod(pos, per_epoch)
    order = np.random.default_rng([config["data_seed"], epoch]).permutation(n)
    idx = list(order[b * size:(b + 1) * size])
    mask = np.array([1.0] * len(idx) + [0.0] * (size - len(idx)), np.float32)
    idx = np.array(idx + [0] * (size - len(idx)))
    return {"x": data["x"][idx], "y": data["y"][idx], "mask": mask}


ref_init_params = jax.jit(classifier.init_params)


def ref_state(config: dict) -> dict:
    """Step-0 state on one device, written independently of the learner's."""
    k_params, k_train = jax.random.split(jax.random.key(config["seed"]))
    params = ref_init_params(k_params)
    momentum = jax.tree.map(jnp.zeros_like, params)
    return {"params": params, "momentum": momentum, "step": 0, "key": k_train,
            "data_pos": 0}


def ref_step_fn(config: dict):
    """The checker's single-device step (make_train_step's numbers, SGD with momentum):
    instructor-only (a learner's copy grades the checks that need it where the
    instructor grades)."""
    return instructor_module("sharded_training").reference_step(config)


def ref_train(config: dict, steps: int, batches=None) -> tuple[dict, list[float]]:
    state = ref_state(config)
    data = ref_data(config) if batches is None else None
    step = ref_step_fn(config)
    params, momentum, key = state["params"], state["momentum"], state["key"]
    losses = []
    for i in range(steps):
        b = batches[i] if batches is not None else ref_batch(data, config, i)
        params, momentum, key, value = step(params, momentum, key, jnp.asarray(b["x"]),
                                            jnp.asarray(b["y"]), jnp.asarray(b["mask"]))
        losses.append(float(value))
    return {"params": params, "momentum": momentum, "key": key, "step": steps,
            "data_pos": steps}, losses


def run_config(ctx, salt: str, **overrides) -> dict:
    rng = ctx.rng(salt)
    config = {"seed": int(rng.integers(0, 2**30)), "data_seed": int(rng.integers(0, 2**30)),
              "n_examples": int(rng.integers(300, 700)) * 2 + 1, "batch": 64,
              "spread": 2.0, "lr": float(rng.uniform(0.03, 0.08)), "momentum": 0.9,
              "noise": float(rng.uniform(0.05, 0.2)), "steps": 30, "save_every": 7,
              "max_to_keep": 3}
    config.update(overrides)
    return config


def random_mask(rng, rows_per_device: int, counts) -> np.ndarray:
    mask = np.zeros((len(counts), rows_per_device), np.float32)
    for d, c in enumerate(counts):
        mask[d, rng.permutation(rows_per_device)[:c]] = 1.0
    return mask.reshape(-1)


def blobs(rng, n: int) -> tuple:
    """Host data shaped like the classifier's (numpy, so no compile)."""
    centres = 3.0 * rng.standard_normal((classifier.CLASSES, classifier.FEATURES))
    y = rng.integers(0, classifier.CLASSES, n).astype(np.int32)
    x = (centres[y] + 2.0 * rng.standard_normal((n, classifier.FEATURES)))
    return x.astype(np.float32), y


def stage_batch(ctx, salt: str, rows_per_device: int, counts=None) -> dict:
    rng = ctx.rng(salt)
    n = rows_per_device * N_DEVICES
    x, y = blobs(rng, n)
    if counts is None:
        counts = rng.integers(1, rows_per_device + 1, N_DEVICES)
    mask = random_mask(rng, rows_per_device, counts)
    return {"x": np.asarray(x), "y": np.asarray(y), "mask": mask}


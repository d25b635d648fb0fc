"""The course's reference workload: a small MLP classifier on data generated from a seed.

Notebook 00 builds it, sharded-training trains it on 8 CPU devices, the readiness review
measures it. Everything here is a pure function of explicit PRNG keys (no global random
state, no download), so a rerun in a fresh process gives identical arrays.

Shapes: x (n, features) float32, y (n,) int32 in [0, classes), mask (n,) float32 of 0/1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

FEATURES, HIDDEN, CLASSES = 16, 64, 4


def make_dataset(key, n: int = 2048, features: int = FEATURES, classes: int = CLASSES,
                 spread: float = 1.0):
    """Gaussian blobs: ``classes`` centres drawn from ``key``, each point its centre plus
    unit noise times ``spread``. Returns (x float32 (n, features), y int32 (n,))."""
    k_centres, k_labels, k_noise = jax.random.split(key, 3)
    centres = 3.0 * jax.random.normal(k_centres, (classes, features), jnp.float32)
    y = jax.random.randint(k_labels, (n,), 0, classes, jnp.int32)
    x = centres[y] + spread * jax.random.normal(k_noise, (n, features), jnp.float32)
    return x, y


def init_params(key, features: int = FEATURES, hidden: int = HIDDEN,
                classes: int = CLASSES) -> dict:
    """One hidden layer: w1 (features, hidden), b1 (hidden,), w2 (hidden, classes),
    b2 (classes,), float32, scaled by 1/sqrt(fan_in)."""
    k1, k2 = jax.random.split(key)
    return {"w1": jax.random.normal(k1, (features, hidden)) / jnp.sqrt(features),
            "b1": jnp.zeros((hidden,), jnp.float32),
            "w2": jax.random.normal(k2, (hidden, classes)) / jnp.sqrt(hidden),
            "b2": jnp.zeros((classes,), jnp.float32)}


def logits(params: dict, x):
    """(n, classes) float32 scores."""
    return jnp.tanh(x @ params["w1"] + params["b1"]) @ params["w2"] + params["b2"]


def example_losses(params: dict, x, y):
    """(n,) cross-entropy per example."""
    logp = jax.nn.log_softmax(logits(params, x))
    return -jnp.take_along_axis(logp, y[:, None], axis=1)[:, 0]


def loss_sum(params: dict, x, y, mask=None):
    """Sum of per-example losses over valid rows (mask 1) - the piece a data-parallel
    shard contributes before the global division by the total valid count."""
    losses = example_losses(params, x, y)
    return jnp.sum(losses if mask is None else losses * mask)


def loss(params: dict, x, y, mask=None):
    """Mean cross-entropy over valid rows."""
    count = x.shape[0] if mask is None else jnp.sum(mask)
    return loss_sum(params, x, y, mask) / count


def accuracy(params: dict, x, y):
    return jnp.mean(jnp.argmax(logits(params, x), axis=1) == y)

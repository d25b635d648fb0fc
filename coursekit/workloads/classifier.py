"""The course's reference workload: a small MLP classifier on data generated from a seed.

Notebook 00 builds it, sharded-training trains it on 8 CPU devices, the readiness review
measures it. Everything here is a pure function of explicit PRNG keys (no global random
state, no download), so a rerun in a fresh process gives identical arrays.

The data are learnable but not trivial, so a reproducibility or speed check preserves a
result worth preserving: each class is a mixture of ``SUBCLUSTERS`` overlapping Gaussian
clusters (a nonlinear boundary), and a fraction ``LABEL_NOISE`` of the labels is redrawn
uniformly, which caps any classifier's accuracy at ``1 - LABEL_NOISE * (classes - 1) /
classes`` (0.925 for 4 classes). Measured (CPU, seeds 0-7, foundations' reference_workload
defaults: 2048 train rows, 512 test rows, 300 SGD steps): untrained test accuracy
0.17-0.36 (chance 0.25), trained 0.83-0.88 on the test rows; tests/test_classifier.py
guards that band.

Shapes: x (n, features) float32, y (n,) int32 in [0, classes), mask (n,) float32 of 0/1.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

FEATURES, HIDDEN, CLASSES = 16, 64, 4
SUBCLUSTERS = 2      # clusters per class: no single linear boundary separates the classes
CENTRE_SCALE = 1.0   # std of the cluster centres: close enough, at spread 1, to overlap
LABEL_NOISE = 0.1    # fraction of labels redrawn uniformly (irreducible error)


def make_dataset(key, n: int = 2048, features: int = FEATURES, classes: int = CLASSES,
                 spread: float = 1.0, label_noise: float = LABEL_NOISE):
    """Overlapping clusters with noisy labels, all drawn from ``key``: ``classes *
    SUBCLUSTERS`` centres (std ``CENTRE_SCALE``); each point is the centre of a random
    cluster of its class plus unit noise times ``spread``; then each label is redrawn
    uniformly with probability ``label_noise``. A larger ``spread`` overlaps the classes
    more. Returns (x float32 (n, features), y int32 (n,))."""
    k_centres, k_labels, k_cluster, k_noise, k_flip, k_redrawn = jax.random.split(key, 6)
    centres = CENTRE_SCALE * jax.random.normal(
        k_centres, (classes, SUBCLUSTERS, features), jnp.float32)
    y = jax.random.randint(k_labels, (n,), 0, classes, jnp.int32)
    cluster = jax.random.randint(k_cluster, (n,), 0, SUBCLUSTERS, jnp.int32)
    x = centres[y, cluster] + spread * jax.random.normal(k_noise, (n, features), jnp.float32)
    redraw = jax.random.bernoulli(k_flip, label_noise, (n,))
    y = jnp.where(redraw, jax.random.randint(k_redrawn, (n,), 0, classes, jnp.int32), y)
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
    """Sum of per-example losses over valid rows (mask 1)."""
    losses = example_losses(params, x, y)
    return jnp.sum(losses if mask is None else losses * mask)


def loss(params: dict, x, y, mask=None):
    """Mean cross-entropy over valid rows."""
    count = x.shape[0] if mask is None else jnp.sum(mask)
    return loss_sum(params, x, y, mask) / count


def accuracy(params: dict, x, y):
    """Fraction of rows whose largest logit is the label (float32 scalar)."""
    return jnp.mean(jnp.argmax(logits(params, x), axis=1) == y)

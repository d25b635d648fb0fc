"""The optimisation project's workload: a correct but slow training loop, and its contract.

A next-token model trained with plain SGD for ``steps`` steps::

    x      = embed[tokens]                       (batch, embed)   a row per token id
    h      = tanh(x @ w1)                        (batch, hidden)
    logits = h @ w2                              (batch, vocab)
    loss   = mean over the batch of cross-entropy(logits, targets)
    params = params - lr * grad(loss)            once per step, every step

``train_slow`` is the code the learner receives: it gives the right numbers and is slow
the way real JAX code gets slow. The optimisation project's checker builds its reference
from it (it never imports the learner's file for that), and the learner's faster version
must keep its contract.

The contract (what a faster version must keep)
-----------------------------------------------
``train(params, tokens, targets, lr) -> (params, losses)``

* ``params``: ``{"embed": (vocab, embed), "w1": (embed, hidden), "w2": (hidden, vocab)}``,
  float32; ``tokens``, ``targets``: ``(steps, batch)`` int32 in ``[0, vocab)``; ``lr``: this
  call's learning rate, a Python float. The caller's schedule gives a new ``lr`` to every
  call, and the caller never reuses the ``params`` it passed in (it may be donated).
* Returns the parameters after ``steps`` SGD steps (same tree, shapes, float32) and the
  loss *before* each step's update, ``(steps,)`` float32.
* Tolerance: every output within ``RTOL`` / ``ATOL`` of ``train_slow`` (``np.allclose``),
  on every shape, odd ones included; the gradient of one step (``(params - params_1) /
  lr`` with ``steps == 1``) within the same tolerance of ``jax.grad`` of ``loss``.

Why that tolerance: everything is float32 (machine epsilon 1.2e-7). A faster version
computes the same sums in another order (a fused or blocked matmul, a log-sum-exp
reduced differently, scan vs a Python loop): each reordering moves a result by a few
ulp, and SGD carries the difference through ``steps`` updates. Measured here between the
course's reference fix and ``train_slow``: losses within 1e-6, parameters within 3e-8
absolute, 16 steps. ``RTOL = 1e-4`` (about 800 epsilon) and ``ATOL = 1e-5`` leave room
for other orders and 64 steps, and stay far below a real change: computing in bfloat16
(epsilon 7.8e-3) moves the losses by about 1e-3 relative, a dropped step by much more.
A reordered float32 reduction is not bitwise equal, so nothing here asks for bits.

How it is traced: each step is one ``jax.profiler.TraceAnnotation(STEP_REGION,
step=t)`` holding one annotation per phase (``PHASES``), so a trace shows where a step's
time goes.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax.profiler import TraceAnnotation

STEP_REGION = "train_step"
PHASES = ("forward_backward", "update", "log_loss")
RTOL = 1e-4
ATOL = 1e-5

# Sizes of the course's default problem (about 0.3-0.6 s per slow call on 2 CPU cores).
DEFAULT = {"vocab": 512, "embed": 64, "hidden": 256, "batch": 64, "steps": 16}


def logits(params: dict, tokens):
    """The model's logits, (batch, vocab), for ``tokens`` (batch,)."""
    vocab = params["embed"].shape[0]
    x = jax.nn.one_hot(tokens, vocab, dtype=params["embed"].dtype) @ params["embed"]
    return jnp.tanh(x @ params["w1"]) @ params["w2"]


def loss(params: dict, tokens, targets):
    """Mean cross-entropy of the model on one batch (``tokens``, ``targets``: (batch,))."""
    vocab = params["embed"].shape[0]
    logits_ = logits(params, tokens)
    picked = jnp.sum(jax.nn.one_hot(targets, vocab, dtype=logits_.dtype)
                     * jax.nn.log_softmax(logits_), axis=-1)
    return -jnp.mean(picked)


def sgd_update(params: dict, grads: dict, lr: float) -> dict:
    return jax.tree.map(lambda p, g: p - lr * g, params, grads)


# The learning rate is a hyperparameter, so it was made static (a Python float).
_update = jax.jit(sgd_update, static_argnames="lr")


def train_slow(params: dict, tokens, targets, lr: float):
    """``steps`` SGD steps on ``loss``; returns (params, losses). See the module's
    contract: a faster ``train`` must return the same within ``RTOL`` / ``ATOL``."""
    grad_fn = jax.value_and_grad(loss)
    losses = []
    for t in range(tokens.shape[0]):
        with TraceAnnotation(STEP_REGION, step=t):
            with TraceAnnotation("forward_backward"):
                value, grads = grad_fn(params, tokens[t], targets[t])
            with TraceAnnotation("update"):
                params = _update(params, grads, lr=lr)
            with TraceAnnotation("log_loss"):
                losses.append(float(value))
    return params, np.asarray(losses, dtype=np.float32)


# ---------------------------------------------------------------------------------------
# Problems: random inputs of a given size, the same on every side that asks for them
# ---------------------------------------------------------------------------------------

def sizes(config: dict | None = None, **overrides) -> dict:
    """A full size dict: ``DEFAULT`` updated by ``config`` and ``overrides``."""
    out = dict(DEFAULT)
    out.update(config or {})
    out.update(overrides)
    unknown = set(out) - set(DEFAULT)
    if unknown:
        raise ValueError(f"unknown size keys {sorted(unknown)}; known: {sorted(DEFAULT)}")
    return {k: int(v) for k, v in out.items()}


def init_params(key, vocab: int, embed: int, hidden: int) -> dict:
    k1, k2, k3 = jax.random.split(key, 3)
    return {"embed": 0.1 * jax.random.normal(k1, (vocab, embed), jnp.float32),
            "w1": jax.random.normal(k2, (embed, hidden), jnp.float32) / np.sqrt(embed),
            "w2": jax.random.normal(k3, (hidden, vocab), jnp.float32) / np.sqrt(hidden)}


def make_problem(config: dict | None = None, seed: int = 0) -> dict:
    """``{"params", "tokens", "targets", "lr"}`` for ``sizes(config)``, from ``seed``.
    The targets follow the tokens through a fixed random map (with some noise), so
    the loss really falls while training."""
    s = sizes(config)
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, s["vocab"], (s["steps"], s["batch"]))
    mapping = rng.permutation(s["vocab"])
    noise = rng.integers(0, s["vocab"], tokens.shape)
    targets = np.where(rng.random(tokens.shape) < 0.8, mapping[tokens], noise)
    return {"params": init_params(jax.random.key(int(rng.integers(2**31))), s["vocab"],
                                  s["embed"], s["hidden"]),
            "tokens": jnp.asarray(tokens, jnp.int32), "targets": jnp.asarray(targets, jnp.int32),
            "lr": float(rng.uniform(0.2, 0.8))}


def fresh_copy(params: dict) -> dict:
    """New buffers holding the same values (a donated argument must not be reused)."""
    return jax.tree.map(lambda a: jnp.array(a, copy=True), params)


@functools.cache
def _grad_reference():
    return jax.jit(jax.grad(loss))


def reference_grads(params: dict, tokens, targets) -> dict:
    """``jax.grad(loss)`` jitted: the gradient a one-step ``train`` must imply."""
    return _grad_reference()(params, tokens, targets)

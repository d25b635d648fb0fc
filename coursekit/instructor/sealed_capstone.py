"""The readiness review's sealed programs (notebook 08): the change under review and the
independent loss its records are checked against, written here and shipped only as
programs (``coursekit/workloads/sealed/*.jaxexport``, ``coursekit.checking.sealed``).

Written out in Python the change under review is sharded-training's data-parallel step,
and stage 2's count weighting with it: a learner's release holds neither. ``python -m
coursekit.authoring.sealed`` (``make starters``) writes the programs from this file.

The step takes the state's parts as plain arrays (the typed key as its key data, the
optimizer's momentum as its trace) so that one program fits every learner's state tree;
``coursekit.workloads.capstone`` puts them back into the learner's state. The batch size is
symbolic; the program is exported for one device, and a jitted call on arrays split over a
mesh partitions it (its reductions become all-reduces), as a jitted Python step would be.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from coursekit.workloads import classifier

# where the programs go, relative to the course root
TARGET = "coursekit/workloads"
# the step runs where the learner's mesh is: on an accelerator too
PLATFORMS = ("cpu", "tpu", "cuda")


def candidate_step(params, trace, step, key_data, data_pos, x, y, mask, lr, momentum, noise):
    """The proposed change: the loss summed over the valid rows is differentiated and
    loss and gradients are divided by the valid count afterwards, so the count no longer
    feeds the gradient's reduction. SGD with momentum (optax's ``sgd``: trace = g +
    momentum * trace; params -= lr * trace). Returns (params, trace, step + 1, the new
    key's data, data_pos + 1, loss)."""
    key, sub = jax.random.split(jax.random.wrap_key_data(key_data))
    x = x + noise * jax.random.normal(sub, x.shape, x.dtype)
    loss_sum, grads_sum = jax.value_and_grad(classifier.loss_sum)(params, x, y, mask)
    count = jnp.sum(mask)
    grads = jax.tree.map(lambda g: g / count, grads_sum)
    trace = jax.tree.map(lambda t, g: g + momentum * t, trace, grads)
    params = jax.tree.map(lambda p, t: p - lr * t, params, trace)
    return params, trace, step + 1, jax.random.key_data(key), data_pos + 1, loss_sum / count


def first_loss(params, key_data, x, y, mask, noise):
    """The loss of a step's first call, independent of any learner code: the input noise
    drawn from the state's key as the step draws it, ``classifier.loss`` over the valid
    rows."""
    _, sub = jax.random.split(jax.random.wrap_key_data(key_data))
    x = x + noise * jax.random.normal(sub, x.shape, x.dtype)
    return classifier.loss(params, x, y, mask)


def _types():
    (b,) = jax.export.symbolic_shape("b")
    params = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype),
                          jax.eval_shape(classifier.init_params, jax.random.key(0)))
    scalar = jax.ShapeDtypeStruct((), jnp.float32)
    batch = (jax.ShapeDtypeStruct((b, classifier.FEATURES), jnp.float32),
             jax.ShapeDtypeStruct((b,), jnp.int32), jax.ShapeDtypeStruct((b,), jnp.float32))
    key_data = jax.ShapeDtypeStruct((2,), jnp.uint32)
    return params, scalar, batch, key_data


def candidate_types():
    params, scalar, batch, key_data = _types()
    count = jax.ShapeDtypeStruct((), jnp.int32)
    return (params, params, count, key_data, count, *batch, scalar, scalar, scalar)


def first_loss_types():
    params, scalar, batch, key_data = _types()
    return (params, key_data, *batch, scalar)


EXPORTS = {
    "capstone_candidate": (candidate_step, candidate_types, False),
    "capstone_first_loss": (first_loss, first_loss_types, False),
}

"""foundations' sealed references: the source of the checker's replays of stage 2's fit
and stage 3's training.

Instructor material: the learner release holds these only as the programs
``tests/sealed/*.jaxexport`` (``coursekit.checking.sealed``), written by
``python -m coursekit.authoring.sealed`` (``make starters``). Written out in Python they
would be ``fit_regression`` (with autodiff where the learner's own gradient goes) and
``train_classifier``, and the release ships the checkers.

One program covers every case the checker draws: the sizes are symbolic (rows, features,
batch, classes), the step count and learning rate are inputs, and flags replay the
classic mistakes of each stage for their diagnoses (one key for every step's rows, the
rows drawn below another bound than n, and every step's rows in one draw; one shuffle for
every epoch, an epoch of ceil(n / batch) steps whose last takes the leftover rows, a
window of rows moved by one a step, the labels in an order of their own, and each
epoch's permutation composed with the last's).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from coursekit.workloads import classifier

# jax.random.permutation of n rows sorts by one draw of 32-bit keys while 3 log(n) <=
# log(2**32), and by more draws above that; the replay does that one sort itself (the
# library's shuffle needs a constant n), so it holds up to this many rows.
MAX_ROWS = 1625


def shuffled_rows(key, n):
    """``jax.random.permutation(key, n)`` for a symbolic n <= MAX_ROWS, bit for bit."""
    _, subkey = jax.random.split(key)
    bits = jax.random.bits(subkey, (n,), jnp.uint32)
    return jax.lax.sort_key_val(bits, jnp.arange(n, dtype=jnp.int32))[1]


def train_replay(key_data, x, y, steps, lr, same_order, batch_like, classes_like,
                 ceil_epoch, slide, own_labels, compose):
    """The params ``train_classifier(wrap_key_data(key_data), x, y, classes, steps, batch,
    lr)`` must return; batch and classes are the lengths of ``batch_like`` and
    ``classes_like`` (shapes are what a program may vary by). ``ceil_epoch`` replays an
    epoch of ceil(n / batch) steps, its last step on the leftover rows alone; ``slide``
    a step j whose rows are order[j:j + batch], a window moved by one row a step;
    ``own_labels`` the epoch key split once more, x's rows in the order of its first half
    and y's in that of its second; ``compose`` each epoch's permutation applied to the
    last epoch's order, not to the rows."""
    key = jax.random.wrap_key_data(key_data)
    n, batch = x.shape[0], batch_like.shape[0]
    k_init, k_order = jax.random.split(key)
    params = classifier.init_params(k_init, features=x.shape[1],
                                    classes=classes_like.shape[0])
    per_epoch = jnp.where(ceil_epoch, (n + batch - 1) // batch, n // batch)

    def step(i, carry):
        params, k_order, order, order_y = carry
        j = i % per_epoch

        def reshuffle(state):
            k_next, k_epoch = jax.random.split(state[0])
            k_x, k_y = jax.random.split(k_epoch)
            drawn = jnp.where(own_labels, shuffled_rows(k_x, n), shuffled_rows(k_epoch, n))
            new = jnp.where(compose & (i > 0), state[1][drawn], drawn)
            return k_next, new, jnp.where(own_labels, shuffled_rows(k_y, n), new)

        fresh = (j == 0) & ((i == 0) | jnp.logical_not(same_order))
        k_order, order, order_y = jax.lax.cond(fresh, reshuffle, lambda state: state,
                                               (k_order, order, order_y))
        # the order padded by a batch: a slice past n holds the leftover rows and padding
        start = (jnp.where(slide, j, j * batch),)
        pad = jnp.zeros((batch,), jnp.int32)
        rows = jax.lax.dynamic_slice(jnp.concatenate([order, pad]), start, (batch,))
        rows_y = jax.lax.dynamic_slice(jnp.concatenate([order_y, pad]), start, (batch,))
        kept = (j * batch + jnp.arange(batch) < n).astype(jnp.float32)
        grads = jax.lax.cond(
            ceil_epoch,
            lambda: jax.grad(classifier.loss)(params, x[rows], y[rows_y], kept),
            lambda: jax.grad(classifier.loss)(params, x[rows], y[rows_y]))
        return jax.tree.map(lambda v, g: v - lr * g, params, grads), k_order, order, order_y

    empty = jnp.zeros((n,), jnp.int32)
    return jax.lax.fori_loop(0, steps, step, (params, k_order, empty, empty))[0]


def train_replay_types():
    """The input types: every size symbolic, the batch no larger than the rows."""
    n, f, b, c = jax.export.symbolic_shape("n, f, b, c", constraints=("n >= b",))
    spec = jax.ShapeDtypeStruct
    return (spec((2,), jnp.uint32), spec((n, f), jnp.float32), spec((n,), jnp.int32),
            spec((), jnp.int32), spec((), jnp.float32), spec((), jnp.bool_),
            spec((b,), jnp.int8), spec((c,), jnp.int8), spec((), jnp.bool_),
            spec((), jnp.bool_), spec((), jnp.bool_), spec((), jnp.bool_))


def batch_loss64(params: dict, xb, yb):
    """``regression_loss`` on one batch, float64."""
    return jnp.mean((xb @ params["w"] + params["b"] - yb) ** 2)


def fit_replay(key_data, x, y, steps, lr, reuse_key, batch_like, maxval, one_draw,
               steps_like):
    """The params ``fit_regression(wrap_key_data(key_data), x, y, steps, batch, lr)`` must
    return when ``maxval`` is n, the steps in float64 with autodiff's gradient (exported
    with x64 on: the draws name their 32-bit dtypes, so they are the learner's bits).
    Another ``maxval`` replays rows drawn from [0, maxval); ``one_draw`` every step's
    rows drawn at once, one randint of shape (len(steps_like), batch) from the stream key
    never split, step i taking its row i."""
    key = jax.random.wrap_key_data(key_data)
    d, batch = x.shape[1], batch_like.shape[0]
    x64, y64 = x.astype(jnp.float64), y.astype(jnp.float64)
    k_init, k_batches = jax.random.split(key)
    all_rows = jax.random.randint(k_batches, (steps_like.shape[0], batch), 0, maxval,
                                  jnp.int32)
    w = jax.random.normal(k_init, (d,), jnp.float32) / jnp.sqrt(jnp.float32(d))
    params = {"w": w.astype(jnp.float64), "b": jnp.zeros((), jnp.float64)}

    def step(i, carry):
        params, k_batches, k_step = carry

        def advance(keys):
            k_next, k_new = jax.random.split(keys[0])
            return k_next, k_new

        fresh = (i == 0) | jnp.logical_not(reuse_key)
        k_batches, k_step = jax.lax.cond(fresh, advance, lambda keys: keys,
                                         (k_batches, k_step))
        drawn = jax.random.randint(k_step, (batch,), 0, maxval, jnp.int32)
        rows = jnp.where(one_draw, all_rows[jnp.minimum(i, all_rows.shape[0] - 1)], drawn)
        grads = jax.grad(batch_loss64)(params, x64[rows], y64[rows])
        return jax.tree.map(lambda v, g: v - lr * g, params, grads), k_batches, k_step

    return jax.lax.fori_loop(0, steps, step, (params, k_batches, k_batches))[0]


def fit_replay_types():
    n, d, b, s = jax.export.symbolic_shape("n, d, b, s")
    spec = jax.ShapeDtypeStruct
    return (spec((2,), jnp.uint32), spec((n, d), jnp.float32), spec((n,), jnp.float32),
            spec((), jnp.int32), spec((), jnp.float64), spec((), jnp.bool_),
            spec((b,), jnp.int8), spec((), jnp.int32), spec((), jnp.bool_),
            spec((s,), jnp.int8))


# name -> (function, its input types, whether it is exported and run with x64 on)
EXPORTS = {"train_replay": (train_replay, train_replay_types, False),
           "fit_replay": (fit_replay, fit_replay_types, True)}

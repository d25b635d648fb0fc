"""foundations: the edit-check loop, a regression fit you can trust, a classifier you can rerun.

Your code goes in this file; check it with

    python projects/foundations/tests/check.py --stage N --impl THIS_FILE

Stages (notebook 00 walks through each):
  1. the edit-check loop           mse
  2. a regression fit              regression_grads, fit_regression
  3. a reproducible classifier     train_classifier, reference_workload

Rules for every function here: randomness comes only from the ``key`` (or ``seed``) you
are given, split with ``jax.random.split`` and never reused; no ``np.random``, no
``random`` (two separate global generators: seeding one does not seed the other), no
clock. The same inputs must give bitwise the same arrays, in this process and in a fresh
one, on the same versions (jax, jaxlib, XLA flags) and hardware: those decide the bits too.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from coursekit.workloads import classifier

# ---------------------------------------------------------------------------------------
# Stage 1: the edit-check loop
# ---------------------------------------------------------------------------------------


def mse(pred, target):
    """The mean squared error of ``pred`` against ``target``: one number for the whole
    array, averaged over every element.

    pred, target: float32 arrays of one shape, any rank (0-d included), at least one
    element, magnitudes up to about 1e17 (the squares stay inside float32's range).
    Returns: a float32 array of shape ``()``. It must trace under ``jax.jit``: the checker
    exports your function as a jitted program and runs that program itself.
    Checked: within relative 1e-5 of the checker's float64 mean squared error, on random
    odd shapes (rank 0 to 3, one element), values of 1e17 and of 1e-17, large values a
    few units apart, and pred == target (exactly 0); the exported program agrees with
    the plain call and stays right on new inputs. Size hint: one line.
    """
    ### BEGIN SOLUTION stage 1: mse (one line of jnp)
    return jnp.mean((pred - target) ** 2)
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Stage 2: a regression fit with checked gradients and explicit PRNG keys
# ---------------------------------------------------------------------------------------


def make_regression_data(key, n: int = 256, d: int = 8, noise: float = 0.1):
    """Given. y = x @ w_true + b_true + noise, everything drawn from ``key``.
    Returns (x float32 (n, d), y float32 (n,), {"w": w_true (d,), "b": b_true ()})."""
    k_w, k_b, k_x, k_noise = jax.random.split(key, 4)
    w_true = jax.random.normal(k_w, (d,), jnp.float32)
    b_true = jax.random.normal(k_b, (), jnp.float32)
    x = jax.random.normal(k_x, (n, d), jnp.float32)
    y = x @ w_true + b_true + noise * jax.random.normal(k_noise, (n,), jnp.float32)
    return x, y, {"w": w_true, "b": b_true}


def init_linear(key, d: int) -> dict:
    """Given. {"w": float32 (d,) drawn from ``key`` / sqrt(d), "b": float32 0.0}."""
    return {"w": jax.random.normal(key, (d,), jnp.float32) / jnp.sqrt(d),
            "b": jnp.zeros((), jnp.float32)}


def predict(params: dict, x):
    """Given. (n, d) -> (n,)."""
    return x @ params["w"] + params["b"]


def regression_loss(params: dict, x, y):
    """Given. ``mse(predict(params, x), y)``."""
    return mse(predict(params, x), y)


def regression_grads(params: dict, x, y) -> dict:
    """The gradient of ``regression_loss(params, x, y)`` with respect to ``params``,
    written by hand.

    params: {"w": float32 (d,), "b": float32 ()}; x float32 (n, d); y float32 (n,);
    any n >= 1 and d >= 1 (d may exceed n).
    Returns: {"w": float32 (d,), "b": float32 ()}, the same keys as ``params``.
    Rule: no JAX autodiff (``jax.grad``, ``value_and_grad``, ``vjp``, ``jacrev``,
    ``jacfwd``, ``jvp``, ``hessian``, ``linearize``) here or in anything of this file it
    calls. The checker reads this file's text for them, and counts autodiff transforms
    while your function runs on inputs of a shape it has not seen.
    Checked: relative error below 1e-3 against the checker's float64 central finite
    differences of its own loss, for n > d, d = 1, d > n, and inputs of magnitude 1e3.
    Size hint: 3 lines.
    """
    ### BEGIN SOLUTION stage 2: regression_grads (by hand: no autodiff)
    residual = predict(params, x) - y
    n = x.shape[0]
    return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.sum(residual) / n}
    ### END SOLUTION


def fit_regression(key, x, y, *, steps: int = 200, batch: int = 32, lr: float = 0.05) -> dict:
    """Minibatch SGD on ``regression_loss`` with your ``regression_grads``: the fitted
    linear params, a function of the arguments alone.

    key: a typed PRNG key (``jax.random.key``); x float32 (n, d); y float32 (n,);
    steps, batch: ints >= 1; lr: a float. Returns: {"w": float32 (d,), "b": float32 ()}.

    The key protocol (the checker replays it exactly): ``key`` splits once into an init
    key (the start is ``init_linear`` of it, for d features) and a batch-stream key; each
    of the ``steps`` steps splits the stream key once, carries the first half on and
    draws its ``batch`` row indices, uniform in [0, n) (``jax.random.randint``), with the
    second; a step moves the params by ``-lr`` times ``regression_grads`` on those rows.
    A key used once is spent: reusing one for every step draws the same rows every time.

    Checked: within relative 1e-4 of the checker's float64 replay (steps, batch and lr
    drawn per run), on a first call and on three more in the same process (new data of
    the first call's shape, another shape with fewer rows than the batch, another lr):
    nothing may carry over from an earlier call; bitwise the same under two numpy/Python
    global seeds, which it must neither read nor change (the state digest is read in your
    process); bitwise the same in a fresh process (another hash seed, another global seed).
    Size hint: 8 lines; jit the update step to keep it fast.
    """
    ### BEGIN SOLUTION stage 2: fit_regression (thread the key through every step)
    k_init, k_batches = jax.random.split(key)
    params = init_linear(k_init, x.shape[1])
    n = x.shape[0]

    @jax.jit
    def step(params, k_step):
        rows = jax.random.randint(k_step, (batch,), 0, n)
        grads = regression_grads(params, x[rows], y[rows])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    for _ in range(steps):
        k_batches, k_step = jax.random.split(k_batches)
        params = step(params, k_step)
    return params
    ### END SOLUTION


# ---------------------------------------------------------------------------------------
# Stage 3: the course's reference workload, reproducible from a seed
# ---------------------------------------------------------------------------------------


def train_classifier(key, x, y, *, classes: int = classifier.CLASSES, steps: int = 300,
                     batch: int = 64, lr: float = 0.3) -> dict:
    """Minibatch SGD on ``coursekit.workloads.classifier.loss``, shuffled once per epoch:
    the trained params, a function of the arguments alone.

    key: a typed PRNG key; x float32 (n, features), y int32 (n,) in [0, classes);
    steps, batch (<= n): ints >= 1; lr: a float. Returns: the params dict of
    ``classifier.init_params`` (same keys and shapes, float32).

    The key protocol (the checker replays it exactly): ``key`` splits once into an init
    key (the start is ``classifier.init_params`` of it, for x's features and
    ``classes``) and an order key. An epoch is n // batch steps; each epoch splits the
    order key once, carries the first half on and shuffles the rows with the second
    (``jax.random.permutation`` of n); the epoch's steps take that order's consecutive
    slices of ``batch`` rows, and a step moves the params by ``-lr`` times the gradient of
    ``classifier.loss`` on its rows. Training stops after ``steps`` steps, mid-epoch or
    not.

    Checked: within relative 1e-4 of the checker's replay (odd n and batch, 3 classes,
    steps and lr drawn per run); bitwise the same under two numpy/Python global seeds,
    which it must neither read nor change. Size hint: 12 lines.
    """
    ### BEGIN SOLUTION stage 3: train_classifier (a fresh key per epoch's shuffle)
    k_init, k_order = jax.random.split(key)
    params = classifier.init_params(k_init, features=x.shape[1], classes=classes)
    n = x.shape[0]
    per_epoch = n // batch

    @jax.jit
    def step(params, rows):
        grads = jax.grad(classifier.loss)(params, x[rows], y[rows])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    order = None
    for i in range(steps):
        j = i % per_epoch
        if j == 0:
            k_order, k_epoch = jax.random.split(k_order)
            order = jax.random.permutation(k_epoch, n)
        params = step(params, order[j * batch:(j + 1) * batch])
    return params
    ### END SOLUTION


def reference_workload(seed: int, *, n_train: int = 2048, n_test: int = 512,
                       steps: int = 300, batch: int = 64, lr: float = 0.3) -> dict:
    """The course's reference workload, from one integer seed and nothing else.

    ``jax.random.key(seed)`` splits once into a data key and a training key; the data is
    ``classifier.make_dataset`` of the data key, ``n_train + n_test`` rows (no
    download): the first ``n_train`` rows train (``train_classifier`` with the training
    key and the other arguments), the rest test.

    Returns: exactly {"params": the trained params (float32, init_params' shapes),
    "train_accuracy": float, "test_accuracy": float}, the accuracies plain Python floats
    in [0, 1]: ``classifier.accuracy`` of the returned params on the training rows and
    on the test rows.

    Checked: the params within relative 1e-4 of the checker's replay of that training
    (batch and lr drawn per run); each accuracy within 1e-6 of the checker's own
    accuracy of your params on those rows; the test accuracy at most 0.05 below that of
    the checker's own training; a second call in the same process with the same seed and
    another batch, lr and steps is that call's own training and accuracies: nothing may
    carry over from an earlier call; bitwise the same under two global seeds and in a
    fresh process; another seed gives other params. Size hint: 8 lines.
    """
    ### BEGIN SOLUTION stage 3: reference_workload (derive every key from the seed)
    k_data, k_train = jax.random.split(jax.random.key(seed))
    x, y = classifier.make_dataset(k_data, n_train + n_test)
    params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps, batch=batch,
                              lr=lr)
    return {"params": params,
            "train_accuracy": float(classifier.accuracy(params, x[:n_train], y[:n_train])),
            "test_accuracy": float(classifier.accuracy(params, x[n_train:], y[n_train:]))}
    ### END SOLUTION

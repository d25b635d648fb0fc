"""foundations: blind mistakes, written from the README, starter and solution only."""

_MSE = "return jnp.mean((pred - target) ** 2)"

_GRADS_RET = 'return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.sum(residual) / n}'

_FIT_LOOP = ("    for _ in range(steps):\n"
             "        k_batches, k_step = jax.random.split(k_batches)\n"
             "        params = step(params, k_step)")

_FIT_UPDATE = ("        grads = regression_grads(params, x[rows], y[rows])\n"
               "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)")

_EPOCH_SHUFFLE = ("            k_order, k_epoch = jax.random.split(k_order)\n"
                  "            order = jax.random.permutation(k_epoch, n)")

_WL_KEYS = "    k_data, k_train = jax.random.split(jax.random.key(seed))"
_WL_DATA = "    x, y = classifier.make_dataset(k_data, n_train + n_test)"
_WL_TRAIN = ("    params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps, batch=batch,\n"
             "                              lr=lr)")
_WL_TRAIN_ACC = 'float(classifier.accuracy(params, x[:n_train], y[:n_train]))'
_WL_TEST_ACC = 'float(classifier.accuracy(params, x[n_train:], y[n_train:]))'

MISTAKES = [
    # ------------------------------------------------------------------ stage 1: mse
    {"stage": 1, "id": "blind-mse-sum-not-mean",
     "misunderstood": "'one number for the whole array' read as the total: sums the squared errors instead of averaging them",
     "edits": [(_MSE, "return jnp.sum((pred - target) ** 2)")]},
    {"stage": 1, "id": "blind-mse-expanded-square",
     "misunderstood": "expands (p - t)^2 into p^2 - 2pt + t^2, which cancels catastrophically for large values a few units apart",
     "edits": [(_MSE, "return jnp.mean(pred ** 2 - 2 * pred * target + target ** 2)")]},
    {"stage": 1, "id": "blind-mse-absolute-error",
     "misunderstood": "averages the absolute error (MAE) instead of the squared error",
     "edits": [(_MSE, "return jnp.mean(jnp.abs(pred - target))")]},
    {"stage": 1, "id": "blind-mse-root-mean-square",
     "misunderstood": "returns the root mean squared error (RMSE), taking a square root the contract never asks for",
     "edits": [(_MSE, "return jnp.sqrt(jnp.mean((pred - target) ** 2))")]},
    {"stage": 1, "id": "blind-mse-last-axis-only",
     "misunderstood": "averages over the last axis only (per-row errors), so rank >= 2 gives a vector and rank 0 has no axis",
     "edits": [(_MSE, "return jnp.mean((pred - target) ** 2, axis=-1)")]},
    {"stage": 1, "id": "blind-mse-numpy-float64",
     "misunderstood": "matches the checker's float64 by computing in NumPy float64: not traceable under jit and not a float32 result",
     "edits": [(_MSE, "import numpy as np\n"
                      "    diff = np.asarray(pred, np.float64) - np.asarray(target, np.float64)\n"
                      "    return np.mean(diff ** 2)")]},
    {"stage": 1, "id": "blind-mse-unbiased-divisor",
     "misunderstood": "divides by size - 1 like an unbiased variance; a one-element array divides by zero",
     "edits": [(_MSE, "return jnp.sum((pred - target) ** 2) / (pred.size - 1)")]},
    {"stage": 1, "id": "blind-mse-square-of-mean",
     "misunderstood": "squares the mean error (bias squared) instead of averaging the squared errors",
     "edits": [(_MSE, "return jnp.mean(pred - target) ** 2")]},
    {"stage": 1, "id": "blind-mse-stability-epsilon",
     "misunderstood": "adds a small epsilon 'for stability', so pred == target no longer gives exactly 0 and tiny errors are swamped",
     "edits": [(_MSE, "return jnp.mean((pred - target) ** 2 + 1e-8)")]},
    {"stage": 1, "id": "blind-mse-half-convention",
     "misunderstood": "uses the 1/2 * MSE convention from gradient derivations instead of the plain mean",
     "edits": [(_MSE, "return 0.5 * jnp.mean((pred - target) ** 2)")]},
    {"stage": 1, "id": "blind-mse-len-divisor",
     "misunderstood": "divides the sum by len(pred), the first axis only: right for rank 1, wrong for rank >= 2, fails for 0-d",
     "edits": [(_MSE, "return jnp.sum((pred - target) ** 2) / len(pred)")]},
    {"stage": 1, "id": "blind-mse-rescaled-by-max",
     "misunderstood": "rescales by the largest difference to avoid overflow at 1e17, which divides 0 by 0 when pred == target",
     "edits": [(_MSE, "diff = pred - target\n"
                      "    scale = jnp.max(jnp.abs(diff))\n"
                      "    return jnp.mean((diff / scale) ** 2) * scale ** 2")]},

    # --------------------------------------------------------- stage 2: regression_grads
    {"stage": 2, "id": "blind-grads-missing-factor-two",
     "misunderstood": "differentiates (p - y)^2 as (p - y), dropping the factor 2",
     "edits": [(_GRADS_RET, 'return {"w": (x.T @ residual) / n, "b": jnp.sum(residual) / n}')]},
    {"stage": 2, "id": "blind-grads-sum-not-mean",
     "misunderstood": "gradient of the summed loss: forgets that the loss is a mean, so no division by n",
     "edits": [(_GRADS_RET, 'return {"w": 2.0 * (x.T @ residual), "b": 2.0 * jnp.sum(residual)}')]},
    {"stage": 2, "id": "blind-grads-divide-by-features",
     "misunderstood": "takes n from the feature axis (x.shape[1]) instead of the example axis",
     "edits": [("    n = x.shape[0]\n    return {\"w\"", "    n = x.shape[1]\n    return {\"w\"")]},
    {"stage": 2, "id": "blind-grads-residual-sign",
     "misunderstood": "writes the residual as y - prediction, flipping the gradient's sign",
     "edits": [("residual = predict(params, x) - y", "residual = y - predict(params, x)")]},
    {"stage": 2, "id": "blind-grads-forgets-bias",
     "misunderstood": "recomputes the prediction by hand as x @ w and forgets the bias term",
     "edits": [("residual = predict(params, x) - y", 'residual = x @ params["w"] - y')]},
    {"stage": 2, "id": "blind-grads-uses-autodiff",
     "misunderstood": "'check against finite differences' read as 'any correct gradient': calls jax.grad, which the rule forbids",
     "edits": [(_GRADS_RET, "return jax.grad(regression_loss)(params, x, y)")]},
    {"stage": 2, "id": "blind-grads-bias-not-reduced",
     "misunderstood": "forgets that b is shared by every example: returns a per-example bias gradient of shape (n,)",
     "edits": [(_GRADS_RET, 'return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * residual / n}')]},
    {"stage": 2, "id": "blind-grads-mean-over-features",
     "misunderstood": "averages x * residual over the feature axis instead of the example axis, giving an (n,) 'w' gradient",
     "edits": [(_GRADS_RET, 'return {"w": 2.0 * jnp.mean(x * residual[:, None], axis=1), '
                            '"b": 2.0 * jnp.sum(residual) / n}')]},

    # ----------------------------------------------------------- stage 2: fit_regression
    {"stage": 2, "id": "blind-fit-reuses-stream-key",
     "misunderstood": "passes the same batch-stream key to every step, so every step draws the same rows",
     "edits": [(_FIT_LOOP, "    for _ in range(steps):\n"
                           "        params = step(params, k_batches)")]},
    {"stage": 2, "id": "blind-fit-carries-second-half",
     "misunderstood": "carries the second half of each split on and draws rows with the first (halves swapped)",
     "edits": [("k_batches, k_step = jax.random.split(k_batches)",
                "k_step, k_batches = jax.random.split(k_batches)")]},
    {"stage": 2, "id": "blind-fit-init-from-parent-key",
     "misunderstood": "initialises from the unsplit key instead of the init half of its split (a key used twice)",
     "edits": [("params = init_linear(k_init, x.shape[1])", "params = init_linear(key, x.shape[1])")]},
    {"stage": 2, "id": "blind-fit-init-and-stream-swapped",
     "misunderstood": "takes the stream key from the first half of the split and the init key from the second",
     "edits": [("    k_init, k_batches = jax.random.split(key)",
                "    k_batches, k_init = jax.random.split(key)")]},
    {"stage": 2, "id": "blind-fit-randint-inclusive-max",
     "misunderstood": "treats randint's maxval as inclusive and passes n - 1, so the last row is never drawn",
     "edits": [("rows = jax.random.randint(k_step, (batch,), 0, n)",
                "rows = jax.random.randint(k_step, (batch,), 0, n - 1)")]},
    {"stage": 2, "id": "blind-fit-rows-without-replacement",
     "misunderstood": "draws each batch as the head of a permutation (no replacement) instead of uniform randint indices",
     "edits": [("rows = jax.random.randint(k_step, (batch,), 0, n)",
                "rows = jax.random.permutation(k_step, n)[:batch]")]},
    {"stage": 2, "id": "blind-fit-uniform-floats-as-rows",
     "misunderstood": "draws uniform floats in [0, 1) and scales them to row indices instead of calling randint",
     "edits": [("rows = jax.random.randint(k_step, (batch,), 0, n)",
                "rows = (jax.random.uniform(k_step, (batch,)) * n).astype(jnp.int32)")]},
    {"stage": 2, "id": "blind-fit-seeds-numpy-global",
     "misunderstood": "seeds numpy's global generator 'for reproducibility', changing global state it must not touch",
     "edits": [("    k_init, k_batches = jax.random.split(key)",
                "    import numpy as np\n"
                "    np.random.seed(0)\n"
                "    k_init, k_batches = jax.random.split(key)")]},
    {"stage": 2, "id": "blind-fit-splits-all-keys-upfront",
     "misunderstood": "splits the stream key into `steps` keys at once (a common idiom) instead of the per-step split-and-carry chain",
     "edits": [(_FIT_LOOP, "    for k_step in jax.random.split(k_batches, steps):\n"
                           "        params = step(params, k_step)")]},
    {"stage": 2, "id": "blind-fit-full-batch",
     "misunderstood": "draws the rows but computes the gradient on all rows (full-batch gradient descent)",
     "edits": [("grads = regression_grads(params, x[rows], y[rows])",
                "grads = regression_grads(params, x, y)")]},
    {"stage": 2, "id": "blind-fit-lr-divided-by-batch",
     "misunderstood": "divides the step by the batch size although regression_grads already averages over the rows",
     "edits": [(_FIT_UPDATE, "        grads = regression_grads(params, x[rows], y[rows])\n"
                             "        return jax.tree.map(lambda p, g: p - lr * g / batch, params, grads)")]},
    {"stage": 2, "id": "blind-fit-one-step-short",
     "misunderstood": "counts the initialisation as a step and runs steps - 1 updates",
     "edits": [("    for _ in range(steps):", "    for _ in range(steps - 1):")]},

    {"stage": 2, "id": "blind-fit-cached-step-closure",
     "misunderstood": "caches the jitted step in a module-level dict keyed on (x.shape, batch, lr) to save compiles; the cached step closes over the first call's x and y",
     "edits": [(_FIT_LOOP, "    step = globals().setdefault('_FIT_STEPS', {}).setdefault(\n"
                           "        (x.shape, batch, lr), step)\n" + _FIT_LOOP)]},

    # --------------------------------------------------------- stage 3: train_classifier
    {"stage": 3, "id": "blind-train-bfloat16-inputs",
     "misunderstood": "casts x to bfloat16 'for speed' before training; the params stay float32 but every input loses its low bits",
     "edits": [("    k_init, k_order = jax.random.split(key)",
                "    x = x.astype(jnp.bfloat16)\n    k_init, k_order = jax.random.split(key)")]},
    {"stage": 3, "id": "blind-train-shuffles-once",
     "misunderstood": "'shuffled once per epoch' read as 'shuffled once': one permutation reused for every epoch",
     "edits": [("        if j == 0:", "        if i == 0:")]},
    {"stage": 3, "id": "blind-train-order-key-not-split",
     "misunderstood": "permutes with the order key itself every epoch without splitting it, so every epoch has the same order",
     "edits": [(_EPOCH_SHUFFLE, "            order = jax.random.permutation(k_order, n)")]},
    {"stage": 3, "id": "blind-train-epoch-halves-swapped",
     "misunderstood": "shuffles with the first half of the split and carries the second half on",
     "edits": [("k_order, k_epoch = jax.random.split(k_order)",
                "k_epoch, k_order = jax.random.split(k_order)")]},
    {"stage": 3, "id": "blind-train-epoch-ceil",
     "misunderstood": "counts the partial last batch as a step: an epoch of ceil(n / batch) steps instead of n // batch",
     "edits": [("    per_epoch = n // batch", "    per_epoch = (n + batch - 1) // batch")]},
    {"stage": 3, "id": "blind-train-grad-of-loss-sum",
     "misunderstood": "differentiates classifier.loss_sum (summed over the batch) instead of the mean loss",
     "edits": [("grads = jax.grad(classifier.loss)(params, x[rows], y[rows])",
                "grads = jax.grad(classifier.loss_sum)(params, x[rows], y[rows])")]},
    {"stage": 3, "id": "blind-train-init-default-sizes",
     "misunderstood": "calls init_params with its defaults, ignoring x's feature count and the classes argument",
     "edits": [("params = classifier.init_params(k_init, features=x.shape[1], classes=classes)",
                "params = classifier.init_params(k_init)")]},
    {"stage": 3, "id": "blind-train-fold-in-epoch",
     "misunderstood": "derives each epoch's shuffle key with fold_in(order_key, epoch) instead of the split-and-carry chain",
     "edits": [("            k_order, k_epoch = jax.random.split(k_order)",
                "            k_epoch = jax.random.fold_in(k_order, i // per_epoch)")]},
    {"stage": 3, "id": "blind-train-permutes-full-batches-only",
     "misunderstood": "permutes only the first per_epoch * batch rows, so the tail rows are never trained on",
     "edits": [("order = jax.random.permutation(k_epoch, n)",
                "order = jax.random.permutation(k_epoch, per_epoch * batch)")]},
    {"stage": 3, "id": "blind-train-steps-as-epochs",
     "misunderstood": "reads `steps` as a number of epochs and runs steps * (n // batch) updates",
     "edits": [("    for i in range(steps):", "    for i in range(steps * per_epoch):")]},
    {"stage": 3, "id": "blind-train-order-with-replacement",
     "misunderstood": "copies the regression fit's randint sampling: the epoch order is drawn with replacement, not a permutation",
     "edits": [("order = jax.random.permutation(k_epoch, n)",
                "order = jax.random.randint(k_epoch, (n,), 0, n)")]},
    {"stage": 3, "id": "blind-train-init-from-parent-key",
     "misunderstood": "initialises from the unsplit key, so the init and the order chain share randomness",
     "edits": [("params = classifier.init_params(k_init, features=x.shape[1], classes=classes)",
                "params = classifier.init_params(key, features=x.shape[1], classes=classes)")]},

    # ------------------------------------------------------- stage 3: reference_workload
    {"stage": 3, "id": "blind-workload-trains-on-last-rows",
     "misunderstood": "trains on the last n_train rows instead of the first n_train",
     "edits": [(_WL_TRAIN, "    params = train_classifier(k_train, x[-n_train:], y[-n_train:], steps=steps,\n"
                           "                              batch=batch, lr=lr)")]},
    {"stage": 3, "id": "blind-workload-test-acc-on-train-rows",
     "misunderstood": "copy-pastes the train-accuracy line, so test_accuracy is measured on the training rows",
     "edits": [(_WL_TEST_ACC, "float(classifier.accuracy(params, x[:n_train], y[:n_train]))")]},
    {"stage": 3, "id": "blind-workload-one-key-for-data-and-training",
     "misunderstood": "uses jax.random.key(seed) for both the dataset and the training instead of splitting it",
     "edits": [(_WL_KEYS, "    k_data = k_train = jax.random.key(seed)")]},
    {"stage": 3, "id": "blind-workload-separate-test-dataset",
     "misunderstood": "splits into data/test/train keys and draws the test rows as a second dataset (other cluster centres)",
     "edits": [(_WL_KEYS + "\n" + _WL_DATA,
                "    k_data, k_test, k_train = jax.random.split(jax.random.key(seed), 3)\n"
                "    x, y = classifier.make_dataset(k_data, n_train)\n"
                "    x_test, y_test = classifier.make_dataset(k_test, n_test)"),
               (_WL_TEST_ACC, "float(classifier.accuracy(params, x_test, y_test))")]},
    {"stage": 3, "id": "blind-workload-ignores-hyperparameters",
     "misunderstood": "calls train_classifier with its defaults, dropping the steps, batch and lr it was given",
     "edits": [(_WL_TRAIN, "    params = train_classifier(k_train, x[:n_train], y[:n_train])")]},
    {"stage": 3, "id": "blind-workload-accuracy-as-jax-arrays",
     "misunderstood": "returns the accuracies as JAX scalars instead of plain Python floats",
     "edits": [(_WL_TRAIN_ACC, "classifier.accuracy(params, x[:n_train], y[:n_train])"),
               (_WL_TEST_ACC, "classifier.accuracy(params, x[n_train:], y[n_train:])")]},
    {"stage": 3, "id": "blind-workload-rounded-accuracy",
     "misunderstood": "rounds the accuracies to two decimals for a tidy report, so they no longer match the params' score",
     "edits": [(_WL_TRAIN_ACC, "round(float(classifier.accuracy(params, x[:n_train], y[:n_train])), 2)"),
               (_WL_TEST_ACC, "round(float(classifier.accuracy(params, x[n_train:], y[n_train:])), 2)")]},
    {"stage": 3, "id": "blind-workload-fixed-key",
     "misunderstood": "hard-codes jax.random.key(0) 'for reproducibility', so another seed gives the same params",
     "edits": [(_WL_KEYS, "    k_data, k_train = jax.random.split(jax.random.key(0))")]},
    {"stage": 3, "id": "blind-workload-seeds-python-random",
     "misunderstood": "seeds Python's global random module with the seed, changing global state it must not touch",
     "edits": [(_WL_KEYS, "    import random\n"
                          "    random.seed(seed)\n" + _WL_KEYS)]},
    {"stage": 3, "id": "blind-workload-extra-fields",
     "misunderstood": "adds a 'seed' field to the result, which must have exactly three keys",
     "edits": [('    return {"params": params,', '    return {"params": params, "seed": seed,')]},
    {"stage": 3, "id": "blind-workload-trains-on-all-rows",
     "misunderstood": "trains on every row, test rows included, so the test accuracy is no longer held out",
     "edits": [(_WL_TRAIN, "    params = train_classifier(k_train, x, y, steps=steps, batch=batch, lr=lr)")]},
]


# A second blind batch (2026-12-06, issue 53): written from the learner's copy and
# the solutions only, each confirmed wrong by a measurement quoted in its line.
MISTAKES += [
    {"stage": 1, "id": "blind-b2-mse-first-axis",
     "misunderstood": "averages over the first dimension only (sum / shape[0]) instead of every element, and a 0-d input has no shape[0]: measured 'mse(ones(3,4), zeros) ref=1.0 mut=4.0; 0-d: ref=4.0 mut=IndexError'",
     "named_by": ["first dimension", "shape[0]", "0-d", "every element"],
     "edits": [("    return jnp.mean((pred - target) ** 2)\n",
                "    return jnp.sum((pred - target) ** 2) / pred.shape[0]\n")]},
    {"stage": 2, "id": "blind-b2-grads-divide-by-features",
     "misunderstood": "divides the hand-written gradient by x.shape[1] (features) instead of the number of rows n, right only when n == d: measured 'n=50,d=5 grad b ref=5.6156 mut=56.1558 (x10.0)'",
     "named_by": ["shape[1]", "number of rows", "features", "n == d"],
     "edits": [("    n = x.shape[0]\n    return {\"w\": 2.0",
                "    n = x.shape[1]\n    return {\"w\": 2.0")]},
    {"stage": 2, "id": "blind-b2-fit-stream-key-not-carried",
     "misunderstood": "splits the stream key every step but never carries the first half on, so every step draws the same rows from one reused key, unlike the protocol the checker replays: measured 'steps=50 batch=8: max rel diff of params vs reference 1.54'",
     "named_by": ["same rows", "key reused", "carry the key", "every step"],
     "edits": [("        k_batches, k_step = jax.random.split(k_batches)\n",
                "        k_step = jax.random.split(k_batches)[1]\n")]},
    {"stage": 3, "id": "blind-b2-shuffle-once",
     "misunderstood": "tests the global step (i == 0) instead of the step within the epoch, so the rows are shuffled once and every later epoch reuses the first order: measured 'n=101 batch=30 steps=12 (3 per epoch): max rel diff of params vs reference 87.3'",
     "named_by": ["same order", "every epoch", "shuffled once", "first epoch"],
     "edits": [("        if j == 0:\n", "        if i == 0:\n")]},
    {"stage": 3, "id": "blind-b2-partial-batch-epoch",
     "misunderstood": "rounds the steps per epoch up, so an epoch gets an extra short batch (a partial slice) and the reshuffle comes one step late, against 'an epoch is n // batch steps': measured 'n=101 batch=30 steps=12 (3 per epoch): max rel diff of params vs reference 455'",
     "named_by": ["partial batch", "round up", "steps per epoch", "off by one"],
     "edits": [("    per_epoch = n // batch\n", "    per_epoch = -(-n // batch)\n")]},
    {"stage": 3, "id": "blind-b2-data-train-keys-swapped",
     "misunderstood": "swaps the two halves of the seed's split (data from the second half, training from the first), so both data and training differ from the stated protocol: measured 'seed 7: max rel diff of params vs reference 1.31e+04, test acc ref=0.719 mut=0.766'",
     "named_by": ["swapped", "data key", "training key", "split halves"],
     "edits": [("    k_data, k_train = jax.random.split(jax.random.key(seed))\n",
                "    k_train, k_data = jax.random.split(jax.random.key(seed))\n")]},
    # blind batch 3 (2026-12-06, written from a learner's copy and the solutions only)
    {"stage": 1, "id": "blind-b3-mse-assumes-leading-batch-axis",
     "misunderstood": "reshapes the squares to (pred.shape[0], -1) as if every input had a leading batch axis, but 0-d inputs are in the contract; measured: 0-d mse(3, 1) ref 4.0, mistake raises IndexError: tuple index out of range (rank 2 unchanged: 9.1667 both)",
     "named_by": ["0-d", "scalar", "batch axis", "reshape"],
     "edits": [("    return jnp.mean((pred - target) ** 2)\n",
                "    return jnp.mean(((pred - target) ** 2).reshape(pred.shape[0], -1))\n")]},
    {"stage": 2, "id": "blind-b3-grads-bessel-divisor",
     "misunderstood": "divides the hand gradient by n - 1 (the sample-variance habit) though the loss is a mean over n rows; measured b-gradient n=5: ref 6.045, mistake 7.556 (25% off); n=1: ref 4.217, mistake inf",
     "named_by": ["n - 1", "divisor", "bessel", "off by one"],
     "edits": [("    n = x.shape[0]\n    return {\"w\": 2.0",
                "    n = x.shape[0] - 1\n    return {\"w\": 2.0")]},
    {"stage": 2, "id": "blind-b3-fit-step-cache-keyed-on-batch",
     "misunderstood": "memoises the jitted step per batch size with x, y passed in but lr and n baked in from the first call, so a later call with another lr runs the first one's; measured: lr=0.2 after an lr=0.05 call -> rel diff 0.126 from the reference and 0 from the lr=0.05 fit",
     "named_by": ["cache", "earlier call", "learning rate", "keyed on"],
     "edits": [("""    @jax.jit
    def step(params, k_step):
        rows = jax.random.randint(k_step, (batch,), 0, n)
        grads = regression_grads(params, x[rows], y[rows])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)

    for _ in range(steps):
        k_batches, k_step = jax.random.split(k_batches)
        params = step(params, k_step)
""", """    step = fit_regression.__dict__.get(("step", batch))
    if step is None:  # compile the step once per batch size; data passed in
        @jax.jit
        def step(params, k_step, x, y):
            rows = jax.random.randint(k_step, (batch,), 0, n)
            grads = regression_grads(params, x[rows], y[rows])
            return jax.tree.map(lambda p, g: p - lr * g, params, grads)
        fit_regression.__dict__[("step", batch)] = step

    for _ in range(steps):
        k_batches, k_step = jax.random.split(k_batches)
        params = step(params, k_step, x, y)
""")]},
    {"stage": 2, "id": "blind-b3-fit-batch-clipped-to-n",
     "misunderstood": "clips each step's draw to min(batch, n) rows as if a batch could not exceed the data, but the protocol draws `batch` indices in [0, n) with replacement for any batch >= 1; measured n=12: batch=8 rel diff 0, batch=32 rel diff 0.113 from the reference",
     "named_by": ["batch larger than n", "clipped", "min(batch, n)", "with replacement"],
     "edits": [("        rows = jax.random.randint(k_step, (batch,), 0, n)\n",
                "        rows = jax.random.randint(k_step, (min(batch, n),), 0, n)\n")]},
    {"stage": 3, "id": "blind-b3-train-step-cache-keyed-on-shape",
     "misunderstood": "caches the jitted step per (x.shape, batch) to avoid recompiling, but the step closes over the first call's x, y and lr, so new data of the same shape trains on the old rows; measured second call with new data: params rel diff 3.23e+03 from the reference",
     "named_by": ["cache", "closure", "earlier call", "first call's data"],
     "edits": [("""    @jax.jit
    def step(params, rows):
        grads = jax.grad(classifier.loss)(params, x[rows], y[rows])
        return jax.tree.map(lambda p, g: p - lr * g, params, grads)
""", """    steps_cache = train_classifier.__dict__.setdefault("_steps", {})
    if (x.shape, batch) not in steps_cache:  # don't recompile for a shape seen before
        @jax.jit
        def step(params, rows):
            grads = jax.grad(classifier.loss)(params, x[rows], y[rows])
            return jax.tree.map(lambda p, g: p - lr * g, params, grads)
        steps_cache[(x.shape, batch)] = step
    step = steps_cache[(x.shape, batch)]
""")]},
    {"stage": 3, "id": "blind-b3-workload-memoised-by-seed",
     "misunderstood": "memoises the whole result by seed ('a function of the seed'), but it is also a function of n_train, n_test, steps, batch and lr; measured: seed 0 with batch=32 lr=0.1 after batch=16 lr=0.3 returns the first call's object, params rel diff 246 from the reference",
     "named_by": ["cache", "memo", "earlier call", "keyed on the seed"],
     "edits": [("    k_data, k_train = jax.random.split(jax.random.key(seed))\n",
                "    memo = reference_workload.__dict__.setdefault(\"_runs\", {})\n"
                "    if seed in memo:  # the workload is a function of the seed\n"
                "        return memo[seed]\n"
                "    k_data, k_train = jax.random.split(jax.random.key(seed))\n"),
               ("    return {\"params\": params,\n",
                "    memo[seed] = result = {\"params\": params,\n"),
               ("\"test_accuracy\": float(classifier.accuracy(params, x[n_train:], y[n_train:]))}\n",
                "\"test_accuracy\": float(classifier.accuracy(params, x[n_train:], y[n_train:]))}\n"
                "    return result\n")]},
    # ------------------------------------------------------------ batch 4 (blind, s7)
    {"stage": 1, "id": "blind-b4-mse-first-axis-count",
     "misunderstood": "divides the summed squares by pred.shape[0] (the row count) instead of the element count, right only for rank 1; measured: mse of a (3,5) array vs zeros: ref 1.2038, mutant 6.0191; rank 0 raises IndexError",
     "named_by": ["shape[0]", "element count", "first axis", "rank"],
     "edits": [("    return jnp.mean((pred - target) ** 2)\n",
                "    return jnp.sum((pred - target) ** 2) / pred.shape[0]\n")]},
    {"stage": 2, "id": "blind-b4-grads-divide-by-features",
     "misunderstood": "divides the hand gradient by x.shape[1] (features) instead of x.shape[0] (rows): right only when n == d; measured: n=40, d=3: grad b ref 4.7628, mutant 63.5035",
     "named_by": ["shape[1]", "features", "rows", "divide"],
     "edits": [("    n = x.shape[0]\n    return {\"w\": 2.0",
                "    n = x.shape[1]\n    return {\"w\": 2.0")]},
    {"stage": 2, "id": "blind-b4-fit-step-cached-by-shape",
     "misunderstood": "caches the jitted step per input shape on the function object, so a later call of the same shape reuses the closure over the first call's x, y, lr and batch; measured: second call, new data of the same shape: fitted b ref 2.3523, mutant -0.2480 (the first data's fit)",
     "named_by": ["cache", "earlier call", "closure", "first call"],
     "edits": [("    @jax.jit\n    def step(params, k_step):\n        rows = jax.random.randint(k_step, (batch,), 0, n)\n        grads = regression_grads(params, x[rows], y[rows])\n        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n",
                "    steps_cache = fit_regression.__dict__.setdefault(\"_steps\", {})\n    if x.shape not in steps_cache:\n        @jax.jit\n        def step(params, k_step):\n            rows = jax.random.randint(k_step, (batch,), 0, n)\n            grads = regression_grads(params, x[rows], y[rows])\n            return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n        steps_cache[x.shape] = step\n    step = steps_cache[x.shape]\n")]},
    {"stage": 2, "id": "blind-b4-fit-randint-maxval-inclusive",
     "misunderstood": "takes randint's maxval as inclusive and draws in [0, n-1), so the last row is never drawn and every batch differs from the protocol's; measured: n=5, batch=8, 20 steps: b ref -0.1955, mutant -0.2333; w off by 10% relative",
     "named_by": ["maxval", "off-by-one", "last row", "randint"],
     "edits": [("        rows = jax.random.randint(k_step, (batch,), 0, n)\n",
                "        rows = jax.random.randint(k_step, (batch,), 0, n - 1)\n")]},
    {"stage": 3, "id": "blind-b4-classifier-epoch-ceil",
     "misunderstood": "counts an epoch as ceil(n / batch) steps, training on a short last batch of the leftover rows instead of n // batch full ones; measured: n=101, batch=16, 30 steps: max relative param difference 710",
     "named_by": ["epoch", "partial batch", "leftover", "n // batch"],
     "edits": [("    per_epoch = n // batch\n",
                "    per_epoch = -(-n // batch)\n")]},
    {"stage": 3, "id": "blind-b4-workload-cached-by-seed",
     "misunderstood": "memoises the workload on the seed alone, so a second call with the same seed and another batch, lr or steps returns the first call's training; measured: second call seed 0 with steps 40, batch 16, lr 0.1: max |param diff| 0.0497, train_accuracy ref 0.9023 vs mutant 0.8828",
     "named_by": ["cache", "seed", "earlier call", "memo"],
     "edits": [("    k_data, k_train = jax.random.split(jax.random.key(seed))\n",
                "    runs = reference_workload.__dict__.setdefault(\"_runs\", {})\n    if seed in runs:\n        return runs[seed]\n    k_data, k_train = jax.random.split(jax.random.key(seed))\n"),
               ("    return {\"params\": params,\n            \"train_accuracy\"",
                "    runs[seed] = {\"params\": params,\n            \"train_accuracy\""),
               ("            \"test_accuracy\": float(classifier.accuracy(params, x[n_train:], y[n_train:]))}\n",
                "            \"test_accuracy\": float(classifier.accuracy(params, x[n_train:], y[n_train:]))}\n    return runs[seed]\n")]},
]

# Batch b5 (2026-12-07): six more, written from the learner's copy (README, starter,
# notebooks) and the reference solution only, never a checker or this corpus.
MISTAKES += [
    {"stage": 1, "id": "blind-b5-mse-expanded-square",
     "misunderstood": "The learner believed expanding (p - t)^2 into p^2 - 2pt + t^2 is the same number in float32, not seeing that large nearly equal values cancel catastrophically.",
     "named_by": ["expanded square", "cancellation", "large values a few units apart"],
     "edits": [("    return jnp.mean((pred - target) ** 2)",
                "    return jnp.mean(pred * pred - 2.0 * pred * target + target * target)")]},
    {"stage": 2, "id": "blind-b5-grads-divide-by-features",
     "misunderstood": "The learner believed the mean in the loss runs over x.shape[1] (the features) rather than over the n rows, so the hand gradient is scaled by n/d.",
     "named_by": ["number of rows", "wrong axis", "divide by n"],
     "edits": [("    n = x.shape[0]\n    return {\"w\"", "    n = x.shape[1]\n    return {\"w\"")]},
    {"stage": 2, "id": "blind-b5-randint-maxval-inclusive",
     "misunderstood": "The learner believed jax.random.randint's maxval is inclusive and passed n - 1, so the last row is never drawn and every draw differs from the replay.",
     "named_by": ["randint", "maxval", "exclusive", "last row"],
     "edits": [("rows = jax.random.randint(k_step, (batch,), 0, n)",
                "rows = jax.random.randint(k_step, (batch,), 0, n - 1)")]},
    {"stage": 2, "id": "blind-b5-step-cached-by-shape",
     "misunderstood": "The learner believed the jitted update step can be kept across calls keyed on the data's shape, but it closes over the first call's x, y, batch and lr, so a later call with new data of that shape fits the old data.",
     "named_by": ["earlier call", "closes over", "new data", "cache keyed on shape"],
     "edits": [("    @jax.jit\n"
                "    def step(params, k_step):\n"
                "        rows = jax.random.randint(k_step, (batch,), 0, n)\n"
                "        grads = regression_grads(params, x[rows], y[rows])\n"
                "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n",
                "    def make_step():\n"
                "        @jax.jit\n"
                "        def step(params, k_step):\n"
                "            rows = jax.random.randint(k_step, (batch,), 0, n)\n"
                "            grads = regression_grads(params, x[rows], y[rows])\n"
                "            return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n"
                "        return step\n"
                "\n"
                "    compiled = fit_regression.__dict__.setdefault(\"_step_by_shape\", {})\n"
                "    if x.shape not in compiled:\n"
                "        compiled[x.shape] = make_step()\n"
                "    step = compiled[x.shape]\n")]},
    {"stage": 3, "id": "blind-b5-shuffle-only-first-epoch",
     "misunderstood": "The learner believed one permutation drawn at the first step serves every epoch, so later epochs replay the first epoch's order instead of splitting the order key again.",
     "named_by": ["every epoch", "shuffle", "order key"],
     "edits": [("        if j == 0:", "        if i == 0:")]},
    {"stage": 3, "id": "blind-b5-workload-cached-by-seed",
     "misunderstood": "The learner believed the workload is a function of the seed alone and cached its result by seed, so a second call with the same seed but another batch, lr or steps returns the first call's training.",
     "named_by": ["cache", "earlier call", "same seed", "batch lr steps"],
     "edits": [("    k_data, k_train = jax.random.split(jax.random.key(seed))",
                "    cache = reference_workload.__dict__.setdefault(\"_by_seed\", {})\n"
                "    if seed in cache:\n"
                "        return cache[seed]\n"
                "    k_data, k_train = jax.random.split(jax.random.key(seed))"),
               ("    return {\"params\": params,\n", "    cache[seed] = {\"params\": params,\n"),
               ("y[n_train:]))}\n", "y[n_train:]))}\n    return cache[seed]\n")]},
]


# Batch b6 (2026-12-07, ninth session): six more, written from the learner's copy
# (README, starter, notebooks, docs/learners.md) and the reference solution only,
# never a checker or this corpus; each confirmed wrong by hand (a differing value).
MISTAKES += [
    {"stage": 1, "id": 'blind-b6-mse-expanded-square',
     "misunderstood": 'The learner expanded (p - t)^2 into p^2 - 2pt + t^2, believing it is the same number; in float32 the expanded form cancels catastrophically for large values a few units apart.',
     "named_by": ['square expanded', 'expanded square cancels', 'large values a few units apart', 'subtract before squaring'],
     "edits": [('    return jnp.mean((pred - target) ** 2)',
                '    return jnp.mean(pred ** 2 - 2 * pred * target + target ** 2)')]},
    {"stage": 2, "id": 'blind-b6-grads-divide-by-features',
     "misunderstood": 'The learner divided the hand-written gradient by x.shape[1] (the feature count d) believing it is the number of rows being averaged; the mean is over n rows, so the gradient is off by a factor n/d whenever n != d.',
     "named_by": ['divided by the number of features', 'divide by the number of rows n', 'x.shape[0] not x.shape[1]', 'gradient scaled by n/d'],
     "edits": [('    n = x.shape[0]\n    return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.sum(residual) / n}',
                '    n = x.shape[1]\n    return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.sum(residual) / n}')]},
    {"stage": 2, "id": 'blind-b6-fit-swapped-key-halves',
     "misunderstood": 'The learner believed it does not matter which half of each split is carried on and which draws the batch; the protocol carries the first half and draws with the second, so the drawn rows (and the fitted params) differ from the replay although the fit looks just as good.',
     "named_by": ['carry the first half', 'draw with the second half', 'halves swapped'],
     "edits": [('        k_batches, k_step = jax.random.split(k_batches)',
                '        k_step, k_batches = jax.random.split(k_batches)')]},
    {"stage": 2, "id": 'blind-b6-fit-caches-step-across-calls',
     "misunderstood": "To 'jit the update step to keep it fast' the learner compiled the step once and kept it on the function across calls, not seeing that it closes over the first call's x, y, n, batch and lr; later calls with new data, another shape or another lr silently train on the first call's data and settings.",
     "named_by": ['state carried from an earlier call', 'nothing may carry over', "closes over the first call's data", 'second call with new data', 'cached jitted step'],
     "edits": [('    @jax.jit\n    def step(params, k_step):\n        rows = jax.random.randint(k_step, (batch,), 0, n)\n        grads = regression_grads(params, x[rows], y[rows])\n        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n',
                '    if getattr(fit_regression, "_step", None) is None:  # compile the update once\n        @jax.jit\n        def step(params, k_step):\n            rows = jax.random.randint(k_step, (batch,), 0, n)\n            grads = regression_grads(params, x[rows], y[rows])\n            return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n        fit_regression._step = step\n    step = fit_regression._step\n')]},
    {"stage": 3, "id": 'blind-b6-epoch-includes-partial-batch',
     "misunderstood": "The learner believed an epoch is ceil(n / batch) steps so that every row is seen, so each epoch ends with a short batch and the reshuffle comes one step late; the protocol's epoch is n // batch full batches.",
     "named_by": ['partial batch', 'an epoch is n // batch steps', 'partial last batch', 'reshuffle at the wrong step'],
     "edits": [('    per_epoch = n // batch',
                '    per_epoch = (n + batch - 1) // batch')]},
    {"stage": 3, "id": 'blind-b6-workload-ignores-batch-lr',
     "misunderstood": "The learner passed only steps on to train_classifier, believing the defaults match; a call with another batch or lr trains with the defaults, so it is not that call's own training.",
     "named_by": ["train_classifier's default", 'pass batch and lr through', 'second call with another batch and lr', 'defaults used instead of the arguments'],
     "edits": [('    params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps, batch=batch,\n                              lr=lr)',
                '    params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps)')]},
]

# Blind batch b7 (2026-12-07): written from a learner's copy and the solutions only,
# told the earlier batches' mistakes so as not to repeat them.
MISTAKES += [
    {"stage": 1, "id": 'blind-b7-mse-zero-targets-as-missing',
     "misunderstood": 'The learner treated exact zeros in the target as missing values (padding) and averaged only over the non-zero targets; the contract says exact zeros count like any other value, and pred == target == 0 becomes a mean over nothing (NaN).',
     "named_by": ['zeros count like any other value', 'masking zero targets', 'mean over a where= mask', 'NaN when everything is zero'],
     "edits": [('    return jnp.mean((pred - target) ** 2)',
                '    return jnp.mean((pred - target) ** 2, where=target != 0)')]},
    {"stage": 2, "id": 'blind-b7-grads-bias-keepdims',
     "misunderstood": "The learner summed the residual with keepdims=True so the bias gradient 'keeps a shape' like the weight gradient, returning a (1,) array where the contract asks for a float32 () like params['b']; the fit then turns b into shape (1,).",
     "named_by": ['bias gradient shape ()', 'keepdims', 'same shapes as params'],
     "edits": [('"b": 2.0 * jnp.sum(residual) / n}',
                '"b": 2.0 * jnp.sum(residual, keepdims=True) / n}')]},
    {"stage": 2, "id": 'blind-b7-fit-all-rows-one-draw',
     "misunderstood": "To vectorise, the learner drew every step's rows in one randint of shape (steps, batch) from the stream key, believing it is the same stream; the protocol splits the stream key once per step, carries the first half and draws with the second, so every batch differs from the replay.",
     "named_by": ['split the stream key every step', 'one randint for all steps', 'key protocol step for step'],
     "edits": [('    def step(params, k_step):\n        rows = jax.random.randint(k_step, (batch,), 0, n)\n',
                '    def step(params, rows):\n'),
               ('    for _ in range(steps):\n        k_batches, k_step = jax.random.split(k_batches)\n        params = step(params, k_step)\n',
                '    all_rows = jax.random.randint(k_batches, (steps, batch), 0, n)\n    for i in range(steps):\n        params = step(params, all_rows[i])\n')]},
    {"stage": 3, "id": 'blind-b7-train-sliding-window-slices',
     "misunderstood": "The learner read 'consecutive slices of batch rows' as a window that moves by one position per step (order[j:j + batch]) rather than the j-th block of batch rows (order[j*batch:(j+1)*batch]), so consecutive batches overlap and most rows are never seen.",
     "named_by": ['j-th slice of batch rows', 'slice offset j * batch', 'overlapping batches'],
     "edits": [('params = step(params, order[j * batch:(j + 1) * batch])',
                'params = step(params, order[j:j + batch])')]},
    {"stage": 3, "id": 'blind-b7-train-completes-last-epoch',
     "misunderstood": 'The learner believed training should end on an epoch boundary and rounded the step count up to whole epochs; the contract stops after exactly `steps` steps, mid-epoch or not.',
     "named_by": ['stops after steps steps', 'mid-epoch or not', 'rounded up to whole epochs'],
     "edits": [('    for i in range(steps):\n        j = i % per_epoch',
                '    for i in range(-(-steps // per_epoch) * per_epoch):\n        j = i % per_epoch')]},
    {"stage": 3, "id": 'blind-b7-workload-train-accuracy-all-rows',
     "misunderstood": "The learner reported train_accuracy as the accuracy on the whole dataset (train and test rows together), believing 'training accuracy' means the accuracy on the data set it came from; it must be the accuracy on the first n_train rows only.",
     "named_by": ['train_accuracy on the training rows', 'first n_train rows', 'accuracy on all rows'],
     "edits": [('"train_accuracy": float(classifier.accuracy(params, x[:n_train], y[:n_train])),',
                '"train_accuracy": float(classifier.accuracy(params, x, y)),')]},
]

# Blind batch b8 (2026-12-07, eleventh session): written from a learner's copy and the
# solutions only, told the 812 earlier mistakes so as not to repeat them; each
# confirmed wrong by a value it changes.
MISTAKES += [
    {"stage": 1, "id": 'blind-b8-mse-variance-of-error',
     "misunderstood": 'The learner took the mean squared error to be the variance of the errors (jnp.var(pred - target)), the spread of the residuals; the contract asks for the mean of the squared differences, which also counts a constant offset (var drops mean(d)**2, so pred = target + 3 gives 0 instead of 9).',
     "named_by": ['variance is not the mean square', 'a constant offset is an error too', 'mean of (pred - target)**2'],
     "edits": [('return jnp.mean((pred - target) ** 2)',
                'return jnp.var(pred - target)')]},
    {"stage": 2, "id": 'blind-b8-grads-w-mean-without-axis',
     "misunderstood": "The learner wrote the weight gradient as 2 * jnp.mean(x * residual[:, None]), believing the mean over the examples is implied; without axis=0 it averages over all n * d entries and returns one scalar, where the contract asks for a float32 (d,) gradient (each feature's own sum over the rows, divided by n).",
     "named_by": ['mean over the example axis only', 'axis=0 missing', 'w gradient must have shape (d,)'],
     "edits": [('"w": 2.0 * (x.T @ residual) / n',
                '"w": 2.0 * jnp.mean(x * residual[:, None])')]},
    {"stage": 2, "id": 'blind-b8-fit-standardises-features',
     "misunderstood": "The learner standardised the features (zero mean, unit std per column) before the SGD loop, believing a good fit preprocesses its inputs; the protocol steps on regression_grads of the given x's rows, so the fitted params (for the raw features) differ from the replay.",
     "named_by": ['no preprocessing of x', 'params for the raw features', 'regression_grads on the given rows'],
     "edits": [('params = init_linear(k_init, x.shape[1])\n    n = x.shape[0]',
                'params = init_linear(k_init, x.shape[1])\n    n = x.shape[0]\n    x = (x - x.mean(axis=0)) / x.std(axis=0)  # standardise the features')]},
    {"stage": 3, "id": 'blind-b8-train-labels-own-permutation',
     "misunderstood": "Reading 'a key used once is spent', the learner split the epoch key again and shuffled x and y with two different permutations, so each row meets another row's label; the protocol draws one permutation of n per epoch and takes x and y at the same rows.",
     "named_by": ['one permutation for x and y', 'labels stay with their rows', 'do not split the epoch key again'],
     "edits": [('def step(params, rows):\n        grads = jax.grad(classifier.loss)(params, x[rows], y[rows])',
                'def step(params, rows, rows_y):\n        grads = jax.grad(classifier.loss)(params, x[rows], y[rows_y])'),
               ('            order = jax.random.permutation(k_epoch, n)\n        params = step(params, order[j * batch:(j + 1) * batch])',
                '            k_x, k_y = jax.random.split(k_epoch)  # a key used once is spent\n            order = jax.random.permutation(k_x, n)\n            order_y = jax.random.permutation(k_y, n)\n        params = step(params, order[j * batch:(j + 1) * batch],\n                      order_y[j * batch:(j + 1) * batch])')]},
    {"stage": 3, "id": 'blind-b8-train-reshuffles-shuffled-order',
     "misunderstood": "The learner shuffled the already shuffled order each epoch (order = order[perm]), as a loop that shuffles its data in place does, believing it is the same as shuffling the rows; the protocol's epoch order is the epoch key's permutation of the original rows, so from the second epoch on the batches differ from the replay.",
     "named_by": ["each epoch's order is a fresh permutation of n", 'permutations are not composed', 'the original row indices'],
     "edits": [('            order = jax.random.permutation(k_epoch, n)\n',
                '            perm = jax.random.permutation(k_epoch, n)\n            order = perm if order is None else order[perm]  # reshuffle\n')]},
    {"stage": 3, "id": 'blind-b8-workload-random-held-out-split',
     "misunderstood": 'The learner shuffled the data set before splitting it, believing a held-out test set must be a random sample; the contract trains on the first n_train rows of make_dataset and tests on the rest, so params and accuracies differ from the replay (and the data key is reused).',
     "named_by": ['first n_train rows train', 'no shuffle before the split', 'the data key is used once'],
     "edits": [('    x, y = classifier.make_dataset(k_data, n_train + n_test)\n',
                '    x, y = classifier.make_dataset(k_data, n_train + n_test)\n    perm = jax.random.permutation(k_data, n_train + n_test)  # random split\n    x, y = x[perm], y[perm]\n')]},
    # blind batch b9 (2026-12-07, twelfth session): written from a learner's copy, the
    # solutions and the 842 earlier mistakes, never the checkers
    {'stage': 1,
     'id': 'blind-b9-mse-relative-squared-error',
     'misunderstood': "Reading 'within relative 1e-5' and 'magnitudes up to 1e17', the learner "
                      'believed the loss itself should be scale-free and averaged the squared '
                      'relative error ((pred - target) / target)^2; the contract asks for the '
                      'plain mean of (pred - target)^2, and exact zeros in the target count '
                      'like any other value.',
     'named_by': ['relative error instead of the plain squared difference',
                  'divides by the target',
                  'mean of (pred - target)^2 with no normalisation'],
     'edits': [('    return jnp.mean((pred - target) ** 2)',
                '    return jnp.mean(((pred - target) / target) ** 2)')]},
    {'stage': 1,
     'id': 'blind-b9-mse-difference-of-squares',
     'misunderstood': 'The learner squared each array and subtracted (mean of pred^2 - '
                      "target^2), believing 'squared error' is the difference of the squares; "
                      'the contract squares the difference (pred - target)^2.',
     'named_by': ['difference of squares, not square of the difference',
                  'square (pred - target) before averaging',
                  'pred**2 - target**2'],
     'edits': [('    return jnp.mean((pred - target) ** 2)',
                '    return jnp.mean(pred ** 2 - target ** 2)')]},
    {'stage': 2,
     'id': 'blind-b9-grads-divide-by-x-size',
     'misunderstood': "Taking 'averaged over every element' from mse's docstring, the learner "
                      'divided the hand gradient by x.size (n * d, every element of x); the '
                      'loss is a mean over the n predictions, so the divisor is n = '
                      'x.shape[0].',
     'named_by': ['divides by every element of x (n * d)',
                  'the mean runs over the n rows only',
                  'gradient too small by a factor d'],
     'edits': [('    n = x.shape[0]\n    return {"w"', '    n = x.size\n    return {"w"')]},
    {'stage': 2,
     'id': 'blind-b9-fit-returns-best-params',
     'misunderstood': "The learner believed 'the fitted linear params' means the best params "
                      'seen, so it evaluated the full-data loss after every step and returned '
                      'the lowest-loss iterate (early stopping); the protocol returns the '
                      'params after exactly `steps` updates.',
     'named_by': ['returns the best iterate instead of the last',
                  'early stopping / lowest loss seen',
                  'params after all steps updates'],
     'edits': [('    for _ in range(steps):\n'
                '        k_batches, k_step = jax.random.split(k_batches)\n'
                '        params = step(params, k_step)\n'
                '    return params',
                '    best, best_loss = params, regression_loss(params, x, y)\n'
                '    for _ in range(steps):\n'
                '        k_batches, k_step = jax.random.split(k_batches)\n'
                '        params = step(params, k_step)\n'
                '        current = regression_loss(params, x, y)\n'
                '        if current < best_loss:\n'
                '            best, best_loss = params, current\n'
                '    return best')]},
    {'stage': 3,
     'id': 'blind-b9-train-first-epoch-unshuffled',
     'misunderstood': "The learner read 'shuffled once per epoch' as reshuffling between "
                      'epochs, so the first epoch walks the rows in their given order and the '
                      'order key is first split at the second epoch; the protocol splits the '
                      'order key and permutes at the start of every epoch, the first included.',
     'named_by': ['first epoch not shuffled',
                  'rows in data order before the first split',
                  'every epoch, the first included, starts with a split and a permutation'],
     'edits': [('        if j == 0:\n            k_order, k_epoch = jax.random.split(k_order)',
                '        if i == 0:\n'
                '            order = jnp.arange(n)\n'
                '        elif j == 0:\n'
                '            k_order, k_epoch = jax.random.split(k_order)')]},
    {'stage': 3,
     'id': 'blind-b9-workload-train-key-from-seed-plus-one',
     'misunderstood': 'The learner believed two keys from one seed means two seeds, seed for '
                      'the data and seed + 1 for training; the contract splits '
                      'jax.random.key(seed) once into the data key and the training key.',
     'named_by': ['seed + 1 as a second key',
                  'split key(seed) once into data and training keys',
                  'training key not from the split'],
     'edits': [('    k_data, k_train = jax.random.split(jax.random.key(seed))',
                '    k_data, k_train = jax.random.key(seed), jax.random.key(seed + 1)')]},
]

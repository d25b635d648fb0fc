"""foundations: what a learner who half-understands each stage writes (the corpus format
and the runner: ``coursekit/commands/mistakes.py``; ``make mistakes``)."""

MSE = "    return jnp.mean((pred - target) ** 2)\n"
GRAD_W = '    return {"w": 2.0 * (x.T @ residual) / n, "b": 2.0 * jnp.sum(residual) / n}\n'
ROWS = "        rows = jax.random.randint(k_step, (batch,), 0, n)\n"
SGD = "        return jax.tree.map(lambda p, g: p - lr * g, params, grads)\n\n    for _ in"
LOOP = ("        k_batches, k_step = jax.random.split(k_batches)\n"
        "        params = step(params, k_step)\n")
SHUFFLE = ("        if j == 0:\n"
           "            k_order, k_epoch = jax.random.split(k_order)\n"
           "            order = jax.random.permutation(k_epoch, n)\n")
TRAIN = ("    params = train_classifier(k_train, x[:n_train], y[:n_train], steps=steps, "
         "batch=batch,\n                              lr=lr)\n")
TEST_ACC = '"test_accuracy": float(classifier.accuracy(params, x[n_train:], y[n_train:]))'

MISTAKES = [
    # ---- stage 1: mse ------------------------------------------------------------------
    {"stage": 1, "id": "mse-sum",
     "misunderstood": "the squared error summed over the array, not averaged",
     "edits": [(MSE, "    return jnp.sum((pred - target) ** 2)\n")]},
    {"stage": 1, "id": "mse-no-square",
     "misunderstood": "the mean of the differences, forgetting to square them",
     "edits": [(MSE, "    return jnp.mean(pred - target)\n")]},
    {"stage": 1, "id": "mse-absolute",
     "misunderstood": "mean absolute error taken for mean squared error",
     "edits": [(MSE, "    return jnp.mean(jnp.abs(pred - target))\n")]},
    {"stage": 1, "id": "mse-rmse",
     "misunderstood": "the root of the mean squared error (RMSE), as a 'loss' in the same units",
     "edits": [(MSE, "    return jnp.sqrt(jnp.mean((pred - target) ** 2))\n")]},
    {"stage": 1, "id": "mse-half",
     "misunderstood": "the textbook 1/2 * MSE convention that makes the gradient tidy",
     "edits": [(MSE, "    return 0.5 * jnp.mean((pred - target) ** 2)\n")]},
    {"stage": 1, "id": "mse-last-axis",
     "misunderstood": "averaged over the last axis only (one error per row), not the array",
     "edits": [(MSE, "    return jnp.mean((pred - target) ** 2, axis=-1)\n")]},
    {"stage": 1, "id": "mse-python-float",
     "misunderstood": "returns a Python float, so it cannot trace under jax.jit",
     "edits": [(MSE, "    return float(jnp.mean((pred - target) ** 2))\n")]},
    {"stage": 1, "id": "mse-sample-variance",
     "misunderstood": "divides by n - 1 as for a sample variance",
     "edits": [(MSE, "    return jnp.sum((pred - target) ** 2) / (pred.size - 1)\n")]},
    {"stage": 1, "id": "mse-expanded",
     "misunderstood": "the algebraic expansion p^2 - 2pt + t^2, which cancels catastrophically",
     "edits": [(MSE, "    return jnp.mean(pred * pred - 2 * pred * target + target * target)\n")]},
    {"stage": 1, "id": "mse-difference-of-means",
     "misunderstood": "the squared difference of the means instead of the mean squared difference",
     "edits": [(MSE, "    return (jnp.mean(pred) - jnp.mean(target)) ** 2\n")]},
    {"stage": 1, "id": "mse-keepdims",
     "misunderstood": "keepdims=True 'to be safe', so the result is not a 0-d array",
     "edits": [(MSE, "    return jnp.mean((pred - target) ** 2, keepdims=True)\n")]},
    {"stage": 1, "id": "mse-bfloat16",
     "misunderstood": "squares in bfloat16 'for speed', thinking the mean restores precision",
     "edits": [(MSE, "    return jnp.mean(((pred - target).astype(jnp.bfloat16) ** 2)"
                     ".astype(jnp.float32))\n")]},
    # ---- stage 2: regression_grads, fit_regression --------------------------------------
    {"stage": 2, "id": "grads-no-two",
     "misunderstood": "d/dx of x^2 taken as x: the factor 2 dropped",
     "edits": [(GRAD_W, '    return {"w": (x.T @ residual) / n, "b": jnp.sum(residual) / n}\n')]},
    {"stage": 2, "id": "grads-sum-not-mean",
     "misunderstood": "the gradient of the summed loss: the 1/n of the mean forgotten",
     "edits": [(GRAD_W, '    return {"w": 2.0 * (x.T @ residual), "b": 2.0 * jnp.sum(residual)}\n')]},
    {"stage": 2, "id": "grads-residual-sign",
     "misunderstood": "residual as target minus prediction, so every gradient points uphill",
     "edits": [("    residual = predict(params, x) - y\n", "    residual = y - predict(params, x)\n")]},
    {"stage": 2, "id": "grads-divide-by-features",
     "misunderstood": "the mean taken over the d features instead of the n examples",
     "edits": [("    n = x.shape[0]\n    return {", "    n = x.shape[1]\n    return {")]},
    {"stage": 2, "id": "grads-bias-constant",
     "misunderstood": "the bias has no input, so its gradient was taken to be zero",
     "edits": [(GRAD_W, '    return {"w": 2.0 * (x.T @ residual) / n, "b": jnp.zeros(())}\n')]},
    {"stage": 2, "id": "grads-autodiff",
     "misunderstood": "'by hand' read as 'call jax.grad by hand' (autodiff is forbidden here)",
     "edits": [(GRAD_W, "    return jax.grad(regression_loss)(params, x, y)\n")]},
    {"stage": 2, "id": "grads-product-of-means",
     "misunderstood": "the chain rule as a product of averages: mean(x) * mean(residual)",
     "edits": [(GRAD_W, '    return {"w": 2.0 * jnp.mean(x, axis=0) * jnp.mean(residual), '
                        '"b": 2.0 * jnp.sum(residual) / n}\n')]},
    {"stage": 2, "id": "fit-key-reused",
     "misunderstood": "splits the batch key each step but never keeps the new one",
     "edits": [(LOOP, "        k_step = jax.random.split(k_batches)[1]\n"
                      "        params = step(params, k_step)\n")]},
    {"stage": 2, "id": "fit-no-init-split",
     "misunderstood": "the same key for the init and the batches, 'since they are different uses'",
     "edits": [("    k_init, k_batches = jax.random.split(key)\n    params = init_linear",
                "    k_init = k_batches = key\n    params = init_linear")]},
    {"stage": 2, "id": "fit-split-order",
     "misunderstood": "which half of a split is the carried key taken the other way round",
     "edits": [(LOOP, "        k_step, k_batches = jax.random.split(k_batches)\n"
                      "        params = step(params, k_step)\n")]},
    {"stage": 2, "id": "fit-randint-inclusive",
     "misunderstood": "randint's upper bound taken as inclusive, so n - 1 passed",
     "edits": [(ROWS, "        rows = jax.random.randint(k_step, (batch,), 0, n - 1)\n")]},
    {"stage": 2, "id": "fit-lr-per-example",
     "misunderstood": "the gradient taken as a sum over the batch, so lr divided by batch",
     "edits": [(SGD, "        return jax.tree.map(lambda p, g: p - lr * g / batch, params, grads)"
                     "\n\n    for _ in")]},
    {"stage": 2, "id": "fit-numpy-rows",
     "misunderstood": "rows drawn with numpy's global generator inside the jitted step",
     "edits": [(ROWS, "        import numpy as np\n"
                      "        rows = np.random.randint(0, n, batch)\n")]},
    {"stage": 2, "id": "fit-init-counts-as-step",
     "misunderstood": "the initialisation counted as the first step: one update short",
     "edits": [("    for _ in range(steps):\n        k_batches", "    for _ in range(steps - 1):\n"
                                                         "        k_batches")]},
    {"stage": 2, "id": "fit-full-batch",
     "misunderstood": "rows drawn but the whole data set used for each update",
     "edits": [("        grads = regression_grads(params, x[rows], y[rows])\n",
                "        grads = regression_grads(params, x, y)\n")]},
    {"stage": 2, "id": "fit-keys-upfront",
     "misunderstood": "all step keys made at once with split(k, steps), not the protocol's chain",
     "edits": [("    for _ in range(steps):\n" + LOOP,
                "    for k_step in jax.random.split(k_batches, steps):\n"
                "        params = step(params, k_step)\n")]},
    # ---- stage 3: train_classifier, reference_workload ----------------------------------
    {"stage": 3, "id": "train-shuffle-every-step",
     "misunderstood": "a fresh permutation drawn every step instead of once per epoch",
     "edits": [(SHUFFLE, "        k_order, k_epoch = jax.random.split(k_order)\n"
                         "        order = jax.random.permutation(k_epoch, n)\n")]},
    {"stage": 3, "id": "train-shuffle-once",
     "misunderstood": "one shuffle before training, reused by every epoch",
     "edits": [(SHUFFLE, "        if order is None:\n"
                         "            k_order, k_epoch = jax.random.split(k_order)\n"
                         "            order = jax.random.permutation(k_epoch, n)\n")]},
    {"stage": 3, "id": "train-permute-carried-key",
     "misunderstood": "the carried key split but the permutation drawn from the old one",
     "edits": [(SHUFFLE, "        if j == 0:\n"
                         "            order = jax.random.permutation(k_order, n)\n"
                         "            k_order, k_epoch = jax.random.split(k_order)\n")]},
    {"stage": 3, "id": "train-epoch-split-order",
     "misunderstood": "the two halves of the epoch split taken the other way round",
     "edits": [("            k_order, k_epoch = jax.random.split(k_order)\n",
                "            k_epoch, k_order = jax.random.split(k_order)\n")]},
    {"stage": 3, "id": "train-epoch-ceil",
     "misunderstood": "an epoch rounded up, so its last step takes a short leftover batch",
     "edits": [("    per_epoch = n // batch\n", "    per_epoch = -(-n // batch)\n")]},
    {"stage": 3, "id": "train-step-in-epoch-mod-batch",
     "misunderstood": "the step within the epoch counted modulo the batch size",
     "edits": [("        j = i % per_epoch\n", "        j = i % batch\n")]},
    {"stage": 3, "id": "train-init-from-key",
     "misunderstood": "params initialised from the caller's key, not its k_init half",
     "edits": [("    params = classifier.init_params(k_init, features=x.shape[1], classes=classes)\n"
                "    n = x.shape[0]\n",
                "    params = classifier.init_params(key, features=x.shape[1], classes=classes)\n"
                "    n = x.shape[0]\n")]},
    {"stage": 3, "id": "workload-test-on-train-rows",
     "misunderstood": "test accuracy measured on the first rows, which are the training rows",
     "edits": [(TEST_ACC, '"test_accuracy": float(classifier.accuracy(params, x[:n_test], '
                          'y[:n_test]))')]},
    {"stage": 3, "id": "workload-defaults",
     "misunderstood": "train_classifier called with its defaults, not the batch and lr asked for",
     "edits": [(TRAIN, "    params = train_classifier(k_train, x[:n_train], y[:n_train])\n")]},
    {"stage": 3, "id": "workload-percent",
     "misunderstood": "accuracies reported in percent, not as a fraction in [0, 1]",
     "edits": [(TEST_ACC, '"test_accuracy": 100 * float(classifier.accuracy(params, '
                          'x[n_train:], y[n_train:]))')]},
    {"stage": 3, "id": "workload-array-accuracy",
     "misunderstood": "accuracies left as JAX arrays where plain Python floats are asked",
     "edits": [(TEST_ACC, '"test_accuracy": classifier.accuracy(params, x[n_train:], '
                          'y[n_train:])')]},
    {"stage": 3, "id": "workload-split-swapped",
     "misunderstood": "the seed's two keys used the other way round (data from k_train)",
     "edits": [("    k_data, k_train = jax.random.split(jax.random.key(seed))\n",
                "    k_train, k_data = jax.random.split(jax.random.key(seed))\n")]},
    {"stage": 3, "id": "workload-separate-datasets",
     "misunderstood": "train and test drawn as two data sets, test from the training key",
     "edits": [("    x, y = classifier.make_dataset(k_data, n_train + n_test)\n",
                "    x, y = classifier.make_dataset(k_data, n_train)\n"
                "    x_t, y_t = classifier.make_dataset(k_train, n_test)\n"
                "    x, y = jnp.concatenate([x, x_t]), jnp.concatenate([y, y_t])\n")]},
]

JUSTIFIED: dict[str, str] = {}

"""pallas-kernel: what a learner who half-understands each stage writes (the corpus format
and the runner: ``coursekit/commands/mistakes.py``; ``make mistakes``)."""

JNP = ("    z = x.astype(jnp.float32)\n"
       "    z = z - jnp.max(z, axis=-1, keepdims=True)\n"
       "    e = jnp.exp(z)\n"
       "    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)\n")
F64 = ("    z = np.asarray(x).astype(np.float64)\n"
       "    z = z - z.max(axis=-1, keepdims=True)\n")
RTOL = "    rtol = u_out + (n + 4) * u32\n"
MASK = "    x = jnp.where(cols < n_cols, x, -jnp.inf)\n"
TIMED = ("                    start = time.perf_counter()\n"
         "                    jax.block_until_ready(fn(x))\n"
         "                    samples.append(time.perf_counter() - start)\n")
SPEEDUPS = ("        speedups = {r[\"block_rows\"]: base[shape] / "
            "statistics.median(r[\"samples_s\"])\n")

MISTAKES = [
    # ---- stage 1: the references and the tolerance --------------------------------------
    {"stage": 1, "id": "jnp-no-max-shift",
     "misunderstood": "softmax written from its formula, without subtracting the row max",
     "edits": [(JNP, "    z = x.astype(jnp.float32)\n    e = jnp.exp(z)\n"
                     "    return (e / jnp.sum(e, axis=-1, keepdims=True)).astype(x.dtype)\n")]},
    {"stage": 1, "id": "jnp-input-dtype",
     "misunderstood": "computed in the input dtype: bfloat16 rows summed in bfloat16",
     "edits": [(JNP, JNP.replace("x.astype(jnp.float32)", "x"))]},
    {"stage": 1, "id": "jnp-global-max",
     "misunderstood": "the max of the whole array subtracted, not each row's",
     "edits": [(JNP, JNP.replace("jnp.max(z, axis=-1, keepdims=True)", "jnp.max(z)"))]},
    {"stage": 1, "id": "jnp-columns",
     "misunderstood": "normalised down the columns (axis 0) instead of along each row",
     "edits": [(JNP, JNP.replace("axis=-1", "axis=0"))]},
    {"stage": 1, "id": "jnp-log-softmax-exp",
     "misunderstood": "exp(x - logsumexp) computed with a float32 log of the sum, then rounded",
     "edits": [(JNP, "    z = x.astype(jnp.float32)\n"
                     "    z = z - jnp.max(z, axis=-1, keepdims=True)\n"
                     "    lse = jnp.log(jnp.sum(jnp.exp(z), axis=-1, keepdims=True))\n"
                     "    return jnp.exp((z - lse).astype(x.dtype))\n")]},
    {"stage": 1, "id": "f64-float32",
     "misunderstood": "the 'float64' reference computed in float32, the input's dtype",
     "edits": [(F64, F64.replace("np.float64", "np.float32"))]},
    {"stage": 1, "id": "f64-from-jax",
     "misunderstood": "the reference taken from softmax_jnp and cast to float64 afterwards",
     "edits": [(F64, "    return np.asarray(softmax_jnp(jnp.asarray(x)), np.float64)\n" + F64)]},
    {"stage": 1, "id": "f64-no-shift",
     "misunderstood": "float64 taken to be wide enough not to need the max subtracted",
     "edits": [(F64, "    z = np.asarray(x).astype(np.float64)\n")]},
    {"stage": 1, "id": "tol-eps-as-u",
     "misunderstood": "machine epsilon used as the unit roundoff (twice too large)",
     "edits": [("    u_out = float(jnp.finfo(dtype).eps) / 2\n"
                "    u32 = float(jnp.finfo(jnp.float32).eps) / 2\n",
                "    u_out = float(jnp.finfo(dtype).eps)\n"
                "    u32 = float(jnp.finfo(jnp.float32).eps)\n")]},
    {"stage": 1, "id": "tol-no-row-length",
     "misunderstood": "a few roundings per element, the row-length sum's n roundings forgotten",
     "edits": [(RTOL, "    rtol = u_out + 4 * u32\n")]},
    {"stage": 1, "id": "tol-sqrt-n",
     "misunderstood": "the typical sqrt(n) error growth used where the bound is asked",
     "edits": [(RTOL, "    rtol = u_out + (math.sqrt(n) + 4) * u32\n")]},
    {"stage": 1, "id": "tol-output-dtype-only",
     "misunderstood": "only the final rounding to the output dtype counted",
     "edits": [(RTOL, "    rtol = u_out\n")]},
    {"stage": 1, "id": "tol-atol-zero",
     "misunderstood": "no absolute tolerance, 'since probabilities are relative'",
     "edits": [("    atol = 4 * u32\n", "    atol = 0.0\n")]},
    {"stage": 1, "id": "tol-guess",
     "misunderstood": "the usual 1e-5 / 1e-8 of np.allclose-style tests, whatever the dtype",
     "edits": [(RTOL, "    rtol = 1e-5\n"), ("    atol = 4 * u32\n", "    atol = 1e-8\n")]},
    # ---- stage 2: the kernel ------------------------------------------------------------
    {"stage": 2, "id": "mode-gpu-interpreted",
     "misunderstood": "Pallas taken to compile only on TPU, so GPU counted as interpreted",
     "edits": [('    return "interpreted" if backend == "cpu" else "compiled"\n',
                '    return "compiled" if backend == "tpu" else "interpreted"\n')]},
    {"stage": 2, "id": "mode-ignores-argument",
     "misunderstood": "the backend argument ignored: always the machine's own",
     "edits": [("    backend = backend or jax.default_backend()\n",
                "    backend = jax.default_backend()\n")]},
    {"stage": 2, "id": "kernel-nan-to-minus-inf",
     "misunderstood": "the NaN seen past the edge replaced by -inf, not masked by position",
     "edits": [("    cols = jax.lax.broadcasted_iota(jnp.int32, x.shape, 1)\n"
                "    x = jnp.where(cols < n_cols, x, -jnp.inf)\n",
                "    x = jnp.where(jnp.isnan(x), -jnp.inf, x)\n")]},
    {"stage": 2, "id": "kernel-no-mask",
     "misunderstood": "the padded cells taken to hold zeros, so no mask",
     "edits": [(MASK, "")]},
    {"stage": 2, "id": "kernel-mask-zero",
     "misunderstood": "the padding masked to 0 rather than -inf, so it still adds exp(-m)",
     "edits": [(MASK, "    x = jnp.where(cols < n_cols, x, 0.0)\n")]},
    {"stage": 2, "id": "kernel-mask-inclusive",
     "misunderstood": "the last data column taken to be n_cols, not n_cols - 1",
     "edits": [(MASK, "    x = jnp.where(cols <= n_cols, x, -jnp.inf)\n")]},
    {"stage": 2, "id": "kernel-output-masked-only",
     "misunderstood": "masking only the sum, so the max reads the padding",
     "edits": [(MASK + "    m = jnp.max(x, axis=1, keepdims=True)\n    e = jnp.exp(x - m)\n",
                "    m = jnp.max(x, axis=1, keepdims=True)\n"
                "    e = jnp.where(cols < n_cols, jnp.exp(x - m), 0.0)\n")]},
    {"stage": 2, "id": "kernel-input-dtype",
     "misunderstood": "the kernel's arithmetic in the block's dtype (bfloat16 sums)",
     "edits": [("    x = x_ref[...].astype(jnp.float32)\n", "    x = x_ref[...]\n")]},
    {"stage": 2, "id": "pallas-grid-floor",
     "misunderstood": "the grid as rows // block_rows: the last partial block dropped",
     "edits": [("        grid=(pl.cdiv(rows, block_rows),),\n", "        grid=(rows // block_rows,),\n")]},
    {"stage": 2, "id": "pallas-block-exact-cols",
     "misunderstood": "the block as wide as the rows themselves, not block_cols(cols)",
     "edits": [("    spec = pl.BlockSpec((block_rows, block_cols(cols)), lambda i: (i, 0))\n",
                "    spec = pl.BlockSpec((block_rows, cols), lambda i: (i, 0))\n")]},
    {"stage": 2, "id": "pallas-interpret-always",
     "misunderstood": "interpret=True written in, since the course machine is a CPU",
     "edits": [("    if interpret is None:\n        interpret = execution_mode() == \"interpreted\"\n",
                "    interpret = True\n")]},
    {"stage": 2, "id": "pallas-max-outside",
     "misunderstood": "the row max subtracted before the call, 'to keep the kernel simple'",
     "edits": [("    rows, cols = x.shape\n    spec",
                "    x = x - jnp.max(x, axis=1, keepdims=True)\n    rows, cols = x.shape\n    spec")]},
    {"stage": 2, "id": "run-grid-floor",
     "misunderstood": "the grid reported as rows // block_rows",
     "edits": [('            "block_rows": block_rows, "grid": [pl.cdiv(x.shape[0], block_rows)]}\n',
                '            "block_rows": block_rows, "grid": [x.shape[0] // block_rows]}\n')]},
    {"stage": 2, "id": "run-mode-written-in",
     "misunderstood": "the mode written as 'interpreted', true on the course machine only",
     "edits": [('    return {"y": np.asarray(y), "mode": execution_mode(), ',
                '    return {"y": np.asarray(y), "mode": "interpreted", ')]},
    {"stage": 2, "id": "run-default-block",
     "misunderstood": "the kernel run at its default block, the requested one reported",
     "edits": [("    y = jax.block_until_ready(softmax_pallas(x, block_rows=block_rows))\n",
                "    y = jax.block_until_ready(softmax_pallas(x))\n")]},
    # ---- stage 3: sweep and summarize ---------------------------------------------------
    {"stage": 3, "id": "sweep-first-call-unsynced",
     "misunderstood": "the first call's clock stopped at dispatch",
     "edits": [("            out = jax.block_until_ready(fn(x))\n"
                "            first_call_s = time.perf_counter() - start\n",
                "            out = fn(x)\n"
                "            first_call_s = time.perf_counter() - start\n")]},
    {"stage": 3, "id": "sweep-no-sync",
     "misunderstood": "the timed calls not waited for: dispatch times",
     "edits": [(TIMED, TIMED.replace("jax.block_until_ready(fn(x))", "fn(x)"))]},
    {"stage": 3, "id": "sweep-jit-in-loop",
     "misunderstood": "each timed call wrapped in jax.jit again, so it retraces every time",
     "edits": [(TIMED, TIMED.replace("jax.block_until_ready(fn(x))",
                                     "jax.block_until_ready(jax.jit(fn)(x))"))]},
    {"stage": 3, "id": "sweep-times-wrong-output",
     "misunderstood": "a wrong output still timed, its samples kept",
     "edits": [("            if ok:\n                for _ in range(warmup):\n",
                "            if True:\n                for _ in range(warmup):\n")]},
    {"stage": 3, "id": "sweep-float32-tolerance",
     "misunderstood": "the float32 tolerance used whatever dtype is swept",
     "edits": [("        tol = tolerance(dtype, cols)\n", '        tol = tolerance("float32", cols)\n')]},
    {"stage": 3, "id": "sweep-float32-expected",
     "misunderstood": "outputs judged against softmax_jnp, not the float64 reference",
     "edits": [("        expected = softmax_numpy_f64(x)\n",
                "        expected = np.asarray(softmax_jnp(x), np.float64)\n")]},
    {"stage": 3, "id": "sweep-warmup-timed",
     "misunderstood": "the warm-up calls timed and kept as samples too",
     "edits": [("                for _ in range(warmup):\n                    jax.block_until_ready(fn(x))\n"
                "                for _ in range(iters):\n",
                "                for _ in range(warmup + iters):\n")]},
    {"stage": 3, "id": "sweep-grid-floor",
     "misunderstood": "the kernel's grid recorded as rows // b",
     "edits": [('                            "grid": [pl.cdiv(rows, int(b))], ',
                '                            "grid": [rows // int(b)], ')]},
    {"stage": 3, "id": "sweep-kernel-compiled",
     "misunderstood": "the kernel's mode recorded as 'compiled' because it is jitted",
     "edits": [('"grid": [pl.cdiv(rows, int(b))], "mode": execution_mode(),',
                '"grid": [pl.cdiv(rows, int(b))], "mode": "compiled",')]},
    {"stage": 3, "id": "summarize-mean",
     "misunderstood": "the mean of the samples where the median is asked",
     "edits": [("    base = {tuple(r[\"shape\"]): statistics.median(r[\"samples_s\"])\n",
                "    base = {tuple(r[\"shape\"]): statistics.mean(r[\"samples_s\"])\n"),
               (SPEEDUPS, SPEEDUPS.replace("median", "mean"))]},
    {"stage": 3, "id": "summarize-speedup-inverted",
     "misunderstood": "speedup as kernel time over baseline time",
     "edits": [(SPEEDUPS, "        speedups = {r[\"block_rows\"]: "
                          "statistics.median(r[\"samples_s\"]) / base[shape]\n")]},
    {"stage": 3, "id": "summarize-wrong-blocks-kept",
     "misunderstood": "every block's speedup kept, a wrong output's too",
     "edits": [('                    if tuple(r["shape"]) == shape and r.get("output_ok") and '
                'r["samples_s"]}\n',
                '                    if tuple(r["shape"]) == shape and r["samples_s"]}\n')]},
    {"stage": 3, "id": "summarize-sort-by-rows",
     "misunderstood": "shapes ordered by their row count, not their element count",
     "edits": [("    shapes = sorted(base, key=lambda s: (math.prod(s), s))\n",
                "    shapes = sorted(base)\n")]},
    {"stage": 3, "id": "summarize-stops-at-first-miss",
     "misunderstood": "'stops helping' taken as the first shape where it does not help",
     "edits": [('    last_help = max((i for i, p in enumerate(per_shape) if p["helps"]), '
                'default=-1)\n'
                '    stops = per_shape[last_help + 1]["shape"] if last_help + 1 < len(per_shape) '
                'else None\n',
                '    stops = next((p["shape"] for p in per_shape if not p["helps"]), None)\n')]},
    {"stage": 3, "id": "summarize-any-speedup-helps",
     "misunderstood": "any speedup above 1 counted as helping, the noise margin ignored",
     "edits": [('"helps": best_speedup is not None and best_speedup > HELP_MARGIN})\n',
                '"helps": best_speedup is not None and best_speedup > 1.0})\n')]},
    {"stage": 3, "id": "summarize-mixed-runs",
     "misunderstood": "records of different modes, backends or dtypes summarised together",
     "edits": [('        if len(values) != 1 or None in values:\n',
                '        if None in values:\n')]},
]

JUSTIFIED: dict[str, str] = {
    "run-mode-written-in": "on CPU the kernel can only run interpreted, so the written-in "
                           "mode is the true one; only a GPU or TPU run tells them apart",
}

"""optimisation: what a learner who half-understands each stage writes (the corpus format
and the runner: ``coursekit/commands/mistakes.py``; ``make mistakes``)."""

WARM = ('    jax.block_until_ready(slow_step.train_slow(problem["params"], *args, '
        'problem["lr"]))\n')
TRACED = ('        out = slow_step.train_slow(problem["params"], *args, problem["lr"] * 0.9)\n'
          "        jax.block_until_ready(out)\n")
PHASES = ("        for child in ev.children:\n"
          "            if child.name in phase_us:\n"
          "                phase_us[child.name] += child.dur\n")
SCAN = ("    def step(p, batch):\n"
        "        value, grads = jax.value_and_grad(_loss)(p, *batch)\n"
        "        return jax.tree.map(lambda a, g: a - lr * g, p, grads), value\n")
LRS = '    lrs = iter(problem["lr"] * (1 + 0.01 * i) for i in range(10**6))\n'
ROUNDS = ("        for fn, samples in (order if r % 2 == 0 else order[::-1]):\n"
          "            samples.append(_timed(fn))\n")
GAIN = '        out["gains"].append(statistics.median(slow_s) / statistics.median(fast_s))\n'
INTERP = ("            f = (math.log(g0) - math.log(threshold)) / (math.log(g0) - math.log(g1))\n"
          "            return float(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0))))\n")
CALL = ("            start = time.perf_counter()\n"
        "            out = jax.block_until_ready(fn(params, *args, next(lrs) if lr is None else lr))\n"
        "            return out, time.perf_counter() - start\n")
RECORD_TRACE = ("        options = jax.profiler.ProfileOptions()\n"
                "        options.python_tracer_level = 0\n"
                "        params = slow_step.fresh_copy(problem[\"params\"])\n"
                "        with jax.profiler.trace(str(logdir), profiler_options=options):\n"
                "            with jax.profiler.TraceAnnotation(REGION):\n"
                "                jax.block_until_ready(fn(params, *args, next(lrs)))\n")

MISTAKES = [
    # ---- stage 1: find it ---------------------------------------------------------------
    {"stage": 1, "id": "trace-cold-call",
     "misunderstood": "the first call traced: its compile is in the trace",
     "edits": [(WARM, "")]},
    {"stage": 1, "id": "trace-same-lr",
     "misunderstood": "the traced call given the warm-up's learning rate, unlike calls in use",
     "edits": [(TRACED, TRACED.replace('problem["lr"] * 0.9', 'problem["lr"]'))]},
    {"stage": 1, "id": "trace-python-tracer",
     "misunderstood": "the profiler's default options, its Python tracer on",
     "edits": [("    options = jax.profiler.ProfileOptions()\n    options.python_tracer_level = 0\n"
                "    with jax.profiler.trace(logdir, profiler_options=options):\n",
                "    with jax.profiler.trace(logdir):\n")]},
    {"stage": 1, "id": "trace-not-finished",
     "misunderstood": "the trace closed at dispatch, the call waited for after it",
     "edits": [(TRACED, '        out = slow_step.train_slow(problem["params"], *args, '
                        'problem["lr"] * 0.9)\n    jax.block_until_ready(out)\n')]},
    {"stage": 1, "id": "trace-warm-call-inside",
     "misunderstood": "the warm-up call made inside the trace, so two calls are in it",
     "edits": [(WARM, ""),
                ("    with jax.profiler.trace(logdir, profiler_options=options):\n",
                 "    with jax.profiler.trace(logdir, profiler_options=options):\n" + "    " + WARM)]},
    {"stage": 1, "id": "breakdown-any-depth",
     "misunderstood": "a phase counted wherever it appears under a step, nested ones too",
     "edits": [(PHASES, "        for child in _walk(ev.children):\n"
                        "            if child.name in phase_us:\n"
                        "                phase_us[child.name] += child.dur\n")]},
    {"stage": 1, "id": "breakdown-prefix",
     "misunderstood": "steps found by name prefix ('train_step_x' counted as a step)",
     "edits": [("    found = [ev for ev in _walk(forest) if ev.name == step_region]\n",
                "    found = [ev for ev in _walk(forest) if ev.name.startswith(step_region)]\n")]},
    {"stage": 1, "id": "breakdown-absent-phase-left-out",
     "misunderstood": "a phase that never occurs left out of phase_us, not 0.0",
     "edits": [("    phase_us = {p: 0.0 for p in phases}\n", "    phase_us = {}\n"),
               (PHASES, "        for child in ev.children:\n"
                        "            if child.name in phases:\n"
                        "                phase_us[child.name] = phase_us.get(child.name, 0.0) "
                        "+ child.dur\n")]},
    {"stage": 1, "id": "breakdown-share-of-phases",
     "misunderstood": "shares as parts of the phases' total, not of the step time",
     "edits": [('            "shares": {p: (v / step_us if step_us else 0.0) for p, v in '
                'phase_us.items()}}\n',
                '            "shares": {p: (v / sum(phase_us.values()) if step_us else 0.0) '
                'for p, v in phase_us.items()}}\n')]},
    {"stage": 1, "id": "breakdown-all-threads",
     "misunderstood": "events of every thread nested together, as if one timeline",
     "edits": [('            by_thread.setdefault((e.get("pid"), e.get("tid")), [])'
                '.append(_Event(e))\n',
                '            by_thread.setdefault("all", []).append(_Event(e))\n')]},
    {"stage": 1, "id": "limiting-most-calls",
     "misunderstood": "the evidence event chosen by how often it is called, not its time",
     "edits": [("        name = max(totals, key=lambda n: totals[n][1])\n",
                "        name = max(totals, key=lambda n: totals[n][0])\n")]},
    {"stage": 1, "id": "limiting-ceiling-inverse-share",
     "misunderstood": "Amdahl's ceiling as one over the phase's share",
     "edits": [("    ceiling = math.inf if share >= 1.0 else 1.0 / (1.0 - share)\n",
                "    ceiling = math.inf if share <= 0.0 else 1.0 / share\n")]},
    {"stage": 1, "id": "limiting-first-step-only",
     "misunderstood": "one step taken as representative of all for the evidence",
     "edits": [("    for step in (ev for ev in _walk(forest) if ev.name == step_region):\n",
                "    for step in [ev for ev in _walk(forest) if ev.name == step_region][:1]:\n")]},
    # ---- stage 2: fix it ----------------------------------------------------------------
    {"stage": 2, "id": "fast-lr-static",
     "misunderstood": "the learning rate made static 'because it is a constant'",
     "edits": [("@functools.partial(jax.jit, donate_argnums=0)\n",
                "@functools.partial(jax.jit, donate_argnums=0, static_argnums=3)\n"),
               ("    return _train(params, tokens, targets, jnp.float32(lr))\n",
                "    return _train(params, tokens, targets, float(lr))\n")]},
    {"stage": 2, "id": "fast-jit-per-call",
     "misunderstood": "the jitted program built inside the call, so every call compiles",
     "edits": [("    return _train(params, tokens, targets, jnp.float32(lr))\n",
                "    run = jax.jit(lambda p, t, y: _train(p, t, y, jnp.float32(lr)))\n"
                "    return run(params, tokens, targets)\n")]},
    {"stage": 2, "id": "fast-no-jit",
     "misunderstood": "lax.scan taken to compile the loop by itself, so no jit",
     "edits": [("@functools.partial(jax.jit, donate_argnums=0)\n", "")]},
    {"stage": 2, "id": "fast-loss-sum",
     "misunderstood": "the loss summed over the batch instead of averaged",
     "edits": [("    return jnp.mean(lse - picked)\n", "    return jnp.sum(lse - picked)\n")]},
    {"stage": 2, "id": "fast-naive-logsumexp",
     "misunderstood": "log(sum(exp(logits))) written out, without the max shift",
     "edits": [("    lse = jax.nn.logsumexp(logits, axis=-1)\n",
                "    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))\n")]},
    {"stage": 2, "id": "fast-bfloat16-matmuls",
     "misunderstood": "the matmuls in bfloat16 'as accelerators do', outputs cast back",
     "edits": [('    h = jnp.tanh(x @ params["w1"])\n    logits = h @ params["w2"]\n',
                '    h = jnp.tanh((x.astype(jnp.bfloat16) @ params["w1"].astype(jnp.bfloat16))'
                '.astype(jnp.float32))\n'
                '    logits = (h.astype(jnp.bfloat16) @ params["w2"].astype(jnp.bfloat16))'
                '.astype(jnp.float32)\n')]},
    {"stage": 2, "id": "fast-grads-at-start",
     "misunderstood": "the steps' gradients taken at the starting params, 'they are independent'",
     "edits": [(SCAN, SCAN.replace("jax.value_and_grad(_loss)(p, *batch)",
                                   "jax.value_and_grad(_loss)(params, *batch)"))]},
    {"stage": 2, "id": "fast-loss-after-update",
     "misunderstood": "each step's loss reported after its update, not before",
     "edits": [(SCAN, "    def step(p, batch):\n"
                      "        grads = jax.grad(_loss)(p, *batch)\n"
                      "        new = jax.tree.map(lambda a, g: a - lr * g, p, grads)\n"
                      "        return new, _loss(new, *batch)\n")]},
    {"stage": 2, "id": "fast-onehot-mean",
     "misunderstood": "the target's logit picked with a one-hot mean instead of a sum",
     "edits": [("    picked = jnp.take_along_axis(logits, targets[:, None], axis=-1)[:, 0]\n",
                "    picked = jnp.mean(logits * jax.nn.one_hot(targets, logits.shape[-1]), "
                "axis=-1)\n")]},
    {"stage": 2, "id": "fast-lr-ascends",
     "misunderstood": "the update written as params + lr * grads ('a step along the gradient')",
     "edits": [(SCAN, SCAN.replace("a - lr * g", "a + lr * g"))]},
    # ---- stage 3: where it stops helping ------------------------------------------------
    {"stage": 3, "id": "sweep-unsynced",
     "misunderstood": "the sweep's samples timed at dispatch",
     "edits": [(ROUNDS, "        for fn, samples in (order if r % 2 == 0 else order[::-1]):\n"
                        "            start = time.perf_counter()\n"
                        "            fn()\n"
                        "            samples.append(time.perf_counter() - start)\n")]},
    {"stage": 3, "id": "sweep-first-call-sampled",
     "misunderstood": "no call made apart before the samples: the compile is in round 0",
     "edits": [("    _timed(slow)\n    _timed(fast)\n", "")]},
    {"stage": 3, "id": "sweep-same-lr",
     "misunderstood": "one learning rate for every call of the sweep",
     "edits": [(LRS, '    lrs = iter(problem["lr"] for i in range(10**6))\n')]},
    {"stage": 3, "id": "sweep-copy-in-sample",
     "misunderstood": "the fresh parameter copy made inside the timed fast call",
     "edits": [("        return train_fast(copies.pop(), *args, next(lrs))\n",
                '        return train_fast(slow_step.fresh_copy(problem["params"]), *args, '
                "next(lrs))\n")]},
    {"stage": 3, "id": "sweep-not-interleaved",
     "misunderstood": "all slow calls first, then all fast ones",
     # every round's copy made first, then the rounds of slow calls, then those of fast
     "edits": [(ROUNDS, "        slow_s.append(_timed(slow))\n"
                        "    for r in range(rounds):\n"
                        "        fast_s.append(_timed(fast))\n")]},
    {"stage": 3, "id": "sweep-gain-mean",
     "misunderstood": "the gain from mean samples, where the median is asked",
     "edits": [(GAIN, GAIN.replace("statistics.median", "statistics.mean"))]},
    {"stage": 3, "id": "sweep-gain-inverted",
     "misunderstood": "the gain as fast time over slow time",
     "edits": [(GAIN, '        out["gains"].append(statistics.median(fast_s) / '
                      'statistics.median(slow_s))\n')]},
    {"stage": 3, "id": "sweep-gain-best",
     "misunderstood": "the gain from the best sample of each, 'the least noisy figure'",
     "edits": [(GAIN, '        out["gains"].append(min(slow_s) / min(fast_s))\n')]},
    {"stage": 3, "id": "crossover-linear",
     "misunderstood": "a straight line in batch and gain, not in their logs",
     "edits": [(INTERP, "            f = (g0 - threshold) / (g0 - g1)\n"
                        "            return float(b0 + f * (b1 - b0))\n")]},
    {"stage": 3, "id": "crossover-next-size",
     "misunderstood": "the first measured size below the threshold, not the crossing",
     "edits": [(INTERP, "            return float(b1)\n")]},
    {"stage": 3, "id": "crossover-strict",
     "misunderstood": "a gain exactly at the threshold taken as already below it",
     "edits": [("        if g0 >= threshold > g1:\n", "        if g0 > threshold >= g1:\n")]},
    {"stage": 3, "id": "crossover-first-below-none",
     "misunderstood": "a gain below the threshold at the first size treated as no crossing",
     "edits": [("    if gains[0] < threshold:\n        return float(batch_sizes[0])\n", "")]},
    {"stage": 3, "id": "predict-proportional",
     "misunderstood": "call time taken as proportional to batch: the fixed cost per call left out",
     "edits": [("    slope_s, slope_f = (s1 - s0) / (large - small), (f1 - f0) / (large - small)\n"
                "    base_s, base_f = s0 - slope_s * small, f0 - slope_f * small\n",
                "    slope_s, slope_f = s1 / large, f1 / large\n"
                "    base_s, base_f = 0.0, 0.0\n")]},
    {"stage": 3, "id": "predict-no-floor",
     "misunderstood": "the model's crossing returned as is, below one example included",
     "edits": [('    return {"crossover": float(max(batch, 1.0)), **medians}\n',
                '    return {"crossover": float(batch), **medians}\n')]},
    {"stage": 3, "id": "predict-gain-inverted",
     "misunderstood": "the modelled gain taken as fast over slow",
     "edits": [("    denominator = threshold * slope_f - slope_s\n",
                "    denominator = threshold * slope_s - slope_f\n"),
               ("    batch = (base_s - threshold * base_f) / denominator\n",
                "    batch = (base_f - threshold * base_s) / denominator\n")]},
    {"stage": 3, "id": "predict-mean",
     "misunderstood": "the model fitted on mean call times, where medians are asked",
     "edits": [('        fit[b] = (statistics.median(sweep["slow_s"][0]), '
                'statistics.median(sweep["fast_s"][0]))\n',
                '        fit[b] = (statistics.mean(sweep["slow_s"][0]), '
                'statistics.mean(sweep["fast_s"][0]))\n')]},
    # ---- stage 4: the report ------------------------------------------------------------
    {"stage": 4, "id": "records-unsynced",
     "misunderstood": "each record's calls timed at dispatch",
     "edits": [(CALL, CALL.replace("out = jax.block_until_ready(fn(", "out = (fn("))]},
    {"stage": 4, "id": "records-copy-in-sample",
     "misunderstood": "the parameter copy made inside the timed boundary",
     "edits": [("            params = slow_step.fresh_copy(problem[\"params\"])\n"
                "            jax.block_until_ready(params)\n"
                "            start = time.perf_counter()\n",
                "            start = time.perf_counter()\n"
                "            params = slow_step.fresh_copy(problem[\"params\"])\n")]},
    {"stage": 4, "id": "records-same-lr",
     "misunderstood": "every call at the problem's own learning rate",
     "edits": [(CALL, CALL.replace('next(lrs) if lr is None else lr', 'problem["lr"]'))]},
    {"stage": 4, "id": "records-warmup-sampled",
     "misunderstood": "the warm-up calls kept as samples too",
     "edits": [("                for _ in range(warmup):\n                    call()\n"
                "                samples = [call()[1] for _ in range(iters)]\n",
                "                samples = [call()[1] for _ in range(warmup + iters)]\n")]},
    {"stage": 4, "id": "records-first-call-warmed",
     "misunderstood": "a call made before the 'first call' so that it is not 'distorted'",
     "edits": [("        with count_compiles() as first:\n",
                "        call()\n        with count_compiles() as first:\n")]},
    {"stage": 4, "id": "records-output-self-compared",
     "misunderstood": "each version's output compared with its own first call",
     "edits": [("        if expected is None:\n            expected = out\n",
                "        expected = out\n")]},
    {"stage": 4, "id": "records-python-tracer",
     "misunderstood": "the record's trace taken with the profiler's default options",
     "edits": [(RECORD_TRACE, "        params = slow_step.fresh_copy(problem[\"params\"])\n"
                              "        with jax.profiler.trace(str(logdir)):\n"
                              "            with jax.profiler.TraceAnnotation(REGION):\n"
                              "                jax.block_until_ready(fn(params, *args, next(lrs)))\n")]},
    {"stage": 4, "id": "records-region-by-label",
     "misunderstood": "the traced call annotated with the record's label, not REGION",
     "edits": [(RECORD_TRACE, RECORD_TRACE.replace("TraceAnnotation(REGION)",
                                                   "TraceAnnotation(label)"))]},
    {"stage": 4, "id": "records-trace-unfinished",
     "misunderstood": "the traced call not waited for inside the trace",
     "edits": [(RECORD_TRACE, RECORD_TRACE.replace(
         "                jax.block_until_ready(fn(params, *args, next(lrs)))\n",
         "                out_traced = fn(params, *args, next(lrs))\n"
         "        jax.block_until_ready(out_traced)\n"))]},
    {"stage": 4, "id": "records-milliseconds",
     "misunderstood": "samples in milliseconds",
     "edits": [(CALL, CALL.replace("return out, time.perf_counter() - start",
                                   "return out, (time.perf_counter() - start) * 1e3"))]},
    {"stage": 4, "id": "records-wrong-output-timed",
     "misunderstood": "a wrong output still timed, its samples kept",
     "edits": [("            if ok:\n                for _ in range(warmup):\n",
                "            if True:\n                for _ in range(warmup):\n")]},
    {"stage": 4, "id": "records-shapes-of-params",
     "misunderstood": "shapes and dtypes of the parameters recorded, not of tokens and targets",
     "edits": [('                  "shapes": [list(a.shape) for a in args],\n'
                '                  "dtypes": [str(a.dtype) for a in args], "output_ok": bool(ok),\n',
                '                  "shapes": [list(a.shape) for a in jax.tree.leaves(params)],\n'
                '                  "dtypes": [str(a.dtype) for a in jax.tree.leaves(params)],'
                ' "output_ok": bool(ok),\n')]},
    {"stage": 4, "id": "records-output-check-losses-only",
     "misunderstood": "the output check compares the losses, the loss curve being what matters",
     "edits": [("                 for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(expected)))",
                "                 for a, b in zip(jax.tree.leaves(out[1]), "
                "jax.tree.leaves(expected[1])))")]},
    {"stage": 4, "id": "records-warmup-compiles-not-counted",
     "misunderstood": "compiles_warmed counted over the timed calls only, not the warm-up",
     "edits": [("        with count_compiles() as warmed:\n            if ok:\n"
                "                for _ in range(warmup):\n                    call()\n",
                "        if ok:\n            for _ in range(warmup):\n                call()\n"
                "        with count_compiles() as warmed:\n            if ok:\n")]},
]

JUSTIFIED: dict[str, str] = {
    "trace-not-finished": "train_slow reads every step's loss to the host, so the call has "
                          "finished but for its last update when it returns: no effect",
}

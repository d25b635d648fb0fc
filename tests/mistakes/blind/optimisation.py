"""optimisation: blind mistakes, written from the README, starter and solution only."""

MISTAKES = [
    # ------------------------------------------------------------------ stage 1: find it
    {"stage": 1, "id": "blind-trace-compiling-call",
     "misunderstood": "traced the very first call of train_slow (no untraced warm-up), so "
                      "the trace holds every eager op's compile for these shapes",
     "edits": [('    jax.block_until_ready(slow_step.train_slow(problem["params"], *args, '
                'problem["lr"]))\n', "")]},
    {"stage": 1, "id": "blind-trace-reused-lr",
     "misunderstood": "gave the traced call the warm-up's learning rate, so the recompile a "
                      "new rate causes in use never shows in the trace",
     "edits": [('problem["lr"] * 0.9)', 'problem["lr"])')]},
    {"stage": 1, "id": "blind-trace-python-tracer-on",
     "misunderstood": "kept the profiler's default options, Python tracer included",
     "edits": [("    options.python_tracer_level = 0\n"
                "    with jax.profiler.trace(logdir, profiler_options=options):",
                "    with jax.profiler.trace(logdir, profiler_options=options):")]},
    {"stage": 1, "id": "blind-trace-warmup-inside",
     "misunderstood": "put the warm-up call inside the profiler window, so the trace holds "
                      "two calls (and the warm-up's compiles)",
     "edits": [('    jax.block_until_ready(slow_step.train_slow(problem["params"], *args, '
                'problem["lr"]))\n'
                "    options = jax.profiler.ProfileOptions()\n"
                "    options.python_tracer_level = 0\n"
                "    with jax.profiler.trace(logdir, profiler_options=options):\n",
                "    options = jax.profiler.ProfileOptions()\n"
                "    options.python_tracer_level = 0\n"
                "    with jax.profiler.trace(logdir, profiler_options=options):\n"
                '        jax.block_until_ready(slow_step.train_slow(problem["params"], *args, '
                'problem["lr"]))\n')]},
    {"stage": 1, "id": "blind-breakdown-nested-phases",
     "misunderstood": "summed every phase-named event anywhere inside a step, nested ones "
                      "included, instead of direct children only (double counting)",
     "edits": [("        for child in ev.children:\n            if child.name in phase_us:",
                "        for child in _walk(ev.children):\n"
                "            if child.name in phase_us:")]},
    {"stage": 1, "id": "blind-breakdown-step-prefix",
     "misunderstood": "matched step events by name prefix, so a region named like "
                      "'train_step_xyz' counts as a step",
     "edits": [("found = [ev for ev in _walk(forest) if ev.name == step_region]",
                "found = [ev for ev in _walk(forest) if ev.name.startswith(step_region)]")]},
    {"stage": 1, "id": "blind-breakdown-share-of-phases",
     "misunderstood": "divided each phase by the summed phase time instead of the step "
                      "time, so shares always add to 1 and ignore time in no phase",
     "edits": [('"shares": {p: (v / step_us if step_us else 0.0)',
                '"shares": {p: (v / sum(phase_us.values()) if step_us else 0.0)')]},
    {"stage": 1, "id": "blind-breakdown-other-from-children",
     "misunderstood": "took other_us as the summed non-phase child events rather than the "
                      "step time minus the phases (the step's own gaps are lost)",
     "edits": [('"other_us": step_us - sum(phase_us.values()),',
                '"other_us": float(sum(c.dur for ev in found for c in ev.children\n'
                '                                  if c.name not in phase_us)),')]},
    {"stage": 1, "id": "blind-forest-ignores-thread",
     "misunderstood": "nested events by time only within a process, ignoring the thread, "
                      "so another thread's event inside a step's span becomes its child",
     "edits": [('by_thread.setdefault((e.get("pid"), e.get("tid")), [])',
                'by_thread.setdefault(e.get("pid"), [])')]},
    {"stage": 1, "id": "blind-breakdown-absent-phase-missing",
     "misunderstood": "only reported the phases that were seen, so a phase that never "
                      "occurs has no entry instead of 0.0",
     "edits": [("phase_us = {p: 0.0 for p in phases}", "phase_us = {}"),
               ("            if child.name in phase_us:\n"
                "                phase_us[child.name] += child.dur",
                "            if child.name in phases:\n"
                "                phase_us[child.name] = phase_us.get(child.name, 0.0) + "
                "child.dur")]},
    {"stage": 1, "id": "blind-evidence-most-calls",
     "misunderstood": "picked the evidence event with the most calls rather than the "
                      "largest summed duration",
     "edits": [("name = max(totals, key=lambda n: totals[n][1])",
                "name = max(totals, key=lambda n: totals[n][0])")]},
    {"stage": 1, "id": "blind-evidence-nested-calls",
     "misunderstood": "counted every descendant of the limiting phase as evidence, so "
                      "calls nested in same-named calls are counted (and timed) twice",
     "edits": [("            for grandchild in child.children:",
                "            for grandchild in _walk(child.children):")]},
    {"stage": 1, "id": "blind-amdahl-inverse-share",
     "misunderstood": "took Amdahl's ceiling as 1/share (the phase's weight) instead of "
                      "1/(1 - share) (what is left when the phase is gone)",
     "edits": [("ceiling = math.inf if share >= 1.0 else 1.0 / (1.0 - share)",
                "ceiling = math.inf if share <= 0.0 else 1.0 / share")]},
    {"stage": 1, "id": "blind-evidence-mean-per-call",
     "misunderstood": "reported the evidence's time as the mean per call rather than the "
                      "summed duration",
     "edits": [('"us": totals[name][1]}', '"us": totals[name][1] / totals[name][0]}')]},
    {"stage": 1, "id": "blind-evidence-first-step-only",
     "misunderstood": "gathered the evidence from the first step only (where the recompile "
                      "is) instead of all steps together",
     "edits": [("                entry[1] += grandchild.dur\n",
                "                entry[1] += grandchild.dur\n        break\n")]},

    # ------------------------------------------------------------------ stage 2: fix it
    {"stage": 2, "id": "blind-fast-bfloat16-matmuls",
     "misunderstood": "ran the matmuls in bfloat16 for speed, thinking the float32 "
                      "tolerance only constrains the stored parameters",
     "edits": [('    h = jnp.tanh(x @ params["w1"])\n    logits = h @ params["w2"]',
                '    h = jnp.tanh(x.astype(jnp.bfloat16) @ params["w1"].astype(jnp.bfloat16))\n'
                '    logits = (h @ params["w2"].astype(jnp.bfloat16)).astype(jnp.float32)')]},
    {"stage": 2, "id": "blind-fast-naive-logsumexp",
     "misunderstood": "wrote log-sum-exp as log(sum(exp(logits))) without the max shift; "
                      "exp overflows in float32 on a confident model",
     "edits": [("lse = jax.nn.logsumexp(logits, axis=-1)",
                "lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))")]},
    {"stage": 2, "id": "blind-fast-loss-after-update",
     "misunderstood": "logged each step's loss after its update instead of before it",
     "edits": [("        value, grads = jax.value_and_grad(_loss)(p, *batch)\n"
                "        return jax.tree.map(lambda a, g: a - lr * g, p, grads), value",
                "        grads = jax.grad(_loss)(p, *batch)\n"
                "        new = jax.tree.map(lambda a, g: a - lr * g, p, grads)\n"
                "        return new, _loss(new, *batch)")]},
    {"stage": 2, "id": "blind-fast-static-lr",
     "misunderstood": "kept the learning rate static (a hyperparameter, as train_slow "
                      "does), so every new rate recompiles the whole scanned loop",
     "edits": [("@functools.partial(jax.jit, donate_argnums=0)",
                "@functools.partial(jax.jit, donate_argnums=0, static_argnums=3)"),
               ("return _train(params, tokens, targets, jnp.float32(lr))",
                "return _train(params, tokens, targets, float(lr))")]},
    {"stage": 2, "id": "blind-fast-jit-per-call",
     "misunderstood": "built the jitted loop inside train_fast, closing over this call's "
                      "lr, so each call makes a new function and compiles again",
     "edits": [("    return _train(params, tokens, targets, jnp.float32(lr))",
                "    run = jax.jit(lambda p, tok, tgt: _train(p, tok, tgt, lr))\n"
                "    return run(params, tokens, targets)")]},
    {"stage": 2, "id": "blind-fast-parallel-steps",
     "misunderstood": "vectorised the steps with vmap (all gradients at the initial "
                      "parameters, summed), dropping SGD's step-by-step dependence",
     "edits": [("    def step(p, batch):\n"
                "        value, grads = jax.value_and_grad(_loss)(p, *batch)\n"
                "        return jax.tree.map(lambda a, g: a - lr * g, p, grads), value\n"
                "    return lax.scan(step, params, (tokens, targets))",
                "    values, grads = jax.vmap(jax.value_and_grad(_loss), in_axes=(None, 0, 0))(\n"
                "        params, tokens, targets)\n"
                "    return jax.tree.map(lambda a, g: a - lr * g.sum(0), params, grads), values")]},
    {"stage": 2, "id": "blind-fast-stop-gradient-lse",
     "misunderstood": "treated the log-sum-exp normaliser as a constant (stop_gradient, "
                      "as for the max in the stable trick): losses right, gradient wrong",
     "edits": [("lse = jax.nn.logsumexp(logits, axis=-1)",
                "lse = lax.stop_gradient(jax.nn.logsumexp(logits, axis=-1))")]},
    {"stage": 2, "id": "blind-fast-dropped-normaliser",
     "misunderstood": "took cross-entropy as minus the target's logit, dropping the "
                      "log-sum-exp term",
     "edits": [("return jnp.mean(lse - picked)", "return jnp.mean(-picked)")]},
    {"stage": 2, "id": "blind-fast-embed-frozen",
     "misunderstood": "updated only the weight matrices, thinking an embedding lookup "
                      "has no gradient",
     "edits": [("        return jax.tree.map(lambda a, g: a - lr * g, p, grads), value",
                '        return {**p, "w1": p["w1"] - lr * grads["w1"],\n'
                '                "w2": p["w2"] - lr * grads["w2"]}, value')]},
    {"stage": 2, "id": "blind-fast-pick-by-tokens",
     "misunderstood": "picked the logit at the input token instead of the target token",
     "edits": [("jnp.take_along_axis(logits, targets[:, None], axis=-1)",
                "jnp.take_along_axis(logits, tokens[:, None], axis=-1)")]},
    {"stage": 2, "id": "blind-fast-sum-not-mean",
     "misunderstood": "summed the per-example losses over the batch instead of taking "
                      "their mean",
     "edits": [("return jnp.mean(lse - picked)", "return jnp.sum(lse - picked)")]},
    {"stage": 2, "id": "blind-fast-losses-float16",
     "misunderstood": "returned the loss log in float16 to save memory, thinking only the "
                      "parameters must stay float32",
     "edits": [("    return lax.scan(step, params, (tokens, targets))",
                "    params, losses = lax.scan(step, params, (tokens, targets))\n"
                "    return params, losses.astype(jnp.float16)")]},
    {"stage": 2, "id": "blind-fast-aot-keyed-on-steps",
     "misunderstood": "cached an ahead-of-time compiled executable keyed on the step count "
                      "only, so a later call with the same steps and another batch size "
                      "runs a program compiled for the first call's shapes (TypeError)",
     "edits": [("    return _train(params, tokens, targets, jnp.float32(lr))\n",
                "    compiled = train_fast.__dict__.setdefault('compiled', {})\n"
                "    steps = tokens.shape[0]\n"
                "    if steps not in compiled:\n"
                "        compiled[steps] = _train.lower(params, tokens, targets,\n"
                "                                       jnp.float32(lr)).compile()\n"
                "    return compiled[steps](params, tokens, targets, jnp.float32(lr))\n")]},
    {"stage": 2, "id": "blind-fast-donates-inputs",
     "misunderstood": "donated tokens and targets as well as params, thinking every input "
                      "of a training call is consumed (the contract allows params only: "
                      "the caller's other arrays are deleted after the call)",
     "edits": [("@functools.partial(jax.jit, donate_argnums=0)",
                "@functools.partial(jax.jit, donate_argnums=(0, 1, 2))")]},

    # ------------------------------------------------------- stage 3: where it stops helping
    {"stage": 3, "id": "blind-sweep-unsynced-samples",
     "misunderstood": "timed each call without waiting for its result (dispatch time for "
                      "the asynchronous fast version)",
     "edits": [("            samples.append(_timed(fn))",
                "            start = time.perf_counter()\n"
                "            fn()\n"
                "            samples.append(time.perf_counter() - start)")]},
    {"stage": 3, "id": "blind-sweep-compile-in-samples",
     "misunderstood": "skipped the untimed first calls, so the first round's samples "
                      "include the compiles",
     "edits": [("    _timed(slow)\n    _timed(fast)\n", "")]},
    {"stage": 3, "id": "blind-sweep-slow-fixed-lr",
     "misunderstood": "gave every train_slow call the problem's one learning rate, so the "
                      "slow version never pays the per-rate recompile it pays in use",
     "edits": [('return slow_step.train_slow(problem["params"], *args, next(lrs))',
                'return slow_step.train_slow(problem["params"], *args, problem["lr"])')]},
    {"stage": 3, "id": "blind-sweep-copy-in-sample",
     "misunderstood": "made the fresh parameter copy (needed for donation) inside the "
                      "timed fast call",
     "edits": [("return train_fast(copies.pop(), *args, next(lrs))",
                'return train_fast(slow_step.fresh_copy(problem["params"]), *args, '
                'next(lrs))')]},
    {"stage": 3, "id": "blind-sweep-blocks-not-rounds",
     "misunderstood": "timed all slow calls in one block, then all fast calls, instead of "
                      "interleaving the versions round by round",
     "edits": [("    for r in range(rounds):\n"
                "        copies.append(slow_step.fresh_copy(problem[\"params\"]))\n"
                "        jax.block_until_ready(copies)\n"
                "        order = ((slow, slow_s), (fast, fast_s))\n"
                "        for fn, samples in (order if r % 2 == 0 else order[::-1]):\n"
                "            samples.append(_timed(fn))",
                "    for r in range(rounds):\n"
                "        slow_s.append(_timed(slow))\n"
                "    for r in range(rounds):\n"
                "        copies.append(slow_step.fresh_copy(problem[\"params\"]))\n"
                "        jax.block_until_ready(copies)\n"
                "        fast_s.append(_timed(fast))")]},
    {"stage": 3, "id": "blind-gain-mean-of-samples",
     "misunderstood": "took the gain as mean slow sample / mean fast sample",
     "edits": [('out["gains"].append(statistics.median(slow_s) / statistics.median(fast_s))',
                'out["gains"].append(statistics.mean(slow_s) / statistics.mean(fast_s))')]},
    {"stage": 3, "id": "blind-gain-median-of-round-ratios",
     "misunderstood": "took the gain as the median of per-round ratios instead of the "
                      "ratio of the two medians",
     "edits": [('out["gains"].append(statistics.median(slow_s) / statistics.median(fast_s))',
                'out["gains"].append(statistics.median([s / f for s, f in '
                'zip(slow_s, fast_s)]))')]},
    {"stage": 3, "id": "blind-sweep-batch-not-applied",
     "misunderstood": "built every size's problem from the config as given, never "
                      "overriding its batch, so every 'size' measures the same problem",
     "edits": [("slow_step.make_problem(dict(config, batch=int(b)),",
                "slow_step.make_problem(dict(config),")]},
    {"stage": 3, "id": "blind-sweep-samples-in-ms",
     "misunderstood": "reported the raw samples in milliseconds (the gains, a ratio, are "
                      "unchanged)",
     "edits": [('        out["slow_s"].append(slow_s)\n        out["fast_s"].append(fast_s)',
                '        out["slow_s"].append([s * 1e3 for s in slow_s])\n'
                '        out["fast_s"].append([s * 1e3 for s in fast_s])')]},
    {"stage": 3, "id": "blind-crossover-linear",
     "misunderstood": "interpolated gain against batch linearly instead of in (log batch, "
                      "log gain)",
     "edits": [("            f = (math.log(g0) - math.log(threshold)) / "
                "(math.log(g0) - math.log(g1))\n"
                "            return float(math.exp(math.log(b0) + f * "
                "(math.log(b1) - math.log(b0))))",
                "            f = (g0 - threshold) / (g0 - g1)\n"
                "            return float(b0 + f * (b1 - b0))")]},
    {"stage": 3, "id": "blind-crossover-at-threshold-counts-below",
     "misunderstood": "counted a gain exactly at the threshold as already below it",
     "edits": [("    if gains[0] < threshold:", "    if gains[0] <= threshold:"),
               ("        if g0 >= threshold > g1:", "        if g0 > threshold >= g1:")]},
    {"stage": 3, "id": "blind-crossover-no-first-size-case",
     "misunderstood": "only looked for a crossing between neighbours, forgetting the case "
                      "where the first size is already below the threshold",
     "edits": [("    if gains[0] < threshold:\n        return float(batch_sizes[0])\n", "")]},
    {"stage": 3, "id": "blind-crossover-next-size",
     "misunderstood": "returned the first measured size below the threshold instead of "
                      "interpolating between neighbours",
     "edits": [("            f = (math.log(g0) - math.log(threshold)) / "
                "(math.log(g0) - math.log(g1))\n"
                "            return float(math.exp(math.log(b0) + f * "
                "(math.log(b1) - math.log(b0))))",
                "            return float(b1)")]},
    {"stage": 3, "id": "blind-predict-min-not-median",
     "misunderstood": "fitted the cost model to the fastest call at each size (min) while "
                      "reporting it as the medians",
     "edits": [('fit[b] = (statistics.median(sweep["slow_s"][0]), '
                'statistics.median(sweep["fast_s"][0]))',
                'fit[b] = (min(sweep["slow_s"][0]), min(sweep["fast_s"][0]))')]},
    {"stage": 3, "id": "blind-predict-no-floor",
     "misunderstood": "returned the model's raw solution even when it is below one example "
                      "(no floor at 1.0 for a threshold no batch reaches)",
     "edits": [('return {"crossover": float(max(batch, 1.0)), **medians}',
                'return {"crossover": float(batch), **medians}')]},
    {"stage": 3, "id": "blind-predict-medians-per-size",
     "misunderstood": "read 'median_slow_s: [at small, at large]' as per size [slow, fast] "
                      "and filled the lists per size instead of per version",
     "edits": [('medians = {"median_slow_s": [s0, s1], "median_fast_s": [f0, f1]}',
                'medians = {"median_slow_s": [s0, f0], "median_fast_s": [s1, f1]}')]},

    # ------------------------------------------------------------------ stage 4: the report
    {"stage": 4, "id": "blind-record-call-before-first",
     "misunderstood": "warmed up before the 'first' call, so first_call_s and "
                      "compiles_first_call miss the compile",
     "edits": [("        with count_compiles() as first:",
                "        call()\n        with count_compiles() as first:")]},
    {"stage": 4, "id": "blind-record-check-losses-only",
     "misunderstood": "checked only the losses against train_slow, not the parameters",
     "edits": [("for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(expected)))",
                "for a, b in [(out[1], expected[1])])")]},
    {"stage": 4, "id": "blind-record-bitwise-check",
     "misunderstood": "read 'the same outputs' as bitwise equality, so a correct float32 "
                      "reordering fails its output check and is never timed",
     "edits": [("        ok = all(np.allclose(np.asarray(a), np.asarray(b), rtol=slow_step.RTOL,\n"
                "                             atol=slow_step.ATOL)\n",
                "        ok = all(np.array_equal(np.asarray(a), np.asarray(b))\n")]},
    {"stage": 4, "id": "blind-record-check-against-self",
     "misunderstood": "set the expected outputs from each record's own first call, so the "
                      "after's output check compares train_fast with itself",
     "edits": [("        if expected is None:\n            expected = out",
                "        expected = out")]},
    {"stage": 4, "id": "blind-record-unsynced-samples",
     "misunderstood": "stopped the clock when the call returned, without waiting for its "
                      "outputs",
     "edits": [("out = jax.block_until_ready(fn(params, *args, next(lrs) if lr is None else lr))",
                "out = fn(params, *args, next(lrs) if lr is None else lr)")]},
    {"stage": 4, "id": "blind-record-copy-in-sample",
     "misunderstood": "made the donated parameters' fresh copy inside the timed region",
     "edits": [('            params = slow_step.fresh_copy(problem["params"])\n'
                "            jax.block_until_ready(params)\n"
                "            start = time.perf_counter()\n",
                "            start = time.perf_counter()\n"
                '            params = slow_step.fresh_copy(problem["params"])\n')]},
    {"stage": 4, "id": "blind-record-one-lr",
     "misunderstood": "gave every call the problem's learning rate, so train_slow's "
                      "per-rate recompiles vanish from the before record",
     "edits": [("next(lrs) if lr is None else lr))", 'problem["lr"]))')]},
    {"stage": 4, "id": "blind-record-compiles-total",
     "misunderstood": "recorded compiles_warmed as all compiles of the run, the first "
                      "call's included",
     "edits": [('"compiles_warmed": warmed[0],', '"compiles_warmed": first[0] + warmed[0],')]},
    {"stage": 4, "id": "blind-record-warmup-not-run",
     "misunderstood": "wrote warmup into the record but never made the warm-up calls",
     "edits": [("                for _ in range(warmup):\n                    call()\n", "")]},
    {"stage": 4, "id": "blind-record-times-wrong-output",
     "misunderstood": "computed output_ok but timed the version whatever it said",
     "edits": [("            if ok:\n"
                "                for _ in range(warmup):\n"
                "                    call()\n"
                "                samples = [call()[1] for _ in range(iters)]",
                "            for _ in range(warmup):\n"
                "                call()\n"
                "            samples = [call()[1] for _ in range(iters)]")]},
    {"stage": 4, "id": "blind-record-param-shapes",
     "misunderstood": "recorded the shapes and dtypes of the parameters instead of tokens "
                      "and targets",
     "edits": [('"shapes": [list(a.shape) for a in args],\n'
                '                  "dtypes": [str(a.dtype) for a in args],',
                '"shapes": [list(a.shape) for a in jax.tree.leaves(problem["params"])],\n'
                '                  "dtypes": [str(a.dtype) for a in '
                'jax.tree.leaves(problem["params"])],')]},
    {"stage": 4, "id": "blind-record-trace-without-region",
     "misunderstood": "traced the extra call but without the REGION annotation the record "
                      "names",
     "edits": [("            with jax.profiler.TraceAnnotation(REGION):\n"
                "                jax.block_until_ready(fn(params, *args, next(lrs)))",
                "            jax.block_until_ready(fn(params, *args, next(lrs)))")]},
    {"stage": 4, "id": "blind-record-trace-unfinished",
     "misunderstood": "waited for the traced call only after the profiler and the region "
                      "closed, so the trace holds its dispatch, not the whole call",
     "edits": [("                jax.block_until_ready(fn(params, *args, next(lrs)))\n"
                "        timing = {",
                "                traced = fn(params, *args, next(lrs))\n"
                "        jax.block_until_ready(traced)\n"
                "        timing = {")]},
    {"stage": 4, "id": "blind-record-label-function-name",
     "misunderstood": "labelled each record with the function's name instead of "
                      "'before'/'after'",
     "edits": [('timing = {"label": label,', 'timing = {"label": fn.__name__,')]},
    {"stage": 4, "id": "blind-record-first-call-new-lr",
     "misunderstood": "gave each version's first call its own new learning rate, so the "
                      "output check compares runs with different rates",
     "edits": [('out, first_call_s = call(lr=problem["lr"])', "out, first_call_s = call()")]},
]


# A second blind batch (2026-12-06, issue 53): written from the learner's copy and
# the solutions only, each confirmed wrong by a measurement quoted in its line.
MISTAKES += [
    {"stage": 1, "id": "blind-b2-phases-at-any-depth",
     "misunderstood": "sums phase events at any depth under the step (walking all descendants) instead of direct children only, so a phase name nested deeper is counted too and other_us goes negative: measured 'update nested inside forward_backward: update_us ref=30.0 mut=50.0, other_us ref=10.0 mut=-10.0'",
     "named_by": ["direct children", "nested deeper", "any depth", "counted twice"],
     "edits": [("        for child in ev.children:\n            if child.name in phase_us:\n",
                "        for child in _walk(ev.children):\n            if child.name in phase_us:\n")]},
    {"stage": 1, "id": "blind-b2-evidence-most-calls",
     "misunderstood": "picks the evidence event with the most calls instead of the largest summed duration: measured 'ref evidence={event: big, count: 1, us: 60.0} mut evidence={event: small, count: 3, us: 3.0}'",
     "named_by": ["most calls", "count", "summed duration", "most time"],
     "edits": [("        name = max(totals, key=lambda n: totals[n][1])\n",
                "        name = max(totals, key=lambda n: totals[n][0])\n")]},
    {"stage": 2, "id": "blind-b2-static-learning-rate",
     "misunderstood": "makes lr a static jit argument (a Python float), so every call with a new learning rate recompiles, while later calls must compile nothing: measured 'compiles on a second call with a new lr: ref=0 mut=1'",
     "named_by": ["static", "recompile", "learning rate", "new lr"],
     "edits": [("@functools.partial(jax.jit, donate_argnums=0)\ndef _train(",
                "@functools.partial(jax.jit, donate_argnums=0, static_argnums=3)\ndef _train("),
               ("    return _train(params, tokens, targets, jnp.float32(lr))\n",
                "    return _train(params, tokens, targets, float(lr))\n")]},
    {"stage": 2, "id": "blind-b2-naive-logsumexp",
     "misunderstood": "writes logsumexp as log(sum(exp(logits))) without the max shift, which overflows float32 on a confident model (logits 100-200): measured 'confident model, first loss: train_slow=53.27 ref=53.27 mut=inf'",
     "named_by": ["overflow", "logsumexp", "exp", "inf"],
     "edits": [("    lse = jax.nn.logsumexp(logits, axis=-1)\n",
                "    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))\n")]},
    {"stage": 3, "id": "blind-b2-crossover-at-threshold",
     "misunderstood": "treats a gain exactly at the threshold as already below it (g0 > t >= g1 instead of g0 >= t > g1), the wrong side of the boundary: measured 'gains [4,3] thr 4: ref=10.0 mut=None; gains [5,4] thr 4: ref=None mut=100.0'",
     "named_by": ["exactly at", "threshold", "boundary", "below"],
     "edits": [("        if g0 >= threshold > g1:\n",
                "        if g0 > threshold >= g1:\n")]},
    {"stage": 4, "id": "blind-b2-first-call-new-lr",
     "misunderstood": "gives the first timed call a fresh learning rate instead of the problem's own, so before and after are compared on different rates and output_ok fails: measured 'first call lr == problem lr: ref=True mut=False; after output_ok ref=True mut=False'",
     "named_by": ["first call", "problem's own", "learning rate", "output_ok"],
     "edits": [('            out, first_call_s = call(lr=problem["lr"])\n',
                '            out, first_call_s = call()\n')]},
    # blind batch 3 (2026-12-06, written from a learner's copy and the solutions only)
    {"stage": 1, "id": "blind-b3-forest-touching-event-not-popped",
     "misunderstood": "_forest pops an enclosing event only when the next one starts strictly after its end, so a phase that starts exactly where its sibling ends becomes a new root and drops out of the step; measured: step [0,100] with phases at 0/50/80 back to back gives phase_us {'forward_backward': 50.0, 'update': 0.0, 'log_loss': 0.0} (reference 50.0, 30.0, 20.0)",
     "named_by": ["touching", "boundary", "ends exactly", "stack"],
     "edits": [("            while stack and ev.ts >= stack[-1].end:\n",
                "            while stack and ev.ts > stack[-1].end:\n")]},
    {"stage": 1, "id": "blind-b3-trace-file-first-run",
     "misunderstood": "_trace_file returns the first (oldest) profiler run under logdir instead of the newest, so a second trace into the same folder returns the earlier call's file; measured: trace_slow(steps=5) after trace_slow(steps=3) in one logdir returns a file with 3 train_step events (reference 5)",
     "named_by": ["first run", "oldest", "earlier trace", "same logdir"],
     "edits": [("    return runs[-1]\n", "    return runs[0]\n")]},
    {"stage": 2, "id": "blind-b3-fast-jit-cache-by-shape-closes-lr",
     "misunderstood": 'train_fast caches one jitted closure per tokens shape, and the closure holds the lr of the first call at that shape, so later calls train with a stale learning rate; measured: train_fast(lr=0.7) after lr=0.2 has max |loss - train_slow| 7.5e-02 (reference 0.0)',
     "named_by": ["cache", "closure", "first call's lr", "keyed on shape"],
     "edits": [("    return _train(params, tokens, targets, jnp.float32(lr))\n",
                "    cache = train_fast.__dict__.setdefault(\"_by_shape\", {})\n"
                "    if tokens.shape not in cache:  # one compiled program per shape\n"
                "        cache[tokens.shape] = jax.jit(\n"
                "            lambda p, t, y: _train(p, t, y, jnp.float32(lr)))\n"
                "    return cache[tokens.shape](params, tokens, targets)\n")]},
    {"stage": 3, "id": "blind-b3-crossover-first-pair-only",
     "misunderstood": "crossover's `return None` sits inside the loop, so only the first pair of neighbouring sizes is examined; measured: crossover([8,16,32,64], [10,8,5,2], 4) gives None (reference 37.88)",
     "named_by": ["first pair", "indentation", "return inside the loop"],
     "edits": [("            return float(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0))))\n"
                "    return None\n",
                "            return float(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0))))\n"
                "        return None\n")]},
    {"stage": 3, "id": "blind-b3-predict-medians-cached-by-batch",
     "misunderstood": "predict_crossover keeps its medians in a cache keyed on the batch size only, so a later call with another config (or seed) reuses the first call's timings; measured: steps=12 after steps=2 at batches 4 and 16 gives median_slow_s [13.0, 13.4] ms (reference [165.9, 277.7] ms)",
     "named_by": ["cache", "keyed on batch", "earlier call", "config"],
     "edits": [("    fit = {}\n    for b in (small, large):\n",
                "    fit = predict_crossover.__dict__.setdefault(\"_fit\", {})  # sweeps are slow\n"
                "    for b in (small, large):\n"
                "        if b in fit:\n"
                "            continue\n")]},
    {"stage": 4, "id": "blind-b3-records-expected-kept-across-calls",
     "misunderstood": "write_run_records keeps the first call's train_slow outputs as the expected outputs for every later call, so another seed's correct outputs are judged wrong and not timed; measured: seed=1 after seed=0 gives output_ok False/False and 0 samples (reference True/True, 2 samples)",
     "named_by": ["cache", "earlier call", "expected outputs", "other seed"],
     "edits": [("    expected = None\n",
                "    expected = write_run_records.__dict__.get(\"_expected\")\n"),
               ("            expected = out\n",
                "            expected = write_run_records._expected = out\n")]},
    # ------------------------------------------------------------ batch 4 (blind, s7)
    {"stage": 1, "id": "blind-b4-trace-slow-reuses-lr",
     "misunderstood": "traces the steady call with the same learning rate as the warm-up call, so the recompile a new lr causes in use never appears in the trace; measured: config vocab 37/embed 5/hidden 11/batch 3/steps 3: compile-named events in the trace ref 11, mutant 0",
     "named_by": ["learning rate", "recompile", "same lr", "compile events"],
     "edits": [("        out = slow_step.train_slow(problem[\"params\"], *args, problem[\"lr\"] * 0.9)\n",
                "        out = slow_step.train_slow(problem[\"params\"], *args, problem[\"lr\"])\n")]},
    {"stage": 1, "id": "blind-b4-evidence-most-calls",
     "misunderstood": "picks the evidence event by its number of calls instead of its summed duration, naming a frequent but cheap event; measured: hand-built phase with 1 x big (50 us) and 5 x small (15 us): evidence ref big, mutant small (count 5, 15 us)",
     "named_by": ["count", "most calls", "duration", "summed time"],
     "edits": [("        name = max(totals, key=lambda n: totals[n][1])\n",
                "        name = max(totals, key=lambda n: totals[n][0])\n")]},
    {"stage": 2, "id": "blind-b4-fast-naive-logsumexp",
     "misunderstood": "writes log-sum-exp as log(sum(exp(logits))) without subtracting the max, which overflows to inf on a confident model (logits past 88); measured: w2 x400 (max |logit| 155): losses train_slow [73.438, 631.571, 972.459], ref the same, mutant [inf, nan, nan]",
     "named_by": ["overflow", "logsumexp", "max", "inf"],
     "edits": [("    lse = jax.nn.logsumexp(logits, axis=-1)\n",
                "    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))\n")]},
    {"stage": 3, "id": "blind-b4-crossover-strict-at-threshold",
     "misunderstood": "requires the gain strictly above the threshold before a crossing, so a gain exactly at the threshold is never the start of one; measured: gains [5, 4, 2] at sizes [8, 16, 32], threshold 4: ref 16.0, mutant None",
     "named_by": ["exactly", "threshold", "boundary", ">="],
     "edits": [("        if g0 >= threshold > g1:\n",
                "        if g0 > threshold > g1:\n")]},
    {"stage": 3, "id": "blind-b4-sweep-gain-of-means",
     "misunderstood": "computes each gain as mean slow sample over mean fast sample instead of the ratio of medians, so one slow sample moves it; measured: planted slow samples [1, 1, 10] s, fast [0.25]*3 s: gain ref 4.0, mutant 16.0",
     "named_by": ["mean", "median", "outlier", "gain"],
     "edits": [("        out[\"gains\"].append(statistics.median(slow_s) / statistics.median(fast_s))\n",
                "        out[\"gains\"].append(statistics.mean(slow_s) / statistics.mean(fast_s))\n")]},
    {"stage": 4, "id": "blind-b4-records-output-checked-against-itself",
     "misunderstood": "resets the expected output to each version's own first call, so the after record's output check compares train_fast with itself and is True even when train_fast is wrong; measured: train_fast made 1% wrong in its losses: after record output_ok ref False, mutant True",
     "named_by": ["output_ok", "itself", "own output", "expected"],
     "edits": [("        if expected is None:\n            expected = out\n",
                "        expected = out\n")]},
]

# Batch b5 (2026-12-07): six more, written from the learner's copy (README, starter,
# notebooks) and the reference solution only, never a checker or this corpus.
MISTAKES += [
    {"stage": 1, "id": "blind-b5-trace-reuses-warmup-lr",
     "misunderstood": "The learner believed the steady call to trace is the warm-up call repeated with the same learning rate, so the trace shows no recompile where a new learning rate causes one in use.",
     "named_by": ["learning rate of its own", "recompile", "same learning rate"],
     "edits": [("out = slow_step.train_slow(problem[\"params\"], *args, problem[\"lr\"] * 0.9)",
                "out = slow_step.train_slow(problem[\"params\"], *args, problem[\"lr\"])")]},
    {"stage": 1, "id": "blind-b5-evidence-most-calls",
     "misunderstood": "The learner believed the evidence is the child event called most often, not the one with the largest summed duration.",
     "named_by": ["summed duration", "most calls", "evidence"],
     "edits": [("name = max(totals, key=lambda n: totals[n][1])",
                "name = max(totals, key=lambda n: totals[n][0])")]},
    {"stage": 2, "id": "blind-b5-naive-logsumexp",
     "misunderstood": "The learner believed log(sum(exp(logits))) is a faithful log-sum-exp in float32, but it overflows to inf on a confident model with logits of 100-200.",
     "named_by": ["overflow", "log-sum-exp", "confident model", "subtract the max"],
     "edits": [("    lse = jax.nn.logsumexp(logits, axis=-1)",
                "    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))")]},
    {"stage": 3, "id": "blind-b5-crossover-threshold-boundary",
     "misunderstood": "The learner believed a gain exactly at the threshold already counts as fallen below it, moving the crossing for gains equal to the threshold at the first or last size.",
     "named_by": ["exactly at the threshold", "at or above", "boundary"],
     "edits": [("        if g0 >= threshold > g1:", "        if g0 > threshold >= g1:")]},
    {"stage": 3, "id": "blind-b5-sweep-slow-shares-lr",
     "misunderstood": "The learner believed the learning rate does not matter for timing and gave every train_slow call the problem's own rate, so its calls after the first share one rate and skip the recompile a new rate causes in use.",
     "named_by": ["learning rate", "no two calls share", "recompile"],
     "edits": [("        return slow_step.train_slow(problem[\"params\"], *args, next(lrs))",
                "        return slow_step.train_slow(problem[\"params\"], *args, problem[\"lr\"])")]},
    {"stage": 4, "id": "blind-b5-record-copy-inside-sample",
     "misunderstood": "The learner believed the parameter copy for a donated call belongs to the call and started the clock before making it, so every sample includes the copy.",
     "named_by": ["parameter copy", "inside the sample", "start the clock"],
     "edits": [("            params = slow_step.fresh_copy(problem[\"params\"])\n"
                "            jax.block_until_ready(params)\n"
                "            start = time.perf_counter()\n",
                "            start = time.perf_counter()\n"
                "            params = slow_step.fresh_copy(problem[\"params\"])\n"
                "            jax.block_until_ready(params)\n")]},
]


# Batch b6 (2026-12-07, ninth session): six more, written from the learner's copy
# (README, starter, notebooks, docs/learners.md) and the reference solution only,
# never a checker or this corpus; each confirmed wrong by hand (a differing value).
MISTAKES += [
    {"stage": 1, "id": 'blind-b6-phases-at-any-depth',
     "misunderstood": 'The learner summed every event named like a phase anywhere inside a step, believing nesting does not matter; a phase name nested deeper (inside another phase) is counted again, so phase_us, other_us and shares are wrong.',
     "named_by": ['nested inside another event', 'direct children only', 'phase name nested deeper', 'counted twice'],
     "edits": [('        for child in ev.children:',
                '        for child in _walk(ev.children):')]},
    {"stage": 1, "id": 'blind-b6-evidence-most-calls',
     "misunderstood": 'The learner picked the evidence event with the most calls, believing the most frequent event is the costliest; the contract asks for the name with the largest summed duration.',
     "named_by": ['largest summed duration', 'not the most calls', 'evidence event'],
     "edits": [('        name = max(totals, key=lambda n: totals[n][1])',
                '        name = max(totals, key=lambda n: totals[n][0])')]},
    {"stage": 2, "id": 'blind-b6-naive-logsumexp',
     "misunderstood": 'The learner rewrote log-sum-exp as log(sum(exp(logits))), believing it is the same in float32; on a confident model (logits 100-200) exp overflows to inf and the losses and gradients become inf/NaN.',
     "named_by": ['exp overflows', 'confident model', 'subtract the max / logsumexp'],
     "edits": [('    lse = jax.nn.logsumexp(logits, axis=-1)',
                '    lse = jnp.log(jnp.sum(jnp.exp(logits), axis=-1))')]},
    {"stage": 3, "id": 'blind-b6-crossover-strict-at-threshold',
     "misunderstood": 'The learner treated a gain exactly at the threshold as already fallen, testing g0 > threshold >= g1; the curve must go from at-or-above to below, so a gain equal to the threshold at the first size gives None instead of that size, and one at the last size gives that size instead of None.',
     "named_by": ['a gain equal to the threshold', 'exactly at the threshold', 'at or above to below', 'boundary'],
     "edits": [('        if g0 >= threshold > g1:',
                '        if g0 > threshold >= g1:')]},
    {"stage": 3, "id": 'blind-b6-predict-no-floor',
     "misunderstood": "The learner returned the model's batch size as solved, not seeing that when the fast version's fixed cost keeps the gain below a high threshold at every batch the solution is negative; the prediction must be floored at 1.0.",
     "named_by": ['below 1, the smallest batch', 'floor at 1.0', 'negative batch size', 'threshold no fix reaches'],
     "edits": [('    return {"crossover": float(max(batch, 1.0)), **medians}',
                '    return {"crossover": float(batch), **medians}')]},
    {"stage": 4, "id": 'blind-b6-output-check-against-itself',
     "misunderstood": "The learner set the expected outputs from every version's own first call, believing each record checks its own first output; the after record then compares train_fast with itself and output_ok is always True, even when train_fast is wrong.",
     "named_by": ["compared with train_fast's own output", "compare with train_slow's outputs", 'output_ok always True', 'expected overwritten'],
     "edits": [('        if expected is None:\n            expected = out',
                '        expected = out')]},
]

# Blind batch b7 (2026-12-07): written from a learner's copy and the solutions only,
# told the earlier batches' mistakes so as not to repeat them.
MISTAKES += [
    {"stage": 1, "id": 'blind-b7-amdahl-ceiling-no-inf-case',
     "misunderstood": "The learner wrote Amdahl's ceiling as 1 / (1 - share) with no special case, believing share never reaches 1; when the phases fill the step the share is exactly 1 and the division raises ZeroDivisionError instead of returning math.inf.",
     "named_by": ['math.inf when share is 1', 'Amdahl ceiling', 'division by zero'],
     "edits": [('    ceiling = math.inf if share >= 1.0 else 1.0 / (1.0 - share)',
                '    ceiling = 1.0 / (1.0 - share)')]},
    {"stage": 1, "id": 'blind-b7-evidence-phase-events-anywhere',
     "misunderstood": 'The learner gathered the evidence from every event named like the limiting phase anywhere in the trace, believing the name is enough; only the phase events that are direct children of a step count, so decoys (the phase name nested deeper, on another thread or outside every step) add their children.',
     "named_by": ['direct children of a step', 'phase events inside steps only', 'decoy events outside steps'],
     "edits": [('    for step in (ev for ev in _walk(forest) if ev.name == step_region):\n        for child in step.children:\n            if child.name != phase:\n                continue\n            for grandchild in child.children:\n                entry = totals.setdefault(grandchild.name, [0, 0.0])\n                entry[0] += 1\n                entry[1] += grandchild.dur\n',
                '    for child in (ev for ev in _walk(forest) if ev.name == phase):\n        for grandchild in child.children:\n            entry = totals.setdefault(grandchild.name, [0, 0.0])\n            entry[0] += 1\n            entry[1] += grandchild.dur\n')]},
    {"stage": 2, "id": 'blind-b7-fast-pick-outer-index',
     "misunderstood": "The learner picked each row's target logit with NumPy-style logits[:, targets], believing it selects one entry per row; it selects every target's column for every row, a (batch, batch) matrix, so the loss averages over every row/target pair.",
     "named_by": ['take_along_axis', 'one target logit per row', 'logits[:, targets] is an outer index'],
     "edits": [('    picked = jnp.take_along_axis(logits, targets[:, None], axis=-1)[:, 0]',
                '    picked = logits[:, targets]')]},
    {"stage": 3, "id": 'blind-b7-sweep-drops-first-round',
     "misunderstood": 'The learner believed the first interleaved round is still warming up and dropped it from the samples, although the first calls were already made apart; each size then reports rounds - 1 samples where `rounds` raw samples (one per round) are asked.',
     "named_by": ['one sample per round', 'rounds raw samples', 'first calls already made apart'],
     "edits": [('    return slow_s, fast_s\n',
                '    return slow_s[1:], fast_s[1:]\n')]},
    {"stage": 3, "id": 'blind-b7-predict-guards-zero-only',
     "misunderstood": 'The learner guarded only against dividing by zero in the crossing formula; when the denominator is negative (the modelled gain never falls to the threshold, e.g. 0.1) the formula gives a negative batch that the floor turns into 1.0 instead of None.',
     "named_by": ['sign of the denominator', 'None when the gain never falls to it', 'floor at 1.0 only for a reachable crossing'],
     "edits": [('    if denominator <= 0:\n        return {"crossover": None, **medians}',
                '    if denominator == 0:\n        return {"crossover": None, **medians}')]},
    {"stage": 4, "id": 'blind-b7-record-trace-call-problem-lr',
     "misunderstood": "The learner gave the extra traced call the problem's own learning rate ('one more call of the problem'), but after the first call no two calls of a version may share a rate; train_slow's traced call then reuses the first call's rate and skips the recompile a new rate causes in use.",
     "named_by": ['a new learning rate every call', 'the traced call is a call too', 'recompile on a new lr'],
     "edits": [('                jax.block_until_ready(fn(params, *args, next(lrs)))',
                '                jax.block_until_ready(fn(params, *args, problem["lr"]))')]},
]

# Blind batch b8 (2026-12-07, eleventh session): written from a learner's copy and the
# solutions only, told the 812 earlier mistakes so as not to repeat them; each
# confirmed wrong by a value it changes.
MISTAKES += [
    {"stage": 1, "id": 'blind-b8-trace-host-tracer-off',
     "misunderstood": "Told to leave the Python tracer out because it slows the steps, the learner turned the host tracer off too; the step and phase annotations (TraceAnnotation) are host events, so the trace holds no STEP_REGION event instead of config['steps'].",
     "named_by": ['only python_tracer_level = 0', 'TraceAnnotation is a host event', 'the trace must hold the step regions'],
     "edits": [('    options.python_tracer_level = 0\n    with jax.profiler.trace(logdir, profiler_options=options):',
                '    options.python_tracer_level = 0\n    options.host_tracer_level = 0  # no tracer slows the steps\n    with jax.profiler.trace(logdir, profiler_options=options):')]},
    {"stage": 1, "id": 'blind-b8-breakdown-steps-roots-only',
     "misunderstood": "The learner looked for step events among the top-level events only, believing a step is never inside another event; a step is any complete event named step_region, and in a trace whose steps sit inside an outer annotation (write_run_records' REGION) it finds none.",
     "named_by": ['a step may be nested in another event', 'walk the whole forest', 'not only the roots'],
     "edits": [('found = [ev for ev in _walk(forest) if ev.name == step_region]',
                'found = [ev for ev in forest if ev.name == step_region]')]},
    {"stage": 2, "id": 'blind-b8-fast-logsumexp-no-axis',
     "misunderstood": "The learner called jax.nn.logsumexp(logits) without axis=-1, believing it reduces each row like log_softmax does; it reduces the whole (batch, vocab) array to one number, so every example's normaliser is the batch's and the losses and gradients are wrong.",
     "named_by": ['log-sum-exp per example', 'axis=-1 over the vocabulary', 'not over the whole batch'],
     "edits": [('lse = jax.nn.logsumexp(logits, axis=-1)',
                'lse = jax.nn.logsumexp(logits)')]},
    {"stage": 3, "id": 'blind-b8-crossover-rounded-to-integer',
     "misunderstood": 'The learner rounded the interpolated crossing to a whole number, believing a batch size must be an integer; the contract returns the crossing of the (log batch, log gain) line as a float, compared to rel 1e-9.',
     "named_by": ['the crossing is a float', 'no rounding to a batch size', 'interpolated in log-log'],
     "edits": [('return float(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0))))',
                'return float(round(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0)))))')]},
    {"stage": 3, "id": 'blind-b8-predict-floor-at-small',
     "misunderstood": "The learner clamped the model's crossing at the smallest measured batch, believing nothing below the measurements can be predicted; the contract's floor is 1.0 (one example), so a crossing the model puts between 1 and small is reported as small.",
     "named_by": ['the floor is 1.0', 'not the smallest measured size', 'the model extrapolates below small'],
     "edits": [('return {"crossover": float(max(batch, 1.0)), **medians}',
                'return {"crossover": float(max(batch, small)), **medians}')]},
    {"stage": 4, "id": 'blind-b8-records-iters-from-samples',
     "misunderstood": 'The learner recorded iters as the number of samples it kept, believing iters describes the samples; the contract records warmup and iters as given, so a record whose output check failed (no samples) says iters 0 instead of the iters asked for.',
     "named_by": ['iters as given', 'not len(samples_s)', 'a refused record keeps its iters'],
     "edits": [('"iters": iters, "first_call_s": first_call_s, "samples_s": samples,\n                  "compiles_first_call"',
                '"iters": len(samples), "first_call_s": first_call_s, "samples_s": samples,\n                  "compiles_first_call"')]},
    # blind batch b9 (2026-12-07, twelfth session): written from a learner's copy, the
    # solutions and the 842 earlier mistakes, never the checkers
    {'stage': 1,
     'id': 'blind-b9-breakdown-step-span',
     'misunderstood': 'The learner took step_us as the wall-clock span the steps cover (first '
                      "step's start to last step's end), believing that is 'the steps' time'; "
                      "the contract sums the step events' own durations, so the gaps between "
                      'steps are not step time.',
     'named_by': ['span from first start to last end',
                  'gaps between steps counted',
                  "sum of the step events' durations"],
     'edits': [('    step_us = float(sum(ev.dur for ev in found))',
                '    step_us = float(max(ev.end for ev in found) - min(ev.ts for ev in found)) '
                'if found else 0.0')]},
    {'stage': 1,
     'id': 'blind-b9-limiting-longest-single-event',
     'misunderstood': 'The learner picked the limiting phase as the one with the single '
                      'longest event (the tallest bar in the trace viewer), not the one with '
                      'the largest summed share of step time over all steps.',
     'named_by': ['longest single event, not the summed share',
                  'phase chosen by one long occurrence',
                  'largest share of the step time'],
     'edits': [('    phase = max(phases, key=lambda p: breakdown["shares"][p])',
                '    longest = {p: 0.0 for p in phases}\n'
                '    for ev in _walk(_forest(trace_file)):\n'
                '        if ev.name == step_region:\n'
                '            for child in ev.children:\n'
                '                if child.name in longest:\n'
                '                    longest[child.name] = max(longest[child.name], '
                'child.dur)\n'
                '    phase = max(phases, key=lambda p: longest[p])')]},
    {'stage': 2,
     'id': 'blind-b9-fast-tokens-read-as-batch-major',
     'misunderstood': 'The learner read tokens and targets as (batch, steps) and transposed '
                      "them so that scan runs over 'the steps'; the contract's arrays are "
                      'already (steps, batch), so the transposed scan takes `batch` steps on '
                      'columns and returns losses of shape (batch,).',
     'named_by': ['transposed tokens and targets',
                  'scan over the wrong axis',
                  'losses shape (steps,) with steps the leading axis'],
     'edits': [('    return _train(params, tokens, targets, jnp.float32(lr))',
                '    return _train(params, tokens.T, targets.T, jnp.float32(lr))')]},
    {'stage': 3,
     'id': 'blind-b9-crossover-semilog',
     'misunderstood': 'The learner interpolated the gain linearly against log batch (a '
                      'semi-log line), taking logs only of the batch axis because that is the '
                      "one plotted on a log scale; the contract's line is in (log batch, log "
                      'gain).',
     'named_by': ['log of the batch but not of the gain',
                  'semi-log interpolation',
                  'straight line in (log batch, log gain)'],
     'edits': [('            f = (math.log(g0) - math.log(threshold)) / (math.log(g0) - '
                'math.log(g1))',
                '            f = (g0 - threshold) / (g0 - g1)')]},
    {'stage': 3,
     'id': 'blind-b9-predict-never-as-infinity',
     'misunderstood': 'The learner believed a gain that never falls to the threshold crosses '
                      "it 'at an infinite batch' and returned math.inf; the contract returns "
                      'None for that case.',
     'named_by': ['infinity instead of None',
                  'never falls to the threshold',
                  'crossover None when the denominator is not positive'],
     'edits': [('        return {"crossover": None, **medians}',
                '        return {"crossover": math.inf, **medians}')]},
    {'stage': 4,
     'id': 'blind-b9-records-first-call-compile-only',
     'misunderstood': 'The learner believed first_call_s should isolate the compile, so it '
                      "subtracted the median warmed sample from the first call's time; the "
                      "contract's first_call_s is the first call alone, compile and run "
                      'included, as measured.',
     'named_by': ['first call minus a warmed sample',
                  'compile time alone instead of the whole first call',
                  'first_call_s covers trace, compile and run'],
     'edits': [('"first_call_s": first_call_s, "samples_s": samples,\n'
                '                  "compiles_first_call": first[0], "compiles_warmed": '
                'warmed[0],\n'
                '                  "shapes": [list(a.shape) for a in args],',
                '"first_call_s": first_call_s - (sorted(samples)[len(samples) // 2] if samples '
                'else 0.0),\n'
                '                  "samples_s": samples,\n'
                '                  "compiles_first_call": first[0], "compiles_warmed": '
                'warmed[0],\n'
                '                  "shapes": [list(a.shape) for a in args],')]},
]

"""performance-audit: what a learner who half-understands each stage writes (the corpus
format and the runner: ``coursekit/commands/mistakes.py``; ``make mistakes``)."""

TIMED = ("                start = time.perf_counter()\n"
         "                wait(fn(*args))\n"
         "                samples.append(time.perf_counter() - start)\n")
FIRST = ("        out = wait(fn(*args))\n"
         "        first_call_s = time.perf_counter() - start\n")
KEYS = '    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):\n'
TRACE_LOOP = ("        for i in range(steps):\n"
              "            with jax.profiler.TraceAnnotation(region, step=i):\n"
              "                jax.block_until_ready(step_fn(*args))\n")
NESTED = ("            if e[\"ts\"] + e[\"dur\"] <= covered_until:\n"
          "                continue  # nested inside a direct child already counted\n"
          "            if e[\"ts\"] < covered_until:\n"
          "                continue  # overlaps a direct child without nesting: not a child\n")
MATMUL = '    return {"flops": 2 * m * k * n, "bytes": (m * k + k * n + m * n) * itemsize}\n'
PEAK_TIMED = ("        start = time.perf_counter()\n"
              "        jax.block_until_ready(f(a))\n"
              "        samples.append(time.perf_counter() - start)\n"
              "    flops = 2 * n**3\n")
RESIDUALS = ("    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in "
             "jax.tree.leaves(pullback)\n"
             "                   if id(leaf) not in arguments))\n")
PAIRED = "        d = np.array([math.log(mb[r]) - math.log(ma[r]) for r in shared])\n"
HALF = ("        half = t_quantile(confidence, df) * (float(np.std(d, ddof=1)) / "
        "math.sqrt(d.size))\n")

MISTAKES = [
    # ---- stage 1: time_fn, comparable, the two experiments ------------------------------
    {"stage": 1, "id": "time-no-sync",
     "misunderstood": "timed the call, not the work: returns at dispatch, never waits",
     "edits": [(TIMED, "                start = time.perf_counter()\n"
                       "                fn(*args)\n"
                       "                samples.append(time.perf_counter() - start)\n")]},
    {"stage": 1, "id": "time-sync-after-loop",
     "misunderstood": "one wait after all timed calls, thinking it covers every sample",
     "edits": [(TIMED, "                start = time.perf_counter()\n"
                       "                last = fn(*args)\n"
                       "                samples.append(time.perf_counter() - start)\n"
                       "            if iters:\n"
                       "                wait(last)\n")]},
    {"stage": 1, "id": "time-first-call-unsynced",
     "misunderstood": "the first call's clock stopped before waiting for its result",
     "edits": [(FIRST, "        out = fn(*args)\n"
                       "        first_call_s = time.perf_counter() - start\n"
                       "        out = wait(out)\n")]},
    {"stage": 1, "id": "time-first-call-is-a-sample",
     "misunderstood": "the first call kept as a sample too ('it is a real call')",
     "edits": [("    samples = []\n    with count_compiles() as warmed:",
                "    samples = [first_call_s]\n    with count_compiles() as warmed:"),
               ("            for _ in range(iters):\n", "            for _ in range(iters - 1):\n")]},
    {"stage": 1, "id": "time-warmup-off-by-one",
     "misunderstood": "the first call counted as one of the warm-up calls",
     "edits": [("            for _ in range(warmup):\n", "            for _ in range(warmup - 1):\n")]},
    {"stage": 1, "id": "time-wrong-output-still-timed",
     "misunderstood": "times the warmed calls even when the output check failed",
     "edits": [("        if output_ok is not False:\n", "        if True:  # judge, then time anyway\n")]},
    {"stage": 1, "id": "time-host-read-ignored",
     "misunderstood": "always block_until_ready, reporting the sync asked for, not the one used",
     "edits": [("        if sync == \"block_until_ready\":\n            return jax.block_until_ready(out)\n"
                "        return jax.tree.map(np.asarray, out)\n",
                "        return jax.block_until_ready(out)\n")]},
    {"stage": 1, "id": "time-milliseconds",
     "misunderstood": "samples in milliseconds, the unit a profiler shows, where seconds are asked",
     "edits": [(TIMED, "                start = time.perf_counter()\n"
                       "                wait(fn(*args))\n"
                       "                samples.append((time.perf_counter() - start) * 1e3)\n")]},
    {"stage": 1, "id": "time-median-only",
     "misunderstood": "samples_s reported as their median, a summary, not the raw samples",
     "edits": [('        "first_call_s": first_call_s, "samples_s": samples,\n',
                '        "first_call_s": first_call_s, '
                '"samples_s": [float(np.median(samples))] * len(samples),\n')]},
    {"stage": 1, "id": "time-warmup-compiles-uncounted",
     "misunderstood": "compiles_warmed counted around the timed calls only, not the warm-up",
     "edits": [("    with count_compiles() as warmed:\n"
                "        if output_ok is not False:\n"
                "            for _ in range(warmup):\n"
                "                wait(fn(*args))\n",
                "    if output_ok is not False:\n"
                "        for _ in range(warmup):\n"
                "            wait(fn(*args))\n"
                "    with count_compiles() as warmed:\n"
                "        if output_ok is not False:\n")]},
    {"stage": 1, "id": "time-warmup-not-waited",
     "misunderstood": "warm-up calls only dispatched ('they are not timed, so why wait')",
     "edits": [("            for _ in range(warmup):\n                wait(fn(*args))\n",
                "            for _ in range(warmup):\n                fn(*args)\n")]},
    {"stage": 1, "id": "comparable-refuses-other-iters",
     "misunderstood": "iters taken as part of the configuration, so different sample counts refused",
     "edits": [(KEYS, '    for key in ("shapes", "dtypes", "sync", "warmup", "iters", "backend"):\n')]},
    {"stage": 1, "id": "comparable-ignores-warmup",
     "misunderstood": "warm-up count taken as a detail that cannot change a warmed median",
     "edits": [(KEYS, '    for key in ("shapes", "dtypes", "sync", "backend"):\n')]},
    {"stage": 1, "id": "comparable-ignores-output",
     "misunderstood": "a failed output check taken as the other function's business",
     "edits": [('            reasons.append(f"output_ok is False for the {name} measurement")\n',
                "            pass\n")]},
    {"stage": 1, "id": "comparable-needs-output-check",
     "misunderstood": "refuses a result with no output check (output_ok None) as if it failed",
     "edits": [('        if m.get("output_ok") is False:\n', '        if not m.get("output_ok"):\n')]},
    {"stage": 1, "id": "shape-change-default-iters",
     "misunderstood": "the changed run left at time_fn's defaults, not the same warmup and iters",
     "edits": [('            "changed": time_fn(fn, x_changed, warmup=warmup, iters=iters, '
                'label="changed")}\n',
                '            "changed": time_fn(fn, x_changed, label="changed")}\n')]},
    {"stage": 1, "id": "host-read-same-sync",
     "misunderstood": "the host_read experiment labelled host_read but synced the same way",
     "edits": [('            "host_read": time_fn(fn, x, warmup=warmup, iters=iters, '
                'sync="host_read",\n',
                '            "host_read": time_fn(fn, x, warmup=warmup, iters=iters,\n')]},
    # ---- stage 2: trace, cost, peak rates, roofline -------------------------------------
    {"stage": 2, "id": "trace-no-warm-call",
     "misunderstood": "the trace opened on a cold function: the compile lands in step 0",
     "edits": [("    jax.block_until_ready(step_fn(*args))\n    with jax.profiler.trace(logdir):\n",
                "    with jax.profiler.trace(logdir):\n")]},
    {"stage": 2, "id": "trace-step-not-waited",
     "misunderstood": "the annotation closed at dispatch: each occurrence holds no finished step",
     "edits": [(TRACE_LOOP, "        for i in range(steps):\n"
                            "            with jax.profiler.TraceAnnotation(region, step=i):\n"
                            "                out = step_fn(*args)\n"
                            "        jax.block_until_ready(out)\n")]},
    {"stage": 2, "id": "trace-one-annotation",
     "misunderstood": "one annotation around all the steps rather than one per step",
     "edits": [(TRACE_LOOP, "        with jax.profiler.TraceAnnotation(region):\n"
                            "            for i in range(steps):\n"
                            "                jax.block_until_ready(step_fn(*args))\n")]},
    {"stage": 2, "id": "newest-oldest",
     "misunderstood": "sorted ascending, then took the first file as the newest",
     "edits": [("    return files[-1]\n", "    return files[0]\n")]},
    {"stage": 2, "id": "newest-by-name",
     "misunderstood": "the newest run taken as the last folder name, not the latest written",
     "edits": [("                   key=lambda p: (p.stat().st_mtime, str(p)))\n",
                "                   key=lambda p: str(p))\n")]},
    {"stage": 2, "id": "newest-none-when-empty",
     "misunderstood": "no trace returns None instead of raising FileNotFoundError",
     "edits": [('        raise FileNotFoundError(f"no *.trace.json.gz under '
                '{logdir}/plugins/profile/")\n', "        return None\n")]},
    {"stage": 2, "id": "summarize-every-descendant",
     "misunderstood": "every event inside the region counted as a child, nested ones too",
     "edits": [(NESTED, "")]},
    {"stage": 2, "id": "summarize-prefix-match",
     "misunderstood": "events found by name prefix, so 'step_extra' counts as 'step'",
     "edits": [("    regions = [e for e in complete if e.get(\"name\") == region]\n",
                "    regions = [e for e in complete if str(e.get(\"name\", \"\")).startswith(region)]\n")]},
    {"stage": 2, "id": "summarize-any-thread",
     "misunderstood": "children taken from every thread and process, not the region's own",
     "edits": [("                         if e is not r and e.get(\"pid\") == r.get(\"pid\")\n"
                "                         and e.get(\"tid\") == r.get(\"tid\")\n"
                "                         and e[\"ts\"]",
                "                         if e is not r\n"
                "                         and e[\"ts\"]")]},
    {"stage": 2, "id": "summarize-milliseconds",
     "misunderstood": "durations converted to milliseconds where microseconds are asked",
     "edits": [('    total = float(sum(r["dur"] for r in regions))\n',
                '    total = float(sum(r["dur"] for r in regions)) / 1000\n')]},
    {"stage": 2, "id": "matmul-fma-one-flop",
     "misunderstood": "a multiply-add counted as one FLOP",
     "edits": [(MATMUL, '    return {"flops": m * k * n, "bytes": (m * k + k * n + m * n) * itemsize}\n')]},
    {"stage": 2, "id": "matmul-elements-not-bytes",
     "misunderstood": "bytes counted as elements, the itemsize left out",
     "edits": [(MATMUL, '    return {"flops": 2 * m * k * n, "bytes": m * k + k * n + m * n}\n')]},
    {"stage": 2, "id": "cost-traced-program",
     "misunderstood": "the cost of the lowered (unoptimised) program, before compile fuses it",
     "edits": [("    cost = jax.jit(fn).lower(*args).compile().cost_analysis()\n",
                "    cost = jax.jit(fn).lower(*args).cost_analysis()\n")]},
    {"stage": 2, "id": "peak-flops-unsynced",
     "misunderstood": "the matmul rate from dispatch times: the product never waited for",
     "edits": [(PEAK_TIMED, "        start = time.perf_counter()\n"
                            "        f(a)\n"
                            "        samples.append(time.perf_counter() - start)\n"
                            "    flops = 2 * n**3\n")]},
    {"stage": 2, "id": "peak-flops-mean",
     "misunderstood": "best_s as the mean of the samples, where the fastest is asked",
     "edits": [("    best = min(samples)\n", "    best = sum(samples) / len(samples)\n")]},
    {"stage": 2, "id": "peak-flops-cube",
     "misunderstood": "an n x n product counted as n^3 FLOPs (multiply-adds, not FLOPs)",
     "edits": [(PEAK_TIMED, PEAK_TIMED.replace("2 * n**3", "n**3"))]},
    {"stage": 2, "id": "bandwidth-median-sample",
     "misunderstood": "the bandwidth from the median sample, the 'typical' one, not the fastest",
     "edits": [('"minor_faults": faults, "bandwidth": moved / min(samples)}',
                '"minor_faults": faults, "bandwidth": moved / float(np.median(samples))}')]},
    {"stage": 2, "id": "peak-flops-compile-in-first-sample",
     "misunderstood": "no call before the timed loop: the first sample holds the compile",
     "edits": [("    f = jax.jit(lambda a: a @ a)\n    jax.block_until_ready(f(a))\n",
                "    f = jax.jit(lambda a: a @ a)\n")]},
    {"stage": 2, "id": "peak-flops-input-in-sample",
     "misunderstood": "the input made inside each timed call, as part of 'the work'",
     "edits": [("    a = jnp.ones((n, n), jnp.float32).astype(dtype)\n"
                "    f = jax.jit(lambda a: a @ a)\n"
                "    jax.block_until_ready(f(a))\n",
                "    f = jax.jit(lambda a: a @ a)\n"),
               (PEAK_TIMED, "        start = time.perf_counter()\n"
                            "        a = jnp.ones((n, n), jnp.float32).astype(dtype)\n"
                            "        jax.block_until_ready(f(a))\n"
                            "        samples.append(time.perf_counter() - start)\n"
                            "    flops = 2 * n**3\n")]},
    {"stage": 2, "id": "peak-flops-input-remade-in-sample",
     "misunderstood": "the input made again inside each timed call, its shape already warmed",
     "edits": [(PEAK_TIMED, "        start = time.perf_counter()\n"
                            "        a = jnp.ones((n, n), jnp.float32)\n"
                            "        jax.block_until_ready(f(a))\n"
                            "        samples.append(time.perf_counter() - start)\n"
                            "    flops = 2 * n**3\n")]},
    {"stage": 2, "id": "bandwidth-read-only",
     "misunderstood": "moved bytes as the array's size: the write of x * 2 + 1 forgotten",
     "edits": [('    moved = (1 if kind == "read_sum" else 2) * (nbytes // 4) * 4\n',
                "    moved = (nbytes // 4) * 4\n")]},
    {"stage": 2, "id": "bandwidth-not-donated",
     "misunderstood": "'in place' taken as a name: the input never donated, a fresh output each call",
     "edits": [("                    donate_argnums=0 if kind == \"in_place\" else ())\n",
                "                    donate_argnums=())\n")]},
    {"stage": 2, "id": "cache-instruction-kept",
     "misunderstood": "every cache index counted, instruction caches among the data caches",
     "edits": [('        if kind == "Instruction":\n            continue\n', "")]},
    {"stage": 2, "id": "cache-si-units",
     "misunderstood": "K, M, G in sysfs read as powers of 1000",
     "edits": [('        units = {"K": 2**10, "M": 2**20, "G": 2**30}\n',
                '        units = {"K": 10**3, "M": 10**6, "G": 10**9}\n')]},
    {"stage": 2, "id": "roofline-levels-by-name",
     "misunderstood": "levels tried in name order, assuming L1 < L2 < L3 always sorts by size",
     "edits": [("    for name, size in sorted(caches.items(), key=lambda kv: kv[1]):\n",
                "    for name, size in sorted(caches.items()):\n")]},
    {"stage": 2, "id": "roofline-exact-size-spills",
     "misunderstood": "a working set exactly a level's size taken as not fitting it",
     "edits": [("        if working_set_bytes <= size:\n", "        if working_set_bytes < size:\n")]},
    {"stage": 2, "id": "roofline-ridge-inverted",
     "misunderstood": "the ridge point as bandwidth over peak FLOP/s",
     "edits": [("    ridge = peak_flops / bandwidth\n", "    ridge = bandwidth / peak_flops\n")]},
    {"stage": 2, "id": "roofline-bounds-swapped",
     "misunderstood": "overlapped work taken as the slow case and serial work as the fast one",
     "edits": [('            "lower_s": max(compute_s, memory_s), "upper_s": compute_s + memory_s}\n',
                '            "lower_s": compute_s + memory_s, "upper_s": max(compute_s, memory_s)}\n')]},
    # ---- stage 3: rematerialisation -----------------------------------------------------
    {"stage": 3, "id": "remat-whole-loss",
     "misunderstood": "one checkpoint around all the blocks, not one per block",
     "edits": [("        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, "
                "policy))\n    for p in params:\n        x = step(p, x)\n",
                "        def chain(params, x):\n"
                "            for p in params:\n"
                "                x = block(p, x)\n"
                "            return x\n"
                "        return jnp.mean(jax.checkpoint(chain, policy=getattr("
                "jax.checkpoint_policies, policy))(params, x) ** 2)\n"
                "    for p in params:\n        x = step(p, x)\n")]},
    {"stage": 3, "id": "remat-policy-dropped",
     "misunderstood": "jax.checkpoint taken to be the policy: the one named is never passed",
     "edits": [("        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, "
                "policy))\n", "        step = jax.checkpoint(block)\n")]},
    {"stage": 3, "id": "block-loss-sum",
     "misunderstood": "the sum of squares where the mean is asked",
     "edits": [("    for p in params:\n        x = step(p, x)\n    return jnp.mean(x**2)\n",
                "    for p in params:\n        x = step(p, x)\n    return jnp.sum(x**2)\n")]},
    {"stage": 3, "id": "tanh-policy-ignored",
     "misunderstood": "the tanh chain left without remat: 'the policy is for the blocks model'",
     "edits": [("        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, "
                "policy))\n", "        pass\n")]},
    {"stage": 3, "id": "grads-wrt-input",
     "misunderstood": "value_and_grad of the input batch (argnums=1) instead of the params",
     "edits": [("    return jax.value_and_grad(block_loss)(params, x, policy)\n",
                "    return jax.value_and_grad(block_loss, argnums=1)(params, x, policy)\n")]},
    {"stage": 3, "id": "grads-policy-not-passed",
     "misunderstood": "the policy argument never reaches block_loss",
     "edits": [("    return jax.value_and_grad(block_loss)(params, x, policy)\n",
                "    return jax.value_and_grad(block_loss)(params, x)\n")]},
    {"stage": 3, "id": "residuals-with-arguments",
     "misunderstood": "the params and input counted as residuals ('the backward pass keeps them')",
     "edits": [(RESIDUALS, "    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in "
                           "jax.tree.leaves(pullback)))\n")]},
    {"stage": 3, "id": "residuals-elements",
     "misunderstood": "residual sizes in elements, not bytes",
     "edits": [(RESIDUALS, "    return int(sum(leaf.size for leaf in jax.tree.leaves(pullback)\n"
                           "                   if id(leaf) not in arguments))\n")]},
    {"stage": 3, "id": "residuals-four-bytes",
     "misunderstood": "every residual taken to be float32 (4 bytes), whatever its dtype",
     "edits": [(RESIDUALS, "    return int(sum(leaf.size * 4 for leaf in jax.tree.leaves(pullback)\n"
                           "                   if id(leaf) not in arguments))\n")]},
    {"stage": 3, "id": "temp-includes-output",
     "misunderstood": "the program's outputs counted as temporaries ('it allocates them')",
     "edits": [("    return int(fn.lower(params, x).compile().memory_analysis().temp_size_in_bytes)\n",
                "    plan = fn.lower(params, x).compile().memory_analysis()\n"
                "    return int(plan.temp_size_in_bytes + plan.output_size_in_bytes)\n")]},
    {"stage": 3, "id": "temp-forward-only",
     "misunderstood": "the forward loss compiled, not its value_and_grad",
     "edits": [("    fn = jax.jit(lambda p, v: jax.value_and_grad(loss)(p, v, policy))\n",
                "    fn = jax.jit(lambda p, v: loss(p, v, policy))\n")]},
    {"stage": 3, "id": "peak-no-reset",
     "misunderstood": "VmHWM read without resetting it after compile: the compile's peak counts",
     "edits": [('    with open("/proc/self/clear_refs", "w") as fh:\n        fh.write("5")\n',
                '    pass\n')]},
    {"stage": 3, "id": "peak-whole-process",
     "misunderstood": "the high-water mark itself reported as the run's peak",
     "edits": [('    "run_peak_bytes": hwm - rss if', '    "run_peak_bytes": hwm if')]},
    {"stage": 3, "id": "peak-one-process",
     "misunderstood": "one fresh process measured and its figure repeated for each repeat",
     "edits": [("        runs += list(pool.map(one, range(1, repeats)))\n",
                "        runs += [runs[0]] * (repeats - 1)\n")]},
    {"stage": 3, "id": "peak-no-remat-in-child",
     "misunderstood": "the fresh process runs the model without the policy asked for",
     "edits": [("    return (lambda p, v: loss_and_grads(p, v, policy)), (params, x)\n",
                "    return (lambda p, v: loss_and_grads(p, v)), (params, x)\n")]},
    # ---- stage 4: predict and decide ----------------------------------------------------
    {"stage": 4, "id": "amdahl-weighted-speedup",
     "misunderstood": "the step's speedup as the share-weighted average of the speedups",
     "edits": [("    return 1.0 / ((1.0 - share) + share / kernel_speedup)\n",
                "    return (1.0 - share) + share * kernel_speedup\n")]},
    {"stage": 4, "id": "amdahl-time-fraction",
     "misunderstood": "the new time as a fraction of the old reported as the speedup",
     "edits": [("    return 1.0 / ((1.0 - share) + share / kernel_speedup)\n",
                "    return (1.0 - share) + share / kernel_speedup\n")]},
    {"stage": 4, "id": "decide-samples-as-rounds",
     "misunderstood": "every sample its own piece of evidence, round_ids ignored",
     "edits": [('        ids = run.get("round_ids", range(len(samples)))\n',
                "        ids = range(len(samples))\n")]},
    {"stage": 4, "id": "decide-round-mean",
     "misunderstood": "each round summarised by its mean, so one stall moves it",
     "edits": [("        return {r: float(np.median(v)) for r, v in sorted(by_round.items())}\n",
                "        return {r: float(np.mean(v)) for r, v in sorted(by_round.items())}\n")]},
    {"stage": 4, "id": "decide-any-gain",
     "misunderstood": "accepts once the interval clears 1, min_gain ignored",
     "edits": [("    if lo > up:\n", "    if lo > 1.0:\n")]},
    {"stage": 4, "id": "decide-output-none-ok",
     "misunderstood": "only a False output check refused; None (never checked) let through",
     "edits": [('        if run.get("output_ok") is not True:\n',
                '        if run.get("output_ok") is False:\n')]},
    {"stage": 4, "id": "decide-first-call-unchecked",
     "misunderstood": "a record without its first call apart taken as comparable",
     "edits": [('        if run.get("first_call_s") is None:\n'
                '            reasons.append(f"{name} has no first call reported apart from '
                'warmed samples")\n', "")]},
    {"stage": 4, "id": "decide-ratio-inverted",
     "misunderstood": "the speedup as time after over time before",
     "edits": [(PAIRED, "        d = np.array([math.log(ma[r]) - math.log(mb[r]) for r in shared])\n")]},
    {"stage": 4, "id": "decide-normal-quantile",
     "misunderstood": "the normal 1.96 used for a handful of rounds instead of Student's t",
     "edits": [(HALF, "        half = 1.96 * (float(np.std(d, ddof=1)) / math.sqrt(d.size))\n")]},
    {"stage": 4, "id": "decide-df-from-samples",
     "misunderstood": "the t quantile's degrees of freedom from the raw sample count, not the rounds",
     "edits": [("        df = d.size - 1\n", '        df = len(before["samples_s"]) - 1\n')]},
    {"stage": 4, "id": "decide-std-not-sem",
     "misunderstood": "the interval's half-width from the spread of rounds, not of their mean",
     "edits": [(HALF, "        half = t_quantile(confidence, df) * float(np.std(d, ddof=1))\n")]},
    {"stage": 4, "id": "decide-slower-by-estimate",
     "misunderstood": "'slower' decided by the point estimate, not by the whole interval",
     "edits": [("    elif hi < down:\n", "    elif math.exp(est) < down:\n")]},
    {"stage": 4, "id": "decide-pairs-by-position",
     "misunderstood": "samples without round_ids paired by position as if measured in rounds",
     "edits": [('    if "round_ids" in before and "round_ids" in after and len(shared) >= 2:\n',
                "    if len(shared) >= 2:\n")]},
]

JUSTIFIED: dict[str, str] = {
    "peak-no-reset": "glibc keeps the compile's freed memory resident, so VmRSS after "
                     "compiling already equals the compile's high-water mark and VmHWM - "
                     "RSS measures what the run adds with or without the reset (measured: "
                     "batch 3001, 301 and 31, both policies, the two readings within 1.5 "
                     "MiB); no process of this stage shows an RSS that falls after compiling",
    "peak-flops-input-remade-in-sample": "an input of a shape already made once costs one "
                                         "more dispatch and fill per sample: measured 1.5-3.7x "
                                         "the matmul at n 231-277 (load 12 per core), never "
                                         "the wide margin a time window on a loaded 2-core "
                                         "machine needs (4x); a smaller n makes both calls "
                                         "dispatch, a larger one makes the fill vanish",
    "newest-by-name": "jax.profiler names each run's folder by its start time, so the name "
                      "order is the time order: a check preferring mtimes would fail correct "
                      "work",
    "blind-newest-trace-by-name": "the blind corpus's newest-by-name: jax.profiler names each "
                                  "run's folder by its start time, so the two orders agree",
}

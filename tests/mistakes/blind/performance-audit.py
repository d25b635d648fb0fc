"""performance-audit: blind mistakes, written from the README, starter and solution only."""

MISTAKES = [
    # ------------------------------------------------------------------ stage 1
    {"stage": 1, "id": "blind-samples-not-synced",
     "misunderstood": "thought the warm-up made calls synchronous, so each sample times the "
                      "dispatch only and never waits for the result",
     "edits": [("                start = time.perf_counter()\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.perf_counter() - start)",
                "                start = time.perf_counter()\n"
                "                fn(*args)\n"
                "                samples.append(time.perf_counter() - start)")]},
    {"stage": 1, "id": "blind-timer-stopped-before-wait",
     "misunderstood": "waits for every sample, but reads the clock before the wait instead "
                      "of after it",
     "edits": [("                start = time.perf_counter()\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.perf_counter() - start)",
                "                start = time.perf_counter()\n"
                "                pending = fn(*args)\n"
                "                samples.append(time.perf_counter() - start)\n"
                "                wait(pending)")]},
    {"stage": 1, "id": "blind-first-call-not-waited",
     "misunderstood": "timed the first call as trace+compile+dispatch and waited only after "
                      "stopping its clock, so first_call_s misses the run itself",
     "edits": [("        out = wait(fn(*args))\n"
                "        first_call_s = time.perf_counter() - start",
                "        out = fn(*args)\n"
                "        first_call_s = time.perf_counter() - start\n"
                "        out = wait(out)")]},
    {"stage": 1, "id": "blind-warmup-inside-first-call",
     "misunderstood": "put the warm-up calls inside the first-call timer (\"the cold part\"), "
                      "so first_call_s holds the compile plus warmup+1 runs",
     "edits": [("        out = wait(fn(*args))\n"
                "        first_call_s = time.perf_counter() - start",
                "        out = wait(fn(*args))\n"
                "        for _ in range(warmup):\n"
                "            wait(fn(*args))\n"
                "        first_call_s = time.perf_counter() - start"),
               ("            for _ in range(warmup):\n"
                "                wait(fn(*args))\n"
                "            for _ in range(iters):",
                "            for _ in range(iters):")]},
    {"stage": 1, "id": "blind-first-call-is-a-sample",
     "misunderstood": "kept the first call as the first of the iters samples (\"it is a real "
                      "call too\"), so a compile lands in samples_s",
     "edits": [("    samples = []\n    with count_compiles() as warmed:",
                "    samples = [first_call_s]\n    with count_compiles() as warmed:"),
               ("            for _ in range(iters):\n"
                "                start = time.perf_counter()",
                "            for _ in range(iters - 1):\n"
                "                start = time.perf_counter()")]},
    {"stage": 1, "id": "blind-warmup-not-waited",
     "misunderstood": "warm-up calls only need to trigger the compile, so they are "
                      "dispatched without waiting; their work spills into the first sample",
     "edits": [("            for _ in range(warmup):\n"
                "                wait(fn(*args))",
                "            for _ in range(warmup):\n"
                "                fn(*args)")]},
    {"stage": 1, "id": "blind-wrong-output-still-timed",
     "misunderstood": "records output_ok=False but still warms up and times the wrong "
                      "program",
     "edits": [("        if output_ok is not False:\n"
                "            for _ in range(warmup):\n"
                "                wait(fn(*args))\n"
                "            for _ in range(iters):\n"
                "                start = time.perf_counter()\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.perf_counter() - start)",
                "        for _ in range(warmup):\n"
                "            wait(fn(*args))\n"
                "        for _ in range(iters):\n"
                "            start = time.perf_counter()\n"
                "            wait(fn(*args))\n"
                "            samples.append(time.perf_counter() - start)")]},
    {"stage": 1, "id": "blind-output-exact-equality",
     "misunderstood": "compares the output with the expected one bit for bit, ignoring "
                      "rtol/atol, so a correct float result computed another way fails",
     "edits": [("        output_ok = bool(np.allclose(np.asarray(out), np.asarray(expected),\n"
                "                                     rtol=rtol, atol=atol))",
                "        output_ok = bool(np.array_equal(np.asarray(out), np.asarray(expected)))")]},
    {"stage": 1, "id": "blind-unknown-sync-accepted",
     "misunderstood": "treats any sync name other than host_read as block_until_ready "
                      "instead of raising ValueError",
     "edits": [("    if sync not in SYNC_METHODS:\n"
                "        raise ValueError(f\"sync must be one of {SYNC_METHODS}, got {sync!r}\")\n",
                "")]},
    {"stage": 1, "id": "blind-host-read-is-a-label",
     "misunderstood": "thought host_read only names the method in the record; the "
                      "host_read path returns the output without reading it to the host",
     "edits": [("        return jax.tree.map(np.asarray, out)",
                "        return out")]},
    {"stage": 1, "id": "blind-one-compile-counter",
     "misunderstood": "counts compiles with one counter around the whole function and "
                      "reports that total as compiles_warmed",
     "edits": [("        \"compiles_first_call\": first[0], \"compiles_warmed\": warmed[0],",
                "        \"compiles_first_call\": first[0], \"compiles_warmed\": first[0] + warmed[0],")]},
    {"stage": 1, "id": "blind-samples-in-ms",
     "misunderstood": "records samples in milliseconds because that is the readable unit "
                      "for a matmul",
     "edits": [("                samples.append(time.perf_counter() - start)",
                "                samples.append((time.perf_counter() - start) * 1e3)")]},
    {"stage": 1, "id": "blind-comparable-ignores-warmup",
     "misunderstood": "warm-up count is a detail of the harness, not of the work, so "
                      "comparable does not compare it",
     "edits": [("    for key in (\"shapes\", \"dtypes\", \"sync\", \"warmup\", \"backend\"):",
                "    for key in (\"shapes\", \"dtypes\", \"sync\", \"backend\"):")]},
    {"stage": 1, "id": "blind-comparable-ignores-backend",
     "misunderstood": "only shapes, dtypes, sync and warm-up matter; the backend is "
                      "assumed the same on one machine",
     "edits": [("    for key in (\"shapes\", \"dtypes\", \"sync\", \"warmup\", \"backend\"):",
                "    for key in (\"shapes\", \"dtypes\", \"sync\", \"warmup\"):")]},
    {"stage": 1, "id": "blind-comparable-compares-labels",
     "misunderstood": "compares every descriptive field, label and iters included, so two "
                      "measurements named differently are refused",
     "edits": [("    for key in (\"shapes\", \"dtypes\", \"sync\", \"warmup\", \"backend\"):",
                "    for key in (\"label\", \"shapes\", \"dtypes\", \"sync\", \"warmup\", "
                "\"iters\", \"backend\"):")]},
    {"stage": 1, "id": "blind-comparable-unchecked-output-refused",
     "misunderstood": "refuses any measurement whose output_ok is not truthy, so a "
                      "measurement made without expected (None) is refused too",
     "edits": [("        if m.get(\"output_ok\") is False:",
                "        if not m.get(\"output_ok\"):")]},
    {"stage": 1, "id": "blind-comparable-one-side-output",
     "misunderstood": "checks the output of the first measurement only (the baseline)",
     "edits": [("    for name, m in ((\"first\", a), (\"second\", b)):",
                "    for name, m in ((\"first\", a),):")]},
    {"stage": 1, "id": "blind-shape-change-prewarmed",
     "misunderstood": "warms fn on the changed shape first \"to keep compile out of the "
                      "comparison\", so the changed first call shows no new compile",
     "edits": [("    return {\"base\": time_fn(fn, x, warmup=warmup, iters=iters, label=\"base\"),\n"
                "            \"changed\": time_fn(fn, x_changed, warmup=warmup, iters=iters, label=\"changed\")}",
                "    jax.block_until_ready(fn(x_changed))\n"
                "    return {\"base\": time_fn(fn, x, warmup=warmup, iters=iters, label=\"base\"),\n"
                "            \"changed\": time_fn(fn, x_changed, warmup=warmup, iters=iters, label=\"changed\")}")]},
    {"stage": 1, "id": "blind-shape-change-default-warmup",
     "misunderstood": "passes warmup to the base measurement only; the changed one runs "
                      "with time_fn's default warm-up",
     "edits": [("time_fn(fn, x_changed, warmup=warmup, iters=iters, label=\"changed\")",
                "time_fn(fn, x_changed, iters=iters, label=\"changed\")")]},
    {"stage": 1, "id": "blind-host-read-no-warmup",
     "misunderstood": "the block measurement already warmed fn, so the host_read one "
                      "is measured with warmup=0",
     "edits": [("            \"host_read\": time_fn(fn, x, warmup=warmup, iters=iters, sync=\"host_read\",",
                "            \"host_read\": time_fn(fn, x, warmup=0, iters=iters, sync=\"host_read\",")]},
    {"stage": 1, "id": "blind-host-read-same-sync",
     "misunderstood": "labels the second measurement host_read but times it with the "
                      "default sync, so the two differ in nothing",
     "edits": [("iters=iters, sync=\"host_read\",\n",
                "iters=iters,\n")]},
    # issue 53: honest bugs named as what they are, not as tampering
    {"stage": 1, "id": "blind-samples-are-timestamps",
     "misunderstood": "reads the clock once before the timed loop, so each sample is the "
                      "time since then (a timestamp), not its own call's duration",
     "edits": [("            for _ in range(iters):\n"
                "                start = time.perf_counter()\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.perf_counter() - start)",
                "            start = time.perf_counter()\n"
                "            for _ in range(iters):\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.perf_counter() - start)")]},
    {"stage": 1, "id": "blind-samples-on-process-time",
     "misunderstood": "times each sample with time.process_time(), a CPU-time clock, "
                      "thinking it measures the call more precisely than a wall clock",
     "edits": [("                start = time.perf_counter()\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.perf_counter() - start)",
                "                start = time.process_time()\n"
                "                wait(fn(*args))\n"
                "                samples.append(time.process_time() - start)")]},

    # ------------------------------------------------------------------ stage 2
    {"stage": 2, "id": "blind-trace-warmup-not-waited",
     "misunderstood": "the warm-up call before the trace only has to compile the step, so "
                      "it is dispatched and not waited for; its run spills into the first "
                      "traced step",
     "edits": [("    jax.block_until_ready(step_fn(*args))\n"
                "    with jax.profiler.trace(logdir):",
                "    step_fn(*args)  # warm-up: compile outside the trace\n"
                "    with jax.profiler.trace(logdir):")]},
    {"stage": 2, "id": "blind-peak-flops-input-in-each-sample",
     "misunderstood": "makes the matmul's input inside each timed sample (its shape "
                      "already compiled), as part of 'the work'",
     "edits": [("        start = time.perf_counter()\n"
                "        jax.block_until_ready(f(a))\n"
                "        samples.append(time.perf_counter() - start)\n"
                "    flops = 2 * n**3",
                "        start = time.perf_counter()\n"
                "        a = jnp.ones((n, n), jnp.float32).astype(dtype)\n"
                "        jax.block_until_ready(f(a))\n"
                "        samples.append(time.perf_counter() - start)\n"
                "    flops = 2 * n**3")]},
    {"stage": 2, "id": "blind-trace-without-warmup",
     "misunderstood": "traces from the very first call, so the compile lands inside the "
                      "first region occurrence",
     "edits": [("    jax.block_until_ready(step_fn(*args))\n"
                "    with jax.profiler.trace(logdir):",
                "    with jax.profiler.trace(logdir):")]},
    {"stage": 2, "id": "blind-trace-region-not-waited",
     "misunderstood": "the annotation wraps the dispatch of each step; the wait happens "
                      "after the region closes",
     "edits": [("            with jax.profiler.TraceAnnotation(region, step=i):\n"
                "                jax.block_until_ready(step_fn(*args))",
                "            with jax.profiler.TraceAnnotation(region, step=i):\n"
                "                out = step_fn(*args)\n"
                "            jax.block_until_ready(out)")]},
    {"stage": 2, "id": "blind-trace-region-once",
     "misunderstood": "one region around all the steps instead of one per step",
     "edits": [("        for i in range(steps):\n"
                "            with jax.profiler.TraceAnnotation(region, step=i):\n"
                "                jax.block_until_ready(step_fn(*args))",
                "        with jax.profiler.TraceAnnotation(region):\n"
                "            for i in range(steps):\n"
                "                jax.block_until_ready(step_fn(*args))")]},
    {"stage": 2, "id": "blind-newest-trace-by-name",
     "misunderstood": "the run folders are timestamps, so the newest is the last by name",
     "edits": [("                   key=lambda p: (p.stat().st_mtime, str(p)))",
                "                   key=lambda p: str(p))")]},
    {"stage": 2, "id": "blind-newest-trace-first",
     "misunderstood": "takes the first file of the mtime-sorted list (oldest first) as "
                      "the newest",
     "edits": [("    return files[-1]", "    return files[0]")]},
    {"stage": 2, "id": "blind-newest-trace-no-error",
     "misunderstood": "returns None for a folder without traces instead of raising "
                      "FileNotFoundError",
     "edits": [("        raise FileNotFoundError(f\"no *.trace.json.gz under {logdir}/plugins/profile/\")",
                "        return None")]},
    {"stage": 2, "id": "blind-region-nested-added",
     "misunderstood": "adds every event inside the region as a child, nested ones too "
                      "(additive time instead of covered time)",
     "edits": [("            if e[\"ts\"] + e[\"dur\"] <= covered_until:\n"
                "                continue  # nested inside a direct child already counted\n"
                "            if e[\"ts\"] < covered_until:\n"
                "                continue  # overlaps a direct child without nesting: not a child\n",
                "")]},
    {"stage": 2, "id": "blind-region-any-thread",
     "misunderstood": "children are any events inside the region's time span, whatever "
                      "thread or process they ran on",
     "edits": [("                         if e is not r and e.get(\"pid\") == r.get(\"pid\")\n"
                "                         and e.get(\"tid\") == r.get(\"tid\")\n"
                "                         and e[\"ts\"] >= r[\"ts\"]",
                "                         if e is not r\n"
                "                         and e[\"ts\"] >= r[\"ts\"]")]},
    {"stage": 2, "id": "blind-region-prefix-match",
     "misunderstood": "finds region occurrences by name prefix (train_step also matches "
                      "train_step_2)",
     "edits": [("    regions = [e for e in complete if e.get(\"name\") == region]",
                "    regions = [e for e in complete if str(e.get(\"name\", \"\")).startswith(region)]")]},
    {"stage": 2, "id": "blind-region-straddler-child",
     "misunderstood": "an event that starts inside the region is its child even if it "
                      "ends after the region",
     "edits": [("                         and e[\"ts\"] >= r[\"ts\"] and e[\"ts\"] + e[\"dur\"] <= r_end),",
                "                         and r[\"ts\"] <= e[\"ts\"] < r_end),")]},
    {"stage": 2, "id": "blind-region-ms",
     "misunderstood": "reports durations in milliseconds (Chrome trace ts/dur read as ns "
                      "and divided to ms)",
     "edits": [("    total = float(sum(r[\"dur\"] for r in regions))\n"
                "    child = float(sum(children.values()))",
                "    total = float(sum(r[\"dur\"] for r in regions)) / 1e3\n"
                "    children = {k: v / 1e3 for k, v in children.items()}\n"
                "    child = float(sum(children.values()))")]},
    {"stage": 2, "id": "blind-region-tie-order",
     "misunderstood": "sorts candidate children by start time only, so of two events "
                      "starting together the shorter (inner) one may be taken as the child",
     "edits": [("                        key=lambda e: (e[\"ts\"], -e[\"dur\"]))",
                "                        key=lambda e: (e[\"ts\"], e[\"dur\"]))")]},
    {"stage": 2, "id": "blind-region-touching-dropped",
     "misunderstood": "an event that starts exactly where the previous child ends is "
                      "taken as overlapping it and dropped",
     "edits": [("            if e[\"ts\"] < covered_until:",
                "            if e[\"ts\"] <= covered_until:")]},
    {"stage": 2, "id": "blind-region-end-together-dropped",
     "misunderstood": "a child must end strictly before the region does, so a child that "
                      "ends with the region is not counted",
     "edits": [("e[\"ts\"] + e[\"dur\"] <= r_end),",
                "e[\"ts\"] + e[\"dur\"] < r_end),")]},
    {"stage": 2, "id": "blind-matmul-macs",
     "misunderstood": "counts one FLOP per multiply-add (m*k*n)",
     "edits": [("    return {\"flops\": 2 * m * k * n,",
                "    return {\"flops\": m * k * n,")]},
    {"stage": 2, "id": "blind-matmul-exact-adds",
     "misunderstood": "counts k multiplies and k-1 adds per output element, m*n*(2k-1), "
                      "not the compiler's 2mkn",
     "edits": [("    return {\"flops\": 2 * m * k * n,",
                "    return {\"flops\": m * n * (2 * k - 1),")]},
    {"stage": 2, "id": "blind-matmul-bytes-no-output",
     "misunderstood": "counts only the two inputs as traffic, not the output written",
     "edits": [("\"bytes\": (m * k + k * n + m * n) * itemsize}",
                "\"bytes\": (m * k + k * n) * itemsize}")]},
    {"stage": 2, "id": "blind-matmul-bytes-float32",
     "misunderstood": "counts bytes as 4 per element whatever the dtype",
     "edits": [("\"bytes\": (m * k + k * n + m * n) * itemsize}",
                "\"bytes\": (m * k + k * n + m * n) * 4}")]},
    {"stage": 2, "id": "blind-cost-from-lowered",
     "misunderstood": "asks the lowered (traced, unfused) program for its cost instead of "
                      "the compiled one",
     "edits": [("    cost = jax.jit(fn).lower(*args).compile().cost_analysis()",
                "    cost = jax.jit(fn).lower(*args).cost_analysis()")]},
    {"stage": 2, "id": "blind-cost-output-bytes",
     "misunderstood": "reports the bytes of the output only (\"bytes accessedout{}\") as the "
                      "program's traffic",
     "edits": [("float(cost[\"bytes accessed\"])}",
                "float(cost[\"bytes accessedout{}\"])}")]},
    {"stage": 2, "id": "blind-peak-flops-mean",
     "misunderstood": "the attained rate comes from the mean of the samples, not the "
                      "fastest",
     "edits": [("\"flops_per_s\": flops / best}",
                "\"flops_per_s\": flops / (sum(samples) / len(samples))}")]},
    {"stage": 2, "id": "blind-peak-flops-not-synced",
     "misunderstood": "times the matmul calls without waiting for them",
     "edits": [("        jax.block_until_ready(f(a))\n"
                "        samples.append(time.perf_counter() - start)\n"
                "    flops = 2 * n**3",
                "        f(a)\n"
                "        samples.append(time.perf_counter() - start)\n"
                "    flops = 2 * n**3")]},
    {"stage": 2, "id": "blind-peak-flops-macs",
     "misunderstood": "counts n**3 FLOPs for an n x n product (one per multiply-add)",
     "edits": [("    flops = 2 * n**3", "    flops = n**3")]},
    {"stage": 2, "id": "blind-bandwidth-in-place-one-pass",
     "misunderstood": "written in place means one pass over memory, so in_place moves "
                      "the array once like read_sum",
     "edits": [("    moved = (1 if kind == \"read_sum\" else 2) * (nbytes // 4) * 4",
                "    moved = (1 if kind in (\"read_sum\", \"in_place\") else 2) * (nbytes // 4) * 4")]},
    {"stage": 2, "id": "blind-bandwidth-not-donated",
     "misunderstood": "in place only means reusing the variable name; the input is never "
                      "donated, so every call writes fresh pages",
     "edits": [("                    donate_argnums=0 if kind == \"in_place\" else ())",
                "                    donate_argnums=())")]},
    {"stage": 2, "id": "blind-bandwidth-cumulative-faults",
     "misunderstood": "reads the fault counter once before the loop, so each entry is the "
                      "running total, not the sample's own faults",
     "edits": [("    samples, faults = [], []\n"
                "    for _ in range(iters):\n"
                "        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n",
                "    samples, faults = [], []\n"
                "    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt\n"
                "    for _ in range(iters):\n")]},
    {"stage": 2, "id": "blind-bandwidth-no-warmup",
     "misunderstood": "no untimed first call: the first sample pays for the compile and "
                      "the first touch of the pages",
     "edits": [("    x = call(x)\n    samples, faults = [], []",
                "    samples, faults = [], []")]},
    {"stage": 2, "id": "blind-bandwidth-gb-per-s",
     "misunderstood": "reports bandwidth in GB/s, the unit spec sheets use",
     "edits": [("\"bandwidth\": moved / min(samples)}",
                "\"bandwidth\": moved / min(samples) / 1e9}")]},
    {"stage": 2, "id": "blind-cache-decimal-units",
     "misunderstood": "reads K, M, G in sysfs sizes as powers of ten",
     "edits": [("        units = {\"K\": 2**10, \"M\": 2**20, \"G\": 2**30}",
                "        units = {\"K\": 10**3, \"M\": 10**6, \"G\": 10**9}")]},
    {"stage": 2, "id": "blind-cache-data-type-only",
     "misunderstood": "keeps only caches whose type is \"Data\", dropping the Unified L2 "
                      "and L3",
     "edits": [("        if kind == \"Instruction\":", "        if kind != \"Data\":")]},
    {"stage": 2, "id": "blind-cache-instruction-kept",
     "misunderstood": "does not skip instruction caches; the L1 entry is whichever index "
                      "comes last",
     "edits": [("        if kind == \"Instruction\":\n            continue\n", "")]},
    {"stage": 2, "id": "blind-roofline-level-by-name",
     "misunderstood": "walks the cache levels in name order (L1, L2, L3) assuming names "
                      "sort by size",
     "edits": [("    for name, size in sorted(caches.items(), key=lambda kv: kv[1]):",
                "    for name, size in sorted(caches.items()):")]},
    {"stage": 2, "id": "blind-roofline-exact-fit-spills",
     "misunderstood": "a working set exactly the size of a level does not fit it",
     "edits": [("        if working_set_bytes <= size:", "        if working_set_bytes < size:")]},
    {"stage": 2, "id": "blind-roofline-lower-is-min",
     "misunderstood": "the fastest time is the smaller of compute_s and memory_s",
     "edits": [("\"lower_s\": max(compute_s, memory_s)", "\"lower_s\": min(compute_s, memory_s)")]},
    {"stage": 2, "id": "blind-roofline-predicted-no-overlap",
     "misunderstood": "the roofline's predicted time adds compute and memory time",
     "edits": [("\"predicted_s\": flops / attainable,",
                "\"predicted_s\": flops / peak_flops + nbytes / bandwidth,")]},
    {"stage": 2, "id": "blind-roofline-intensity-working-set",
     "misunderstood": "intensity divides FLOPs by the working set instead of the bytes "
                      "moved per call",
     "edits": [("    intensity = flops / nbytes", "    intensity = flops / working_set_bytes")]},
    {"stage": 2, "id": "blind-roofline-slowest-bandwidth",
     "misunderstood": "with a bandwidth per level, uses the slowest one (DRAM) to be "
                      "conservative",
     "edits": [("        bandwidth = bandwidth[level]",
                "        bandwidth = min(bandwidth.values())")]},
    {"stage": 2, "id": "blind-roofline-ridge-inverted",
     "misunderstood": "ridge as bandwidth over peak (bytes per FLOP)",
     "edits": [("    ridge = peak_flops / bandwidth", "    ridge = bandwidth / peak_flops")]},

    # ------------------------------------------------------------------ stage 3
    {"stage": 3, "id": "blind-block-remat-whole-model",
     "misunderstood": "checkpoints the whole stack once instead of each block",
     "edits": [("    step = block\n"
                "    if policy is not None:\n"
                "        if policy not in REMAT_POLICIES:\n"
                "            raise ValueError(f\"policy must be None or one of {REMAT_POLICIES}\")\n"
                "        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, policy))\n"
                "    for p in params:\n"
                "        x = step(p, x)\n"
                "    return jnp.mean(x**2)",
                "    def stack(params, x):\n"
                "        for p in params:\n"
                "            x = block(p, x)\n"
                "        return x\n"
                "    if policy is not None:\n"
                "        if policy not in REMAT_POLICIES:\n"
                "            raise ValueError(f\"policy must be None or one of {REMAT_POLICIES}\")\n"
                "        stack = jax.checkpoint(stack, policy=getattr(jax.checkpoint_policies, policy))\n"
                "    x = stack(params, x)\n"
                "    return jnp.mean(x**2)")]},
    {"stage": 3, "id": "blind-block-policy-dropped",
     "misunderstood": "wraps each block in jax.checkpoint but forgets to pass the policy, "
                      "so every policy saves nothing",
     "edits": [("        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, policy))",
                "        step = jax.checkpoint(block)")]},
    {"stage": 3, "id": "blind-block-no-policy-check",
     "misunderstood": "looks the policy up with getattr and lets a bad name raise whatever "
                      "it raises (AttributeError), not ValueError",
     "edits": [("    if policy is not None:\n"
                "        if policy not in REMAT_POLICIES:\n"
                "            raise ValueError(f\"policy must be None or one of {REMAT_POLICIES}\")\n"
                "        step = jax.checkpoint(block,",
                "    if policy is not None:\n"
                "        step = jax.checkpoint(block,")]},
    {"stage": 3, "id": "blind-block-loss-sum",
     "misunderstood": "\"mean of squares\" read as the sum of squared outputs",
     "edits": [("        x = step(p, x)\n    return jnp.mean(x**2)",
                "        x = step(p, x)\n    return jnp.sum(x**2)")]},
    {"stage": 3, "id": "blind-tanh-remat-whole-chain",
     "misunderstood": "the policy applies to the chain as a whole, one checkpoint around "
                      "all the layers",
     "edits": [("    for w in ws:\n"
                "        x = layer(w, x)\n"
                "    return jnp.mean(x**2)",
                "    def chain(ws, x):\n"
                "        for w in ws:\n"
                "            x = jnp.tanh(x @ w)\n"
                "        return x\n"
                "    if policy is not None:\n"
                "        chain = jax.checkpoint(chain, policy=getattr(jax.checkpoint_policies, policy))\n"
                "    return jnp.mean(chain(ws, x)**2)")]},
    {"stage": 3, "id": "blind-tanh-policy-ignored",
     "misunderstood": "the tanh chain is only the residual-counting example, so it is "
                      "written without remat and the policy is only validated",
     "edits": [("        layer = jax.checkpoint(layer, policy=getattr(jax.checkpoint_policies, policy))\n",
                "")]},
    {"stage": 3, "id": "blind-grads-policy-dropped",
     "misunderstood": "loss_and_grads differentiates block_loss with its default policy; "
                      "the policy argument is never passed on",
     "edits": [("    return jax.value_and_grad(block_loss)(params, x, policy)",
                "    return jax.value_and_grad(block_loss)(params, x)")]},
    {"stage": 3, "id": "blind-grads-swapped",
     "misunderstood": "returns (grads, loss) instead of (loss, grads)",
     "edits": [("    return jax.value_and_grad(block_loss)(params, x, policy)",
                "    loss, grads = jax.value_and_grad(block_loss)(params, x, policy)\n"
                "    return grads, loss")]},
    {"stage": 3, "id": "blind-residuals-include-arguments",
     "misunderstood": "counts every array the pullback holds, the parameters and input "
                      "included",
     "edits": [("    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(pullback)\n"
                "                   if id(leaf) not in arguments))",
                "    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(pullback)))")]},
    {"stage": 3, "id": "blind-residuals-float32-bytes",
     "misunderstood": "counts 4 bytes per saved element whatever its dtype",
     "edits": [("    return int(sum(leaf.size * leaf.dtype.itemsize for leaf",
                "    return int(sum(leaf.size * 4 for leaf")]},
    {"stage": 3, "id": "blind-residuals-policy-dropped",
     "misunderstood": "takes the vjp of the model without passing the policy on",
     "edits": [("    _, pullback = jax.vjp(lambda p, v: loss(p, v, policy), params, x)",
                "    _, pullback = jax.vjp(lambda p, v: loss(p, v), params, x)")]},
    {"stage": 3, "id": "blind-temp-is-peak",
     "misunderstood": "reads the plan's peak memory (arguments and outputs included) as "
                      "the temporaries",
     "edits": [("compile().memory_analysis().temp_size_in_bytes)",
                "compile().memory_analysis().peak_memory_in_bytes)")]},
    {"stage": 3, "id": "blind-temp-forward-only",
     "misunderstood": "compiles the loss alone (forward), not its value_and_grad",
     "edits": [("    fn = jax.jit(lambda p, v: jax.value_and_grad(loss)(p, v, policy))",
                "    fn = jax.jit(lambda p, v: loss(p, v, policy))")]},
    {"stage": 3, "id": "blind-temp-host-field",
     "misunderstood": "on a CPU the temporaries are host memory, so it reads "
                      "host_temp_size_in_bytes",
     "edits": [("compile().memory_analysis().temp_size_in_bytes)",
                "compile().memory_analysis().host_temp_size_in_bytes)")]},
    {"stage": 3, "id": "blind-peak-kib-as-bytes",
     "misunderstood": "reads the /proc/self/status figures as bytes, though the kernel "
                      "writes them in kB",
     "edits": [("                return int(line.split()[1]) * 1024",
                "                return int(line.split()[1])")]},
    {"stage": 3, "id": "blind-peak-compile-in-run",
     "misunderstood": "resets the high-water mark first and then compiles and runs, as "
                      "if the compile were part of the call being measured",
     "edits": [("compiled = jax.jit(fn).lower(*args).compile()\n"
                "jax.block_until_ready(jax.jit(lambda v: v + 1)(jnp.ones(8)))\n", ""),
               ("out = jax.block_until_ready(compiled(*args))",
                "compiled = jax.jit(fn).lower(*args).compile()\n"
                "out = jax.block_until_ready(compiled(*args))")]},
    {"stage": 3, "id": "blind-peak-is-vmhwm",
     "misunderstood": "reports VmHWM itself as the run's peak",
     "edits": [("    \"run_peak_bytes\": hwm - rss if", "    \"run_peak_bytes\": hwm if")]},
    {"stage": 3, "id": "blind-peak-one-process",
     "misunderstood": "runs one fresh process and repeats its result repeats times",
     "edits": [("        runs += list(pool.map(one, range(1, repeats)))",
                "        runs += [runs[0]] * (repeats - 1)")]},
    {"stage": 3, "id": "blind-peak-policy-ignored",
     "misunderstood": "the fresh process builds the model without the policy",
     "edits": [("    return (lambda p, v: loss_and_grads(p, v, policy)), (params, x)",
                "    return (lambda p, v: loss_and_grads(p, v)), (params, x)")]},

    # ------------------------------------------------------------------ stage 4
    {"stage": 4, "id": "blind-amdahl-linear",
     "misunderstood": "the step speeds up in proportion to the share: 1 + share * "
                      "(kernel_speedup - 1)",
     "edits": [("    return 1.0 / ((1.0 - share) + share / kernel_speedup)",
                "    return 1.0 + share * (kernel_speedup - 1.0)")]},
    {"stage": 4, "id": "blind-amdahl-inverted",
     "misunderstood": "returns the new time as a fraction of the old (after / before)",
     "edits": [("    return 1.0 / ((1.0 - share) + share / kernel_speedup)",
                "    return (1.0 - share) + share / kernel_speedup")]},
    {"stage": 4, "id": "blind-decide-pooled-samples",
     "misunderstood": "ignores round_ids and pools the samples: every sample is its own "
                      "independent piece of evidence (unpaired)",
     "edits": [("        ids = run.get(\"round_ids\", range(len(samples)))",
                "        ids = range(len(samples))"),
               ("    shared = sorted(set(mb) & set(ma))",
                "    shared = []  # every sample is independent evidence: nothing to pair")]},
    {"stage": 4, "id": "blind-decide-round-mean",
     "misunderstood": "summarises each round by its mean, so a stall moves the round",
     "edits": [("        return {r: float(np.median(v)) for r, v in sorted(by_round.items())}",
                "        return {r: float(np.mean(v)) for r, v in sorted(by_round.items())}")]},
    {"stage": 4, "id": "blind-decide-df-n",
     "misunderstood": "uses n rounds, not n - 1, as the degrees of freedom of the paired t",
     "edits": [("        df = d.size - 1\n", "        df = d.size\n")]},
    {"stage": 4, "id": "blind-decide-z-not-t",
     "misunderstood": "uses the normal 1.96 for a 95% interval, not Student's t for a few "
                      "rounds",
     "edits": [("        half = t_quantile(confidence, df) * (float(np.std(d, ddof=1))",
                "        half = 1.959964 * (float(np.std(d, ddof=1))")]},
    {"stage": 4, "id": "blind-decide-one-sided-quantile",
     "misunderstood": "passes (1 + confidence) / 2 to t_quantile as for a one-sided "
                      "table, although it already takes the two-sided confidence",
     "edits": [("        half = t_quantile(confidence, df) * (float(np.std(d, ddof=1))",
                "        half = t_quantile((1 + confidence) / 2, df) * (float(np.std(d, ddof=1))")]},
    {"stage": 4, "id": "blind-decide-std-not-se",
     "misunderstood": "uses the spread of the rounds as the interval's half width, not "
                      "its standard error",
     "edits": [("(float(np.std(d, ddof=1)) / math.sqrt(d.size))",
                "float(np.std(d, ddof=1))")]},
    {"stage": 4, "id": "blind-decide-population-std",
     "misunderstood": "uses the population standard deviation (ddof=0) of the round "
                      "differences",
     "edits": [("(float(np.std(d, ddof=1)) / math.sqrt(d.size))",
                "(float(np.std(d)) / math.sqrt(d.size))")]},
    {"stage": 4, "id": "blind-decide-min-gain-ignored",
     "misunderstood": "accepts as soon as the interval lies above 1",
     "edits": [("    up, down = 1.0 + min_gain, 1.0 / (1.0 + min_gain)",
                "    up, down = 1.0, 1.0")]},
    {"stage": 4, "id": "blind-decide-unchecked-output-ok",
     "misunderstood": "rejects only an output check that failed; a record never checked "
                      "(output_ok None) passes",
     "edits": [("        if run.get(\"output_ok\") is not True:",
                "        if run.get(\"output_ok\") is False:")]},
    {"stage": 4, "id": "blind-decide-first-call-unchecked",
     "misunderstood": "does not ask for the first call reported apart",
     "edits": [("        if run.get(\"first_call_s\") is None:\n"
                "            reasons.append(f\"{name} has no first call reported apart from warmed samples\")\n",
                "")]},
    {"stage": 4, "id": "blind-decide-no-min-samples",
     "misunderstood": "any number of samples will do; the interval takes care of it",
     "edits": [("        if len(run.get(\"samples_s\") or []) < 5:\n"
                "            reasons.append(f\"{name} has fewer than 5 raw samples\")\n",
                "")]},
    {"stage": 4, "id": "blind-decide-skips-comparable",
     "misunderstood": "decide weighs times only; comparability is left to the caller",
     "edits": [("    reasons = list(comparable(before, after))",
                "    reasons = []")]},
    {"stage": 4, "id": "blind-decide-ratio-inverted",
     "misunderstood": "reports the ratio as after / before (time ratio), not the speedup",
     "edits": [("    out = {\"ratio\": math.exp(est), \"ci\": None,",
                "    out = {\"ratio\": math.exp(-est), \"ci\": None,")]},
    {"stage": 4, "id": "blind-decide-negative-min-gain-allowed",
     "misunderstood": "a negative minimum gain is just a looser test, not an error",
     "edits": [("    if min_gain < 0:\n"
                "        raise ValueError(f\"min_gain must be >= 0, got {min_gain!r}\")\n",
                "")]},
    {"stage": 4, "id": "blind-decide-slower-without-minimum",
     "misunderstood": "calls any clearly slower interval \"slower\", without the minimum",
     "edits": [("    elif hi < down:", "    elif hi < 1.0:")]},
    {"stage": 4, "id": "blind-decide-slower-below-one-minus-gain",
     "misunderstood": "takes 'slower by more than min_gain' as a speedup below 1 - min_gain "
                      "(0.950), not below 1 / (1 + min_gain) (0.952): an interval between "
                      "the two is called 'reject' (issue 53)",
     "edits": [("    up, down = 1.0 + min_gain, 1.0 / (1.0 + min_gain)",
                "    up, down = 1.0 + min_gain, 1.0 - min_gain")]},
]


# A second blind batch (2026-12-06, issue 53): written from the learner's copy and
# the solutions only, each confirmed wrong by a measurement quoted in its line.
MISTAKES += [
    {"stage": 1, "id": "blind-b2-sample-timer-not-waiting",
     "misunderstood": "stops the sample clock right after dispatch (no block_until_ready / host read inside the sample), so samples time the asynchronous launch, not the finished work: measured '512 matmul chain median ref=13.91 ms mut=0.013 ms (1083x too fast)'",
     "named_by": ["block_until_ready", "dispatch", "not waited", "asynchronous"],
     "edits": [("                start = time.perf_counter()\n                wait(fn(*args))\n",
                "                start = time.perf_counter()\n                fn(*args)\n")]},
    {"stage": 1, "id": "blind-b2-comparable-refuses-iters",
     "misunderstood": 'also compares iters, so two runs of one configuration that only took a different number of samples are refused, which the contract says may be compared: measured \'same config, iters 10 vs 20: ref=[] mut=["iters differ: 10 vs 20"]\'',
     "named_by": ["iters", "number of samples", "same configuration"],
     "edits": [('    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):\n',
                '    for key in ("shapes", "dtypes", "sync", "warmup", "iters", "backend"):\n')]},
    {"stage": 2, "id": "blind-b2-newest-trace-by-name",
     "misunderstood": "takes the newest trace as the last folder name in sort order instead of by modification time, wrong when runs were made out of order: measured 'runs made out of order: ref=2026_01_01_00_00_09 (newest mtime) mut=2026_01_02_00_00_00'",
     "named_by": ["sorted by name", "modification time", "newest", "out of order"],
     "edits": [("                   key=lambda p: (p.stat().st_mtime, str(p)))\n    if not files:",
                "                   key=lambda p: str(p))\n    if not files:")]},
    {"stage": 2, "id": "blind-b2-roofline-level-boundary",
     "misunderstood": "uses a strict < for fitting a cache level, so a working set of exactly a level's size is sent to the next level, against 'exactly a level's size fits it': measured 'working set == L1 size: ref level=L1 mut level=L2, predicted_s ref=8.19e-08 mut=1.64e-07'",
     "named_by": ["exactly", "boundary", "fits the level", "strictly smaller"],
     "edits": [("        if working_set_bytes <= size:\n",
                "        if working_set_bytes < size:\n")]},
    {"stage": 3, "id": "blind-b2-policy-always-nothing",
     "misunderstood": "hard-codes nothing_saveable in jax.checkpoint and ignores the policy named, so dots_saveable saves what nothing_saveable saves (gradients still equal, so it passes a grads-only test): measured 'saved bytes with dots_saveable ref=5120 mut=1024 (nothing_saveable: 1024)'",
     "named_by": ["policy ignored", "nothing_saveable", "dots_saveable", "remat policy"],
     "edits": [("        step = jax.checkpoint(block, policy=getattr(jax.checkpoint_policies, policy))\n",
                "        step = jax.checkpoint(block, policy=jax.checkpoint_policies.nothing_saveable)\n")]},
    {"stage": 4, "id": "blind-b2-round-mean-not-median",
     "misunderstood": "summarises each round by the mean instead of the median, so one stalled sample drags its whole round and the verdict changes, though stalls must change nothing: measured 'a true 2x speedup, 3 stalls in after: ref=accept ratio=1.989 mut=reject ratio=0.879'",
     "named_by": ["mean", "median", "stall", "outlier"],
     "edits": [("        return {r: float(np.median(v)) for r, v in sorted(by_round.items())}\n",
                "        return {r: float(np.mean(v)) for r, v in sorted(by_round.items())}\n")]},
    # blind batch 3 (2026-12-06, written from a learner's copy and the solutions only)
    {"stage": 1, "id": "blind-b3-host-read-first-leaf-only",
     "misunderstood": "host_read reads only the first output leaf to the host, so a fn whose outputs come from separate programs is timed before its other outputs finish; measured (small, big) outputs, both precompiled: host_read first_call_s ref 10.254 ms, mistake 0.217 ms",
     "named_by": ["host read", "first output", "every leaf", "not waited"],
     "edits": [("        return jax.tree.map(np.asarray, out)\n",
                "        return np.asarray(jax.tree.leaves(out)[0])\n")]},
    {"stage": 1, "id": "blind-b3-shapes-of-first-argument-only",
     "misunderstood": "records the shape and dtype of the first array argument only, so comparable() cannot see a change in any other argument; measured f(a, b) with b (32,16) vs (32,48): ref comparable -> ['shapes differ: ...'], mistake -> [] (declared comparable)",
     "named_by": ["first argument", "shapes", "every array argument", "comparable"],
     "edits": [("    arrays = [a for a in args if hasattr(a, \"shape\") and hasattr(a, \"dtype\")]\n",
                "    arrays = [a for a in args[:1] if hasattr(a, \"shape\") and hasattr(a, \"dtype\")]\n")]},
    {"stage": 2, "id": "blind-b3-region-children-of-first-occurrence",
     "misunderstood": "collects direct children inside the first region occurrence only (count and total still cover all of them); measured 3 'step' events of 50 us each holding a 30 us child: ref child_us 90 self_us 60, mistake child_us 30 self_us 120",
     "named_by": ["first occurrence", "every occurrence", "children", "self time"],
     "edits": [("    for r in regions:\n        r_end = r[\"ts\"] + r[\"dur\"]\n",
                "    for r in regions[:1]:\n        r_end = r[\"ts\"] + r[\"dur\"]\n")]},
    {"stage": 2, "id": "blind-b3-bandwidth-moved-from-nbytes",
     "misunderstood": "counts moved bytes from nbytes itself, but the array holds nbytes // 4 float32 elements, so any nbytes that is not a multiple of 4 is miscounted (default sizes hide it); measured nbytes=400002 in_place: ref moved_bytes 800000, mistake 800004",
     "named_by": ["nbytes // 4", "moved bytes", "not a multiple of 4", "elements"],
     "edits": [("    moved = (1 if kind == \"read_sum\" else 2) * (nbytes // 4) * 4\n",
                "    moved = (1 if kind == \"read_sum\" else 2) * nbytes\n")]},
    {"stage": 3, "id": "blind-b3-temp-plan-cached-by-policy",
     "misunderstood": "memoises the compiled plan's temp bytes keyed on policy alone, so a later call for another model (or other shapes) with the same policy gets the earlier answer; measured policy None: ref blocks 57344 then tanh 10240, mistake blocks 57344 then tanh 57344",
     "named_by": ["cache", "keyed on policy", "earlier call", "model"],
     "edits": [("""    fn = jax.jit(lambda p, v: jax.value_and_grad(loss)(p, v, policy))
    return int(fn.lower(params, x).compile().memory_analysis().temp_size_in_bytes)
""", """    plans = compiler_temp_bytes.__dict__.setdefault("_plans", {})
    if policy not in plans:  # compiling is slow: one plan per policy
        fn = jax.jit(lambda p, v: jax.value_and_grad(loss)(p, v, policy))
        plans[policy] = int(fn.lower(params, x).compile().memory_analysis().temp_size_in_bytes)
    return plans[policy]
""")]},
    {"stage": 4, "id": "blind-b3-decide-confidence-as-alpha",
     "misunderstood": "passes 1 - confidence (alpha) to t_quantile, which takes the confidence itself, so the interval is a few percent of its width and noise becomes a verdict; measured identical programs in 8 noisy rounds, min_gain=0: ref reject ci [0.966, 1.029], mistake slower ci [0.996, 0.998]",
     "named_by": ["alpha", "1 - confidence", "quantile", "interval too narrow"],
     "edits": [("        half = t_quantile(confidence, df) * (float(np.std(d, ddof=1))",
                "        half = t_quantile(1 - confidence, df) * (float(np.std(d, ddof=1))"),
               ("            half = t_quantile(confidence, df) * math.sqrt(vb + va)\n",
                "            half = t_quantile(1 - confidence, df) * math.sqrt(vb + va)\n")]},
    # ------------------------------------------------------------ batch 4 (blind, s7)
    {"stage": 1, "id": "blind-b4-time-fn-warmup-compiles-uncounted",
     "misunderstood": "counts compiles_warmed around the timed loop only, so a compile in a warm-up call is reported as 0 though the contract counts every call after the first; measured: fn that recompiles in its first warm-up call: compiles_warmed ref 1, mutant 0",
     "named_by": ["warm-up", "compile count", "compiles_warmed", "recompile"],
     "edits": [("    with count_compiles() as warmed:\n        if output_ok is not False:\n            for _ in range(warmup):\n                wait(fn(*args))\n            for _ in range(iters):\n",
                "    if output_ok is not False:\n        for _ in range(warmup):\n            wait(fn(*args))\n    with count_compiles() as warmed:\n        if output_ok is not False:\n            for _ in range(iters):\n")]},
    {"stage": 1, "id": "blind-b4-comparable-refuses-unchecked",
     "misunderstood": "tests output_ok for falsiness, so two runs without an expected output (output_ok None, never checked) are refused though only a failed check (False) may be; measured: two time_fn runs without expected: ref [] (comparable), mutant refuses both ('output_ok is False for the first measurement', ...)",
     "named_by": ["output_ok", "none", "unchecked", "falsy"],
     "edits": [("        if m.get(\"output_ok\") is False:\n",
                "        if not m.get(\"output_ok\"):\n")]},
    {"stage": 2, "id": "blind-b4-roofline-exact-fit-strict",
     "misunderstood": "places a working set in a cache level only when strictly smaller than it, so one of exactly the level's size falls to the next level (the contract: exactly a level's size fits it); measured: working set 32768 B with L1 of 32768 B: memory_level ref L1, mutant L2; predicted_s ref 8.19e-08, mutant 3.28e-07",
     "named_by": ["exactly", "boundary", "memory level", "fits"],
     "edits": [("        if working_set_bytes <= size:\n",
                "        if working_set_bytes < size:\n")]},
    {"stage": 2, "id": "blind-b4-peak-flops-no-warmup",
     "misunderstood": "drops the untimed first call, so the first sample holds the compile; with iters=1 on a new size best_s is the compile; measured: iters=1 on a size new to the process: best_s ref 0.0009 s (n=257), mutant 0.0166 s (n=263), 18x, the compile",
     "named_by": ["warm-up", "compile", "first call", "first sample"],
     "edits": [("    jax.block_until_ready(f(a))\n    samples = []\n    for _ in range(iters):\n",
                "    samples = []\n    for _ in range(iters):\n")]},
    {"stage": 3, "id": "blind-b4-loss-and-grads-drops-policy",
     "misunderstood": "differentiates block_loss without passing policy on, so the gradients are right but nothing is ever rematerialised (no checkpoint in the program) whatever policy is asked; measured: policy nothing_saveable, 3 blocks: checkpoint/remat equations in the jaxpr ref 3, mutant 0; loss identical",
     "named_by": ["policy", "checkpoint", "ignored", "remat"],
     "edits": [("    return jax.value_and_grad(block_loss)(params, x, policy)\n",
                "    return jax.value_and_grad(block_loss)(params, x)\n")]},
    {"stage": 4, "id": "blind-b4-decide-round-mean",
     "misunderstood": "summarises each round by the mean of its samples instead of the median, so a few stalled samples move a round's figure and the verdict; measured: true 1.25x speedup, a 40x stall in every other after round: ref accept ci [1.247, 1.281], mutant reject ci [0.28, 1.164]",
     "named_by": ["mean", "median", "stall", "outlier"],
     "edits": [("        return {r: float(np.median(v)) for r, v in sorted(by_round.items())}\n",
                "        return {r: float(np.mean(v)) for r, v in sorted(by_round.items())}\n")]},
]

# Batch b5 (2026-12-07): six more, written from the learner's copy (README, starter,
# notebooks) and the reference solution only, never a checker or this corpus.
MISTAKES += [
    {"stage": 1, "id": "blind-b5-comparable-refuses-unchecked",
     "misunderstood": "The learner believed a measurement whose output was never checked (output_ok None) may not be compared, refusing pairs that only a failed check (False) should block.",
     "named_by": ["output_ok none", "not checked", "only a failed check"],
     "edits": [("        if m.get(\"output_ok\") is False:", "        if not m.get(\"output_ok\"):")]},
    {"stage": 1, "id": "blind-b5-host-read-first-leaf",
     "misunderstood": "The learner believed reading one output leaf to the host is as good as reading them all, so host_read waits for (and returns) only the first leaf.",
     "named_by": ["every output leaf", "host read", "first leaf"],
     "edits": [("        return jax.tree.map(np.asarray, out)",
                "        return np.asarray(jax.tree.leaves(out)[0])")]},
    {"stage": 2, "id": "blind-b5-roofline-level-strict",
     "misunderstood": "The learner believed a working set must be strictly smaller than a cache to live in it, so one of exactly a level's size is placed one level out.",
     "named_by": ["exactly a level's size", "fits", "memory level", "boundary"],
     "edits": [("        if working_set_bytes <= size:", "        if working_set_bytes < size:")]},
    {"stage": 2, "id": "blind-b5-trace-without-warmup",
     "misunderstood": "The learner believed tracing from the first call is fine, so the first traced step holds the compile and is longer than the others.",
     "named_by": ["compile inside", "first step", "warm up before tracing"],
     "edits": [("    jax.block_until_ready(step_fn(*args))\n    with jax.profiler.trace(logdir):",
                "    with jax.profiler.trace(logdir):")]},
    {"stage": 3, "id": "blind-b5-residuals-count-arguments",
     "misunderstood": "The learner believed every leaf the pullback holds is a saved residual, counting the parameters and the input the backward pass keeps anyway.",
     "named_by": ["parameters and inputs", "only residuals", "saved bytes"],
     "edits": [("    arguments = {id(leaf) for leaf in jax.tree.leaves((params, x))}\n", ""),
               ("\n                   if id(leaf) not in arguments))", "))")]},
    {"stage": 4, "id": "blind-b5-paired-df-off-by-one",
     "misunderstood": "The learner believed the paired t interval has as many degrees of freedom as rounds, not rounds minus one, so the interval is too narrow (most over few rounds).",
     "named_by": ["degrees of freedom", "rounds minus one", "interval too narrow"],
     "edits": [("        df = d.size - 1", "        df = d.size")]},
]


# Batch b6 (2026-12-07, ninth session): six more, written from the learner's copy
# (README, starter, notebooks, docs/learners.md) and the reference solution only,
# never a checker or this corpus; each confirmed wrong by hand (a differing value).
MISTAKES += [
    {"stage": 1, "id": 'blind-b6-warmup-compiles-not-counted',
     "misunderstood": "The learner counted 'warmed' compiles around the timed samples only, believing warm-up calls are not part of it; a compile in a warm-up call is missed, so compiles_warmed reports 0 where fn compiled again.",
     "named_by": ["the warm-up calls' too", 'compiles during every later call', 'warm-up call compiles', 'count around warm-up too'],
     "edits": [('    with count_compiles() as warmed:\n        if output_ok is not False:\n            for _ in range(warmup):\n                wait(fn(*args))\n            for _ in range(iters):',
                '    if output_ok is not False:\n        for _ in range(warmup):\n            wait(fn(*args))\n    with count_compiles() as warmed:\n        if output_ok is not False:\n            for _ in range(iters):')]},
    {"stage": 1, "id": 'blind-b6-comparable-iters-not-warmup',
     "misunderstood": 'The learner believed the number of timed iterations must match for two measurements to be comparable and the warm-up count need not; two runs of one configuration with other iters are refused, and a pair differing in warm-up is accepted.',
     "named_by": ['warm-up count differs', 'iters may differ', 'two runs of one configuration'],
     "edits": [('    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):',
                '    for key in ("shapes", "dtypes", "sync", "iters", "backend"):')]},
    {"stage": 2, "id": 'blind-b6-newest-trace-by-name',
     "misunderstood": "The learner sorted the trace files by path, believing the timestamped run folders sort in the order they were made; runs made out of order then give the wrong 'newest' file (the run made last is the newest by mtime).",
     "named_by": ['run made last', 'modification time', 'folder names out of order'],
     "edits": [('    files = sorted(Path(logdir).glob("plugins/profile/*/*.trace.json.gz"),\n                   key=lambda p: (p.stat().st_mtime, str(p)))',
                '    files = sorted(Path(logdir).glob("plugins/profile/*/*.trace.json.gz"))')]},
    {"stage": 2, "id": 'blind-b6-cache-sizes-si-units',
     "misunderstood": 'The learner read sysfs sizes like 48K and 2M as SI units (10^3, 10^6), but the kernel means KiB and MiB; every cache size comes out 2-7% too small.',
     "named_by": ["1000 where sysfs's K, M, G are 1024", 'K means 1024', 'binary units', 'cache size in bytes'],
     "edits": [('        units = {"K": 2**10, "M": 2**20, "G": 2**30}',
                '        units = {"K": 10**3, "M": 10**6, "G": 10**9}')]},
    {"stage": 3, "id": 'blind-b6-loss-and-grads-drops-policy',
     "misunderstood": 'The learner forgot to pass policy on to block_loss, believing the differentiation alone decides what is saved; the values still match, but the program never rematerialises (no checkpoint per block) and the peak with nothing_saveable is the no-remat peak.',
     "named_by": ['never reaches block_loss', 'policy not passed', 'no checkpoint in the program', 'really rematerialises'],
     "edits": [('    return jax.value_and_grad(block_loss)(params, x, policy)',
                '    return jax.value_and_grad(block_loss)(params, x)')]},
    {"stage": 4, "id": 'blind-b6-decide-population-std',
     "misunderstood": "The learner used np.std's default (ddof=0) for the spread of the per-round log ratios, believing it is the sample standard deviation; the interval is too narrow (by sqrt((n-1)/n), most over few rounds), so noise is accepted.",
     "named_by": ['population spread (ddof=0)', 'sample standard deviation ddof=1', 'interval too narrow', 'few rounds'],
     "edits": [('        half = t_quantile(confidence, df) * (float(np.std(d, ddof=1)) / math.sqrt(d.size))',
                '        half = t_quantile(confidence, df) * (float(np.std(d)) / math.sqrt(d.size))')]},
]

# Blind batch b7 (2026-12-07): written from a learner's copy and the solutions only,
# told the earlier batches' mistakes so as not to repeat them.
MISTAKES += [
    {"stage": 1, "id": 'blind-b7-time-expected-truthiness',
     "misunderstood": "The learner tested `if expected:` for 'an expected output was given', believing an array is truthy like a list; a multi-element array raises 'truth value is ambiguous' and a 0-d zero expected is skipped (output_ok None) instead of compared.",
     "named_by": ['expected is not None', 'truth value of an array', 'output_ok None only without expected'],
     "edits": [('    if expected is not None:\n',
                '    if expected:\n')]},
    {"stage": 1, "id": 'blind-b7-comparable-output-ok-as-field',
     "misunderstood": 'The learner treated output_ok as one more field that must match between the two results; two failed checks then look comparable and a checked result (True) beside an unchecked one (None) is refused, where only a failed check must refuse.',
     "named_by": ['refuse a failed output check', 'output_ok False on either side', 'None is not a failure'],
     "edits": [('    for key in ("shapes", "dtypes", "sync", "warmup", "backend"):\n        if a.get(key) != b.get(key):\n            reasons.append(f"{key} differ: {a.get(key)!r} vs {b.get(key)!r}")\n    for name, m in (("first", a), ("second", b)):\n        if m.get("output_ok") is False:\n            reasons.append(f"output_ok is False for the {name} measurement")\n',
                '    for key in ("shapes", "dtypes", "sync", "warmup", "backend", "output_ok"):\n        if a.get(key) != b.get(key):\n            reasons.append(f"{key} differ: {a.get(key)!r} vs {b.get(key)!r}")\n')]},
    {"stage": 2, "id": 'blind-b7-roofline-level-loop-no-break',
     "misunderstood": 'The learner walked the cache levels from the smallest but never stopped at the first that holds the working set, so the last (largest) level that holds it wins; the working set lives in the smallest level that holds it.',
     "named_by": ['smallest level that holds it', 'stop at the first fit', 'loop without break'],
     "edits": [('            level = name\n            break\n',
                '            level = name\n')]},
    {"stage": 2, "id": 'blind-b7-cache-size-plain-bytes-truncated',
     "misunderstood": 'The learner believed every sysfs size ends in a unit letter, so it always strips the last character and multiplies by the unit (1 when unknown); a size in plain bytes loses its last digit.',
     "named_by": ['plain byte sizes', 'sizes without a unit suffix', 'parse the unit only when present'],
     "edits": [('        value = int(size[:-1]) * units[size[-1]] if size[-1] in units else int(size)',
                '        value = int(size[:-1]) * units.get(size[-1], 1)')]},
    {"stage": 3, "id": 'blind-b7-residuals-excluded-by-shape',
     "misunderstood": "The learner left out the parameters and input by their shapes rather than by identity, believing a saved value shaped like an argument is that argument; every block's (batch, width) activation (and every layer output of the tanh chain) is dropped from the residual count.",
     "named_by": ['exclude the arguments by identity', 'residuals shaped like the input', 'saved activations miscounted'],
     "edits": [('    arguments = {id(leaf) for leaf in jax.tree.leaves((params, x))}\n    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(pullback)\n                   if id(leaf) not in arguments))',
                '    arguments = {leaf.shape for leaf in jax.tree.leaves((params, x))}\n    return int(sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(pullback)\n                   if leaf.shape not in arguments))')]},
    {"stage": 4, "id": 'blind-b7-decide-five-samples-refused',
     "misunderstood": "The learner read 'fewer than 5 raw samples' as needing more than 5 and refused records with exactly 5 samples (<= 5), rejecting a clear speedup measured with the minimum number of samples.",
     "named_by": ['fewer than 5 samples', 'exactly five samples allowed', 'off-by-one minimum'],
     "edits": [('        if len(run.get("samples_s") or []) < 5:',
                '        if len(run.get("samples_s") or []) <= 5:')]},
]

# Blind batch b8 (2026-12-07, eleventh session): written from a learner's copy and the
# solutions only, told the 812 earlier mistakes so as not to repeat them; each
# confirmed wrong by a value it changes.
MISTAKES += [
    {"stage": 1, "id": 'blind-b8-time-fn-tolerances-ignored',
     "misunderstood": "The learner called np.allclose on the output with its defaults, believing 'np.allclose semantics' means np.allclose as it comes; the rtol and atol arguments are then silently ignored (atol 1e-8 instead of the default 1e-6), so a right output near zero or one inside a looser rtol asked for is reported wrong and never timed.",
     "named_by": ['pass rtol and atol on', 'argument silently ignored', "np.allclose defaults differ from time_fn's"],
     "edits": [('output_ok = bool(np.allclose(np.asarray(out), np.asarray(expected),\n                                     rtol=rtol, atol=atol))',
                'output_ok = bool(np.allclose(np.asarray(out), np.asarray(expected)))')]},
    {"stage": 2, "id": 'blind-b8-region-cut-off-event-zero-length',
     "misunderstood": "The learner read an X event without 'dur' as an instant of zero length and kept it (dur defaulted to 0); the contract says an event cut off without its dur is not a complete event, so a cut-off region occurrence raises the count and a cut-off child appears in children.",
     "named_by": ['an event without dur is not complete', 'skip it, do not default dur to 0', 'count of complete occurrences'],
     "edits": [('complete = [e for e in events if e.get("ph") == "X" and "dur" in e]',
                'complete = [dict(e, dur=e.get("dur", 0)) for e in events if e.get("ph") == "X"]')]},
    {"stage": 2, "id": 'blind-b8-matmul-output-read-and-written',
     "misunderstood": "The learner counted the output twice, as a GEMM C += A @ B reads C and writes it back; the contract's bytes are the least traffic the product needs, each array touched once: (mk + kn + mn) * itemsize.",
     "named_by": ['each array touched once', 'the output is written, not read', 'least traffic of the product'],
     "edits": [('"bytes": (m * k + k * n + m * n) * itemsize',
                '"bytes": (m * k + k * n + 2 * m * n) * itemsize')]},
    {"stage": 3, "id": 'blind-b8-remat-when-policy-none',
     "misunderstood": "The learner wrapped every block in jax.checkpoint even for policy None, believing None means 'checkpoint's default policy'; the contract's None is the no-remat baseline (nothing rematerialised), and jax.checkpoint's default saves nothing, so the baseline's saved residuals shrink to nothing_saveable's.",
     "named_by": ['policy None means no jax.checkpoint', 'the no-remat baseline', "checkpoint's default saves nothing"],
     "edits": [('    step = block\n',
                "    step = jax.checkpoint(block)  # policy None: checkpoint's default\n")]},
    {"stage": 4, "id": 'blind-b8-decide-confidence-fixed-95',
     "misunderstood": 'The learner hard-coded the 95% t quantile, believing the confidence argument only labels the interval; decide must form its interval at the confidence asked, so at 0.99 a gain the 95% interval accepts (but the 99% one does not) is accepted, and the reason names a 99% interval it never computed.',
     "named_by": ['interval at the confidence asked', 'argument silently ignored', 't_quantile(confidence, df)'],
     "edits": [('half = t_quantile(confidence, df) * (float(np.std(d, ddof=1))',
                'half = t_quantile(0.95, df) * (float(np.std(d, ddof=1))'),
               ('half = t_quantile(confidence, df) * math.sqrt(vb + va)',
                'half = t_quantile(0.95, df) * math.sqrt(vb + va)')]},
    {"stage": 4, "id": 'blind-b8-amdahl-ceiling-for-finite-speedup',
     "misunderstood": "The learner returned Amdahl's ceiling 1 / (1 - share), believing that is 'the step's speedup'; that is the limit for an infinitely faster part, while the contract asks for the speedup when the part gets kernel_speedup times faster: 1 / ((1 - share) + share / k).",
     "named_by": ['use kernel_speedup', 'the ceiling is the limit, not the speedup', "Amdahl's law with a finite speedup"],
     "edits": [('return 1.0 / ((1.0 - share) + share / kernel_speedup)',
                'return 1.0 / (1.0 - share)')]},
    # blind batch b9 (2026-12-07, twelfth session): written from a learner's copy, the
    # solutions and the 842 earlier mistakes, never the checkers
    {'stage': 1,
     'id': 'blind-b9-time-shapes-of-every-argument',
     'misunderstood': 'The learner recorded np.shape / dtype of every positional argument, '
                      "believing 'shape of each argument' includes Python scalars and flags; "
                      'the contract lists the array arguments only, so a scalar argument adds '
                      'a [] shape and an int64 dtype that make comparable refuse identical '
                      'setups.',
     'named_by': ['non-array arguments recorded',
                  'shapes of the array arguments only',
                  'scalar gives an empty shape'],
     'edits': [('    arrays = [a for a in args if hasattr(a, "shape") and hasattr(a, "dtype")]',
                '    arrays = [np.asarray(a) for a in args]')]},
    {'stage': 1,
     'id': 'blind-b9-time-allclose-arguments-swapped',
     'misunderstood': 'The learner passed np.allclose(expected, output), believing the test is '
                      'symmetric; np.allclose(a, b) scales rtol by |b|, and the contract '
                      'compares the output with the expected value (allclose(out, expected)), '
                      'so near the tolerance the verdict flips.',
     'named_by': ['allclose arguments swapped',
                  'rtol scales with the expected value',
                  'np.allclose is not symmetric'],
     'edits': [('        output_ok = bool(np.allclose(np.asarray(out), np.asarray(expected),',
                '        output_ok = bool(np.allclose(np.asarray(expected), np.asarray(out),')]},
    {'stage': 2,
     'id': 'blind-b9-matmul-output-float32-accumulator',
     'misunderstood': "The learner believed a matmul's output is written in the float32 "
                      "accumulator's width, so it counted the output at 4 bytes per element "
                      'whatever the dtype; the contract counts every array (inputs and output) '
                      'at itemsize bytes.',
     'named_by': ['output counted at 4 bytes',
                  "accumulator width is not the output's",
                  'every array at itemsize'],
     'edits': [('"bytes": (m * k + k * n + m * n) * itemsize}',
                '"bytes": (m * k + k * n) * itemsize + m * n * 4}')]},
    {'stage': 2,
     'id': 'blind-b9-roofline-compute-time-at-attainable',
     'misunderstood': 'The learner computed compute_s at the attainable rate (flops / '
                      'attainable_flops), believing the compute-only time is what the roof '
                      'allows; compute_s is the time if only arithmetic limited it, flops / '
                      'peak_flops.',
     'named_by': ['compute_s from the attainable rate',
                  'compute-only time at peak FLOP/s',
                  'compute_s equals predicted_s'],
     'edits': [('    compute_s, memory_s = flops / peak_flops, nbytes / bandwidth',
                '    compute_s, memory_s = flops / attainable, nbytes / bandwidth')]},
    {'stage': 3,
     'id': 'blind-b9-block-loss-every-block-output',
     'misunderstood': "The learner read 'mean of squares of the output of all blocks' as a sum "
                      "over every block's output (a deep-supervision loss), adding each "
                      "block's mean square; the loss is the mean square of the final output, "
                      'after all blocks.',
     'named_by': ["sums every block's mean square",
                  'loss of the final output only',
                  'deep supervision instead of the last block'],
     'edits': [('    for p in params:\n        x = step(p, x)\n    return jnp.mean(x**2)',
                '    total = 0.0\n'
                '    for p in params:\n'
                '        x = step(p, x)\n'
                '        total = total + jnp.mean(x**2)\n'
                '    return total')]},
    {'stage': 4,
     'id': 'blind-b9-decide-welch-pooled-df',
     'misunderstood': "The learner kept Welch's per-group standard error but took the pooled "
                      "t-test's degrees of freedom (n_before + n_after - 2), believing df is "
                      "just the sample count minus two; with unequal spreads Welch's df is the "
                      'Welch-Satterthwaite value, smaller, so the interval was too narrow.',
     'named_by': ["pooled degrees of freedom with Welch's error",
                  'Welch-Satterthwaite df',
                  'interval too narrow for unequal spreads'],
     'edits': [('            df = lb.size + la.size - 2 if vb + va == 0 else max(1, '
                'math.floor(\n'
                '                (vb + va) ** 2 / (vb**2 / (lb.size - 1) + va**2 / (la.size - '
                '1))))',
                '            df = lb.size + la.size - 2')]},
]

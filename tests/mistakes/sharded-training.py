"""sharded-training: what a learner who half-understands each stage writes (the corpus
format and the runner: ``coursekit/commands/mistakes.py``; ``make mistakes``)."""

SHARDINGS = ('    return {"params": NamedSharding(mesh, P()), "batch": NamedSharding(mesh, '
             'P(AXIS))}\n')
STEP_NOISE = ("        key, sub = jax.random.split(state[\"key\"])\n"
              "        x = batch[\"x\"] + noise * jax.random.normal(sub, batch[\"x\"].shape, "
              "batch[\"x\"].dtype)\n")
PER_SHARD = ("        loss_sum, g = jax.value_and_grad(classifier.loss_sum)(p, x, y, m)\n"
             "        total = jax.lax.psum(jnp.sum(m), AXIS)\n"
             "        loss = jax.lax.psum(loss_sum, AXIS) / total\n"
             "        return loss, jax.tree.map(lambda a: a / total, g)\n")
TIMED = ("                start = time.perf_counter()\n"
         "                jax.block_until_ready(step_fn(state, batch))\n"
         "                samples.append(time.perf_counter() - start)\n")
TRACED = ("                    with jax.profiler.TraceAnnotation(region, step=i):\n"
          "                        jax.block_until_ready(step_fn(state, batch))\n")

MISTAKES = [
    # ---- stage 1: mesh and placement ----------------------------------------------------
    {"stage": 1, "id": "mesh-all-devices",
     "misunderstood": "a mesh always takes every device; n_devices is only checked",
     "edits": [("    return jax.make_mesh((n,), (AXIS,), axis_types=(AxisType.Auto,), "
                "devices=devices[:n])\n",
                "    return jax.make_mesh((len(devices),), (AXIS,), axis_types=(AxisType.Auto,),"
                " devices=devices)\n")]},
    {"stage": 1, "id": "mesh-axis-by-habit",
     "misunderstood": "the mesh axis named 'batch' by habit, not the contract's AXIS",
     "edits": [("    return jax.make_mesh((n,), (AXIS,),", '    return jax.make_mesh((n,), ("batch",),')]},
    {"stage": 1, "id": "shardings-batch-replicated",
     "misunderstood": "the batch replicated too, 'to be safe'",
     "edits": [(SHARDINGS, '    return {"params": NamedSharding(mesh, P()), "batch": '
                           'NamedSharding(mesh, P())}\n')]},
    {"stage": 1, "id": "shardings-params-split",
     "misunderstood": "params split across the mesh like the data ('everything is sharded')",
     "edits": [(SHARDINGS, '    return {"params": NamedSharding(mesh, P(AXIS)), "batch": '
                           'NamedSharding(mesh, P(AXIS))}\n')]},
    {"stage": 1, "id": "init-key-not-split",
     "misunderstood": "one key for the params and for training, 'the seed is the seed'",
     "edits": [('        k_params, k_train = jax.random.split(jax.random.key(config["seed"]))\n',
                '        k_params = k_train = jax.random.key(config["seed"])\n')]},
    {"stage": 1, "id": "init-split-swapped",
     "misunderstood": "the two halves of the seed's split taken the other way round",
     "edits": [('        k_params, k_train = jax.random.split(jax.random.key(config["seed"]))\n',
                '        k_train, k_params = jax.random.split(jax.random.key(config["seed"]))\n')]},
    {"stage": 1, "id": "init-device-put",
     "misunderstood": "the state built on the host and device_put, which one process allows",
     "edits": [("    return jax.jit(build, out_shardings=rep)()\n",
                "    return jax.device_put(build(), rep)\n")]},
    {"stage": 1, "id": "place-device-put",
     "misunderstood": "device_put of the whole global batch, not each process's own rows",
     "edits": [("    return {k: jax.make_array_from_callback(np.shape(v), sharding,\n"
                "                                            lambda idx, v=v: np.asarray(v)[idx])\n"
                "            for k, v in batch.items()}\n",
                "    return {k: jax.device_put(np.asarray(v), sharding) for k, v in batch.items()}\n")]},
    {"stage": 1, "id": "describe-whole-array",
     "misunderstood": "each device's piece reported as the whole array",
     "edits": [("            pieces[shard.device.id] = [list(sl.indices(dim)[:2])\n"
                "                                       for sl, dim in zip(shard.index, leaf.shape)]\n",
                "            pieces[shard.device.id] = [[0, dim] for dim in leaf.shape]\n")]},
    {"stage": 1, "id": "describe-inclusive-stop",
     "misunderstood": "pieces as inclusive ranges [start, last]",
     "edits": [("            pieces[shard.device.id] = [list(sl.indices(dim)[:2])\n",
                "            pieces[shard.device.id] = [[sl.indices(dim)[0], sl.indices(dim)[1] - 1]\n")]},
    {"stage": 1, "id": "describe-spec-none",
     "misunderstood": "a sharding without a spec written as the string 'None'",
     "edits": [('            "shape": list(leaf.shape), "spec": "" if spec is None else str(spec),\n',
                '            "shape": list(leaf.shape), "spec": str(spec),\n')]},
    {"stage": 1, "id": "check-mesh-count-only",
     "misunderstood": "the same number of devices taken as the same mesh",
     "edits": [("        if have != wanted:\n", "        if len(have) != len(wanted):\n")]},
    {"stage": 1, "id": "check-mesh-skips-host-values",
     "misunderstood": "numpy leaves skipped: 'jit will move them'",
     "edits": [("        if not isinstance(leaf, jax.Array):\n            raise PlacementError(\n",
                "        if not isinstance(leaf, jax.Array):\n            continue\n"
                "            raise PlacementError(\n")]},
    {"stage": 1, "id": "step-mask-ignored",
     "misunderstood": "the padded rows' mask not passed: padding counted in the loss",
     "edits": [('        loss, grads = jax.value_and_grad(classifier.loss)(state["params"], x, '
                'batch["y"],\n'
                '                                                           batch["mask"])\n',
                '        loss, grads = jax.value_and_grad(classifier.loss)(state["params"], x, '
                'batch["y"])\n')]},
    {"stage": 1, "id": "step-key-not-advanced",
     "misunderstood": "the split's new key dropped: the same noise every step",
     "edits": [('"step": state["step"] + 1, "key": key,', '"step": state["step"] + 1, '
                '"key": state["key"],')]},
    {"stage": 1, "id": "step-noise-from-carried-key",
     "misunderstood": "the noise drawn from the key that is carried on, not its subkey",
     "edits": [(STEP_NOISE, STEP_NOISE.replace("jax.random.normal(sub,",
                                               "jax.random.normal(key,"))]},
    {"stage": 1, "id": "step-donated",
     "misunderstood": "the state donated 'for memory', which deletes the caller's arrays",
     "edits": [("    return jax.jit(step)\n", "    return jax.jit(step, donate_argnums=0)\n")]},
    # ---- stage 2: count-weighted updates ------------------------------------------------
    {"stage": 2, "id": "counts-even-split",
     "misunderstood": "valid rows assumed spread evenly: the total divided by the devices",
     "edits": [("    return np.rint(np.asarray(jax.jit(counted)(mask))).astype(int)\n",
                "    total = int(np.rint(np.sum(np.asarray(mask))))\n"
                "    return np.full(mesh.devices.size, total // mesh.devices.size)\n")]},
    {"stage": 2, "id": "counts-psum",
     "misunderstood": "psum inside the shard, so every device reports the global count",
     "edits": [("    counted = jax.shard_map(lambda m: jnp.sum(m, keepdims=True), mesh=mesh,\n",
                "    counted = jax.shard_map(lambda m: jax.lax.psum(jnp.sum(m, keepdims=True), "
                "AXIS), mesh=mesh,\n")]},
    {"stage": 2, "id": "counts-rows-not-valid",
     "misunderstood": "each shard's row count reported, the mask's zeros counted as rows",
     "edits": [("    counted = jax.shard_map(lambda m: jnp.sum(m, keepdims=True), mesh=mesh,\n",
                "    counted = jax.shard_map(lambda m: jnp.sum(jnp.ones_like(m), keepdims=True), "
                "mesh=mesh,\n")]},
    {"stage": 2, "id": "grads-mean-of-means",
     "misunderstood": "each shard's mean loss, then pmean: the mean of per-shard means",
     "edits": [(PER_SHARD,
                "        loss, g = jax.value_and_grad(classifier.loss)(p, x, y, m)\n"
                "        return jax.lax.pmean(loss, AXIS), jax.tree.map(\n"
                "            lambda a: jax.lax.pmean(a, AXIS), g)\n")]},
    {"stage": 2, "id": "grads-psum-after-grad",
     "misunderstood": "the gradient sums psum'd across shards again, as in the loss",
     "edits": [(PER_SHARD, PER_SHARD.replace(
         "jax.tree.map(lambda a: a / total, g)",
         "jax.tree.map(lambda a: jax.lax.psum(a, AXIS) / total, g)"))]},
    {"stage": 2, "id": "grads-local-count",
     "misunderstood": "each shard divides by its own valid count, not the global one",
     "edits": [(PER_SHARD, PER_SHARD.replace(
         "        return loss, jax.tree.map(lambda a: a / total, g)\n",
         "        return loss, jax.tree.map(lambda a: a / jnp.sum(m), g)\n"))]},
    {"stage": 2, "id": "grads-divide-by-batch",
     "misunderstood": "divided by the global batch size, padded rows included",
     "edits": [(PER_SHARD, PER_SHARD.replace(
         "        total = jax.lax.psum(jnp.sum(m), AXIS)\n",
         "        total = jax.lax.psum(jnp.float32(m.shape[0]), AXIS)\n"))]},
    {"stage": 2, "id": "grads-no-mask",
     "misunderstood": "the loss sum taken over every row, the mask left to the count",
     "edits": [(PER_SHARD, PER_SHARD.replace("(p, x, y, m)", "(p, x, y)"))]},
    {"stage": 2, "id": "grads-check-vma-off",
     "misunderstood": "check_vma turned off to silence its error, so grad stops summing shards",
     "edits": [("                       out_specs=(P(), P()))\n",
                "                       out_specs=(P(), P()), check_vma=False)\n")]},
    {"stage": 2, "id": "grads-mean-of-means-vma-off",
     "misunderstood": "pmean of per-shard means with check_vma off: right only for equal counts",
     "edits": [(PER_SHARD,
                "        loss, g = jax.value_and_grad(classifier.loss)(p, x, y, m)\n"
                "        return jax.lax.pmean(loss, AXIS), jax.tree.map(\n"
                "            lambda a: jax.lax.pmean(a, AXIS), g)\n"),
               ("                       out_specs=(P(), P()))\n",
                "                       out_specs=(P(), P()), check_vma=False)\n")]},
    {"stage": 2, "id": "grads-loss-local",
     "misunderstood": "the loss returned per shard, only the gradient made global",
     "edits": [(PER_SHARD, PER_SHARD.replace(
         "        loss = jax.lax.psum(loss_sum, AXIS) / total\n",
         "        loss = jax.lax.pmean(loss_sum / jnp.maximum(jnp.sum(m), 1.0), AXIS)\n"))]},
    {"stage": 2, "id": "counts-as-floats",
     "misunderstood": "the mask's sums returned as they come, float32 counts",
     "edits": [("    return np.rint(np.asarray(jax.jit(counted)(mask))).astype(int)\n",
                "    return np.asarray(jax.jit(counted)(mask))\n")]},
    # ---- stage 3: recovery --------------------------------------------------------------
    {"stage": 3, "id": "ckpt-relative-path",
     "misunderstood": "the directory passed as given, relative paths included",
     "edits": [("    return ocp.CheckpointManager(Path(directory).resolve(), options=options)\n",
                "    return ocp.CheckpointManager(directory, options=options)\n")]},
    {"stage": 3, "id": "ckpt-keep-default",
     "misunderstood": "max_to_keep left to Orbax's default",
     "edits": [("    options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep,\n",
                "    options = ocp.CheckpointManagerOptions(\n")]},
    {"stage": 3, "id": "save-params-only",
     "misunderstood": "a checkpoint as the model's weights and optimizer, not the whole state",
     "edits": [('    manager.save(int(state["step"]), args=ocp.args.StandardSave(state))\n',
                '    manager.save(int(state["step"]), args=ocp.args.StandardSave(\n'
                '        {"params": state["params"], "opt_state": state["opt_state"], '
                '"step": state["step"]}))\n')]},
    {"stage": 3, "id": "save-step-index",
     "misunderstood": "the checkpoint numbered by the last step's index, one below the count",
     "edits": [('    manager.save(int(state["step"]), args=', '    manager.save(int(state["step"]) - 1, '
                                                        'args=')]},
    {"stage": 3, "id": "restore-no-sharding",
     "misunderstood": "restored by shape and dtype, the shardings left to Orbax",
     "edits": [("    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype,\n"
                "                                                         sharding=a.sharding), like)\n",
                "    target = jax.tree.map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), like)\n")]},
    {"stage": 3, "id": "restore-oldest",
     "misunderstood": "the first listed checkpoint taken as the latest",
     "edits": [("    step = manager.latest_step()\n",
                "    steps = manager.all_steps()\n    step = steps[0] if steps else None\n")]},
    {"stage": 3, "id": "restore-fresh-key",
     "misunderstood": "the restored run given a fresh key: 'randomness need not resume'",
     "edits": [("    return manager.restore(step, args=ocp.args.StandardRestore(target))\n",
                "    state = manager.restore(step, args=ocp.args.StandardRestore(target))\n"
                '    return {**state, "key": like["key"]}\n')]},
    {"stage": 3, "id": "dist-one-timeout",
     "misunderstood": "only the initialization timeout set; heartbeat and shutdown left long",
     "edits": [("                               initialization_timeout=timeout_s,\n"
                "                               heartbeat_timeout_seconds=timeout_s,\n"
                "                               shutdown_timeout_seconds=timeout_s)\n",
                "                               initialization_timeout=timeout_s)\n")]},
    {"stage": 3, "id": "dist-timeouts-written-in",
     "misunderstood": "the timeouts written as the default's number: 'timeout_s is 10 anyway'",
     "edits": [("                               initialization_timeout=timeout_s,\n"
                "                               heartbeat_timeout_seconds=timeout_s,\n"
                "                               shutdown_timeout_seconds=timeout_s)\n",
                "                               initialization_timeout=10,\n"
                "                               heartbeat_timeout_seconds=10,\n"
                "                               shutdown_timeout_seconds=10)\n")]},
    {"stage": 3, "id": "train-no-wait",
     "misunderstood": "save returned, so the checkpoint taken to be on disk",
     "edits": [("        manager.wait_until_finished()\n    finally:\n", "    finally:\n")]},
    {"stage": 3, "id": "train-save-before-step",
     "misunderstood": "the state saved before the step whose number is a multiple",
     "edits": [("            batch = place_batch(batch_at(data, config, int(state[\"data_pos\"])), mesh)\n"
                "            state, loss = step_fn(state, batch)\n"
                "            step = int(state[\"step\"])\n"
                "            if step % config[\"save_every\"] == 0:\n"
                "                save_state(manager, state)\n",
                "            if int(state[\"step\"]) % config[\"save_every\"] == 0:\n"
                "                save_state(manager, state)\n"
                "            batch = place_batch(batch_at(data, config, int(state[\"data_pos\"])), mesh)\n"
                "            state, loss = step_fn(state, batch)\n"
                "            step = int(state[\"step\"])\n")]},
    {"stage": 3, "id": "train-local-data-position",
     "misunderstood": "the data position kept in a loop variable, which a restart sets to 0",
     "edits": [("        while int(state[\"step\"]) < config[\"steps\"]:\n"
                "            batch = place_batch(batch_at(data, config, int(state[\"data_pos\"])), mesh)\n",
                "        pos = 0\n"
                "        while int(state[\"step\"]) < config[\"steps\"]:\n"
                "            batch = place_batch(batch_at(data, config, pos), mesh)\n"
                "            pos += 1\n")]},
    {"stage": 3, "id": "train-on-step-index",
     "misunderstood": "on_step given the loop's index (from 0), not the new step",
     "edits": [("                on_step(step, float(loss))\n", "                on_step(step - 1, float(loss))\n")]},
    {"stage": 3, "id": "train-restart-from-init",
     "misunderstood": "the restored state used for its step only, training restarted from init",
     "edits": [("        state = restore_latest(manager, fresh)\n        if state is None:\n"
                "            state = fresh\n",
                "        state = restore_latest(manager, fresh)\n        if state is None:\n"
                "            state = fresh\n"
                "        else:\n"
                "            state = {**fresh, \"step\": state[\"step\"], \"data_pos\": "
                "state[\"data_pos\"]}\n")]},
    {"stage": 3, "id": "save-without-key",
     "misunderstood": "the key left out of the checkpoint: 'randomness need not be saved'",
     "edits": [('    manager.save(int(state["step"]), args=ocp.args.StandardSave(state))\n',
                '    manager.save(int(state["step"]), args=ocp.args.StandardSave(\n'
                '        {k: v for k, v in state.items() if k != "key"}))\n')]},
    {"stage": 3, "id": "train-never-waits",
     "misunderstood": "the manager neither waited for nor closed: the saves finish on their own",
     "edits": [("        manager.wait_until_finished()\n    finally:\n        manager.close()\n",
                "    finally:\n        pass\n")]},
    {"stage": 3, "id": "train-never-closes",
     "misunderstood": "the saves waited for, the manager left open: the process ends anyway",
     "edits": [("    finally:\n        manager.close()\n", "    finally:\n        pass\n")]},
    # ---- stage 4: trace and timing ------------------------------------------------------
    {"stage": 4, "id": "profile-first-call-wait-after-clock",
     "misunderstood": "the first call's clock stopped when the call returns, its wait after",
     "edits": [("        _, loss = jax.block_until_ready(step_fn(state, batch))\n"
                "        first_call_s = time.perf_counter() - start\n",
                "        out = step_fn(state, batch)\n"
                "        first_call_s = time.perf_counter() - start\n"
                "        _, loss = jax.block_until_ready(out)\n")]},
    {"stage": 4, "id": "profile-samples-wait-after-clock",
     "misunderstood": "each sample's clock stopped at the call's return, the wait after it",
     "edits": [(TIMED, "                start = time.perf_counter()\n"
                       "                out = step_fn(state, batch)\n"
                       "                samples.append(time.perf_counter() - start)\n"
                       "                jax.block_until_ready(out)\n")]},
    {"stage": 4, "id": "profile-loss-absolute",
     "misunderstood": "the loss compared within an absolute 1e-5, not a relative one",
     "edits": [("rtol=1e-5, atol=0))\n", "rtol=0, atol=1e-5))\n")]},
    {"stage": 4, "id": "profile-no-sync",
     "misunderstood": "the timed calls not waited for: dispatch times",
     "edits": [(TIMED, TIMED.replace("jax.block_until_ready(step_fn(state, batch))",
                                     "step_fn(state, batch)"))]},
    {"stage": 4, "id": "profile-first-call-unsynced",
     "misunderstood": "the first call's clock stopped before its result was ready",
     "edits": [("        _, loss = jax.block_until_ready(step_fn(state, batch))\n"
                "        first_call_s = time.perf_counter() - start\n",
                "        _, loss = step_fn(state, batch)\n"
                "        first_call_s = time.perf_counter() - start\n")]},
    {"stage": 4, "id": "profile-state-fed-back",
     "misunderstood": "each timed call fed the previous call's new state, as in training",
     "edits": [(TIMED, "                start = time.perf_counter()\n"
                       "                state, _ = jax.block_until_ready(step_fn(state, batch))\n"
                       "                samples.append(time.perf_counter() - start)\n")]},
    {"stage": 4, "id": "profile-trace-unsynced",
     "misunderstood": "the traced steps not waited for inside their annotation",
     "edits": [(TRACED, TRACED.replace("jax.block_until_ready(step_fn(state, batch))",
                                       "step_fn(state, batch)"))]},
    {"stage": 4, "id": "profile-timed-under-trace",
     "misunderstood": "the timed calls made inside the trace and annotated, one run for both",
     "edits": [("            for _ in range(iters):\n" + TIMED +
                "            with jax.profiler.trace(str(logdir)):\n"
                "                for i in range(trace_steps):\n" + TRACED,
                "            with jax.profiler.trace(str(logdir)):\n"
                "                for i in range(iters):\n"
                "                    with jax.profiler.TraceAnnotation(region, step=i):\n"
                "                        start = time.perf_counter()\n"
                "                        jax.block_until_ready(step_fn(state, batch))\n"
                "                        samples.append(time.perf_counter() - start)\n")]},
    {"stage": 4, "id": "profile-oldest-trace",
     "misunderstood": "the first trace file found reported, not the newest",
     "edits": [('            trace = str(files[-1]) if files else ""\n',
                '            trace = str(files[0]) if files else ""\n')]},
    {"stage": 4, "id": "profile-times-wrong-output",
     "misunderstood": "a wrong loss still timed and traced",
     "edits": [("        if output_ok is not False:\n            for _ in range(warmup):\n",
                "        if True:\n            for _ in range(warmup):\n")]},
    {"stage": 4, "id": "profile-milliseconds",
     "misunderstood": "samples in milliseconds, as the profiler shows them",
     "edits": [(TIMED, TIMED.replace("samples.append(time.perf_counter() - start)",
                                     "samples.append((time.perf_counter() - start) * 1e3)"))]},
    {"stage": 4, "id": "profile-warmup-off-by-one",
     "misunderstood": "the first call counted as a warm-up call",
     "edits": [("            for _ in range(warmup):\n", "            for _ in range(warmup - 1):\n")]},
    {"stage": 4, "id": "profile-loose-loss-check",
     "misunderstood": "the loss compared within 1% 'for floating point'",
     "edits": [("rtol=1e-5, atol=0))\n", "rtol=1e-2, atol=0))\n")]},
    {"stage": 4, "id": "profile-annotation-no-step",
     "misunderstood": "the annotation named but not numbered by step",
     "edits": [(TRACED, TRACED.replace("TraceAnnotation(region, step=i)",
                                       "TraceAnnotation(region)"))]},
    {"stage": 4, "id": "profile-shapes-of-state",
     "misunderstood": "shapes and dtypes of the state's params recorded, not the batch's",
     "edits": [("    arrays = [batch[k] for k in sorted(batch)]\n",
                "    arrays = jax.tree.leaves(state[\"params\"])\n")]},
]

JUSTIFIED: dict[str, str] = {
    "place-device-put": (
        "In one process it is the same array by the same route: every device of the mesh "
        "is this process's, so jax.device_put of the host batch onto the row-split "
        "sharding slices it per device exactly as make_array_from_callback does (same "
        "pieces, same values, no compile either way: measured). It differs only in a "
        "multi-process run, and there, under jax 0.12 and the contract (every process "
        "passes the same global batch), it still gives the same array: device_put first "
        "all-gathers the whole value from every process (multihost_utils.assert_equal, "
        "jax/_src/dispatch.py) to check it is the same, then keeps each process's own "
        "rows. Measured in two jax.distributed processes x 2 CPU devices here: identical "
        "shards, one process_allgather per array for device_put, none for the callback; "
        "it raises only when the other processes' rows differ, which the contract does "
        "not allow. A cost paid only with several processes, invisible to stage 1's one "
        "process; no check of a one-process run can see it without failing correct work."),
    "train-no-wait": (
        "Only the wait before close() is dropped, and close() waits itself: orbax 0.12.8's "
        "CheckpointManager.close() begins with self.wait_until_finished() (checkpoint_"
        "manager.py), and train closes the manager in its finally, before it returns. "
        "Measured: after an async save of a 4000x4000 array the folder holds only "
        "'1.orbax-checkpoint-tmp'; after close() alone it holds the finished '1'. So every "
        "save has reached the disk when train returns, as the contract asks, and between "
        "saves the reference does not wait either (the next save waits for the last): a "
        "kill at any point, or the folder read after train returns, sees the same "
        "checkpoints as the reference's. An equivalent mutant while close() waits."),
}

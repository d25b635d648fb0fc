"""optimisation's checker against three or more realistic bugs per learner-facing function
(with tests/test_optimisation.py's PLANTED), all checked by one checker process, each
planted file in its own learner process (tests/planted_batch.py).

Each bug is what a learner who half-understands writes: a trace of the compiling call, of
two calls, or with the Python tracer on; a breakdown by time overlap across threads or
divided by the phases' total, time in no phase as a remainder; evidence by count, nested
calls counted twice, a region matched by prefix; a sweep that ignores the batch size,
times without sync or inverts the gain; a crossover read off the wrong side, interpolated
linearly or missing the below-at-once case; a prediction through the origin, without
sync, for a hard-coded threshold, with the intercept or slope wrong, or its medians
swapped; records with output_ok written in, the Python tracer on, one learning rate,
fixed call counts, in milliseconds or of the wrong arrays, with the copy or a
warm-up call inside what is timed, a wrong output timed, or the traced call not waited
for inside the trace. Each fails the check aimed at it, by verdict."""

from __future__ import annotations

import pytest
from planted_batch import PlantedBatch

_WARM = ('    jax.block_until_ready(slow_step.train_slow(problem["params"], *args, '
         'problem["lr"]))\n    options = jax.profiler.ProfileOptions()\n'
         '    options.python_tracer_level = 0\n'
         '    with jax.profiler.trace(logdir, profiler_options=options):\n')
_PHASE_LOOP = ("        for child in ev.children:\n            if child.name in phase_us:\n"
               "                phase_us[child.name] += child.dur\n")
_PAIR = ("    fit = {}\n    for b in (small, large):\n"
         "        sweep = gain_sweep(config, [b], rounds=3, seed=seed)\n"
         '        fit[b] = (statistics.median(sweep["slow_s"][0]), '
         'statistics.median(sweep["fast_s"][0]))\n')

PLANTED = {
    # trace_slow ------------------------------------------------------------------------
    "trace_of_the_compiling_call": (1, "learner_trace_is_one_call_in_use", [
        (_WARM, _WARM.split("\n", 1)[1])]),
    "trace_holds_the_warmup_too": (1, "learner_trace_is_one_call_in_use", [
        (_WARM, _WARM.split("\n", 1)[1] + "    " + _WARM.split("\n", 1)[0] + "\n")]),
    "trace_with_the_warmup_rate": (1, "learner_trace_is_one_call_in_use", [
        ('problem["lr"] * 0.9)', 'problem["lr"])')]),
    # issue 53 (blind-b3-trace-file-first-run): the oldest run in the logdir returned
    "trace_file_of_the_first_run": (1, "learner_trace_is_one_call_in_use", [
        ("    return runs[-1]\n", "    return runs[0]\n")]),
    # blind-b9: the phase of the longest single event, not the largest summed share
    "limiting_by_the_longest_single_event": (1, "limiting_operation_named", [
        ('    phase = max(phases, key=lambda p: breakdown["shares"][p])',
         "    longest = {p: 0.0 for p in phases}\n"
         "    for ev in _walk(_forest(trace_file)):\n"
         "        if ev.name == step_region:\n"
         "            for child in ev.children:\n"
         "                if child.name in longest:\n"
         "                    longest[child.name] = max(longest[child.name], child.dur)\n"
         "    phase = max(phases, key=lambda p: longest[p])")]),
    # blind-b8: the host tracer off too, and with it every TraceAnnotation region
    "trace_without_the_host_tracer": (1, "learner_trace_is_one_call_in_use", [
        ("    options.python_tracer_level = 0\n    with jax.profiler.trace(logdir,",
         "    options.python_tracer_level = 0\n    options.host_tracer_level = 0\n"
         "    with jax.profiler.trace(logdir,")]),
    "trace_with_python_tracer": (1, "learner_trace_is_one_call_in_use", [
        ("    options.python_tracer_level = 0\n    with jax.profiler.trace(logdir,",
         "    with jax.profiler.trace(logdir,")]),
    # step_breakdown --------------------------------------------------------------------
    "breakdown_by_overlap_across_threads": (1, "breakdown_matches_checker_parse", [
        (_PHASE_LOOP,
         "        for other in _walk(forest):\n"
         "            if (other.name in phase_us and other.ts >= ev.ts\n"
         "                    and other.end <= ev.end):\n"
         "                phase_us[other.name] += other.dur\n")]),
    # issue 29 item 5: phase events that start inside a step (nested ones and other
    # threads' too) were told only about nesting
    "breakdown_phases_that_start_inside_a_step": (1, "breakdown_matches_checker_parse", [
        (_PHASE_LOOP,
         "        for e in traces.load_events(trace_file):\n"
         "            if (e.get(\"ph\") == \"X\" and \"dur\" in e and e.get(\"name\") in phase_us\n"
         "                    and ev.ts <= float(e[\"ts\"]) < ev.end):\n"
         "                phase_us[e[\"name\"]] += float(e[\"dur\"])\n")]),
    "other_as_a_remainder": (1, "breakdown_matches_checker_parse", [
        ('"other_us": step_us - sum(phase_us.values()),',
         '"other_us": step_us % sum(phase_us.values()),')]),
    "shares_of_the_phases_total": (1, "breakdown_matches_checker_parse", [
        ('"shares": {p: (v / step_us if step_us else 0.0) for p, v in phase_us.items()}}',
         '"shares": {p: v / sum(phase_us.values()) for p, v in phase_us.items()}}')]),
    "shares_of_no_step_are_whole": (1, "breakdown_matches_checker_parse", [
        ("(v / step_us if step_us else 0.0)", "(v / step_us if step_us else 1.0)")]),
    # issue 53 (blind-b3-forest-touching-event-not-popped): a phase that starts exactly
    # where its sibling ends read as an overlap, so it and the rest of its step drop out
    "breakdown_touching_phase_not_a_child": (1, "breakdown_matches_checker_parse", [
        ("            while stack and ev.ts >= stack[-1].end:\n",
         "            while stack and ev.ts > stack[-1].end:\n")]),
    "step_matched_by_prefix": (1, "breakdown_matches_checker_parse", [
        ("    found = [ev for ev in _walk(forest) if ev.name == step_region]\n"
         "    phase_us",
         "    found = [ev for ev in _walk(forest) if ev.name.startswith(step_region)]\n"
         "    phase_us")]),
    # limiting_operation ----------------------------------------------------------------
    "no_evidence_is_none": (1, "limiting_operation_named", [
        ('evidence = {"event": "", "count": 0, "us": 0.0}', "evidence = None")]),
    "evidence_from_children_of_no_phase": (1, "limiting_operation_named", [
        ("            if child.name != phase:\n",
         "            if child.name in phases and child.name != phase:\n")]),
    "evidence_from_children_sorting_after_the_phase": (1, "limiting_operation_named", [
        ("            if child.name != phase:\n", "            if child.name < phase:\n")]),
    "evidence_by_count": (1, "limiting_operation_named", [
        ("name = max(totals, key=lambda n: totals[n][1])",
         "name = max(totals, key=lambda n: totals[n][0])")]),
    "evidence_counts_nested_calls": (1, "limiting_operation_named", [
        ("            for grandchild in child.children:\n",
         "            for grandchild in _walk(child.children):\n")]),
    "evidence_steps_by_prefix": (1, "limiting_operation_named", [
        ("if ev.name == step_region):", "if ev.name.startswith(step_region)):")]),
    "amdahl_of_the_share_itself": (1, "limiting_operation_named", [
        ("else 1.0 / (1.0 - share)", "else 1.0 / share")]),
    # train_fast (more in tests/test_optimisation.py) ------------------------------------
    "fast_logsumexp_unshifted": (2, "fast_matches_contract", [
        ("    lse = jax.nn.logsumexp(logits, axis=-1)\n",
         "    lse = jnp.log(jnp.exp(logits).sum(axis=-1))\n")]),
    # issue 53 (blind-b8-breakdown-steps-roots-only): steps looked for at the top only
    "breakdown_steps_at_the_top_only": (1, "breakdown_matches_checker_parse", [
        ("found = [ev for ev in _walk(forest) if ev.name == step_region]",
         "found = [ev for ev in forest if ev.name == step_region]")]),
    # issue 53 (blind-b8-records-iters-from-samples): iters recorded as the samples kept
    "records_iters_from_the_samples": (4, "output_ok_is_measured", [
        ('"iters": iters, "first_call_s": first_call_s, "samples_s": samples,',
         '"iters": len(samples), "first_call_s": first_call_s, "samples_s": samples,')]),
    # issue 53 (blind-b7-fast-pick-outer-index): NumPy's outer index for one target per
    # row, a (batch, batch) block; and the batch's sum where its mean is asked
    "fast_picks_an_outer_index": (2, "fast_matches_contract", [
        ("    picked = jnp.take_along_axis(logits, targets[:, None], axis=-1)[:, 0]\n",
         "    picked = logits[:, targets]\n")]),
    "fast_sums_the_batch": (2, "fast_matches_contract", [
        ("    return jnp.mean(lse - picked)\n", "    return jnp.sum(lse - picked)\n")]),
    # issue 53 (blind-b3-fast-jit-cache-by-shape-closes-lr): a program per shape whose
    # closure holds the first call's learning rate
    "fast_closure_keeps_first_lr": (2, "fast_matches_contract", [
        ("    return _train(params, tokens, targets, jnp.float32(lr))\n",
         "    cache = train_fast.__dict__.setdefault('by_shape', {})\n"
         "    if tokens.shape not in cache:\n"
         "        cache[tokens.shape] = jax.jit(\n"
         "            lambda p, t, y: _train(p, t, y, jnp.float32(lr)))\n"
         "    return cache[tokens.shape](params, tokens, targets)\n")]),
    # gain_sweep (and its helper _measure_pair) -----------------------------------------
    "sweep_copy_inside_the_fast_sample": (3, "sweep_matches_checker", [
        ("        return train_fast(copies.pop(), *args, next(lrs))\n",
         '        return train_fast(slow_step.fresh_copy(problem["params"]), *args, '
         "next(lrs))\n")]),
    "sweep_slow_rounds_then_fast_rounds": (3, "sweep_matches_checker", [
        ("        for fn, samples in (order if r % 2 == 0 else order[::-1]):\n"
         "            samples.append(_timed(fn))\n    return slow_s, fast_s\n",
         "        slow_s.append(_timed(slow))\n    for r in range(rounds):\n"
         "        fast_s.append(_timed(fast))\n    return slow_s, fast_s\n")]),
    "sweep_ignores_the_batch_size": (3, "sweep_matches_checker", [
        ("_measure_pair(slow_step.make_problem(dict(config, batch=int(b)),\n"
         "                                                              seed), rounds)",
         "_measure_pair(slow_step.make_problem(config, seed), rounds)")]),
    "sweep_slow_rate_fixed": (3, "sweep_matches_checker", [
        ('return slow_step.train_slow(problem["params"], *args, next(lrs))',
         'return slow_step.train_slow(problem["params"], *args, problem["lr"])')]),
    "sweep_rounds_hard_coded": (3, "sweep_matches_checker", [
        ("    for r in range(rounds):\n", "    for r in range(3):\n")]),
    "sweep_timed_without_sync": (3, "sweep_matches_checker", [
        ("            samples.append(_timed(fn))\n",
         "            start = time.perf_counter()\n            fn()\n"
         "            samples.append(time.perf_counter() - start)\n")]),
    "sweep_gain_inverted": (3, "sweep_matches_checker", [
        ('out["gains"].append(statistics.median(slow_s) / statistics.median(fast_s))',
         'out["gains"].append(statistics.median(fast_s) / statistics.median(slow_s))')]),
    # crossover -------------------------------------------------------------------------
    "crossover_from_the_wrong_side": (3, "crossover_interpolation", [
        ("f = (math.log(g0) - math.log(threshold)) / (math.log(g0) - math.log(g1))",
         "f = (math.log(threshold) - math.log(g1)) / (math.log(g0) - math.log(g1))")]),
    "crossover_strictly_above": (3, "crossover_interpolation", [
        ("        if g0 >= threshold > g1:", "        if g0 > threshold > g1:")]),
    "crossover_gain_at_threshold_is_below": (3, "crossover_interpolation", [
        ("        if g0 >= threshold > g1:", "        if g0 > threshold >= g1:")]),
    "crossover_linear_not_log": (3, "crossover_interpolation", [
        ("            f = (math.log(g0) - math.log(threshold)) / (math.log(g0) - math.log(g1))\n"
         "            return float(math.exp(math.log(b0) + f * (math.log(b1) - math.log(b0))))\n",
         "            return float(b0 + (g0 - threshold) / (g0 - g1) * (b1 - b0))\n")]),
    # issue 53 (blind-b3-crossover-first-pair-only): `return None` inside the loop
    "crossover_first_pair_only": (3, "crossover_interpolation", [
        ("(math.log(b1) - math.log(b0))))\n    return None\n",
         "(math.log(b1) - math.log(b0))))\n        return None\n")]),
    "crossover_misses_below_at_once": (3, "crossover_interpolation", [
        ("    if gains[0] < threshold:\n        return float(batch_sizes[0])\n", "")]),
    # predict_crossover -----------------------------------------------------------------
    "prediction_through_the_origin": (3, "prediction_is_the_model_of_your_medians", [
        ("    base_s, base_f = s0 - slope_s * small, f0 - slope_f * small\n",
         "    slope_s, slope_f = s1 / large, f1 / large\n    base_s, base_f = 0.0, 0.0\n")]),
    "prediction_guards_only_division_by_zero": (3, "prediction_is_the_model_of_your_medians", [
        ("    if denominator <= 0:\n", "    if denominator == 0:\n")]),
    "prediction_floor_at_zero": (3, "prediction_is_the_model_of_your_medians", [
        ('return {"crossover": float(max(batch, 1.0)), **medians}',
         'return {"crossover": float(max(batch, 0.0)), **medians}')]),
    "prediction_timed_without_sync": (3, "prediction_is_the_model_of_your_medians", [
        (_PAIR,
         "    fit = {}\n    problem_of = slow_step.make_problem\n    for b in (small, large):\n"
         "        problem = problem_of(dict(config, batch=int(b)), seed)\n"
         '        args = (problem["tokens"], problem["targets"])\n'
         "        times = []\n"
         "        for fn in (slow_step.train_slow, train_fast):\n"
         '            jax.block_until_ready(fn(slow_step.fresh_copy(problem["params"]), '
         '*args, problem["lr"]))\n'
         "            samples = []\n"
         "            for i in range(3):\n"
         '                params = slow_step.fresh_copy(problem["params"])\n'
         "                start = time.perf_counter()\n"
         '                fn(params, *args, problem["lr"] * (1 + 0.01 * i))\n'
         "                samples.append(time.perf_counter() - start)\n"
         "            times.append(statistics.median(samples))\n"
         "        fit[b] = tuple(times)\n")]),
    # the blind corpus's: the model fitted to each size's fastest call
    "prediction_from_minimum_times": (3, "prediction_is_the_model_of_your_medians", [
        ('        fit[b] = (statistics.median(sweep["slow_s"][0]), '
         'statistics.median(sweep["fast_s"][0]))\n',
         '        fit[b] = (min(sweep["slow_s"][0]), min(sweep["fast_s"][0]))\n')]),
    "prediction_from_mean_times": (3, "prediction_is_the_model_of_your_medians", [
        ('        fit[b] = (statistics.median(sweep["slow_s"][0]), '
         'statistics.median(sweep["fast_s"][0]))\n',
         '        fit[b] = tuple(sum(sweep[k][0]) / len(sweep[k][0]) '
         'for k in ("slow_s", "fast_s"))\n')]),
    "prediction_for_a_fixed_threshold": (3, "prediction_is_the_model_of_your_medians", [
        ("    denominator = threshold * slope_f - slope_s\n",
         "    threshold = 4.0\n    denominator = threshold * slope_f - slope_s\n")]),
    # the model's arithmetic off by what a survived mutant changed: exact, so at any load
    "prediction_intercept_added": (3, "prediction_is_the_model_of_your_medians", [
        ("    base_s, base_f = s0 - slope_s * small, f0 - slope_f * small\n",
         "    base_s, base_f = s0 + slope_s * small, f0 + slope_f * small\n")]),
    "prediction_slope_over_the_size_ratio": (3, "prediction_is_the_model_of_your_medians", [
        ("    slope_s, slope_f = (s1 - s0) / (large - small), (f1 - f0) / (large - small)\n",
         "    slope_s, slope_f = (s1 - s0) / (large / small), (f1 - f0) / (large / small)\n")]),
    "prediction_reports_the_medians_swapped": (3, "prediction_is_the_model_of_your_medians", [
        ('    medians = {"median_slow_s": [s0, s1], "median_fast_s": [f0, f1]}\n',
         '    medians = {"median_slow_s": [f0, f1], "median_fast_s": [s0, s1]}\n')]),
    # issue 53 (blind-b3-predict-medians-cached-by-batch): medians kept by batch size
    "prediction_medians_kept_by_batch": (3, "prediction_is_the_model_of_your_medians", [
        ("    fit = {}\n    for b in (small, large):\n",
         "    fit = predict_crossover.__dict__.setdefault('fit', {})\n"
         "    for b in (small, large):\n        if b in fit:\n            continue\n")]),
    # write_run_records -----------------------------------------------------------------
    # issue 53 (blind-b3-records-expected-kept-across-calls): the first call's expected
    # outputs kept for every later call
    "records_expected_kept_across_calls": (4, "records_valid_for_decide", [
        ("    expected = None\n", "    expected = write_run_records.__dict__.get('kept')\n"),
        ("            expected = out\n", "            expected = write_run_records.kept = out\n")]),
    "records_output_ok_written_in": (4, "output_ok_is_measured", [   # and always timed
        ('"output_ok": bool(ok),', '"output_ok": True,'),
        ("            if ok:\n", "            if True:\n")]),
    "records_traced_with_python_tracer": (4, "records_valid_for_decide", [
        ("        options.python_tracer_level = 0\n        params = slow_step.fresh_copy",
         "        params = slow_step.fresh_copy")]),
    "records_rates_cycle": (4, "records_valid_for_decide", [
        ('lrs = iter(problem["lr"] * (1 + 0.01 * i) for i in range(1, 10**6))',
         'lrs = iter(problem["lr"] * (1 + 0.01 * (i % 10)) for i in range(1, 10**6))')]),
    "records_one_learning_rate": (4, "records_valid_for_decide", [
        ('    lrs = iter(problem["lr"] * (1 + 0.01 * i) for i in range(1, 10**6))\n',
         '    lrs = iter(problem["lr"] for i in range(1, 10**6))\n')]),
    "records_fixed_counts": (4, "records_valid_for_decide", [   # and says so: valid
        ("                for _ in range(warmup):\n", "                for _ in range(1):\n"),
        ("                samples = [call()[1] for _ in range(iters)]\n",
         "                samples = [call()[1] for _ in range(5)]\n"),
        ('"warmup": warmup,\n                  "iters": iters,',
         '"warmup": 1,\n                  "iters": 5,')]),
    "records_in_milliseconds": (4, "records_agree_with_checker", [
        ("            return out, time.perf_counter() - start\n",
         "            return out, (time.perf_counter() - start) * 1e3\n")]),
    "records_time_the_parameters": (4, "records_valid_for_decide", [
        ('                  "shapes": [list(a.shape) for a in args],\n'
         '                  "dtypes": [str(a.dtype) for a in args],',
         '                  "shapes": [list(a.shape) for a in problem["params"].values()],\n'
         '                  "dtypes": [str(a.dtype) for a in problem["params"].values()],')]),
    # issue 29: corpus mistakes the stage-4 checker accepted (records-*)
    "records_clock_started_before_the_copy": (4, "records_time_the_calls", [
        ('            params = slow_step.fresh_copy(problem["params"])\n'
         "            jax.block_until_ready(params)\n"
         "            start = time.perf_counter()\n",
         "            start = time.perf_counter()\n"
         '            params = slow_step.fresh_copy(problem["params"])\n'
         "            jax.block_until_ready(params)\n")]),
    "records_first_call_after_a_warm_up": (4, "records_time_the_calls", [
        ("        with count_compiles() as first:\n",
         "        call(lr=problem[\"lr\"])\n        with count_compiles() as first:\n")]),
    # issue 53 (blind-b4-records-output-checked-against-itself): each version's own first
    # call taken as the expected output
    "records_output_checked_against_itself": (4, "output_ok_is_measured", [
        ("        if expected is None:\n            expected = out\n",
         "        expected = out\n")]),
    "records_wrong_output_still_timed": (4, "output_ok_is_measured", [
        ("            if ok:\n", "            if True:\n")]),
    # the contract's labels, "before" and "after", now checked
    # issue 53 (blind-b2-first-call-new-lr): the first timed call given a new learning
    # rate, so output_ok compares different trainings and nothing is timed
    "records_first_call_new_learning_rate": (4, "records_valid_for_decide", [
        ('            out, first_call_s = call(lr=problem["lr"])\n',
         '            out, first_call_s = call()\n')]),
    "records_labelled_by_function": (4, "records_valid_for_decide", [
        ('        timing = {"label": label,', '        timing = {"label": fn.__name__,')]),
    # issue 47: an output check of the losses alone; warm-up compiles left out of the count
    "records_output_check_losses_only": (4, "output_ok_is_measured", [
        ("                 for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(expected)))",
         "                 for a, b in zip(jax.tree.leaves(out[1]), "
         "jax.tree.leaves(expected[1])))")]),
    "records_warmup_compiles_not_counted": (4, "records_valid_for_decide", [
        ("        with count_compiles() as warmed:\n            if ok:\n"
         "                for _ in range(warmup):\n                    call()\n",
         "        if ok:\n            for _ in range(warmup):\n                call()\n"
         "        with count_compiles() as warmed:\n            if ok:\n")]),
    # issue 47's blind corpus: warmup written into the records, the warm-up never made
    "records_warmup_never_made": (4, ["records_valid_for_decide", "records_time_the_calls"], [
        ("                for _ in range(warmup):\n                    call()\n", "")]),
    # issue 29: the traced call waited for only after the trace has closed
    "records_traced_call_not_waited_for": (4, "records_valid_for_decide", [
        ("                jax.block_until_ready(fn(params, *args, next(lrs)))\n",
         "                out_traced = fn(params, *args, next(lrs))\n"
         "        jax.block_until_ready(out_traced)\n")]),
}

# The phrase each hint must hold (the cause its evidence shows), and ones it must not.
HINTS = {"fast_picks_an_outer_index": "logits[:, targets] picks a (batch, batch) block",
         "trace_without_the_host_tracer": "none of the host's",
         "limiting_by_the_longest_single_event": "the phase with the longest single event",
         "records_iters_from_the_samples": "the 0 samples kept",
         "breakdown_steps_at_the_top_only": "at any depth",
         "fast_sums_the_batch": "the batch's sum where its mean is asked",
         "breakdown_phases_that_start_inside_a_step": "exactly the phase-named events on "
         "another pid/tid during a step",
         "breakdown_by_overlap_across_threads": "on another pid/tid during a step",
         "shares_of_the_phases_total": "the phase's part of the phases' total",
         # issue 29: corpus mistakes the checker accepted (tests/mistakes/optimisation.py)
         "trace_with_the_warmup_rate": "no compile event inside any of its steps'",
         "breakdown_touching_phase_not_a_child": "start exactly where the step's previous "
                                                 "child ends",
         "trace_file_of_the_first_run": "the earlier trace's file in the same logdir",
         "fast_closure_keeps_first_lr": "at the first call's lr at this shape",
         "crossover_first_pair_only": "None is what examining the first pair only answers",
         "prediction_medians_kept_by_batch": "exactly the ones an earlier call returned",
         "records_expected_kept_across_calls": "raised in a process that had called it "
                                               "before on another problem",
         "fast_logsumexp_unshifted": "float32's exp overflows",
         "sweep_copy_inside_the_fast_sample": "the copy is inside the timed sample",
         "sweep_slow_rounds_then_fast_rounds": "not measured in rounds that interleave",
         # issue 53 (blind-b4-crossover-strict-at-threshold): was told as the first
         # pair examined only
         "crossover_strictly_above": "starts a crossing only at a gain strictly above",
         "crossover_gain_at_threshold_is_below": "takes a gain equal to the threshold as "
                                                 "already below it",
         "prediction_from_mean_times": "it is their mean",
         "prediction_from_minimum_times": "it is their minimum",
         "records_clock_started_before_the_copy": "the copy is inside the timed sample",
         "records_first_call_after_a_warm_up": "a call was made before the 'first call'",
         "records_output_checked_against_itself": "was compared with train_fast's own "
                                                  "output",
         "records_output_ok_written_in": "it is not measured against train_slow's outputs",
         "records_wrong_output_still_timed": "a wrong output was timed and its samples "
                                             "kept",
         "records_output_check_losses_only": "your output check compares the losses only",
         "records_warmup_compiles_not_counted": "added nothing to the count (made "
                                                "outside it, or not made at all",
         "records_warmup_never_made": ["of the calls the record declares were not made",
                                       "or not made at all"],
         "records_traced_call_not_waited_for": "the traced call was not finished inside "
                                               "the trace",
         "records_first_call_new_learning_rate": "on the problem's own params, tokens, "
                                                 "targets and learning rate"}
WRONG_HINTS = {"shares_of_the_phases_total": "direct child",
               "crossover_strictly_above": "examining the first pair only",
               "records_warmup_compiles_not_counted": "a rate met before"}
BATCH = PlantedBatch("optimisation", PLANTED, hints=HINTS, wrong_hints=WRONG_HINTS)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return BATCH.run(tmp_path_factory.mktemp("planted"))


@pytest.mark.parametrize("bug", BATCH.names)
def test_planted(bug, planted):
    BATCH.assert_fails_only(bug, planted)

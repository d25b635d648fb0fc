"""The cases the reading of a release (docs/checkers/reference.md, "What the readings of the release
found") found in performance-audit's and optimisation's released files, each planted back
into a copy of the release as it shipped: the checkers' own references that computed a
stage's answer, the learner-process code that did, and the hints that named the fix.
tests/test_release_scan.py runs each one and expects the scan to find it. (The /sys cache
reading the stage-2 check held inline is not here: it shares too few token runs with
``cache_sizes`` for the scan to tell it from other code; the reading of the release found
it, and docs/checkers/reference.md records it.)

Each plant is ``(plant(release) -> files, rule, words)``: the scan must report a finding of
``rule`` whose sentence holds ``words``."""

from __future__ import annotations

from pathlib import Path

AUDIT = Path("projects/performance-audit/tests")
OPTIM = Path("projects/optimisation/tests")

# -- code: the checkers' references, as they shipped -------------------------------------

# audit_stage2_evidence.checker_trace: the checker's own write_trace
TRACE_WRITER = '''def checker_trace_writer(step, args, logdir, region):
    jax.block_until_ready(step(*args))
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with jax.profiler.TraceAnnotation(region, step=i):
                jax.block_until_ready(step(*args))
    return forest.newest_trace(logdir)
'''
# audit_stage2_evidence's roofline_bound_and_memory_level: the checker's arithmetic
ROOFLINE = '''def roof(flops, nbytes, peak, bw, working_set, caches):
    level = "DRAM"
    for name, size in sorted(caches.items(), key=lambda kv: kv[1]):
        if working_set <= size:
            level = name
            break
    ridge = peak / bw
    intensity = flops / nbytes
    attainable = min(peak, intensity * bw)
    compute_s, memory_s = flops / peak, nbytes / bw
    return {"memory_level": level, "ridge": ridge, "intensity": intensity,
            "bound": "memory" if intensity < ridge else "compute",
            "attainable_flops": attainable, "lower_s": max(compute_s, memory_s),
            "upper_s": compute_s + memory_s}
'''
# audit_stage3_remat.residual_hint: saved_residual_bytes' count, in a hint
RESIDUAL_HINT = '''def residual_hint(fn, args, yours):
    _, pullback = jax.vjp(fn, *args)
    arguments = {id(leaf) for leaf in jax.tree.leaves(args)}
    leaves = jax.tree.leaves(pullback)
    kept = [leaf for leaf in leaves if id(leaf) not in arguments]
    want = sum(leaf.size * leaf.dtype.itemsize for leaf in kept)
    counts = [(sum(leaf.size * leaf.dtype.itemsize for leaf in leaves), "all"),
              (sum(leaf.size for leaf in kept), "elements"),
              (sum(leaf.size * 4 for leaf in kept), "four bytes")]
    for count, hint in counts:
        if count != want and yours == count:
            return f"{hint} ({count} bytes against {want})"
    return f"yours is {yours - want:+.0f} bytes off"
'''
# audit_stage3_remat.temp_of: compiler_temp_bytes' reading
TEMP_OF = '''def temp_of(fn, *args):
    return jax.jit(fn).lower(*args).compile().memory_analysis().temp_size_in_bytes
'''
# coursekit/workloads/remote_course.compiled_cost: cost_from_compiler, on the chip
COMPILED_COST = '''def compiled_cost(fn, *args):
    import jax
    target = getattr(fn, "fn", fn)
    cost = jax.jit(target).lower(*args).compile().cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    return {k: float(cost[k]) for k in ("flops", "bytes accessed", "transcendentals")
            if k in (cost or {})}
'''
# audit_stage4_decision's amdahl_small_share: predict_step_speedup's law
AMDAHL = '''def expected_speedup(share, speedup):
    return 1 / ((1 - share) + share / speedup)
'''
# optim_stage1_breakdown.checker_trace: trace_slow
SLOW_TRACE = '''def slow_trace(config, seed, logdir, rate):
    problem = slow_step.make_problem(config, seed)
    args = (problem["params"], problem["tokens"], problem["targets"])
    jax.block_until_ready(slow_step.train_slow(*args, problem["lr"]))
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    with jax.profiler.trace(str(logdir), profiler_options=options):
        jax.block_until_ready(slow_step.train_slow(*args, problem["lr"] * rate))
    return forest.newest_trace(logdir)
'''
# optim_stage1_breakdown's limiting_operation_named: the limiting phase, its evidence and
# its ceiling
LIMITING = '''def limiting(want):
    phase = max(PHASES, key=lambda p: want["shares"][p])
    share = want["shares"][phase]
    ceiling = math.inf if share >= 1 else 1 / (1 - share)
    below = want["below"][phase]
    name = max(below, key=lambda n: below[n][1]) if below else ""
    count, us = below.get(name, [0, 0.0])
    return {"phase": phase, "share": share, "amdahl_ceiling": ceiling,
            "evidence": {"event": name, "count": count, "us": us}}
'''
# optim_stage3_crossover.model_lines: predict_crossover's model
MODEL_LINES = '''def model_lines(got, small, large):
    lines = {}
    for version in ("slow", "fast"):
        t0, t1 = got[f"median_{version}_s"]
        per_example = (t1 - t0) / (large - small)
        lines[version] = (t0 - per_example * small, per_example)
    return lines
'''

# -- hints and prose that named the fix or showed the course's interval ------------------

# (released file, hint as it shipped): each one a METHODS phrase of tests/release_scan.py
HINTS = {
    "python tracer's option": (OPTIM / "optim_stage1_breakdown.py",
                               "jax.profiler.ProfileOptions() with python_tracer_level = 0, "
                               "passed as profiler_options"),
    "the lr as a traced argument": (OPTIM / "optim_stage2_speedup.py",
                                    "a value that changes every call (the lr) must be a "
                                    "traced argument, not a static one; shapes stay fixed"),
    "stage 1's fixes listed": (OPTIM / "optim_stage2_speedup.py",
                               "remove the limiting operations stage 1 found (one compiled "
                               "call for the whole loop, nothing recompiled per call, no host "
                               "read per step)"),
    "the sweep's sync": (OPTIM / "optim_stage3_crossover.py",
                         "synchronise every call inside its timed boundary "
                         "(jax.block_until_ready on the result), compile apart, new lr per "
                         "call"),
    "the model's lines": (OPTIM / "optim_stage3_crossover.py",
                          "per version a straight line through (small, median) and (large, "
                          "median); the batch where slow / fast equals the threshold"),
    "crossover's search": (OPTIM / "optim_stage3_crossover.py",
                           "first pair with g0 >= threshold > g1, linear in log(batch) vs "
                           "log(gain)"),
    "the traced call's wait": (OPTIM / "optim_stage4_records.py",
                               "wait for the traced call (jax.block_until_ready) inside its "
                               "region annotation, before the trace closes"),
    "the matmul's timing": (AUDIT / "audit_stage2_evidence.py",
                            "sync inside each timed call (jax.block_until_ready(f(a))): a "
                            "call that is not waited for times its dispatch only"),
    "the residuals' count": (AUDIT / "audit_stage3_remat.py",
                             "they are kept anyway, so they are no residuals: skip the leaves "
                             "that are the arguments themselves"),
    "the plan's reading": (AUDIT / "audit_stage3_remat.py",
                           "compiled.memory_analysis() of the jitted loss_and_grads"),
    "the level's bandwidth": (AUDIT / "audit_stage2_evidence.py",
                              "bandwidth[memory_level] when a dict is given"),
    "Amdahl's rule": (AUDIT / "audit_stage4_decision.py",
                      "only the share's part of the step gets faster; the rest keeps its "
                      "time (speedup = time before / time after)"),
}


def _append(release: Path, rel: Path, text: str) -> list[Path]:
    target = release / rel
    target.write_text(target.read_text() + "\n\n" + text + "\n")
    return [target]


def _code(rel: Path, text: str):
    return lambda release: _append(release, rel, text)


def _hint(rel: Path, text: str):
    return lambda release: _append(release, rel, f"def _planted(ok):\n    fail_unless(ok, "
                                   f"'planted', hint={text!r})\n")


def _decide_interval(release: Path) -> list[Path]:
    return _append(release, AUDIT / "audit_stage4_decision.py",
                   "def _planted(impl, ctx, before, after, own):\n    expect_decision(impl, "
                   "ctx, before, after, 'reject', 'noise', expected=f\"reject: the 95% "
                   "interval [{own[0]:.3f}, {own[1]:.3f}] holds 1\")\n")


def _decide_rounds_named(release: Path) -> list[Path]:
    target = release / AUDIT / "audit_decision_hints.py"
    text = target.read_text()
    old = "own decision on the same records)"
    assert old in text
    target.write_text(text.replace(old, "``decide_rounds`` on the same records)"))
    return [target]


PLANTS = {
    "performance-audit 2: the checker's trace writer": (
        _code(AUDIT / "audit_stage2_evidence.py", TRACE_WRITER), "code", "write_trace"),
    "performance-audit 2: the checker's roofline": (
        _code(AUDIT / "audit_stage2_evidence.py", ROOFLINE), "code", "roofline"),
    "performance-audit 2: the compiled cost on the chip": (
        _code(Path("coursekit/workloads/remote_course.py"), COMPILED_COST), "code",
        "compiled_cost"),
    "performance-audit 3: the residual bytes in a hint": (
        _code(AUDIT / "audit_stage3_remat.py", RESIDUAL_HINT), "code", "residual"),
    "performance-audit 3: the compiler's temp bytes": (
        _code(AUDIT / "audit_stage3_remat.py", TEMP_OF), "code", "temp_bytes"),
    "performance-audit 4: Amdahl's law in the checker": (
        _code(AUDIT / "audit_stage4_decision.py", AMDAHL), "code", "step_speedup"),
    "performance-audit 4: the course's interval in expected": (
        _decide_interval, "bracket", "interval"),
    "performance-audit 4: decide_rounds named": (_decide_rounds_named, "names",
                                                 "decide_rounds"),
    "optimisation 1: the checker's trace of train_slow": (
        _code(OPTIM / "optim_stage1_breakdown.py", SLOW_TRACE), "code", "trace"),
    "optimisation 1: the limiting phase and its ceiling": (
        _code(OPTIM / "optim_stage1_breakdown.py", LIMITING), "code", "limiting"),
    "optimisation 3: the crossover model's lines": (
        _code(OPTIM / "optim_stage3_crossover.py", MODEL_LINES), "code", "model_lines"),
    **{f"a hint naming the fix: {name}": (_hint(rel, text), "method", "method in words")
       for name, (rel, text) in HINTS.items()},
}

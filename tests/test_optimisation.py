"""optimisation's checker tells right from wrong: the reference passes every stage under
load (the sandboxed grading), the starter fails every stage with its stage hint, and each planted bug
(a cached result, a fix timed without sync, a bfloat16 shortcut, a fix that still
recompiles, a fix that changes the data, a share from the wrong events) fails the check
aimed at it."""

from __future__ import annotations

import pytest
from helpers import checks_per_stage, reference_run, run_checker, starter
from planted_batch import PlantedBatch

PROJECT = "optimisation"
CHECKS_PER_STAGE = checks_per_stage(PROJECT)  # from the checker's registry
TOTAL = sum(CHECKS_PER_STAGE.values())


@pytest.mark.slow
def test_reference_passes_every_stage_under_load():
    # the session's sandboxed grading of the solution, two grader workers on one core
    # (helpers.reference_run; notebook 07's check cells read it)
    result = reference_run(PROJECT)
    failed = {k: v for k, v in result["status"].items() if v != "pass"}
    assert result["returncode"] == 0 and not failed, (failed, result["stdout"])
    assert len(result["status"]) == TOTAL
    assert result["stdout"].strip().splitlines()[-1] == f"{TOTAL} passed, 0 failed"


def test_starter_fails_each_stage_with_its_hint(tmp_path):
    result = run_checker(PROJECT, starter(PROJECT), "all", tmp=tmp_path)
    assert result["returncode"] == 1
    for r in result["json"]["results"]:
        assert r["status"] == "not-implemented", r
        assert f"stage {r['stage']}" in r["message"], r
    assert "Traceback" not in result["stdout"] + result["stderr"]
    assert result["stdout"].strip().splitlines()[-1] == f"0 passed, {TOTAL} failed"


PLANTED = {
    "cached_result": (2, "fast_matches_contract", [
        ("    return _train(params, tokens, targets, jnp.float32(lr))\n",
         "    cache = train_fast.__dict__.setdefault('cache', {})\n"
         "    key = (tuple(tokens.shape), tuple(params['embed'].shape))\n"
         "    if key not in cache:\n"
         "        cache[key] = _train(params, tokens, targets, jnp.float32(lr))\n"
         "    return cache[key]\n")]),
    "bfloat16_shortcut": (2, "fast_matches_contract", [
        ('    h = jnp.tanh(x @ params["w1"])\n    logits = h @ params["w2"]\n    lse',
         '    h = jnp.tanh(x.astype(jnp.bfloat16) @ params["w1"].astype(jnp.bfloat16))\n'
         '    logits = (h @ params["w2"].astype(jnp.bfloat16)).astype(jnp.float32)\n'
         '    lse')]),
    "changes_the_data": (2, "fast_matches_contract", [
        ("    return lax.scan(step, params, (tokens, targets))",
         "    return lax.scan(step, params, (tokens[::-1], targets[::-1]))")]),
    "still_recompiles": (2, "no_recompile_fixed_shape", [
        ("@functools.partial(jax.jit, donate_argnums=0)",
         "@functools.partial(jax.jit, donate_argnums=0, static_argnums=3)"),
        ("jnp.float32(lr))\n    ### END", "float(lr))\n    ### END")]),
    "share_from_wrong_events": (1, "breakdown_matches_checker_parse", [
        ("        for child in ev.children:\n            if child.name in phase_us:",
         "        for child in _walk(ev.children):\n            if child.name in phase_us:")]),
    # issue 53: state carried across calls; more donated than the contract allows
    "aot_keyed_on_steps": (2, "fast_matches_contract", [
        ("    return _train(params, tokens, targets, jnp.float32(lr))\n",
         "    compiled = train_fast.__dict__.setdefault('compiled', {})\n"
         "    if tokens.shape[0] not in compiled:\n"
         "        compiled[tokens.shape[0]] = _train.lower(\n"
         "            params, tokens, targets, jnp.float32(lr)).compile()\n"
         "    return compiled[tokens.shape[0]](params, tokens, targets, jnp.float32(lr))\n")]),
    "donates_tokens_and_targets": (2, "fast_matches_contract", [
        ("@functools.partial(jax.jit, donate_argnums=0)",
         "@functools.partial(jax.jit, donate_argnums=(0, 1, 2))")]),
    "after_timed_without_sync": (4, "records_agree_with_checker", [
        ("            out = jax.block_until_ready(fn(params, *args, next(lrs) if lr is None "
         "else lr))",
         "            out = fn(params, *args, next(lrs) if lr is None else lr)")]),
}


BATCH = PlantedBatch(PROJECT, PLANTED)  # one checker process, a learner process each


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    return BATCH.run(tmp_path_factory.mktemp("planted"))


@pytest.mark.parametrize("bug", BATCH.names)
def test_planted_bug_fails_the_right_check(bug, planted):
    BATCH.assert_fails_only(bug, planted)


def test_crossover_is_checked_by_its_definition_alone():
    """Stage 3 checks a crossover by what defines it (the sign of slow - threshold * fast
    under the model), not by a formula a learner could read in the released checker. It
    accepts the closed form on 20,000 random medians and thresholds, and refuses that
    answer moved by 1e-6 or 1, None in its place, and a number where the lines never
    meet."""
    import random

    from coursekit.instructor.optimisation import crossover_holds, model_lines

    def closed_form(lines, threshold):
        (base_s, per_s), (base_f, per_f) = lines["slow"], lines["fast"]
        if threshold * per_f - per_s <= 0:
            return None
        return max((base_s - threshold * base_f) / (threshold * per_f - per_s), 1.0)

    rng = random.Random(1)
    for _ in range(20_000):
        small, large = rng.choice([(3, 11), (27, 1655), (7, 513)])
        s0, f0 = rng.uniform(1e-3, 0.1), rng.uniform(1e-4, 0.05)
        got = {"median_slow_s": [s0, s0 + rng.uniform(0, 0.5)],
               "median_fast_s": [f0, f0 + rng.uniform(0, 0.3)]}
        threshold = rng.choice([4.0, 4000.0, 0.1, rng.uniform(1, 20)])
        lines = model_lines(got, small, large)
        want = closed_form(lines, threshold)
        assert crossover_holds(want, lines, threshold)
        wrong = [5.0] if want is None else [None, want + 1] + (
            [want * (1 + 1e-6), want * (1 - 1e-6)] if want > 1.0001 else [])
        for answer in wrong:
            assert not crossover_holds(answer, lines, threshold), (answer, want)

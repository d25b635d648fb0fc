"""What optimisation's checker runs in the learner process (``coursekit.workloads.
inspectors``): the learner's ``write_run_records`` with a ``train_fast`` that is wrong,
for one call, so the record's ``output_ok`` can be seen to be computed, not written in;
the learner's ``gain_sweep`` with both versions watched, so the learning rate of every
call can be seen; and blocks of the learner's ``train_fast`` for the checker to time.

A block is two requests: ``block_prepare`` builds the problem and one fresh parameter
copy per call (untimed), then ``fast_block`` makes the calls, each result waited for, and
answers with their losses. The checker times ``fast_block`` on its own clock, from the
request it sends to the answer it reads (``LearnerProcess.last_wall_s``); the times this
process reports for the calls are self-reported and only cross-checked against that
(they cannot add up to more than it). The learning rates arrive with the request, drawn
by the checker at random, so no call can be made before it is asked for."""

from __future__ import annotations

import time

import jax
import numpy as np

# Problems by (size, seed), built in this process once (a sweep alternates sizes), and
# the copies of the next block.
_PROBLEMS: dict = {}
_NEXT_BLOCK: dict = {}
_MAX_PROBLEMS = 8


def records_with_a_wrong_fast(write_run_records, config: dict, seed: int, outdir: str,
                              warmup: int, iters: int, wrong: str = "losses") -> dict:
    """``write_run_records(config, seed, outdir, warmup=, iters=)`` while the module's
    ``train_fast`` returns its ``wrong`` output ("losses" or "params", the other one
    right) 1% off (100x ``slow_step.RTOL``); restored after. Returns what it returned
    (the record paths). Where an output check let both through, the checker asks what it
    compared with: "losses-100x" (losses 100 times theirs: no tolerance near RTOL lets it
    through, a comparison of the output with itself does) and "losses-nan" (NaN losses:
    unequal even to themselves, so a comparison with itself catches them, an output_ok
    written in does not)."""
    module = write_run_records.__globals__
    real = module.get("train_fast")
    if real is None:
        raise NameError("your module defines no train_fast (stage 2)")

    def off_by_one_percent(params, tokens, targets, lr):
        new_params, losses = real(params, tokens, targets, lr)
        if wrong == "params":
            return jax.tree.map(lambda v: v * 1.01, new_params), losses
        factor = {"losses": 1.01, "losses-100x": 100.0, "losses-nan": float("nan")}[wrong]
        return new_params, jax.tree.map(lambda v: v * factor, losses)

    module["train_fast"] = off_by_one_percent
    try:
        return write_run_records(config, seed, outdir, warmup=warmup, iters=iters)
    finally:
        module["train_fast"] = real


def records_with_a_synced_fast(write_run_records, config: dict, seed: int, outdir: str,
                               warmup: int, iters: int) -> dict:
    """``write_run_records(config, seed, outdir, warmup=, iters=)`` while the module's
    ``train_fast`` waits for its own result before it returns; restored after. The
    learner's own records under another condition: the after record's region then holds
    a finished call's operations however the learner's code waits, the count the
    checker sets the learner's own after record against. Returns what it returned."""
    module = write_run_records.__globals__
    real = module.get("train_fast")
    if real is None:
        raise NameError("your module defines no train_fast (stage 2)")

    def waited_for(params, tokens, targets, lr):
        return jax.block_until_ready(real(params, tokens, targets, lr))

    module["train_fast"] = waited_for
    try:
        return write_run_records(config, seed, outdir, warmup=warmup, iters=iters)
    finally:
        module["train_fast"] = real


def gain_sweep_watched(gain_sweep, config: dict, sizes: list, rounds: int,
                       seed: int) -> dict:
    """``gain_sweep(config, sizes, rounds, seed)`` while every call of
    ``slow_step.train_slow`` and of the module's ``train_fast`` is recorded as
    (version, batch, lr); restored after. Returns {"result": what it returned,
    "calls": the records in call order}."""
    from coursekit.workloads import slow_step
    module = gain_sweep.__globals__
    real = {"slow": slow_step.train_slow, "fast": module.get("train_fast")}
    if real["fast"] is None:
        raise NameError("your module defines no train_fast (stage 2)")
    calls: list = []

    def watched(version):
        def call(params, tokens, targets, lr):
            calls.append([version, int(tokens.shape[1]), float(lr)])
            return real[version](params, tokens, targets, lr)
        return call
    patched = {"slow": watched("slow"), "fast": watched("fast")}
    names = [name for name, value in module.items() if value is real["slow"]]
    slow_step.train_slow = patched["slow"]
    for name in names:  # a learner who imported train_slow by name
        module[name] = patched["slow"]
    module["train_fast"] = patched["fast"]
    try:
        result = gain_sweep(config, sizes, rounds, seed)
    finally:
        slow_step.train_slow = real["slow"]
        for name in names:
            module[name] = real["slow"]
        module["train_fast"] = real["fast"]
    return {"result": result, "calls": calls}


def _problem(config: dict, seed: int) -> dict:
    from coursekit.workloads import slow_step
    key = (tuple(sorted((str(k), int(v)) for k, v in config.items())), int(seed))
    problem = _PROBLEMS.get(key)
    if problem is None:
        if len(_PROBLEMS) >= _MAX_PROBLEMS:
            _PROBLEMS.clear()
        problem = _PROBLEMS[key] = slow_step.make_problem(config, seed)
    return problem


def slow_block(config: dict, seed: int, lrs: list) -> dict:
    """The course's ``train_slow`` once per rate in ``lrs`` on ``make_problem(config,
    seed)``, each result waited for, here: on an accelerator the checker times the slow
    version where the chip is (its own process stays on the CPU). Returns {"losses": [...],
    "samples_s": [...]} (self-reported; the checker times the whole request itself)."""
    from coursekit.workloads import slow_step
    problem = _problem(config, seed)
    args = (problem["params"], problem["tokens"], problem["targets"])
    losses, samples = [], []
    for lr in lrs:
        start = time.perf_counter()
        out = jax.block_until_ready(slow_step.train_slow(*args, float(lr)))
        samples.append(time.perf_counter() - start)
        losses.append(np.asarray(out[1]))
    return {"losses": losses, "samples_s": samples}


def slow_outputs(params: dict, tokens, targets, lr: float) -> dict:
    """The course's ``train_slow(params, tokens, targets, lr)`` computed here, where the
    learner's code computes (on an accelerator the chip, under this process's float32
    matmul precision, as the learner's calls), as numpy: {"params": {...}, "losses": ...}.
    The checker sets it against its own ``train_slow`` on the CPU: the device's own
    rounding on that problem (self-reported)."""
    import jax.numpy as jnp

    from coursekit.workloads import slow_step
    new, losses = slow_step.train_slow({k: jnp.asarray(v) for k, v in params.items()},
                                       jnp.asarray(tokens), jnp.asarray(targets), float(lr))
    return {"params": {k: np.asarray(v) for k, v in new.items()},
            "losses": np.asarray(losses)}


def block_prepare(config: dict, seed: int, calls: int) -> int:
    """``slow_step.make_problem(config, seed)`` (kept for later blocks of that size) and
    ``calls`` fresh copies of its parameters, ready, for the next ``fast_block``. Returns
    ``calls``."""
    from coursekit.workloads import slow_step
    problem = _problem(config, seed)
    copies = [slow_step.fresh_copy(problem["params"]) for _ in range(int(calls))]
    jax.block_until_ready(copies)
    _NEXT_BLOCK["block"] = (problem, copies)
    return int(calls)


def fast_block(train_fast, lrs: list) -> dict:
    """``train_fast(copy, tokens, targets, lr)`` once per rate in ``lrs`` on the copies
    ``block_prepare`` made, each result waited for. Returns {"losses": [each call's
    losses], "samples_s": [this process's own time of each call], "compiles": compile
    events during the calls} (the times and the count are self-reported)."""
    from coursekit.measure.timing import count_compiles
    problem, copies = _NEXT_BLOCK.pop("block")
    if len(copies) != len(lrs):
        raise ValueError(f"{len(lrs)} rates for {len(copies)} prepared copies")
    args = (problem["tokens"], problem["targets"])
    losses, samples = [], []
    with count_compiles() as compiles:
        for params, lr in zip(copies, lrs):
            start = time.perf_counter()
            out = jax.block_until_ready(train_fast(params, *args, float(lr)))
            samples.append(time.perf_counter() - start)
            losses.append(np.asarray(out[1]))
    return {"losses": losses, "samples_s": samples, "compiles": int(compiles[0])}


def donation_watched(train_fast, config: dict, seed: int) -> dict:
    """One ``train_fast`` call on ``slow_step.make_problem(config, seed)`` (a shape of its
    own, so the call compiles here) with the caller's arrays as a caller in use holds
    them: a fresh parameter copy and tokens and targets of its own, on the device.
    Returns {"deleted": the names among "params", "tokens", "targets" whose array the
    call deleted, "unusable": the buffers JAX warned it was asked to donate and could not
    use (their "dtype[shape]" texts)} (self-reported, and only ever against the learner)."""
    import re
    import warnings

    from coursekit.workloads import slow_step
    problem = slow_step.make_problem(config, seed)
    held = {"params": slow_step.fresh_copy(problem["params"]),
            "tokens": jax.numpy.array(problem["tokens"], copy=True),
            "targets": jax.numpy.array(problem["targets"], copy=True)}
    jax.block_until_ready(held)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        jax.block_until_ready(train_fast(held["params"], held["tokens"], held["targets"],
                                         float(problem["lr"])))
    deleted = [name for name, value in held.items()
               if any(leaf.is_deleted() for leaf in jax.tree.leaves(value))]
    unusable = [text for w in seen
                for m in [re.search(r"donated buffers were not usable: (.*)", str(w.message))]
                if m for text in re.findall(r"\w+\[[\d,]*\]", m.group(1))]
    return {"deleted": deleted, "unusable": unusable}


INSPECTORS = {
    "optimisation/donation_watched": donation_watched,
    "optimisation/records_with_a_wrong_fast": records_with_a_wrong_fast,
    "optimisation/records_with_a_synced_fast": records_with_a_synced_fast,
    "optimisation/gain_sweep_watched": gain_sweep_watched,
    "optimisation/block_prepare": block_prepare,
    "optimisation/fast_block": fast_block,
    "optimisation/slow_block": slow_block,
    "optimisation/slow_outputs": slow_outputs,
}

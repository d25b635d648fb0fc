"""What optimisation's checker runs in the learner process (``coursekit.workloads.
inspectors``): the learner's ``write_run_records`` with a ``train_fast`` that is wrong,
for one call, so the record's ``output_ok`` can be seen to be computed, not written in;
and the learner's ``gain_sweep`` with both versions watched, so the learning rate of
every call can be seen."""

from __future__ import annotations

import jax


def records_with_a_wrong_fast(write_run_records, config: dict, seed: int, outdir: str,
                              warmup: int, iters: int) -> dict:
    """``write_run_records(config, seed, outdir, warmup=, iters=)`` while the module's
    ``train_fast`` returns its losses 1% off (100x ``slow_step.RTOL``); restored after.
    Returns what it returned (the record paths)."""
    module = write_run_records.__globals__
    real = module.get("train_fast")
    if real is None:
        raise NameError("your module defines no train_fast (stage 2)")

    def off_by_one_percent(params, tokens, targets, lr):
        new_params, losses = real(params, tokens, targets, lr)
        return new_params, jax.tree.map(lambda v: v * 1.01, losses)

    module["train_fast"] = off_by_one_percent
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


INSPECTORS = {
    "optimisation/records_with_a_wrong_fast": records_with_a_wrong_fast,
    "optimisation/gain_sweep_watched": gain_sweep_watched,
}

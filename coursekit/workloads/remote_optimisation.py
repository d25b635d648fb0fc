"""What optimisation's checker runs in the learner process (``coursekit.workloads.
inspectors``): the learner's ``write_run_records`` with a ``train_fast`` that is wrong,
for one call, so the record's ``output_ok`` can be seen to be computed, not written in."""

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


INSPECTORS = {
    "optimisation/records_with_a_wrong_fast": records_with_a_wrong_fast,
}

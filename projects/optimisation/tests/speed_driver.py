"""One fresh process that times the slow reference and the learner's ``train_fast``
interleaved, for the optimisation checker.

    python speed_driver.py SPEC.json      (SPEC: impl, configs, seed, rounds, slow_iters,
                                           fast_iters, out; the block marker tag in the
                                           OPT_BLOCK_TAG environment variable)

Each config (a size) is measured in turn; block names carry its index (``slow@0``).

The reference (``coursekit.workloads.slow_step``) is bound before the learner's file is
imported. Before each timed block this process writes ``B <tag> <round> <name> <t>`` to
its stdout and ``E ...`` after it, ``t`` read from the system's monotonic clock
(``time.perf_counter``, the same clock in every process). The checker bounds every stamp
by the time it received the line on the same clock: a stamp from its future, or out of
order, is refused. (Stamping on receipt alone fails under load: the checker's reader can
get the CPU after both lines of a millisecond block have arrived.) Every call gets its own
learning rate (the contract: a new one each call), the same for both versions, and a
fresh copy of the parameters made before the block starts; the losses of every call
come back so the checker can compare each timed fast call with the slow one. Compile
events counted here are reported as a fact about this process, cross-checked by the
checker against the times it saw.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

import jax  # noqa: E402
import numpy as np  # noqa: E402

from coursekit.checking.learner import (  # noqa: E402
    LearnerCodeError,
    explain_exception,
    get_function,
    load_impl,
)
from coursekit.measure.timing import count_compiles  # noqa: E402
from coursekit.workloads import slow_step  # noqa: E402

TRAIN_SLOW = slow_step.train_slow
FRESH_COPY = slow_step.fresh_copy


def main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    tag = os.environ.pop("OPT_BLOCK_TAG", "")
    out = Path(spec["out"])
    try:
        fast = get_function(load_impl(spec["impl"]), "train_fast")
        reports = [measure(spec, config, i, fast, tag)
                   for i, config in enumerate(spec["configs"])]
    except Exception as err:  # noqa: BLE001 - reported to the checker as one named line
        err = err if isinstance(err, LearnerCodeError) else explain_exception(err, spec["impl"])
        out.write_text(json.dumps({"ok": False, "error": str(err), "kind": err.kind,
                                   "hint": err.hint}))
        return 0
    out.write_text(json.dumps({"ok": True, "sizes": reports}))
    return 0


def measure(spec: dict, config: dict, index: int, fast, tag: str) -> dict:
    problem = slow_step.make_problem(config, spec["seed"])
    params, args = problem["params"], (problem["tokens"], problem["targets"])
    lr0 = problem["lr"]
    report: dict = {}
    lrs = iter(lr0 * (1 + 0.003 * i) for i in range(10**6))

    def mark(kind: str, r: int, name: str) -> None:
        sys.stdout.write(f"{kind} {tag} {r} {name}@{index} {time.perf_counter()!r}\n")
        sys.stdout.flush()

    def call(name: str, lr: float):
        fn = TRAIN_SLOW if name == "slow" else fast
        result = jax.block_until_ready(fn(FRESH_COPY(params), *args, lr))
        return np.asarray(result[1], dtype=np.float64)

    # First calls, each timed apart (the fast one compiles; the slow one compiles its
    # operations for these shapes): marked as round -1.
    first_lr = next(lrs)
    first = {}
    for name in ("slow", "fast"):
        with count_compiles() as compiles:
            mark("B", -1, name)
            start = time.perf_counter()
            first[name] = call(name, first_lr)
            report[f"{name}_first_call_s"] = time.perf_counter() - start
            mark("E", -1, name)
        report[f"{name}_compiles_first_call"] = compiles[0]
    report["first_losses"] = {k: v.tolist() for k, v in first.items()}
    losses = {"slow": [], "fast": []}
    warmed = 0
    for r in range(spec["rounds"]):
        round_lrs = [next(lrs) for _ in range(max(spec["slow_iters"], spec["fast_iters"]))]
        order = ("slow", "fast") if r % 2 == 0 else ("fast", "slow")
        for name in order:
            n = spec[f"{name}_iters"]
            copies = [FRESH_COPY(params) for _ in range(n)]
            jax.block_until_ready(copies)
            fn = TRAIN_SLOW if name == "slow" else fast
            with count_compiles() as compiles:
                mark("B", r, name)
                outs = [jax.block_until_ready(fn(copies[i], *args, round_lrs[i]))
                        for i in range(n)]
                mark("E", r, name)
            if name == "fast":
                warmed += compiles[0]
            losses[name].append([np.asarray(o[1], np.float64).tolist() for o in outs])
    report.update(losses=losses, fast_compiles_warmed=warmed)
    return report


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

"""optimisation figures: what each bottleneck of ``coursekit.workloads.slow_step`` costs
here (each fix applied alone, then all of them: the reference solution), every pair
measured interleaved in rounds and judged by ``coursekit.measure.decision``; and the
checker's wall time for ``--stage all`` on the reference (target <= 90 s on 2 cores).
CPU figures."""

from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import time

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from coursekit.checking.learner import load_impl  # noqa: E402
from coursekit.instructor.decision import decide_rounds  # noqa: E402
from coursekit.measure.decision import measure_interleaved  # noqa: E402
from coursekit.workloads import slow_step  # noqa: E402


def gather_loss(params, tokens, targets):
    """slow_step.loss with a row gather instead of the (batch, vocab) one-hot matmul."""
    vocab = params["embed"].shape[0]
    h = jnp.tanh(params["embed"][tokens] @ params["w1"])
    logits = h @ params["w2"]
    picked = jnp.sum(jax.nn.one_hot(targets, vocab, dtype=logits.dtype)
                     * jax.nn.log_softmax(logits), axis=-1)
    return -jnp.mean(picked)


# Built once (a jax.jit made inside the loop would compile again on every call).
_GRADS = {(gather, jitted): (jax.jit(f) if jitted else f)
          for gather in (False, True)
          for f in [jax.value_and_grad(gather_loss if gather else slow_step.loss)]
          for jitted in (False, True)}
_static_update = jax.jit(slow_step.sgd_update, static_argnames="lr")
_traced_update = jax.jit(slow_step.sgd_update)
_donated_update = jax.jit(slow_step.sgd_update, static_argnames="lr", donate_argnums=0)


def loop(params, tokens, targets, lr, *, jit_step=False, traced_lr=False, read_once=False,
         gather=False, donate=False):
    """train_slow with one (or more) of its bottlenecks removed."""
    grad_fn = _GRADS[(gather, jit_step)]
    if donate:
        params = slow_step.fresh_copy(params)
    losses = []
    for t in range(tokens.shape[0]):
        value, grads = grad_fn(params, tokens[t], targets[t])
        if traced_lr:
            params = _traced_update(params, grads, jnp.float32(lr))
        elif donate:
            params = _donated_update(params, grads, lr=lr)
        else:
            params = _static_update(params, grads, lr=lr)
        losses.append(value if read_once else float(value))
    return params, np.asarray(jnp.stack(losses) if read_once else losses, np.float32)


FIXES = {
    "one jitted step instead of op-by-op dispatch": {"jit_step": True},
    "lr traced instead of static (no recompile per call)": {"traced_lr": True},
    "losses read once instead of a host read per step": {"read_once": True},
    "row gather instead of the one-hot matmul (eager)": {"gather": True},
    "row gather inside one jitted step": {"gather": True, "jit_step": True},
    "donated update instead of a copy per step": {"donate": True},
}


def speedups(config: dict, rounds: int) -> list[tuple[str, dict]]:
    impl = load_impl(ROOT / "projects/optimisation/solution/model.py")
    problem = slow_step.make_problem(config, 0)
    args = (problem["tokens"], problem["targets"])
    lrs = iter(problem["lr"] * (1 + 0.001 * i) for i in range(10**6))

    def slow():
        return jax.block_until_ready(slow_step.train_slow(problem["params"], *args, next(lrs)))
    variants = {name: functools.partial(loop, **flags) for name, flags in FIXES.items()}
    variants["all of them: the reference train_fast (one scanned call)"] = \
        lambda p, *a: impl.train_fast(slow_step.fresh_copy(p), *a)
    out = []
    for name, fn in variants.items():
        def fast(fn=fn):
            return jax.block_until_ready(fn(problem["params"], *args, next(lrs)))
        m = measure_interleaved(slow, fast, rounds=rounds, iters=1, warmup=0)
        out.append((name, decide_rounds(m["before"], m["after"], min_gain=0.05)))
    return out


def checker_wall_time() -> tuple[float, int]:
    start = time.perf_counter()
    rc = subprocess.call([sys.executable, str(ROOT / "projects/optimisation/tests/check.py"),
                          "--stage", "all", "--impl",
                          str(ROOT / "projects/optimisation/solution/model.py")],
                         stdout=subprocess.DEVNULL)
    return time.perf_counter() - start, rc


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    config = slow_step.sizes()
    print(f"slow_step at {config}: speedup of each fix alone over train_slow, "
          f"{args.rounds} interleaved rounds each [CPU figures]")
    for name, d in speedups(config, args.rounds):
        lo, hi = d["ci"] or (float("nan"), float("nan"))
        print(f"  {name:58s} {d['ratio']:7.2f}x  [{lo:.2f}, {hi:.2f}]  {d['decision']}")
    wall, rc = checker_wall_time()
    print(f"check.py --stage all on the reference: {wall:.1f} s wall (target <= 90 s on "
          f"2 cores; exit {rc}) [CPU figure]")
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

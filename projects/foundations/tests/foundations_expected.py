"""Writes ``expected/replays.npz``: the sealed replays' outputs for the public inputs, what a
learner's copy compares with (the release leaves the sealed programs out: callable, they
would be the answer). Run from the course checkout, where the programs are:

    python projects/foundations/tests/foundations_expected.py           # rewrite the file
    python projects/foundations/tests/foundations_expected.py --check   # exit 1 when stale

The public inputs are the cases the replay checks draw from ``PUBLIC_SEED``. The file holds
every replay those checks make on them: each check is run on stand-ins for the learner's
functions (the replay's own answer, one that keeps the first call's data, and zeros, so
every diagnosis a mistake can reach is replayed once) and every replay is recorded.
Numbers only: a replay's params for fixed inputs, keyed by a digest of those inputs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

for _path in (Path(__file__).resolve().parents[3], Path(__file__).resolve().parent):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from coursekit.protocol import pin_checker_to_cpu  # noqa: E402

pin_checker_to_cpu()

import foundations_harness as harness  # noqa: E402
import foundations_stage2_fit as fit  # noqa: E402
import foundations_stage3_classifier as train  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from coursekit.checking.contract import Context  # noqa: E402
from coursekit.checking.errors import CheckFailed  # noqa: E402
from coursekit.workloads import classifier  # noqa: E402


def stand_ins(kind: str, ctx=None):
    """Learner functions answering with the replay (``right``), with the replay of the
    first data seen at a shape (``carried``: a cache keyed on too little), or zeros;
    ``reference_workload`` on ``ctx``'s workload data."""
    seen: dict = {}

    def fit_regression(key, x, y, *, steps, batch, lr):
        if kind == "zeros":
            return {"w": jnp.zeros(x.shape[1], jnp.float32), "b": jnp.zeros((), jnp.float32)}
        x0, y0 = seen.setdefault(x.shape, (x, y)) if kind == "carried" else (x, y)
        out = fit.replay_fit(key, np.asarray(x0), np.asarray(y0), steps, batch, lr)
        return {k: jnp.asarray(v, jnp.float32) for k, v in out.items()}

    def train_classifier(key, x, y, *, classes, steps, batch, lr):
        x0, y0 = seen.setdefault(("train", x.shape), (x, y)) if kind == "carried" else (x, y)
        case = {"x": np.asarray(x0), "y": np.asarray(y0), "classes": classes,
                "steps": steps, "batch": batch, "lr": lr}
        out = train.replay_train(key, case)
        scale = 0.0 if kind == "zeros" else 1.0
        return {k: jnp.asarray(v * scale, jnp.float32) for k, v in out.items()}

    def reference_workload(seed, *, n_train, n_test, steps, batch, lr):
        # the run's own workload data (the generator asks its public seed only), trained
        # by the stand-in above: the checker's functions, not a workload written again
        assert ctx is not None and seed == train.workload_seed(ctx), seed
        k_train, x, y = train.workload_data(ctx)
        params = train_classifier(k_train, x[:n_train], y[:n_train], classes=classifier.CLASSES,
                                  steps=steps, batch=batch, lr=lr)
        accuracy = {part: float(classifier.accuracy(params, x[rows], y[rows])) for part, rows
                    in (("train", slice(None, n_train)), ("test", slice(n_train, None)))}
        return {"params": params, "train_accuracy": accuracy["train"],
                "test_accuracy": accuracy["test"]}

    return SimpleNamespace(fit_regression=fit_regression, train_classifier=train_classifier,
                           reference_workload=reference_workload)


def record(workdir: Path) -> dict:
    """Every replay the replay checks make on the public inputs."""
    harness.RECORDED = recorded = {}
    try:
        for kind in ("right", "carried", "zeros"):
            ctx = Context(seed=harness.PUBLIC_SEED, impl_path=workdir / "model.py",
                          workdir=workdir, stage=3)
            impl = stand_ins(kind, ctx)
            k_train, x, y = train.workload_data(ctx)
            n_train = train.WORKLOAD_SIZES["n_train"]
            params = impl.train_classifier(k_train, x[:n_train], y[:n_train],
                                           **{k: train.workload_case(ctx)[k] for k in
                                              ("classes", "steps", "batch", "lr")})
            test = float(classifier.accuracy(params, x[n_train:], y[n_train:]))
            ctx.once("workload", lambda params=params, test=test: {
                "params": params, "train_accuracy": 0.0, "test_accuracy": test})
            for check in (fit.fit_follows_key_protocol, fit.fit_repeated_calls_match_replay,
                          train.train_follows_key_protocol,
                          train.workload_params_follow_replay,
                          train.workload_accuracy_vs_reference,
                          train.workload_second_call_matches_replay):
                try:
                    check(impl, ctx)
                except CheckFailed:
                    pass
        # The repeated calls stop at the first that fails: each later call's diagnoses,
        # on a wrong answer there (zeros), recorded one by one.
        first = fit.fit_case(ctx)
        for k, (label, case) in enumerate(fit.later_fit_cases(ctx, first), start=2):
            try:
                fit.check_later_fit(stand_ins("zeros"), first, k, label, case,
                                    np.zeros(case["x"].shape[1] + 1))
            except CheckFailed:
                pass
    finally:
        harness.RECORDED = None
    return recorded


def write(path: Path, recorded: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"{digest}/{leaf}": value for digest, out in sorted(recorded.items())
              for leaf, value in sorted(out.items())}
    with open(path, "wb") as f:
        np.savez_compressed(f, **arrays)


# A fresh generation on another CPU differs in the last float32 bits (XLA's CPU code
# follows the machine's vector units: up to 9e-8 on 88 of 158 arrays, 2026-12-07), so
# freshness is the same replays (the same input digests and leaves) with values within
# STALE_RTOL, 100x tighter than the checks' 1e-4 against them; a stale file (another
# protocol, other public inputs) differs in its keys or by whole units.
STALE_RTOL, STALE_ATOL = 1e-6, 1e-6


def same(a: Path, b: Path) -> bool:
    with np.load(a) as x, np.load(b) as y:
        return sorted(x.files) == sorted(y.files) and all(
            x[k].shape == y[k].shape and x[k].dtype == y[k].dtype and
            np.allclose(x[k], y[k], rtol=STALE_RTOL, atol=STALE_ATOL) for k in x.files)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the stored file is not a fresh generation")
    args = parser.parse_args(argv)
    if not harness.replays_live():
        print("the sealed replays are not here (a learner's copy?): nothing to record from")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "replays.npz"
        write(fresh, record(Path(tmp)))
        if args.check:
            ok = harness.STORED.is_file() and same(fresh, harness.STORED)
            print(f"{harness.STORED}: {'up to date' if ok else 'stale or missing'}")
            return 0 if ok else 1
        harness.STORED.parent.mkdir(parents=True, exist_ok=True)
        harness.STORED.write_bytes(fresh.read_bytes())
    print(f"wrote {harness.STORED}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

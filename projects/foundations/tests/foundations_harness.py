"""foundations' checker object and what its stages share: tolerances, the params'
shapes, the learner process's global random state, a rerun in a fresh learner process,
and the replay comparison with its diagnoses.

Every check computes its own reference: float64 numpy for the loss and for central
finite differences of the gradient, its own replay of the key protocol for the fits and
for the workload's training, its own accuracy of the learner's params on the rows it
names. Inputs come from a seed the learner does not see, with odd shapes and extreme
values. Reproducibility is checked bitwise: under two global seeds in the learner process
and in a fresh learner process (another hash seed, another global seed).

The learner's code runs in a learner process (``learner_process=True``): this process
never imports the learner's file. It reads the file's text once, to find autodiff inside
``regression_grads`` (``ast``: reading is not importing). What the learner process reports
about itself is listed in ``SELF_REPORTED``, each with its independent counterpart.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np

from coursekit.checking import bridge, sealed
from coursekit.checking.contract import Checker
from coursekit.checking.errors import CheckFailed, LearnerCodeError
from coursekit.checking.learner import (
    get_function,
)
from coursekit.checking.values import as_array, as_float64_array, fail_unless
from coursekit.workloads.fresh import bitwise_differences, flatten

checker = Checker("foundations", {
    1: "the edit-check loop", 2: "a regression fit", 3: "a reproducible classifier"},
    learner_process=True)

# What the learner process reports about itself, and what stands beside it here.
SELF_REPORTED = {
    "common/seed_globals, common/global_state_digest":
        "the learner process's numpy/Python global generator state before and after a "
        "call; independent part: the call's output, compared bitwise here, under two "
        "different global seeds and in a fresh process seeded a third way",
    "foundations/autodiff_calls":
        "how many JAX autodiff transforms regression_grads ran; independent part: this "
        "process's own ast reading of the learner's file (regression_grads and every "
        "function of the file it reaches), and the returned gradient checked here against "
        "float64 finite differences",
}

GRAD_RTOL = 1e-3       # float32 analytic gradient vs float64 finite differences
# The learner's fit or training vs the checker's replay: a right one is within about 1e-7
# (float32, another order of operations; matmuls at float32 precision on a chip too,
# coursekit.checking.learner_server), x rounded to bfloat16 about 1e-3.
REPLAY_RTOL = 1e-4
MSE_RTOL = 1e-5        # float32 mean of at most ~300 squares vs float64: ~1e-6 measured
ACCURACY_MARGIN = 0.05  # test accuracy may trail the checker's own training by this much
MAX_REPLAY_ROWS = 1625  # the sealed replay's one-sort shuffle is jax's up to this many rows
TESTS = Path(__file__).resolve().parent  # tests/sealed/ holds the sealed replays
# Where the sealed replays are absent (a learner's copy: the release leaves them out, they
# would be the answer), the replays' outputs for the public inputs (this seed's cases) are
# read from this file, written by foundations_expected.py from the course checkout.
PUBLIC_SEED = 20261206
STORED = TESTS / "expected" / "replays.npz"
REPLAY_SOURCE = "COURSE_FOUNDATIONS_REPLAYS"  # "stored": read STORED even where sealed is


class ReplayNotStored(LookupError):
    """No stored output for these inputs: only the public inputs' replays are stored."""


def replays_live() -> bool:
    """Whether this copy runs the sealed replays (the course, the grader) or reads their
    stored outputs for the public inputs (a learner's copy)."""
    return (os.environ.get(REPLAY_SOURCE) != "stored"
            and sealed.path(TESTS, "fit_replay").is_file())


def case_rng(ctx, salt: str) -> np.random.Generator:
    """The generator a replayed case is drawn from: the run's seed where the replays run
    live, the public seed where only their stored outputs are here."""
    if replays_live():
        return ctx.rng(salt)
    return np.random.default_rng([PUBLIC_SEED, *salt.encode()])


def inputs_digest(name: str, args) -> str:
    """One replay call's identity: the program and every input's dtype, shape and bytes."""
    h = hashlib.sha256(name.encode())
    for a in args:
        a = np.asarray(a)
        h.update(f"|{a.dtype.str}{a.shape}|".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:32]


RECORDED: dict | None = None  # foundations_expected.py collects every live replay here


@functools.cache
def stored_replays() -> dict:
    try:
        with np.load(STORED) as data:
            out: dict = {}
            for k in data.files:
                digest, leaf = k.split("/", 1)
                out.setdefault(digest, {})[leaf] = data[k]
            return out
    except OSError as err:
        raise sealed.SealedMissing(
            f"the checker's stored replays {STORED} are missing or unreadable ({err}): "
            "copy the project's tests/ folder from the course release again") from None


def replay(name: str, *args, x64: bool = False) -> dict:
    """The sealed program ``name`` on ``args`` (numpy out), or where this copy has no
    sealed programs, its stored output for these exact inputs (ReplayNotStored if none)."""
    digest = inputs_digest(name, args)
    if not replays_live():
        if digest not in stored_replays():
            raise ReplayNotStored(name)
        return dict(stored_replays()[digest])
    out = sealed.call(sealed.program(TESTS, name), *args, x64=x64)
    if RECORDED is not None:
        RECORDED[digest] = {k: np.asarray(v) for k, v in out.items()}
    return out


def relative_error(yours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(yours - ref) / max(np.linalg.norm(ref), 1e-12))


def linear_params(value, d: int, what: str) -> dict:
    fail_unless(isinstance(value, dict) and set(value) == {"w", "b"},
                f"{what} must be a dict with exactly the keys 'w' and 'b'",
                yours=type(value).__name__ if not isinstance(value, dict) else sorted(value),
                expected="{'w': (d,), 'b': ()}")
    out = {}
    for name, shape in (("w", (d,)), ("b", ())):
        got = getattr(value[name], "shape", None)
        as_array(value[name], f"{what}[{name!r}]", shape, "float32",
                 shape_hint=f"yours for 'w' is one number where w has {d} entries, one per "
                 "feature: a mean over every entry, where the rows alone (axis 0) are to be "
                 "reduced" if name == "w" and got == () and d > 1 else None)
        out[name] = as_float64_array(value[name], f"{what}[{name!r}]", shape)
    return out


# ---------------------------------------------------------------------------------------
# Global random state and fresh processes (the learner process's own state)
# ---------------------------------------------------------------------------------------

def under_global_seed(impl, seed: int, call):
    """``call()`` with the learner process's numpy and Python global generators seeded
    to ``seed``; returns (output, whether the state digest changed: self-reported)."""
    before = bridge.inspect(impl, "common/seed_globals", seed)
    out = call()
    after = bridge.inspect(impl, "common/global_state_digest")
    return out, after != before


def check_global_state(impl, call, ctx, what: str):
    """Run ``call`` under two different global seeds: the global generators must be left
    untouched (self-reported) and the output bitwise the same (compared here). Returns
    the first output."""
    seeds = [int(s) for s in ctx.rng("global-seeds").integers(0, 2**31 - 1, 2)]
    first, touched_first = under_global_seed(impl, seeds[0], call)
    second, touched_second = under_global_seed(impl, seeds[1], call)
    diffs = bitwise_differences(flatten(first), flatten(second))
    fail_unless(not (touched_first or touched_second),
                f"{what} used numpy's or Python's global random generator",
                yours="np.random / random state changed during the call",
                expected="global state untouched",
                hint="draw everything from the jax key you were given (jax.random.split, "
                     "jax.random.permutation); np.random.* and random.* are global state")
    fail_unless(not diffs, f"{what} gave different results for the same key when "
                "numpy's and Python's global seeds changed", yours=diffs[:3],
                expected="bitwise equal",
                hint="something besides the key decides the result: global RNG, the "
                     "clock, a count of earlier calls, or a fresh unseeded generator")
    return first


def check_fresh_process(ctx, function: str, in_process, *args, **kwargs) -> None:
    """Call ``function`` again in a fresh learner process (another hash seed, another
    global seed) and compare bitwise with ``in_process``."""
    global_seed = int(ctx.rng("fresh-global-seed").integers(1, 2**31 - 1))
    fresh = bridge.LearnerProcess(ctx.impl_path,
                                  env={"PYTHONHASHSEED": global_seed % 4294967295})
    try:
        module = fresh.module()
        bridge.inspect(module, "common/seed_globals", global_seed)
        out = get_function(module, function)(*args, **kwargs)
    except LearnerCodeError as err:
        if err.kind == "not-implemented":
            raise
        raise CheckFailed(f"in a fresh process: {err}", hint="the function must run on its "
                          "own, from the arguments alone, in a new process") from None
    finally:
        fresh.close()
    diffs = bitwise_differences(flatten(in_process), flatten(out))
    fail_unless(not diffs, f"{function} gave different arrays in a fresh process",
                yours=diffs[:3], expected="bitwise the same arrays",
                hint="a result may depend only on the key and the inputs: no global "
                     "random state, no hash() of strings, no process id, no clock")


def expect_replay(function: str, yours: np.ndarray, ref: np.ndarray, diagnoses,
                  otherwise: str) -> None:
    """Pass when ``yours`` is within REPLAY_RTOL of the checker's replay. Otherwise fail
    with the hint of the first diagnosis that explains it (each one replays a classic
    mistake, only on failure, and returns a hint or None), else ``otherwise``."""
    err = relative_error(yours, ref)
    if err < REPLAY_RTOL:
        return
    hint = next((h for h in (diagnosed(d) for d in diagnoses) if h), otherwise)
    raise CheckFailed(f"{function} differs from the checker's replay of the key protocol "
                      f"(relative error {err:.3g}, tolerance {REPLAY_RTOL:g})",
                      yours=yours, expected=ref, hint=hint)



def diagnosed(diagnose) -> str | None:
    """A diagnosis's hint, or None where it does not apply or cannot be replayed here (a
    learner's copy stores the replays of the mistakes the checker names, on the public
    inputs; another input's replay is not there)."""
    try:
        return diagnose()
    except ReplayNotStored:
        return None


def largest_differences(yours: dict, ref: dict, inputs: str, count: int = 2) -> str:
    """What the evidence shows where no diagnosis names it: which values differ most from
    the replay, by how much, on which input."""
    rows = []
    for name in sorted(ref):
        y, r = np.ravel(np.asarray(yours[name], np.float64)), np.ravel(np.asarray(ref[name]))
        for i in np.argsort(-np.abs(y - r))[:count]:
            where = f"{name}[{np.unravel_index(i, np.shape(ref[name]))}]" \
                if np.ndim(ref[name]) else name
            rows.append((abs(y[i] - r[i]), f"{where}: yours {y[i]:.6g}, the replay's "
                                            f"{r[i]:.6g}"))
    rows.sort(key=lambda row: -row[0])
    return (f"on {inputs}, the values that differ most are " +
            "; ".join(text for _, text in rows[:count]) + ". ")

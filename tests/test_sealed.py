"""Sealed references (``coursekit.checking.sealed``): foundations' replays of stage 2's
fit and stage 3's training ship as jax.export programs, never as Python a learner could
paste.

Each program is held against the replay written the obvious way (a Python loop,
``jax.random.permutation``; the fit's draws first, then float64 steps), here in the
course's own tests, which the release does not ship: the training to float32 rounding,
the fit's float64 steps to 1e-12 (XLA orders a fused loop's sums its own way). The
programs are written by the oldest JAX the course supports (docs/checkers/reference.md, "Sealed
references"), so this JAX compiles a program another JAX lowered: the training's weights
then differ from the loop's by a few float32 ulps of the largest weight (3e-7 of it,
measured on 0.12 and on the floor), where a wrong key, draw or order moves them by
percents. A learner file that loads the program is refused; a missing or unreadable
program says what to do. That the stored bytes are what the source exports now is
checked under the floor JAX (tests/test_jax_floor.py).
"""

from __future__ import annotations

import ast
import dataclasses
import math

import jax
import numpy as np
import pytest

from coursekit.authoring import sealed as authoring
from coursekit.checking import forbidden, sealed
from coursekit.facts import ROOT
from coursekit.workloads import classifier

TESTS = ROOT / "projects" / "foundations" / "tests"
SOURCE = ROOT / "projects" / "foundations" / "solution" / "sealed.py"


def plain_replay(key, x, y, classes, steps, batch, lr, same_order=False, ceil_epoch=False,
                 slide=False, own_labels=False, compose=False):
    """train_classifier's key protocol in plain Python (the docstring, line by line);
    ``ceil_epoch``: the mistake, an epoch of ceil(n / batch) steps, its last one short;
    ``slide``: the mistake, step j's rows order[j:j + batch]; ``own_labels``: the
    mistake, the epoch key split again, x's rows by one half's permutation and y's by the
    other's; ``compose``: the mistake, order = order[perm] from the second epoch on."""
    k_init, k_order = jax.random.split(key)
    params = classifier.init_params(k_init, features=x.shape[1], classes=classes)
    grad = jax.jit(jax.grad(classifier.loss))
    order, per_epoch = None, -(-x.shape[0] // batch) if ceil_epoch else x.shape[0] // batch
    order_y = None
    for i in range(steps):
        j = i % per_epoch
        if j == 0 and (order is None or not same_order):
            k_order, k_epoch = jax.random.split(k_order)
            if own_labels:
                k_x, k_y = jax.random.split(k_epoch)
                order = jax.random.permutation(k_x, x.shape[0])
                order_y = jax.random.permutation(k_y, x.shape[0])
            else:
                perm = jax.random.permutation(k_epoch, x.shape[0])
                order = order[perm] if compose and order is not None else perm
                order_y = order
        rows = order[j:j + batch] if slide else order[j * batch:(j + 1) * batch]
        rows_y = order_y[j:j + batch] if slide else order_y[j * batch:(j + 1) * batch]
        g = grad(params, x[rows], y[rows_y])
        params = jax.tree.map(lambda v, d: v - lr * d, params, g)
    return params


def sealed_replay(key, x, y, classes, steps, batch, lr, same_order=False, ceil_epoch=False,
                  slide=False, own_labels=False, compose=False):
    return sealed.call(sealed.program(TESTS, "train_replay"), jax.random.key_data(key), x, y,
                       np.int32(steps), np.float32(lr), np.bool_(same_order),
                       np.zeros(batch, np.int8), np.zeros(classes, np.int8),
                       np.bool_(ceil_epoch), np.bool_(slide), np.bool_(own_labels),
                       np.bool_(compose))


# make check keeps the checker's case; the others (about 4 s each) run in make test
SLOW = pytest.mark.slow
# the training's weights against the loop's, as a share of the largest weight: 3e-7 at most
# measured (a few float32 ulps); the checker's own tolerance for a learner is 1e-3
FLOAT32_STEPS = 1e-6


@pytest.mark.parametrize("n, features, classes, batch, steps, same_order", [
    (151, 7, 3, 13, 40, False),     # odd sizes, mid-epoch stop (the checker's cases)
    pytest.param(151, 7, 3, 13, 40, True, marks=SLOW),  # the diagnosis: one order always
    pytest.param(512, 8, 4, 61, 30, False, marks=SLOW),     # the workload's rows
    pytest.param(1625, 3, 2, 400, 9, False, marks=SLOW),    # the most rows one sort
])                                                          # shuffles as jax does
def test_sealed_replay_is_the_protocol(n, features, classes, batch, steps,
                                                     same_order):
    key = jax.random.key(n + batch)
    x, y = classifier.make_dataset(jax.random.key(7), n, features, classes)
    want = plain_replay(key, x, y, classes, steps, batch, 0.25, same_order)
    got = sealed_replay(key, x, y, classes, steps, batch, 0.25, same_order)
    assert sorted(got) == sorted(want)
    for name in want:
        scale = float(np.max(np.abs(want[name])))
        np.testing.assert_allclose(got[name], np.asarray(want[name]), rtol=0,
                                   atol=FLOAT32_STEPS * scale, err_msg=name)


@pytest.mark.parametrize("slip", [{"ceil_epoch": True}, {"slide": True},
                                  {"own_labels": True}, {"compose": True}], ids=str)
def test_each_training_diagnosis_replays_its_slip(slip):
    """The diagnoses of the training's slips, each against its plain-Python loop: an epoch
    of ceil(n / batch) steps, its last step a mean over the leftover rows alone (a masked
    mean in the program, a short slice in Python: the same numbers to float32 rounding),
    batches that overlap (step j's rows order[j:j + batch]), labels in an order of their
    own, and each epoch's order composed with the last's."""
    n, features, classes, batch, steps = 151, 7, 3, 13, 40  # 11 full steps and 8 rows
    key = jax.random.key(5)
    x, y = classifier.make_dataset(jax.random.key(7), n, features, classes)
    want = plain_replay(key, x, y, classes, steps, batch, 0.25, **slip)
    got = sealed_replay(key, x, y, classes, steps, batch, 0.25, **slip)
    right = sealed_replay(key, x, y, classes, steps, batch, 0.25)
    for name in want:
        np.testing.assert_allclose(got[name], np.asarray(want[name]), rtol=1e-5, atol=1e-6,
                                   err_msg=name)
        assert not np.allclose(got[name], right[name], rtol=1e-3), name


def plain_fit(key, x, y, steps, batch, lr, reuse_key=False, maxval=None, one_draw=False):
    """fit_regression's key protocol in plain Python, float64 steps (the docstring);
    ``maxval``: the mistake, rows drawn from [0, maxval) instead of [0, n); ``one_draw``:
    the mistake, one randint of shape (steps, batch) from the unsplit stream key."""
    n, d = x.shape
    k_init, k_batches = jax.random.split(key)
    w = np.asarray(jax.random.normal(k_init, (d,), np.float32) / np.sqrt(np.float32(d)))
    rows, k_step = [], None
    if one_draw:
        rows = list(np.asarray(jax.random.randint(k_batches, (steps, batch), 0, n)))
    for _ in range(0 if one_draw else steps):
        if not (reuse_key and k_step is not None):
            k_batches, k_step = jax.random.split(k_batches)
        rows.append(np.asarray(jax.random.randint(k_step, (batch,), 0,
                                                  n if maxval is None else maxval)))
    w, b = w.astype(np.float64), 0.0
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for r in rows:
        err = x64[r] @ w + b - y64[r]
        w, b = w - lr * 2 * x64[r].T @ err / batch, b - lr * 2 * err.mean()
    return {"w": w, "b": b}


@pytest.mark.parametrize("n, d, batch, steps, reuse_key, maxval, one_draw", [
    (151, 5, 9, 60, False, None, False), (151, 5, 9, 60, True, None, False),
    (259, 11, 23, 69, False, None, False),
    (151, 5, 9, 60, False, 150, False),  # the diagnosis: rows below n - 1
    (151, 5, 9, 60, False, None, True)])  # the diagnosis: every step's rows in one draw
def test_sealed_fit_replay_is_the_protocol(n, d, batch, steps, reuse_key, maxval, one_draw):
    rng = np.random.default_rng(n + d)
    x = rng.standard_normal((n, d)).astype(np.float32)
    y = (x @ rng.standard_normal(d) + 0.3).astype(np.float32)
    key = jax.random.key(n * d)
    want = plain_fit(key, x, y, steps, batch, 0.04, reuse_key, maxval, one_draw)
    got = sealed.call(sealed.program(TESTS, "fit_replay"), jax.random.key_data(key), x, y,
                      np.int32(steps), np.float64(0.04), np.bool_(reuse_key),
                      np.zeros(batch, np.int8), np.int32(n if maxval is None else maxval),
                      np.bool_(one_draw), np.zeros(steps if one_draw else 1, np.int8),
                      x64=True)
    np.testing.assert_allclose(got["w"], want["w"], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got["b"], want["b"], rtol=1e-12, atol=1e-14)


def test_one_sort_is_jax_permutation_up_to_the_stated_rows():
    """jax shuffles with ceil(3 log n / log(2**32 - 1)) sorts: one up to 1625 rows."""
    rounds = lambda n: math.ceil(3 * math.log(n) / math.log(2**32 - 1))  # noqa: E731
    assert rounds(1625) == 1 and rounds(1626) == 2
    shuffled_rows = authoring.load(SOURCE).shuffled_rows
    key = jax.random.key(3)
    for n in (2, 1625):
        np.testing.assert_array_equal(shuffled_rows(key, n), jax.random.permutation(key, n))


@pytest.mark.parametrize("module, replay", [("foundations_stage2_fit", "replay_fit"),
                                            ("foundations_stage3_classifier", "replay_train"),
                                            ("foundations_harness", "replay")])
def test_the_checker_holds_no_replay_source(module, replay):
    """The replays run the programs (or read their stored outputs): no draw, shuffle,
    gradient or update of their own."""
    tree = ast.parse((TESTS / f"{module}.py").read_text())
    found = next(n for n in ast.walk(tree)
                 if isinstance(n, ast.FunctionDef) and n.name == replay)
    names = {n.attr for n in ast.walk(found) if isinstance(n, ast.Attribute)}
    called = {n.func.id for n in ast.walk(found)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "program" in names or "replay" in called
    assert not names & {"permutation", "randint", "normal", "grad", "split", "map"}


def test_a_learner_file_loading_the_program_is_refused(tmp_path):
    rules = forbidden.rules_for("foundations", 2) + forbidden.rules_for("foundations", 3)
    for source in ("import jax\nf = jax.export.deserialize\n",
                   "from jax import export\n",
                   "from coursekit.checking.sealed import program\n"):
        learner = tmp_path / "model.py"
        learner.write_text(source)
        assert forbidden.scan(learner, rules), source


def test_a_missing_program_says_what_to_do(tmp_path):
    with pytest.raises(sealed.SealedMissing, match="copy the project's tests/ folder"):
        sealed.program(tmp_path, "train_replay")


def test_a_program_from_a_newer_jax_says_so(tmp_path):
    """What 0.10.2 said of a program 0.12 wrote ("Failed to deserialize StableHLO"), here
    planted as bytes no StableHLO reader takes inside a valid jax.export program."""
    exp = jax.export.export(jax.jit(lambda v: v + 1), platforms=("cpu",))(np.float32(1))
    broken = dataclasses.replace(exp, mlir_module_serialized=b"ML\xefR" + b"\0" * 64)
    sealed.path(tmp_path, "newer").parent.mkdir()
    sealed.path(tmp_path, "newer").write_bytes(broken.serialize())
    with pytest.raises(sealed.SealedMissing, match="a newer JAX wrote it.*every JAX from"):
        sealed.program(tmp_path, "newer")

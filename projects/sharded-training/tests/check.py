"""Checks for sharded-training.

    python projects/sharded-training/tests/check.py --stage 1|2|3|4|all --impl PATH [--json F]

Runs on 8 fake CPU devices (set here before jax is imported). Every check computes its
own reference: a single-device training step, its own gradient over the valid rows, its
own data order, its own reading of array placement and of the profiler trace; inputs,
seeds and valid counts come from the run's seed, which the learner does not see.

Tolerances (stated, not bitwise): sharded vs single-device results differ by about
1e-7 per step from summation order, so they are compared with rtol 1e-4, atol 1e-5.
Recovery on the *same* mesh is compared bitwise. Stage 3 runs training in real
subprocesses (``coursekit/workloads/train_driver.py``), SIGKILLs them mid-run and mid-save,
restarts fresh processes, and runs two ``jax.distributed`` processes on localhost; each
process has a wall-clock limit and a failure in one stops the others
(``coursekit.workloads.procgroup``).
"""

from __future__ import annotations

import atexit
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))  # the course root
from coursekit.facts import use_cpu_devices

N_DEVICES = 8
# Grading is the same on every machine: 8 CPU devices, even where a GPU is present (the
# fake-device flag only splits the CPU). An explicit JAX_PLATFORMS is respected.
use_cpu_devices(N_DEVICES)  # before jax is imported

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from coursekit.checking.contract import Checker, CheckFailed
from coursekit.checking.learner import LearnerCodeError, get_function
from coursekit.measure import traces
from coursekit.measure.timing import count_compiles, time_synced
from coursekit.provenance.records import read_run_record, validate_run_record
from coursekit.workloads import classifier, procgroup, trainruns
from coursekit.workloads.jaxcache import enable_compilation_cache

checker = Checker("sharded-training", {
    1: "mesh and placement", 2: "count-weighted global updates",
    3: "fresh-process recovery", 4: "trace and timing"})

# One compilation cache for this run: the checker and every training process it starts
# (fresh processes compile the same programs; a hit loads them instead). Removed at exit.
_CACHE_DIR = tempfile.mkdtemp(prefix="sharded-check-jaxcache-")
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)
enable_compilation_cache(_CACHE_DIR)

RTOL, ATOL = 1e-4, 1e-5          # sharded vs single-device (summation order differs)
# The learner's synced median vs the checker's, either way. An unsynchronised timer reads
# this step 20-50x too fast; load on a shared 2-core machine moves medians by up to ~3x.
TIME_RATIO_WINDOW = 6.0
# Wall-clock limit of one training process before the uninterrupted run has been timed;
# afterwards each process gets max(MIN_LIMIT, 8 x that run). COURSE_RUN_LIMIT_S overrides.
FIRST_LIMIT_S = float(os.environ.get("COURSE_RUN_LIMIT_S", 150))
MIN_LIMIT_S = float(os.environ.get("COURSE_RUN_LIMIT_S", 60))
# The two-process run's limit (default: twice a single run's). A learner process that
# hangs costs this long before it is killed and named.
MP_LIMIT_S = os.environ.get("COURSE_MP_LIMIT_S")


def fail_unless(cond: bool, message: str, **details) -> None:
    if not cond:
        raise CheckFailed(message, **details)


def devices_of(leaf) -> list[int]:
    return sorted(d.id for d in leaf.sharding.device_set)


def is_key(leaf) -> bool:
    return isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype,
                                                                 jax.dtypes.prng_key)


def host(leaf) -> np.ndarray:
    """A real numpy array (typed keys as their key data); anything else fails."""
    if is_key(leaf):
        leaf = jax.random.key_data(leaf)
    if not isinstance(leaf, (jax.Array, np.ndarray, np.generic, int, float)):
        raise CheckFailed(f"expected an array, got {type(leaf).__name__}",
                          yours=leaf, expected="a jax.Array")
    return np.asarray(leaf)


def flat(tree) -> dict[str, np.ndarray]:
    return {jax.tree_util.keystr(p): host(v)
            for p, v in jax.tree_util.tree_leaves_with_path(tree)}


def compare_trees(yours: dict, expected: dict, what: str, *, rtol=RTOL, atol=ATOL,
                  bitwise=False, hint="") -> None:
    """Leaf by leaf ({name: array}); names the worst leaf and its error."""
    fail_unless(sorted(yours) == sorted(expected), f"{what}: the leaves differ",
                yours=sorted(yours), expected=sorted(expected),
                hint="keep the state's structure: params, opt_state, step, key, data_pos")
    for name in sorted(expected):
        a, b = np.asarray(yours[name]), np.asarray(expected[name])
        fail_unless(a.shape == b.shape, f"{what}: {name} has the wrong shape",
                    yours=a.shape, expected=b.shape)
        if bitwise:
            same = a.dtype == b.dtype and a.tobytes() == b.tobytes()
            if not same:
                err = (float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
                       if a.size else 0.0)
                raise CheckFailed(f"{what}: {name} is not bitwise equal (max |diff| "
                                  f"{err:.3g})", yours=a, expected=b, hint=hint)
        elif not np.allclose(a.astype(np.float64), b.astype(np.float64), rtol=rtol,
                             atol=atol):
            err = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
            raise CheckFailed(f"{what}: {name} differs by up to {err:.3g} (tolerance "
                              f"rtol {rtol:g}, atol {atol:g})", yours=a, expected=b,
                              hint=hint)


# ---------------------------------------------------------------------------------------
# The checker's own reference: data order, single-device training
# ---------------------------------------------------------------------------------------

def ref_data(config: dict) -> dict:
    x, y = jax.jit(classifier.make_dataset, static_argnums=1)(
        jax.random.key(config["data_seed"]), config["n_examples"],
        spread=config.get("spread", 1.0))
    return {"x": np.asarray(x), "y": np.asarray(y)}


def ref_batch(data: dict, config: dict, pos: int) -> dict:
    n, size = config["n_examples"], config["batch"]
    per_epoch = -(-n // size)
    epoch, b = divmod(pos, per_epoch)
    order = np.random.default_rng([config["data_seed"], epoch]).permutation(n)
    idx = list(order[b * size:(b + 1) * size])
    mask = np.array([1.0] * len(idx) + [0.0] * (size - len(idx)), np.float32)
    idx = np.array(idx + [0] * (size - len(idx)))
    return {"x": data["x"][idx], "y": data["y"][idx], "mask": mask}


_init_params = jax.jit(classifier.init_params)


def ref_state(config: dict) -> dict:
    """Step-0 state on one device, written independently of the learner's."""
    k_params, k_train = jax.random.split(jax.random.key(config["seed"]))
    params = _init_params(k_params)
    momentum = jax.tree.map(jnp.zeros_like, params)
    return {"params": params, "momentum": momentum, "step": 0, "key": k_train,
            "data_pos": 0}


def ref_step_fn(config: dict):
    """SGD with momentum by hand (optax.sgd: m = g + momentum * m; p -= lr * m)."""
    lr, mu, noise = config["lr"], config["momentum"], config["noise"]

    @jax.jit
    def step(params, momentum, key, x, y, mask):
        key, sub = jax.random.split(key)
        x = x + noise * jax.random.normal(sub, x.shape, x.dtype)

        def loss(p):
            logp = jax.nn.log_softmax(jnp.tanh(x @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"])
            per_row = -jnp.take_along_axis(logp, y[:, None], axis=1)[:, 0]
            return jnp.sum(per_row * mask) / jnp.sum(mask)

        value, grads = jax.value_and_grad(loss)(params)
        momentum = jax.tree.map(lambda m, g: g + mu * m, momentum, grads)
        params = jax.tree.map(lambda p, m: p - lr * m, params, momentum)
        return params, momentum, key, value
    return step


def ref_train(config: dict, steps: int, batches=None) -> tuple[dict, list[float]]:
    state = ref_state(config)
    data = ref_data(config) if batches is None else None
    step = ref_step_fn(config)
    params, momentum, key = state["params"], state["momentum"], state["key"]
    losses = []
    for i in range(steps):
        b = batches[i] if batches is not None else ref_batch(data, config, i)
        params, momentum, key, value = step(params, momentum, key, jnp.asarray(b["x"]),
                                            jnp.asarray(b["y"]), jnp.asarray(b["mask"]))
        losses.append(float(value))
    return {"params": params, "momentum": momentum, "key": key, "step": steps,
            "data_pos": steps}, losses


def run_config(ctx, salt: str, **overrides) -> dict:
    rng = ctx.rng(salt)
    config = {"seed": int(rng.integers(0, 2**30)), "data_seed": int(rng.integers(0, 2**30)),
              "n_examples": int(rng.integers(300, 700)) * 2 + 1, "batch": 64,
              "spread": 2.0, "lr": float(rng.uniform(0.03, 0.08)), "momentum": 0.9,
              "noise": float(rng.uniform(0.05, 0.2)), "steps": 30, "save_every": 7,
              "max_to_keep": 3}
    config.update(overrides)
    return config


def learner_mesh(impl, n=None):
    make_mesh = get_function(impl, "make_mesh")
    mesh = make_mesh() if n is None else make_mesh(n)
    fail_unless(isinstance(mesh, jax.sharding.Mesh), "make_mesh must return a "
                "jax.sharding.Mesh", yours=type(mesh).__name__, expected="Mesh",
                hint="jax.make_mesh((n,), ('data',), devices=jax.devices()[:n])")
    return mesh


def learner_state(impl, config, mesh):
    state = get_function(impl, "init_state")(config, mesh)
    fail_unless(isinstance(state, dict), "init_state must return a dict",
                yours=type(state).__name__, expected="dict")
    missing = [k for k in ("params", "opt_state", "step", "key", "data_pos")
               if k not in state]
    fail_unless(not missing, f"the training state lacks {missing}", yours=sorted(state),
                expected=["data_pos", "key", "opt_state", "params", "step"],
                hint="keep everything a restart needs in the state")
    return state


def learner_step(impl, config):
    make = get_function(impl, "make_train_step")
    optimizer = optax.sgd(config["lr"], momentum=config["momentum"])
    return make(optimizer, config["noise"])


def random_mask(rng, rows_per_device: int, counts) -> np.ndarray:
    mask = np.zeros((len(counts), rows_per_device), np.float32)
    for d, c in enumerate(counts):
        mask[d, rng.permutation(rows_per_device)[:c]] = 1.0
    return mask.reshape(-1)


def blobs(rng, n: int) -> tuple:
    """Host data shaped like the classifier's (numpy, so no compile)."""
    centres = 3.0 * rng.standard_normal((classifier.CLASSES, classifier.FEATURES))
    y = rng.integers(0, classifier.CLASSES, n).astype(np.int32)
    x = (centres[y] + 2.0 * rng.standard_normal((n, classifier.FEATURES)))
    return x.astype(np.float32), y


def stage_batch(ctx, salt: str, rows_per_device: int, counts=None) -> dict:
    rng = ctx.rng(salt)
    n = rows_per_device * N_DEVICES
    x, y = blobs(rng, n)
    if counts is None:
        counts = rng.integers(1, rows_per_device + 1, N_DEVICES)
    mask = random_mask(rng, rows_per_device, counts)
    return {"x": np.asarray(x), "y": np.asarray(y), "mask": mask}


# ---------------------------------------------------------------------------------------
# Stage 1: mesh and placement
# ---------------------------------------------------------------------------------------

@checker.check(1, "mesh_over_devices")
def _(impl, ctx):
    mesh = learner_mesh(impl)
    fail_unless(mesh.devices.size == N_DEVICES and tuple(mesh.axis_names) == ("data",),
                "make_mesh() should span every device on one axis named 'data'",
                yours=f"{dict(mesh.shape)}", expected=f"{{'data': {N_DEVICES}}}")
    n = int(ctx.rng("mesh-n").choice([2, 4]))
    small = learner_mesh(impl, n)
    fail_unless([d.id for d in small.devices.flat] == list(range(n)),
                f"make_mesh({n}) should use the first {n} devices",
                yours=[d.id for d in small.devices.flat], expected=list(range(n)))


@checker.check(1, "explicit_shardings")
def _(impl, ctx):
    mesh = learner_mesh(impl)
    sh = get_function(impl, "shardings")(mesh)
    fail_unless(isinstance(sh, dict) and {"params", "batch"} <= set(sh),
                "shardings must return {'params': ..., 'batch': ...}", yours=sh)
    for name, want in (("params", P()), ("batch", P("data"))):
        s = sh[name]
        fail_unless(isinstance(s, NamedSharding), f"shardings()[{name!r}] must be a "
                    "NamedSharding", yours=type(s).__name__, expected="NamedSharding",
                    hint="NamedSharding(mesh, PartitionSpec(...)) says where each "
                    "dimension goes")
        spec = tuple(x for x in s.spec)
        while spec and spec[-1] is None:
            spec = spec[:-1]
        fail_unless(s.mesh.devices.size == N_DEVICES and spec == tuple(want),
                    f"shardings()[{name!r}] has the wrong spec", yours=str(s.spec),
                    expected=str(want), hint="params: P() (replicated); batch: "
                    "P('data') (rows split across the mesh axis)")


@checker.check(1, "state_replicated_batch_split")
def _(impl, ctx):
    mesh = learner_mesh(impl)
    config = run_config(ctx, "placement")
    state = learner_state(impl, config, mesh)
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        name = jax.tree_util.keystr(path)
        fail_unless(isinstance(leaf, jax.Array), f"state leaf {name} is not a jax.Array",
                    yours=type(leaf).__name__, expected="jax.Array on the mesh")
        fail_unless(devices_of(leaf) == list(range(N_DEVICES)),
                    f"state leaf {name} is not on every device of the mesh",
                    yours=devices_of(leaf), expected=list(range(N_DEVICES)),
                    hint="build the state with out_shardings=NamedSharding(mesh, P())")
        full = host(leaf)
        for shard in leaf.addressable_shards:
            fail_unless(host(shard.data).shape == full.shape,
                        f"state leaf {name} is split, not replicated", yours=
                        f"device {shard.device.id} holds {host(shard.data).shape}",
                        expected=f"every device holds {full.shape}")
    rows = int(ctx.rng("rows").integers(3, 9)) * 2 + 1  # odd rows per device
    batch = stage_batch(ctx, "placement-batch", rows)
    placed = get_function(impl, "place_batch")(batch, mesh)
    for key in ("x", "y", "mask"):
        leaf = placed[key]
        fail_unless(isinstance(leaf, jax.Array) and devices_of(leaf) ==
                    list(range(N_DEVICES)), f"batch[{key!r}] is not spread over the mesh",
                    yours=devices_of(leaf) if isinstance(leaf, jax.Array) else leaf,
                    expected=list(range(N_DEVICES)))
        for shard in leaf.addressable_shards:
            d = shard.device.id
            want = batch[key][d * rows:(d + 1) * rows]
            got = host(shard.data)
            fail_unless(got.shape == want.shape and np.array_equal(got, want),
                        f"device {d} does not hold rows {d * rows}..{(d + 1) * rows - 1} "
                        f"of batch[{key!r}]", yours=got.shape, expected=want.shape,
                        hint="rows split evenly across the mesh axis: P('data')")


@checker.check(1, "init_state_matches")
def _(impl, ctx):
    mesh = learner_mesh(impl)
    config = run_config(ctx, "init")
    state = learner_state(impl, config, mesh)
    fail_unless(is_key(state["key"]), "state['key'] must be a typed PRNG key",
                yours=getattr(state["key"], "dtype", type(state["key"]).__name__),
                expected="key<fry> (jax.random.key)",
                hint="jax.random.key(seed), not the legacy uint32 PRNGKey")
    ref = ref_state(config)
    compare_trees(flat(state["params"]), flat(ref["params"]), "initial params",
                  rtol=1e-6, atol=1e-7, hint="params from the first half of "
                  "jax.random.split(jax.random.key(config['seed']))")
    fail_unless(np.array_equal(host(state["key"]), host(ref["key"])),
                "the training key is not the second half of split(key(seed))",
                yours=host(state["key"]), expected=host(ref["key"]))
    for name in ("step", "data_pos"):
        fail_unless(host(state[name]).shape == () and int(host(state[name])) == 0 and
                    np.issubdtype(host(state[name]).dtype, np.integer),
                    f"state[{name!r}] must be an int32 scalar 0",
                    yours=host(state[name]), expected=0)
    for leaf in jax.tree.leaves(state["opt_state"]):
        fail_unless(not np.any(host(leaf)), "a fresh optimizer state is all zeros",
                    yours=host(leaf), expected="zeros")


def checker_placement(tree) -> dict:
    out = {}
    for path, leaf in jax.tree_util.tree_leaves_with_path(tree):
        out[jax.tree_util.keystr(path)] = {
            "shape": list(leaf.shape), "devices": devices_of(leaf),
            "pieces": {s.device.id: [list(sl.indices(dim)[:2])
                                     for sl, dim in zip(s.index, leaf.shape)]
                       for s in leaf.addressable_shards}}
    return out


@checker.check(1, "placement_report_matches")
def _(impl, ctx):
    describe = get_function(impl, "describe_placement")
    rng = ctx.rng("describe")
    rows = int(rng.integers(2, 7)) * 2 + 1
    mesh = jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices())
    half = jax.make_mesh((4,), ("data",), devices=jax.devices()[4:])
    tree = {
        "replicated": jax.device_put(np.ones((int(rng.integers(3, 9)), 5), np.float32),
                                     NamedSharding(mesh, P())),
        "rows": jax.device_put(np.ones((rows * N_DEVICES, 3), np.float32),
                               NamedSharding(mesh, P("data"))),
        "cols_on_half": jax.device_put(np.ones((3, 4 * rows), np.float32),
                                       NamedSharding(half, P(None, "data"))),
        "one_device": jax.device_put(np.ones((7,), np.float32),
                                     jax.devices()[int(rng.integers(0, N_DEVICES))]),
        "scalar": jax.device_put(np.int32(3), NamedSharding(mesh, P())),
    }
    yours = describe(tree)
    expected = checker_placement(tree)
    fail_unless(isinstance(yours, dict) and sorted(yours) == sorted(expected),
                "describe_placement must have one entry per array, keyed by "
                "jax.tree_util.keystr(path)", yours=sorted(yours) if isinstance(yours, dict)
                else yours, expected=sorted(expected))
    for name, want in expected.items():
        got = yours[name]
        fail_unless(isinstance(got, dict), f"entry {name} must be a dict", yours=got)
        fail_unless([int(v) for v in got.get("shape", [])] == want["shape"] and
                    [int(v) for v in got.get("devices", [])] == want["devices"],
                    f"{name}: shape or devices wrong",
                    yours={k: got.get(k) for k in ("shape", "devices")},
                    expected={k: want[k] for k in ("shape", "devices")},
                    hint="devices: sorted ids of leaf.sharding.device_set")
        pieces = got.get("pieces")
        fail_unless(isinstance(pieces, dict), f"{name}: pieces must be a dict", yours=pieces)
        norm = {int(d): [[int(a), int(b)] for a, b in spans] for d, spans in pieces.items()}
        fail_unless(norm == want["pieces"], f"{name}: pieces do not match the shards "
                    "each device holds", yours=norm, expected=want["pieces"],
                    hint="for each shard in leaf.addressable_shards: [start, stop] of "
                    "every slice in shard.index, resolved against the shape")


@checker.check(1, "step_matches_single_device")
def _(impl, ctx):
    mesh = learner_mesh(impl)
    config = run_config(ctx, "step1")
    state = learner_state(impl, config, mesh)
    step = learner_step(impl, config)
    place = get_function(impl, "place_batch")
    n_steps = int(ctx.rng("nsteps").integers(3, 6))
    rows = int(ctx.rng("rows1").integers(3, 9)) * 2 + 1
    batches = [stage_batch(ctx, f"step1-batch{i}", rows) for i in range(n_steps)]
    losses = []
    for b in batches:
        out = step(state, place(b, mesh))
        fail_unless(isinstance(out, tuple) and len(out) == 2,
                    "the step must return (new_state, loss)", yours=type(out).__name__)
        state, loss = out
        losses.append(float(host(loss)))
    ref, ref_losses = ref_train(config, n_steps, batches)
    hint = ("loss = classifier.loss(params, x + noise * normal(sub, x.shape), y, mask) "
            "with key, sub = split(state['key']); one optax update per step")
    fail_unless(np.allclose(losses, ref_losses, rtol=RTOL, atol=ATOL),
                f"losses over {n_steps} steps differ from one device's",
                yours=np.array(losses), expected=np.array(ref_losses), hint=hint)
    compare_trees(flat(state["params"]), flat(ref["params"]),
                  f"params after {n_steps} steps on {N_DEVICES} devices vs 1 device",
                  hint=hint)
    fail_unless(np.array_equal(host(state["key"]), host(ref["key"])),
                "the key after the steps is not split(key)[0] once per step",
                yours=host(state["key"]), expected=host(ref["key"]))
    for name in ("step", "data_pos"):
        fail_unless(int(host(state[name])) == n_steps, f"state[{name!r}] must count steps",
                    yours=int(host(state[name])), expected=n_steps)
    ctx.cache["stage1_state"] = state
    for path, leaf in jax.tree_util.tree_leaves_with_path(state):
        fail_unless(devices_of(leaf) == list(range(N_DEVICES)),
                    f"after the step, {jax.tree_util.keystr(path)} left the mesh",
                    yours=devices_of(leaf), expected=list(range(N_DEVICES)),
                    hint="keep the state replicated on the mesh (no device_get, no "
                    "single-device arrays inside the step)")


@checker.check(1, "compiled_step_has_all_reduce")
def _(impl, ctx):
    mesh = learner_mesh(impl)
    config = run_config(ctx, "hlo")
    state = learner_state(impl, config, mesh)
    step = learner_step(impl, config)
    batch = get_function(impl, "place_batch")(stage_batch(ctx, "hlo-batch", 5), mesh)
    fail_unless(hasattr(step, "lower"), "make_train_step must return the jax.jit object",
                yours=type(step).__name__, expected="a jitted function (has .lower)",
                hint="return jax.jit(step)")
    text = step.lower(state, batch).compile().as_text()
    fail_unless("all-reduce" in text, "the compiled step has no all-reduce: the "
                "gradient is not summed across the devices that hold the rows",
                yours="no all-reduce in compiled HLO", expected="an all-reduce",
                hint="params replicated (P()), batch split (P('data')), loss over the "
                "global batch: XLA then adds the all-reduce itself")


@checker.check(1, "mixed_meshes_reported")
def _(impl, ctx):
    check = get_function(impl, "check_same_mesh")
    mesh = learner_mesh(impl)
    rep, rows = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    good = {"w": jax.device_put(np.ones((3, 3), np.float32), rep),
            "x": jax.device_put(np.ones((16, 2), np.float32), rows)}
    result = check(good, mesh)
    fail_unless(result is None, "check_same_mesh raised or returned something on arrays "
                "that all live on the mesh", yours=result, expected=None)
    rng = ctx.rng("mixed")
    dev = int(rng.integers(0, N_DEVICES))
    half = jax.make_mesh((4,), ("data",), devices=jax.devices()[:4])
    name_a = "feat_" + "".join(rng.choice(list("abcdefgh"), 5))
    cases = [({"w": good["w"], name_a: jax.device_put(np.ones(4, np.float32),
                                                       jax.devices()[dev])}, name_a),
             ({"params": {"w1": jax.device_put(np.ones((4, 2), np.float32),
                                               NamedSharding(half, P()))},
               "x": good["x"]}, "w1")]
    for tree, culprit in cases:
        try:
            check(tree, mesh)
        except ValueError as err:
            text = str(err)
            fail_unless(culprit in text and "mesh" in text.lower(),
                        "the message must name the array that is elsewhere and the mesh",
                        yours=text[:200], expected=f"a message naming {culprit!r} and "
                        "the mesh's devices", hint="use jax.tree_util.keystr(path)")
        else:
            raise CheckFailed(f"an array ({culprit}) on other devices was not reported",
                              yours="no error", expected="ValueError naming it",
                              hint="compare leaf.sharding.device_set with the mesh's "
                              "devices")


# ---------------------------------------------------------------------------------------
# Stage 2: count-weighted global updates
# ---------------------------------------------------------------------------------------

def ref_grads(params, batch) -> tuple[float, dict]:
    """Single device, only the valid rows: what every correct sharded version equals."""
    keep = batch["mask"] > 0
    x, y = jnp.asarray(batch["x"][keep]), jnp.asarray(batch["y"][keep])
    value, grads = jax.value_and_grad(classifier.loss)(params, x, y)
    return float(value), grads


def mean_of_means(params, batch) -> dict:
    """The wrong answer on purpose: the plain mean over shards of per-shard means."""
    xs = np.split(batch["x"], N_DEVICES)
    ys = np.split(batch["y"], N_DEVICES)
    ms = np.split(batch["mask"], N_DEVICES)
    per = [jax.grad(classifier.loss)(params, jnp.asarray(x), jnp.asarray(y), jnp.asarray(m))
           for x, y, m in zip(xs, ys, ms)]
    return jax.tree.map(lambda *g: sum(g) / len(g), *per)


def vec(tree) -> np.ndarray:
    return np.concatenate([np.ravel(host(v)).astype(np.float64)
                           for _, v in sorted(flat(tree).items())])


def diagnose(got: np.ndarray, ref: np.ndarray, mom: np.ndarray | None) -> str:
    if not np.all(np.isfinite(got)):
        return ("NaN or inf: a shard with no valid rows divided by its own count (0); "
                "divide the summed gradient by the *global* valid count")

    def close(a, b):
        return np.linalg.norm(a - b) <= 1e-3 * np.linalg.norm(b)
    n = N_DEVICES
    if close(got, n * ref):
        return (f"{n}x the true gradient: pmean after grad inside shard_map with "
                "replicated params (the transpose of a replicated input already summed "
                "the shards); take grad of the shard's loss sum and divide by the global "
                "count, with no pmean on the gradient")
    if mom is not None and close(got, mom):
        return ("this is the mean of per-shard means: a shard with 3 valid rows weighs as "
                "much as one with 64; sum per-shard gradient sums, divide by the total "
                "valid count")
    if mom is not None and close(got, n * mom):
        return (f"{n}x the mean of per-shard means: pmean(grad(mean loss)) inside "
                "shard_map; use per-shard loss sums and one division by the global count")
    ratio = np.linalg.norm(got) / max(np.linalg.norm(ref), 1e-30)
    return (f"norm ratio yours/expected = {ratio:.3g}; compare with one device's gradient "
            "over the valid rows")


def checker_mesh():
    """Stage 2 uses the checker's own mesh and placement, so it does not depend on
    stage 1's functions."""
    return jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices(),
                         axis_types=(jax.sharding.AxisType.Auto,))


def place_rows(batch: dict, mesh) -> dict:
    return {k: jax.device_put(v, NamedSharding(mesh, P("data"))) for k, v in batch.items()}


def check_global_grads(impl, ctx, salt: str, counts, what: str) -> None:
    global_grads = get_function(impl, "global_grads")
    mesh = checker_mesh()
    rng = ctx.rng(salt)
    rows = int(rng.integers(5, 12)) * 2 + 1
    counts = [min(c, rows) for c in counts]
    batch = stage_batch(ctx, salt + "-batch", rows, counts)
    params = _init_params(jax.random.key(int(rng.integers(0, 2**30))))
    placed = place_rows(batch, mesh)
    params_on_mesh = jax.device_put(params, NamedSharding(mesh, P()))
    out = global_grads(params_on_mesh, placed, mesh)
    fail_unless(isinstance(out, tuple) and len(out) == 2, "global_grads must return "
                "(loss, grads)", yours=type(out).__name__)
    loss, grads = out
    ref_loss, ref = ref_grads(params, batch)
    got, want = vec(grads), vec(ref)
    mom = vec(mean_of_means(params, batch)) if min(counts) > 0 else None
    ok = np.all(np.isfinite(got)) and np.allclose(got, want, rtol=RTOL, atol=ATOL)
    if not ok:
        raise CheckFailed(f"{what}: gradients differ from one device's over the valid rows "
                          f"(valid rows per shard {list(counts)})", yours=got,
                          expected=want, hint=diagnose(got, want, mom))
    loss = float(host(loss))
    fail_unless(math.isclose(loss, ref_loss, rel_tol=RTOL, abs_tol=ATOL),
                f"{what}: the loss is not the mean over all valid rows",
                yours=loss, expected=ref_loss,
                hint="psum the shards' loss sums, divide by the psum of the counts")


@checker.check(2, "valid_counts_per_shard")
def _(impl, ctx):
    counted = get_function(impl, "shard_valid_counts")
    mesh = checker_mesh()
    rng = ctx.rng("counts")
    rows = int(rng.integers(4, 10)) * 2 + 1
    counts = rng.integers(0, rows + 1, N_DEVICES)
    mask = random_mask(rng, rows, counts)
    placed = jax.device_put(mask, NamedSharding(mesh, P("data")))
    got = np.asarray(host(counted(placed, mesh))).astype(np.int64)
    fail_unless(got.shape == (N_DEVICES,) and np.array_equal(got, counts),
                "valid rows per shard differ", yours=got, expected=np.asarray(counts),
                hint="inside shard_map each device sums its own piece of the mask; "
                "out_specs P('data') gathers one number per device")


@checker.check(2, "uses_shard_map")
def _(impl, ctx):
    global_grads = get_function(impl, "global_grads")
    mesh = checker_mesh()
    batch = place_rows(stage_batch(ctx, "jaxpr", 3), mesh)
    params = jax.device_put(_init_params(jax.random.key(1)), NamedSharding(mesh, P()))
    text = str(jax.make_jaxpr(lambda p, b: global_grads(p, b, mesh))(params, batch))
    fail_unless("shard_map" in text, "global_grads does not use jax.shard_map",
                yours="no shard_map in its jaxpr", expected="a shard_map",
                hint="this stage is about writing the per-shard code yourself: "
                "jax.shard_map(f, mesh=mesh, in_specs=..., out_specs=...)")


@checker.check(2, "equal_counts_not_8x")
def _(impl, ctx):
    rng = ctx.rng("equal")
    c = int(rng.integers(3, 11))
    check_global_grads(impl, ctx, "equal", [c] * N_DEVICES, "equal valid counts")


@checker.check(2, "unequal_counts_weighted")
def _(impl, ctx):
    rng = ctx.rng("unequal")
    counts = [int(v) for v in rng.integers(1, 30, N_DEVICES)]
    counts[int(rng.integers(0, N_DEVICES))] = 1
    counts[int(rng.integers(0, N_DEVICES))] = 99  # clipped to a full shard
    check_global_grads(impl, ctx, "unequal", counts, "unequal valid counts")


@checker.check(2, "empty_shard_handled")
def _(impl, ctx):
    rng = ctx.rng("empty")
    counts = [int(v) for v in rng.integers(1, 30, N_DEVICES)]
    for d in rng.choice(N_DEVICES, 2, replace=False):
        counts[int(d)] = 0
    check_global_grads(impl, ctx, "empty", counts, "shards with no valid rows")


# ---------------------------------------------------------------------------------------
# Stage 3: fresh-process recovery
# ---------------------------------------------------------------------------------------

def run_limit(ctx) -> float:
    return ctx.cache.get("run_limit", FIRST_LIMIT_S)


def failed_run(what: str, run: trainruns.Run, limit: float) -> Exception:
    """The learner's own error from the training process (status not-implemented or
    error), else what happened to the process (killed at the limit, crashed in C++)."""
    if run.report.get("error"):
        return LearnerCodeError(run.report.get("kind", "exception"),
                                f"{what}, in the training process: {run.report['error']}",
                                run.report.get("hint", ""))
    if run.status == "timeout":
        return CheckFailed(f"{what}: the process did not get there within {limit:g} s and "
                           "was killed (a hang?)", yours=f"steps reported: "
                           f"{run.report.get('steps', [])[-3:]}",
                           expected="the run reaches its end (or the point where the "
                           "checker kills it)", hint="does train call on_step(step, loss) "
                           "after every step and save every save_every steps?")
    if run.status == "exited":
        return CheckFailed(f"{what}: the run ended before the checker could kill it",
                           yours=f"steps reported: {run.report.get('steps', [])[-3:]}",
                           expected="a save at every multiple of save_every, on_step after "
                           "every step", hint="train must save at every multiple of "
                           "save_every and call on_step(step, loss) after every step")
    return CheckFailed(f"{what}: {run.error}",
                       yours=procgroup.last_line(run.proc.stderr())[:300] or "no output",
                       expected="the process ends with status 0",
                       hint="run the driver by hand to see the whole error: "
                       f"python {trainruns.DRIVER.relative_to(ROOT)} --help")


def skip_if_hung(ctx) -> None:
    if ctx.cache.get("hung"):
        raise CheckFailed(f"not run: an earlier training process ({ctx.cache['hung']}) "
                          "hung and was killed; fix that first",
                          yours="an earlier run hung", expected="every run ends")


def driver_run(ctx, name: str, config: dict, ckpt: Path, what: str, **opts) -> dict:
    """Run the driver (to the end, or until it is killed where ``opts`` say); its report
    with ``final`` leaves (a finished run) or ``marker`` (a killed one)."""
    skip_if_hung(ctx)
    limit = run_limit(ctx)
    run = trainruns.run_training(ctx.impl_path, config, ckpt, ctx.subdir("logs"), name,
                                 limit=limit, **opts)
    if run.status == "timeout":
        ctx.cache["hung"] = name
    stopping = "block_after_step" in opts or "block_in_save" in opts
    if run.status != ("killed" if stopping else "ok"):
        raise failed_run(what, run, limit)
    return dict(run.report, final=run.final, marker=run.marker,
                duration_s=run.duration_s)


def once(ctx, name: str, make):
    """``make()`` the first time; later calls return the same value or raise the same
    failure (a broken run is not started again by every check that needs it)."""
    if name not in ctx.cache:
        try:
            ctx.cache[name] = ("ok", make())
        except Exception as err:  # noqa: BLE001 - re-raised to every check that needs it
            ctx.cache[name] = ("failed", err)
    status, value = ctx.cache[name]
    if status == "failed":
        raise value
    return value


def stage3_config(ctx) -> dict:
    if "config3" not in ctx.cache:
        ctx.cache["config3"] = run_config(ctx, "stage3")
    return ctx.cache["config3"]


def uninterrupted(ctx) -> dict:
    def make():
        config = stage3_config(ctx)
        ckpt = ctx.subdir("run-F") / "ckpt"
        started = time.perf_counter()
        report = driver_run(ctx, "F", config, ckpt, "the uninterrupted run")
        if "COURSE_RUN_LIMIT_S" not in os.environ:
            ctx.cache["run_limit"] = max(MIN_LIMIT_S, 8 * (time.perf_counter() - started))
        return report
    return once(ctx, "F", make)


def killed_mid_run(ctx) -> dict:
    """Run A, SIGKILLed mid-run *while it saves*: blocked after the checkpoint of step
    3 x save_every is written to its temporary folder and before the commit. Then B, a
    fresh process, resumes from A's folder; a copy of the folder (as A left it) is kept
    for the 4-device restart. Both kill checks read these two runs."""
    return once(ctx, "A", lambda: _killed_mid_run(ctx))


def _killed_mid_run(ctx) -> dict:
    full = uninterrupted(ctx)
    config = stage3_config(ctx)
    save_at = 3 * config["save_every"]
    ckpt = ctx.subdir("run-A") / "ckpt"
    report = driver_run(ctx, "A", config, ckpt, "the run to be killed",
                        block_in_save=save_at)
    killed = {"save_at": save_at, "marker": report.get("marker", {}),
              "steps": report.get("steps", []), "finalized": trainruns.finalized_steps(ckpt),
              "temporary": trainruns.tmp_folders(ckpt), "ckpt": ckpt,
              "copy": ctx.subdir("run-A-copy") / "ckpt"}
    shutil.rmtree(killed["copy"], ignore_errors=True)
    shutil.copytree(ckpt, killed["copy"])
    if killed["finalized"]:
        killed["resumed"] = driver_run(ctx, "B", config, ckpt, "the resumed run")
    killed["full"] = full
    return killed


def check_resumed(report: dict, restored: int | None, what: str) -> None:
    first = report.get("first_step")
    if restored is None:
        return
    fail_unless(first == restored + 1, f"{what}: the fresh process did not continue from "
                f"the newest finished checkpoint (step {restored})",
                yours=f"first step run: {first}", expected=f"first step run: {restored + 1}",
                hint="restore_latest must restore manager.latest_step() and train must "
                "start from the restored state (step, key, data_pos and all)")


@checker.check(3, "state_roundtrip")
def _(impl, ctx):
    import orbax.checkpoint  # noqa: F401 - imported here so stages 1, 2, 4 skip it

    mesh = learner_mesh(impl)
    config = run_config(ctx, "roundtrip")
    state = learner_state(impl, config, mesh)
    step = learner_step(impl, config)
    n = int(ctx.rng("roundtrip-n").integers(2, 5))
    data = ref_data(config)
    place = get_function(impl, "place_batch")
    for i in range(n):
        state, _ = step(state, place(ref_batch(data, config, i), mesh))
    directory = ctx.subdir("roundtrip") / "ckpt"
    make_manager = get_function(impl, "make_checkpoint_manager")
    manager = make_manager(str(directory), 3)
    empty = get_function(impl, "restore_latest")(manager, state)
    fail_unless(empty is None, "restore_latest on an empty folder must return None",
                yours=type(empty).__name__, expected=None)
    get_function(impl, "save_state")(manager, state)
    manager.wait_until_finished()
    manager.close()
    fail_unless(n in trainruns.finalized_steps(directory), f"no finished checkpoint of step {n} in "
                "the folder", yours=sorted(p.name for p in directory.iterdir()),
                expected=[str(n)], hint="save as step int(state['step']); a save that "
                "returned may still be running: wait_until_finished")
    fresh = learner_state(impl, config, mesh)
    manager = make_manager(str(directory), 3)
    try:
        restored = get_function(impl, "restore_latest")(manager, fresh)
    finally:
        manager.close()
    fail_unless(isinstance(restored, dict), "restore_latest must return the state dict",
                yours=type(restored).__name__, expected="dict")
    want = flat(state)
    for field, hint in (("key", "save and restore the typed PRNG key itself; a key "
                         "re-made from the seed repeats the noise of the first steps"),
                        ("data_pos", "restore the data position: starting the data order "
                         "over feeds the model batches it has already seen"),
                        ("step", "restore the step counter"),
                        ("opt_state", "the optimizer's momentum is part of the state"),
                        ("params", "restore the parameters")):
        fail_unless(field in restored, f"the restored state has no {field!r}",
                    yours=sorted(restored), expected=field, hint=hint)
        if field == "key":
            fail_unless(is_key(restored["key"]), "the restored key is not a typed key",
                        yours=getattr(restored["key"], "dtype", None),
                        expected="key<fry>", hint=hint)
        got = {k: v for k, v in flat(restored).items() if k.startswith(f"['{field}']")}
        exp = {k: v for k, v in want.items() if k.startswith(f"['{field}']")}
        compare_trees(got, exp, f"restored {field}", bitwise=True, hint=hint)
    for path, leaf in jax.tree_util.tree_leaves_with_path(restored):
        fail_unless(devices_of(leaf) == list(range(N_DEVICES)),
                    f"restored {jax.tree_util.keystr(path)} is not on the mesh",
                    yours=devices_of(leaf), expected=list(range(N_DEVICES)),
                    hint="restore onto `like`'s shardings: ShapeDtypeStruct(shape, dtype, "
                    "sharding=leaf.sharding)")


@checker.check(3, "uninterrupted_run_trains")
def _(impl, ctx):
    report = uninterrupted(ctx)
    config = stage3_config(ctx)
    fail_unless(report["steps"] == list(range(1, config["steps"] + 1)),
                "on_step was not called once per step, in order",
                yours=report["steps"][:5] + ["..."], expected=[1, 2, 3, "..."])
    ref, ref_losses = ref_train(config, config["steps"])
    fail_unless(np.allclose(report["losses"], ref_losses, rtol=RTOL, atol=ATOL),
                "the losses of the run differ from the checker's single-device run",
                yours=np.array(report["losses"]), expected=np.array(ref_losses),
                hint="batches from batch_at(data, config, data_pos), noise from the "
                "state's key, one update per step")
    final = report["final"]
    compare_trees({k: v for k, v in final.items() if k.startswith("['params']")},
                  {f"['params']{k}": v for k, v in flat(ref["params"]).items()},
                  "final params vs the checker's single-device run")
    fail_unless(report["final_step"] == config["steps"] and
                report["final_data_pos"] == config["steps"],
                "the final state's step or data_pos is wrong",
                yours=(report["final_step"], report["final_data_pos"]),
                expected=(config["steps"], config["steps"]))
    fail_unless(trainruns.finalized_steps(ctx.subdir("run-F") / "ckpt"),
                "the run wrote no finished checkpoint", yours=[],
                expected=f"steps that are multiples of {config['save_every']}")


@checker.check(3, "resume_after_sigkill_bitwise")
def _(impl, ctx):
    killed = killed_mid_run(ctx)
    fail_unless(killed["finalized"], f"no finished checkpoint before the kill (the run had "
                f"reported steps up to {killed['steps'][-1:]})",
                yours={"finished": [], "temporary": killed["temporary"]},
                expected=f"checkpoints of steps {stage3_config(ctx)['save_every']}, ...",
                hint="save every save_every steps; a save that returned may still be "
                "running, but the next save waits for it")
    restored = max(killed["finalized"])
    resumed = killed["resumed"]
    check_resumed(resumed, restored, "after the SIGKILL")
    compare_trees(resumed["final"], killed["full"]["final"],
                  f"SIGKILLed, resumed in a fresh process from step {restored}, vs never "
                  "interrupted (same mesh)", bitwise=True,
                  hint="same mesh, same inputs, same order gives the same bits: restore "
                  "the key, data_pos and optimizer state exactly, and take batch_at(...) "
                  "from the restored data_pos")


@checker.check(3, "kill_during_save_falls_back")
def _(impl, ctx):
    killed = killed_mid_run(ctx)
    save_at = killed["save_at"]
    fail_unless("blocked_in_save" in killed["marker"], "the run was not stopped inside a "
                "save", yours=killed["marker"], expected={"blocked_in_save": save_at})
    fail_unless(save_at not in killed["finalized"] and killed["temporary"],
                f"the save of step {save_at} was not left half-written by the kill",
                yours={"finished": killed["finalized"], "temporary": killed["temporary"]},
                expected=f"a temporary folder for step {save_at}")
    fail_unless(killed["finalized"], "no earlier finished checkpoint to fall back to",
                yours={"finished": [], "temporary": killed["temporary"]},
                expected=f"checkpoints before step {save_at}")
    restored = max(killed["finalized"])
    resumed = killed["resumed"]
    check_resumed(resumed, restored, f"after a kill during the save of step {save_at}")
    compare_trees(resumed["final"], killed["full"]["final"],
                  f"killed while saving step {save_at}, resumed from {restored}",
                  bitwise=True, hint="restore the newest *finished* checkpoint "
                  "(manager.latest_step() ignores unfinished ones)")


@checker.check(3, "restore_on_other_device_count")
def _(impl, ctx):
    killed = killed_mid_run(ctx)
    full = killed["full"]
    restored = max(killed["finalized"]) if killed["finalized"] else None
    resumed = driver_run(ctx, "D", stage3_config(ctx), killed["copy"],
                         "the run resumed on 4 devices", devices=4)
    fail_unless(resumed.get("device_count") == 4, "the resumed run did not see 4 devices",
                yours=resumed.get("device_count"), expected=4)
    check_resumed(resumed, restored, "on 4 devices")
    compare_trees(resumed["final"], full["final"], "resumed on 4 devices vs 8 devices",
                  hint="restore onto the shardings of a state made on *this* run's mesh "
                  "(ShapeDtypeStruct with sharding=...), not the saved ones")


def two_processes(ctx) -> dict:
    return once(ctx, "M", lambda: _two_processes(ctx))


def _two_processes(ctx) -> dict:
    skip_if_hung(ctx)
    limit = float(MP_LIMIT_S) if MP_LIMIT_S else 2 * run_limit(ctx)
    runs = trainruns.run_processes(ctx.impl_path, stage3_config(ctx),
                                   ctx.subdir("run-M") / "ckpt", ctx.subdir("logs"), "M",
                                   nproc=2, devices_per_process=N_DEVICES // 2, limit=limit)
    if any(r.status == "timeout" for r in runs):
        ctx.cache["hung"] = "two-process run"
    result = {"procs": [r.proc for r in runs], "reports": [r.report for r in runs],
              "limit": limit}
    if all(r.status == "ok" for r in runs):
        result["finals"] = [r.final for r in runs]
    return result


# Errors the JAX runtime raises in a process that was waiting for another one (a
# collective, a barrier, the coordination service): symptoms, not the cause.
WAITING = re.compile(r"DEADLINE_EXCEEDED|timed out|heartbeat|UNAVAILABLE|Barrier", re.I)


def progress(report: dict) -> str:
    steps = report.get("steps") or []
    if steps:
        return f"last step reported: {steps[-1]}"
    if report.get("init_kwargs") is not None:
        return "joined the run, no training step reported"
    return "never joined the run"


def two_process_failure(result: dict) -> Exception | None:
    """None when both processes finished; else a named error: the learner's exception
    and the process it came from; or, when the only errors are the runtime giving up
    waiting, the process that stopped responding (with how far each one got)."""
    if "finals" in result:
        return None
    reports = result["reports"]
    summary = procgroup.describe(result["procs"], result["limit"])
    culprits = [(i, r) for i, r in enumerate(reports)
                if r.get("error") and not WAITING.search(r["error"])]
    if culprits:
        i, report = culprits[0]
        return LearnerCodeError(report.get("kind", "exception"),
                                f"the two-process run: process {i} raised: "
                                f"{report['error']} ({summary})", report.get("hint", ""))
    waiting = [i for i, r in enumerate(reports) if r.get("error")]
    silent = [i for i, r in enumerate(reports) if not r.get("error")]
    where = "; ".join(f"process {i}: {progress(r)}" for i, r in enumerate(reports))
    if waiting and silent:
        error = reports[waiting[0]]["error"]
        return CheckFailed(
            f"the two-process run: process {silent[0]} stopped responding (hung or "
            f"crashed); process {waiting[0]} gave up waiting for it: {error[:200]}",
            yours=f"{where}; {summary}", expected="both processes end with status 0",
            hint="look for code that only some processes run (a sleep, an input, a branch "
            "on jax.process_index()) before a collective or a checkpoint save")
    return CheckFailed(f"the two-process run failed: {summary}",
                       yours=where, expected="both processes end with status 0",
                       hint="a process that raises or hangs holds the others in a "
                       "collective; set all three jax.distributed timeouts")


@checker.check(3, "distributed_timeouts_set")
def _(impl, ctx):
    result = two_processes(ctx)
    kwargs = [r.get("init_kwargs") for r in result["reports"]]
    if not any(kwargs):
        failure = two_process_failure(result)
        if failure:
            raise failure
        raise CheckFailed("initialize_distributed did not call jax.distributed.initialize",
                          hint="jax.distributed.initialize(coordinator, num_processes, "
                          "process_id, ...)")
    for i, kw in enumerate(kwargs):
        if kw is None:
            failure = two_process_failure(result)
            raise CheckFailed(f"process {i} never reached jax.distributed.initialize",
                              yours=procgroup.describe(result["procs"], result["limit"]),
                              expected="both processes call initialize_distributed first",
                              hint=str(failure) if failure else "")
        for name in ("initialization_timeout", "heartbeat_timeout_seconds",
                     "shutdown_timeout_seconds"):
            value = kw.get(name)
            fail_unless(isinstance(value, (int, float)) and 0 < value <= 60,
                        f"process {i}: {name} is not set to a short timeout",
                        yours=value, expected="a few seconds (<= 60)",
                        hint="the defaults (300 s, 100 s, 300 s) turn one crashed "
                        "process into minutes of every process hanging")


@checker.check(3, "two_processes_match_one")
def _(impl, ctx):
    result = two_processes(ctx)
    failure = two_process_failure(result)
    if failure:
        raise failure
    full = uninterrupted(ctx)
    counts = [(r.get("process_count"), r.get("device_count")) for r in result["reports"]]
    fail_unless(all(c == (2, N_DEVICES) for c in counts), "each process must see 2 "
                f"processes and {N_DEVICES} devices in all", yours=counts,
                expected=[(2, N_DEVICES)] * 2)
    a, b = result["finals"]
    compare_trees(a, b, "process 0 vs process 1 final state", bitwise=True,
                  hint="both processes hold the same replicated state")
    compare_trees(a, full["final"], "2 processes x 4 devices vs 1 process x 8 devices",
                  hint="each process places its rows of the same global batch "
                  "(jax.make_array_from_callback) on a mesh over jax.devices()")


# ---------------------------------------------------------------------------------------
# Stage 4: trace and timing
# ---------------------------------------------------------------------------------------

class CountingFn:
    """Counts calls and which of them compiled; never synchronises itself."""

    def __init__(self, fn):
        self.fn = fn
        self.calls = 0
        self.compiled_at: list[int] = []
        self.compiles = 0

    def __call__(self, *args):
        with count_compiles() as n:
            out = self.fn(*args)
        if n[0]:
            self.compiled_at.append(self.calls)
            self.compiles += n[0]
        self.calls += 1
        return out


def timing_workload(ctx):
    """A fresh jitted data-parallel step (never called yet), its state and batch on the
    mesh, and its correct loss. Wide enough that a step takes milliseconds."""
    rng = ctx.rng("timing")
    mesh = jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices(),
                         axis_types=(jax.sharding.AxisType.Auto,))
    rows = int(rng.integers(60, 80)) * 16 + 8
    hidden = int(rng.integers(200, 260))
    x, y = blobs(rng, rows * N_DEVICES)
    mask = np.ones(rows * N_DEVICES, np.float32)
    params = jax.jit(classifier.init_params, static_argnames="hidden")(
        jax.random.key(int(rng.integers(0, 2**30))), hidden=hidden)
    config = {"lr": 0.05, "momentum": 0.9, "noise": 0.1}
    step = ref_step_fn(config)
    rep, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    state = jax.device_put({"params": params, "momentum": jax.tree.map(jnp.zeros_like,
                                                                       params),
                            "key": jax.random.key(int(rng.integers(0, 2**30)))}, rep)
    batch = {k: jax.device_put(np.asarray(v), split) for k, v in
             (("x", x), ("y", y), ("mask", mask))}

    def fn(state, batch):
        params, momentum, key, loss = step(state["params"], state["momentum"], state["key"],
                                           batch["x"], batch["y"], batch["mask"])
        return {"params": params, "momentum": momentum, "key": key}, loss

    loss = float(ref_step_fn(config)(*jax.device_put(
        (params, jax.tree.map(jnp.zeros_like, params), state["key"], x, y, mask),
        jax.devices()[0]))[3])
    return fn, state, batch, loss


def learner_record(impl, ctx) -> tuple[dict, CountingFn, dict]:
    if "record" not in ctx.cache:
        profile = get_function(impl, "profile_train_step")
        fn, state, batch, loss = timing_workload(ctx)
        counted = CountingFn(jax.jit(fn))
        rng = ctx.rng("profile-args")
        args = {"region": "step_" + "".join(rng.choice(list("abcdefghjkmnpqrstuvwxyz"), 6)),
                "warmup": int(rng.integers(1, 4)), "iters": int(rng.integers(6, 10)),
                "trace_steps": int(rng.integers(2, 4))}
        logdir = ctx.subdir("profile")
        record = profile(counted, state, batch, str(logdir), expected_loss=loss, **args)
        fail_unless(isinstance(record, dict), "profile_train_step must return a dict",
                    yours=type(record).__name__, expected="a run record dict")
        ctx.cache["record"] = (record, counted, dict(args, logdir=logdir, fn=fn,
                                                     state=state, batch=batch, loss=loss))
    return ctx.cache["record"]


@checker.check(4, "record_is_valid")
def _(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    problems = validate_run_record(record, check_trace=True)
    fail_unless(not problems, "the run record is not in the format performance-audit "
                "stage 4 reads", yours=problems, expected=[],
                hint="coursekit.provenance.records.make_run_record(timing, boundary=..., "
                "trace=..., region=...)")
    path = ctx.subdir("records") / "run.json"
    path.write_text(json.dumps(record))
    back = read_run_record(path)
    fail_unless(back["boundary"] and back["region"] == args["region"] and
                back["output_ok"] is True and back["iters"] == args["iters"],
                "the record does not describe this measurement",
                yours={k: back[k] for k in ("boundary", "region", "output_ok", "iters")},
                expected={"region": args["region"], "output_ok": True,
                          "iters": args["iters"]})


@checker.check(4, "compile_apart_and_calls")
def _(impl, ctx):
    record, counted, args = learner_record(impl, ctx)
    calls = 1 + args["warmup"] + args["iters"] + args["trace_steps"]
    fail_unless(counted.calls == calls, "profile_train_step made the wrong number of calls",
                yours=f"{counted.calls} calls", expected=f"{calls} = 1 first + "
                f"{args['warmup']} warmup + {args['iters']} timed + {args['trace_steps']} "
                "traced", hint="one first call alone, then warmup, iters, trace_steps")
    fail_unless(counted.compiled_at == [0], "the compile did not happen in the first call "
                "alone", yours=f"compiled in calls {counted.compiled_at}",
                expected="only call 0")
    fail_unless(record.get("compiles_first_call") == counted.compiles and
                record.get("compiles_warmed") == 0,
                "compile counts in the record do not match what jax.monitoring saw",
                yours=(record.get("compiles_first_call"), record.get("compiles_warmed")),
                expected=(counted.compiles, 0),
                hint="count with coursekit.measure.timing.count_compiles()")


@checker.check(4, "samples_are_synchronised")
def _(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    samples = record.get("samples_s")
    fail_unless(isinstance(samples, list) and len(samples) == args["iters"] and
                len(set(samples)) > 1, "samples_s must hold one raw sample per timed call",
                yours=samples, expected=f"{args['iters']} distinct floats")
    reference = time_synced(jax.jit(args["fn"]), args["state"], args["batch"], warmup=2,
                            iters=7).median_s
    ratio = float(np.median(samples)) / reference
    fail_unless(1 / TIME_RATIO_WINDOW <= ratio <= TIME_RATIO_WINDOW,
                f"your median is {ratio:.3g}x the checker's synchronised measurement",
                yours=f"{np.median(samples) * 1e3:.4g} ms",
                expected=f"about {reference * 1e3:.4g} ms (within {TIME_RATIO_WINDOW:g}x)",
                hint="jax.block_until_ready(out) inside every timed boundary: the step "
                "returns before the devices finish")


@checker.check(4, "trace_holds_region")
def _(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    trace = Path(record.get("trace") or "")
    fail_unless(trace.is_file(), "the record's trace file does not exist",
                yours=str(trace), expected="a *.trace.json.gz under logdir")
    newest = traces.newest_trace(args["logdir"])
    fail_unless(trace.resolve() == newest.resolve(), "the trace is not the newest one under "
                "logdir", yours=str(trace), expected=str(newest))
    summary = traces.region_summary(trace, args["region"])
    fail_unless(summary["count"] == args["trace_steps"],
                "the annotated region is not in the trace once per traced step",
                yours=summary["count"], expected=args["trace_steps"],
                hint="jax.profiler.TraceAnnotation(region, step=i) around each call")
    fail_unless(summary["child_us"] > 0, "the region holds no events: the step did not "
                "run inside it", yours=summary, expected="the jitted step nested inside",
                hint="synchronise inside the annotation")


@checker.check(4, "wrong_output_refused")
def _(impl, ctx):
    profile = get_function(impl, "profile_train_step")
    _, _, args = learner_record(impl, ctx)
    wrong = args["loss"] * 1.01 + 0.01
    record = profile(jax.jit(args["fn"]), args["state"], args["batch"],
                     str(ctx.subdir("profile-wrong")), region="wrong", warmup=1, iters=3,
                     trace_steps=1, expected_loss=wrong)
    fail_unless(isinstance(record, dict) and record.get("output_ok") is False,
                "a wrong loss was not caught before timing",
                yours=record.get("output_ok") if isinstance(record, dict) else record,
                expected=False, hint="compare the first call's loss with expected_loss "
                "(rtol 1e-5) before anything is timed")
    fail_unless(record.get("samples_s") == [] and not record.get("trace"),
                "a run with a wrong output must not be timed or traced",
                yours={"samples_s": record.get("samples_s"), "trace": record.get("trace")},
                expected={"samples_s": [], "trace": ""})


if __name__ == "__main__":
    sys.exit(checker.main())

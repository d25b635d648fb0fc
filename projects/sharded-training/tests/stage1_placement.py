"""sharded-training stage 1: mesh and placement. The learner's mesh, shardings, state
and batch placement are read back from the arrays themselves (their device sets and
shards), and its sharded step is compared with the checker's single-device step."""

from __future__ import annotations

import jax
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharded_harness import ATOL, N_DEVICES, RTOL, checker
from sharded_learner import learner_mesh, learner_state, learner_training
from sharded_reference import ref_state, ref_train, run_config, stage_batch
from sharded_trees import compare_trees, devices_of, expect_on_mesh, flat, host, is_key

from coursekit.checking.contract import CheckFailed
from coursekit.checking.learner import get_function
from coursekit.checking.probes import random_name
from coursekit.checking.values import fail_unless


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
    mesh, config, state, step = learner_training(impl, ctx, "step1")
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
    expect_on_mesh(state, "after the step, {name} left the mesh",
                   "keep the state replicated on the mesh (no device_get, no "
                   "single-device arrays inside the step)")


@checker.check(1, "compiled_step_has_all_reduce")
def _(impl, ctx):
    mesh, _, state, step = learner_training(impl, ctx, "hlo")
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
    name_a = random_name(rng, "feat_", 5, "abcdefgh")
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

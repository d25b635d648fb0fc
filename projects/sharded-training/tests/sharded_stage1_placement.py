"""sharded-training stage 1: mesh and placement. The learner's mesh, shardings, state
and batch placement are described by the learner process (self-reported, see
``SELF_REPORTED``) and cross-checked against the learner's step exported as StableHLO,
whose declared mesh and argument shardings this process reads and which it compiles
and runs itself on its own 8 devices; the step's values are compared with the
checker's single-device step."""

from __future__ import annotations

import jax
import numpy as np
import sharded_expected
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharded_harness import ATOL, N_DEVICES, RTOL, checker
from sharded_learner import (
    ALL,
    ask,
    call,
    call_plain,
    checker_mesh_there,
    learner_fn,
    learner_mesh,
    learner_state,
    learner_step,
    learner_training,
    place,
    run_step,
)
from sharded_program import declared, exported
from sharded_reference import ref_state, ref_train, run_config, stage_batch
from sharded_trees import (
    compare_trees,
    cross_check_pieces,
    expect_on_mesh,
    flat,
    host,
    hosts,
    is_key,
)

from coursekit.checking.bridge import Handle
from coursekit.checking.errors import CheckFailed, TamperEvidence
from coursekit.checking.graded import available
from coursekit.checking.learner import on_input
from coursekit.checking.probes import random_name
from coursekit.checking.values import fail_unless


@checker.check(1)
def mesh_over_devices(impl, ctx):
    count = ask(impl, "device_count")
    fail_unless(count == N_DEVICES, f"the learner process sees {count} devices, not "
                f"{N_DEVICES}", yours=count, expected=N_DEVICES,
                hint="do not change XLA_FLAGS or JAX_PLATFORMS in your file: the checker "
                "sets 8 CPU devices before jax is imported")
    _, info = learner_mesh(impl)
    fail_unless(len(info["device_ids"]) == N_DEVICES and info["axis_names"] == ["data"],
                "make_mesh() should span every device on one axis named 'data'",
                yours=f"{info['shape']}", expected=f"{{'data': {N_DEVICES}}}")
    # one device is a mesh too; and an odd count, not only powers of two
    for n in (1, int(ctx.rng("mesh-n").choice([2, 3, 4, 5, 6, 7]))):
        with on_input(f"make_mesh({n}): a mesh of the first {n} of the {N_DEVICES} "
                      "devices"):
            _, small = learner_mesh(impl, n)
        fail_unless(small["device_ids"] == list(range(n)),
                    f"make_mesh({n}) should use the first {n} devices",
                    yours=small["device_ids"], expected=list(range(n)))


@checker.check(1)
def explicit_shardings(impl, ctx):
    mesh, _ = learner_mesh(impl)
    learner_fn(impl, "shardings")
    sh = impl.shardings(mesh)
    fail_unless(isinstance(sh, dict) and {"params", "batch"} <= set(sh),
                "shardings must return {'params': ..., 'batch': ...}", yours=sh)
    for name, want in (("params", []), ("batch", ["data"])):
        s = sh[name]
        info = ask(impl, "sharding_info", s) if isinstance(s, Handle) else \
            {"is_named": False, "type": type(s).__name__}
        fail_unless(info.get("is_named"), f"shardings()[{name!r}] must be a "
                    "NamedSharding", yours=info.get("type"), expected="NamedSharding",
                    hint=f"yours is a {info.get('type')}: the contract's shardings are "
                    "NamedShardings on the mesh given")
        spec = list(info["spec"])
        while spec and spec[-1] is None:
            spec = spec[:-1]
        what = ("replicated: the whole value on every device of the mesh" if not want
                else "split: axis 0 (rows) across the mesh axis, the rest whole")
        fail_unless(len(info["mesh"].get("device_ids", [])) == N_DEVICES and spec == want,
                    f"shardings()[{name!r}] has the wrong spec", yours=info["spec_text"],
                    expected=what, hint=f"yours places {name} as {info['spec_text']} on "
                    f"{len(info['mesh'].get('device_ids', []))} devices; the contract has "
                    f"it {what.split(':')[0]} on the {N_DEVICES} of the mesh")
    # and on a mesh of some devices only (the checker's own, devices drawn per run): each
    # sharding is on the mesh it was given, not on one of every device
    rng = ctx.rng("shardings-mesh")
    ids = sorted(int(i) for i in rng.choice(N_DEVICES, int(rng.integers(2, N_DEVICES)),
                                            replace=False))
    part = impl.shardings(checker_mesh_there(impl, ids))
    for name in ("params", "batch"):
        s = part.get(name) if isinstance(part, dict) else None
        info = ask(impl, "sharding_info", s) if isinstance(s, Handle) else {}
        got = (info.get("mesh") or {}).get("device_ids")
        fail_unless(got == ids, f"shardings(mesh)[{name!r}] is not on the mesh it was "
                    f"given (a mesh of devices {ids})", yours=got, expected=ids,
                    hint="each sharding lives on the mesh passed in, whatever devices it "
                    "holds: a mesh built inside shardings is another mesh")


@checker.check(1)
def state_replicated_batch_split(impl, ctx):
    mesh, _ = learner_mesh(impl)
    config = run_config(ctx, "placement")
    state = learner_state(impl, config, mesh)
    for name, where in state.placement.items():
        fail_unless(where["is_array"], f"state leaf {name} is not a jax.Array",
                    yours=where["type"], expected="jax.Array on the mesh")
        fail_unless(where["devices"] == ALL,
                    f"state leaf {name} is not on every device of the mesh",
                    yours=where["devices"], expected=ALL,
                    hint="every state leaf is a full copy on every device of the mesh "
                    "init_state is given")
        for dev, shape in where["piece_shapes"].items():
            fail_unless(shape == where["shape"], f"state leaf {name} is split, not "
                        "replicated", yours=f"device {dev} holds {shape}",
                        expected=f"every device holds {where['shape']}")
    rows = int(ctx.rng("rows").integers(3, 9)) * 2 + 1  # odd rows per device
    batch = stage_batch(ctx, "placement-batch", rows)
    placed = call(impl, "place_batch", batch, mesh, shards=True)
    cross_check_pieces(placed)
    for key in ("x", "y", "mask"):
        where = placed.placement.get(f"['{key}']", {"is_array": False, "type": "missing"})
        fail_unless(where["is_array"] and where["devices"] == ALL,
                    f"batch[{key!r}] is not spread over the mesh",
                    yours=where.get("devices", where["type"]), expected=ALL)
        for dev, got in where["shard_data"].items():
            d = int(dev)
            want = batch[key][d * rows:(d + 1) * rows]
            got = np.asarray(got)
            fail_unless(got.shape == want.shape and np.array_equal(got, want),
                        f"device {d} does not hold rows {d * rows}..{(d + 1) * rows - 1} "
                        f"of batch[{key!r}]", yours=got.shape, expected=want.shape,
                        hint=(f"device {d} holds {rows} rows, as many as the contract "
                              f"gives it, but not rows {d * rows}..{(d + 1) * rows - 1} of "
                              "the batch: each device holds one consecutive block of rows, "
                              "in device order") if got.shape == want.shape else
                        f"device {d} holds {got.shape[0] if got.ndim else 0} rows "
                        f"where the contract gives it rows {d * rows}..{(d + 1) * rows - 1}: "
                        "the rows split evenly across the mesh axis, in device order")


@checker.check(1)
def init_state_matches(impl, ctx):
    mesh, _ = learner_mesh(impl)
    config = run_config(ctx, "init")
    # Built under JAX's device-to-device transfer guard, in the learner's own call: a
    # state computed on one device and then copied onto the mesh passes in one process
    # but fails in a multi-process run (stage 3), where a typed key cannot be device_put
    # onto other processes' devices.
    guarded = ask(impl, "call_guarded", learner_fn(impl, "init_state"), config, mesh)
    fail_unless("refused" not in guarded, "init_state built the state on one device and "
                "copied it onto the mesh", yours=f"a device-to-device copy during "
                f"init_state, refused by JAX's transfer guard: {guarded.get('refused')}",
                expected="no copy: every leaf created on the mesh's devices",
                hint="the state was made in one place and then copied onto the mesh's "
                "devices: in a multi-process run a typed key cannot be copied onto other "
                "processes' devices, so each leaf must be created where it lives")
    state = learner_state(impl, config, mesh)
    key = state.leaves.get("['key']")
    fail_unless(is_key(key), "state['key'] must be a typed PRNG key",
                yours=getattr(key, "dtype", key), expected="a typed key: dtype key<fry>",
                hint="yours is an array of that dtype, not a typed key: a uint32 array is "
                "the legacy raw key")
    ref = ref_state(config)
    compare_trees(hosts(state.field("params")), flat(ref["params"]), "initial params",
                  rtol=1e-6, atol=1e-7, hint="the params come from the first of the two keys "
                  "split from the typed key of config['seed']")
    fail_unless(np.array_equal(host(key), host(ref["key"])),
                "the training key is not the second half of split(key(seed))",
                yours=host(key), expected=host(ref["key"]))
    for name in ("step", "data_pos"):
        value = host(state.leaves.get(f"['{name}']"))
        fail_unless(value.shape == () and int(value) == 0 and
                    np.issubdtype(value.dtype, np.integer),
                    f"state[{name!r}] must be an int32 scalar 0", yours=value, expected=0)
    for leaf in state.field("opt_state").values():
        fail_unless(not np.any(host(leaf)), "a fresh optimizer state is all zeros",
                    yours=host(leaf), expected="zeros")


def layout_report(values: dict, layout: dict) -> dict:
    """What describe_placement must return for ``values`` placed as ``layout`` asks
    (``sharded_learner.place``), worked out from the layout by the contract's arithmetic,
    never read from an array: a mesh axis on a dimension cuts it into equal consecutive
    blocks in the mesh's device order; every other dimension is whole on each device;
    one device's sharding has no spec."""
    out = {}
    for name in sorted(values):
        how = layout[name]
        if how.get("host"):
            continue
        shape = [int(n) for n in np.shape(values[name])]
        devices = [int(how["device"])] if "device" in how else [int(d) for d in
                                                                how["devices"]]
        spec = [] if "device" in how else list(how.get("spec", []))
        pieces = {d: [[i * n // len(devices), (i + 1) * n // len(devices)]
                      if k < len(spec) and spec[k] is not None else [0, n]
                      for k, n in enumerate(shape)] for i, d in enumerate(devices)}
        out[f"['{name}']"] = {"shape": shape, "devices": sorted(devices), "pieces": pieces,
                              "spec": "" if "device" in how else str(P(*spec))}
    return out


@checker.check(1)
def placement_report_matches(impl, ctx):
    learner_fn(impl, "describe_placement")
    rng = ctx.rng("describe")
    rows = int(rng.integers(2, 7)) * 2 + 1
    one = int(rng.integers(0, N_DEVICES))
    values = {"replicated": np.ones((int(rng.integers(3, 9)), 5), np.float32),
              "rows": np.ones((rows * N_DEVICES, 3), np.float32),
              "cols_on_half": np.ones((3, 4 * rows), np.float32),
              "one_device": np.ones((7,), np.float32), "scalar": np.int32(3),
              "a_host_value": np.arange(3, dtype=np.int32)}  # first leaf: not a jax.Array
    layout = {"a_host_value": {"host": True}, "replicated": {"devices": ALL, "spec": []},
              "rows": {"devices": ALL, "spec": ["data"]},
              "cols_on_half": {"devices": ALL[4:], "spec": [None, "data"]},
              "one_device": {"device": one}, "scalar": {"devices": ALL, "spec": []}}
    expected = layout_report(values, layout)
    there = place(impl, values, layout)
    for name, want in expected.items():  # the tree there is the one asked for
        got = there.placement.get(name, {})
        shapes = {int(d): shape for d, shape in (got.get("piece_shapes") or {}).items()}
        if got.get("devices") != want["devices"] or \
                shapes != {d: [b - a for a, b in spans] for d, spans in want["pieces"].items()}:
            raise TamperEvidence(f"the learner process did not place {name} as the "
                                 "checker asked")
    yours = call_plain(impl, "describe_placement", there.kept)
    fail_unless(isinstance(yours, dict) and sorted(yours) == sorted(expected),
                "describe_placement must have one entry per jax.Array leaf (and none for "
                "other leaves), keyed by jax.tree_util.keystr(path)",
                yours=sorted(yours) if isinstance(yours, dict) else yours,
                expected=sorted(expected))
    for name, want in expected.items():
        got = yours[name]
        fail_unless(isinstance(got, dict), f"entry {name} must be a dict", yours=got)
        fail_unless([int(v) for v in got.get("shape", [])] == want["shape"] and
                    [int(v) for v in got.get("devices", [])] == want["devices"],
                    f"{name}: shape or devices wrong",
                    yours={k: got.get(k) for k in ("shape", "devices")},
                    expected={k: want[k] for k in ("shape", "devices")},
                    hint="the shape and the sorted ids of the devices that hold the "
                    "array, as the array itself has them: yours differ")
        fail_unless(got.get("spec") == want["spec"], f"{name}: spec is not the "
                    "sharding's PartitionSpec", yours=got.get("spec"), expected=want["spec"],
                    hint="the text of the array's own PartitionSpec (\"\" where its "
                    "sharding has none): yours is another")
        pieces = got.get("pieces")
        fail_unless(isinstance(pieces, dict), f"{name}: pieces must be a dict", yours=pieces)
        keys = sorted(map(repr, pieces))
        fail_unless(all(isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                        for d in pieces), f"{name}: pieces are keyed by the device id, "
                    "an int", yours=keys[:8], expected=sorted(want["pieces"])[:8],
                    hint=f"your keys are {type(next(iter(pieces))).__name__}s "
                    f"({keys[0]}): the device id itself, shard.device.id, an int, keys "
                    "each piece (a str of it looks the same in print, and d[0] misses it)"
                    if pieces else None)
        bounds = [b for spans in pieces.values() for span in spans for b in span]
        fail_unless(all(isinstance(b, (int, np.integer)) and not isinstance(b, bool)
                        for b in bounds), f"{name}: pieces hold bounds "
                    "that are not ints", yours=pieces, expected=want["pieces"],
                    hint="each bound a plain int within the shape: a slice over a whole "
                    "dimension has start and stop None, and its bounds are still [0, size]"
                    if None in bounds else "each bound a plain int within the shape")
        norm = {int(d): [[int(a), int(b)] for a, b in spans] for d, spans in pieces.items()}
        fail_unless(norm == want["pieces"], f"{name}: pieces do not match the shards "
                    "each device holds", yours=norm, expected=want["pieces"],
                    hint=pieces_hint(norm, want["pieces"]))


def pieces_hint(yours: dict, want: dict) -> str:
    """What wrong pieces show: where each of the learner's pieces has the size of the
    right one but starts at 0 in every dimension, it is the local shard's extent."""
    sizes = lambda spans: [b - a for a, b in spans]  # noqa: E731
    if (set(yours) == set(want) and any(yours[d] != want[d] for d in want)
            and all(all(a == 0 for a, _ in yours[d]) and sizes(yours[d]) == sizes(want[d])
                    for d in want)):
        moved = next(d for d in sorted(want) if yours[d] != want[d])
        return (f"each of your pieces starts at 0 in every dimension, with the size of the "
                f"shard the device holds: device {moved}'s is {yours[moved]}, where its "
                f"shard lies at {want[moved]} of the whole array. A piece is where the "
                "shard sits in the global array, not the shard's own extent")
    return ("one entry per piece this process can see, keyed by its device id: the "
            "[start, stop) each dimension of the piece covers, as plain ints within the "
            "shape")


STEP_HINT = ("the step must be the one make_train_step's docstring states (the key's "
             "split, the input noise, the loss over the global batch's valid rows, one "
             "optimizer update): the checker replays exactly that on one device")


def learner_run(impl, config: dict, batches: list, mesh=None) -> tuple:
    """The learner's state after its step ran on ``batches`` from ``init_state(config,
    mesh)`` (the full mesh by default), and the loss of each step."""
    mesh = learner_mesh(impl)[0] if mesh is None else mesh
    state, step = learner_state(impl, config, mesh), learner_step(impl, config)
    losses = []
    for i, b in enumerate(batches):
        given, placed = state, call(impl, "place_batch", b, mesh)
        state, loss = run_step(impl, step, given, placed)
        losses.append(float(host(loss)))
        if i == 0:
            inputs_kept(impl, given, placed)
    return state, losses


def params_updated(state, config: dict, n_steps: int) -> None:
    """Fails, naming it, when the params after the steps are still the initial ones."""
    initial = flat(ref_state(config)["params"])
    after = hosts(state.field("params"))
    if sorted(after) == sorted(initial) and all(
            np.array_equal(after[k], initial[k]) for k in initial):
        raise CheckFailed(f"after {n_steps} steps your params are still the initial ones",
                          yours="params unchanged", expected="params moved by each update",
                          hint="the step returns a loss, but no update reaches the params "
                          "of the state it returns: the new state carries the old params")


def key_advanced(state, config: dict, n_steps: int) -> None:
    """Fails, naming it, when the key after the steps is still the initial one (every step
    then draws the same noise)."""
    initial = np.asarray(jax.random.key_data(ref_state(config)["key"]))
    after = host(state.leaves["['key']"])
    if np.array_equal(after, initial):
        raise CheckFailed(f"after {n_steps} steps the state's key is still the initial one",
                          yours="key unchanged", expected="a new key after each step",
                          hint="the state each step returns carries the key it was given: "
                          "every step draws the same noise from the same key")


def key_chain(config: dict, n_steps: int, half: int) -> np.ndarray:
    """The key's data after ``n_steps`` splits from the initial state's key, each keeping
    ``half`` of the split (the contract keeps half 0)."""
    key = ref_state(config)["key"]
    for _ in range(n_steps):
        key = jax.random.split(key)[half]
    return np.asarray(jax.random.key_data(key))


def step_hint(state, config: dict, n_steps: int) -> str:
    """The hint for a step whose result differs: the slip the state's key shows where it
    shows one (computed here from the initial key, so in a learner's copy too), else
    the whole protocol."""
    if np.array_equal(host(state.leaves["['key']"]), key_chain(config, n_steps, 1)):
        return ("your state's key after the steps is the one kept by taking the second "
                "half of each split: the key's two halves are swapped, so the new key and "
                "the input noise each come from the half meant for the other (the noise "
                "then differs from the replay's at every step)")
    return STEP_HINT


def against_the_gradient_hint(params: dict, want: dict, config: dict) -> str | None:
    """Where the params moved from the initial ones nearly opposite to the replay's move
    (cosine below -0.9 over every param): the update went up the gradient (blind-b7:
    optax's updates subtracted, where they are already the change to add). The initial
    params are computed here from the config's seed, so in a learner's copy too."""
    init = flat(ref_state(config)["params"])
    if sorted(init) != sorted(params) or sorted(init) != sorted(want):
        return None
    yours = np.concatenate([np.ravel(params[k] - init[k]) for k in sorted(init)])
    theirs = np.concatenate([np.ravel(want[k] - init[k]) for k in sorted(init)])
    norms = float(np.linalg.norm(yours) * np.linalg.norm(theirs))
    cosine = float(yours @ theirs) / norms if norms else 0.0
    if cosine < -0.9:
        return (f"your params moved from the initial ones nearly opposite to the replay's "
                f"move (cosine {cosine:.2f} over every param): each update went up the "
                "gradient, not down (the optimizer's updates are the change to add)")
    return None


def matches(state, losses: list, want: dict, n_steps: int, what: str,
            config: dict) -> None:
    """The learner's losses and final state against ``want`` (losses, params, key)."""
    hint = step_hint(state, config, n_steps)
    if hint == STEP_HINT:
        hint = against_the_gradient_hint(hosts(state.field("params")), want["params"],
                                         config) or hint
    fail_unless(np.allclose(losses, want["losses"], rtol=RTOL, atol=ATOL),
                f"losses over {n_steps} steps differ from {what}",
                yours=np.array(losses), expected=np.array(want["losses"]), hint=hint)
    compare_trees(hosts(state.field("params")), want["params"],
                  f"params after {n_steps} steps on {N_DEVICES} devices vs {what}",
                  hint=hint)
    fail_unless(np.array_equal(host(state.leaves["['key']"]), want["key"]),
                "the key after the steps is not split(key)[0] once per step",
                yours=host(state.leaves["['key']"]), expected=want["key"], hint=hint)
    rows = sorted({len(b["x"]) for b in want.get("batches", [])})
    for name in ("step", "data_pos"):
        value = int(host(state.leaves[f"['{name}']"]))
        per = value / n_steps if n_steps else 0
        fail_unless(value == n_steps, f"state[{name!r}] must count steps",
                    yours=value, expected=n_steps,
                    hint=f"yours grew by {per:g} a step, the rows of each batch: it counts "
                    "the steps taken (one per batch), not the rows read"
                    if rows == [per] else "")
    expect_on_mesh(state.placement, "after the step, {name} left the mesh",
                   "keep the state replicated on the mesh (no device_get, no "
                   "single-device arrays inside the step)")


@checker.check(1)
def step_matches_single_device(impl, ctx):
    # The public case: fixed inputs and the single-device reference's stored numbers
    # (sharded_expected), the same in a learner's copy and where the instructor grades.
    public = sharded_expected.load()
    n_steps = len(public["batches"])
    state, losses = learner_run(impl, public["config"], public["batches"])
    params_updated(state, public["config"], n_steps)
    key_advanced(state, public["config"], n_steps)
    matches(state, losses, public, n_steps, "one device's (stored for these inputs)",
            public["config"])
    # A drawn case: the instructor's single-device step live where the course holds it;
    # in a learner's copy, the learner's own step on one device of the same inputs.
    config = run_config(ctx, "step1")
    n_steps = int(ctx.rng("nsteps").integers(3, 6))
    rows = int(ctx.rng("rows1").integers(3, 9)) * 2 + 1
    batches = [stage_batch(ctx, f"step1-batch{i}", rows) for i in range(n_steps)]
    state, losses = learner_run(impl, config, batches)
    if available():
        ref, ref_losses = ref_train(config, n_steps, batches)
        want, what = {"losses": ref_losses, "params": flat(ref["params"]),
                      "key": host(ref["key"])}, "one device's"
    else:
        one, one_losses = learner_run(impl, config, batches, learner_mesh(impl, 1)[0])
        want, what = {"losses": one_losses, "params": hosts(one.field("params")),
                      "key": host(one.leaves["['key']"])}, "your step on one device"
    matches(state, losses, want, n_steps, what, config)


def inputs_kept(impl, state, batch) -> None:
    """Fails when a step left the caller's state or batch deleted (donated inputs)."""
    gone = [f"state{k}" for k, dead in ask(impl, "deleted", state.kept).items() if dead]
    gone += [f"batch{k}" for k, dead in ask(impl, "deleted", batch.kept).items() if dead]
    shown = ", ".join(gone[:4]) + (" ..." if len(gone) > 4 else "")
    fail_unless(not gone, "after one call of your step, the caller's arrays it was given "
                "are deleted: the step donates its inputs", yours=f"deleted: {shown}",
                expected="the state and batch passed in still usable after the call",
                hint="make_train_step must not donate (no donate_argnums / donate_argnames "
                "on jax.jit): a donated state's buffers are reused for the output and the "
                "caller's arrays are deleted, so whoever still holds them (a checkpoint, a "
                "profiler handing the same state to every call) gets 'Array has been "
                "deleted'")


def reported_split(where: dict) -> bool | None:
    """From a reported placement on every device: True when rows are split across the
    devices, False when every device holds the whole leaf, None otherwise."""
    if not where.get("is_array") or where.get("devices") != ALL:
        return None
    shape, pieces = where["shape"], list(where["piece_shapes"].values())
    if all(s == shape for s in pieces):
        return False
    if shape and shape[0] % N_DEVICES == 0 and \
            all(s == [shape[0] // N_DEVICES, *shape[1:]] for s in pieces):
        return True
    return None


@checker.check(1)
def compiled_step_has_all_reduce(impl, ctx):
    mesh, info = learner_mesh(impl)
    _, _, state, step = learner_training(impl, ctx, "hlo")
    batch = call(impl, "place_batch", stage_batch(ctx, "hlo-batch", 5), mesh)
    desc = ask(impl, "export", step, state.kept, batch.kept)
    fail_unless(desc["has_lower"], "make_train_step must return the jax.jit object",
                yours="no .lower", expected="a jitted function (has .lower)",
                hint="return the jitted step itself, not a function that calls it")
    # The learner's arrays, in the order the program takes them, as this process's own
    # arrays: placed the way the program declares, once its declaration is checked
    # against what the learner process reported.
    names = [("state", k) for k in state.leaves] + [("batch", k) for k in batch.leaves]
    values = list(state.leaves.values()) + list(batch.leaves.values())
    wheres = [state.placement[k] if side == "state" else batch.placement[k]
              for side, k in names]
    exp = exported(desc, values)
    text = exp.mlir_module()
    program = declared(text)
    # A contradiction here is a failure, not tamper evidence: an honest step can re-shard
    # (jit in_shardings) or run on arrays placed on another mesh than make_mesh's.
    fail_unless(program["mesh"] == info["shape"] and program["partitions"] == N_DEVICES,
                "your step does not run on the mesh make_mesh returns",
                yours=f"the exported step declares mesh {program['mesh']}, "
                f"{program['partitions']} partitions",
                expected=f"mesh {info['shape']}, {N_DEVICES} partitions",
                hint="init_state and place_batch put everything on the mesh they are given")
    check_mesh = jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices(),
                               axis_types=(jax.sharding.AxisType.Auto,))
    for module_i, flat_i in enumerate(exp.module_kept_var_idx):
        axes = program["args"].get(module_i, [])
        split = bool(axes) and axes[0] == ["data"]
        said = reported_split(wheres[flat_i])
        side, name = names[flat_i]
        fail_unless(said is None or said == split, f"{side} leaf {name} is "
                    f"{'split' if said else 'replicated'}, but your exported step declares "
                    f"it {'split' if split else 'replicated'}", yours=axes,
                    expected="the placement the array has", hint="your step's program "
                    "asks for this argument on another placement than the one it arrives "
                    "with: the step re-shards its input")
    shardings = [P() for _ in values]
    for module_i, flat_i in enumerate(exp.module_kept_var_idx):
        axes = program["args"].get(module_i, [])
        if axes and axes[0] == ["data"] and not any(axes[1:]):
            shardings[flat_i] = P("data")
    args = [jax.device_put(v, NamedSharding(check_mesh, s)) for v, s in zip(values, shardings)]
    compiled = jax.jit(exp.call).lower(*args).compile()
    fail_unless("all-reduce" in compiled.as_text(), "the compiled step has no all-reduce: "
                "the gradient is not summed across the devices that hold the rows",
                yours="no all-reduce in the HLO compiled here from your exported step",
                expected="an all-reduce",
                hint="the compiled program sums nothing across devices: each device's "
                "gradient stays its own rows' (the contract's step computes the loss "
                "over the global batch, whatever devices hold its rows)")
    mine = host(compiled(*args)[-1])
    _, theirs = run_step(impl, step, state, batch)
    if not np.allclose(mine, host(theirs), rtol=1e-5, atol=1e-6):
        raise TamperEvidence(f"the exported step computes the loss {float(mine):.6g} here, "
                             f"but the step returned {float(host(theirs)):.6g}")


@checker.check(1)
def mixed_meshes_reported(impl, ctx):
    check = learner_fn(impl, "check_same_mesh")
    mesh, _ = learner_mesh(impl)
    rng = ctx.rng("mixed")
    w, x = np.ones((3, 3), np.float32), np.ones((16, 2), np.float32)
    rep, rows = {"devices": ALL, "spec": []}, {"devices": ALL, "spec": ["data"]}
    good = place(impl, {"w": w, "x": x}, {"w": rep, "x": rows})
    result = ask(impl, "raises", check, good.kept, mesh)
    fail_unless(not result["raised"] and result["returned"] == "NoneType",
                "check_same_mesh raised or returned something on arrays that all live on "
                "the mesh", yours=result.get("message", result.get("returned")),
                expected=None)
    dev = int(rng.integers(0, N_DEVICES))
    name_a = random_name(rng, "feat_", 5, "abcdefgh")
    cases = [(place(impl, {"w": w, name_a: np.ones(4, np.float32)},
                    {"w": rep, name_a: {"device": dev}}), name_a),
             (place(impl, {"params": {"w1": np.ones((4, 2), np.float32)}, "x": x},
                    {"params": {"devices": ALL[:4], "spec": []}, "x": rows}), "w1")]
    subset = {name_a: [dev], "w1": list(ALL[:4])}
    # the same number of devices, not the same devices: a leaf on devices 4..7 against
    # a mesh of devices 0..3
    half = N_DEVICES // 2
    small = checker_mesh_there(impl, ALL[:half])
    name_b = random_name(rng, "emb_", 5, "abcdefgh")
    elsewhere = place(impl, {"w": w, name_b: np.ones((2, 3), np.float32)},
                      {"w": {"devices": ALL[:half], "spec": []},
                       name_b: {"devices": ALL[half:], "spec": []}})
    cases.append((elsewhere, name_b, small))
    # a host (numpy) value beside arrays on the mesh: not a jax.Array on the mesh
    name_c = random_name(rng, "host_", 5, "abcdefgh")
    cases.append((place(impl, {"w": w, name_c: np.ones((2, 2), np.float32)},
                        {"w": rep, name_c: {"host": True}}), name_c, None))
    for tree, culprit, *on in cases:
        on_mesh = on[0] if on and on[0] is not None else mesh
        result = ask(impl, "raises", check, tree.kept, on_mesh)
        if result["raised"]:
            text = result["message"]
            fail_unless(culprit in text and "mesh" in text.lower(),
                        "the message must name the array that is elsewhere and the mesh",
                        yours=text[:200], expected=f"a message naming {culprit!r} and "
                        "the mesh's devices", hint=f"your message does not hold "
                        f"{culprit!r} (the leaf's path, as the tree names it) and the mesh")
        elif on and on[0] is None:
            raise CheckFailed(f"a host (numpy) value ({culprit}) in the tree was not "
                              "reported", yours="no error", expected="PlacementError "
                              f"naming {culprit!r}: it is not a jax.Array on the mesh",
                              hint="a leaf that is not a jax.Array is not on the mesh: "
                              "raise for it too, do not skip it. jit would copy a numpy "
                              "value to its devices on every call, and in a multi-process "
                              "run it is one process's value, not an array on the mesh")
        elif on:
            raise CheckFailed(f"an array ({culprit}) on devices {ALL[half:]} was not "
                              f"reported against a mesh of devices {ALL[:half]}: as many "
                              "devices, not the same ones", yours="no error",
                              expected="ValueError naming it",
                              hint=f"the array is on {half} devices, as many as the "
                              "mesh holds, but other ones: it passed as on the mesh")
        else:  # a leaf on some of the mesh's devices only
            devs = subset[culprit]
            raise CheckFailed(f"an array ({culprit}) on {len(devs)} of the mesh's "
                              f"{N_DEVICES} devices ({devs}) was not reported",
                              yours="no error", expected="ValueError naming it",
                              hint=f"the array is on a subset of the mesh's devices ({devs}, "
                              f"not all {N_DEVICES}) and passed as on the mesh: every one of "
                              "those devices is the mesh's, but on the mesh means on exactly "
                              "its devices")
    every_leaf_looked_at(impl, ctx, check, mesh)


# Where in a tree of LEAVES leaves (in the tree's own order) a stray leaf is planted: the
# first, a middle one and the last, so a check that stops early or looks at one leaf fails.
LEAVES = 5
POSITIONS = {"first": 0, "middle": LEAVES // 2, "last": LEAVES - 1}


def every_leaf_looked_at(impl, ctx, check, mesh) -> None:
    """``check_same_mesh`` on trees of LEAVES leaves on the mesh but one, on one device,
    at the first, a middle and the last position of the tree's order."""
    rng = ctx.rng("mixed-positions")
    rep = {"devices": ALL, "spec": []}
    missed = []
    for where, index in POSITIONS.items():
        # sorted names: the tree's order (dict keys, sorted by JAX) is this order
        names = sorted(random_name(rng, f"{chr(ord('a') + 4 * i)}_", 4, "abcdefgh")
                       for i in range(LEAVES))
        culprit, dev = names[index], int(rng.integers(0, N_DEVICES))
        tree = place(impl, {n: np.full(3, i, np.float32) for i, n in enumerate(names)},
                     {n: {"device": dev} if n == culprit else rep for n in names})
        result = ask(impl, "raises", check, tree.kept, mesh)
        if not result["raised"]:
            missed.append(f"{where} ({culprit!r}, leaf {index + 1} of {LEAVES})")
        elif culprit not in result["message"]:
            raise CheckFailed(f"the {where} leaf ({culprit!r}, leaf {index + 1} of {LEAVES}) "
                              "is the one on one device; the message names another",
                              yours=result["message"][:200], expected=f"a message naming "
                              f"{culprit!r}", hint="name the leaf that is off the mesh "
                              "(jax.tree_util.keystr of its path)")
    if missed:
        caught = [w for w in POSITIONS if not any(m.startswith(w) for m in missed)]
        raise CheckFailed(
            f"an array on one device at the {' and the '.join(missed)} of the tree was "
            "not reported", yours="no error", expected="ValueError naming it",
            hint=(f"the stray leaf was reported when it came {' and '.join(caught)} in "
                  "the tree and not when it came later: every leaf after that went "
                  "unchecked (the function stopped before the end of the tree)")
            if caught else "an array on one device passed as on the mesh, wherever it "
            "was in the tree")

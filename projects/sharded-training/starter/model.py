"""sharded-training: train the course classifier data-parallel, recover it, profile it.

Your code goes in this file; check it with

    python projects/sharded-training/tests/check.py --stage N --impl THIS_FILE

The workload is the course's reference classifier (``coursekit.workloads.classifier``, the one
notebook 00 builds), trained on 8 *fake* CPU devices: run with
``XLA_FLAGS=--xla_force_host_platform_device_count=8`` set before ``import jax``
(the checker and notebook 05 do this for you). Fake devices share the same cores, so
nothing here gets faster: these stages check placement and numbers, not speed.

Stages (notebook 05 walks through each):
  1. mesh and placement          make_mesh, shardings, init_state, place_batch,
                                 describe_placement, check_same_mesh, make_train_step
  2. count-weighted updates      shard_valid_counts, global_grads
  3. fresh-process recovery      make_checkpoint_manager, save_state, restore_latest,
                                 initialize_distributed, train
  4. trace and timing            profile_train_step

Training state (a dict; every leaf a jax.Array placed on the mesh, replicated):
  params     the classifier's parameters (``classifier.init_params``)
  opt_state  Optax state of ``make_optimizer(config)`` (SGD with momentum)
  step       int32 scalar, number of steps taken
  key        typed PRNG key (``jax.random.key``), split once per step for input noise
  data_pos   int32 scalar, index of the next batch in the data order (``batch_at``)

Every figure you produce on this machine is a CPU figure; say so wherever you report it.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

from coursekit.measure.timing import count_compiles
from coursekit.provenance.records import make_run_record
from coursekit.workloads import classifier

AXIS = "data"

# The training run used by stage 3. The checker draws its own seeds and sizes.
DEFAULT_CONFIG = {
    "seed": 0,            # params and training key
    "data_seed": 1,       # dataset and the per-epoch data order
    "n_examples": 1000,   # not a multiple of batch: each epoch ends with a padded batch
    "batch": 64,          # global batch (rows), a multiple of the device count
    "spread": 4.0,        # noise of the data around its class centres (overlapping classes)
    "lr": 0.05,
    "momentum": 0.9,
    "noise": 0.1,         # std of the input noise drawn from the state's key each step
    "steps": 40,
    "save_every": 8,
    "max_to_keep": 3,
}


# ---------------------------------------------------------------------------------------
# Given: data, data order and optimizer (not part of any stage)
# ---------------------------------------------------------------------------------------

def make_data(config: dict) -> dict:
    """The training set as host arrays: {"x": (n, 16) float32, "y": (n,) int32}, from
    ``classifier.make_dataset(jax.random.key(data_seed), n_examples, spread=spread)``."""
    x, y = jax.jit(classifier.make_dataset, static_argnums=1)(
        jax.random.key(config["data_seed"]), config["n_examples"],
        spread=config.get("spread", 1.0))
    return {"x": np.asarray(x), "y": np.asarray(y)}


def batches_per_epoch(config: dict) -> int:
    return math.ceil(config["n_examples"] / config["batch"])


def batch_at(data: dict, config: dict, data_pos: int) -> dict:
    """Batch number ``data_pos`` of the data order, as host arrays.

    Epoch ``e = data_pos // batches_per_epoch`` visits the examples in the order
    ``np.random.default_rng([data_seed, e]).permutation(n)``; batch ``b`` of it takes the
    next ``batch`` positions. The last batch of an epoch is padded with row 0 and
    ``mask`` 0, so every batch has the same shape. Returns {"x", "y", "mask" float32}."""
    n, size = config["n_examples"], config["batch"]
    epoch, b = divmod(int(data_pos), batches_per_epoch(config))
    order = np.random.default_rng([config["data_seed"], epoch]).permutation(n)
    idx = order[b * size:(b + 1) * size]
    mask = np.zeros(size, np.float32)
    mask[:idx.size] = 1.0
    idx = np.concatenate([idx, np.zeros(size - idx.size, idx.dtype)])
    return {"x": data["x"][idx], "y": data["y"][idx], "mask": mask}


def make_optimizer(config: dict) -> optax.GradientTransformation:
    return optax.sgd(config["lr"], momentum=config["momentum"])


# ---------------------------------------------------------------------------------------
# Stage 1: mesh and placement
# ---------------------------------------------------------------------------------------

def make_mesh(n_devices: int | None = None) -> jax.sharding.Mesh:
    """A 1-D mesh with axis name ``AXIS`` over the first ``n_devices`` of
    ``jax.devices()`` (all of them when None; in a multi-process run that is every
    process's devices). Done when ``mesh.devices.size == n_devices`` and
    ``mesh.axis_names == ("data",)``."""
    raise NotImplementedError('stage 1: make_mesh')


def shardings(mesh) -> dict:
    """{"params": NamedSharding replicating a value on every device of ``mesh``,
    "batch": NamedSharding splitting axis 0 (rows) across the mesh axis}. Use these,
    explicitly, for everything you place."""
    raise NotImplementedError('stage 1: shardings')


def init_state(config: dict, mesh) -> dict:
    """The training state at step 0, every leaf replicated on ``mesh``: {"params",
    "opt_state", "step", "key", "data_pos"}. The seed ``config["seed"]`` is the only
    source of randomness: its key splits into the params' key (``classifier.init_params``)
    and the training key kept in the state (first and second half of one
    ``jax.random.split``); opt_state is ``make_optimizer(config)``'s initial state for
    those params; step and data_pos are int32 scalars 0; key is a typed key. It must
    work in a multi-process run too (stage 3 starts one). Checked against the checker's
    own state, leaf by leaf, and for where each leaf lives."""
    raise NotImplementedError('stage 1: init_state')


def place_batch(batch: dict, mesh) -> dict:
    """Put a host batch {"x", "y", "mask"} on ``mesh``, rows split across devices
    (``shardings(mesh)["batch"]``). Every process passes the same global batch; each
    keeps only the rows of its own devices. Rows must divide by the device count."""
    raise NotImplementedError('stage 1: place_batch')


def describe_placement(tree) -> dict:
    """Where each array of ``tree`` lives. For every jax.Array leaf, keyed by
    ``jax.tree_util.keystr(path)``:
        {"shape": [int, ...], "spec": str(PartitionSpec) or "" when the sharding has
         none, "devices": sorted device ids holding a piece,
         "pieces": {device id (int): [[start, stop] per dimension]}}
    for the pieces this process can see (``addressable_shards``). A replicated (4, 3)
    array on 2 devices: pieces {0: [[0, 4], [0, 3]], 1: [[0, 4], [0, 3]]}. Leaves that
    are not jax.Arrays are left out."""
    raise NotImplementedError('stage 1: describe_placement')


class PlacementError(ValueError):
    """Arrays that should share one mesh do not."""


def check_same_mesh(tree, mesh) -> None:
    """Raise ``PlacementError`` (a ValueError) unless every leaf of ``tree`` is a
    jax.Array on exactly the devices of ``mesh``. The message names the first leaf that
    is not (``jax.tree_util.keystr(path)``), the devices it is on, the mesh's devices,
    and the fix; e.g. "['x'] lives on devices [0] but the mesh holds devices [0..7]".
    JAX's own error for this names only the function argument."""
    raise NotImplementedError('stage 1: check_same_mesh')


def make_train_step(optimizer: optax.GradientTransformation, noise: float = 0.0):
    """A jitted data-parallel step ``step(state, batch) -> (new_state, loss)``: the
    ``jax.jit`` object itself (the checker reads its compiled HLO: the gradient of
    replicated params from row-sharded data needs an all-reduce); it does not donate its
    inputs.

    What it returns is fixed, since the checker replays it on one device. Of the two
    halves of ``jax.random.split(state["key"])``, the first is the new state's key and the
    second draws the input noise: the rows the loss sees are x plus ``noise`` times a
    standard normal of x's shape and dtype. ``loss`` is ``classifier.loss`` of the params
    on those rows with y and mask (the mean over the valid rows of the *global* batch); the
    new params and opt_state are one ``optimizer`` update by the gradient of that loss;
    the new step and data_pos are one more. Checked: 8 devices and 1 device agree within
    rtol 1e-4 after a few steps."""
    raise NotImplementedError('stage 1: make_train_step')


# ---------------------------------------------------------------------------------------
# Stage 2: count-weighted global updates (explicit per-shard code with shard_map)
# ---------------------------------------------------------------------------------------

def shard_valid_counts(mask, mesh) -> np.ndarray:
    """Valid rows (mask == 1) held by each device of ``mesh``, computed per shard inside
    ``jax.shard_map``; a host int array of shape (devices,), in mesh order."""
    raise NotImplementedError('stage 2: shard_valid_counts')


def global_grads(params: dict, batch: dict, mesh):
    """``(loss, grads)`` of the mean loss over the valid rows of the whole batch, computed
    inside ``jax.shard_map`` (params replicated, batch rows split across the mesh axis).
    Shards may hold different numbers of valid rows, even none: every valid row of the
    global batch weighs the same, whichever shard holds it.

    Must hold: loss a float32 scalar and grads a tree like ``params``, equal to one
    device's loss and gradient over the valid rows of the same batch (rtol 1e-4), for
    any counts, a shard without a valid row included (finite, no 0/0). ``check_vma``
    may be on or off; with it off, some wrong versions agree with one device while the
    counts are equal, so compare yours on unequal counts.

    How it is checked: on 8 devices against the checker's single-device gradient, with
    equal counts, unequal counts and a shard without a valid row, and the program read
    for its ``shard_map``. A failure names the known mistake your numbers match (8x the
    gradient, the mean of per-shard means, NaN); notebook 05 measures where each comes
    from. Size hint: about 10 lines."""
    raise NotImplementedError('stage 2: global_grads')


# ---------------------------------------------------------------------------------------
# Stage 3: fresh-process recovery
# ---------------------------------------------------------------------------------------

def make_checkpoint_manager(directory: str, max_to_keep: int = 3):
    """An Orbax ``CheckpointManager`` for ``directory`` keeping the newest
    ``max_to_keep`` checkpoints. Saves may be asynchronous, but a save that returned is
    not yet on disk: whoever needs it finished waits (``wait_until_finished``)."""
    raise NotImplementedError('stage 3: make_checkpoint_manager')


def save_state(manager, state: dict) -> None:
    """Save the *whole* state (params, opt_state, step, typed key, data_pos) as the
    checkpoint of step ``int(state["step"])``, in Orbax's standard format: the checker
    reads the checkpoint folder itself, with Orbax, and compares every leaf."""
    raise NotImplementedError('stage 3: save_state')


def restore_latest(manager, like: dict):
    """The state of the newest *finalised* checkpoint, or None when there is none.

    ``like`` is a state of the same structure already placed where the restored state
    must live (for example ``init_state(config, mesh)`` on this run's mesh, which may
    have another device count than the run that saved): the restored leaves have its
    shapes, dtypes and shardings, whatever mesh saved them. Every field comes back: a
    state whose key or data_pos starts over does not continue the same run. Checked by
    a round trip on this mesh and by a run resumed on another device count."""
    raise NotImplementedError('stage 3: restore_latest')


def initialize_distributed(coordinator: str, num_processes: int, process_id: int,
                           timeout_s: int = 10) -> None:
    """Join a multi-process JAX run (``jax.distributed.initialize``) with *all three*
    timeouts set to ``timeout_s``: initialization, heartbeat and shutdown. The defaults
    (300 s, 100 s, 300 s) turn one crashed process into minutes of every process
    hanging."""
    raise NotImplementedError('stage 3: initialize_distributed')


def train(config: dict, ckpt_dir: str, mesh, on_step=None) -> dict:
    """Train to ``config["steps"]`` steps, resuming from the newest checkpoint in
    ``ckpt_dir`` when there is one, and return the final state.

    Must hold:
      - the run is the one ``init_state(config, mesh)`` starts: each step is
        ``make_train_step(make_optimizer(config), config["noise"])`` on the batch at
        the state's ``data_pos`` (``batch_at`` of ``make_data(config)``, placed with
        ``place_batch``), so a restored state continues exactly where it was saved;
      - every state whose step is a multiple of ``config["save_every"]`` is saved
        (``save_state``, a manager keeping ``config["max_to_keep"]``), and every save
        has reached the disk, and the manager is closed, before this returns;
      - ``on_step``, when given, is called once per step taken, after it, with the new
        step (int) and its loss (float).
    How it is checked: the checker's runs in fresh processes (killed mid-run and
    mid-save and resumed, resumed on 4 devices, two processes) end with parameters
    *bitwise* equal to a run that was never interrupted on the same mesh, and within
    tolerance across meshes."""
    raise NotImplementedError('stage 3: train')


# ---------------------------------------------------------------------------------------
# Stage 4: trace and timing
# ---------------------------------------------------------------------------------------

def profile_train_step(step_fn, state: dict, batch: dict, logdir: str, *,
                       region: str = "train_step", warmup: int = 2, iters: int = 10,
                       trace_steps: int = 3, expected_loss: float | None = None) -> dict:
    """A run record of ``step_fn(state, batch)``, readable by performance-audit stage 4:
    a ``coursekit.provenance.records.make_run_record`` of boundary "train_step" whose
    timing holds performance-audit ``time_fn``'s fields with their meaning there (label,
    sync "block_until_ready", warmup, iters, first_call_s, raw samples_s,
    compiles_first_call / compiles_warmed (``coursekit.measure.timing.count_compiles``
    counts them), shapes and dtypes of the batch arrays, output_ok, backend), and whose
    trace is the newest ``*.trace.json.gz`` under ``logdir`` with ``region``.

    Must hold (the checker counts your calls of ``step_fn``: ``1 + warmup + iters +
    trace_steps`` when the output is right, one when it is not):
      - every call gets the same ``state`` (the new state is never fed back);
      - the first call is measured alone (compile and run, finished); with
        ``expected_loss`` its loss must be within rtol 1e-5 of it, else ``output_ok`` is
        False, nothing more is called, ``samples_s`` is empty and the trace "";
      - ``samples_s``: ``iters`` raw seconds, each one call finished before its clock
        stops, after ``warmup`` calls that are not samples;
      - the trace holds ``trace_steps`` occurrences of ``region``, each one finished
        step (``step`` = its index), and no compile;
      - the profiler runs around the traced steps only: warm-up and samples run without
        it (a profiler slows the calls it records).
    How it is checked: the record, the samples, the trace and the refusal of a wrong
    output, each against the checker's own count of your calls, its own synchronised
    timing of the same step in rounds interleaved with more calls of yours, and its own
    parse of your trace."""
    raise NotImplementedError('stage 4: profile_train_step')

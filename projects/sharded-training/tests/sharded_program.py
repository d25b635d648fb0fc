"""The learner's jitted code as a program, analysed and run here: the learner process
exports it as StableHLO (``remote_sharded_training.export``); this process deserialises
the bytes, reads the mesh and argument shardings the program declares, and compiles and
runs it on its own 8 devices with its own inputs."""

from __future__ import annotations

import re

import jax
import numpy as np

from coursekit.checking.bridge import TamperEvidence
from coursekit.checking.values import fail_unless


def _aval(text: str, dtypes: dict):
    """'float32[16,4]' (or 'float32[16@data,4]', 'key<fry>[]') as a ShapedArray."""
    m = re.fullmatch(r"(.+?)\[(.*)\]", text.strip())
    if not m:
        raise TamperEvidence(f"the exported program has an unreadable type {text!r}")
    dims = tuple(int(d.split("@")[0]) for d in m.group(2).split(",") if d.strip())
    name = m.group(1)
    dtype = dtypes[name] if name in dtypes else np.dtype(name)
    return jax.core.ShapedArray(dims, dtype)


def exported(desc: dict, args: list):
    """A ``jax.export.Exported`` from the learner's StableHLO bytes, with this process's
    own ``args`` (flat) as the inputs: their types must be the program's."""
    fail_unless(isinstance(desc, dict) and not desc.get("effects"), "the exported step "
                "is not a plain function of its inputs", yours=desc.get("effects")
                if isinstance(desc, dict) else desc, expected="no effects")
    in_avals = tuple(jax.core.ShapedArray(np.shape(a), a.dtype) for a in args)
    mine = [str(a) for a in in_avals]
    theirs = [re.sub(r"@\w+", "", s) for s in desc["in_avals"]]
    fail_unless(mine == theirs, "the exported step's inputs are not the arrays it was "
                "called with", yours=theirs, expected=mine)
    dtypes = {str(a.dtype): a.dtype for a in in_avals}
    out_avals = tuple(_aval(s, dtypes) for s in desc["out_avals"])
    n_in, n_out = len(in_avals), len(out_avals)
    return jax.export.Exported(
        fun_name="learner", in_tree=jax.tree.structure((tuple(range(n_in)), {})),
        in_avals=in_avals, out_tree=jax.tree.structure(tuple(range(n_out))),
        out_avals=out_avals, _in_named_shardings=(None,) * n_in,
        _out_named_shardings=(None,) * n_out, in_shardings_hlo=(None,) * n_in,
        out_shardings_hlo=(None,) * n_out, nr_devices=int(desc["nr_devices"]),
        platforms=tuple(desc["platforms"]), ordered_effects=(), unordered_effects=(),
        disabled_safety_checks=(),
        mlir_module_serialized=bytes(np.asarray(desc["module"], np.uint8).tobytes()),
        calling_convention_version=int(desc["version"]),
        module_kept_var_idx=tuple(int(i) for i in desc["kept"]),
        uses_global_constants=bool(desc["uses_global_constants"]), _get_vjp=None)


def declared(text: str) -> dict:
    """What the program's text declares: ``mesh`` {axis: size} (sdy.mesh @mesh),
    ``partitions`` (mhlo.num_partitions) and ``args`` {module argument index: [axes per
    dimension]} of the public main function (an argument without a sharding: absent)."""
    mesh = {}
    m = re.search(r"sdy\.mesh @mesh = <\[([^\]]*)\]", text)
    if m:
        mesh = {a: int(n) for a, n in re.findall(r'"(\w+)"=(\d+)', m.group(1))}
    parts = re.search(r"mhlo\.num_partitions = (\d+)", text)
    main = next((line for line in text.splitlines() if "func.func public @main(" in line),
                "")
    args = {}
    for i, dims in re.findall(r"%arg(\d+): tensor<[^>]*>\s*\{[^}]*?sdy\.sharding = "
                              r"#sdy\.sharding<@\w+, \[([^\]]*)\]", main):
        args[int(i)] = [re.findall(r'"(\w+)"', d) for d in re.findall(r"\{([^}]*)\}", dims)]
    return {"mesh": mesh, "partitions": int(parts.group(1)) if parts else 1, "args": args}


def manual_computation(text: str) -> bool:
    """Whether the program holds per-shard code (what ``jax.shard_map`` lowers to)."""
    return "sdy.manual_computation" in text or "SPMDFullToShardShape" in text

"""The learner's jitted code as a program, analysed and run here: the learner process
exports it as StableHLO (``remote_sharded_training.export``); this process deserialises
the bytes, reads the mesh and argument shardings the program declares, and compiles and
runs it on its own 8 devices with its own inputs."""

from __future__ import annotations

import re

from coursekit.checking.programs import rebuild


def exported(desc: dict, args: list):
    """A ``jax.export.Exported`` from the learner's StableHLO bytes, with this process's
    own ``args`` (flat) as the inputs: their types must be the program's."""
    return rebuild(desc, args, what="the exported step")


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

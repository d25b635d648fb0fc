"""A checker's reference that the learner release holds only as a compiled program.

Some contracts are replays: the checker recomputes what the learner's function must
return by the protocol its docstring states. Written in Python, such a replay is the
stage's answer, and the release ships every checker (learners run them). A sealed
reference is that replay exported with ``jax.export`` (StableHLO, serialised) from source
that stays with the instructors (``projects/<p>/solution/sealed.py``): the checker loads
and runs the program, never the source.

    replay = sealed.program(TESTS, "train_replay")   # TESTS: the checker's tests/ folder
    params = sealed.call(replay, key_data, x, y, ...)

``python -m coursekit.authoring.sealed`` writes the programs (``make starters`` runs it)
and checks them against their sources. A learner file may not load one
(``coursekit.checking.forbidden``). A program is callable, so it is an answer all the same:
the learner release leaves a checker's sealed replays out (``autograder.release``), and the
checks compare there with the replays' stored outputs for public inputs (foundations:
``projects/foundations/tests/expected/``, written by the project's generator beside its checker).
"""

from __future__ import annotations

import functools
from pathlib import Path

from coursekit.protocol import SEALED_SUFFIX as SUFFIX


class SealedMissing(RuntimeError):
    """The checker's own files are incomplete: nothing the learner's code did."""


def path(tests_dir: Path, name: str) -> Path:
    return Path(tests_dir) / "sealed" / (name + SUFFIX)


@functools.cache
def program(tests_dir: Path, name: str):
    """The ``jax.export.Exported`` stored as ``tests/sealed/<name>.jaxexport``. Written by
    the oldest JAX the course supports, so every JAX in its range reads it
    (``coursekit.compat.jaxapi.deserialize`` says why one cannot)."""
    from coursekit.compat.jaxapi import ProgramUnreadable, deserialize

    file = path(tests_dir, name)
    try:
        return deserialize(file.read_bytes(), f"the checker's reference program {file.name}")
    except ProgramUnreadable as err:
        raise SealedMissing(str(err)) from None
    except (OSError, ValueError) as err:
        raise SealedMissing(
            f"the checker's reference program {file} is missing or unreadable ({err}): "
            "copy the project's tests/ folder from the course release again") from None


def call(exported, *args, x64: bool = False):
    """Run a sealed program on the CPU (it is exported for the CPU only), whatever the
    default device is, with x64 on when it was exported so (its float64 inputs stay
    float64); the result as numpy arrays."""
    import jax
    import numpy as np

    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu), jax.enable_x64(x64):
        out = exported.call(*(jax.device_put(a, cpu) for a in args))
        return jax.tree.map(np.asarray, out)

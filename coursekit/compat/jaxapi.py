"""Every JAX API the course uses that differs across its supported range, bridged here
once (docs/checkers/reference.md, "JAX versions").

The range: ``FLOOR`` (the JAX an accelerator image ships: 0.10.2 on the TPU v5e image,
Python 3.11) to the pinned JAX (pyproject.toml, Python >= 3.12). Code elsewhere calls these
functions instead of comparing versions. ``make test`` runs the version-bound parts under
the floor (tests/test_jax_floor.py). What differs, 0.10.2 against 0.12:

* ``jax.export.Exported`` requires a ``_has_named_shardings`` field (``exported``);
* a program serialised by 0.12 does not deserialise under 0.10.2 ("Failed to deserialize
  StableHLO": jax.export promises only that newer JAX reads older programs), so the
  sealed references are written by the floor (``coursekit.authoring.sealed``), and
  ``deserialize`` names the cause when one cannot be read;
* ``compiled.memory_analysis()`` has no ``total_allocation_bytes`` (read it with
  ``getattr(plan, name, None)``: None where this JAX does not report it);
* XLA:CPU's execution threads in a profiler trace are ``tf_XLAPjRtCpuClient`` (0.12:
  ``tf_XLAExecute``): ``CPU_EXECUTION_THREADS`` holds both prefixes;
* ``jax.make_mesh``'s first parameter is ``axis_shapes`` (0.12: ``axis_sizes``): pass it by
  position; ``jax.profiler.trace`` yields None where 0.12 yields its session (the course
  reads the files, never the session).

Anything else the course calls (jax.export, shard_map, set_mesh, AxisType, pcast,
jax.stages, ProfileData, cost_analysis's dict, checkpoint policies, Pallas) behaves the same
on both, as the floor test's checks show. Standard library at import: checkers import this.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from pathlib import Path

FLOOR = "0.10.2"  # jax and jaxlib: the oldest JAX the course runs on
# the thread-name prefixes of XLA:CPU's execution threads in a trace (0.12, 0.10.2)
CPU_EXECUTION_THREADS = ("tf_XLAExecute", "tf_XLAPjRtCpuClient")


def version() -> str:
    import jax
    return jax.__version__


@functools.cache
def _exported_fields() -> frozenset[str]:
    import jax
    return frozenset(f.name for f in dataclasses.fields(jax.export.Exported))


def exported(**fields):
    """``jax.export.Exported(**fields)`` on any JAX in the range: 0.10.2 also requires
    ``_has_named_shardings`` (whether ``_in/_out_named_shardings`` hold the shardings; 0.12
    always has them and dropped the field), set True here: the shardings given are the
    ones meant (None: unspecified)."""
    import jax
    if "_has_named_shardings" in _exported_fields():
        fields.setdefault("_has_named_shardings", True)
    return jax.export.Exported(**fields)


class ProgramUnreadable(RuntimeError):
    """A serialised ``jax.export`` program this environment cannot read; says why."""


def deserialize(data: bytes, what: str):
    """``jax.export.deserialize`` of ``data``, or ``ProgramUnreadable`` naming the cause:
    the ``flatbuffers`` package missing (jax.export needs it to read any program; an
    accelerator image may not install it), or a program written by a newer JAX than this
    one (``FLOOR`` writes the course's, so every JAX in the range reads them)."""
    import jax
    try:
        exp = jax.export.deserialize(bytearray(data))
        exp.mlir_module()  # the StableHLO is read lazily: read it now, where it is named
        return exp
    except ImportError as err:
        raise ProgramUnreadable(
            f"{what} cannot be read here: the flatbuffers package is not installed "
            f"(jax.export needs it to read a program: {err}); `pip install flatbuffers`") \
            from None
    except ValueError:
        raise  # not a jax.export program at all: the caller names the file
    except Exception as err:  # noqa: BLE001 - jaxlib's errors have no public class
        text = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
        if "deserialize" not in text.lower():
            raise
        raise ProgramUnreadable(
            f"{what} cannot be read by JAX {jax.__version__} ({text}): a newer JAX wrote "
            f"it; the course writes its programs with JAX {FLOOR}, the oldest it supports "
            "(`make starters`), and every JAX from that one on reads them") from None


def import_path() -> list[str]:
    """The folders this process imported JAX and its numeric packages from, where they are
    not the interpreter's own (``PYTHONPATH``: an accelerator image puts its JAX there, the
    floor test its floor JAX). A child started with ``python -I`` drops ``PYTHONPATH``; it
    puts these first on its path to run the JAX its parent runs. Read from the modules
    already imported, never searched for: a folder a submission wrote is not one of them."""
    own = [Path(p).resolve() for p in {sys.prefix, sys.base_prefix, sys.exec_prefix}]
    found = []
    for name in ("jax", "jaxlib", "numpy", "ml_dtypes"):
        module = sys.modules.get(name)
        if module is None or not getattr(module, "__file__", None):
            continue
        folder = Path(module.__file__).resolve().parent.parent
        if not any(folder.is_relative_to(p) for p in own) and str(folder) not in found:
            found.append(str(folder))
    return found

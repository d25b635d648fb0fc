"""What a Pallas function really runs, read from the program rather than from its claims.

``inspect_pallas(fn, *args)`` traces ``fn`` and returns every ``pallas_call`` site (grid,
block shapes, the ``interpret`` flag, the primitives inside the kernel) and the
primitives that run *outside* any kernel. ``lowered_mode(fn, *args)`` reads the lowered
program: a compiled Pallas kernel is a custom call (Triton or Mosaic on GPU, Mosaic on
TPU); an interpreted one is ordinary HLO (a loop over the grid) with no such call.

The pallas-kernel checker, its benchmark and notebook 06 use these to tell a kernel from
a jnp function in disguise, and to check that a declared execution mode is the one that
ran.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax

# Custom-call targets of compiled Pallas kernels (GPU Triton, GPU Mosaic, TPU Mosaic).
KERNEL_CALL_MARKERS = ("__gpu$xla.gpu.triton", "triton_kernel_call", "mosaic_gpu",
                       "tpu_custom_call")


@dataclass
class PallasSite:
    grid: tuple[int, ...]
    block_shapes: list[tuple[int | None, ...]]
    interpret: bool
    kernel_primitives: set[str] = field(default_factory=set)


def _subjaxprs(params: dict):
    for value in params.values():
        for item in value if isinstance(value, (list, tuple)) else (value,):
            inner = getattr(item, "jaxpr", item)  # ClosedJaxpr -> Jaxpr
            if hasattr(inner, "eqns"):
                yield inner


def _all_primitives(jaxpr, found: set[str]) -> set[str]:
    for eqn in jaxpr.eqns:
        found.add(eqn.primitive.name)
        for sub in _subjaxprs(eqn.params):
            _all_primitives(sub, found)
    return found


def _block_dim(dim) -> int | None:
    size = getattr(dim, "block_size", dim)
    return size if isinstance(size, int) else None


def _site(eqn) -> PallasSite:
    mapping = eqn.params.get("grid_mapping")
    grid = tuple(int(g) if isinstance(g, int) else -1 for g in getattr(mapping, "grid", ()))
    blocks = [tuple(_block_dim(d) for d in bm.block_shape)
              for bm in getattr(mapping, "block_mappings", ())]
    kernel = eqn.params.get("jaxpr")
    inside = _all_primitives(getattr(kernel, "jaxpr", kernel), set()) if kernel else set()
    interpret = eqn.params.get("interpret", False)
    return PallasSite(grid, blocks, bool(interpret) and interpret is not None, inside)


def _walk(jaxpr, sites: list[PallasSite], outside: set[str]) -> None:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "pallas_call":
            sites.append(_site(eqn))
            continue
        outside.add(eqn.primitive.name)
        for sub in _subjaxprs(eqn.params):
            _walk(sub, sites, outside)


def inspect_pallas(fn, *args) -> dict:
    """{"sites": [PallasSite, ...], "outside": set of primitive names run outside any
    kernel (wrapper primitives such as ``jit`` or ``custom_jvp_call`` included)}."""
    closed = jax.make_jaxpr(fn)(*args)
    sites: list[PallasSite] = []
    outside: set[str] = set()
    _walk(closed.jaxpr, sites, outside)
    return {"sites": sites, "outside": outside}


def lowered_mode(fn, *args) -> str:
    """"compiled" when the lowered program calls a compiled kernel, else "interpreted"
    (meaningful only for a function that contains a ``pallas_call``)."""
    text = jax.jit(fn).lower(*args).as_text()
    return "compiled" if any(m in text for m in KERNEL_CALL_MARKERS) else "interpreted"


def settle_pallas() -> None:
    """Make JAX's one-time Pallas imports happen now, before anything is timed or counted.

    In jax 0.12 the first lowering of a ``pallas_call`` imports the Mosaic interpret
    modules, which register new config options. That changes JAX's trace context, so every
    function jitted *before* it (the first kernel included) misses its cache and compiles
    once more on its next call: a compile in the warmed samples that is no fault of the
    code being measured. Lowering a tiny kernel once, first, removes it."""
    from jax.experimental import pallas as pl

    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    x = jax.ShapeDtypeStruct((8, 128), jax.numpy.float32)
    jax.jit(lambda a: pl.pallas_call(copy, out_shape=x, interpret=True)(a)).lower(x)

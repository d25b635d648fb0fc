"""How much of a TPU core's scoped VMEM a Pallas block needs, and which block sizes fit.

A compiled Pallas kernel on a TPU (Mosaic) computes on blocks held in VMEM. The pipeline
keeps two copies of each input block and each output block (double buffering: one being
computed on while the next is copied in, or the last copied out), and the kernel body's
float32 working values take more. The compiler refuses a kernel whose blocks need more
than its scoped VMEM limit: ``CompileTimeScopedVmemOom``, "scoped allocation with size
19.80M and limit 16.00M exceeded scoped vmem limit".

The count here, per block of ``block_rows`` x ``block_width`` elements (rows rounded up to
the 8 sublanes of a vector register, the width the kernel's own, a multiple of 128 lanes)::

    bytes = rows x width x (2 x in_itemsize + 2 x out_itemsize + 4)
             double-buffered in ^    ^ out          one float32 working copy ^

against ``SCOPED_VMEM_LIMIT``, 16 MiB, the limit the compiler applied on a TPU v5e (JAX
0.10.2). A kernel can ask for more (``pltpu.CompilerParams(vmem_limit_bytes=...)``, up to
the core's VMEM: ``chips.memory_levels`` reads it, 128 MiB there); the course's kernels do
not, so their blocks must fit 16 MiB.

Measured on that chip (2026-12-05) with the course's row-softmax kernel (blocks of whole
rows, ``block_cols(cols)`` wide), the compiler's figure beside this count:

    block rows x width  dtype     compiler says              this count
    256 x 4096          float32   19.80 MiB, refused         20 MiB
    128 x 8192          float32   19.80 MiB, refused         20 MiB
    512 x 2048          float32   18.83 MiB, refused         20 MiB
    512 x 4096          float32   32.00 MiB, refused         40 MiB
    512 x 4096          bfloat16  23.81 MiB, refused         24 MiB
    128 x 4096, 64 x 8192, 256 x 2048 float32; 256 x 4096 bfloat16: compiled (10-12 MiB)

Every refused block counts over 16 MiB and every compiled one under it. Blocks wider than
the array compiled where this count says they do not (1024 and 2048 rows of a 1000-column
array in 1024-wide float32 blocks: 20 and 40 MiB here): the count is an upper bound there,
so choosing by it never tries a block that does not fit.
"""

from __future__ import annotations

MiB = 2**20
SCOPED_VMEM_LIMIT = 16 * MiB  # the compiler's scoped VMEM limit per kernel (TPU v5e)
SUBLANES = 8                   # rows of a vector register: a block's rows round up to it
BUFFERS = 2                    # double buffering of each input and output block
WORK_ITEMSIZE = 4              # the kernel body computes in float32


def padded_rows(block_rows: int) -> int:
    """``block_rows`` rounded up to a whole number of vector-register rows (8)."""
    return -(-int(block_rows) // SUBLANES) * SUBLANES


def block_vmem_bytes(block_rows: int, block_width: int, itemsize: int, *,
                     out_itemsize: int | None = None, buffers: int = BUFFERS,
                     work_itemsize: int = WORK_ITEMSIZE) -> int:
    """Scoped VMEM one block of ``block_rows`` x ``block_width`` needs: ``buffers`` copies
    of the input block (``itemsize`` bytes per element) and of the output block
    (``out_itemsize``, default the input's), plus one working copy of ``work_itemsize``."""
    if block_rows < 1 or block_width < 1 or itemsize < 1:
        raise ValueError(f"block_rows, block_width and itemsize must be positive, got "
                         f"{block_rows}, {block_width}, {itemsize}")
    out_itemsize = itemsize if out_itemsize is None else out_itemsize
    per_element = buffers * (itemsize + out_itemsize) + work_itemsize
    return padded_rows(block_rows) * int(block_width) * per_element


def fits(block_rows: int, block_width: int, itemsize: int, *,
         limit: int = SCOPED_VMEM_LIMIT) -> bool:
    """Whether the block's count stays within ``limit`` bytes."""
    return block_vmem_bytes(block_rows, block_width, itemsize) <= limit


def block_rows_for(rows: int, block_width: int, itemsize: int, candidates, *,
                   limit: int = SCOPED_VMEM_LIMIT) -> dict:
    """Which of ``candidates`` (block_rows values) to try on a (rows, cols) array whose
    blocks are ``block_width`` wide: ``{"fit": [...], "too_big": {b: bytes}, "taller":
    [...]}``. ``too_big``: over ``limit``; ``taller``: taller than the array rounded up to
    8 rows (one program would hold the whole array and more), left out unless none of the
    others fit. Sorted ascending."""
    fit, too_big, taller = [], {}, []
    whole = padded_rows(rows)
    for b in sorted({int(b) for b in candidates}):
        need = block_vmem_bytes(b, block_width, itemsize)
        if need > limit:
            too_big[b] = need
        elif padded_rows(b) > whole:
            taller.append(b)
        else:
            fit.append(b)
    if not fit and taller:
        fit.append(taller.pop(0))
    return {"fit": fit, "too_big": too_big, "taller": taller}


def plan(shapes, candidates, itemsize: int, width_of, *,
         limit: int = SCOPED_VMEM_LIMIT) -> dict[tuple, dict]:
    """``block_rows_for`` for every (rows, cols) shape, the width ``width_of(cols)``:
    ``{(rows, cols): {"width", "fit", "too_big", "taller", "none_fits"}}``; ``none_fits``
    is "" or the sentence that says why no candidate fits that shape (the smallest
    block's need against the limit): such a shape cannot be swept."""
    out = {}
    for shape in shapes:
        rows, cols = (int(s) for s in shape)
        width = int(width_of(cols))
        choice = block_rows_for(rows, width, itemsize, candidates, limit=limit)
        why = ""
        if not choice["fit"]:
            smallest, need = min(choice["too_big"].items(), key=lambda kv: kv[1])
            why = (f"no block size of {sorted(candidates)} fits ({rows}, {cols}): the "
                   f"smallest, {smallest} rows x {width}, needs {need / MiB:.1f} MiB of "
                   f"scoped VMEM, over the {limit / MiB:.0f} MiB limit")
        out[(rows, cols)] = {"width": width, **choice, "none_fits": why}
    return out

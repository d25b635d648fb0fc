"""The scoped-VMEM count of a Pallas block (coursekit.measure.pallas_vmem) against what the
TPU v5e compiler said of the course's row-softmax kernel (JAX 0.10.2, 2026-12-05): every
block it refused counts over 16 MiB, every block it compiled (as wide as its array) under,
and a sweep plan never tries a refused one."""

from __future__ import annotations

import re

import pytest

from coursekit.measure import pallas_vmem as vm

MiB = 2**20
F32, BF16 = 4, 2

# (block_rows, block_width, itemsize, the compiler's scoped VMEM in MiB or None: compiled)
MEASURED = [
    (256, 4096, F32, 19.80), (128, 8192, F32, 19.80), (512, 2048, F32, 18.83),
    (512, 4096, F32, 32.00), (512, 4096, BF16, 23.81),
    (128, 4096, F32, None), (64, 4096, F32, None), (64, 8192, F32, None),
    (32, 8192, F32, None), (256, 2048, F32, None), (256, 4096, BF16, None),
    (128, 4096, BF16, None),
]


def block_cols(cols: int) -> int:  # the pallas-kernel project's block width (given code)
    return max(128, 1 << (int(cols) - 1).bit_length())


@pytest.mark.parametrize("rows,width,itemsize,compiler_mib", MEASURED)
def test_count_agrees_with_the_compiler(rows, width, itemsize, compiler_mib):
    need = vm.block_vmem_bytes(rows, width, itemsize)
    if compiler_mib is None:
        assert need <= vm.SCOPED_VMEM_LIMIT and vm.fits(rows, width, itemsize)
    else:
        assert need > vm.SCOPED_VMEM_LIMIT and not vm.fits(rows, width, itemsize)
        # an upper count: never below what the compiler asked for
        assert need >= compiler_mib * MiB * 0.999, (need / MiB, compiler_mib)


def test_the_count_in_numbers():
    # 256 x 4096 float32: 4 MiB per block, twice in and twice out, one float32 working copy
    assert vm.block_vmem_bytes(256, 4096, F32) == 20 * MiB
    assert vm.block_vmem_bytes(512, 4096, BF16) == 24 * MiB
    assert vm.block_vmem_bytes(3, 128, F32) == 8 * 128 * 20      # rows round up to 8
    assert vm.block_vmem_bytes(8, 128, BF16, out_itemsize=F32) == 8 * 128 * (4 + 8 + 4)
    with pytest.raises(ValueError, match="positive"):
        vm.block_vmem_bytes(0, 128, F32)


def test_the_sweep_shape_that_did_not_compile_gets_blocks_that_do():
    # (8192, 4096) float32 with block_rows 256 failed on the chip (19.8 MiB over 16 MiB)
    got = vm.plan([(8192, 4096)], [8, 32, 128, 256, 512], F32, block_cols)[(8192, 4096)]
    assert got["width"] == 4096
    assert got["fit"] == [8, 32, 128]
    assert set(got["too_big"]) == {256, 512}
    assert got["too_big"][256] == 20 * MiB


def test_blocks_taller_than_the_array_are_left_out_unless_nothing_else_fits():
    got = vm.block_rows_for(64, 512, F32, [8, 32, 128, 512])
    assert got["fit"] == [8, 32] and got["taller"] == [128, 512] and not got["too_big"]
    tiny = vm.block_rows_for(3, 128, F32, [16, 64])        # 3 rows: one 16-row block
    assert tiny["fit"] == [16] and tiny["taller"] == [64]


def test_a_shape_nothing_fits_is_named_with_its_smallest_need():
    got = vm.plan([(64, 70000), (64, 300)], [8, 16], F32, block_cols)
    assert got[(64, 70000)]["fit"] == []
    assert re.search(r"\(64, 70000\).*8 rows x 131072.*20.0 MiB.*16 MiB",
                     got[(64, 70000)]["none_fits"])
    assert got[(64, 300)]["fit"] == [8, 16] and got[(64, 300)]["none_fits"] == ""

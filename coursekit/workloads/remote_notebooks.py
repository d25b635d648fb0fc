"""What the grader's notebook test process runs in a notebook's learner process
(``coursekit.workloads.inspectors``, by name): a notebook kernel in one padded Pallas
block, exported as a program the test process reads and runs itself
(``coursekit.notebook.kernels``).

A kernel body (``kernel(x_ref, o_ref, *, n_cols)``) is not a function of values: it only
runs under ``pallas_call``. So the learner's kernel is traced here, where the learner's
code runs, into an interpreted one-block ``pallas_call`` lowered for the CPU, and the
StableHLO goes back as data (``coursekit.checking.programs.describe``). What comes back
is self-reported: the test process reads its shape (a grid loop writing the output
block) and runs it on its own inputs.
"""

from __future__ import annotations

import functools


def one_block(kernel, x, *, interpret: bool):
    """``kernel`` on ``x`` in one block that holds the whole array, rows padded to a
    multiple of 8 and columns to a power of two of at least 128 (grid (1,))."""
    import jax
    from jax.experimental import pallas as pl
    rows, cols = x.shape
    spec = pl.BlockSpec((-(-rows // 8) * 8, max(128, pl.next_power_of_2(cols))),
                        lambda i: (0, 0))
    return pl.pallas_call(functools.partial(kernel, n_cols=cols),
                          out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(1,),
                          in_specs=[spec], out_specs=spec, interpret=interpret)(x)


def one_block_program(kernel, x) -> dict:
    """``one_block(kernel, x)``, interpreted, exported for the CPU and described as data
    (whatever backend this process holds: the test process runs it on its CPU)."""
    import jax

    from coursekit.checking.programs import describe
    program = jax.export.export(jax.jit(lambda v: one_block(kernel, v, interpret=True)),
                                platforms=["cpu"])(x)
    return describe(program)


INSPECTORS = {"notebooks/one-block-program": one_block_program}

"""A notebook's Pallas kernel run in one padded block, for a graded test cell, wherever
the test runs.

``one_block_output(kernel, x)`` is the kernel's output on ``x`` as a float64 NumPy array:

* in a notebook (JupyterLab, papermill, plain nbgrader) ``kernel`` is the notebook's own
  function, run here through ``pallas_call`` (interpreted on a CPU, compiled elsewhere);
* in the grader's test process (``coursekit.notebook.graded_run``) ``kernel`` is the
  learner's function seen from there (``remote_names.NotebookFunction``): the learner
  process exports the interpreted one-block program for the CPU
  (``coursekit.workloads.remote_notebooks``), and this process reads it (a grid loop
  that writes the output block, or the test fails) and runs it on the test's own input.
"""

from __future__ import annotations

from coursekit.notebook.remote_names import NotebookFunction
from coursekit.workloads.remote_notebooks import one_block

# What an interpreted pallas_call leaves in the program: the grid loop, and the kernel's
# store into its output block (a jnp softmax in disguise has neither).
PROGRAM_MARKS = ("stablehlo.while", "stablehlo.dynamic_update_slice")


def one_block_output(kernel, x):
    import jax
    import numpy as np
    if isinstance(kernel, NotebookFunction):
        from coursekit.checking.programs import rebuild
        exported = rebuild(kernel.inspect("notebooks/one-block-program", x), (x,), x,
                           what="the kernel's one-block program")
        text = exported.mlir_module()
        missing = [m for m in PROGRAM_MARKS if m not in text]
        assert not missing, ("the program exported for your kernel is not a pallas_call "
                             f"over a grid (no {', '.join(missing)})")
        return np.asarray(jax.jit(exported.call)(x), dtype=np.float64)
    return np.asarray(one_block(kernel, x, interpret=jax.default_backend() == "cpu"),
                      dtype=np.float64)

"""Per rule of ``coursekit.checking.forbidden.NOTEBOOK_RULES``, the exercise's cell as a
learner who borrows the helper writes it (the solution's body replaced by a call to the
helper), and the released notebook with its answer cells answered as the source answers
them: shared by tests/test_notebook_borrowed.py (the reading, the learner's kernel) and
tests/test_autograder_notebook_borrowed.py (the grader)."""

from __future__ import annotations

import re

import nbformat

from coursekit.facts import ROOT

# (notebook, exercise, the rule's qualified name) -> the exercise's cell
PLANTS = {
    ("02_trace_reading", "covered_us", "coursekit.measure.device_trace.union_ns"): '''\
from coursekit.measure.device_trace import Span, union_ns


def covered_us(intervals):
    return float(union_ns([Span("", a, b - a) for a, b in intervals]))
''',
    ("03_roofline", "elementwise_cost_by_hand",
     "coursekit.compat.compiled_plan.compiled_cost"): '''\
import jax
import jax.numpy as jnp
from coursekit.compat import compiled_plan


def elementwise_cost_by_hand(n, itemsize):
    program = jax.jit(lambda v: v * 2 + 1).lower(jnp.ones(n, jnp.float32)).compile()
    cost = compiled_plan.compiled_cost(program)
    return {"flops": int(cost["flops"]), "bytes": int(cost["bytes accessed"])}
''',
    ("03_roofline", "elementwise_cost_by_hand",
     "coursekit.compat.compiled_plan.lowered_cost"): '''\
import jax
import jax.numpy as jnp
from coursekit.compat.compiled_plan import lowered_cost as _count


def elementwise_cost_by_hand(n, itemsize):
    cost = _count(jax.jit(lambda v: v * 2 + 1).lower(jnp.ones(n, jnp.float32)))
    return {"flops": int(cost["flops"]), "bytes": int(cost["bytes accessed"])}
''',
    ("03_roofline", "elementwise_cost_by_hand", "jax.jit"): '''\
import jax.numpy as jnp
from jax import jit


def _compiler_count(n):
    cost = jit(lambda v: v * 2 + 1).lower(jnp.ones(n, jnp.float32)).compile().cost_analysis()
    return dict(cost[0] if isinstance(cost, (list, tuple)) else cost)


def elementwise_cost_by_hand(n, itemsize):
    cost = _compiler_count(n)
    return {"flops": int(cost["flops"]), "bytes": int(cost["bytes accessed"])}
''',
    ("03_roofline", "elementwise_cost_by_hand", "__notebook__.impl.cost_from_compiler"): '''\
def elementwise_cost_by_hand(n, itemsize):
    cost = impl.cost_from_compiler(lambda v: v * 2 + 1, jnp.ones(n, jnp.float32))
    return {"flops": int(cost["flops"]), "bytes": int(cost["bytes"])}
''',
    ("04_remat", "remat_floor_bytes", "__notebook__.impl.saved_residual_bytes"): '''\
def remat_floor_bytes(depth, batch, width, itemsize):
    params = impl.init_blocks(jax.random.key(0), depth, width, 4 * width)
    x = jnp.zeros((batch, width), jnp.float32)
    return impl.saved_residual_bytes(params, x, "nothing_saveable")
''',
    ("04_remat", "remat_floor_bytes", "jax.vjp"): '''\
import jax
import jax.numpy as jnp


def remat_floor_bytes(depth, batch, width, itemsize):
    params = impl.init_blocks(jax.random.key(0), depth, width, 4 * width)
    x = jnp.zeros((batch, width), jnp.float32)
    _, pullback = jax.vjp(lambda p, v: impl.block_loss(p, v, "nothing_saveable"), params, x)
    kept = {id(a) for a in jax.tree.leaves((params, x))}
    return int(sum(a.size * a.dtype.itemsize for a in jax.tree.leaves(pullback)
                   if id(a) not in kept))
''',
    ("05_sharding_and_recovery", "fixed_grads", "__notebook__.reference_grads"): '''\
def fixed_grads(params, batch, mesh):
    return reference_grads(jax.tree.map(np.asarray, params),
                           {k: np.asarray(v) for k, v in batch.items()})
''',
    ("05_sharding_and_recovery", "fixed_grads", "__notebook__.one_device_grads"): '''\
def fixed_grads(params, batch, mesh):
    return one_device_grads(params, batch, mesh)
''',
}


def solution_answers(notebook: str) -> dict[str, str]:
    """grade id -> the source notebook's answer (solution markers dropped)."""
    from autograder.nbsource import grade_id
    source = nbformat.read(str(ROOT / "notebooks" / f"{notebook}.ipynb"), as_version=4)
    return {grade_id(c): "\n".join(line for line in c.source.split("\n")
                                   if not re.match(r"\s*### (BEGIN|END) SOLUTION", line))
            for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}


def released(notebook: str, edits: dict | None = None):
    """The released notebook (nbformat), every answer cell answered as the source answers
    it, then ``edits`` by grade id."""
    from autograder.nbsource import grade_id, release_notebook
    answers = {**solution_answers(notebook), **(edits or {})}
    nb = release_notebook(nbformat.read(str(ROOT / "notebooks" / f"{notebook}.ipynb"),
                                        as_version=4))
    for cell in nb.cells:
        if grade_id(cell) in answers:
            cell.source = answers[grade_id(cell)]
    return nb


def cells_before_test(nb, exercise: str) -> tuple[list[str], str]:
    """The code cells before the exercise's test cell (``<exercise>_tests``), in order,
    and that test cell's source."""
    from autograder.nbsource import grade_id
    sources = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if grade_id(cell) == f"{exercise}_tests":
            return sources, cell.source
        sources.append(cell.source)
    raise LookupError(f"no {exercise}_tests cell")

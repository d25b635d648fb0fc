"""Plain-JAX ceilings of a device: what its fastest plain operations attain, each checked
before it is timed, its first (compiling) call apart, every call waited for and every raw
sample kept. A measured roof (a learner's ``measure_peak_flops`` / ``measure_bandwidth``)
is set beside the ceiling of the same size, measured in the same run; the vendor's figure
(``coursekit.measure.chips``) beside both.

  * ``Matmul(n, dtype)``: ``a @ b`` of two (n, n) arrays (2 n^3 FLOPs);
  * ``Stream("read", nbytes)``: a read-only ``jnp.sum`` over float32 (nbytes moved);
  * ``Stream("read_write", nbytes)``: ``x * 2`` written in place of x (its input donated:
    reads and writes nbytes, allocates nothing per call).

``measure(ceiling, iters=, rounds=, between=)`` times ``rounds`` rounds of ``iters``
samples and calls ``between(round)`` after each (the roof being judged, in turn), so that
both see the same state of the machine. ``make accelerator``'s roofline and notebook 03 on
an accelerator use it. Instructor-only: a ceiling is a peak-FLOP/s or bandwidth measurement,
what performance-audit stage 2 asks (notebook 03 reaches it through
``coursekit.checking.graded``).
"""

from __future__ import annotations

import math
import statistics
import time

import numpy as np

GiB, MiB = 2**30, 2**20


def fast_dtype(backend: str) -> str:
    """The dtype a device computes fastest in: bfloat16 on TPU and GPU matrix units; a
    CPU has none (bfloat16 is slower there than float32)."""
    return "float32" if backend == "cpu" else "bfloat16"


def size_label(nbytes: int) -> str:
    return f"{nbytes / GiB:g} GiB" if nbytes >= GiB else f"{nbytes / MiB:g} MiB"


# -- the ceilings ------------------------------------------------------------------------

class Ceiling:
    """One plain-JAX operation on arrays made once: ``first()`` checks and times the
    compiling call, ``sample()`` times one completed call. ``donated``: the operation
    consumes its input, and each output is the next call's input."""
    what = ""
    unit = ""
    donated = False

    def call(self):
        import jax
        out = jax.block_until_ready(self.fn(*self.args))
        if self.donated:
            self.args = (out,)
        return out

    def sample(self) -> float:
        start = time.perf_counter()
        self.call()
        return time.perf_counter() - start

    def first(self) -> float:
        before = self.before_first()
        start = time.perf_counter()
        out = self.call()
        seconds = time.perf_counter() - start
        self.check(out, before)
        return seconds

    def before_first(self):
        """What ``check`` needs of the input that the first call may consume."""
        return None

    def measure(self, *, iters: int, rounds: int, between=None) -> dict:
        return measure(self, iters=iters, rounds=rounds, between=between)

    def close(self) -> None:
        for a in self.args:
            a.delete()


class Matmul(Ceiling):
    what, unit = "matmul", "FLOP/s"

    def __init__(self, n: int, dtype: str):
        import jax
        ka, kb = jax.random.split(jax.random.PRNGKey(0))
        self.n, self.dtype, self.size = n, dtype, str(n)
        self.args = (jax.random.normal(ka, (n, n), dtype), jax.random.normal(kb, (n, n), dtype))
        self.fn = jax.jit(lambda a, b: a @ b)
        self.work = 2 * n**3

    def check(self, out, _before) -> None:
        """Four entries against float64 products of the same inputs; the tolerance is a
        few bfloat16 roundings of the products' size (a wrong product is off by all of
        it)."""
        rng = np.random.default_rng(self.n)
        for i, j in rng.integers(0, self.n, size=(4, 2)):
            row = np.asarray(self.args[0][i]).astype(np.float64)
            col = np.asarray(self.args[1][:, j]).astype(np.float64)
            expected, got = float(row @ col), float(out[i, j])
            scale = math.sqrt(float(np.sum((row * col) ** 2)))
            if not abs(got - expected) <= 2**-5 * (abs(expected) + scale):
                raise ValueError(f"matmul {self.n} {self.dtype}: entry [{i}, {j}] is {got:.6g},"
                                 f" float64 says {expected:.6g}")


class Stream(Ceiling):
    """``jnp.sum(x)`` (read-only) or ``x * 2`` written in place of x (reads and writes x,
    its input donated: no fresh output to allocate, the solution's ``in_place`` alike)
    over float32 x."""
    unit = "B/s"
    ENDS = (slice(0, 4096), slice(-4096, None))

    def __init__(self, kind: str, nbytes: int):
        import jax
        import jax.numpy as jnp
        self.kind, self.nbytes, self.size, self.dtype = kind, nbytes, size_label(nbytes), "float32"
        self.what = "read-only jnp.sum" if kind == "read" else "x * 2 in place (read + write)"
        self.args = (jax.random.uniform(jax.random.PRNGKey(1), (nbytes // 4,), jnp.float32),)
        self.donated = kind != "read"
        self.fn = jax.jit(jnp.sum) if kind == "read" else \
            jax.jit(lambda x: x * 2, donate_argnums=0)
        self.work = nbytes if kind == "read" else 2 * nbytes

    def before_first(self):
        x = self.args[0]
        if self.kind == "read":  # one copy to the host, summed there in float64
            return float(np.asarray(x).sum(dtype=np.float64))
        return [np.asarray(x[part]) for part in self.ENDS]

    def check(self, out, before) -> None:
        if self.kind == "read":
            if not abs(float(out) - before) <= 1e-2 * before:
                raise ValueError(f"jnp.sum over {self.size}: {float(out):.6g}, float64 says "
                                 f"{before:.6g}")
            return
        for part, x in zip(self.ENDS, before):
            if not np.array_equal(np.asarray(out[part]), 2 * x):
                raise ValueError(f"x * 2 over {self.size}: the output is not twice the input")


def measure(ceiling: Ceiling, *, iters: int, rounds: int, between=None) -> dict:
    """The ceiling's record: its first call apart, then ``rounds`` rounds of ``iters``
    samples; ``between(round)`` runs after each round (the solution's call, in turn)."""
    first = ceiling.first()
    samples = []
    for r in range(rounds):
        samples.extend(ceiling.sample() for _ in range(iters))
        if between is not None:
            between(r)
    return {"what": ceiling.what, "size": ceiling.size, "dtype": ceiling.dtype,
            "unit": ceiling.unit, "work": ceiling.work, "first_call_s": first,
            "samples_s": samples, "best": ceiling.work / min(samples),
            "median": ceiling.work / statistics.median(samples)}

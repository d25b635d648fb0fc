"""The roofline part of ``make accelerator``, in a process of its own (it holds the device):
this device's plain-JAX ceilings, its spec beside them (``coursekit.measure.chips``), and
the reference solution's own ``measure_peak_flops`` / ``measure_bandwidth`` measured side
by side with them.

    python -m coursekit.commands.accelerator_roofline OUT.json --solution PATH
        [--sizes auto|tiny] [--matmul N,N] [--bytes B,B] [--iters K] [--rounds R]
        [--fast-dtype DTYPE]

Ceilings (plain JAX, nothing of the course's):
  * ``a @ b`` of two (N, N) arrays in the device's fast dtype (bfloat16 on an accelerator,
    float32 on a CPU) at each N; on an accelerator also float32 at the default precision
    at the largest N (what a float32-only ``measure_peak_flops`` compares with);
  * a read-only ``jnp.sum`` over a float32 array of each size B (B bytes moved);
  * ``x * 2`` over the same arrays, written in place (reads B and writes B; the input
    donated, so no call allocates a fresh output).
Each is checked before it is timed (matmul entries against float64, the sum against a
float64 sum, the doubled array's ends exactly), its first (compiling) call is timed apart, every
call is waited for, and all raw samples are kept; a figure is the work over the fastest
sample. The solution's functions are called once per round between the ceiling's rounds
of the same size (``rounds`` rounds of ``iters`` samples): the largest N in the fast dtype
when ``measure_peak_flops`` takes a ``dtype`` (else what it measures, float32, said so),
and ``read_sum`` and ``in_place`` at the largest B. Each gets its ratio to the ceiling
of the same size and whether it is within 90% of it.

``auto`` sizes: N 8192 and 16384, B 1 and 4 GiB on an accelerator (they fill a TPU v5e);
1024 and 2048, 64 and 256 MiB on a CPU. ``tiny`` (the CPU dry run): 128 and 256, 1 and 4
MiB. Every figure carries the label of the device it ran on.
"""

from __future__ import annotations

import argparse
import inspect
import json
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

WITHIN = 0.9  # the solution's figure must reach this share of the plain-JAX ceiling
GiB, MiB = 2**30, 2**20
SIZES = {"accelerator": ([8192, 16384], [GiB, 4 * GiB]),
         "cpu": ([1024, 2048], [64 * MiB, 256 * MiB]),
         "tiny": ([128, 256], [MiB, 4 * MiB])}


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


# -- the reference solution's own figures -----------------------------------------------

def load_solution(path: Path):
    """The reference solution's module (the course's one way to import a file by path)."""
    from coursekit.checking.learner import load_impl
    return load_impl(path)


class SolutionCall:
    """One of the solution's functions, called once per round; what it returned kept."""

    def __init__(self, name: str, fn, kwargs: dict, figure: str, beside: tuple,
                 judged_by: tuple | None = None, note: str = ""):
        self.name, self.fn, self.kwargs, self.figure, self.note = name, fn, kwargs, figure, note
        self.beside = beside                 # the ceiling whose rounds it is called between
        self.judged_by = judged_by or beside  # the ceiling its ratio is taken to
        self.results, self.error, self.dtypes = [], "", set()

    def __call__(self, _round: int) -> None:
        if self.error:
            return
        try:
            got = self.fn(**self.kwargs)
            self.results.append(float(got[self.figure]))
            if "dtype" in got:
                self.dtypes.add(str(got["dtype"]))
        except Exception as err:  # noqa: BLE001 - recorded with the figures, never fatal
            self.error = f"{type(err).__name__}: {str(err)[:300]}"

    def record(self, measured: dict) -> dict:
        ceiling, beside = measured.get(self.judged_by), measured.get(self.beside)
        best = max(self.results) if self.results else None
        ratio = best / ceiling["best"] if best and ceiling else None
        note = self.note
        asked = self.kwargs.get("dtype")
        if asked and self.dtypes - {asked}:
            note += f"asked for {asked}, it says it timed {', '.join(sorted(self.dtypes))}"
        if beside is not None and beside is not ceiling and best:
            note += (f"; {best / beside['best']:.0%} of the {beside['dtype']} ceiling measured "
                     f"beside it ({beside['best']:.4g} {beside['unit']})")
        return {"function": self.name, "asked": {k: str(v) for k, v in self.kwargs.items()},
                "note": note, "figures": self.results, "best": best,
                "unit": ceiling["unit"] if ceiling else "",
                "ceiling": None if ceiling is None else {
                    k: ceiling[k] for k in ("what", "size", "dtype", "best")},
                "ratio": ratio, "within_90": None if ratio is None else ratio >= WITHIN,
                "error": self.error or ("" if ceiling else "no ceiling of that size measured")}


def takes(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def run(solution: Path, sizes: str, matmul: list[int] | None, nbytes: list[int] | None,
        iters: int, rounds: int, fast: str | None = None) -> dict:
    import jax

    from coursekit.measure.chips import spec
    from coursekit.measure.environment import device_facts
    device = device_facts()
    backend = device["backend"]
    fast = fast or fast_dtype(backend)
    kind = sizes if sizes == "tiny" else ("cpu" if backend == "cpu" else "accelerator")
    matmul = matmul or SIZES[kind][0]
    nbytes = nbytes or SIZES[kind][1]
    out = {"device": device, "fast_dtype": fast, "sizes": kind, "iters": iters,
           "rounds": rounds, "spec": spec(device["device_kind"]), "ceilings": [],
           "solution": [], "errors": []}
    try:
        model = load_solution(solution)
    except Exception as err:  # noqa: BLE001
        model = None
        out["errors"].append(f"the reference solution did not load: {type(err).__name__}: "
                             f"{str(err)[:300]}")
    calls = {call.beside: call for call in solution_calls(model, fast, max(matmul),
                                                          max(nbytes), iters)}
    plan = [(Matmul, (n, fast), ("matmul", str(n), fast)) for n in matmul]
    if fast != "float32":
        plan.append((Matmul, (max(matmul), "float32"), ("matmul", str(max(matmul)), "float32")))
    for kind_ in ("read", "read_write"):
        plan += [(Stream, (kind_, b), (kind_, size_label(b), "float32")) for b in nbytes]
    measured = {}
    for make, args, key in plan:
        ceiling = None
        try:
            ceiling = make(*args)
            measured[key] = rec = measure(ceiling, iters=iters, rounds=rounds,
                                          between=calls.get(key))
            out["ceilings"].append(rec)
        except Exception as err:  # noqa: BLE001 - one ceiling's failure is its own line
            out["errors"].append(f"{make.__name__}{args}: {type(err).__name__}: "
                                 f"{str(err)[:300]}")
        finally:
            if ceiling is not None:
                ceiling.close()
    out["solution"] = [call.record(measured) for call in calls.values()]
    out["jax_devices"] = [str(d) for d in jax.devices()]
    return out


def solution_calls(model, fast: str, n: int, nbytes: int, iters: int) -> list[SolutionCall]:
    """The solution's calls, each with the ceiling it is called beside and the one its
    ratio is taken to: the peak always to the fast dtype's (a float32-only function is
    called beside the float32 ceiling, and judged against the chip's fast dtype)."""
    if model is None:
        return []
    peak, bandwidth, fastest = model.measure_peak_flops, model.measure_bandwidth, \
        ("matmul", str(n), fast)
    if takes(peak, "dtype"):
        calls = [SolutionCall("measure_peak_flops", peak, {"n": n, "iters": iters, "dtype": fast},
                              "flops_per_s", fastest)]
    else:
        calls = [SolutionCall(
            "measure_peak_flops", peak, {"n": n, "iters": iters}, "flops_per_s",
            ("matmul", str(n), "float32"), fastest,
            note="it takes no dtype: it measures float32" +
                 ("" if fast == "float32" else f", not the device's fast dtype ({fast})"))]
    for kind, ceiling in (("read_sum", "read"), ("in_place", "read_write")):
        calls.append(SolutionCall("measure_bandwidth", bandwidth,
                                  {"nbytes": nbytes, "iters": iters, "kind": kind},
                                  "bandwidth", (ceiling, size_label(nbytes), "float32")))
    return calls


def int_list(text: str) -> list[int]:
    return [int(float(v)) for v in text.split(",") if v.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.commands.accelerator_roofline",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--solution", required=True,
                        help="the performance-audit model.py whose functions are measured")
    parser.add_argument("--sizes", choices=("auto", "tiny"), default="auto")
    parser.add_argument("--matmul", type=int_list, help="matmul sizes N (comma-separated)")
    parser.add_argument("--bytes", type=int_list, help="array sizes in bytes (comma-separated)")
    parser.add_argument("--iters", type=int, default=10, help="samples per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fast-dtype", help="the dtype of the compute ceiling (default: "
                        "bfloat16 on an accelerator, float32 on a CPU)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        result = run(Path(args.solution), args.sizes, args.matmul, args.bytes,
                     max(1, args.iters), max(1, args.rounds), args.fast_dtype)
    except Exception as err:  # noqa: BLE001 - the device did not open: say so in the file
        result = {"device": None, "ceilings": [], "solution": [],
                  "errors": [f"{type(err).__name__}: {str(err)[:400]}"]}
    result["wall_s"] = round(time.perf_counter() - started, 2)
    Path(args.out).write_text(json.dumps(result, indent=1, default=str))
    return 0 if result["device"] and not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())

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
float64 sum, the doubled array's ends exactly), its first (compiling) call is timed apart,
every call is waited for, and all raw samples are kept; a figure is the work over the
fastest sample. Each is also timed pipelined (``pipelined``: calls dispatched back to
back, waited for once per round), as close to the chip's limit as plain JAX gets; the
difference, the fixed cost of one synchronised call, is printed beside each ceiling
(``sync_cost``). The solution's functions are called once per round between the ceiling's rounds
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
import sys
import time
from pathlib import Path

from coursekit.instructor.ceilings import (  # noqa: F401 - also this command's names
    Ceiling,
    GiB,
    Matmul,
    MiB,
    Stream,
    fast_dtype,
    measure,
    size_label,
)

WITHIN = 0.9  # the solution's figure must reach this share of the plain-JAX ceiling
SIZES = {"accelerator": ([8192, 16384], [GiB, 4 * GiB]),
         "cpu": ([1024, 2048], [64 * MiB, 256 * MiB]),
         "tiny": ([128, 256], [MiB, 4 * MiB])}


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
            try:
                rec["pipelined"] = pipelined(ceiling, calls=iters, rounds=rounds)
            except Exception as err:  # noqa: BLE001 - the synchronised figure stands alone
                rec["pipelined_error"] = f"{type(err).__name__}: {str(err)[:300]}"
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


def pipelined(ceiling: Ceiling, *, calls: int, rounds: int) -> dict:
    """The same operation as ``calls`` calls dispatched back to back and waited for once,
    at the end of each round: the boundary is the round, and a figure is the round's time
    over its calls. What a synchronised call pays on top (dispatch, the wait for its
    result, the device going idle between calls) is the fastest synchronised sample less
    the fastest pipelined call: ``sync_cost_s``. The last output of each round is checked
    against the first call's (the same input: the same value; in place: doubled again)."""
    import jax
    import numpy as np
    per_call, want = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        out = None
        for _ in range(calls):
            out = ceiling.fn(*ceiling.args)
            if ceiling.donated:
                ceiling.args = (out,)
        jax.block_until_ready(out)
        per_call.append((time.perf_counter() - start) / calls)
        if not ceiling.donated:
            got = np.asarray(out[:2, :2] if getattr(out, "ndim", 0) == 2 else out)
            if want is None:
                want = np.asarray(jax.block_until_ready(ceiling.fn(*ceiling.args)))
                want = want[:2, :2] if want.ndim == 2 else want
            if not np.array_equal(got, want):
                raise ValueError(f"{ceiling.what} {ceiling.size}: the pipelined calls' last "
                                 "output differs from a single call's")
    return {"calls": calls, "samples_s": per_call, "best": ceiling.work / min(per_call),
            "median": ceiling.work / sorted(per_call)[len(per_call) // 2]}


def sync_cost(record: dict) -> float | None:
    """Seconds a synchronised call pays over a pipelined one (fastest against fastest)."""
    piped = record.get("pipelined")
    if not piped:
        return None
    return min(record["samples_s"]) - min(piped["samples_s"])


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

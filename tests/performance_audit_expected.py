"""Writes performance-audit stage 2's stored outputs for fixed public inputs
(projects/performance-audit/tests/expected/): run from the course checkout, where the
course's own code (coursekit/instructor) is:

    PYTHONPATH=. python tests/performance_audit_expected.py          # numbers only
    PYTHONPATH=. python tests/performance_audit_expected.py --trace  # a new real trace too

The trace is a recording (its durations differ every run), so it is written only when
asked; its summary is always recomputed from the stored file.
tests/test_performance_audit_expected.py checks the stored file against a fresh
generation."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "projects" / "performance-audit" / "tests"))

import audit_expected as ex  # noqa: E402

from coursekit.instructor import bandwidth as memory  # noqa: E402
from coursekit.instructor import performance_audit as audit  # noqa: E402
from coursekit.instructor import traces as forest  # noqa: E402
from coursekit.measure.traces import load_events  # noqa: E402
from coursekit.workloads import catalog  # noqa: E402
from coursekit.workloads.remote_performance_audit import fused_reduce  # noqa: E402

REGION = "audit_ref"


def write_trace() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = forest.write_steps_trace(catalog.mlp_step(), (jnp.ones((33, 96), jnp.float32),),
                                        tmp, REGION)
        shutil.copyfile(path, ex.TRACE)


def not_children(path: Path, region: str) -> dict[str, list]:
    """(name, dur) of the events in the region's time that are no direct children, by
    reason (stage 2's hint names the kind a wrong summary's difference equals)."""
    raw = [e for e in load_events(path) if e.get("ph") == "X" and "dur" in e]
    found = {"nested": [], "straddling": [], "other-thread": []}
    for ev in forest.walk(forest.build_forest(raw)):
        if ev.name == region:
            found["nested"] += [[d.name, d.dur] for c in ev.children
                                for d in forest.walk(c.children)]
    for r in (e for e in raw if e.get("name") == region):
        for e in raw:
            if e is r or not r["ts"] <= e["ts"] < r["ts"] + r["dur"]:
                continue
            if (e.get("pid"), e.get("tid")) != (r.get("pid"), r.get("tid")):
                found["other-thread"].append([e["name"], float(e["dur"])])
            elif e["ts"] + e["dur"] > r["ts"] + r["dur"]:
                found["straddling"].append([e["name"], float(e["dur"])])
    return found


def costs(fn, *args) -> dict:
    compiled = {k: float(v) for k, v in audit.compiled_cost(fn, *args).items()
                if k in ("flops", "bytes accessed", "transcendentals")}
    lowered = jax.jit(fn).lower(*args).cost_analysis()
    lowered = lowered[0] if isinstance(lowered, (list, tuple)) else lowered
    return {"compiled": compiled, "lowered": {k: float(lowered[k]) for k in
                                              ("flops", "bytes accessed") if k in lowered}}


def generate() -> dict:
    matmuls = []
    for dtype, (m, k, n) in ex.MATMUL_SHAPES.items():
        itemsize = jnp.dtype(dtype).itemsize
        a, b = jnp.ones((m, k), dtype), jnp.ones((k, n), dtype)
        matmuls.append({"dtype": dtype, "shape": [m, k, n], "itemsize": itemsize,
                        "hand": audit.matmul_cost(m, k, n, itemsize),
                        **costs(jnp.matmul, a, b)})
    roofline = []
    for seed in ex.ROOFLINE_SEEDS:
        for case in ex.roofline_cases(np.random.default_rng(seed)):
            case["want"] = memory.roofline(*case["args"])
            if case["kind"] == "per_level":
                case["at_rate"] = {name: memory.roofline(*case["args"][:3], rate, 0, {})[
                    "predicted_s"] for name, rate in case["rates"].items()}
            roofline.append(case)
    return {
        "jax": jax.__version__, "backend": "cpu",
        "trace": {"file": ex.TRACE.name, "region": REGION,
                  "summary": forest.region_summary(ex.TRACE, REGION),
                  "not_children": not_children(ex.TRACE, REGION)},
        "matmuls": matmuls,
        "fused_reduce": {"shape": list(ex.FUSED_SHAPE), "seed": ex.FUSED_SEED,
                         **costs(fused_reduce, jnp.asarray(ex.fused_input()))},
        "square_matmul_flops": {str(n): audit.matmul_cost(n, n, n, 4)["flops"]
                                for n in ex.SQUARE_SIZES},
        "roofline": roofline,
    }


if __name__ == "__main__":
    jax.config.update("jax_platforms", "cpu")
    ex.FOLDER.mkdir(exist_ok=True)
    if "--trace" in sys.argv or not ex.TRACE.exists():
        write_trace()
    ex.STORED.write_text(json.dumps(generate(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {ex.STORED} ({ex.STORED.stat().st_size} bytes), trace "
          f"{ex.TRACE.stat().st_size} bytes")

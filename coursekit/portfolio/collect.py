"""Collect benchmark evidence for the portfolio: memory figures and scaling limits.

Notebooks call these (or a learner runs ``python -m coursekit.portfolio.collect ...``);
each writes one JSON file under ``<records>/evidence/`` that ``coursekit.portfolio.report``
reads. Correctness comes first in both: a figure is kept only with the check it rests on.

    memory    saved residuals, the compiler's temp estimate and the observed peak (VmHWM
              of a fresh process) of performance-audit stage 3's workload, per remat
              policy, measured with *your* functions, after checking that every policy
              gives the same gradients as no remat.
    scaling   sharded-training's step (your make_train_step) on 1, 2, 4, 8 devices, each
              count in its own process with XLA_FLAGS=--xla_force_host_platform_device_count=N:
              CPU-simulated devices sharing the same cores, so this shows overhead and
              limits, never parallel speedup. Each point's first update is compared with
              an independent single-device update (plain optax on coursekit.workloads.classifier)
              before the step is timed.

    python -m coursekit.portfolio.collect memory  [--impl PATH] [--depth 4 --width 256 ...]
    python -m coursekit.portfolio.collect scaling [--impl PATH] [--devices 1 2 4 8] [--batch 512]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from coursekit.facts import ROOT, records_dir, use_cpu_devices

SCALING_LABEL = "CPU-simulated devices sharing the same cores"



def _impl(project: str, impl) -> Path:
    return Path(impl).resolve() if impl else ROOT / "projects" / project / "starter" / "model.py"


def _write(name: str, payload: dict, out: str | Path | None) -> Path:
    path = Path(out) if out else records_dir() / "evidence" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1, default=str))
    return path


# ---------------------------------------------------------------------------------------
# Memory: three figures per policy
# ---------------------------------------------------------------------------------------

def save_memory(policies: dict, *, workload: dict, grads_equal: bool | None,
                out: str | Path | None = None, note: str = "") -> Path:
    """Keep memory figures a notebook already measured. ``policies`` maps a policy name
    ("none", "nothing_saveable", ...) to {"saved_residual_bytes", "compiler_temp_bytes",
    "run_peak_bytes" (run-only, median of repeats), "vmhwm_bytes"} (ints; a figure not
    measured is None). ``grads_equal``: whether every
    policy's gradients equalled no-remat gradients (None: not checked)."""
    from coursekit.measure.environment import environment_fingerprint
    env = environment_fingerprint()
    payload = {"kind": "memory", "time": time.time(), "workload": workload,
               "policies": policies, "grads_equal": grads_equal,
               "rests_on": "every policy's gradients equal no-remat gradients "
                           "(performance-audit stage 3, grads_equal_before_timing)",
               "label": _label(env), "fingerprint": env, "note": note}
    return _write("memory", payload, out)


def collect_memory(impl: str | Path | None = None, *, depth: int = 4, width: int = 256,
                   hidden: int = 1024, batch: int = 512,
                   policies: tuple = (None, "nothing_saveable"),
                   out: str | Path | None = None) -> dict:
    """Measure the three memory figures with the learner's performance-audit functions
    (``init_blocks``, ``loss_and_grads``, ``saved_residual_bytes``, ``compiler_temp_bytes``,
    ``peak_rss_fresh_process``). Gradients are compared first; with unequal gradients the
    figures are still kept, marked as resting on a failed check. Returns the payload."""
    import statistics

    import jax
    import numpy as np

    from coursekit.checking.learner import load_impl
    mod = load_impl(_impl("performance-audit", impl))
    params = mod.init_blocks(jax.random.key(0), depth, width, hidden)
    x = jax.random.normal(jax.random.key(1), (batch, width))
    _, ref = mod.loss_and_grads(params, x, None)
    ref = [np.asarray(g) for g in jax.tree.leaves(ref)]
    grads_equal, figures = True, {}
    for policy in policies:
        _, grads = mod.loss_and_grads(params, x, policy)
        got = [np.asarray(g) for g in jax.tree.leaves(grads)]
        same = len(got) == len(ref) and all(
            a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-7)
            for a, b in zip(got, ref))
        grads_equal = grads_equal and same
        peak = mod.peak_rss_fresh_process(depth, width, hidden, batch, policy)
        figures[policy or "none"] = {
            "saved_residual_bytes": int(mod.saved_residual_bytes(params, x, policy)),
            "compiler_temp_bytes": int(mod.compiler_temp_bytes(params, x, policy)),
            # run-only peak (high-water mark reset after compile), median of the repeats;
            # vmhwm_bytes: the unreset reading (runtime + compile + inputs + run)
            "run_peak_bytes": int(statistics.median(peak["run_peak_bytes"])),
            "run_peak_spread_bytes": int(max(peak["run_peak_bytes"]) -
                                         min(peak["run_peak_bytes"])),
            "vmhwm_bytes": int(statistics.median(peak["vmhwm_bytes"])),
            "grads_equal": bool(same)}
    workload = {"depth": depth, "width": width, "hidden": hidden, "batch": batch,
                "dtype": "float32", "impl": str(_impl("performance-audit", impl))}
    path = save_memory(figures, workload=workload, grads_equal=grads_equal, out=out)
    return json.loads(path.read_text())


# ---------------------------------------------------------------------------------------
# Scaling: the sharded step over 1, 2, 4, 8 CPU-simulated devices
# ---------------------------------------------------------------------------------------

_SCALING_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
spec = json.loads(sys.argv[2])
out = {"devices": spec["devices"], "ok": False, "error": ""}
try:
    import jax, jax.numpy as jnp, numpy as np, optax
    from coursekit.workloads import classifier
    from coursekit.checking.learner import load_impl
    from coursekit.measure.timing import time_synced
    impl = load_impl(spec["impl"])
    config = dict(getattr(impl, "DEFAULT_CONFIG", {}))
    config.update(seed=0, data_seed=1, n_examples=max(spec["batch"], 64),
                  batch=spec["batch"], lr=0.05, momentum=0.9, noise=0.0)
    mesh = impl.make_mesh(spec["devices"])
    state = impl.init_state(config, mesh)
    host = impl.batch_at(impl.make_data(config), config, 0)
    batch = impl.place_batch(host, mesh)
    step = impl.make_train_step(impl.make_optimizer(config), 0.0)
    import time
    started = time.perf_counter()   # the first call (trace + compile + run), timed apart
    new_state, loss = jax.block_until_ready(step(state, batch))
    out["first_call_s"] = time.perf_counter() - started
    # Independent single-device reference: plain optax on the classifier, one update.
    params0 = jax.device_get(state["params"])
    opt = optax.sgd(config["lr"], momentum=config["momentum"])
    ref_loss, grads = jax.value_and_grad(classifier.loss)(params0, host["x"], host["y"],
                                                          host["mask"])
    updates, _ = opt.update(grads, opt.init(params0), params0)
    ref_params = optax.apply_updates(params0, updates)
    got = jax.tree.leaves(jax.device_get(new_state["params"]))
    want = jax.tree.leaves(ref_params)
    err = max([float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(got, want)]
              + [abs(float(loss) - float(ref_loss))])
    out["max_abs_error"] = err
    out["ok"] = bool(len(got) == len(want) and all(
        np.allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-5) for a, b in zip(got, want))
        and np.isclose(float(loss), float(ref_loss), rtol=1e-4, atol=1e-5))
    if out["ok"]:
        t = time_synced(step, state, batch, warmup=spec["warmup"], iters=spec["iters"])
        out.update(samples_s=t.samples_s,
                   median_s=t.median_s, compiles_warmed=t.compiles_warmed,
                   items_per_s=spec["batch"] / t.median_s)
    else:
        out["error"] = (f"the {spec['devices']}-device update differs from the "
                        f"single-device reference by up to {err:.3g}: not timed")
    out["jax_devices"] = jax.device_count()
    from coursekit.measure.environment import environment_fingerprint
    out["fingerprint"] = environment_fingerprint()
except Exception as e:
    out["error"] = f"{type(e).__name__}: {str(e)[:400]}"
print("SCALING_RESULT " + json.dumps(out))
"""


def collect_scaling(impl: str | Path | None = None, *, devices: tuple = (1, 2, 4, 8),
                    batch: int = 512, iters: int = 10, warmup: int = 2,
                    timeout: float = 300, out: str | Path | None = None) -> dict:
    """Time sharded-training's step (the learner's ``make_train_step`` on
    ``init_state``/``place_batch``) on each device count, each in its own process with
    ``--xla_force_host_platform_device_count=N``. ``batch`` must divide by every count.
    A point whose first update disagrees with the independent reference is not timed.
    Returns the payload written to ``<records>/evidence/scaling.json``."""
    if any(batch % n for n in devices):
        raise ValueError(f"batch {batch} must divide by every device count {devices}")
    from coursekit.measure.environment import environment_fingerprint
    path = _impl("sharded-training", impl)
    points = []
    for n in devices:
        env = use_cpu_devices(n, dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu"))
        spec = {"devices": n, "impl": str(path), "batch": batch, "iters": iters,
                "warmup": warmup}
        try:
            done = subprocess.run([sys.executable, "-c", _SCALING_CHILD, str(ROOT),
                                   json.dumps(spec)], capture_output=True, text=True,
                                  timeout=timeout, env=env, cwd=ROOT)
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("SCALING_RESULT ")]
            point = json.loads(lines[-1].split(" ", 1)[1]) if lines else {
                "devices": n, "ok": False,
                "error": f"the child process exited {done.returncode}: "
                         f"{done.stderr.strip()[-300:]}"}
        except subprocess.TimeoutExpired:
            point = {"devices": n, "ok": False, "error": f"ran over {timeout:.0f} s"}
        points.append(point)
    env = next((p["fingerprint"] for p in points if isinstance(p.get("fingerprint"), dict)),
               None) or environment_fingerprint()
    env = {**env, "devices": "1, 2, 4, 8 simulated (one process per count)"
           if tuple(devices) == (1, 2, 4, 8) else f"{list(devices)} simulated"}
    payload = {"kind": "scaling", "time": time.time(), "label": SCALING_LABEL,
               "workload": {"step": "sharded-training make_train_step (noise 0)",
                            "model": "coursekit.workloads.classifier", "global_batch": batch,
                            "iters": iters, "warmup": warmup, "impl": str(path)},
               "rests_on": "each point's first update equals an independent "
                           "single-device optax update (rtol 1e-4, atol 1e-5)",
               "points": points, "fingerprint": env, "cpu_cores": os.cpu_count()}
    _write("scaling", payload, out)
    return payload


def _label(env: dict) -> str:
    backend = str(env.get("backend", "")).lower()
    if backend == "cpu":
        return f"CPU figure ({env.get('cpu_cores')} cores): says nothing about accelerators"
    return f"{backend.upper()} figure"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.portfolio.collect",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    mem = sub.add_parser("memory", help="three memory figures of performance-audit stage 3")
    mem.add_argument("--impl", default=None, help="default: your performance-audit starter")
    for name, default in (("depth", 4), ("width", 256), ("hidden", 1024), ("batch", 512)):
        mem.add_argument(f"--{name}", type=int, default=default)
    sc = sub.add_parser("scaling", help="the sharded step over CPU-simulated devices")
    sc.add_argument("--impl", default=None, help="default: your sharded-training starter")
    sc.add_argument("--devices", type=int, nargs="+", default=[1, 2, 4, 8])
    sc.add_argument("--batch", type=int, default=512)
    sc.add_argument("--iters", type=int, default=10)
    args = parser.parse_args(argv)
    try:
        if args.what == "memory":
            payload = collect_memory(args.impl, depth=args.depth, width=args.width,
                                     hidden=args.hidden, batch=args.batch)
            for policy, fig in payload["policies"].items():
                print(f"{policy:>18}: residuals {fig['saved_residual_bytes'] / 2**20:.1f} MiB, "
                      f"compiler temp {fig['compiler_temp_bytes'] / 2**20:.1f} MiB, "
                      f"peak {fig['vmhwm_bytes'] / 2**20:.0f} MiB  ({payload['label']})")
        else:
            payload = collect_scaling(args.impl, devices=tuple(args.devices),
                                      batch=args.batch, iters=args.iters)
            for p in payload["points"]:
                shown = (f"median {p['median_s'] * 1e3:.2f} ms, {p['items_per_s']:.0f} items/s"
                         if p.get("ok") else f"not timed: {p.get('error')}")
                print(f"{p['devices']} device(s): {shown}")
            print(f"({SCALING_LABEL}: CPU figures, no parallel speedup is possible here)")
    except Exception as err:  # noqa: BLE001 - a named line, not a traceback wall
        from coursekit.checking.errors import LearnerCodeError
        if isinstance(err, LearnerCodeError) or isinstance(err, (NotImplementedError,
                                                                 ValueError)):
            print(f"error: {err}", file=sys.stderr)
            return 1
        raise
    print(f"kept under {records_dir() / 'evidence'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""sharded-training stage 4: trace and timing. The learner profiles a fresh jitted
data-parallel step the checker hands it (wrapped to count calls and compiles); the
record, the samples, the trace and the refusal of a wrong output are each checked
against the checker's own count, synchronised timing and trace parse."""

from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharded_harness import N_DEVICES, checker
from sharded_reference import blobs, ref_step_fn

from coursekit.checking.learner import get_function
from coursekit.checking.probes import CallCounter, region_name, samples_of, within_ratio
from coursekit.checking.values import fail_unless
from coursekit.measure import traces
from coursekit.measure.timing import time_synced
from coursekit.provenance.records import read_run_record, validate_run_record
from coursekit.workloads import classifier

# The learner's synced median vs the checker's, either way. An unsynchronised timer reads
# this step 20-50x too fast; load on a shared 2-core machine moves medians by up to ~3x.
TIME_RATIO_WINDOW = 6.0


def timing_workload(ctx):
    """A fresh jitted data-parallel step (never called yet), its state and batch on the
    mesh, and its correct loss. Wide enough that a step takes milliseconds."""
    rng = ctx.rng("timing")
    mesh = jax.make_mesh((N_DEVICES,), ("data",), devices=jax.devices(),
                         axis_types=(jax.sharding.AxisType.Auto,))
    rows = int(rng.integers(60, 80)) * 16 + 8
    hidden = int(rng.integers(200, 260))
    x, y = blobs(rng, rows * N_DEVICES)
    mask = np.ones(rows * N_DEVICES, np.float32)
    params = jax.jit(classifier.init_params, static_argnames="hidden")(
        jax.random.key(int(rng.integers(0, 2**30))), hidden=hidden)
    config = {"lr": 0.05, "momentum": 0.9, "noise": 0.1}
    step = ref_step_fn(config)
    rep, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    state = jax.device_put({"params": params, "momentum": jax.tree.map(jnp.zeros_like,
                                                                       params),
                            "key": jax.random.key(int(rng.integers(0, 2**30)))}, rep)
    batch = {k: jax.device_put(np.asarray(v), split) for k, v in
             (("x", x), ("y", y), ("mask", mask))}

    def fn(state, batch):
        params, momentum, key, loss = step(state["params"], state["momentum"], state["key"],
                                           batch["x"], batch["y"], batch["mask"])
        return {"params": params, "momentum": momentum, "key": key}, loss

    loss = float(ref_step_fn(config)(*jax.device_put(
        (params, jax.tree.map(jnp.zeros_like, params), state["key"], x, y, mask),
        jax.devices()[0]))[3])
    return fn, state, batch, loss


def learner_record(impl, ctx) -> tuple[dict, dict, dict]:
    """The learner's run record of the timing workload (profiled once per run), the
    calls and compiles counted around the step it was handed, and the arguments."""
    def profile_once():
        profile = get_function(impl, "profile_train_step")
        fn, state, batch, loss = timing_workload(ctx)
        counter = CallCounter(jax.jit(fn))
        rng = ctx.rng("profile-args")
        args = {"region": region_name(rng),
                "warmup": int(rng.integers(1, 4)), "iters": int(rng.integers(6, 10)),
                "trace_steps": int(rng.integers(2, 4))}
        logdir = ctx.subdir("profile")
        record = profile(counter, state, batch, str(logdir), expected_loss=loss, **args)
        fail_unless(isinstance(record, dict), "profile_train_step must return a dict",
                    yours=type(record).__name__, expected="a run record dict")
        return record, counter.report(), dict(args, logdir=logdir, fn=fn, state=state,
                                              batch=batch, loss=loss)
    return ctx.once("record", profile_once)


@checker.check(4, "record_is_valid")
def _(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    problems = validate_run_record(record, check_trace=True)
    fail_unless(not problems, "the run record is not in the format performance-audit "
                "stage 4 reads", yours=problems, expected=[],
                hint="coursekit.provenance.records.make_run_record(timing, boundary=..., "
                "trace=..., region=...)")
    path = ctx.subdir("records") / "run.json"
    path.write_text(json.dumps(record))
    back = read_run_record(path)
    fail_unless(back["boundary"] and back["region"] == args["region"] and
                back["output_ok"] is True and back["iters"] == args["iters"],
                "the record does not describe this measurement",
                yours={k: back[k] for k in ("boundary", "region", "output_ok", "iters")},
                expected={"region": args["region"], "output_ok": True,
                          "iters": args["iters"]})


@checker.check(4, "compile_apart_and_calls")
def _(impl, ctx):
    record, counted, args = learner_record(impl, ctx)
    calls = 1 + args["warmup"] + args["iters"] + args["trace_steps"]
    fail_unless(counted["calls"] == calls, "profile_train_step made the wrong number of "
                "calls", yours=f"{counted['calls']} calls", expected=f"{calls} = 1 first + "
                f"{args['warmup']} warmup + {args['iters']} timed + {args['trace_steps']} "
                "traced", hint="one first call alone, then warmup, iters, trace_steps")
    fail_unless(counted["compiled_at"] == [0], "the compile did not happen in the first "
                "call alone", yours=f"compiled in calls {counted['compiled_at']}",
                expected="only call 0")
    fail_unless(record.get("compiles_first_call") == counted["compiles"] and
                record.get("compiles_warmed") == 0,
                "compile counts in the record do not match what jax.monitoring saw",
                yours=(record.get("compiles_first_call"), record.get("compiles_warmed")),
                expected=(counted["compiles"], 0),
                hint="count with coursekit.measure.timing.count_compiles()")


@checker.check(4, "samples_are_synchronised")
def _(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    samples = samples_of(record, "profile_train_step", args["iters"])
    reference = time_synced(jax.jit(args["fn"]), args["state"], args["batch"], warmup=2,
                            iters=7).median_s
    within_ratio(float(np.median(samples)), reference, TIME_RATIO_WINDOW, "your median",
                 "jax.block_until_ready(out) inside every timed boundary: the step returns "
                 "before the devices finish")


@checker.check(4, "trace_holds_region")
def _(impl, ctx):
    record, _, args = learner_record(impl, ctx)
    trace = Path(record.get("trace") or "")
    fail_unless(trace.is_file(), "the record's trace file does not exist",
                yours=str(trace), expected="a *.trace.json.gz under logdir")
    newest = traces.newest_trace(args["logdir"])
    fail_unless(trace.resolve() == newest.resolve(), "the trace is not the newest one under "
                "logdir", yours=str(trace), expected=str(newest))
    summary = traces.region_summary(trace, args["region"])
    fail_unless(summary["count"] == args["trace_steps"],
                "the annotated region is not in the trace once per traced step",
                yours=summary["count"], expected=args["trace_steps"],
                hint="jax.profiler.TraceAnnotation(region, step=i) around each call")
    fail_unless(summary["child_us"] > 0, "the region holds no events: the step did not "
                "run inside it", yours=summary, expected="the jitted step nested inside",
                hint="synchronise inside the annotation")


@checker.check(4, "wrong_output_refused")
def _(impl, ctx):
    profile = get_function(impl, "profile_train_step")
    _, _, args = learner_record(impl, ctx)
    wrong = args["loss"] * 1.01 + 0.01
    record = profile(jax.jit(args["fn"]), args["state"], args["batch"],
                     str(ctx.subdir("profile-wrong")), region="wrong", warmup=1, iters=3,
                     trace_steps=1, expected_loss=wrong)
    fail_unless(isinstance(record, dict) and record.get("output_ok") is False,
                "a wrong loss was not caught before timing",
                yours=record.get("output_ok") if isinstance(record, dict) else record,
                expected=False, hint="compare the first call's loss with expected_loss "
                "(rtol 1e-5) before anything is timed")
    fail_unless(record.get("samples_s") == [] and not record.get("trace"),
                "a run with a wrong output must not be timed or traced",
                yours={"samples_s": record.get("samples_s"), "trace": record.get("trace")},
                expected={"samples_s": [], "trace": ""})


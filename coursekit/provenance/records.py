"""Run records: one measurement saved as JSON so a later decision can be made from it.

A run record is what performance-audit's ``time_fn`` returns (label, sync, warmup, iters,
first_call_s, samples_s, compiles_first_call, compiles_warmed, shapes, dtypes, output_ok,
backend) plus:

    boundary     name of what was timed ("train_step", "matmul", ...)
    trace        path of the profiler trace of the same workload ("" when none)
    region       the TraceAnnotation name of one timed call in that trace ("" when none)
    fingerprint  the environment it ran in (``environment_fingerprint()``)

and optionally, one entry per sample of ``samples_s``:

    round_ids    the index of the interleaved round each sample was measured in (a
                 record without it counts each sample as its own round); the decision
                 (``coursekit.measure.decision``) pairs rounds, not samples
    cpu_s        process CPU seconds of each sample: with the wall time, the evidence
                 of contention (a call that waited for a core has low CPU per wall second)

performance-audit stage 4 (``load_run`` / ``decide``), sharded-training stage 4, the
notebooks and the readiness review all read and write this one format, through here.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from coursekit.measure.environment import environment_fingerprint

TIMING_KEYS = ("label", "sync", "warmup", "iters", "first_call_s", "samples_s",
               "compiles_first_call", "compiles_warmed", "shapes", "dtypes", "output_ok",
               "backend")
RECORD_KEYS = TIMING_KEYS + ("boundary", "trace", "region", "fingerprint")
PER_SAMPLE_KEYS = ("round_ids", "cpu_s")  # optional, one entry per sample
FINGERPRINT_KEYS = ("jax", "jaxlib", "backend", "devices", "xla_flags", "cpu", "python")
SYNC_METHODS = ("block_until_ready", "host_read")


class RecordError(ValueError):
    """A run record is missing, unreadable or malformed; the message says which field."""


def make_run_record(timing: dict, *, boundary: str, trace: str | Path = "",
                    region: str = "", fingerprint: dict | None = None) -> dict:
    """A run record from a ``time_fn``-style dict: copies the timing keys, adds
    boundary, trace, region and the environment fingerprint (measured now unless given).
    Raises RecordError when ``timing`` lacks a key or the result does not validate."""
    if not isinstance(timing, dict):
        raise RecordError(f"timing must be a dict like time_fn's result, got "
                          f"{type(timing).__name__}")
    missing = [k for k in TIMING_KEYS if k not in timing]
    if missing:
        raise RecordError(f"timing lacks keys {missing}")
    record = {k: timing[k] for k in TIMING_KEYS}
    record["samples_s"] = [float(s) for s in timing["samples_s"]]
    if timing.get("round_ids") is not None:
        record["round_ids"] = list(timing["round_ids"])
    if timing.get("cpu_s") is not None:
        record["cpu_s"] = [float(c) for c in timing["cpu_s"]]
    record.update(boundary=str(boundary), trace=str(trace) if trace else "",
                  region=str(region),
                  fingerprint=dict(fingerprint or environment_fingerprint()))
    problems = validate_run_record(record)
    if problems:
        raise RecordError("not a valid run record: " + "; ".join(problems))
    return record


def _is_number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _per_sample_problems(record: dict) -> list[str]:
    samples = record["samples_s"]
    n = len(samples) if isinstance(samples, list) else None
    problems = []
    ids = record.get("round_ids")
    if ids is not None:
        if not isinstance(ids, list) or not all(
                isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ids):
            problems.append("round_ids must be a list of non-negative ints (the round of "
                            "each sample)")
        elif n is not None and len(ids) != n:
            problems.append(f"round_ids holds {len(ids)} entries for {n} samples: one round "
                            "id per sample")
    cpu = record.get("cpu_s")
    if cpu is not None:
        if not isinstance(cpu, list) or not all(_is_number(c) and c >= 0 for c in cpu):
            problems.append("cpu_s must be a list of non-negative CPU seconds, one per sample")
        elif n is not None and len(cpu) != n:
            problems.append(f"cpu_s holds {len(cpu)} entries for {n} samples: one per sample")
    return problems


def validate_run_record(record, *, check_trace: bool = False) -> list[str]:
    """Everything wrong with ``record`` as a list of short sentences (empty: valid).
    With ``check_trace``, a non-empty ``trace`` must name an existing file."""
    if not isinstance(record, dict):
        return [f"a run record is a dict, got {type(record).__name__}"]
    problems = [f"missing key {k!r}" for k in RECORD_KEYS if k not in record]
    if problems:
        return problems
    if record["sync"] not in SYNC_METHODS:
        problems.append(f"sync is {record['sync']!r}: a timing that does not wait for the "
                        f"result ({' or '.join(SYNC_METHODS)}) measures dispatch, not work")
    for key in ("warmup", "iters", "compiles_first_call", "compiles_warmed"):
        if not isinstance(record[key], int) or isinstance(record[key], bool) or record[key] < 0:
            problems.append(f"{key} must be a non-negative int, got {record[key]!r}")
    if not _is_number(record["first_call_s"]) or record["first_call_s"] <= 0:
        problems.append(f"first_call_s must be positive seconds (the compiling call, "
                        f"timed apart), got {record['first_call_s']!r}")
    samples = record["samples_s"]
    if not isinstance(samples, list) or not all(_is_number(s) and s > 0 for s in samples):
        problems.append("samples_s must be a list of raw positive seconds, one per timed call")
    elif record["output_ok"] is not False and isinstance(record["iters"], int) \
            and len(samples) != record["iters"]:
        problems.append(f"samples_s holds {len(samples)} samples but iters is "
                        f"{record['iters']}: keep every raw sample")
    problems += _per_sample_problems(record)
    if record["output_ok"] not in (True, False, None):
        problems.append(f"output_ok must be True, False or None, got {record['output_ok']!r}")
    if not isinstance(record["shapes"], list) or not isinstance(record["dtypes"], list):
        problems.append("shapes and dtypes must be lists")
    for key in ("boundary", "backend"):
        if not isinstance(record[key], str) or not record[key]:
            problems.append(f"{key} must be a non-empty string")
    for key in ("trace", "region", "label"):
        if not isinstance(record[key], str):
            problems.append(f"{key} must be a string")
    if record.get("trace") and not record.get("region"):
        problems.append("a record with a trace must name the annotated region in it")
    if check_trace and record.get("trace") and not Path(record["trace"]).is_file():
        problems.append(f"trace file not found: {record['trace']}")
    fp = record["fingerprint"]
    if not isinstance(fp, dict):
        problems.append("fingerprint must be a dict (environment_fingerprint())")
    else:
        problems += [f"fingerprint lacks {k!r}" for k in FINGERPRINT_KEYS if k not in fp]
    return problems


def write_run_record(path: str | Path, record: dict) -> Path:
    """Validate, then write ``record`` as JSON at ``path`` (folders created)."""
    problems = validate_run_record(record)
    if problems:
        raise RecordError(f"refusing to write an invalid run record to {path}: "
                          + "; ".join(problems))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1))
    return path


def read_run_record(path: str | Path) -> dict:
    """Read and validate a run record; RecordError names the file and the problem."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RecordError(f"cannot read run record {path}: {err}") from err
    problems = validate_run_record(record)
    if problems:
        raise RecordError(f"{path} is not a valid run record: " + "; ".join(problems))
    return record

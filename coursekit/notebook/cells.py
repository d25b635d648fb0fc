"""Helpers that notebook cells call: check cells, predictions, honest labels.

Check cells run the *same* command the grader runs (``check.py --stage N --impl PATH``)
in a subprocess, show its PASS/FAIL lines and never raise: a learner's unfinished stage
reads "not yet", it does not stop the notebook. Checks that only meet a function still
raising NotImplementedError are shown as one line per such function, then where to start
(check.py's own output, a public contract, is unchanged; only the cell condenses it).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit.checking.tally import LOAD_ADVICE, counts, inconclusive_advice
from coursekit.checking.terminal_record import FROM_CELL_ENV
from coursekit.facts import ROOT, checker_path, records_dir
from coursekit.notebook.reuse import SHARED_SOURCE, reusable_result

RECORDS = records_dir()


def project_path(project: str, which: str = "starter") -> Path:
    """``projects/<project>/<which>/model.py`` (which: "starter" or "solution")."""
    return ROOT / "projects" / project / which / "model.py"


def run_check(project: str, stage: int | str, impl: str | Path | None = None,
              timeout: float = 900, quiet: bool = False) -> dict:
    """Run ``projects/<project>/tests/check.py --stage <stage> --impl <impl>`` and print
    its lines. Returns {"passed", "failed", "inconclusive", "instructor", "ran", "ok",
    "results", "returncode"} (``ran``: every check that ran, whatever its verdict; say
    ``passed_of(summary)`` to a learner); never raises. Results are also kept under
    build/learner/checks/ for the route map and portfolio."""
    impl = Path(impl) if impl else project_path(project)
    if not impl.is_absolute():
        impl = (Path.cwd() / impl).resolve()
    check = checker_path(project)
    reused = reusable_result(project, stage, impl)
    if reused is not None:
        text, rc, data = reused
    else:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "result.json"
            cmd = [sys.executable, str(check), "--stage", str(stage), "--impl", str(impl),
                   "--json", str(out)]
            try:
                # the cell keeps its own record (below): the checker need not keep one
                text, rc = _run_checker(cmd, impl, timeout)
            except subprocess.TimeoutExpired:
                text = f"FAIL stage {stage} · timeout\n    the checker ran over {timeout} s\n"
                rc = -1
            data = json.loads(out.read_text()) if out.exists() else None
    results = data["results"] if data else []
    unwritten = _unwritten(results)
    if not quiet:
        print(_condensed(text, results, unwritten).rstrip())
    summary = {"project": project, "stage": stage, "impl": str(impl), "returncode": rc,
               "time": time.time(), "results": results,
               "versions": data["versions"] if data else {},
               # where the learner's code ran (check.py's label, self-reported by its
               # learner process; None when nothing ran)
               "measured_on": data.get("measured_on") if data else None,
               # where a reused answer came from (coursekit.notebook.reuse); "" when
               # this cell ran the checker itself
               "source": (reused[2].get("source") or SHARED_SOURCE) if reused else ""}
    summary.update(counts(summary["results"]))
    summary["ran"] = len(results)
    summary["ok"] = rc == 0 and summary["failed"] == 0 and summary["passed"] > 0
    _keep(f"checks/{project}-stage{stage}.json", summary)
    if summary["inconclusive"] and not summary["failed"] and not quiet:
        if inconclusive_advice(summary["results"]) == LOAD_ADVICE:
            print("\nnot decided: a timing check could not tell a right measurement from "
                  "a wrong one on this machine's load (its evidence is above); nothing "
                  "points at your code. Re-run this cell when the machine is quieter.")
        else:
            print("\nnot decided: nothing points at your code; each INCONCLUSIVE check "
                  "above says in its hint what decides it (a terminal run, a second run).")
    elif summary["instructor"] and not summary["failed"] and not quiet:
        print(f"\n{summary['instructor']} check(s) of this stage are graded by your "
              "instructor: they need the course's reference code, which your copy does not "
              "hold. Nothing failed here.")
    elif not summary["ok"] and not quiet:
        shown = impl.relative_to(ROOT) if impl.is_relative_to(ROOT) else impl
        real = [r for r in results if r["status"] not in ("pass", "not-implemented",
                                                          "instructor")]
        if unwritten and not real:
            first = unwritten[0]
            where = shown if first["file"] in ("", impl.name) else first["file"]
            where = f"{where}, line {first['line']}" if first["line"] else where
            print(f"\nnot yet: start with {first['function']} ({where}): replace its "
                  "`raise NotImplementedError` with your code, then re-run this cell.")
        else:
            print(f"\nnot yet: fix the first FAIL above in {shown}, then re-run this cell.")
    return summary


def passed_of(summary: dict) -> str:
    """"P of N" for a check cell's summary, N every check that ran: a check that could not
    decide (inconclusive) or is graded by the instructor is counted and named beside it,
    never dropped from N (a stage of 11 checks with one inconclusive is "10 of 11 (1
    inconclusive)", not "10 of 10")."""
    ran = summary.get("ran", len(summary.get("results") or []))
    apart = [f"{summary[key]} {word}" for key, word in (
        ("inconclusive", "inconclusive"), ("not_applicable", "not applicable here"),
        ("instructor", "graded by your instructor"))
        if summary.get(key)]
    return f"{summary.get('passed', 0)} of {ran}" + (f" ({', '.join(apart)})" if apart else "")


def _run_checker(cmd: list[str], impl: Path, timeout: float) -> tuple[str, int]:
    """check.py in a subprocess: (its output, its exit status). Where this kernel holds an
    accelerator (one process at a time can), the kernel serves the learner side itself
    (``coursekit.checking.attached``): the checker's process stays on the CPU."""
    from coursekit.checking.attached import holds_accelerator_here, serve_for_check
    env = {**os.environ, FROM_CELL_ENV: "1"}
    served = serve_for_check(impl) if holds_accelerator_here() else None
    if served is not None:
        env.update(served.env())
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, pass_fds=served.fds if served else ())
    if served is not None:
        served.handed_over()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise
    finally:
        if served is not None:
            served.finish()
    return out + err[-2000:], proc.returncode


# "not yet: stage 1: time_fn (what it does) (model.py, line 72, in time_fn)": the message
# a checker gives for a function that still raises NotImplementedError.
_RAISED_AT = re.compile(r"^not yet:\s*(?P<reason>.*?)\s*"
                        r"\((?P<file>[^(),]+), line (?P<line>\d+), in (?P<function>[\w.<>]+)\)$")
_CHECK_LINE = re.compile(r"^(PASS|FAIL|INCONCLUSIVE|INSTRUCTOR) stage \S+ · (?P<check_id>\S+)")
_SUMMARY_LINE = re.compile(r"^\d+ passed, \d+ failed(, \d+ inconclusive.*)?(; graded by .*)?$")


def _unwritten(results: list[dict]) -> list[dict]:
    """The learner functions that still raise NotImplementedError, in the order the
    checks first met them: {"function", "reason", "file", "line", "checks"}."""
    found: dict[tuple, dict] = {}
    for r in results:
        if r.get("status") != "not-implemented":
            continue
        message = (r.get("message") or "").strip()
        m = _RAISED_AT.match(message)
        key = (m["file"], m["line"], m["function"]) if m else (message,)
        entry = found.setdefault(key, {
            "function": m["function"] if m else "the unfinished function",
            "reason": m["reason"] if m else message.removeprefix("not yet:").strip(),
            "file": m["file"] if m else "", "line": m["line"] if m else "", "checks": []})
        entry["checks"].append(r["check_id"])
    return list(found.values())


def _condensed(text: str, results: list[dict], unwritten: list[dict]) -> str:
    """What the check cell shows: the checker's own lines, except that the FAIL blocks of
    checks that only wait for an unwritten function become one line per function (a
    starter stage would otherwise repeat the same "not yet" for every check). Every PASS
    line and every real FAIL block is kept as the checker printed it."""
    waiting = {c for u in unwritten for c in u["checks"]}
    if not waiting:
        return text
    kept, dropping, inserted = [], False, False
    for line in text.splitlines():
        check = _CHECK_LINE.match(line)
        if check:
            dropping = check["check_id"] in waiting
        elif _SUMMARY_LINE.match(line):
            dropping = False  # a dropped block runs to the next check or the summary
        if _SUMMARY_LINE.match(line) and not inserted:
            kept += [_unwritten_line(u) for u in unwritten]
            inserted = True
        if not dropping:
            kept.append(line)
    if not inserted:
        kept += [_unwritten_line(u) for u in unwritten]
    return "\n".join(kept)


def _unwritten_line(u: dict) -> str:
    where = f" · {u['file']}, line {u['line']}" if u["file"] else ""
    n = len(u["checks"])
    return (f"not yet: {u['reason']}{where} · {n} check{'s' if n != 1 else ''} "
            f"wait{'s' if n == 1 else ''} on it")


def shown(path) -> str:
    """A path as a notebook prints it: relative to the course folder when inside it, and
    this machine's host name (the profiler names its files after it) as ``<host>``, so an
    executed notebook handed in names neither the learner's folders nor the machine."""
    import socket
    path, text = Path(path), str(path)
    if path.is_absolute():
        try:
            text = str(path.resolve().relative_to(ROOT))
        except ValueError:
            text = f".../{path.name}"
    host = socket.gethostname()
    return text.replace(host, "<host>") if len(host) >= 2 else text


def record_prediction(name: str, value, unit: str = "") -> None:
    """Store a learner's prediction before the cell that measures it. ``None`` (the cell
    left as given) is reported, not an error, so the notebook keeps running."""
    if value is None:
        print(f"prediction {name!r} is still empty: write your guess before running on.")
    _keep(f"predictions/{name}.json", {"name": name, "value": value, "unit": unit,
                                       "time": time.time()})


def compare_prediction(name: str, predicted, measured: float, unit: str = "") -> dict:
    """Print prediction beside measurement and keep both for the portfolio."""
    line = {"name": name, "predicted": predicted, "measured": measured, "unit": unit}
    if isinstance(predicted, (int, float)) and predicted:
        line["measured_over_predicted"] = measured / predicted
    shown = "(no prediction)" if predicted is None else f"{predicted} {unit}".strip()
    print(f"{name}: predicted {shown}, measured {measured:.4g} {unit}".rstrip())
    _keep(f"predictions/{name}.measured.json", line)
    return line


def cpu_label() -> str:
    """The honest label every CPU figure carries."""
    import jax
    backend = jax.default_backend()
    if backend == "cpu":
        return (f"CPU figure ({os.cpu_count()} cores, {jax.device_count()} JAX device(s)); "
                "says nothing about accelerator speed")
    return f"{backend.upper()} figure ({jax.devices()[0].device_kind})"


def _keep(relative: str, payload: dict) -> None:
    try:
        path = RECORDS / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1, default=str))
    except OSError:
        pass  # a read-only checkout must not break a notebook


def log_measurement(name: str, config: dict, timing, check: str, ok: bool | None = None,
                    *, notebook: str = "", metrics: dict | None = None) -> dict | None:
    """Record one timing as an MLflow run (``coursekit.provenance.tracking``) with what it
    rests on, and print one line saying so. Returns the run record, or None when there is
    no measurement yet (a learner's unfinished function) or the store cannot be written.

    ``timing``: a ``coursekit.measure.timing.Timing`` or a dict with ``samples_s`` (raw
    seconds), ``first_call_s`` (None: not timed, and said so), ``sync`` and ``warmup``
    (the learner's ``time_fn`` result has all of them). ``check`` says in words which
    correctness check the timing rests on; ``ok`` is its outcome (default: the timing's
    ``output_ok``). The run's config holds ``sync``, ``warmup`` and ``check`` beside
    ``config`` (so they enter the fingerprint: a different sync is another measurement);
    metrics hold ``first_call_s``, ``median_s``, ``output_ok`` (1/0); the raw samples are
    the ``samples/call_s.json`` artifact. A failed check records the run FAILED: it is
    kept, and no comparison uses it."""
    if not timing:
        print(f"not recorded yet: {name} (no measurement yet)")
        return None
    get = (timing.get if isinstance(timing, dict) else
           lambda key, default=None: getattr(timing, key, default))
    samples = [float(s) for s in get("samples_s") or []]
    first = get("first_call_s")
    ok = get("output_ok") if ok is None else ok
    sync, warmup = get("sync"), get("warmup")
    if sync is None or warmup is None or (not samples and ok is not False):
        # no samples is expected only when the check failed first (nothing was timed)
        raise ValueError(f"log_measurement({name!r}): the timing needs sync, warmup and "
                         f"samples_s (got sync={sync!r}, warmup={warmup!r}, "
                         f"{len(samples)} samples)")
    run_config = {**config, "sync": str(sync), "warmup": int(warmup), "check": check}
    values = {"samples": len(samples), **(metrics or {})}
    if samples:
        values["median_s"] = statistics.median(samples)
    if first is not None:
        values["first_call_s"] = float(first)
    if ok is not None:
        values["output_ok"] = 1.0 if ok else 0.0
    status = "FINISHED" if ok is not False else "FAILED"
    error = "" if ok is not False else f"correctness check failed: {check}"
    tags = {"course.notebook": notebook, "course.check": check, "course.sync": str(sync),
            "course.first_call": "timed apart" if first is not None else "not timed"}
    try:
        from coursekit.provenance import tracking
        run_id = tracking.log_run(name, run_config, values, {"call_s": samples},
                                  status=status, error=error, tags=tags)
        run = tracking.get_run(run_id)
    except Exception as err:  # noqa: BLE001 - a store problem must not stop a notebook
        print(f"not recorded in MLflow: {name}: {type(err).__name__}: {str(err)[:200]}")
        return None
    shown = "not timed" if first is None else f"{float(first) * 1e3:.2f} ms"
    outcome = "pass" if ok else "FAILED" if ok is False else "not checked"
    median = (f"median {values['median_s'] * 1e3:.3f} ms of {len(samples)} samples"
              if samples else "no samples (nothing timed after the failed check)")
    print(f"MLflow run {run_id[:8]} {run['status']}: {name} · sync {sync}, warm-up {warmup}, "
          f"first call {shown}, {median} · rests on: {check} ({outcome})")
    return run

"""Run one project's checker on many learner files in one checker process (developers'
and the test suite's planted bugs), each file in its own learner process.

    python -m coursekit.checking.planted SPEC.json OUT.json

SPEC: {"project": P, "seed": S, "runs": [{"name": N, "impl": PATH, "stage": K or [K, ...],
"only": [check ids], "seed": S (optional, this run's), "env": {VAR: value} (optional,
set in this process and the run's learner process while the run lasts)}, ...]}.
OUT: {name: {"status": {check_id: status}, "stdout": text, "returncode": 0|1,
"wall_s": W, "learner_starts": {"forked": F, "cold": C}, "json": {"seed": S, "results":
[{check_id, stage, status, message, yours, expected, hint, duration_s}, ...]}}}: what
``tests/helpers.run_checker`` reads from check.py, per run. A run's stdout is what
check.py would have printed (the result lines, then whatever the checker's own code, the
learner process and any process the checks start wrote to descriptor 1 during the run),
less check.py's closing count line.

Why it is sound to share the checker process: the checker must be built with
``learner_process=True`` (refused otherwise), so no learner file is ever imported here;
every run gets a fresh learner process, its own scratch folder and a fresh ``Context``
cache. What is shared is the checker's own code and its compiled references, which is
what makes a planted bug cost seconds instead of a checker start. A checker that raises
on one file (a bug of the checker, not a verdict) fails that run, with its traceback in
the run's stdout, and the batch goes on.

The learner processes are forked from a warm zygote with the learner environment
(``coursekit.checking.zygote``), which saves each run the learner process's import of
JAX (what that saves a batch: docs/ci.md). ``COURSE_PLANTED_COLD=1`` starts them cold,
as check.py and the grader do.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
import tempfile
import time
import traceback
from pathlib import Path

from coursekit.facts import checker_path

# "1": every learner process starts cold, as check.py and the grader start them (to
# compare; the default forks them from a warm zygote, ``coursekit.checking.zygote``)
COLD_ENV = "COURSE_PLANTED_COLD"


def load_checker(project: str):
    """The project's checker, loaded as the autograder loads check.py (before anything
    here imports jax: sharded-training's check.py sets its 8 CPU devices at import)."""
    check = checker_path(project)
    sys.path.insert(0, str(check.parent))  # per-stage modules beside check.py
    checker = runpy.run_path(str(check), run_name=f"planted_{project}")["checker"]
    if not checker.learner_process:
        raise SystemExit(f"{project}'s checker imports learner files in its own process: "
                         "planted files cannot share it (run check.py per file instead)")
    return checker


def _set_environ(values: dict) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = str(v)


@contextlib.contextmanager
def _environment(changes: dict):
    """These variables set (``None``: unset) while the block runs, in this process and so
    in a learner process started meanwhile; then each as it was. Nothing else of
    os.environ is touched."""
    before = {k: os.environ.get(k) for k in changes}
    _set_environ(changes)
    try:
        yield
    finally:
        _set_environ(before)


@contextlib.contextmanager
def _stdout_to(fd: int):
    """Descriptor 1 (this process's and every process started meanwhile) to ``fd``."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(fd, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _fields(r) -> dict:
    return {"check_id": r.check_id, "stage": r.stage, "status": r.status,
            "message": r.message, "yours": r.yours, "expected": r.expected, "hint": r.hint,
            "duration_s": r.duration_s}


def run_all(spec: dict) -> dict:
    checker = load_checker(spec["project"])
    from coursekit.checking import bridge
    from coursekit.checking.zygote import Zygotes
    out = {}
    runs = spec["runs"]
    if os.environ.get(COLD_ENV) != "1":
        bridge.FORK_FROM = Zygotes()
    with tempfile.TemporaryDirectory(prefix="planted-out-") as folder:
        captures = []
        for i in range(len(runs)):
            captures.append(os.open(Path(folder) / f"{i}.txt",
                                    os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        try:
            for i, run in enumerate(runs):
                before = _starts(bridge.FORK_FROM)
                got = _run_one(checker, bridge, runs, i, spec, captures, Path(folder))
                after = _starts(bridge.FORK_FROM)
                if after:  # this run's and the next one's early start
                    got["learner_starts"] = {k: after[k] - before[k] for k in after}
                out[run["name"]] = got
        finally:
            for fd in captures:
                os.close(fd)
            zygotes, bridge.FORK_FROM = bridge.FORK_FROM, None
            if zygotes is not None:
                zygotes.close()
    return out


def _starts(zygotes) -> dict:
    return {"forked": zygotes.forked, "cold": zygotes.cold} if zygotes else {}


def _run_one(checker, bridge, runs, i, spec, captures, folder) -> dict:
    run = runs[i]
    seed = int(run.get("seed", spec["seed"]))
    stages = run["stage"] if isinstance(run["stage"], list) else [run["stage"]]
    stages = [int(s) for s in stages]
    only = set(run.get("only") or [])
    known = {c.check_id for c in checker.checks if c.stage in stages}
    text = io.StringIO()
    results = []
    started = time.perf_counter()
    if only - known:
        text.write(f"planted run {run['name']!r}: no check {sorted(only - known)} in "
                   f"stage(s) {stages}\n")
    else:
        env = run.get("env") or {}
        outside = {k: os.environ.get(k) for k in env}  # what the next run's process gets
        with _stdout_to(captures[i]), _environment(env):
            if i + 1 < len(runs):  # the next file imports while this one is checked,
                nxt = runs[i + 1]  # in its own run's environment and stdout
                undo = outside | (nxt.get("env") or {})
                with _stdout_to(captures[i + 1]), _environment(undo):
                    bridge.prestart(nxt["impl"])
            try:
                with tempfile.TemporaryDirectory(prefix="planted-") as tmp:
                    results = checker.run(Path(run["impl"]), stages, seed, Path(tmp),
                                          out=text, only=only)
            except Exception:  # a bug of the checker: this run fails, the batch goes on
                text.write(traceback.format_exc())
                results = []
    stray = (folder / f"{i}.txt").read_text(errors="replace")
    failed = sum(r.status != "pass" for r in results)
    return {"status": {r.check_id: r.status for r in results},
            "stdout": text.getvalue() + stray,
            "returncode": 0 if results and not failed else 1,
            "wall_s": round(time.perf_counter() - started, 3),
            "json": {"seed": seed, "results": [_fields(r) for r in results]}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    spec = json.loads(Path(argv[0]).read_text())
    Path(argv[1]).write_text(json.dumps(run_all(spec), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

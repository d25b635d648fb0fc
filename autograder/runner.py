"""Runs one checker stage inside the sandbox and streams each result as it completes.

Started by the grader (through ``autograder/jail.py``) as
``python autograder_runner.py`` with ``AG_STAGE`` (JSON: check, impl, stages, seed,
workdir), ``AG_TOKEN`` and the result channel's fd in ``AG_POLICY``. It loads the
project's ``tests/check.py`` (the ``checker`` object, not its command line), then runs
the selected stages with the seed the grader chose. Every ``CheckResult`` goes down the
channel as one JSON line the moment it is printed, so checks finished before a crash or
a timeout keep their result. The final line ``{"kind": "done"}`` carries the
environment versions; no ``done`` means the run did not finish.

Before learner code is imported it notes the identity of the timing functions; after
every check it looks again, so a replacement that slipped past ``sitecustomize``
(``time.__dict__`` edits, class attributes) is still reported as ``tamper-timing``.
Standard library only until ``check.py`` imports its own.
"""

from __future__ import annotations

import json
import os
import runpy
import secrets
import sys
from dataclasses import asdict
from pathlib import Path

_cfg = json.loads(os.environ.pop("AG_STAGE"))
_token = os.environ.pop("AG_TOKEN", "")
_fd = json.loads(os.environ.get("AG_POLICY") or "{}").get("result_fd")


def send(kind: str, **payload) -> None:
    line = json.dumps({"kind": kind, "token": _token, **payload}, default=str) + "\n"
    if _fd is None:
        print(line, end="", file=sys.__stderr__)
        return
    data = line.encode()
    while data:
        data = data[os.write(_fd, data):]


def watched() -> dict:
    """name -> object for the functions a fake timing would replace."""
    out = {}
    import time
    for name in ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time"):
        out[f"time.{name}"] = time.__dict__.get(name)
    jax = sys.modules.get("jax")
    if jax is not None:
        out["jax.block_until_ready"] = jax.__dict__.get("block_until_ready")
        try:
            from jax._src.array import ArrayImpl
            out["ArrayImpl.block_until_ready"] = ArrayImpl.__dict__.get("block_until_ready")
        except Exception:  # noqa: BLE001 - a jax without this class has nothing to watch
            pass
    return out


def main() -> int:
    check = Path(_cfg["check"])
    sys.argv = [str(check)]
    module = runpy.run_path(str(check), run_name="autograder_check")
    checker = module.get("checker")
    if checker is None or not hasattr(checker, "run"):
        send("error", message=f"{check} defines no `checker` (coursekit.checking.contract.Checker)")
        return 2
    from coursekit.checking import contract as checks
    reference = watched()
    original_print = checks.print_result

    def print_and_send(result, out=sys.stdout):
        send("check", result=asdict(result))
        now = watched()
        for name, obj in reference.items():
            if now.get(name) is not obj:
                send("violation", what="tamper-timing", detail=f"replacing {name}")
        original_print(result, out)

    checks.print_result = print_and_send
    seed = _cfg.get("seed")
    if seed is None:
        seed = secrets.randbits(31)
    workdir = Path(_cfg["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    results = checker.run(Path(_cfg["impl"]), list(_cfg["stages"]), int(seed), workdir)
    send("done", count=len(results), seed_used=_cfg.get("seed") is not None,
         versions=checks.environment_versions())
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

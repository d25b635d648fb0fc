"""Runs a project's checker stages inside the sandbox and streams each result as it
completes.

Started by the grader (through ``autograder/jail.py``) as
``python autograder_runner.py`` with ``AG_STAGE`` (JSON: check, impl, stages, seeds: one
per stage, None for a random one; workdir; optionally only: the few check ids a test runs),
``AG_TOKEN`` and the result channel's fd in
``AG_POLICY`` (names and message kinds: ``autograder_protocol``, the sandbox copy of
``coursekit/protocol.py``). It loads the project's ``tests/check.py`` (the ``checker``
object, not its command line), then runs the selected stages, each with the seed the
grader chose for it: several stages of one project share this run and its learner
process, each with its own seed, cache and work folder. Every ``CheckResult`` goes down
the channel as one JSON line the moment it is printed, so checks finished before a crash
or a timeout keep their result. The final line ``{"kind": "done"}`` carries the
environment versions and which isolation the checker used; no ``done`` means the run did
not finish.

A checker built with ``learner_process=True`` never imports the learner's file here: the
learner's code runs in a learner process started before ``check.py`` is even imported
(``coursekit.checking.bridge``; with the fake CPU device count a check.py declares as
``LEARNER_CPU_DEVICES = N``), which holds neither the channel's fd nor its token. The
guard's refusals in that process come back over the bridge and are relayed as
violations; a check that found tamper evidence is relayed as a ``tamper-evidence``
violation. For in-process checkers the runner still notes the identity of the timing
functions before learner code is imported and looks again after every check, so a
replacement that slipped past ``sitecustomize`` is reported as ``tamper-timing``.
"""

from __future__ import annotations

import json
import os
import runpy
import secrets
import sys
from dataclasses import asdict
from pathlib import Path

import autograder_protocol as protocol


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
    cfg = json.loads(os.environ.pop(protocol.ENV_STAGE))
    protocol.pin_checker_to_cpu(os.environ)  # check.py does too; before anything imports jax
    send = protocol.open_channel(os.environ)  # the token leaves the environment here
    check = Path(cfg["check"])
    separate = protocol.wants_learner_process(check.read_text())
    if separate:  # the learner process imports JAX and the file while check.py does
        from coursekit.checking import bridge
        os.environ[protocol.ENV_PROJECT] = check.resolve().parent.parent.name
        bridge.VIOLATION_SINKS.append(lambda what, detail: send(
            protocol.VIOLATION, what=what, detail=detail))
        bridge.prestart_for(check.read_text(), cfg["impl"])
    sys.argv = [str(check)]
    module = runpy.run_path(str(check), run_name="autograder_check")
    checker = module.get("checker")
    if checker is None or not hasattr(checker, "run"):
        send(protocol.ERROR,
             message=f"{check} defines no `checker` (coursekit.checking.contract.Checker)")
        return 2
    from coursekit.checking import contract as checks
    reference = watched()
    original_print = checks.print_result

    def print_and_send(result, out=sys.stdout):
        send(protocol.CHECK, result=asdict(result))
        if result.message.startswith(protocol.TAMPER_PREFIX):
            send(protocol.VIOLATION, what=protocol.TAMPER_EVIDENCE,
                 detail=result.message[len(protocol.TAMPER_PREFIX):])
        now = watched()
        for name, obj in reference.items():
            if now.get(name) is not obj:
                send(protocol.VIOLATION, what=protocol.TAMPER_TIMING,
                     detail=f"replacing {name}")
        original_print(result, out)

    checks.print_result = print_and_send
    stages = [int(n) for n in cfg["stages"]]
    given = cfg["seeds"]  # one per stage
    seeds = {n: secrets.randbits(31) if s is None else int(s) for n, s in zip(stages, given)}
    workdir = Path(cfg["workdir"])
    workdir.mkdir(parents=True, exist_ok=True)
    only = set(cfg["only"]) if cfg.get("only") else None  # (a test's few checks)
    results = checker.run(Path(cfg["impl"]), stages, seeds, workdir, only=only)
    isolation = protocol.LEARNER_PROCESS if getattr(checker, "learner_process", False) \
        else protocol.IN_PROCESS
    from coursekit.checking import frozen
    from coursekit.compat import optional
    send(protocol.DONE, count=len(results), seed_used=None not in given,
         versions=checks.environment_versions(), learner_isolation=isolation,
         measured_on=getattr(checker, "measured_on", None),
         skipped=optional.skipped(),  # parts a package this machine lacks left unchecked
         learner_files=frozen.TAKEN[-200:])
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

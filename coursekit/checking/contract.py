"""The checker contract shared by every project's ``tests/check.py``.

    python projects/<p>/tests/check.py --stage {1..N|all} --impl PATH [--json FILE] [--seed S]
                                       [--only IDS] [--fail-fast]

A project registers its checks with ``@checker.check(stage)`` over a function named
after the check (the function's name is the check's id). Each check gets the learner
module and a ``Context`` (seeded RNG, scratch folder) and either returns (pass), or
raises ``CheckFailed`` with what the learner produced, what was expected and a hint
aimed at the likely mistake. Exceptions from learner code become readable failures
(``coursekit.checking.learner``); a broken learner file fails every selected check with
the same named message instead of crashing the checker.

Output: one line per check, ``PASS stage 2 · trace_region_found``, ``FAIL ...`` with
``yours:``/``expected:``/``evidence:``/``hint:`` lines, or ``INCONCLUSIVE ...`` when a
timing check's own measurements could not decide within its budget (raised as
``CheckInconclusive``: what it measured and the load, never a guess); then
``N passed, M failed`` (``, K inconclusive`` when there are any). A check that needs
instructor-only code a learner's copy lacks (``coursekit.checking.graded``) prints
``INSTRUCTOR stage N · check_id`` and the last line counts it as graded by the
instructor, never as a failure. A check that this machine cannot run (``NotApplicableHere``:
jax.distributed on a machine without TCP sockets) prints ``NOT APPLICABLE stage N ·
check_id`` and "not applicable here: ..." (what is missing, as the machine said it):
neither a pass nor a failure. Exit 0 only when every selected check that ran passed
(``coursekit.checking.tally``); 1 when any failed or none could run here;
``INCONCLUSIVE_EXIT`` (3) when none failed but some were inconclusive. ``--json`` writes
the machine-readable results the grader reads (never a pickle).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from coursekit.checking import spawn
from coursekit.checking.errors import (
    GRADED_BY_INSTRUCTOR,
    NOT_APPLICABLE,
    CheckFailed,
    CheckInconclusive,
    LearnerCodeError,
    NotApplicableHere,
)
from coursekit.checking.learner import explain_exception, load_impl
from coursekit.checking.tally import (  # noqa: F401 - INCONCLUSIVE_EXIT: check.py's
    INCONCLUSIVE_EXIT,
    counts,
    exit_status,
    summary_line,
)
from coursekit.checking.terminal_record import keep_terminal_record
from coursekit.checking.values import short
from coursekit.checking.wire import protocol
from coursekit.compat import optional
from coursekit.measure.environment import environment_versions


@dataclass
class CheckResult:
    stage: int
    check_id: str
    status: str  # "pass" | "fail" | "inconclusive" (a timing check could not decide)
    #              | "error" (learner code raised) | "not-implemented"
    #              | "crash" (the learner process died)
    #              | "instructor" (needs instructor-only code this copy lacks)
    #              | "not-applicable" (this machine lacks what the check needs)
    points: float
    max_points: float
    message: str = ""
    yours: str = ""
    expected: str = ""
    hint: str = ""
    duration_s: float = 0.0
    evidence: str = ""  # what a timing verdict measured (rounds, spread, load)


def after_memory_error(first: CheckResult) -> LearnerCodeError:
    """What a check is told when the learner's code ran out of memory in an earlier one:
    each later check would call it again and wait for the same MemoryError (nine of
    performance-audit's stage 4 did, for 25 s under load: the grader's wall-clock limit
    then named a memory bomb a timeout)."""
    return LearnerCodeError("exception", f"not run: your code ran out of memory (MemoryError) "
                            f"in {first.check_id}, so this stage stopped there",
                            first.hint or "fix the first error above and run the check again",
                            "MemoryError")


@dataclass
class Context:
    """What a check gets besides the learner module."""
    seed: int
    impl_path: Path
    workdir: Path
    stage: int
    cache: dict = field(default_factory=dict)  # shared by the checks of one run
    learner: Any = None  # the learner module the run's checks get (coursekit.checking.device)

    def rng(self, salt: str) -> np.random.Generator:
        """A generator that depends on the run's seed and the check, not on check order."""
        return np.random.default_rng([self.seed, *salt.encode()])

    def subdir(self, name: str) -> Path:
        """A folder of the checker's own: in the grader's jail, learner processes may read
        what is in it, never write it (hand them ``learner_dir`` for their outputs)."""
        path = self.workdir / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def learner_dir(self, name: str) -> Path:
        """A folder the learner's code may write into (a trace, a checkpoint, records);
        the checker reads what it finds there once (``frozen``)."""
        return spawn.learner_folder(self.subdir(name))

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """``make()`` the first time a check of this run asks for ``key``; every later
        ask (from any check) gets the same value, or the same failure raised again, so a
        shared measurement or a broken run is not repeated by each check that needs it."""
        slot = ("once", key)  # apart from the plain entries checks keep in ``cache``
        if slot not in self.cache:
            try:
                self.cache[slot] = (True, make())
            except Exception as err:  # noqa: BLE001 - raised again to every check that asks
                self.cache[slot] = (False, err)
        made, value = self.cache[slot]
        if not made:
            raise value
        return value


@dataclass
class _Check:
    stage: int
    check_id: str
    fn: Callable
    points: float


# A folder where each checker process appends one line per check it ran (project, stage,
# check, status, wall seconds): make test sets it (tests/suite_costs.py) to show which
# checks the suite's time goes to across every run of them. Unset: nothing is written.
CHECK_COSTS_ENV = "COURSE_CHECK_COSTS"


def record_check_cost(project: str, result) -> None:
    folder = os.environ.get(CHECK_COSTS_ENV)
    if not folder or not os.path.isdir(folder):
        return
    line = {"project": project, "stage": result.stage, "check": result.check_id,
            "status": result.status, "wall": result.duration_s,
            # the test file that started it (pytest names the running test in the
            # environment every process it starts inherits)
            "test": os.environ.get("PYTEST_CURRENT_TEST", "").split("::")[0]}
    try:
        with open(os.path.join(folder, f"checks-{os.getpid()}.jsonl"), "a") as f:
            f.write(json.dumps(line) + "\n")
    except OSError:
        pass  # a cost figure is never worth a check


class Checker:
    """Registry and command-line runner for one project's checks."""

    def __init__(self, project: str, stage_titles: dict[int, str], *,
                 learner_process: bool = False):
        """``learner_process``: run the learner's code in its own process
        (``coursekit.checking.bridge``); checks then get a ``RemoteModule`` and this
        process never imports the learner's file. Off: today's in-process import."""
        self.project = project
        self.stage_titles = stage_titles
        self.checks: list[_Check] = []
        self.learner_process = learner_process
        self.learner: Any = None  # the LearnerProcess of the current run, if any
        self.measured_on: dict | None = None  # where the learner's code ran (last run)

    def check(self, stage: int, check_id: str | None = None, points: float = 1.0):
        """Register ``fn(impl, ctx)`` as a check of ``stage``; its id is the function's
        name (``check_id`` only where a name cannot be one), so tracebacks, profiles and
        searches show the check by name. Ids are unique within a project.

        Args:
            stage: the stage the check belongs to (checks run in registration order).
            check_id: an id that cannot be a function name (default: ``fn.__name__``).
            points: what the check is worth when it passes.

        Returns:
            A decorator that registers ``fn`` and returns it unchanged. ``fn(impl, ctx)``
            gets the learner module (a ``RemoteModule`` with ``learner_process=True``)
            and a ``Context``; it returns to pass (a string returned is a note the pass
            carries: what weaker claim it rests on), or raises ``CheckFailed`` /
            ``CheckInconclusive`` (``coursekit.checking.errors``).
        """
        def register(fn):
            cid = check_id or fn.__name__
            if any(c.check_id == cid for c in self.checks):
                raise ValueError(f"{self.project}: a second check named {cid!r}")
            self.checks.append(_Check(stage, cid, fn, points))
            return fn
        return register

    # -- running -------------------------------------------------------------------
    def run(self, impl_path: Path, stages: list[int], seed: int | dict[int, int],
            workdir: Path, out=None, only: set[str] | None = None,
            fail_fast: bool = False) -> list[CheckResult]:
        """Run the selected stages' checks on one learner file, in one learner process.
        ``seed``: one seed for every stage (checks of the run share ``Context.cache``), or
        a seed per stage (the grader's held-out seeds): then each stage gets its own seed,
        cache and ``workdir/stage<N>``, so it draws and measures as it would run alone."""
        selected = [c for c in self.checks
                    if c.stage in stages and (not only or c.check_id in only)]
        if self.learner_process:
            from coursekit.checking import bridge
            os.environ[protocol.ENV_PROJECT] = self.project  # its reach guard's rules
            self.learner = bridge.take(impl_path)
        try:
            module = self.learner.module() if self.learner_process else load_impl(impl_path)
            load_error = None
        except LearnerCodeError as err:
            module, load_error = None, err
        try:
            results = self._run_selected(selected, module, load_error, impl_path, seed,
                                         workdir, out, fail_fast)
            self.measured_on = self._measured_on(module, results)
            return results
        finally:
            if self.learner is not None:
                self.learner.close()

    def _measured_on(self, module, results) -> dict | None:
        """Where the learner's code ran (backend, device kind: ``device_facts``), asked of
        the learner process once its code has run; None when nothing of it ran (a stub, a
        broken file) or the process is gone. Self-reported: a label, never a verdict."""
        if module is None or not any(r.status in ("pass", "fail", "inconclusive")
                                     for r in results):
            return None
        try:
            if not self.learner_process:
                from coursekit.measure.environment import device_facts
                return device_facts()
            if self.learner is None or self.learner.proc is None:
                return None
            facts = self.learner.request("inspect", "course/device")
        except Exception:  # noqa: BLE001 - a label only: a process that cannot say has none
            return None
        return {k: facts.get(k) for k in ("backend", "device_kind", "device_count", "jax",
                                          "label")} if isinstance(facts, dict) else None

    def _run_selected(self, selected, module, load_error, impl_path, seed, workdir, out,
                      fail_fast=False):
        results = []
        per_stage = isinstance(seed, dict)
        caches: dict = {}
        out_of_memory: dict = {}  # stage -> the check where the learner's code ran out of memory
        for chk in selected:
            key = chk.stage if per_stage else None
            folder = Path(workdir) / f"stage{chk.stage}" if per_stage else workdir
            if per_stage:
                folder.mkdir(parents=True, exist_ok=True)
            ctx = Context(seed=int(seed[chk.stage]) if per_stage else seed,
                          impl_path=impl_path, workdir=folder, stage=chk.stage,
                          cache=caches.setdefault(key, {}), learner=module)
            started = time.perf_counter()
            if load_error is not None:
                result = self._failure(chk, load_error)
            elif chk.stage in out_of_memory:
                result = self._failure(chk, after_memory_error(out_of_memory[chk.stage]))
            else:
                result = self._run_one(chk, module, ctx)
                if getattr(result, "exc_type", "") == "MemoryError":
                    out_of_memory[chk.stage] = result
            result.duration_s = round(time.perf_counter() - started, 3)
            record_check_cost(self.project, result)
            results.append(result)
            print_result(result, out)
            if fail_fast and result.status != "pass":
                break  # the verdict is known: a failed run (make mutants needs no more)
        return results

    def _run_one(self, chk: _Check, module, ctx: Context) -> CheckResult:
        try:
            note = chk.fn(module, ctx)
        except CheckInconclusive as err:
            return CheckResult(chk.stage, chk.check_id, "inconclusive", 0.0, chk.points,
                               str(err), hint=err.hint, evidence=err.evidence)
        except NotApplicableHere as err:
            if not raised_by_learner(err, ctx.impl_path):
                return CheckResult(chk.stage, chk.check_id, NOT_APPLICABLE, 0.0,
                                   chk.points, str(err))
            return self._failure(chk, explain_exception(err, ctx.impl_path))
        except CheckFailed as err:
            return CheckResult(chk.stage, chk.check_id, "fail", 0.0, chk.points, str(err),
                               "" if err.yours is None else short(err.yours),
                               "" if err.expected is None else short(err.expected), err.hint,
                               evidence=err.evidence)
        except Exception as err:  # noqa: BLE001 - learner code may raise anything
            # Named location (learner file, line, function) instead of a traceback wall.
            explained = explain_exception(err, ctx.impl_path)
            result = self._failure(chk, explained)
            result.exc_type = explained.exc_type  # read by _run_selected, not reported
            return result
        # a check that passed on a weaker claim than its usual one returns a note saying so
        return CheckResult(chk.stage, chk.check_id, "pass", chk.points, chk.points,
                           note if isinstance(note, str) else "")

    @staticmethod
    def _failure(chk: _Check, err: LearnerCodeError) -> CheckResult:
        if err.kind == GRADED_BY_INSTRUCTOR:
            return graded_elsewhere(chk, err)
        status = {"not-implemented": "not-implemented", "crash": "crash"}.get(err.kind,
                                                                                "error")
        return CheckResult(chk.stage, chk.check_id, status, 0.0, chk.points, str(err),
                           hint=err.hint)

    # -- command line ----------------------------------------------------------------
    def main(self, argv: list[str] | None = None) -> int:
        stages_known = sorted({c.stage for c in self.checks})
        parser = argparse.ArgumentParser(
            prog=f"check.py ({self.project})",
            description=f"Check a {self.project} implementation stage by stage.")
        parser.add_argument("--stage", default="all",
                            help=f"one of {stages_known} or 'all' (default)")
        parser.add_argument("--impl", required=True, help="path of the model.py to check")
        parser.add_argument("--json", dest="json_path", help="write results as JSON here")
        parser.add_argument("--seed", type=int, default=None,
                            help="seed for inputs (default: a fresh random one per run)")
        parser.add_argument("--only", default=os.environ.get("COURSE_CHECK_ONLY", ""),
                            help="comma-separated check ids: run just these of the stage(s) "
                            "(default: $COURSE_CHECK_ONLY)")
        parser.add_argument("--fail-fast", action="store_true",
                            help="stop at the first check that does not pass (the exit "
                            "status is all that is wanted, as in make mutants)")
        args = parser.parse_args(argv)
        if args.stage == "all":
            stages = stages_known
        else:
            try:
                stages = [int(args.stage)]
            except ValueError:
                parser.error(f"--stage must be one of {stages_known} or 'all'")
            if stages[0] not in stages_known:
                parser.error(f"--stage must be one of {stages_known} or 'all'")
        only = {c.strip() for c in args.only.split(",") if c.strip()}
        unknown = only - {c.check_id for c in self.checks if c.stage in stages}
        if unknown:
            parser.error(f"--only: no check {sorted(unknown)} in stage(s) {stages}")
        seed = args.seed
        if seed is None:
            seed = int(os.environ.get("COURSE_CHECK_SEED", secrets.randbits(31)))
        impl = Path(args.impl)
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="check-") as tmp:
            results = self.run(impl, stages, seed, Path(tmp), only=only,
                               fail_fast=args.fail_fast)
        if self.measured_on:
            on = self.measured_on
            print(f"measured on: {on['label']}, {on['device_count']} device(s), "
                  f"JAX {on['jax']} (the checker itself runs on the CPU)", flush=True)
        for note in optional.skipped():  # a package this machine lacks (compat.optional)
            print(f"skipped here: {note}", flush=True)
        print(summary_line(results), flush=True)
        payload = result_payload(self.project, impl, stages, seed, results,
                                 time.perf_counter() - started)
        payload["measured_on"] = self.measured_on
        payload["skipped"] = optional.skipped()
        if args.json_path:
            Path(args.json_path).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json_path).write_text(json.dumps(payload, indent=2))
        keep_terminal_record(self.project, impl, stages, payload)
        return exit_status(results)


def raised_by_learner(err: Exception, impl_path) -> bool:
    """Whether the learner's file is among the frames ``err`` passed through (an
    in-process checker runs that file here: "not applicable" is the checker's word only)."""
    impl = str(Path(impl_path).resolve())
    tb = err.__traceback__
    while tb is not None:
        if str(Path(tb.tb_frame.f_code.co_filename).resolve()) == impl:
            return True
        tb = tb.tb_next
    return False


def graded_elsewhere(chk: _Check, err: Exception) -> CheckResult:
    """A check that reached instructor-only code: graded by the instructor where this copy
    lacks that code (a learner's release). Where the code is here, nothing the checker
    does raises it, so the learner's code did: an error like any other."""
    from coursekit.checking.graded import available
    if available():
        return CheckResult(chk.stage, chk.check_id, "error", 0.0, chk.points,
                           f"your code raised {type(err).__name__}: {err}",
                           hint="raise nothing of the checker's own")
    return CheckResult(chk.stage, chk.check_id, GRADED_BY_INSTRUCTOR, 0.0, chk.points,
                       str(err))


def print_result(r: CheckResult, out=None) -> None:
    out = sys.stdout if out is None else out  # (at call time: a redirect is honoured)
    label = {"pass": "PASS", "fail": "FAIL", "error": "FAIL", "crash": "FAIL",
             "not-implemented": "FAIL", "inconclusive": "INCONCLUSIVE",
             GRADED_BY_INSTRUCTOR: "INSTRUCTOR", NOT_APPLICABLE: "NOT APPLICABLE"}[r.status]
    print(f"{label} stage {r.stage} · {r.check_id}", file=out)
    if r.status in ("pass", GRADED_BY_INSTRUCTOR):  # the summary line says why, once
        if r.status == "pass" and r.message:  # a pass on a weaker claim says which
            print(f"    note: {r.message}", file=out)
        out.flush()
        return
    print(f"    {r.message}", file=out)
    if r.yours:
        print(f"    yours:    {r.yours}", file=out)
    if r.expected:
        print(f"    expected: {r.expected}", file=out)
    if r.evidence:
        print(f"    evidence: {r.evidence}", file=out)
    if r.hint:
        print(f"    hint:     {r.hint}", file=out)
    out.flush()


def write_json(path, project, impl, stages, seed, results, duration_s) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result_payload(project, impl, stages, seed, results,
                                                    duration_s), indent=2))


def result_payload(project, impl, stages, seed, results, duration_s) -> dict:
    """What ``--json`` writes and the grader, the notebooks and the portfolio read."""
    return {
        "project": project,
        "impl": str(impl),
        "stages": stages,
        "seed": seed,
        "duration_s": round(duration_s, 3),
        "versions": environment_versions(),
        **counts(results),
        "results": [asdict(r) for r in results],
    }

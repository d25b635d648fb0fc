"""optimisation stage 2 against submissions that attack its timing instead of speeding up
(issue 27, item 1): each gains nothing over the same slow ``train_fast`` submitted
honestly, and one whose tampering shows is named.

Before, one process (``speed_driver.py``) imported the learner's file, timed the reference
``train_slow`` and stamped the blocks' boundaries; two submissions beat it (stage 2: 2/3
and 3/3 for an honest 1/3). Now the reference is timed in the checker's own process and
the learner's blocks by the checker's clock from its request to the learner process's
answer (``projects/optimisation/tests/optim_harness.py``). Every submission here keeps
``train_fast`` as slow as ``train_slow`` itself (it returns ``train_slow``'s result, so
its numbers are right) and adds one attack:

* ``rebind_at_import``: at import, rebinds every ``train_slow`` / ``TRAIN_SLOW`` it can
  reach (the old driver's global, ``slow_step.train_slow``) to one that sleeps 8x its own
  time after each call, so a reference timed in its process would run 9x slower;
* ``stamp_from_frames``: inside ``train_fast``, walks the caller's frames, calls any
  block-stamping function it finds as if the block had ended, freezes the clock the code
  around it reads (``time`` in each frame's globals) and zeroes the lists of times in
  their locals (what the code around it reports);
* ``spin_between_calls``: at import, starts threads that keep the CPU busy whenever
  ``train_fast`` is not running, to slow a reference timed on the same machine while the
  learner process has nothing to do.

The honest slow submission scores 1/3 (the contract passes; its per-call recompile and
its lack of speedup fail). Each attack is checked on those two alone (an attack gains
only where one of them passes): the first two pass neither; the spinner is named as
tampering (the learner process spent CPU while the checker timed ``train_slow``, and did
not go quiet when the checker waited to time it again)."""

from __future__ import annotations

import pytest
from planted_batch import Planted, PlantedBatch

STAGE2 = ("fast_matches_contract", "no_recompile_fixed_shape", "speedup_measured_fresh_process")
FIX = "    return _train(params, tokens, targets, jnp.float32(lr))\n"
SLOW_FIX = "    return _REAL_TRAIN_SLOW(params, tokens, targets, lr)\n"
END = "        paths[label] = str(path)\n    return paths\n"
KEEP_REAL = "\n\n_REAL_TRAIN_SLOW = slow_step.train_slow\n"

REBIND = KEEP_REAL + '''

def _nine_times_slower(real):
    def call(*args, **kwargs):
        start = time.perf_counter()
        out = jax.block_until_ready(real(*args, **kwargs))
        time.sleep(8 * (time.perf_counter() - start))
        return out
    return call


def _rebind_every_reference() -> int:
    import sys
    done = 0
    for module in list(sys.modules.values()):
        for name in ("TRAIN_SLOW", "train_slow"):
            try:
                real = vars(module).get(name)
            except TypeError:
                continue
            if callable(real) and module is not sys.modules.get(__name__):
                setattr(module, name, _nine_times_slower(real))
                done += 1
    return done


_REBOUND = _rebind_every_reference()
'''

FRAMES = KEEP_REAL + '''

class _FrozenClock:
    """A ``time`` module whose clocks stand still."""
    def __getattr__(self, name):
        real = getattr(time, name)
        if name in ("perf_counter", "monotonic", "time", "process_time"):
            return lambda: 1.0
        return real


def _stamp_done_from_frames() -> None:
    import sys
    frame = sys._getframe(2)
    while frame is not None:
        for name, value in list(frame.f_locals.items()):
            if callable(value) and name in ("mark", "stamp", "mark_block"):
                try:
                    value("E", 0, "fast")
                except Exception:  # noqa: BLE001 - whatever its signature
                    pass
            if name in ("samples", "samples_s", "stamps", "times") and \
                    isinstance(value, list) and all(type(v) is float for v in value):
                value[:] = [1e-9] * len(value)
        if frame.f_globals.get("time") is time:
            frame.f_globals["time"] = _FrozenClock()
        frame = frame.f_back


def _train_and_stamp(params, tokens, targets, lr):
    out = _REAL_TRAIN_SLOW(params, tokens, targets, lr)
    _stamp_done_from_frames()
    return out
'''

SPIN = KEEP_REAL + '''

import threading as _threading

_IN_CALL = _threading.Event()


def _spin() -> None:
    a = np.ones((256, 256), np.float32)
    while True:
        if _IN_CALL.is_set():
            time.sleep(0.001)
        else:
            a = np.tanh(a @ a * 1e-3)   # numpy releases the GIL: every thread runs


for _ in range(4):
    _threading.Thread(target=_spin, daemon=True).start()


def _train_while_quiet(params, tokens, targets, lr):
    _IN_CALL.set()
    try:
        return jax.block_until_ready(_REAL_TRAIN_SLOW(params, tokens, targets, lr))
    finally:
        _IN_CALL.clear()
'''


# The checks the honest slow fix fails: an attack gains something only if one of them
# passes for it. The attacks run those alone (the contract check, which every one of them
# passes with train_slow's own numbers, was 12 s of CPU each under the honest one's name).
TIMED = ["no_recompile_fixed_shape", "speedup_measured_fresh_process"]


def hostile(fix: str, extra: str, only: list | None = None) -> Planted:
    return Planted(2, [(FIX, fix), (END, END + extra)], only=list(only or []))


SUBMISSIONS = {
    "honest_slow": hostile(SLOW_FIX, KEEP_REAL),
    "rebind_at_import": hostile(SLOW_FIX, REBIND, TIMED),
    "stamp_from_frames": hostile("    return _train_and_stamp(params, tokens, targets, lr)\n",
                                 FRAMES, TIMED),
    "spin_between_calls": hostile("    return _train_while_quiet(params, tokens, targets, "
                                  "lr)\n", SPIN, TIMED),
}

BATCH = PlantedBatch("optimisation", SUBMISSIONS)
TIMED_NOT_PASSED = ("fail", "inconclusive")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    # two checker processes side by side (PlantedBatch): each with the other core busy
    return BATCH.run(tmp_path_factory.mktemp("trust"))


def points(result: dict, checks=STAGE2) -> int:
    return sum(result["status"].get(c) == "pass" for c in checks)


def test_honest_slow_fix_is_the_baseline(graded):
    got = graded["honest_slow"]
    assert got["status"]["fast_matches_contract"] == "pass", got["stdout"]
    assert got["status"]["no_recompile_fixed_shape"] == "fail", got["stdout"]
    # 1x where 3x is asked: FAIL (INCONCLUSIVE only on a machine far busier than the
    # one busy core the batch runs beside)
    assert got["status"]["speedup_measured_fresh_process"] in TIMED_NOT_PASSED, got["stdout"]
    assert points(got) == 1


@pytest.mark.parametrize("attack", ["rebind_at_import", "stamp_from_frames"])
def test_attack_on_the_clock_gains_nothing(attack, graded):
    got, base = graded[attack], graded["honest_slow"]
    assert sorted(got["status"]) == sorted(TIMED), got["status"]
    assert points(got, TIMED) <= points(base, TIMED), (got["status"], got["stdout"])
    for check in TIMED:
        assert got["status"][check] in TIMED_NOT_PASSED, (check, got["stdout"])


def test_cpu_stolen_from_the_reference_is_named(graded):
    got = graded["spin_between_calls"]
    assert points(got, TIMED) <= points(graded["honest_slow"], TIMED), (got["status"],
                                                                        got["stdout"])
    speedup = next(r for r in got["json"]["results"]
                   if r["check_id"] == "speedup_measured_fresh_process")
    assert speedup["status"] == "error", speedup
    assert speedup["message"].startswith("tamper-evidence: "), speedup
    # it spent CPU while the checker timed train_slow, and never went quiet to try again
    assert "spen" in speedup["message"] and "with nothing asked of it" in speedup["message"], \
        speedup

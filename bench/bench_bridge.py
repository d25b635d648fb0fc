"""The learner-process bridge's cost per stage: performance-audit's checker on the
reference solution with learner code in a learner process (what the grader uses) and
imported into the checker (``bridge.InProcess``, no isolation), stage by stage, the two
interleaved in one run. Also the bridge's fixed costs: starting a learner process (Python,
JAX and the learner file) and one round trip. Every figure is a CPU figure."""

from __future__ import annotations

import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))
CHECK = ROOT / "projects/performance-audit/tests/check.py"
SOLUTION = ROOT / "projects/performance-audit/solution/model.py"


def stage_time(checker, bridge, stage: int, separate: bool) -> tuple[float, bool]:
    checker.learner_process = True  # the run path; the learner is chosen below
    learner = bridge.LearnerProcess(SOLUTION) if separate else bridge.InProcess(SOLUTION)
    bridge._PRESTARTED[learner.impl_path] = learner
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, open("/dev/null", "w") as null:
        results = checker.run(SOLUTION, [stage], 1234, Path(tmp), out=null)
    return time.perf_counter() - start, all(r.status == "pass" for r in results)


def main() -> int:
    from coursekit.checking import bridge
    checker = runpy.run_path(str(CHECK), run_name="bench_bridge")["checker"]
    start = time.perf_counter()
    learner = bridge.LearnerProcess(SOLUTION)
    impl = learner.module()
    started = time.perf_counter() - start
    trips = []
    for _ in range(50):
        t = time.perf_counter()
        impl.predict_step_speedup(0.5, 2.0)
        trips.append(time.perf_counter() - t)
    learner.close()
    print(f"bridge: learner process start {started:.2f} s (Python + JAX + model.py), "
          f"round trip {statistics.median(trips) * 1e3:.2f} ms median [CPU figure]")
    rounds = 2
    for stage in sorted({c.stage for c in checker.checks}):
        times = {True: [], False: []}
        ok = True
        for _ in range(rounds):
            for separate in (False, True):
                wall, passed = stage_time(checker, bridge, stage, separate)
                times[separate].append(wall)
                ok = ok and passed
        sep, inp = statistics.median(times[True]), statistics.median(times[False])
        print(f"stage {stage}: learner process {sep:.1f} s vs in-process {inp:.1f} s: "
              f"+{sep - inp:.1f} s ({(sep / inp - 1) * 100:+.0f}%), median of {rounds} "
              f"interleaved rounds{'' if ok else ' (SOME CHECKS FAILED)'} [CPU figure]")
    return 0


if __name__ == "__main__":
    sys.exit(main())

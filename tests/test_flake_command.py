"""make flake's expectations (coursekit.commands.flake): under the busy load the
reference passes every run; under the heavy load it may be inconclusive but never fails;
a planted file never passes. The heavy load really starts its processes and stops them."""

from __future__ import annotations

from coursekit.commands import flake


def stage(passed=0, unsure=0, failed=0):
    return {"runs": passed + unsure + failed, "pass": passed, "inconclusive": unsure,
            "fail": failed}


def test_what_breaks_each_expectation():
    allpass = {"p": {1: stage(passed=3)}}
    unsure = {"p": {1: stage(passed=2, unsure=1)}}
    failed = {"p": {1: stage(passed=2, failed=1)}}
    assert not flake.broken(allpass, "busy", reference=True)
    assert flake.broken(unsure, "busy", reference=True)
    assert not flake.broken(unsure, "heavy", reference=True)
    assert flake.broken(failed, "heavy", reference=True)
    assert flake.broken(allpass, "heavy", reference=False)
    assert not flake.broken({"p": {1: stage(unsure=1, failed=2)}}, "heavy", reference=False)


def test_heavy_load_starts_and_stops():
    procs = flake.load_processes("heavy")
    try:
        assert len(procs) >= 3 and all(p.poll() is None for p in procs)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert all(p.returncode is not None for p in procs)

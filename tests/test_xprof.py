"""XProf, the tool the course names, reads the course's own traces: its conversion of the
``.xplane.pb`` agrees with our parse of the ``.trace.json.gz`` beside it (two parsers, two
files, one run), a planted mismatch is caught, performance-audit's stage-2 check fails a
forged trace JSON, XProf's op-level tools are empty on CPU, and ``make xprof``'s runner
says what to run first when there is nothing to serve. (The browser test opens the same
kind of trace in XProf's trace viewer: tests/test_browser_lab.py.)"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import plant, run_checker

from coursekit.facts import ROOT
from coursekit.instructor import traces as forest
from coursekit.measure import traces, xprof_trace

REGION = "course_region"
STEPS = 3


def write_region_trace(logdir: Path, region: str = REGION, steps: int = STEPS) -> Path:
    """A real ``jax.profiler`` trace of a small jitted step, each step inside
    ``TraceAnnotation(region)`` and synchronised inside it. Returns the JSON trace."""
    import jax
    import jax.numpy as jnp

    step = jax.jit(lambda w, x: jnp.tanh(x @ w).sum())
    w, x = jnp.ones((128, 128)), jnp.ones((64, 128))
    jax.block_until_ready(step(w, x))
    with jax.profiler.trace(str(logdir)):
        for i in range(steps):
            with jax.profiler.TraceAnnotation(region, step=i):
                jax.block_until_ready(step(w, x))
    return forest.newest_trace(logdir)


@pytest.fixture(scope="module")
def course_trace(tmp_path_factory) -> Path:
    return write_region_trace(tmp_path_factory.mktemp("xprof") / "logdir")


def copy_run(trace_json: Path, dest: Path) -> Path:
    shutil.copytree(trace_json.parent, dest)
    return dest / trace_json.name


def rewrite_json(path: Path, change) -> None:
    with gzip.open(path, "rt") as fh:
        data = json.load(fh)
    change(data["traceEvents"])
    with gzip.open(path, "wt") as fh:
        json.dump(data, fh)


def test_xprof_and_our_parser_agree_on_the_region(course_trace):
    result = xprof_trace.compare_region(course_trace, REGION)
    assert result["mismatches"] == [], result
    assert len(result["ours"]) == len(result["xprof"]) == STEPS
    summary = forest.region_summary(course_trace, REGION)
    assert sum(result["xprof"]) == pytest.approx(summary["total_us"], abs=1e-3)


def test_a_stretched_region_is_a_mismatch(course_trace, tmp_path):
    planted = copy_run(course_trace, tmp_path / "stretched")

    def stretch(events):
        first = next(e for e in events if e.get("name") == REGION)
        first["dur"] += 5.0   # 5 us: far beyond rounding, far below a step
    rewrite_json(planted, stretch)
    result = xprof_trace.compare_region(planted, REGION)
    assert len(result["mismatches"]) == 1 and "#0" in result["mismatches"][0], result


def test_a_dropped_region_is_a_mismatch(course_trace, tmp_path):
    planted = copy_run(course_trace, tmp_path / "dropped")

    def drop(events):
        events.remove(next(e for e in events if e.get("name") == REGION))
    rewrite_json(planted, drop)
    result = xprof_trace.compare_region(planted, REGION)
    assert f"{STEPS - 1} {REGION!r} event(s)" in result["mismatches"][0], result


def test_missing_xplane_is_named(course_trace, tmp_path):
    planted = copy_run(course_trace, tmp_path / "no-xplane")
    for pb in planted.parent.glob("*.xplane.pb"):
        pb.unlink()
    with pytest.raises(traces.TraceError, match="no \\*.xplane.pb beside"):
        xprof_trace.compare_region(planted, REGION)


def test_op_level_tools_are_empty_on_cpu(course_trace):
    import jax
    if jax.default_backend() != "cpu":
        pytest.skip("on an accelerator these tools have rows")
    xplane = xprof_trace.xplane_beside(course_trace)
    assert {t: xprof_trace.tool_rows(xplane, t) for t in xprof_trace.GPU_TOOLS} == \
        dict.fromkeys(xprof_trace.GPU_TOOLS, 0)
    assert len(xprof_trace.trace_viewer_events(xplane)) > 0


# A write_trace that writes the real trace, then edits the JSON it returns: the region is
# still there once per step (the count check passes), but 3 us longer than the profiler
# recorded. Only the second parser on the second file can see it.
FORGED_JSON = ("    return str(newest_trace_file(logdir))\n", """    import gzip as _gz
    import json as _js
    _path = newest_trace_file(logdir)
    with _gz.open(_path, "rt") as _fh:
        _data = _js.load(_fh)
    for _e in _data["traceEvents"]:
        if _e.get("name") == region:
            _e["dur"] += 3.0
    with _gz.open(_path, "wt") as _fh:
        _js.dump(_data, _fh)
    return str(_path)
""")


@pytest.mark.slow
def test_stage2_check_fails_a_forged_trace_json(tmp_path):
    impl = plant(tmp_path, "performance-audit", "forged_trace_json", [FORGED_JSON])
    check = "trace_written_and_newest_found"
    result = run_checker("performance-audit", impl, "2", tmp=tmp_path, only=check)
    assert result["status"] == {check: "fail"}, result["stdout"]
    assert "XProf's reading of the .xplane.pb" in result["stdout"], result["stdout"]


def test_make_xprof_says_what_to_run_first(tmp_path):
    done = subprocess.run([sys.executable, "-m", "coursekit.commands.xprof", "--logdir",
                           str(tmp_path / "nothing-here")], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 1
    assert "no such folder" in done.stdout and "run notebook 02" in done.stdout
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "coursekit.commands.xprof", "--logdir",
                           str(tmp_path / "empty")], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert done.returncode == 1 and "no profiler trace in it yet" in done.stdout


def test_makefile_serves_the_records_on_loopback():
    makefile = (ROOT / "Makefile").read_text()
    assert "\nxprof: $(STAMP)\n\t$(PY) -m coursekit.commands.xprof" in makefile
    from coursekit.commands import xprof
    assert xprof.HOST == "127.0.0.1"

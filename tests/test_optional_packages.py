"""Packages an accelerator image may lack (coursekit.compat.optional): each feature that
needs one names it and what it skips, never a traceback.

A package is made absent here as Python itself marks one not importable: None in
``sys.modules`` (``import x`` raises ModuleNotFoundError, ``find_spec`` finds nothing),
for the length of one test. That every module still imports without them, and that a
checker run names xprof's absence, runs in a subprocess under the floor JAX with the
same packages hidden at start-up (tests/test_jax_floor.py, tests/image/sitecustomize.py).
"""

from __future__ import annotations

import sys

import pytest

from coursekit.compat import optional


def hide(monkeypatch, *names: str) -> None:
    for name in names:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            monkeypatch.delitem(sys.modules, loaded)
        monkeypatch.setitem(sys.modules, name, None)


def test_need_names_the_package_and_what_is_skipped(monkeypatch):
    hide(monkeypatch, "cosmic_ray")
    with pytest.raises(optional.Absent) as err:
        optional.need("cosmic_ray.work_db", "the mutation score")
    assert str(err.value).startswith("cosmic-ray is not installed here, so the mutation "
                                     "score is skipped")
    assert err.value.package == "cosmic_ray" and isinstance(err.value, ImportError)
    assert not optional.have("cosmic_ray") and optional.have("json")


def test_an_import_error_inside_an_installed_package_is_not_absence(monkeypatch, tmp_path):
    (tmp_path / "brokenpkg").mkdir()
    (tmp_path / "brokenpkg" / "__init__.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as err:
        optional.need("brokenpkg", "nothing")
    assert not isinstance(err.value, optional.Absent)


def test_mlflow_absent_a_run_record_says_so(monkeypatch, capsys):
    from coursekit.notebook.cells import log_measurement
    from coursekit.provenance import tracking
    hide(monkeypatch, "mlflow")
    tracking._mlflow.cache_clear()
    try:
        with pytest.raises(optional.Absent, match="mlflow is not installed here, so the "
                           "MLflow record of runs"):
            tracking.log_run("absent", {"n": 1}, {"median_s": 0.1})
        timing = {"samples_s": [0.1, 0.2], "first_call_s": 0.5, "output_ok": True,
                  "sync": "block_until_ready", "warmup": 1}
        assert log_measurement("absent", {"n": 1}, timing, check="none") is None
        assert "not recorded in MLflow: absent: Absent: mlflow is not installed here" in \
            capsys.readouterr().out
    finally:
        tracking._mlflow.cache_clear()  # the next caller imports the real one again


def test_xprof_absent_reading_a_trace_says_so(monkeypatch, tmp_path):
    from coursekit.measure import xprof_trace
    hide(monkeypatch, "xprof")
    xplane = tmp_path / "host.xplane.pb"
    xplane.write_bytes(b"")
    with pytest.raises(optional.Absent, match="xprof is not installed here, so XProf's "
                       "reading of the trace is skipped"):
        xprof_trace.tool_data(xplane)


def test_jupytext_absent_building_a_notebook_says_so(monkeypatch):
    from coursekit.authoring import nbbuild
    hide(monkeypatch, "jupytext")
    with pytest.raises(optional.Absent, match="jupytext is not installed here, so building "
                       "notebooks from their text sources is skipped"):
        nbbuild.from_text("# %%\nx = 1\n")


def test_nbgrader_absent_the_notebook_route_says_so(monkeypatch):
    from autograder import nbsource, notebook
    hide(monkeypatch, "nbgrader")
    monkeypatch.setattr(nbsource, "_UTILS", None)
    with pytest.raises(optional.Absent, match="nbgrader is not installed here, so the "
                       "grader's notebook route is skipped"):
        nbsource.nbgrader_utils()
    with pytest.raises(optional.Absent, match="releasing notebooks is skipped"):
        nbsource.release_notebook(None)
    notebook.warm_up()  # the worker pool's preload: a no-op for the missing part


def test_an_autograder_command_without_its_package_says_so(monkeypatch, tmp_path, capsys):
    from autograder import cli, similar
    hide(monkeypatch, "copydetect")
    monkeypatch.setattr(similar, "main", lambda *a: __import__("copydetect.utils"))
    assert cli.main(["similar", str(tmp_path)]) == 2
    assert "autograder: copydetect is not installed here, so `autograder similar` is " \
        "skipped" in capsys.readouterr().err


def test_papermill_absent_make_course_skips_the_notebooks_and_says_so(monkeypatch, tmp_path,
                                                                       capsys):
    from coursekit.commands import course
    hide(monkeypatch, "papermill")
    assert course.main(["--no-projects", "--only", "00", "--out", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "papermill is not installed here, so running the notebooks here is skipped" in out
    assert "nothing ran" in out


def test_a_notebook_block_whose_package_is_missing_says_skipped(capsys):
    from coursekit.notebook.guard import NotYet, need, not_yet
    with not_yet("the record") as outcome:
        raise optional.Absent("mlflow", "the MLflow record of runs")
    assert not outcome.done
    assert capsys.readouterr().out.startswith("skipped: the record: mlflow is not installed")
    # a later block that needs it is skipped for the same package, never "not yet" (an
    # accelerator image without mlflow ran notebook 00 against the solution and counted a
    # "not yet" line there, 2026-12-06)
    with not_yet("comparable runs") as later:
        need(outcome)
    assert not later.done
    out = capsys.readouterr().out
    assert out.startswith("skipped: comparable runs: mlflow is not installed"), out
    assert "not yet" not in out
    with not_yet("unfinished") as unfinished:  # an unfinished block still says "not yet"
        raise NotImplementedError("stage 1: time_fn")
    with pytest.raises(NotYet, match="needs an earlier cell: stage 1: time_fn"):
        need(unfinished)

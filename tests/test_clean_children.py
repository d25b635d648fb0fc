"""Checker-side children start clean (issue 27, item 2): a submission that writes modules
named like the standard library (or like jax) into every folder it can reach (the
checker's working folder, a folder on PYTHONPATH) does not get them imported by the
checker's own fresh-process reference, which reports its own numbers."""

from __future__ import annotations

import os

import pytest

from coursekit.instructor import peak_memory as pm
from coursekit.measure.children import clean_env, run_clean

PLANTED = ("json", "re", "random", "numpy", "jax", "coursekit")


def plant(folder, marker):
    folder.mkdir(parents=True, exist_ok=True)
    for name in PLANTED:
        (folder / f"{name}.py").write_text(
            f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n"
            "raise SystemExit('planted module imported')\n")


def test_a_clean_child_ignores_the_working_folder_and_pythonpath(tmp_path, monkeypatch):
    marker = tmp_path / "imported.txt"
    for where in ("cwd", "path"):
        plant(tmp_path / where, marker)
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "path"))
    monkeypatch.setenv("PYTHONSTARTUP", str(tmp_path / "path" / "json.py"))
    done = run_clean(["-c", "import json, re, random, sys; print(json.dumps(sys.path))"],
                     timeout=60)
    assert done.returncode == 0, done.stderr
    assert str(tmp_path) not in done.stdout and not marker.exists()
    assert not any(k.startswith("PYTHON") for k in clean_env())


@pytest.mark.slow
def test_the_peak_memory_reference_reports_its_own_numbers(tmp_path, monkeypatch):
    marker = tmp_path / "imported.txt"
    plant(tmp_path / "run", marker)
    monkeypatch.chdir(tmp_path / "run")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "run"))
    got = pm.fresh_process_peak(pm.blocks_factory(),
                                dict(depth=1, width=17, hidden=65, batch=33, policy="none"))
    assert not marker.exists(), marker.read_text()
    assert got["pid"] != os.getpid() and got["temp_size_in_bytes"] >= 0

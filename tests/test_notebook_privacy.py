"""Nothing private in a notebook's output (issue 46, item 3). The scan
(``notebook_privacy.private_in_outputs``) is run on every notebook the suite executes
headless (tests/test_notebooks.py, against the solution and as the learner receives it,
with a probe value planted in the kernel's environment); here it is shown to find each
kind on planted outputs, and notebook 05's first cell, which once showed the whole
``os.environ``, is run in a real kernel."""

from __future__ import annotations

import json
import secrets

import nbformat
import pytest
from nbclient import NotebookClient
from notebook_privacy import PROBE_ENV, private_in_outputs

from coursekit.commands import course
from coursekit.facts import KERNEL, ROOT

ENV = {"PATH": "/usr/bin:/bin", "HOME": "/home/ann", "USER": "ann", "LANG": "C.UTF-8",
       PROBE_ENV: "probe-7f3a9c2e1b"}


def notebook_with(*texts: str) -> dict:
    return {"cells": [{"cell_type": "code", "source": "x", "outputs": [
        {"output_type": "stream", "name": "stdout", "text": t}]} for t in texts]}


def scan(*texts: str) -> list[str]:
    return private_in_outputs(notebook_with(*texts), env=ENV, host="ann-laptop",
                              home="/home/ann")


def test_each_kind_is_found():
    assert scan(f"environ({ENV!r})") and scan(repr(ENV))          # the environment, shown
    assert scan("value: probe-7f3a9c2e1b")                        # a planted probe value
    assert scan("http://127.0.0.1:8888/lab?token=0123456789abcdef0123")  # a server token
    assert scan("export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123")
    assert scan("trace: /tmp/plugins/profile/2026/ann-laptop.trace.json.gz")  # the host
    assert scan("saved to /home/ann/course/build/learner/runs/x.json")  # the home folder
    result = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
              "data": {"text/plain": f"environ({ENV!r})"}}
    assert private_in_outputs({"cells": [{"cell_type": "code", "outputs": [result]}]},
                              env=ENV, host="ann-laptop", home="/home/ann")


def test_ordinary_outputs_pass():
    assert not scan("first call 12.3 ms (1 compile), warmed median 4.5 ms",
                    "traces go to: build/learner/traces/02_trace_reading",
                    "trace <host>.trace.json.gz: region 'train_step' x3",
                    "PASS stage 1 · raw_samples_kept\n3 passed, 0 failed",
                    "tokens per second: 1234", "the tokenizer=bpe")


@pytest.mark.slow
def test_notebook_05s_first_cell_shows_nothing_of_the_environment(monkeypatch):
    """Its cell sets the device count through the environment: run in a real kernel, with
    a probe value planted there, it shows no output at all."""
    monkeypatch.setenv(PROBE_ENV, secrets.token_hex(16))
    stored = nbformat.read(ROOT / "notebooks" / "05_sharding_and_recovery.ipynb",
                           as_version=4)
    first = next(c for c in stored.cells if c.cell_type == "code")
    assert "use_cpu_devices" in first.source
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(first.source)])
    nb.metadata["kernelspec"] = stored.metadata["kernelspec"]
    course.ensure_kernel()
    NotebookClient(nb, kernel_name=KERNEL, timeout=120,
                   resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    assert not private_in_outputs(nb), private_in_outputs(nb)
    assert nb.cells[0].outputs == [], json.dumps(nb.cells[0].outputs)[:500]

"""Helpers that notebook cells call: check cells, predictions, honest labels.

Check cells run the *same* command the grader runs (``check.py --stage N --impl PATH``)
in a subprocess, show its PASS/FAIL lines and never raise: a learner's unfinished stage
reads "not yet", it does not stop the notebook.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit.facts import ROOT, checker_path, records_dir

RECORDS = records_dir()


def project_path(project: str, which: str = "starter") -> Path:
    """``projects/<project>/<which>/model.py`` (which: "starter" or "solution")."""
    return ROOT / "projects" / project / which / "model.py"


def run_check(project: str, stage: int | str, impl: str | Path | None = None,
              timeout: float = 900, quiet: bool = False) -> dict:
    """Run ``projects/<project>/tests/check.py --stage <stage> --impl <impl>`` and print
    its lines. Returns {"passed", "failed", "ok", "results", "returncode"}; never raises.
    Results are also kept under build/learner/checks/ for the route map and portfolio."""
    impl = Path(impl) if impl else project_path(project)
    if not impl.is_absolute():
        impl = (Path.cwd() / impl).resolve()
    check = checker_path(project)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(check), "--stage", str(stage), "--impl", str(impl),
               "--json", str(out)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
            text, rc = done.stdout + done.stderr[-2000:], done.returncode
        except subprocess.TimeoutExpired:
            text, rc = f"FAIL stage {stage} · timeout\n    the checker ran over {timeout} s\n", -1
        data = json.loads(out.read_text()) if out.exists() else None
    if not quiet:
        print(text.rstrip())
    summary = {"project": project, "stage": stage, "impl": str(impl), "returncode": rc,
               "time": time.time(), "results": data["results"] if data else [],
               "versions": data["versions"] if data else {}}
    summary["passed"] = sum(r["status"] == "pass" for r in summary["results"])
    summary["failed"] = len(summary["results"]) - summary["passed"]
    summary["ok"] = rc == 0 and summary["failed"] == 0 and summary["passed"] > 0
    _keep(f"checks/{project}-stage{stage}.json", summary)
    if not summary["ok"] and not quiet:
        print("\nnot yet: fix the first FAIL above in "
              f"{impl.relative_to(ROOT) if impl.is_relative_to(ROOT) else impl}, "
              "then re-run this cell.")
    return summary


def record_prediction(name: str, value, unit: str = "") -> None:
    """Store a learner's prediction before the cell that measures it. ``None`` (the cell
    left as given) is reported, not an error, so the notebook keeps running."""
    if value is None:
        print(f"prediction {name!r} is still empty: write your guess before running on.")
    _keep(f"predictions/{name}.json", {"name": name, "value": value, "unit": unit,
                                       "time": time.time()})


def compare_prediction(name: str, predicted, measured: float, unit: str = "") -> dict:
    """Print prediction beside measurement and keep both for the portfolio."""
    line = {"name": name, "predicted": predicted, "measured": measured, "unit": unit}
    if isinstance(predicted, (int, float)) and predicted:
        line["measured_over_predicted"] = measured / predicted
    shown = "(no prediction)" if predicted is None else f"{predicted} {unit}".strip()
    print(f"{name}: predicted {shown}, measured {measured:.4g} {unit}".rstrip())
    _keep(f"predictions/{name}.measured.json", line)
    return line


def cpu_label() -> str:
    """The honest label every CPU figure carries."""
    import jax
    backend = jax.default_backend()
    if backend == "cpu":
        return (f"CPU figure ({os.cpu_count()} cores, {jax.device_count()} JAX device(s)); "
                "says nothing about accelerator speed")
    return f"{backend.upper()} figure ({jax.devices()[0].device_kind})"


def _keep(relative: str, payload: dict) -> None:
    try:
        path = RECORDS / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(payload, indent=1, default=str))
    except OSError:
        pass  # a read-only checkout must not break a notebook

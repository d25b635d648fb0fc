"""Notebook figures: every notebook's headless papermill time against the same code cells
run as a bare Python script (target ratio <= 1.3x), where papermill's start-up time goes,
and the whole course at CI size (target <= 10 min on 2 cores).

    python bench/bench_notebooks.py --out build/bench [--only 03]

The whole course runs once through ``python -m coursekit.commands.course --ci`` (papermill imported
once, notebooks one after another); its summary gives each notebook's papermill wall time.
Then each notebook, parameterised exactly as the course ran it (IMPL = the solution, CI
sizes), is exported with nbconvert's ScriptExporter and run as ``python script.py`` in
the same folder. All figures are CPU figures of this machine, measured in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from coursekit.facts import ROOT

sys.path.insert(0, str(ROOT))

RATIO_TARGET = 1.3
COURSE_TARGET_S = 600.0


def fresh_import_s(statement: str, reps: int = 3) -> float:
    """Median wall time of a fresh interpreter running ``statement``."""
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", statement], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def startup_figures(tmp: Path) -> dict:
    """Where the fixed cost of a headless notebook goes: interpreter, imports, kernel."""
    figures = {name: fresh_import_s(stmt) for name, stmt in (
        ("python", "pass"), ("import jsonschema", "import jsonschema"),
        ("import nbformat", "import nbformat"), ("import papermill", "import papermill"),
        ("import jax", "import jax"))}
    probe = subprocess.run([sys.executable, "-c", "import sys, papermill; "
                            "print('rfc3987_syntax' in sys.modules, 'pyarrow' in sys.modules)"],
                           capture_output=True, text=True, check=True).stdout.split()
    figures["rfc3987_syntax imported"] = probe[0] == "True"
    figures["pyarrow imported"] = probe[1] == "True"

    import papermill as pm

    from coursekit.authoring import nbbuild
    from coursekit.commands import course
    from coursekit.facts import KERNELSPEC
    course.ensure_kernel()
    nb = nbbuild.from_text('# %% tags=["parameters"]\nX = 1\n\n# %%\nprint(X)\n')
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    path = nbbuild.write(nb, tmp / "empty.ipynb")
    times = []
    for _ in range(3):
        start = time.perf_counter()
        pm.execute_notebook(str(path), str(tmp / "empty-out.ipynb"), parameters={"X": 2},
                            kernel_name=course.KERNEL, progress_bar=False, cwd=str(tmp))
        times.append(time.perf_counter() - start)
    figures["papermill run of a 2-cell notebook (kernel start + stop)"] = statistics.median(times)
    return figures


def as_script(path: Path, out: Path) -> Path:
    """The notebook's code cells, parameterised as the course runs them, as one script."""
    from nbconvert import ScriptExporter
    from papermill.iorw import load_notebook_node
    from papermill.parameterize import parameterize_notebook

    from coursekit.commands import course
    nb = load_notebook_node(str(path))  # papermill's own loader, as execute_notebook uses
    params = course.notebook_parameters(nb, ci=True, learner=False, folder=path.parent)
    nb = parameterize_notebook(nb, params, kernel_name=course.KERNEL, language="python")
    body, _ = ScriptExporter().from_notebook_node(nb)
    script = out / f"{path.stem}.py"
    script.write_text(body)
    return script


def run_script(script: Path, cwd: Path, records: Path, reuse: Path) -> tuple[float, int, str]:
    """The bare script with what the course's papermill run had: its check cells answered
    by part 1's passed stages (``reuse``), so both do the same work."""
    from coursekit.notebook.reuse import REUSE_ENV
    env = dict(os.environ, MPLBACKEND="Agg", COURSE_RECORDS=str(records))
    if reuse.is_dir():
        env[REUSE_ENV] = str(reuse)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, str(script)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)
    return time.perf_counter() - start, done.returncode, done.stderr[-800:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    parser.add_argument("--only", default="", help="only notebooks whose name contains this")
    args = parser.parse_args(argv)
    out = Path(args.out).resolve() / "notebooks"  # scripts run from notebooks/: absolute
    out.mkdir(parents=True, exist_ok=True)
    print(f"CPU figures: {os.cpu_count()} cores, load average at start "
          f"{os.getloadavg()[0]:.2f} (other work on the machine shows up in every figure)")

    with tempfile.TemporaryDirectory() as tmp:
        startup = startup_figures(Path(tmp))
    print("\nwhere a headless notebook's fixed start-up time goes (fresh processes, medians):")
    for name, value in startup.items():
        shown = f"{value:6.2f} s" if isinstance(value, float) else str(value)
        print(f"  {name:58s} {shown}")
    print("  papermill imports nbformat -> jsonschema; with the `rfc3987` package installed, "
          "jsonschema skips\n  rfc3987_syntax (dozens of Lark parsers built at import); "
          "papermill's I/O layer also imports pyarrow.\n  The runner imports papermill once; "
          "each notebook then pays for its own kernel start and `import jax`.")

    course_cmd = [sys.executable, "-m", "coursekit.commands.course", "--ci", "--out",
                  str(out / "course-ci")]
    if args.only:
        course_cmd += ["--only", args.only]
    print(f"\nwhole course at CI size: {' '.join(course_cmd[1:])}", flush=True)
    start = time.perf_counter()
    course_rc = subprocess.run(course_cmd, cwd=ROOT, capture_output=True, text=True).returncode
    course_s = time.perf_counter() - start
    summary = json.loads((out / "course-ci" / "summary.json").read_text())

    rows = []
    scripts = out / "scripts"
    scripts.mkdir(exist_ok=True)
    for nb_row in summary["notebooks"]:
        path = ROOT / "notebooks" / nb_row["notebook"]
        script = as_script(path, scripts)
        script_s, rc, err = run_script(script, path.parent, out / "records-script" / path.stem,
                                       out / "course-ci" / "reuse")
        ratio = nb_row["wall_s"] / script_s
        rows.append({"notebook": path.name, "papermill_s": nb_row["wall_s"],
                     "papermill_status": nb_row["status"], "script_s": round(script_s, 2),
                     "script_rc": rc, "ratio": round(ratio, 3)})
        if rc != 0:
            print(f"  {path.name}: the bare script failed (exit {rc}): {err.strip()[-300:]}")

    print(f"\n{'notebook':30s} {'papermill s':>11s} {'script s':>9s} {'ratio':>7s}  "
          f"target <= {RATIO_TARGET}x")
    for r in rows:
        verdict = "ok" if r["ratio"] <= RATIO_TARGET else "OVER"
        if r["script_rc"] != 0 or r["papermill_status"] != "ok":
            verdict = "run failed"
        print(f"{r['notebook']:30s} {r['papermill_s']:11.1f} {r['script_s']:9.1f} "
              f"{r['ratio']:6.2f}x  {verdict}")
    total_pm = sum(r["papermill_s"] for r in rows)
    total_script = sum(r["script_s"] for r in rows)
    if rows:
        print(f"{'all notebooks':30s} {total_pm:11.1f} {total_script:9.1f} "
              f"{total_pm / total_script:6.2f}x")
    verdict = "ok" if course_s <= COURSE_TARGET_S else "OVER"
    scope = f"only '{args.only}'" if args.only else "projects' checkers + every notebook"
    print(f"\nwhole course at CI size ({scope}): {course_s:.0f} s "
          f"wall, target <= {COURSE_TARGET_S:.0f} s on 2 cores: {verdict} (course exit "
          f"{course_rc}); load average at end {os.getloadavg()[0]:.2f}. CPU figures.")
    (out / "notebooks_bench.json").write_text(json.dumps(
        {"startup": startup, "rows": rows, "course_s": course_s, "course_rc": course_rc,
         "ratio_target": RATIO_TARGET, "course_target_s": COURSE_TARGET_S}, indent=1))
    failed = course_rc != 0 or any(r["script_rc"] != 0 for r in rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

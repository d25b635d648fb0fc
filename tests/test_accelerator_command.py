"""make accelerator on the CPU (CI has no accelerator): the dry run at the smallest size
that still takes every path, run for real as a user runs it (``python -m
coursekit.commands.accelerator --dry-run``): one project's one stage on its solution and
its starter, a notebook that runs to its end and one that stops, the device probe and the
roofline at tiny sizes, its compute dtype bfloat16 as on an accelerator (the float32
ceiling measured too); then the report's fields and statuses, read back."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
import types
from pathlib import Path

import jax
import jaxlib
import nbformat
import pytest

from coursekit.commands import accelerator_report as report
from coursekit.commands.accelerator_roofline import Matmul, Stream, solution_calls
from coursekit.commands.accelerator_runs import run_child, stage_verdicts
from coursekit.facts import ROOT
from coursekit.measure.chips import spec

COMMAND = [sys.executable, "-m", "coursekit.commands.accelerator"]
ARGS = ["--dry-run", "--only", "foundations", "--stage", "1", "--fast-dtype", "bfloat16"]
ITERS, ROUNDS = 3, 2  # the dry run's roofline defaults


def notebook(cells, ci_parameters):
    nb = nbformat.v4.new_notebook()
    nb.metadata["course"] = {"project": "foundations", "ci_parameters": ci_parameters}
    nb.cells = [nbformat.v4.new_markdown_cell("# a notebook")] + [
        nbformat.v4.new_code_cell(source, metadata={"tags": tags}) for source, tags in cells]
    return nb


def run(*args, timeout=300):
    return subprocess.run([*COMMAND, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=timeout)


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("accelerator")
    notebooks = folder / "notebooks"
    notebooks.mkdir()
    nbformat.write(notebook([("N = 1000", ["parameters"]),
                             ("import jax.numpy as jnp\nprint(IMPL)\n"
                              "total = float(jnp.ones(N).sum())", []),
                             ("assert total == N, total", []),
                             # a check cell: the projects part's run of this stage, shown
                             ("from coursekit.notebook.cells import run_check\n"
                              "check1 = run_check('foundations', 1, IMPL)", [])], {"N": 7}),
                   notebooks / "foundations_runs.ipynb")
    nbformat.write(notebook([("N = 1", ["parameters"]), ("print('before', N)", []),
                             ("1 / 0", []), ("print('never')", [])], {}),
                   notebooks / "foundations_stops.ipynb")
    out = folder / "out"
    done = run(*ARGS, "--notebooks", str(notebooks), "--out", str(out))
    assert (out / "report.json").exists(), done.stdout + done.stderr
    return {"done": done, "out": out, "notebooks": notebooks,
            "report": json.loads((out / "report.json").read_text()),
            "md": (out / "report.md").read_text()}


@pytest.mark.slow
def test_the_machine_is_named_with_its_versions(dry_run):
    env = dry_run["report"]["environment"]
    assert env["device"]["backend"] == "cpu" and env["device"]["label"] == "CPU figure (cpu)"
    assert env["versions"]["jax"] == jax.__version__
    assert env["versions"]["jaxlib"] == jaxlib.__version__
    assert env["versions"]["python"] == platform.python_version()
    assert env["jax_platforms"] == "cpu"  # a dry run keeps every process off any device
    assert {"papermill", "xprof", "nbformat"} <= set(env["packages"])
    for text in ("## Machine", "CPU figure (cpu)", jax.__version__, "**DRY RUN"):
        assert text in dry_run["md"]


@pytest.mark.slow
def test_solution_passes_and_starter_says_not_yet_per_stage(dry_run):
    rows = {(r["project"], r["impl"]): r for r in dry_run["report"]["projects"]}
    solution, starter = rows["foundations", "solution"], rows["foundations", "starter"]
    stage = solution["stages"]["1"]
    assert stage["verdict"] in ("pass", "pass, inconclusive") and solution["as_expected"]
    assert stage["passed"] + stage["inconclusive"] == stage["checks"] > 0
    assert stage["measured_on"] == "CPU figure (cpu)" and stage["seconds"] > 0
    s = starter["stages"]["1"]
    assert s["verdict"] == "not yet" and s["not_yet"] == s["checks"] > 0
    assert all(x["message"].startswith("not yet: stage 1") for x in s["not_passed"])
    assert starter["as_expected"] and starter["runs"][0]["returncode"] == 1
    assert all(r["wall_s"] > 0 for row in (solution, starter) for r in row["runs"])
    others = [r for key, r in rows.items() if key[0] != "foundations"]
    assert others and all(not r["ran"] and r["as_expected"] is None for r in others)
    assert "| foundations | starter | 1 | not yet |" in dry_run["md"]


@pytest.mark.slow
def test_each_notebook_ran_to_its_end_or_names_its_first_error(dry_run):
    rows = {r["notebook"]: r for r in dry_run["report"]["notebooks"]}
    runs, stops = rows["foundations_runs.ipynb"], rows["foundations_stops.ipynb"]
    assert runs["ran_to_end"] and runs["as_expected"] and runs["stopped_at"] is None
    assert runs["parameters"]["N"] == 7  # the notebook's CI size, injected
    assert runs["parameters"]["IMPL"].endswith("projects/foundations/solution/model.py")
    assert runs["device"]["label"] == "CPU figure (cpu)" and runs["wall_s"] > 0
    executed = nbformat.read(dry_run["out"] / runs["executed"], as_version=4)
    assert "projects/foundations/solution/model.py" in executed.cells[3].outputs[0]["text"]
    assert not stops["ran_to_end"] and stops["as_expected"] is False
    cell = stops["stopped_at"]
    assert cell["source"] == "1 / 0" and "ZeroDivisionError" in cell["error"]
    stopped = nbformat.read(dry_run["out"] / stops["executed"], as_version=4)
    assert stopped.cells[cell["cell"]].source == "1 / 0"
    assert stopped.cells[-1].get("execution_count") is None  # nothing ran after it
    assert "| foundations_stops.ipynb | STOPPED |" in dry_run["md"]
    # its check cell showed the projects part's run of the same file and stage, and said so
    assert runs["check_cells"] == runs["check_cells_ok"] == runs["check_cells_reused"] == 1
    shown = "".join(o.get("text", "") for o in executed.cells[-1].outputs)
    assert "(this make accelerator run's project check of the same file, its learner on " \
        "CPU figure (cpu))" in shown, shown
    assert "| foundations_runs.ipynb | ran to its end |" in dry_run["md"]
    assert "| 1/1 | 1 |" in dry_run["md"]


@pytest.mark.slow
def test_roofline_ceilings_and_the_solution_beside_them(dry_run):
    roof = dry_run["report"]["roofline"]
    assert roof["device"]["label"] == "CPU figure (cpu)" and roof["spec"] is None
    assert roof["fast_dtype"] == "bfloat16" and not roof["errors"]
    found = {(c["what"], c["size"], c["dtype"]) for c in roof["ceilings"]}
    assert found == {("matmul", "128", "bfloat16"), ("matmul", "256", "bfloat16"),
                     ("matmul", "256", "float32"),
                     ("read-only jnp.sum", "1 MiB", "float32"),
                     ("read-only jnp.sum", "4 MiB", "float32"),
                     ("x * 2 in place (read + write)", "1 MiB", "float32"),
                     ("x * 2 in place (read + write)", "4 MiB", "float32")}
    for c in roof["ceilings"]:
        assert len(c["samples_s"]) == ITERS * ROUNDS and c["first_call_s"] > 0
        assert c["best"] == pytest.approx(c["work"] / min(c["samples_s"]))
        # the pipelined figure: one sample a round, each the round over its calls
        piped = c["pipelined"]
        assert piped["calls"] == ITERS and len(piped["samples_s"]) == ROUNDS
        assert piped["best"] == pytest.approx(c["work"] / min(piped["samples_s"]))
    assert "a synchronised call pays" in dry_run["md"]
    assert "Why a synchronised call reads less than the pipelined one: at 4 MiB" in dry_run["md"]
    asked = {(s["function"], s["asked"].get("kind")) for s in roof["solution"]}
    assert asked == {("measure_peak_flops", None), ("measure_bandwidth", "read_sum"),
                     ("measure_bandwidth", "in_place")}
    for s in roof["solution"]:
        assert len(s["figures"]) == ROUNDS and not s["error"]
        assert s["ratio"] == pytest.approx(s["best"] / s["ceiling"]["best"])
        assert s["within_90"] == (s["ratio"] >= 0.9)
    peak = next(s for s in roof["solution"] if s["function"] == "measure_peak_flops")
    assert peak["asked"] == {"n": "256", "iters": str(ITERS), "dtype": "bfloat16"}
    assert peak["ceiling"]["size"] == "256" and peak["ceiling"]["dtype"] == "bfloat16"
    assert peak["note"] == ""  # it timed the dtype it was asked for, beside that ceiling
    assert "## Roofline" in dry_run["md"] and "Every figure here: CPU figure (cpu)" in dry_run["md"]


@pytest.mark.slow
def test_summary_lists_what_did_not_run_and_the_exit_status_follows_it(dry_run):
    summary = dry_run["report"]["summary"]
    assert not summary["complete"] and len(summary["not_run"]) == 8  # 4 projects x 2
    assert summary["projects_as_expected"] == "2 of 10"
    assert summary["notebooks_ran_to_end"] == "1 of 2"
    assert summary["ok"] is False  # the notebook that stops
    # where the time went: every item, its total against the run's target
    times = dry_run["report"]["times"]
    assert {t["item"] for t in times} >= {"environment", "roofline",
                                          "checks foundations solution --stage 1"}
    assert summary["item_seconds"] == pytest.approx(sum(t["wall_s"] for t in times), abs=0.2)
    assert "## Time" in dry_run["md"] and "Stages whose checks took over 90 s" in dry_run["md"]
    assert dry_run["done"].returncode == 1, dry_run["done"].stdout[-2000:]


def test_check_cells_may_reuse_and_time_counts_the_lanes_apart(tmp_path):
    from coursekit.commands import accelerator as a
    for flags, reused in (([], True), (["--no-reuse"], False)):
        run_ = a.Run(a.parse(["--out", str(tmp_path), *flags]))
        assert (a.REUSE_ENV in run_.notebook_env()) is reused
        assert a.REUSE_ENV not in run_.env  # the checkers themselves never reuse
    # what the projects part keeps for them: a stage that passed, a check this machine
    # cannot run or could not decide on the chip included; never one that failed or with
    # nothing that passed
    from coursekit.commands import accelerator_runs as runs_
    statuses = {1: ["pass"], 2: ["pass", "not-applicable"], 3: ["pass", "inconclusive"],
                4: ["not-applicable"], 5: ["pass", "fail"], 6: ["inconclusive"]}
    data = {"stages": list(statuses), "measured_on": {"label": "TPU figure (TPU v5 lite)"},
            "results": [{"stage": k, "check_id": f"c{k}{i}", "status": v}
                        for k, vs in statuses.items() for i, v in enumerate(vs)]}
    impl = ROOT / "projects" / "foundations" / "solution" / "model.py"
    assert runs_.share_with_notebooks(tmp_path, "foundations", impl, data) == [1, 2, 3]
    # a run brought to a fresh machine with items/ and checks/ only keeps them again
    (tmp_path / "checks").mkdir()
    (tmp_path / "checks" / "f.json").write_text(json.dumps(data))
    (tmp_path / "items").mkdir()
    item = {"kind": "checks", "project": "foundations", "impl": "solution",
            "result": "checks/f.json", "reuse_basis": runs_.reuse_basis("foundations", impl)}
    import shutil
    resumed = a.Run(a.parse(["--out", str(tmp_path), "--resume"]))
    for basis, shared in (("foundations-stage-0-0", []),  # another checker's or file's
                          (None, []),  # recorded before runs said what they checked
                          (item["reuse_basis"], ["foundations:1", "foundations:2",
                                                 "foundations:3"])):
        shutil.rmtree(tmp_path / "reuse", ignore_errors=True)
        (tmp_path / "items" / "c.json").write_text(json.dumps({**item, "reuse_basis": basis}))
        assert a.reshare_recorded(resumed) == shared
    kept = json.loads(next((tmp_path / "reuse").glob("foundations-stage2-*.json")).read_text())
    assert kept["source"] == ("this make accelerator run's project check of the same file, "
                              "its learner on TPU figure (TPU v5 lite)")
    times = [{"item": "x", "wall_s": 100.0, "finished": "1", "lane": "chip"},
             {"item": "y", "wall_s": 40.0, "finished": "2", "lane": "cpu"}]
    text = "\n".join(report.times_md({"times": times}))
    assert "one after another: 100 s in all" in text
    assert "in the CPU lane (runs that keep to the CPU): 1 item(s), 40 s" in text


@pytest.mark.slow
def test_resume_runs_nothing_twice_and_the_report_part_runs_nothing(dry_run):
    items = sorted((dry_run["out"] / "items").glob("*.json"))
    before = {p: p.stat().st_mtime_ns for p in items}
    again = run(*ARGS, "--notebooks", str(dry_run["notebooks"]), "--out", str(dry_run["out"]),
                "--resume", timeout=60)
    assert again.stdout.count("recorded before (--resume)") == 6, again.stdout
    assert {p: p.stat().st_mtime_ns for p in items} == before
    assert json.loads((dry_run["out"] / "report.json").read_text())["summary"] == \
        dry_run["report"]["summary"]
    # the report alone, in a process that is shown never to import JAX
    code = ("import sys; from coursekit.commands import accelerator as a; "
            f"rc = a.main(['--part', 'report', '--dry-run', '--out', {str(dry_run['out'])!r},"
            f" '--notebooks', {str(dry_run['notebooks'])!r}]); "
            "print('jax imported:', 'jax' in sys.modules); sys.exit(rc)")
    alone = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           cwd=ROOT, timeout=60)
    assert "jax imported: False" in alone.stdout, alone.stdout + alone.stderr
    assert alone.returncode == 1


@pytest.mark.slow
def test_no_budget_left_runs_nothing_and_modes_never_mix(tmp_path, dry_run):
    done = run("--dry-run", "--budget", "0", "--out", str(tmp_path), timeout=60)
    summary = json.loads((tmp_path / "report.json").read_text())["summary"]
    assert done.returncode == 0 and not (tmp_path / "items").exists()
    assert "environment probe" in summary["not_run"] and "roofline" in summary["not_run"]
    mixed = run("--part", "report", "--out", str(dry_run["out"]), timeout=60)
    assert mixed.returncode == 2 and "holds a dry run's items" in mixed.stderr


def test_stage_verdicts_can_say_wrong():
    def result(stage, check_id, status, message=""):
        return {"stage": stage, "check_id": check_id, "status": status, "message": message,
                "duration_s": 0.5}
    starter = stage_verdicts([result(1, "a", "not-implemented", "not yet: stage 1: f"),
                              result(1, "b", "crash", "the learner process died"),
                              result(2, "c", "pass")], "starter")
    assert starter["1"]["verdict"] == "WRONG: crash" and not starter["1"]["as_expected"]
    assert starter["2"]["verdict"] == "WRONG: pass"
    solution = stage_verdicts([result(1, "a", "pass"), result(1, "b", "inconclusive", "x"),
                               result(2, "c", "fail", "off by 2\nmore")], "solution")
    assert solution["1"]["verdict"] == "pass, inconclusive" and solution["1"]["as_expected"]
    # a check this machine cannot run (sockets refused) fails neither side
    socketless = [result(3, "a", "pass"), result(3, "d", "not-applicable",
                                                 "not applicable here: jax.distributed")]
    assert stage_verdicts(socketless, "solution")["3"]["verdict"] == "pass, not applicable"
    assert stage_verdicts(socketless, "solution")["3"]["as_expected"]
    starter = stage_verdicts([result(3, "a", "not-implemented", "not yet: stage 3: f"),
                              socketless[1]], "starter")
    assert starter["3"]["verdict"] == "not yet" and starter["3"]["as_expected"]
    assert solution["2"]["verdict"] == "FAIL"
    assert solution["2"]["not_passed"] == [{"check_id": "c", "status": "fail",
                                            "message": "off by 2", "not_yet": False}]


def test_a_tpu_roofline_reads_against_its_spec():
    """The report's arithmetic on a TPU v5e's figures (those of the machine's probe,
    tpu-v5e-facts.md): share of the spec, ratio to the ceiling, and the 90% verdict."""
    device = {"backend": "tpu", "device_kind": "TPU v5 lite", "label": "TPU figure (TPU v5 lite)",
              "jax": "0.10.2"}
    ceiling = {"what": "matmul", "size": "16384", "dtype": "bfloat16", "unit": "FLOP/s",
               "best": 190e12, "median": 188e12, "first_call_s": 0.5}
    read = {"what": "read-only jnp.sum", "size": "4 GiB", "dtype": "float32", "unit": "B/s",
            "best": 752e9, "median": 750e9, "first_call_s": 0.1}
    solution = [{"function": "measure_peak_flops", "asked": {"n": "16384"}, "unit": "FLOP/s",
                 "best": 101e12, "ceiling": ceiling, "ratio": 101 / 190, "within_90": False,
                 "note": "it takes no dtype", "error": ""}]
    roof = {"device": device, "spec": spec("TPU v5 lite"), "ceilings": [ceiling, read],
            "solution": solution, "errors": [], "iters": 10, "rounds": 3, "as_expected": False}
    text = "\n".join(report.roofline_md(roof))
    assert "| matmul | 16384 | bfloat16 | 190.0 TFLOP/s | 188.0 TFLOP/s | 96% |" in text
    assert "| read-only jnp.sum | 4 GiB | float32 | 752.0 GB/s | 750.0 GB/s | 92% |" in text
    assert "197.0 TFLOP/s bfloat16, 819.0 GB/s HBM" in text and "cloud.google.com" in text
    assert "| 53% | NO (it takes no dtype) |" in text
    assert "TPU figure (TPU v5 lite), JAX 0.10.2" in text


@pytest.mark.parametrize("make, wrong", [
    (lambda: Matmul(64, "bfloat16"), lambda a, b: a @ b.T),
    (lambda: Matmul(64, "float32"), lambda a, b: a @ b + 1.0),
    (lambda: Stream("read", 2**20), lambda x: x[: x.shape[0] // 2].sum()),
    (lambda: Stream("read_write", 2**20), lambda x: x * 2 + 1e-3),
], ids=["matmul-transposed", "matmul-shifted", "sum-half", "double-shifted"])
def test_a_ceiling_with_a_wrong_result_is_refused_before_it_is_timed(make, wrong):
    import jax
    ceiling = make()
    ceiling.first()  # the right operation passes its check
    right = make()
    right.fn = jax.jit(wrong)
    with pytest.raises(ValueError, match="float64 says|not twice"):
        right.first()


def test_what_an_item_started_outside_its_process_group_is_stopped_when_it_ends(tmp_path):
    """A process in a session of its own (as a training run starts) survives its item's
    group kill; on a TPU it would hold the chip from every later item."""
    pid_file = tmp_path / "pid"
    code = ("import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
            "'import time; time.sleep(120)'], start_new_session=True); "
            f"open({str(pid_file)!r}, 'w').write(str(p.pid))")
    done = run_child([sys.executable, "-c", code], "leaves-one", tmp_path / "logs", 60,
                     dict(os.environ))
    left = int(pid_file.read_text())
    assert done["status"] == "ok" and done["leftovers_stopped"] == 1
    for _ in range(100):
        state = Path(f"/proc/{left}/stat")
        if not state.exists() or state.read_text().split(") ")[1].startswith("Z"):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"process {left} still runs")


def test_setup_skips_what_is_installed_and_a_failed_install_is_named(tmp_path):
    site = next(Path(p) for p in sys.path if p.endswith("site-packages"))
    done = run("--dry-run", "--part", "setup", "--site", str(site), "--out", str(tmp_path / "a"),
               timeout=60)
    assert done.returncode == 0 and "already in" in done.stdout, done.stdout + done.stderr
    index = tmp_path / "no-index"
    index.mkdir()
    failed = run("--dry-run", "--part", "setup", "--site", str(tmp_path / "site"),
                 "--index-url", index.as_uri(), "--out", str(tmp_path / "b"), timeout=120)
    assert failed.returncode == 1 and "setup" in failed.stdout and "failed" in failed.stdout
    assert (tmp_path / "b" / "report.md").exists()  # the report is written all the same


def test_a_peak_that_takes_no_dtype_runs_beside_float32_and_is_judged_by_the_fast_dtype():
    """A measure_peak_flops without a dtype (the contract before it took one) times
    float32: it is called between the float32 ceiling's rounds, its ratio is taken to the
    fast dtype's ceiling, and the report says both."""
    def float32_only(n=1024, iters=5):
        return {"flops_per_s": 150e12}

    def bandwidth(nbytes=0, iters=5, kind="in_place"):
        return {"bandwidth": 600e9}
    model = types.SimpleNamespace(measure_peak_flops=float32_only, measure_bandwidth=bandwidth)
    peak, *streams = solution_calls(model, "bfloat16", 16384, 4 * 2**30, 10)
    assert peak.beside == ("matmul", "16384", "float32")
    assert peak.judged_by == ("matmul", "16384", "bfloat16")
    assert [s.beside for s in streams] == [("read", "4 GiB", "float32"),
                                           ("read_write", "4 GiB", "float32")]
    peak(0)
    measured = {peak.beside: {"what": "matmul", "size": "16384", "dtype": "float32",
                              "best": 160e12, "unit": "FLOP/s"},
                peak.judged_by: {"what": "matmul", "size": "16384", "dtype": "bfloat16",
                                 "best": 190e12, "unit": "FLOP/s"}}
    got = peak.record(measured)
    assert got["ceiling"]["dtype"] == "bfloat16" and got["ratio"] == pytest.approx(150 / 190)
    assert got["within_90"] is False
    assert "measures float32, not the device's fast dtype (bfloat16)" in got["note"]
    assert "94% of the float32 ceiling measured beside it" in got["note"]


def test_runs_that_need_no_chip_run_in_a_lane_of_their_own_that_cannot_take_it(
        tmp_path, monkeypatch):
    """sharded-training declares its eight CPU devices, and a starter raises before it
    computes: their checks run beside the chip's items, every process of theirs with
    JAX_PLATFORMS=cpu; the other projects' solutions run in the chip's lane with the
    machine's own platforms, never in both."""
    from coursekit.commands import accelerator
    assert accelerator.keeps_to_the_cpu("sharded-training")
    assert not any(accelerator.keeps_to_the_cpu(p) for p in
                   ("foundations", "pallas-kernel", "performance-audit", "optimisation"))
    seen = []

    def fake_checker(project, which, stage, out, limit, env):
        seen.append((project, which, env.get("JAX_PLATFORMS")))
        return {"kind": "checks", "project": project, "impl": which, "stage": stage,
                "stages": {}, "error": "", "wall_s": 0.0, "measured_on": None}

    monkeypatch.setattr(accelerator.runs, "run_checker", fake_checker)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    run = accelerator.Run(accelerator.parse(["--part", "projects", "--out", str(tmp_path)]))
    accelerator.part_projects(run, "cpu")
    projects = ("foundations", "optimisation", "pallas-kernel", "performance-audit")
    assert seen == [(p, "starter", "cpu") for p in projects] + [
        ("sharded-training", w, "cpu") for w in ("solution", "starter")]
    seen.clear()
    accelerator.part_projects(run, "chip")
    assert seen == [(p, "solution", None) for p in projects]
    lanes = {json.loads(p.read_text())["lane"] for p in (tmp_path / "items").glob("*.json")}
    assert lanes == {"cpu", "chip"}  # each item says which lane it ran in (report: Time)


def test_notebooks_whose_kernel_stays_on_the_cpu_run_beside_the_chip_after_its_projects(
        tmp_path, monkeypatch):
    """Notebooks 05 and 08 compute on fake CPU devices and open the chip only from fresh
    processes: they run in the CPU lane once the chip's projects are done (their check
    cells show those runs), with the chip's lock, which every chip item holds whole, so
    their fresh processes take turns with the chip's items (coursekit.chip_turn)."""
    from coursekit.chip_turn import CHIP_LOCK_ENV, held_now
    from coursekit.commands import accelerator
    from coursekit.facts import NOTEBOOKS
    for path in sorted(NOTEBOOKS.glob("*.ipynb")):   # declared exactly where it is so
        source = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        pins = 'os.environ["JAX_PLATFORMS"] = "cpu"' in source
        assert (accelerator.notebook_lane(path) == "cpu") == pins, path.name
    events = []

    def chip_is_held(out):
        return held_now(out / "chip.lock")

    def fake_checker(project, which, stage, out, limit, env):
        time.sleep(0.05)
        events.append(("checks", project, which, chip_is_held(out)))
        return {"kind": "checks", "project": project, "impl": which, "stage": stage,
                "stages": {}, "error": "", "wall_s": 0.0, "measured_on": None}

    def fake_notebook(path, out, limit, cell_timeout, env):
        events.append(("notebook", path.stem, env.get(CHIP_LOCK_ENV), chip_is_held(out)))
        return {"kind": "notebook", "notebook": path.name, "error": "", "wall_s": 0.0}

    monkeypatch.setattr(accelerator.runs, "run_checker", fake_checker)
    monkeypatch.setattr(accelerator.runs, "run_notebook", fake_notebook)
    monkeypatch.setattr(accelerator.Run, "write_report", lambda self: {})
    run = accelerator.Run(accelerator.parse(["--part", "projects,notebooks",
                                             "--out", str(tmp_path)]))
    accelerator.run_parts(run, ["projects", "notebooks"])
    lock = str(tmp_path / "chip.lock")
    chip_checks = [i for i, e in enumerate(events) if e[0] == "checks" and e[2] == "solution"
                   and e[1] != "sharded-training"]
    beside = {e[1]: i for i, e in enumerate(events) if e[0] == "notebook" and e[2] == lock}
    assert sorted(beside) == ["05_sharding_and_recovery", "08_readiness_review"]
    assert min(beside.values()) > max(chip_checks)        # after the chip's projects
    assert all(e[3] for e in events if e[0] == "checks" and e[1] != "sharded-training"
               and e[2] == "solution")                      # the chip's items hold it
    assert all(e[3] for e in events if e[0] == "notebook" and e[2] is None)
    recorded = {json.loads(p.read_text())["notebook"]: json.loads(p.read_text())["lane"]
                for p in (tmp_path / "items").glob("notebook-*.json")}
    assert len(recorded) == 9 and {n for n, lane in recorded.items() if lane == "cpu"} == {
        "05_sharding_and_recovery.ipynb", "08_readiness_review.ipynb"}


def test_under_a_budget_an_item_that_would_not_finish_waits_and_the_call_goes_on(
        tmp_path, monkeypatch):
    """On the chip, under --budget, the projects run longest first (by the last run's
    times, ``accelerator_estimates``); one whose expected time overruns what is left is
    not started (a cut item is lost work) but left for the next --resume, and shorter
    ones still run; a notebook waits with its project, whose runs its check cells show.
    The next call runs what was left."""
    from coursekit.commands import accelerator
    from coursekit.commands import accelerator_estimates as estimates
    ran, runs = [], []

    def took(key):  # each fake item spends its expected time of the budget
        runs[-1].deadline -= estimates.TPU_V5E_SECONDS.get(key, 0)

    def fake_checker(project, which, stage, out, limit, env):
        ran.append(project)
        took(f"checks-{project}-{which}-{stage}")
        return {"kind": "checks", "project": project, "impl": which, "stage": stage,
                "stages": {}, "error": "", "wall_s": 0.0, "measured_on": None}

    def fake_notebook(path, out, limit, cell_timeout, env):
        ran.append(path.stem)
        took(f"notebook-{path.stem}")
        return {"kind": "notebook", "notebook": path.name, "error": "", "wall_s": 0.0}

    monkeypatch.setattr(accelerator.runs, "run_checker", fake_checker)
    monkeypatch.setattr(accelerator.runs, "run_notebook", fake_notebook)
    monkeypatch.setattr(accelerator.Run, "write_report", lambda self: {})
    figures = {**estimates.TPU_V5E_SECONDS, "checks-performance-audit-solution-all": 500,
               "checks-optimisation-solution-all": 300, "checks-foundations-solution-all": 95,
               "checks-pallas-kernel-solution-all": 20, "notebook-00_foundations": 5,
               "notebook-01_async_timing": 5, "notebook-06_pallas": 5}
    monkeypatch.setattr(estimates, "TPU_V5E_SECONDS", figures)
    args = ["--part", "projects,notebooks", "--impl", "solution", "--out", str(tmp_path),
            "--budget", "400"]
    run = accelerator.Run(accelerator.parse(args))
    runs.append(run)
    accelerator.part_projects(run, "chip")
    # 500 s would overrun 400: left; 300 fits, then 95 no longer does; 20 still fits
    assert ran == ["optimisation", "pallas-kernel"], ran
    assert run.skipped == {"checks-performance-audit-solution-all",
                           "checks-foundations-solution-all"}
    assert not run.stopped
    ran.clear()
    accelerator.part_notebooks(run, "chip")
    # 00 and 01 wait with their projects; 06 (pallas-kernel's) fits and runs
    assert "00_foundations" not in ran and "01_async_timing" not in ran
    assert "06_pallas" in ran
    ran.clear()   # the next call: what was left, nothing twice
    monkeypatch.setitem(figures, "checks-performance-audit-solution-all", 50)
    run = accelerator.Run(accelerator.parse([*args, "--resume"]))
    runs.append(run)
    accelerator.part_projects(run, "chip")
    assert ran == ["foundations", "performance-audit"], ran  # longest first

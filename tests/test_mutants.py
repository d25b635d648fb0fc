"""make mutants on a toy project (not a real one: seconds, not hours): Cosmic Ray's mutants
of the learner regions only, each judged by the toy checker of its stage; an obvious
mutant is killed, a listed equivalent leaves the score, an unlisted survivor is named."""

from __future__ import annotations

import io
import json
import shutil
import textwrap
from pathlib import Path

import pytest

from coursekit.commands import mutants

SOLUTION = '''\
def add(a, b):
    """Not graded text outside the markers: never mutated."""
    ### BEGIN SOLUTION stage 1: add
    return a + b
    ### END SOLUTION


def sign(a):
    ### BEGIN SOLUTION stage 2: sign
    return 1 if a > 0 else -1
    ### END SOLUTION


UNMARKED = 2 + 2
'''

# The toy checker: stage 1 pins add exactly; stage 2 never tries 0, so `a >= 0` survives.
CHECKER = '''\
import argparse, importlib.util, sys
p = argparse.ArgumentParser()
p.add_argument("--stage"); p.add_argument("--impl"); p.add_argument("--seed")
p.add_argument("--fail-fast", action="store_true")
args = p.parse_args()
spec = importlib.util.spec_from_file_location("impl", args.impl)
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
ok = {"1": m.add(2, 3) == 5 and m.add(-1, 4) == 3,
      "2": m.sign(5) == 1 and m.sign(-5) == -1}[args.stage]
sys.exit(0 if ok else 1)
'''


def make_toy(root: Path) -> Path:
    project = root / "projects" / "toy"
    (project / "solution").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "solution" / "model.py").write_text(SOLUTION)
    (project / "tests" / "check.py").write_text(CHECKER)
    (project / "tests" / mutants.EQUIVALENTS).write_text(textwrap.dedent("""\
        # the toy contract says nothing about 0
        sign/ReplaceComparisonOperator_Gt_GtE#* -- sign(0) is outside the toy contract
        """))
    return root


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """One full measurement of the toy (Cosmic Ray's init and exec cost seconds a run),
    shared by the tests that start from it: (root, report, printed)."""
    root = make_toy(tmp_path_factory.mktemp("measured"))
    out = io.StringIO()
    report = mutants.measure_project("toy", root=root, out=out)
    return root, report, out.getvalue()


@pytest.fixture
def toy(tmp_path):
    """A toy project never measured."""
    return make_toy(tmp_path)


@pytest.fixture
def toy_measured(measured, tmp_path):
    """A copy of the measured toy, its report included (build/mutants-toy)."""
    root = tmp_path / "toy"
    shutil.copytree(measured[0], root)
    return root


def test_regions_are_the_indented_solution_bodies():
    regions = mutants.learner_regions(SOLUTION)
    assert [(r.stage, r.name, r.first, r.last) for r in regions] == [
        (1, "add", 4, 4), (2, "sign", 10, 10)]


def test_module_level_regions_are_mutated_only_when_they_name_a_stage():
    """A solution-only helper that one stage's function calls is that stage's code (the
    starter drops it); imports and helpers shared by stages name no stage and stay out."""
    source = textwrap.dedent('''\
        ### BEGIN SOLUTION
        import math
        ### END SOLUTION
        ### BEGIN SOLUTION stage 2: area's helper
        def _square(a):
            return a * a
        ### END SOLUTION


        def area(r):
            ### BEGIN SOLUTION stage 2: area
            return math.pi * _square(r)
            ### END SOLUTION
        ''')
    assert [(r.stage, r.name, r.first, r.last) for r in mutants.learner_regions(source)] == [
        (2, "area", 5, 6), (2, "area", 12, 12)]


def test_runner_kills_obvious_mutants_and_honours_equivalents(measured):
    _, report, text = measured
    by_id = {m["id"]: m for m in report["mutants"]}
    assert all(m["line"] in (4, 10) for m in report["mutants"])  # nothing outside regions
    assert by_id["add/ReplaceBinaryOperator_Add_Sub#1"]["outcome"] == "killed"
    assert report["stages"][1]["score"] == 1.0
    gte = by_id["sign/ReplaceComparisonOperator_Gt_GtE#1"]
    assert gte["outcome"] == "equivalent" and "outside the toy contract" in gte["reason"]
    survivors = {m["id"] for m in report["survivors"]}
    assert survivors and gte["id"] not in survivors
    assert all(by_id[s]["stage"] == 2 for s in survivors)
    stage2 = report["stages"][2]
    assert stage2["equivalent"] == 1
    assert stage2["score"] == pytest.approx(stage2["killed"] / (stage2["mutants"] - 1), abs=1e-4)
    assert "toy stage 1: 100.0% killed" in text
    for survivor in survivors:
        assert f"survived  {survivor}" in text


def test_a_reasonless_equivalent_is_refused(tmp_path):
    path = tmp_path / mutants.EQUIVALENTS
    path.write_text("sign/*\n")
    with pytest.raises(ValueError, match="pattern.*reason"):
        mutants.read_equivalents(path)


def test_a_sample_is_drawn_by_seed_keeps_ids_and_says_what_it_estimates(measured,
                                                                         toy_measured):
    toy, full = toy_measured, measured[1]
    everyone = {m["id"]: m["outcome"] for m in full["mutants"] if m["stage"] == 2}
    out = io.StringIO()
    part = mutants.measure_project("toy", root=toy, out=out, sample=2, stages=[2])
    drawn = {m["id"]: m["outcome"] for m in part["mutants"]}
    assert len(drawn) == 2 < len(everyone)
    assert all(everyone[i] == outcome for i, outcome in drawn.items())  # same ids, same fate
    again = mutants.measure_project("toy", root=toy, out=io.StringIO(), sample=2, stages=[2])
    assert {m["id"] for m in again["mutants"]} == set(drawn)  # the seed fixes the draw
    stage2 = part["stages"][2]
    assert stage2["sampled_from"] == len(everyone)
    low, high = stage2["interval_95"]
    assert 0 <= low <= (stage2["score"] or 0) <= high <= 1
    assert f"a sample of 2 of {len(everyone)} mutants; 95% interval" in out.getvalue()


def test_a_stage_measured_again_keeps_the_others_and_the_list_decides_anew(measured,
                                                                            toy_measured):
    """After a check changes, one stage is measured again: the report keeps the other
    stages as last measured (saying when each ran), and the equivalents file as it is now
    decides every survivor, old or new."""
    toy, full = toy_measured, measured[1]
    stage1 = {m["id"]: m["outcome"] for m in full["mutants"] if m["stage"] == 1}
    checker = toy / "projects" / "toy" / "tests" / "check.py"
    checker.write_text(CHECKER.replace('"1": m.add(2, 3) == 5 and m.add(-1, 4) == 3',
                                       '"1": m.add(2, 3) == 5'))   # weaker: more survive
    (toy / "projects" / "toy" / "tests" / mutants.EQUIVALENTS).write_text("")
    out = io.StringIO()
    merged = mutants.measure_project("toy", root=toy, out=out, stages=[1])
    assert {m["stage"] for m in merged["mutants"]} == {1, 2}
    assert set(merged["stages"]) == {1, 2}
    assert {m["id"] for m in merged["mutants"] if m["stage"] == 2} == \
        {m["id"] for m in full["mutants"] if m["stage"] == 2}
    gte = next(m for m in merged["mutants"] if m["id"] == "sign/ReplaceComparisonOperator_Gt_GtE#1")
    assert gte["outcome"] == "survived"   # no longer listed: a survivor again
    assert set(stage1) == {m["id"] for m in merged["mutants"] if m["stage"] == 1}
    assert all(t["run_at"] for t in merged["stages"].values())
    assert "toy stage 2:" in out.getvalue() and "[run " in out.getvalue()


def test_a_run_stopped_halfway_keeps_the_stages_it_finished(toy):
    """The report is written after every stage: a long run that stops in a later stage
    (here the oracle breaks there) keeps the score of the stages before it."""
    checker = toy / "projects" / "toy" / "tests" / "check.py"
    checker.write_text(CHECKER.replace('"2": m.sign(5) == 1', '"2": False and m.sign(5) == 1'))
    with pytest.raises(SystemExit, match="reference fails stage 2"):
        mutants.measure_project("toy", root=toy, out=io.StringIO())
    report = json.loads((toy / "build" / "mutants-toy" / "report.json").read_text())
    assert set(report["stages"]) == {"1"} and report["stages"]["1"]["run_at"]
    assert report["mutants"] and {m["stage"] for m in report["mutants"]} == {1}


def test_rescore_decides_the_last_report_again_without_running_a_mutant(measured,
                                                                        toy_measured):
    """A survivor justified after the run leaves the score on --rescore; a report that
    does not exist is a named error."""
    toy = toy_measured
    listed = toy / "projects" / "toy" / "tests" / mutants.EQUIVALENTS
    listed.write_text("")
    full = mutants.rescore("toy", root=toy, out=io.StringIO())  # the listed one unlisted
    assert [t["run_at"] for t in full["stages"].values()] == \
        [t["run_at"] for t in measured[1]["stages"].values()]
    assert any(m["id"].startswith("sign/ReplaceComparisonOperator_Gt_GtE")
               for m in full["survivors"])
    checker = toy / "projects" / "toy" / "tests" / "check.py"
    checker.write_text("raise SystemExit(1)\n")  # a mutant run now would kill everything
    listed.write_text("sign/ReplaceComparisonOperator_Gt_GtE#* -- outside the contract\n")
    out = io.StringIO()
    again = mutants.rescore("toy", root=toy, out=out)
    assert not any(m["id"].startswith("sign/ReplaceComparisonOperator_Gt_GtE")
                   for m in again["survivors"])
    assert again["total"]["equivalent"] == full["total"]["equivalent"] + 1
    assert again["total"]["killed"] == full["total"]["killed"]   # nothing ran
    assert [t["run_at"] for t in again["stages"].values()] == \
        [t["run_at"] for t in full["stages"].values()]
    assert "toy all stages" in out.getvalue()
    with pytest.raises(SystemExit, match="no mutation report"):
        mutants.rescore("elsewhere", root=toy, out=io.StringIO())


def test_two_jobs_flags_keep_a_checkers_own_device_count():
    """MUTANTS_JOBS=2 adds its one-thread flag to XLA_FLAGS; a checker that then asks for
    8 CPU devices (sharded-training) must get them (a flag XLA cannot read hides the rest)."""
    import os
    import subprocess
    import sys

    from coursekit.facts import use_cpu_devices
    env = use_cpu_devices(8, dict(os.environ, XLA_FLAGS=mutants.ONE_THREAD))
    got = subprocess.run([sys.executable, "-c", "import jax; print(jax.device_count())"],
                         env=env, capture_output=True, text=True, check=True).stdout
    assert got.split()[-1] == "8", env["XLA_FLAGS"]


def test_wilson_interval_is_sound_at_the_ends():
    assert mutants.wilson(10, 10)[1] == 1.0 and mutants.wilson(10, 10)[0] > 0.6
    low, high = mutants.wilson(0, 5)
    assert low == 0.0 and 0.4 < high < 0.5


def test_a_run_stopped_by_an_inconclusive_check_is_no_kill(toy):
    """The checker exits non-zero (3) when a timing check could not decide under load, which
    a correct solution gets too: such a mutant is counted apart, out of the score, never
    as killed (seen: two listed equivalents of performance-audit stage 1 'killed' so)."""
    checker = toy / "projects" / "toy" / "tests" / "check.py"
    checker.write_text(CHECKER.replace(
        "sys.exit(0 if ok else 1)",
        'print("0 passed, 0 failed, 1 inconclusive (rerun when the machine is quieter)")\n'
        "sys.exit(0 if ok else 3)"))
    out = io.StringIO()
    report = mutants.measure_project("toy", stages=[1], root=toy, out=out)
    stage = report["stages"][1]
    assert stage["mutants"] and stage["inconclusive"] == stage["mutants"]
    assert stage["killed"] == 0 and stage["score"] is None
    assert "inconclusive: rerun them" in out.getvalue()


def test_a_killed_mutant_its_equivalents_line_still_names_is_reported_stale(tmp_path):
    """A line of the equivalents file that names a mutant the checker kills is stale: the
    report lists it and the printout says to remove it (a check that stopped catching the
    mutant would otherwise count it as equivalent unseen)."""
    killed = mutants.Mutant("m1", 1, 3, "op", outcome="killed", change="a == b -> a != b")
    kept = mutants.Mutant("m2", 1, 4, "op", outcome="survived", change="x + 1 -> x - 1")
    report = mutants.write_report(tmp_path / "report.json", "toy", [killed, kept], 1, {}, {},
                                  [("m1*", "no CPU measurement tells them apart"),
                                   ("m2*", "the same value either way")], merge=False)
    assert report["stale_equivalents"] == [{"id": "m1", "change": "a == b -> a != b",
                                            "reason": "no CPU measurement tells them apart"}]
    assert kept.outcome == "equivalent"  # a survivor its line names stays equivalent
    out = io.StringIO()
    mutants.print_report(report, out=out)
    assert "killed, yet listed as equivalent  m1" in out.getvalue()

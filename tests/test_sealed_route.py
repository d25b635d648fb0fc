"""A learner file cannot answer a stage with a sealed program (issue 46, item 1).

Foundations' stages 2 and 3 are replays, and the checker holds each replay as a program
(``projects/foundations/tests/sealed/*.jaxexport``; notebook 08's change under review, once
held the same way, is now the learner's own step on a replicated batch). A blind reading of
the release found the programs loadable through ``coursekit.compat.jaxapi.deserialize``:
the forbidden-import scan refused ``jax.export`` and ``coursekit.checking.sealed`` only, and
a ``train_classifier`` that ran ``train_replay`` passed. Now:

* the scan (``coursekit.checking.forbidden``: ``SEALED_ROUTE``) refuses, at every stage of
  every project, each route that turns a program's bytes or text into a callable and any
  string naming a program's file, with a named finding at the stage's first check;
* a stage run by the grader refuses a learner process's open of a program's file, by any
  path or link (``autograder/guard.py``: ``protocol.LEARNER_SEALED``), and as root the
  copy's programs are the checker group's alone (``autograder.answers.fence_sealed``), so a
  name built at run time, which no reading can follow, scores 0 with the reason named;
* the honest solution still passes (tests/test_foundations.py; here beside the attacker).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import plant, solution

from autograder import answers, outcomes, sandbox
from coursekit import protocol
from coursekit.checking import forbidden
from coursekit.facts import ROOT

PROGRAM = ROOT / "projects" / "foundations" / "tests" / "sealed" / "train_replay.jaxexport"

# ---------------------------------------------------------------------------------------
# The reading: every route a file can name
# ---------------------------------------------------------------------------------------

ROUTES = {
    "jax.export": "from jax import export\nf = export.deserialize(data)\n",
    "jax.export.deserialize": "from jax.export import deserialize\n",
    "jax's private export": "import jax._src.export.serialization as s\n",
    "serialize_executable": "from jax.experimental import serialize_executable\n",
    "jaxapi.deserialize": "from coursekit.compat.jaxapi import deserialize\n",
    "jaxapi module": "from coursekit.compat import jaxapi\nf = jaxapi.deserialize(b, 'x')\n",
    "jaxapi.exported": "from coursekit.compat.jaxapi import exported\n",
    "checking.sealed": "from coursekit.checking import sealed\np = sealed.program(T, n)\n",
    "checking.sealed by importlib": "import importlib\n"
                                    "importlib.import_module('coursekit.checking.sealed')\n",
    "programs.rebuild": "from coursekit.checking.programs import rebuild\n",
    "authoring": "import coursekit.authoring.sealed\n",
    "a program's path": "data = open('../tests/sealed/x.bin', 'rb').read()\n",
    "a program's suffix": "import glob\nfiles = glob.glob('**/*.jaxexport')\n",
    "a program's name": "name = 'train_replay'\n",
    "a folder called sealed": "from pathlib import Path\np = Path(T) / 'sealed' / n\n",
}
CLEAN = ('"""Trains like the sealed replay the checker holds: train_replay.jaxexport."""\n'
         "import jax\nsealed_off = 'a sealed envelope'\nx = jax.numpy.ones(3)\n")


@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_route_to_a_program_is_refused_at_every_stage(route):
    for project, stages in forbidden.STAGES.items():
        for stage in range(1, stages + 1):
            found = forbidden.scan(ROUTES[route], forbidden.rules_for(project, stage))
            assert found and all(f.rule.kind == "sealed" for f in found), (project, stage)


def test_prose_and_other_words_are_not_a_route():
    for project in forbidden.STAGES:
        assert forbidden.scan(CLEAN, forbidden.RULES[project]) == [], project


def test_the_programs_are_named_by_what_the_copy_holds():
    names = forbidden.sealed_names()
    assert {"fit_replay", "train_replay"} <= names, names
    assert not {"capstone_candidate", "capstone_first_loss"} & names, names  # none left


# ---------------------------------------------------------------------------------------
# The guard of a learner process in a stage run
# ---------------------------------------------------------------------------------------

PROBE = r"""
import json, os, shutil, sys
sys.path.insert(0, {root!r})
import autograder.guard as guard
work, program = {work!r}, {program!r}
got = {{}}
def attempt(name, call):
    try:
        call()
        got[name] = "allowed"
    except PermissionError as e:
        got[name] = "refused" if "autograder sandbox" in str(e) else "os: " + str(e)
os.chdir(os.path.dirname(program))
attempt("by its path", lambda: open(program, "rb").read())
attempt("relative", lambda: open(os.path.basename(program), "rb").read())
attempt("os.open", lambda: os.close(os.open(program.encode(), os.O_RDONLY)))
attempt("copied", lambda: shutil.copy(program, os.path.join(work, "copy.bin")))
attempt("a link to it", lambda: os.symlink(program, os.path.join(work, "made")))
os.chdir(work)
attempt("through a link made before", lambda: open("link.bin", "rb").read())
attempt("through a linked folder", lambda: open("folder/" + os.path.basename(program), "rb").read())
attempt("another file", lambda: open(os.path.join(os.path.dirname(program), "other.txt")).read())
got["violations"] = [w for w, _ in guard.drain_violations()]
print(json.dumps(got))
"""


def probe(tmp_path: Path, policy: dict) -> dict:
    course = tmp_path / "course" / "sealed"
    course.mkdir(parents=True)
    program = course / PROGRAM.name
    shutil.copy(PROGRAM, program)
    (course / "other.txt").write_text("not a program")
    work = tmp_path / "work"
    work.mkdir()
    (work / "link.bin").symlink_to(program)  # made by something the guard does not see
    (work / "folder").symlink_to(course)
    env = {**os.environ, protocol.ENV_GUARD: json.dumps(
        {"allow": [str(tmp_path)], "deny": [], "writable": [str(work)], **policy})}
    done = subprocess.run([sys.executable, "-c", PROBE.format(
        root=str(ROOT), work=str(work), program=str(program))], env=env,
        capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_learner_process_of_a_stage_run_opens_no_program_by_any_path(tmp_path):
    got = probe(tmp_path, {"sealed": [protocol.SEALED_SUFFIX]})
    for name in ("by its path", "relative", "os.open", "copied", "a link to it",
                 "through a link made before", "through a linked folder"):
        assert got[name] == "refused", (name, got)
    assert got["another file"] == "allowed", got
    assert "read-outside" in got["violations"]
    assert "read-outside" in outcomes.REFUSALS  # flagged: the stage scores 0


def test_without_the_stage_runs_policy_the_programs_stay_readable(tmp_path):
    """A notebook's kernel runs the course's programs itself (notebooks 05 and 08)."""
    got = probe(tmp_path, {})
    assert got["by its path"] == got["through a link made before"] == "allowed", got


def test_only_a_stage_runs_policy_hands_the_refusal_to_learner_processes():
    stage = {"deny": [], "allow": [], "writable": [], "result_fd": 7,
             protocol.LEARNER_SEALED: True}
    env = protocol.learner_environment({protocol.ENV_POLICY: json.dumps(stage)})
    guard = json.loads(env[protocol.ENV_GUARD])
    assert guard["sealed"] == [protocol.SEALED_SUFFIX]
    assert "result_fd" not in guard and protocol.LEARNER_SEALED not in guard
    notebook = {k: v for k, v in stage.items() if k != protocol.LEARNER_SEALED}
    env = protocol.learner_environment({protocol.ENV_POLICY: json.dumps(notebook)})
    assert "sealed" not in json.loads(env[protocol.ENV_GUARD])


def test_a_stage_jail_asks_for_it_and_a_notebook_jail_does_not():
    text = (ROOT / "autograder" / "stage.py").read_text()
    assert "learner_sealed=True" in text
    assert "learner_sealed" not in (ROOT / "autograder" / "notebook.py").read_text()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_as_root_the_copys_programs_are_the_checker_groups_alone(tmp_path):
    for rel in ("projects/foundations/tests/sealed/train_replay.jaxexport",
                "projects/foundations/tests/sealed/fit_replay.jaxexport"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(b"program")
    (tmp_path / "projects" / "foundations" / "tests" / "check.py").write_text("")
    fenced = answers.fence_sealed(tmp_path, 4242)
    assert len(fenced) == 2
    for path in fenced:
        st = path.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (0, 4242, 0o640), path
    assert stat.S_IMODE((tmp_path / "projects/foundations/tests/check.py").stat().st_mode) \
        != 0o640


# ---------------------------------------------------------------------------------------
# The checker: locally, and graded as root
# ---------------------------------------------------------------------------------------

REGION_START = "    ### BEGIN SOLUTION stage 3: train_classifier (a fresh key per epoch's shuffle)\n"


def with_train_classifier(body: str) -> list[tuple[str, str]]:
    """Replacements that swap the solution's train_classifier body for ``body``."""
    text = solution("foundations").read_text()
    start = text.index(REGION_START) + len(REGION_START)
    end = text.index("    ### END SOLUTION", start)
    return [(text[start:end], body)]


# the attack the blind reading found: train_classifier runs the checker's own replay
BY_IMPORT = """\
    import numpy as np
    from coursekit.compat.jaxapi import deserialize
    from coursekit.facts import ROOT
    data = (ROOT / "projects/foundations/tests/sealed/train_replay.jaxexport").read_bytes()
    return run_program(deserialize(data, "x"), key, x, y, classes, steps, batch, lr)
"""
# the same with every name built at run time: no reading can follow it
BY_NAME = """\
    import importlib
    import pathlib
    api = importlib.import_module(".".join(["coursekit", "compat", "jax" + "api"]))
    load = getattr(api, "de" + "serial" + "ize")
    folder = pathlib.Path(api.__file__).resolve().parents[2] / "projects" / "foundations"
    name = "train_" + "re" + "play." + "jax" + "export"
    data = (folder / "tests" / ("se" + "aled") / name).read_bytes()
    return run_program(load(data, "x"), key, x, y, classes, steps, batch, lr)
"""
RUN_PROGRAM = '''

def run_program(program, key, x, y, classes, steps, batch, lr):
    import numpy as np
    cpu = jax.devices("cpu")[0]
    args = (jax.random.key_data(key), np.asarray(x, np.float32), np.asarray(y, np.int32),
            np.int32(steps), np.float32(lr), np.bool_(False), np.zeros(batch, np.int8),
            np.zeros(classes, np.int8), np.bool_(False))
    with jax.default_device(cpu):
        out = program.call(*(jax.device_put(a, cpu) for a in args))
    return {k: jnp.asarray(v) for k, v in out.items()}
'''


def attacker(tmp_path: Path, name: str, body: str) -> Path:
    path = plant(tmp_path, "foundations", name, with_train_classifier(body))
    path.write_text(path.read_text() + RUN_PROGRAM)
    return path


def check(impl: Path, *args: str) -> dict:
    out = impl.with_suffix(".json")
    done = subprocess.run([sys.executable, str(ROOT / "projects/foundations/tests/check.py"),
                           "--stage", "3", "--impl", str(impl), "--json", str(out),
                           "--seed", "1", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)
    return {"stdout": done.stdout + done.stderr,
            "results": {r["check_id"]: r for r in json.loads(out.read_text())["results"]}}


@pytest.mark.slow
def test_locally_a_file_that_names_the_route_fails_with_a_named_finding(tmp_path):
    result = check(attacker(tmp_path, "sealed-by-import", BY_IMPORT), "--fail-fast")
    first = next(iter(result["results"].values()))
    assert first["status"] == "fail", result["stdout"]
    yours = str(first["yours"])  # the lines found, as the record prints them
    assert "coursekit.compat.jaxapi.deserialize" in yours, first
    assert "train_replay.jaxexport" in yours, first
    assert forbidden.WHY["sealed"] in first["hint"], first
    assert "Traceback" not in result["stdout"]


@pytest.mark.slow
def test_locally_the_route_by_built_names_is_refused_while_it_runs(tmp_path):
    """Out of any reading's reach (the scan finds nothing), the route is refused while it
    runs, locally too: the learner process's reach guard holds its checker's project
    wherever the file lives (before, a file outside projects/ ran unguarded here and the
    route passed the replay; only the grader refused it)."""
    impl = attacker(tmp_path, "sealed-by-name", BY_NAME)
    assert forbidden.scan(impl, forbidden.rules_for("foundations", 3)) == []
    result = check(impl, "--only", "train_follows_key_protocol")
    got = result["results"]["train_follows_key_protocol"]
    assert got["status"] in ("fail", "error"), result["stdout"]
    assert "reached coursekit.compat.jaxapi.deserialize" in result["stdout"], result["stdout"]


# Graded as root by the real grader's sandboxed stage run (tests/stage_batch.py), each
# stage with the check that shows what it needs: stage 3's check the route aims at
# (test_locally_the_route_by_built_names_is_refused_while_it_runs), stage 2's that runs the checker's own
# replay of a sealed program (which the fence must leave to the checker).
TRAIN = ("foundations", 3, ["train_follows_key_protocol"])
REPLAY = ("foundations", 2, ["fit_follows_key_protocol"])


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_graded_the_route_by_built_names_scores_0_and_is_named(tmp_path):
    if sandbox.isolation() != "namespaces":
        pytest.skip("needs root with namespaces (what CI and a real grading node have)")
    subs = tmp_path / "subs"
    stub = "    raise NotImplementedError('not written')\n"
    files = {"a_sealed_by_name": attacker(tmp_path, "sealed-by-name", BY_NAME),
             "b_control": plant(tmp_path, "foundations", "control", with_train_classifier(stub)),
             "c_honest": solution("foundations")}
    for student, impl in files.items():
        target = subs / student / "projects" / "foundations" / "starter" / "model.py"
        target.parent.mkdir(parents=True)
        shutil.copy(impl, target)
    from stage_batch import grade
    rows = grade(tmp_path, [(s, subs / s, TRAIN) for s in files] +
                 [(s, subs / s, REPLAY) for s in ("a_sealed_by_name", "c_honest")])
    for student in ("a_sealed_by_name", "c_honest"):  # stage 2's replay: the checker's own
        got = rows[(student, "foundations/stage-2")]
        assert got["status"] == "pass" and got["points"] == got["max_points"] > 0, got
    item = "foundations/stage-3"
    attack, control, honest = (rows[(s, item)] for s in files)
    assert honest["status"] == "pass" and honest["points"] == honest["max_points"] > 0, honest
    assert control["points"] < control["max_points"], control  # the check the route gains
    assert attack["points"] == 0 <= control["points"], (attack["points"], control["points"])
    assert attack["status"] == "error" and attack["reason"] == "read-outside", attack
    assert "train_replay.jaxexport" in attack["message"] and "sealed" in attack["message"], \
        attack["message"]

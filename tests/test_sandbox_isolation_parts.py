"""The parts issue 44's isolation is built from, each on its own and fast (the attacks
through the real grader: ``test_grader_isolation_attacks.py``): the key syscalls refused,
uids never handed out twice, any folder tree removed, a stale sandbox folder that will
not go reported while grading goes on, shared memory a process holds but RSS misses
counted, and a run's cgroup counting it too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder import cgroups, cleanup, sandbox, shared_memory, uids

sys.path.insert(0, str(Path(sandbox.__file__).parent))  # as jail.py loads it
import jail_keys  # noqa: E402

KEYS = """
import ctypes, errno, os, sys
sys.path.insert(0, sys.argv[1])
import jail_keys
libc = ctypes.CDLL(None, use_errno=True)
add_key, keyctl = {"x86_64": (248, 250), "aarch64": (217, 219)}[os.uname().machine]
jail_keys.no_keys()
if libc.syscall(add_key, b"user", b"course-44-test", b"x", 1, ctypes.c_int(-3)) != -1:
    sys.exit(1)
if ctypes.get_errno() != errno.EPERM:
    sys.exit(2)
if libc.syscall(keyctl, 0, ctypes.c_int(-4), 0) != -1:  # KEYCTL_GET_KEYRING_ID
    sys.exit(3)
print(open("/proc/self/status").read().count("Seccomp:\t2"))
"""


def test_a_sandboxed_process_can_make_find_or_read_no_kernel_key():
    if os.uname().machine not in ("x86_64", "aarch64"):
        pytest.skip("key syscall numbers known for x86_64 and aarch64 only")
    folder = str(Path(jail_keys.__file__).parent)
    done = subprocess.run([sys.executable, "-I", "-c", KEYS, folder], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "1"), done.stderr[-1000:]


def test_a_block_of_uids_is_never_handed_out_twice(tmp_path, monkeypatch):
    monkeypatch.setenv(uids.REGISTRY_ENV, str(tmp_path / "uids.sqlite"))
    draws = iter([7, 7, 8, 9])  # the same block drawn twice, then others
    monkeypatch.setattr(uids.secrets, "randbelow", lambda n: next(draws))
    first = uids.draw(owner=4242)
    second = uids.draw(owner=4243)
    assert first.base == uids.BASE + 7 * uids.BLOCK and second.base == uids.BASE + 8 * uids.BLOCK
    assert uids.owner_of(first.learner_uids[1]) == 4242
    assert uids.uids_of({4243}) == set(range(second.base, second.base + uids.BLOCK))
    # a block one of whose uids owns something now (a process, a kernel key) is skipped
    monkeypatch.setattr(uids, "uids_in_use", lambda: {uids.BASE + 10 * uids.BLOCK + 5})
    draws2 = iter([10, 11])
    monkeypatch.setattr(uids.secrets, "randbelow", lambda n: next(draws2))
    assert uids.draw().base == uids.BASE + 11 * uids.BLOCK


def deep_tree(root: Path, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY)
    for i in range(depth):
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        if i % 500 == 0:
            os.close(os.open("f", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=inner))
        os.close(fd)
        fd = inner
    os.close(fd)


@pytest.fixture
def fast_tmp():
    """A temp folder on a tmpfs where there is one (rmdir on this disk takes ms)."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    folder = Path(tempfile.mkdtemp(prefix="course-44-", dir=base))
    yield folder
    cleanup.remove_tree(folder)


def test_any_folder_tree_is_removed(fast_tmp):
    tree = fast_tmp / "tree"
    tree.mkdir()
    deep_tree(tree, 3000)  # shutil.rmtree: RecursionError, then paths past PATH_MAX
    (tree / "locked").mkdir()
    (tree / "locked" / "f").write_text("x")
    os.chmod(tree / "locked", 0)
    assert cleanup.remove_tree(tree) == ""
    assert not tree.exists()


def test_a_stale_folder_is_swept_or_reported_and_grading_goes_on(fast_tmp, monkeypatch,
                                                                  capsys):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    dead = gone.pid
    monkeypatch.setattr(tempfile, "tempdir", str(fast_tmp))
    deep = fast_tmp / f"autograder-{dead}-deep"
    stuck = fast_tmp / f"autograder-{dead}-stuck"
    for folder in (deep, stuck):
        folder.mkdir()
    deep_tree(deep, 3000)
    real = cleanup.remove_tree
    monkeypatch.setattr(sandbox, "remove_tree",
                        lambda p: "Device or resource busy" if Path(p) == stuck else real(p))
    assert sandbox.sweep_stale() == 1
    assert not deep.exists() and stuck.exists()
    assert f"{stuck}: Device or resource busy" in capsys.readouterr().err


HOLD = """
import os, sys, time
fd = os.memfd_create("course-44-test")
block = b"x" * (1 << 20)
for _ in range(int(sys.argv[1])):
    os.write(fd, block)
print("held", flush=True)
time.sleep(60)
"""


def test_shared_memory_a_process_holds_is_counted_without_a_cgroup():
    # a fresh interpreter (a fork of this one would carry its resident pages along)
    child = subprocess.Popen([sys.executable, "-I", "-c", HOLD, "96"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        rss = shared_memory._status_kb(child.pid, ("VmRSS",))["VmRSS"]
        assert rss < 64 << 20  # what the old watchdog saw
        assert shared_memory.run_bytes([child.pid]) >= 96 << 20
    finally:
        child.kill()
        child.wait()


@pytest.mark.skipif(not cgroups.available(), reason="no writable v1 memory+pids cgroups")
def test_a_run_cgroup_counts_shared_memory_and_is_removed():
    group = cgroups.RunCgroups(memory_mb=512, max_tasks=64)
    child = subprocess.Popen([sys.executable, "-I", "-c", "import sys; sys.stdin.readline()\n"
                              + HOLD, "96"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    try:
        for path in group.paths.values():  # joined before it writes anything
            (path / "cgroup.procs").write_text(str(child.pid))
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "held"
        assert group.memory_bytes() >= 96 << 20
        assert group.tasks() == 1 and group.oom_kills() == 0
    finally:
        assert group.remove() == []  # kills what is left, then removes it
        child.wait()
    assert not any(p.exists() for p in group.paths.values())


PROBE = r"""
import json, os, signal, sys
from coursekit.checking import spawn
from coursekit.checking.wire import protocol
report = {"checker": [os.getuid(), os.getgroups()]}
r, w = os.pipe()
child = [sys.executable, "-c", "import json, os, sys, time; print(json.dumps("
         "[os.getuid(), os.getgid(), os.environ['HOME'], os.environ.get('AG_SPAWNER')]), "
         "flush=True); time.sleep(60)"]
env = protocol.learner_environment(os.environ)
procs = [spawn.launch(child, env, stdout=w) for _ in range(2)]
os.close(w)
with os.fdopen(r) as out:
    report["learners"] = [json.loads(out.readline()) for _ in procs]
procs[0].send_signal(signal.SIGTERM)
procs[1].kill()
report["codes"] = [p.wait(timeout=10) for p in procs]
shared = spawn.learner_folder(os.path.join(os.environ["HOME"], "shared"))
report["shared"] = [os.stat(shared).st_gid, oct(os.stat(shared).st_mode & 0o7777)]
print(json.dumps(report))
"""


@pytest.mark.skipif(sandbox.isolation() != "namespaces", reason="needs root and namespaces")
def test_the_spawner_starts_each_learner_process_as_its_own_uid():
    namespaces, identity = sandbox.mode_identity()
    with sandbox.SandboxDir(identity.checker) as box:
        sandbox.copy_course(sandbox.ROOT, box.course, [])  # coursekit, no project
        work = box.writable("work", mode=0o711)
        jail = sandbox.Jail(box, [sys.executable, "-c", PROBE], uid=identity.checker,
                            cwd=work, namespaces=namespaces, identity=identity,
                            hide=[sandbox.ROOT])
        outcome = sandbox.run(jail)
    assert outcome.returncode == 0, outcome.stderr[-2000:]
    seen = json.loads(outcome.stdout.strip().splitlines()[-1])
    assert seen["checker"] == [identity.checker, [identity.learner_gid]]
    (uid0, gid0, home0, fd0), (uid1, gid1, home1, fd1) = seen["learners"]
    assert identity.checker not in (uid0, uid1) and uid0 != uid1
    assert uid0 in identity and uid1 in identity and gid0 == gid1 == identity.learner_gid
    assert home0 != home1 and fd0 is None and fd1 is None  # no spawner socket passed on
    assert seen["codes"] == [-signal.SIGTERM, -signal.SIGKILL]
    assert seen["shared"] == [identity.learner_gid, "0o2770"]


def test_what_the_learner_wrote_is_taken_once_from_the_folder_it_was_given(tmp_path):
    from coursekit.checking import frozen
    from coursekit.checking.errors import CheckFailed
    given, elsewhere = tmp_path / "given", tmp_path / "checker"
    (given / "run").mkdir(parents=True)
    elsewhere.mkdir()
    (given / "run" / "t.json").write_text("{}")
    (given / "run" / "x.pb").write_bytes(b"\0")
    (elsewhere / "reference.json").write_text('{"the": "checker\'s"}')
    (given / "run" / "link.json").symlink_to(elsewhere / "reference.json")
    copy = frozen.copy_once(given / "run", tmp_path / "taken", inside=given)
    assert sorted(p.name for p in copy.iterdir()) == ["t.json", "x.pb"]  # no link followed
    (given / "run" / "t.json").write_text('{"rewritten": true}')  # after it was taken
    assert (copy / "t.json").read_text() == "{}"
    assert {e["path"] for e in frozen.TAKEN[-2:]} == {str(given / "run" / "t.json"),
                                                     str(given / "run" / "x.pb")}
    for outside in (elsewhere / "reference.json", given / "run" / "link.json"):
        with pytest.raises(CheckFailed, match="not in the folder it was given"):
            frozen.read_once(outside, inside=given)


def test_the_graders_own_python_path_reaches_the_run_and_the_hidden_course_does_not(
        tmp_path, monkeypatch):
    """A machine whose image puts JAX on PYTHONPATH (the TPU machine's) grades with it:
    the run's PYTHONPATH keeps the guard and the course copy first and adds the grader's
    folders after them; a folder inside (or above) a hidden path is never added."""
    image, course = tmp_path / "opt-jax", tmp_path / "course"
    image.mkdir()
    (course / "sub").mkdir(parents=True)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(image), str(course / "sub"), str(tmp_path), str(tmp_path / "missing")]))
    assert sandbox.installed_python_paths([course]) == [image.resolve()]

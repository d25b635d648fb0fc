"""The bridge between a checker and the learner process: values cross as data (arrays of
every dtype, pytrees, handles for anything else), learner errors and crashes come back
named, and the learner process cannot reach the checker's secrets."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from coursekit.checking import bridge
from coursekit.checking.bridge import Handle, LearnerProcess, RemoteModule, Workload
from coursekit.checking.errors import LearnerCodeError, LearnerProcessDied, TamperEvidence
from coursekit.checking.learner import get_function, load_impl, require_written
from coursekit.checking.zygote import Zygotes

LEARNER = '''
import ctypes
import os
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np


def echo(value):
    return value


def tree(x):
    return {"a": [x, (x * 2, None)], "b": np.float32(3.5), "c": jnp.asarray(x, jnp.bfloat16),
            "d": jnp.float32(2.0)}


class AlwaysEqual:
    def __eq__(self, other):
        return True


def hostile():
    return AlwaysEqual()


def type_of(value):
    return type(value).__name__


def divide(a, b):
    return a / b


def segfault():
    ctypes.string_at(0)


def secrets_seen(checker_pid):
    seen = {"env": sorted(k for k in os.environ if k.startswith("AG_"))}
    for name in ("mem", "environ", "fd/0"):
        try:
            with open(f"/proc/{checker_pid}/{name}", "rb") as f:
                f.read(16)
            seen[name] = "read"
        except OSError as err:
            seen[name] = type(err).__name__
    return seen


def write_fd(fd):
    try:
        os.write(fd, b"PASS")
        return "written"
    except OSError:
        return "OSError"


def unwritten_stub(x, *, y, z=3):
    """A starter's stub: its body only raises."""
    raise NotImplementedError("stage 9: unwritten_stub")


def works_then_raises(x):
    x = x + 1
    raise NotImplementedError("stage 9: after some work")


def call_twice(fn, x):
    fn(x)
    return fn(x)


def runtime_chatter(x):
    # what an accelerator runtime does while it starts and runs: log lines on fd 1 and 2,
    # some shaped like the start of a frame
    os.write(1, b"AGB1\\x05\\x00\\x00\\x00 runtime line on stdout\\n")
    os.write(2, b"W0000 runtime warning on stderr\\n")
    return x


def matmul_precision():
    import jax
    return str(jax.config.jax_default_matmul_precision)


def forge():
    # every descriptor this process holds: pass_fds keeps the checker's fd numbers, which
    # in a pytest worker with many files open can be anywhere (CI saw them above 30)
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):
        if fd <= 2:
            continue
        try:
            os.write(fd, b'{"kind": "done"}\\n')
        except OSError:
            pass
    return "written"
'''


@pytest.fixture(scope="module", params=["cold", "forked"])
def learner(request, tmp_path_factory):
    """Every test below on a learner process started cold (check.py, the grader) and on
    one forked by a warm zygote (the planted runner, ``coursekit.checking.zygote``)."""
    path = tmp_path_factory.mktemp("bridge") / "model.py"
    path.write_text(LEARNER)
    os.environ["AG_TOKEN"] = "not-for-learners"
    read_fd, secret_fd = os.pipe()
    os.set_inheritable(secret_fd, True)
    if request.param == "forked":
        bridge.FORK_FROM = Zygotes(fork_first=True)
    process = LearnerProcess(path)
    try:
        yield process, process.module(), secret_fd
    finally:
        os.environ.pop("AG_TOKEN", None)
        process.close()
        os.close(read_fd)
        os.close(secret_fd)
        zygotes, bridge.FORK_FROM = bridge.FORK_FROM, None
        if zygotes is not None:
            assert zygotes.forked >= 2 and zygotes.cold == 0, vars(zygotes)
            zygotes.close()


def test_arrays_and_pytrees_round_trip(learner):
    _, impl, _ = learner
    x = jnp.arange(6.0).reshape(2, 3)
    out = impl.tree(x)
    assert isinstance(out["a"][1], tuple) and out["a"][1][1] is None
    np.testing.assert_array_equal(np.asarray(out["a"][1][0]), np.asarray(x) * 2)
    assert type(out["a"][0]) is type(x)  # a jax array comes back as one
    assert out["c"].dtype == jnp.bfloat16 and out["c"].shape == (2, 3)
    assert type(out["b"]) is np.float32 and out["b"] == 3.5
    assert out["d"].shape == () and float(out["d"]) == 2.0
    value = {"s": "x", "i": 3, "f": float("inf"), "n": None, "l": [1, [2, (3,)]],
             "nd": np.arange(5, dtype=np.int16), "bf": np.ones((2, 2), jnp.bfloat16),
             "empty": np.zeros((0, 3), np.float32),
             "keyed": {0: "a", (1, 2): [3], None: 1.5, "s": {2: 2}}}
    back = impl.echo(value)
    assert back.keys() == value.keys() and back["l"] == [1, [2, (3,)]]
    assert back["keyed"] == value["keyed"] and type(list(back["keyed"])[1]) is tuple
    for key in ("nd", "bf", "empty"):
        assert back[key].dtype == value[key].dtype and back[key].shape == value[key].shape
        np.testing.assert_array_equal(back[key], value[key])


def test_other_objects_stay_behind_as_handles(learner):
    _, impl, _ = learner
    handle = impl.hostile()
    assert isinstance(handle, Handle) and handle.type_name == "AlwaysEqual"
    assert handle != 1 and handle != handle.__class__  # identity only, no hostile __eq__
    assert impl.type_of(handle) == "AlwaysEqual"  # passed back, the real object is used
    with pytest.raises(TypeError):
        float(handle)


def test_learner_errors_name_file_line_function(learner):
    _, impl, _ = learner
    with pytest.raises(LearnerCodeError) as err:
        impl.divide(1, 0)
    assert err.value.kind == "exception"
    assert "model.py, line" in str(err.value) and "in divide" in str(err.value)
    assert "ZeroDivisionError" in str(err.value) and err.value.exc_type == "ZeroDivisionError"
    with pytest.raises(LearnerCodeError, match="`nothing_here` is missing"):
        get_function(impl, "nothing_here")


def test_an_unwritten_stub_is_named_before_any_call(learner, tmp_path):
    """require_written raises, before a check prepares anything, exactly what a call of
    a starter's stub raises; a function that does anything before its raise, a written
    one, or a file whose NotImplementedError is something else, is left to its call."""
    process, impl, _ = learner
    with pytest.raises(LearnerCodeError) as early:
        require_written(impl, "echo", "unwritten_stub")
    with pytest.raises(LearnerCodeError) as called:
        impl.unwritten_stub(1, y=2)
    assert early.value.kind == called.value.kind == "not-implemented"
    assert str(early.value) == str(called.value) and "in unwritten_stub" in str(early.value)
    assert early.value.hint == called.value.hint
    require_written(impl, "echo", "works_then_raises", "divide")  # their calls decide
    with pytest.raises(LearnerCodeError, match="`nothing_here` is missing"):
        require_written(impl, "nothing_here")
    # imported here (no learner process): the same answers
    here = tmp_path / "here.py"
    here.write_text(LEARNER)
    module = load_impl(here)
    with pytest.raises(LearnerCodeError) as local:
        require_written(module, "unwritten_stub")
    assert str(local.value).replace("here.py", "model.py") == str(called.value)
    require_written(module, "works_then_raises")
    shadowed = tmp_path / "shadowed.py"
    shadowed.write_text("NotImplementedError = ValueError\n\n\ndef f(x):\n"
                        "    raise NotImplementedError('stage 1: f')\n")
    require_written(load_impl(shadowed), "f")  # raises a ValueError when called: no stub
    odd = tmp_path / "odd.py"
    odd.write_text("def g(x):\n    raise NotImplementedError('stage 1: g')\n\n\n"
                   "g.__signature__ = 5\n")
    require_written(load_impl(odd), "g")  # a signature it cannot read: left to the call
    # the learner process's report is data: anything but a not-yet error is ignored
    for junk in (["unwritten_stub"], {"echo": "x"}, {"echo": {"kind": "exception"}}):
        remote = RemoteModule(process, ["echo"], junk)
        assert remote.__unwritten__ == {}
        require_written(remote, "echo")


def test_a_crash_is_named_and_the_next_call_works(learner):
    process, impl, _ = learner
    first = process.pid
    with pytest.raises(LearnerProcessDied, match=r"died \(SIGSEGV\) while running segfault"):
        impl.segfault()
    assert impl.echo(7) == 7 and process.pid != first


def test_workload_facts_come_back_named(learner):
    _, impl, _ = learner
    workload = Workload("performance-audit/stage1", scale=1.0)
    impl.call_twice(workload, jnp.ones((9, 9), jnp.float32))
    facts = dict(workload.facts)
    # call 0 is not waited for: its 9x9 output may or may not be ready at call 1
    # (tests/test_call_probe.py pins that fact down on a long program)
    assert facts.pop("unready_at_next_call") in ([], [0])
    began, returned = facts.pop("began_at"), facts.pop("returned_at")
    assert began[0] <= returned[0] <= began[1] <= returned[1]  # stamped in call order
    assert facts == {"calls": 2, "compiled_at": [0], "compiles": 1}


def test_learner_process_reaches_no_secret(learner):
    """No channel secret in its environment; the checker's memory, environment and fds
    unreadable (non-dumpable); an inheritable fd of the checker (as the result channel is
    in the runner) is not open in the learner process."""
    _, impl, secret_fd = learner
    seen = impl.secrets_seen(os.getpid())
    assert seen["env"] == []  # no AG_TOKEN, AG_POLICY, AG_BRIDGE...
    assert seen["mem"] == seen["environ"] == seen["fd/0"] == "PermissionError"
    assert impl.write_fd(secret_fd) == "OSError"


def test_writing_to_the_bridge_outside_the_protocol_is_tamper_evidence(learner):
    process, impl, _ = learner
    with pytest.raises(TamperEvidence, match="outside the protocol"):
        impl.forge()
    assert impl.echo("fresh") == "fresh"  # a fresh learner process


def test_runtime_bytes_on_stdout_and_stderr_are_not_tamper_evidence(learner):
    """A TPU runtime writes to fd 1 and 2 of the process that holds the chip: the bridge
    is neither, so only bytes written to the bridge itself are tamper evidence."""
    process, impl, _ = learner
    first = process.pid
    assert impl.runtime_chatter(3) == 3 and process.pid == first


def test_requests_from_two_threads_are_served_in_turn(learner):
    """Two checker threads using one learner process (on a chip, one warming train_slow
    there while another runs gain_sweep): each request's frame and its answer go through
    unmixed, where the chip run read one thread's bytes in the other's frame."""
    import threading
    process, impl, _ = learner
    first = process.pid
    big = np.arange(300_000, dtype=np.float32)
    errors, results = [], []

    def calls(k):
        try:
            for i in range(15):
                results.append(float(impl.echo(big + (k * 100 + i))[0]) == k * 100 + i)
        except Exception as err:  # noqa: BLE001 - collected and asserted below
            errors.append(err)
    threads = [threading.Thread(target=calls, args=(k,), daemon=True) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "requests mixed up: a thread hangs"
    assert not errors, errors
    assert len(results) == 45 and all(results) and process.pid == first


def test_a_process_gone_before_its_handle_existed_is_named(tmp_path):
    """A learner process that died while no handle of it was held (another thread had
    already reaped it, or it never started) is named as died, not an AttributeError."""
    process = LearnerProcess(tmp_path / "model.py")
    process.rfd, process.wfd = os.pipe()
    died = process._died("running train_fast")
    assert isinstance(died, LearnerProcessDied) and "train_fast" in str(died)


def test_bridge_descriptors_are_moved_off_stdout_and_stderr():
    """A bridge pipe handed over as fd 1 or 2 moves above them, and the low number then
    points at /dev/null, so a runtime's log lines cannot land in a frame."""
    import subprocess
    code = (
        "import os\n"
        "from coursekit.checking.learner_server import off_stdio\n"
        "r, w = os.pipe()\n"
        "os.dup2(w, 1); os.close(w)\n"
        "moved = off_stdio(1)\n"
        "os.write(1, b'runtime chatter')\n"
        "os.write(moved, b'frame')\n"
        "os.close(moved)\n"
        "assert os.read(r, 100) == b'frame'\n"
        "assert off_stdio(7) == 7\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert done.returncode == 0, done.stderr


def test_a_kernel_serving_the_checks_gives_them_float32_matmuls(tmp_path):
    """A notebook kernel that holds the chip serves the check's learner side on a thread
    (coursekit.checking.attached): those calls get the float32 matmul precision a learner
    process of their own opens the chip with (on a TPU the default multiplies float32 in
    bfloat16 passes: the chip run's train_fast was 13.3x the contract's error there)."""
    import jax

    from coursekit.checking.attached import serve_for_check
    from coursekit.checking.learner_server import MATMUL_PRECISION
    from coursekit.checking.wire import protocol
    path = tmp_path / "model.py"
    path.write_text(LEARNER)
    served = serve_for_check(path)
    os.environ[protocol.ENV_ATTACH] = served.env()[protocol.ENV_ATTACH]
    process = LearnerProcess(path)
    try:
        assert process.module().matmul_precision() == MATMUL_PRECISION
    finally:
        os.environ.pop(protocol.ENV_ATTACH, None)
        process.close()
        served.finish()
    assert str(jax.config.jax_default_matmul_precision) != MATMUL_PRECISION  # this thread


FORGED_COUNTS = """

_real_time_fn = time_fn


def time_fn(fn, *args, warmup=2, iters=10, **kw):
    m = _real_time_fn(fn, *args, warmup=0, iters=1, **kw)  # two real calls
    fn._facts[None]["calls"] = 1 + warmup + iters  # the counter lives here: forge it
    m.update(warmup=warmup, iters=iters,
             samples_s=[m["first_call_s"] * (1 + 0.01 * i) for i in range(iters)])
    return m
"""


def test_forged_self_reports_are_tamper_evidence(tmp_path):
    """A time_fn that edits the call counter the learner process holds, and invents
    samples: the counts and times contradict what the checker measured around the call."""
    sys.path.insert(0, str(Path(__file__).parent))
    from helpers import run_checker, solution
    impl = tmp_path / "model.py"
    impl.write_text(solution("performance-audit").read_text() + FORGED_COUNTS)
    result = run_checker("performance-audit", impl, "1", tmp=tmp_path,
                         only="first_call_reported_apart")
    [record] = result["json"]["results"]
    assert record["status"] == "error", record
    assert record["message"].startswith("tamper-evidence: time_fn:"), record


def test_the_runner_starts_the_learner_process_with_the_declared_devices():
    """sharded-training declares its 8 CPU devices in check.py, where the runner reads them
    before check.py is imported; the harness keeps an early process that has them and
    stops one that does not."""
    from coursekit import protocol
    from coursekit.checking import bridge
    from coursekit.facts import ROOT, use_cpu_devices
    tests = ROOT / "projects" / "sharded-training" / "tests"
    declared = protocol.declared_cpu_devices((tests / "check.py").read_text())
    harness = (tests / "sharded_harness.py").read_text()
    assert declared == 8 and f"N_DEVICES = {declared}\n" in harness
    assert protocol.declared_cpu_devices("x = 1\n# LEARNER_CPU_DEVICES = 4\n") is None
    wanted = use_cpu_devices(8, {"XLA_FLAGS": ""})
    right = LearnerProcess("right.py", env=wanted)
    wrong = LearnerProcess("wrong.py", env={"XLA_FLAGS": ""})
    bridge._PRESTARTED.update({right.impl_path: right, wrong.impl_path: wrong})
    try:
        assert bridge.discard_prestarted_unless(wanted) == 1
        assert list(bridge._PRESTARTED) == [right.impl_path]
    finally:
        bridge._PRESTARTED.clear()

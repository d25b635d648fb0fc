"""The command line every project's check.py shares (coursekit.checking.contract), on a
toy checker: --only picks checks, --fail-fast stops at the first check that does not pass
(what make mutants runs), and the exit status follows the verdict."""

from __future__ import annotations

from coursekit.checking.contract import Checker, CheckFailed


def toy() -> Checker:
    checker = Checker("toy", {1: "one"})

    @checker.check(1, "first")
    def first(impl, ctx):
        pass

    @checker.check(1, "second")
    def second(impl, ctx):
        if impl.value() != 2:
            raise CheckFailed("wrong value", yours=impl.value(), expected=2)

    @checker.check(1, "third")
    def third(impl, ctx):
        pass
    return checker


def run(tmp_path, capfd, value: int, *flags: str) -> tuple[int, str]:
    impl = tmp_path / "model.py"
    impl.write_text(f"def value():\n    return {value}\n")
    capfd.readouterr()
    code = toy().main(["--stage", "1", "--impl", str(impl), "--seed", "1", *flags])
    return code, capfd.readouterr().out


def test_fail_fast_stops_at_the_first_failure(tmp_path, capfd):
    code, text = run(tmp_path, capfd, 3, "--fail-fast")
    assert code == 1 and "FAIL stage 1 · second" in text and "third" not in text
    assert text.strip().splitlines()[-1] == "1 passed, 1 failed"
    code, text = run(tmp_path, capfd, 3)  # without it every check runs
    assert code == 1 and "PASS stage 1 · third" in text


def test_fail_fast_on_a_right_file_runs_everything(tmp_path, capfd):
    code, text = run(tmp_path, capfd, 2, "--fail-fast")
    assert code == 0 and text.strip().splitlines()[-1] == "3 passed, 0 failed"


def test_only_runs_the_named_checks(tmp_path, capfd):
    code, text = run(tmp_path, capfd, 3, "--only", "first,third")
    assert code == 0 and "second" not in text


def test_a_memory_error_stops_its_stage_not_the_next(tmp_path, capfd):
    """Each later check of the stage would call the learner's code again and wait for the
    same MemoryError (under load that ran a memory bomb into the grader's wall-clock
    limit); they are named as not run, and the next stage runs as usual."""
    checker = Checker("toy", {1: "one", 2: "two"})
    for name in ("a", "b", "c"):
        checker.check(1, name)(lambda impl, ctx: impl.grab())
    checker.check(2, "d")(lambda impl, ctx: impl.fine())
    calls = tmp_path / "calls"
    impl = tmp_path / "model.py"
    impl.write_text(f"def grab():\n    open({str(calls)!r}, 'a').write('x')\n"
                    "    raise MemoryError('Unable to allocate 128. MiB')\n\n"
                    "def fine():\n    return 1\n")
    capfd.readouterr()
    code = checker.main(["--stage", "all", "--impl", str(impl), "--seed", "1"])
    text = capfd.readouterr().out
    assert code == 1 and calls.read_text() == "x", text
    assert "MemoryError: Unable to allocate" in text
    assert text.count("not run: your code ran out of memory (MemoryError) in a") == 2, text
    assert "PASS stage 2 · d" in text and text.strip().splitlines()[-1] == "1 passed, 3 failed"

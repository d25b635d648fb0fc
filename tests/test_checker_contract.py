"""The command line every project's check.py shares (coursekit.checking.contract), on a
toy checker: --only picks checks, --fail-fast stops at the first check that does not pass
(what make mutants runs), and the exit status follows the verdict."""

from __future__ import annotations

from coursekit.checking.contract import Checker
from coursekit.checking.errors import CheckFailed


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


def graded_toy() -> Checker:
    """One public check, one that needs instructor-only code, one that fails."""
    from coursekit.checking.graded import instructor_module
    answers = instructor_module("not_in_any_copy")  # an Absent stand-in everywhere

    checker = Checker("toy", {1: "one"})
    checker.check(1, "public")(lambda impl, ctx: impl.value())
    checker.check(1, "needs_answers")(lambda impl, ctx: answers.reference(impl.value()))

    @checker.check(1, "wrong")
    def wrong(impl, ctx):
        if impl.value() != 2:
            raise CheckFailed("wrong value", yours=impl.value(), expected=2)
    return checker


def run_graded(tmp_path, capfd, value: int, monkeypatch, release: bool):
    from coursekit.checking import graded
    monkeypatch.setattr(graded, "available", lambda: not release)
    impl = tmp_path / "model.py"
    impl.write_text(f"def value():\n    return {value}\n")
    json_path = tmp_path / "out.json"
    capfd.readouterr()
    code = graded_toy().main(["--stage", "1", "--impl", str(impl), "--seed", "1",
                              "--json", str(json_path)])
    import json
    return code, capfd.readouterr().out, json.loads(json_path.read_text())


def test_a_check_needing_instructor_code_is_named_not_failed_in_a_release(
        tmp_path, capfd, monkeypatch):
    """A learner's copy lacks coursekit/instructor: the check that needs it is reported as
    graded by the instructor (its own line, then counted on the last line), never as a
    failure, and the exit status follows the checks that ran."""
    code, text, data = run_graded(tmp_path, capfd, 2, monkeypatch, release=True)
    assert "INSTRUCTOR stage 1 · needs_answers" in text and "FAIL" not in text, text
    assert text.strip().splitlines()[-1].startswith(
        "2 passed, 0 failed; graded by your instructor: 1 check "), text
    assert code == 0
    assert (data["passed"], data["failed"], data["instructor"]) == (2, 0, 1)
    statuses = {r["check_id"]: r["status"] for r in data["results"]}
    assert statuses["needs_answers"] == "instructor"
    code, text, data = run_graded(tmp_path, capfd, 3, monkeypatch, release=True)
    assert code == 1 and "FAIL stage 1 · wrong" in text  # a real failure still fails


def test_only_instructor_checks_is_no_pass(tmp_path, capfd, monkeypatch):
    """A run in which every check was graded by the instructor verified nothing here."""
    from coursekit.checking import graded
    monkeypatch.setattr(graded, "available", lambda: False)
    code, text = run(tmp_path, capfd, 2)  # warm the fixture's output capture
    checker = Checker("toy", {1: "one"})
    answers = graded.instructor_module("not_in_any_copy")
    checker.check(1, "only")(lambda impl, ctx: answers.anything)
    impl = tmp_path / "model.py"
    capfd.readouterr()
    assert checker.main(["--stage", "1", "--impl", str(impl), "--seed", "1"]) == 1
    assert "INSTRUCTOR stage 1 · only" in capfd.readouterr().out


def test_the_learners_own_graded_by_instructor_is_an_error_where_the_code_is_there(
        tmp_path, capfd, monkeypatch):
    """Where the instructor grades, the instructor-only code is there: nothing the checker
    does raises GradedByInstructor, so a learner file that raises it is an error."""
    code, text, data = run_graded(tmp_path, capfd, 2, monkeypatch, release=False)
    statuses = {r["check_id"]: r["status"] for r in data["results"]}
    assert statuses["needs_answers"] == "error" and code == 1, text

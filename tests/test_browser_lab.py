"""The learner's path, tested in a real browser.

JupyterLab 4 (started the way ``make lab`` starts it: ``coursekit.commands.lab``) on a free loopback
port, with the course kernel and nbgrader's lab extension, driven by Playwright in Debian's
Chromium (headless, its own empty profile). The learner version of notebook 01 (the one
``python -m autograder release`` ships, IMPL pointing at a copy of the starter, CI sizes)
is opened, Run All is chosen from the Run menu, and the stage-1 check cell must name each
unwritten function once and say where to start (its checks but the minute-long timing
verdicts of ``first_call_is_compile_and_run``: ``COURSE_CHECK_ONLY``).
Then the reference implementation is put where the learner's code goes (the copy of
``starter/model.py``), only the check cell is run again, and it must say PASS.
Screenshots of both states go to ``build/browser/``.

Needs the ``chromium`` Debian package (``make browser-deps``) and ``playwright`` (pinned;
its bundled driver only: ``playwright install`` is never run). Without Chromium the test
is skipped with the reason, except under CI (``CI`` or ``COURSE_REQUIRE_BROWSER`` set),
where it fails: CI must run it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from autograder.course import list_checks
from coursekit.commands import course
from coursekit.commands.lab import KERNEL_DISPLAY, NBGRADER_LABEXTENSION, LabServer
from coursekit.facts import ROOT  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "01_async_timing.ipynb"
PROJECT = "performance-audit"
SHOTS = ROOT / "build" / "browser"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--no-first-run",
                 "--disable-dev-shm-usage"]  # containers often give /dev/shm only 64 MB
SLOW_CHECKS = {"first_call_is_compile_and_run"}  # 45 s of the 55 s stage 1 takes here
QUICK_STAGE_1 = [c for stage, c, _ in list_checks(ROOT / "projects" / PROJECT / "tests"
                                                   / "check.py")["checks"]
                 if stage == 1 and c not in SLOW_CHECKS]
RUN_TIMEOUT_MS = 180_000  # Run All of the learner notebook at CI sizes on 2 loaded cores
UI_TIMEOUT_MS = 60_000
QUIET_S = 5.0  # idle with no prompt changing this long after Run All: nothing more runs


def _missing(reason: str):
    """Skip on a developer machine; fail under CI, where the browser must be there."""
    if os.environ.get("CI") or os.environ.get("COURSE_REQUIRE_BROWSER"):
        pytest.fail(f"{reason} (CI must run the browser test; `make browser-deps` installs "
                    "it)", pytrace=False)
    pytest.skip(f"{reason}: run `make browser-deps` (scripts/browser-deps: apt-get install "
                "chromium, as root) to test the learner's path in a real browser")


def chromium_executable() -> str:
    for candidate in (os.environ.get("COURSE_CHROMIUM"), "chromium", "chromium-browser"):
        if candidate and (found := shutil.which(candidate)):
            return found
    _missing("Debian's chromium is not installed")


def check_cell_index(nb) -> int:
    found = [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
             and re.search(rf'run_check\(\s*"{PROJECT}"\s*,\s*1\b', c.source)]
    assert found, f"no stage-1 check cell (run_check(\"{PROJECT}\", 1, ...)) in the notebook"
    return found[0]


def write_learner_notebook(src: Path, notebook_dir: Path, impl: Path) -> tuple[Path, int]:
    """The learner version of ``src`` (what the release ships and ``make course --learner``
    executes), parameterised by papermill without executing: CI sizes and IMPL pointing at
    ``impl``. Returns (path, index of the stage-1 check cell)."""
    from papermill.parameterize import parameterize_notebook

    from autograder.nbsource import release_notebook
    released = release_notebook(nbformat.read(src, as_version=4))
    nb = course.learner_version(nbformat.read(src, as_version=4))
    params = course.notebook_parameters(nb, ci=True, learner=True)
    params["IMPL"] = str(impl)
    nb.metadata.setdefault("papermill", {})  # defaults papermill's runner sets first
    for cell in nb.cells:
        cell.metadata.setdefault("tags", [])
    nb = parameterize_notebook(nb, params)
    assert course.without_execution(nb) == course.without_execution(released), \
        "the browser must run the released notebook, plus only papermill's parameters"
    path = notebook_dir / src.name
    nbformat.write(nb, path)
    return path, check_cell_index(nb)


def status_bar_idle(page):
    # The toolbar's execution indicator says idle before any kernel exists; the status
    # bar's "<kernel> | Idle" only once the kernel is up and has nothing queued.
    from playwright.sync_api import expect
    expect(page.locator("#jp-main-statusbar")).to_contain_text(
        re.compile(r"\|\s*Idle"), timeout=RUN_TIMEOUT_MS)


def has_run(prompt: str) -> bool:
    """A code cell's prompt holds its execution count ("[3]"), not "[ ]" or "[*]"."""
    return re.search(r"\[\d+\]", prompt) is not None


def run_all_finished(page) -> None:
    """Run All has ended: every code cell has its execution count, or the kernel has been
    idle for QUIET_S with no prompt changing (a cell that raised without its
    raises-exception tag aborts the rest, which the caller's unrun check names). Neither
    "Idle" nor the absence of "[*]" says it: the kernel reports idle between two queued
    cells, and at the first error reply, a raises-exception stub's included, JupyterLab
    (4.6, runCells) sets every cell not yet run back to "[ ]" while the kernel goes on
    running them (a suite run failed here on a loaded core: six cells still to run)."""
    prompts = page.locator(".jp-CodeCell .jp-InputPrompt")
    status = page.locator("#jp-main-statusbar")
    deadline = time.monotonic() + RUN_TIMEOUT_MS / 1000
    last, quiet_since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = prompts.all_inner_texts()
        if now and all(map(has_run, now)):
            break
        if now != last or not re.search(r"\|\s*Idle", status.inner_text()):
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= QUIET_S:
            break
        page.wait_for_timeout(250)
    status_bar_idle(page)


def unrun_cells(page) -> str:
    """'' when every code cell has an execution count; else which did not, the status
    bar, and the end of the output of the last cell that ran before the first of them
    (a cell that raised aborts the rest; a kernel that restarted clears every prompt)."""
    cells = page.locator(".jp-CodeCell")
    prompts = [cells.nth(i).locator(".jp-InputPrompt").inner_text()
               for i in range(cells.count())]
    unrun = [i for i, p in enumerate(prompts) if not has_run(p)]
    if not unrun:
        return ""
    before = unrun[0] - 1 if unrun[0] else None
    tail = ("" if before is None else
            cells.nth(before).locator(".jp-OutputArea").inner_text()[-800:])
    return (f"code cells (0-based among code cells) {unrun} of {len(prompts)}, prompts "
            f"{[prompts[i] for i in unrun]}; status bar: "
            f"{page.locator('#jp-main-statusbar').inner_text()!r}; output of code cell "
            f"{before}, the last that ran before them:\n{tail}")


def no_dialog(page, when: str) -> None:
    dialogs = page.locator(".jp-Dialog")
    if dialogs.count():
        pytest.fail(f"a JupyterLab dialog blocks the learner {when}: "
                    f"{dialogs.first.inner_text()[:300]!r}", pytrace=False)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_learner_path_in_jupyterlab(tmp_path):
    chromium = chromium_executable()
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pyproject pins it)")

    # The learner's checkout, as far as this notebook needs it: their model.py (the
    # starter) and the notebook, in a folder of the test's own.
    impl = tmp_path / "projects" / PROJECT / "starter" / "model.py"
    impl.parent.mkdir(parents=True)
    shutil.copy(ROOT / "projects" / PROJECT / "starter" / "model.py", impl)
    notebook_dir = tmp_path / "notebooks"
    notebook_dir.mkdir()
    src = NOTEBOOK
    path, check_index = write_learner_notebook(src, notebook_dir, impl)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page_errors: list[str] = []
    started, phases = time.perf_counter(), {}

    def phase(name: str) -> None:
        phases[name] = round(time.perf_counter() - started, 1)

    env = {"COURSE_RECORDS": str(tmp_path / "records"),
           "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'mlflow.db'}",
           # the browser path, not the checker (its tests are the project's): every
           # stage-1 check but the one whose timing verdicts take a minute of the run
           "COURSE_CHECK_ONLY": ",".join(QUICK_STAGE_1)}
    with LabServer(notebook_dir, tmp_path / "lab", env=env) as lab, sync_playwright() as pw:
        phase("server up")
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"), executable_path=chromium, headless=True,
            args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 1000})
        try:
            page = browser.pages[0] if browser.pages else browser.new_page()
            page.on("pageerror", lambda err: page_errors.append(str(err)))
            page.goto(lab.url(f"lab/tree/{path.name}", reset=True))

            # JupyterLab with nbgrader's lab extension loaded and the course kernel.
            config = json.loads(page.locator("#jupyter-config-data").text_content())
            loaded = [e["name"] for e in config.get("federated_extensions", [])]
            assert NBGRADER_LABEXTENSION in loaded, f"nbgrader lab extension not loaded: {loaded}"
            expect(page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Nbgrader$"))
                   ).to_be_visible(timeout=UI_TIMEOUT_MS)
            cells = page.locator(".jp-Notebook .jp-Cell")
            expect(cells.nth(1)).to_be_attached(timeout=UI_TIMEOUT_MS)  # not the placeholder
            expect(cells).to_have_count(len(nbformat.read(path, 4).cells))
            expect(page.locator("#jp-main-statusbar")).to_contain_text(
                KERNEL_DISPLAY, timeout=UI_TIMEOUT_MS)
            status_bar_idle(page)
            no_dialog(page, "on opening the notebook")
            phase("notebook open, kernel idle")

            # Run All, from the Run menu, as a learner does.
            page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
            page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
            check = cells.nth(check_index)
            output = check.locator(".jp-OutputArea")
            expect(output).to_contain_text(re.compile(r"\d+ passed, \d+ failed"),
                                           timeout=RUN_TIMEOUT_MS)
            run_all_finished(page)
            no_dialog(page, "after Run All")
            text = output.inner_text()
            assert "PASS stage" not in text and re.search(r"0 passed, [1-9]\d* failed", text), text
            # one line per unwritten function (not one per check), then where to start
            named = re.findall(r"^not yet: (stage 1: \w+.*) · \S+, line \d+ · ", text, re.M)
            assert named and len(named) == len(set(named)), f"no stage hint:\n{text}"
            assert re.search(r"not yet: start with \w+ \(.*model\.py, line \d+\)", text), text
            assert "hint:     replace" not in text, f"one line per check, not condensed:\n{text}"
            # Run All reached the end: every code cell has an execution count.
            unrun = unrun_cells(page)
            if unrun:
                page.screenshot(path=str(SHOTS / "01-unrun.png"), full_page=True)
            assert not unrun, f"code cells left unrun after Run All:\n{unrun}"
            check.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "01-starter-fail.png"))
            phase("run all done, not yet read")

            # The learner's code goes into their model.py: put the reference there, then
            # run only the check cell again.
            shutil.copy(ROOT / "projects" / PROJECT / "solution" / "model.py", impl)
            check.locator(".jp-InputPrompt").click()
            page.keyboard.press("Control+Enter")
            expect(output).to_contain_text(re.compile(r"[1-9]\d* passed, 0 failed"),
                                           timeout=RUN_TIMEOUT_MS)
            status_bar_idle(page)
            text = output.inner_text()
            assert "PASS stage 1" in text and "FAIL" not in text, text
            check.scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "01-reference-pass.png"))
            phase("check re-run, PASS read")
        finally:
            browser.close()
    phase("closed")
    print(f"browser test phases (s since start, CPU machine): {phases}; notebook: {src.name}")
    assert not page_errors, f"uncaught errors in the page: {page_errors[:5]}"
    for name in ("01-starter-fail.png", "01-reference-pass.png"):
        assert (SHOTS / name).stat().st_size > 10_000, f"{name} looks empty"


# ---------------------------------------------------------------------------------------
# The launch itself (no browser needed): what `make lab` and the test above share
# ---------------------------------------------------------------------------------------

def test_lab_command_loopback_course_kernel_no_news(tmp_path):
    from coursekit.commands import lab
    cmd = lab.lab_command(port=8890, notebook_dir=tmp_path, app_settings_dir=tmp_path / "s",
                          token="abc", port_retries=0)
    assert cmd[1] == "lab" and "--ip=127.0.0.1" in cmd and "--port=8890" in cmd
    assert f"--MultiKernelManager.default_kernel_name={lab.KERNEL}" in cmd
    assert f"--ServerApp.root_dir={tmp_path}" in cmd and "--no-browser" in cmd
    assert "--LabApp.news_url=None" in cmd and "--IdentityProvider.token=abc" in cmd
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)


def test_settings_overrides_name_real_jupyterlab_settings(tmp_path):
    """Every override must name a plugin and a setting that this JupyterLab's schemas
    define, with an allowed value: a renamed setting would silently stop working."""
    import sys

    from coursekit.commands import lab
    path = lab.write_overrides(tmp_path / "app-settings")
    assert json.loads(path.read_text()) == lab.SETTINGS_OVERRIDES
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    for plugin, settings in lab.SETTINGS_OVERRIDES.items():
        package, name = plugin.split(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key, value in settings.items():
            assert key in schema["properties"], f"{plugin} has no setting {key!r}"
            prop = schema["properties"][key]
            if "oneOf" in prop:
                assert value in [o["const"] for o in prop["oneOf"]], (plugin, key, value)
            else:
                assert isinstance(value, {"boolean": bool, "string": str}[prop["type"]])


def test_isolated_env_and_dry_run(tmp_path):
    import subprocess
    import sys

    from coursekit.commands import lab
    env = lab.isolated_env(tmp_path / "home", base={"PATH": "/usr/bin"})
    for var in lab.ISOLATED_DIRS:
        assert Path(env[var]).is_dir() and Path(env[var]).is_relative_to(tmp_path)
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
    port = lab.free_port()
    done = subprocess.run([sys.executable, "-m", "coursekit.commands.lab", "--dry-run", "--port",
                           str(port), "--state-dir", str(tmp_path / "state")],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert f"http://127.0.0.1:{port}/lab" in done.stdout and "jupyter" in done.stdout
    assert (tmp_path / "state" / "app-settings" / "overrides.json").is_file()


# ---------------------------------------------------------------------------------------
# XProf's trace viewer on a course trace (what `make xprof` serves)
# ---------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.timeout(300)
def test_course_trace_in_xprof_trace_viewer(tmp_path):
    """A real ``jax.profiler`` trace with a ``TraceAnnotation`` region, served by the
    ``make xprof`` runner (``coursekit.commands.xprof``) on a free loopback port, opened
    in XProf's Trace Viewer in Chromium. The timeline is drawn on a canvas, so the region
    is found the way a learner finds it: XProf's "Find Events" box, which must count one
    match per step, then the first match selected, whose details panel must name the
    region and give its wall duration equal, to the nanosecond, to our parse of the JSON
    trace. XProf's page asks for Google Charts and fonts from the internet; the trace
    viewer works without them (those requests fail here and are ignored)."""
    import gzip
    import subprocess
    import sys
    import urllib.parse
    import urllib.request

    from test_xprof import write_region_trace

    from coursekit.commands import lab
    from coursekit.measure import traces
    chromium = chromium_executable()
    try:
        from playwright.sync_api import expect, sync_playwright
    except ImportError:
        _missing("the playwright package is not installed (pyproject pins it)")

    region, steps = "xprof_browser_region", 4
    trace_json = write_region_trace(tmp_path / "records" / "traces", region, steps)
    durations = sorted((e["ts"], e["dur"]) for e in traces.load_events(trace_json)
                       if e.get("ph") == "X" and e.get("name") == region)
    assert len(durations) == steps
    first_ns = round(durations[0][1] * 1000)   # our parse of the JSON, in XProf's unit
    port = lab.free_port()
    server = subprocess.Popen([sys.executable, "-m", "coursekit.commands.xprof", "--logdir",
                               str(tmp_path / "records"), "--port", str(port)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              cwd=ROOT)
    base = f"http://127.0.0.1:{port}/data/plugin/profile"
    SHOTS.mkdir(parents=True, exist_ok=True)
    try:
        deadline, runs = time.monotonic() + 120, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(f"{base}/runs", timeout=5) as r:
                    body = r.read()   # XProf gzips its answers whatever was asked
                runs = json.loads(gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body)
                break
            except OSError:
                time.sleep(0.5)
        assert runs, f"XProf did not answer on port {port}: {server.poll()}"
        run = runs[0]
        assert run.endswith(trace_json.parent.name), runs
        query = urllib.parse.urlencode({"run": run, "tag": "trace_viewer@", "host":
                                        trace_json.name.removesuffix(".trace.json.gz")})
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, headless=True,
                                         args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                page.goto(f"{base}/trace_viewer@?{query}")
                viewer = page.frame_locator("iframe")
                find = viewer.locator("input[placeholder='Find Events...']")
                expect(find).to_be_visible(timeout=UI_TIMEOUT_MS)
                expect(viewer.locator("body")).to_contain_text("python",
                                                               timeout=UI_TIMEOUT_MS)
                find.fill(region)
                find.press("Enter")
                expect(viewer.locator("body")).to_contain_text(
                    re.compile(rf"\b0 of {steps}\b"), timeout=UI_TIMEOUT_MS)
                viewer.locator("text=→").first.click()
                details = viewer.locator("body")
                expect(details).to_contain_text("1 item selected", timeout=UI_TIMEOUT_MS)
                text = details.inner_text()
                page.screenshot(path=str(SHOTS / "xprof-trace-viewer-region.png"))
            finally:
                browser.close()
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert re.search(rf"Title\s+{region}\b", text), text[-800:]
    shown = re.search(r"Wall Duration\s+([\d,]+) ns", text)
    assert shown, text[-800:]
    assert int(shown.group(1).replace(",", "")) == first_ns, (shown.group(0), first_ns)
    assert (SHOTS / "xprof-trace-viewer-region.png").stat().st_size > 10_000

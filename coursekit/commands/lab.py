"""JupyterLab for the course: the one launch that ``make lab`` and the browser test share.

    python -m coursekit.commands.lab [--port 8888] [--notebook-dir notebooks] [--isolated DIR]

Starts JupyterLab 4 on 127.0.0.1 with the course kernel as the default kernel, nbgrader's
lab extension enabled, the notebooks folder as its root, and the course's settings
overrides (no news or update toasts, notebooks that open with their kernel already
started, every cell attached to the page). The overrides are JupyterLab *defaults*
(``overrides.json`` in an app-settings folder the course owns): a learner's own settings
still win, and nothing is written into the virtual environment.

``--isolated DIR`` keeps every folder Jupyter writes to (config, data, runtime, user
settings, workspaces, IPython) inside DIR: what a test needs so that nothing of the
machine's own Jupyter state (a saved workspace, a changed setting) leaks in or out.

Before starting it checks the things a newcomer hits first: Python >= 3.12, the course
kernel registered (registers it when missing), nbgrader's lab extension present, and a
port already in use (it says so and takes the next free one).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from coursekit.facts import KERNEL, KERNEL_DISPLAY, ROOT, ensure_kernel

NBGRADER_LABEXTENSION = "@jupyter/nbgrader"
DEFAULT_PORT = 8888

# JupyterLab settings defaults (plugin id -> {setting: value}). Each one removes a popup or
# a race that a newcomer (or a test driving a real browser) would otherwise meet.
SETTINGS_OVERRIDES = {
    # no "would you like to receive Jupyter news?" toast, no update check (no network)
    "@jupyterlab/apputils-extension:notification": {"fetchNews": "false",
                                                    "checkForUpdates": False},
    "@jupyterlab/notebook-extension:tracker": {
        # a notebook opened without kernel metadata starts the default (course) kernel
        # instead of a blocking "Select Kernel" dialog
        "autoStartDefaultKernel": True,
        # every cell attached to the page: outputs of cells out of view render too
        "windowingMode": "none",
    },
}

# Environment variables that point every folder Jupyter writes to somewhere else.
ISOLATED_DIRS = {
    "JUPYTER_CONFIG_DIR": "config",
    "JUPYTER_DATA_DIR": "data",
    "JUPYTER_RUNTIME_DIR": "runtime",
    "JUPYTERLAB_SETTINGS_DIR": "user-settings",
    "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
    "IPYTHONDIR": "ipython",
}


class LabError(Exception):
    """Something that stops JupyterLab from starting, in words a newcomer can act on."""


def write_overrides(app_settings_dir: Path) -> Path:
    """Write ``overrides.json`` (``SETTINGS_OVERRIDES``) into ``app_settings_dir``; the
    folder is what ``--LabApp.app_settings_dir`` is given."""
    app_settings_dir.mkdir(parents=True, exist_ok=True)
    path = app_settings_dir / "overrides.json"
    path.write_text(json.dumps(SETTINGS_OVERRIDES, indent=2) + "\n")
    return path


def isolated_env(home: Path, base: dict | None = None) -> dict:
    """A copy of ``base`` (default ``os.environ``) whose Jupyter folders all sit under
    ``home`` (created), with this interpreter's ``bin`` first on PATH (nbgrader shells
    out to ``alembic``; the kernel must be this environment's)."""
    env = dict(os.environ if base is None else base)
    for var, name in ISOLATED_DIRS.items():
        folder = home / name
        folder.mkdir(parents=True, exist_ok=True)
        env[var] = str(folder)
    return with_venv_path(env)


def with_venv_path(env: dict) -> dict:
    env = dict(env)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    env["JUPYTER_PLATFORM_DIRS"] = "1"  # the future default; silences a deprecation warning
    return env


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def lab_command(*, port: int, notebook_dir: Path, app_settings_dir: Path,
                token: str | None = None, port_retries: int = 50) -> list[str]:
    """The ``jupyter lab`` command line: loopback only, no browser opened by the server,
    the course kernel as default, no news feed. ``token=None`` keeps Jupyter's own random
    token (printed in the URL it logs)."""
    jupyter = Path(sys.executable).with_name("jupyter")
    cmd = [str(jupyter) if jupyter.exists() else "jupyter", "lab",
           "--ip=127.0.0.1", f"--port={port}", f"--ServerApp.port_retries={port_retries}",
           "--no-browser", f"--ServerApp.root_dir={notebook_dir}",
           f"--MultiKernelManager.default_kernel_name={KERNEL}",
           f"--LabApp.app_settings_dir={app_settings_dir}",
           "--LabApp.news_url=None"]
    if token is not None:
        cmd.append(f"--IdentityProvider.token={token}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root; Jupyter refuses otherwise
    return cmd


def check_python() -> None:
    if sys.version_info < (3, 12):  # noqa: UP036 - a 3.11 interpreter must get this message
        raise LabError(f"this course needs Python >= 3.12 (jax 0.12), this is "
                       f"{sys.version.split()[0]} at {sys.executable}; run `make lab`, "
                       "which builds .venv with a suitable Python")




def nbgrader_labextension_dir() -> Path:
    """Where nbgrader's prebuilt lab extension lives; LabError when it is not installed."""
    from jupyter_core.paths import jupyter_path
    for base in jupyter_path("labextensions"):
        candidate = Path(base) / NBGRADER_LABEXTENSION
        if (candidate / "package.json").is_file():
            return candidate
    raise LabError(f"nbgrader's lab extension ({NBGRADER_LABEXTENSION}) is not installed in "
                   f"{sys.prefix}: run `make setup` (pip install -e . installs nbgrader)")


def prepare(state_dir: Path, *, isolated: bool) -> tuple[Path, dict]:
    """Write the settings overrides under ``state_dir`` and build the environment:
    isolated Jupyter folders under ``state_dir`` when ``isolated``. Returns
    (app_settings_dir, env)."""
    check_python()
    ensure_kernel()
    nbgrader_labextension_dir()
    app_settings = state_dir / "app-settings"
    write_overrides(app_settings)
    env = isolated_env(state_dir / "jupyter") if isolated else with_venv_path(dict(os.environ))
    return app_settings, env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.commands.lab",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    parser.add_argument("--notebook-dir", type=Path, default=ROOT / "notebooks")
    parser.add_argument("--state-dir", type=Path, default=ROOT / "build" / "lab",
                        help="where the settings overrides (and, with --isolated, every "
                             "Jupyter folder) go; default build/lab")
    parser.add_argument("--isolated", action="store_true",
                        help="keep Jupyter's config, data, runtime, settings and "
                             "workspaces inside --state-dir")
    parser.add_argument("--dry-run", action="store_true",
                        help="prepare and print the command, do not start JupyterLab")
    args = parser.parse_args(argv)
    try:
        app_settings, env = prepare(args.state_dir.resolve(), isolated=args.isolated)
    except LabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    notebook_dir = args.notebook_dir.resolve()
    if not notebook_dir.is_dir():
        print(f"error: notebook folder {notebook_dir} does not exist", file=sys.stderr)
        return 1
    port = args.port
    if not port_free(port):
        nxt = next((p for p in range(port + 1, port + 51) if port_free(p)), None)
        if nxt is None:
            print(f"error: ports {port}-{port + 50} are all in use on 127.0.0.1; pick "
                  "another with `make lab LAB_PORT=NNNN`", file=sys.stderr)
            return 1
        print(f"note: port {port} is in use (another JupyterLab? `jupyter server list` "
              f"shows yours); using {nxt}")
        port = nxt
    cmd = lab_command(port=port, notebook_dir=notebook_dir, app_settings_dir=app_settings)
    print(f"JupyterLab 4 on http://127.0.0.1:{port}/lab (the URL with its token follows), "
          f"kernel '{KERNEL_DISPLAY}', notebooks in {notebook_dir}. Ctrl-C stops it.")
    print(" ".join(cmd), flush=True)
    if args.dry_run:
        return 0
    if shutil.which(cmd[0], path=env["PATH"]) is None and not Path(cmd[0]).exists():
        print("error: `jupyter` is not installed in this environment: run `make setup`",
              file=sys.stderr)
        return 1
    os.execvpe(cmd[0], cmd, env)
    return 0  # not reached


class LabServer:
    """A JupyterLab server started in its own process group on a free loopback port,
    with a known token and isolated Jupyter folders (what the browser test drives).

        with LabServer(notebook_dir, state_dir, env={"COURSE_RECORDS": ...}) as lab:
            page.goto(lab.url("lab/tree/01_async_timing.ipynb", reset=True))
    """

    def __init__(self, notebook_dir: Path, state_dir: Path, *, env: dict | None = None,
                 startup_timeout: float = 90.0):
        self.notebook_dir = Path(notebook_dir).resolve()
        self.state_dir = Path(state_dir).resolve()
        self.extra_env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.token = secrets.token_hex(16)
        self.port = 0
        self.proc: subprocess.Popen | None = None
        self.log_path = self.state_dir / "jupyterlab.log"

    def url(self, path: str = "lab", *, reset: bool = False) -> str:
        query = ("reset&" if reset else "") + f"token={self.token}"
        return f"http://127.0.0.1:{self.port}/{path.lstrip('/')}?{query}"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def start(self) -> LabServer:
        import time
        import urllib.error
        import urllib.request
        app_settings, env = prepare(self.state_dir, isolated=True)
        env.update(self.extra_env)
        self.port = free_port()
        cmd = lab_command(port=self.port, notebook_dir=self.notebook_dir,
                          app_settings_dir=app_settings, token=self.token, port_retries=0)
        log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     cwd=self.notebook_dir, start_new_session=True)
        log.close()
        deadline = time.monotonic() + self.startup_timeout
        status = f"http://127.0.0.1:{self.port}/api/status?token={self.token}"
        while True:
            if self.proc.poll() is not None:
                raise LabError(f"JupyterLab exited with status {self.proc.returncode} "
                               f"before answering:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(status, timeout=2) as reply:
                    if reply.status == 200:
                        return self
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise LabError(f"JupyterLab did not answer on port {self.port} within "
                               f"{self.startup_timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        """SIGTERM to the server's own process group (the server shuts its kernels
        down), SIGKILL to what is left after 15 s."""
        import signal
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        except ProcessLookupError:
            pass

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


if __name__ == "__main__":
    sys.exit(main())

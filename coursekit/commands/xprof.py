"""XProf on the learner's own traces, on loopback only: what ``make xprof`` runs.

    python -m coursekit.commands.xprof [--logdir DIR] [--port 8791]

The traces the notebooks write sit under the course records (``build/learner`` or
``$COURSE_RECORDS``): notebook 02 in ``traces/02_trace_reading``, the readiness review in
``readiness/<time>/traces``. XProf finds every ``plugins/profile/<time>/`` below the folder
it serves, so the default serves the whole records folder.

``xprof --logdir`` listens on every interface and starts a gRPC worker on port 50051 for
distributed processing. This runner uses XProf's own plugin and WSGI server (xprof 2.24.2,
pinned) but binds 127.0.0.1 and starts no gRPC worker: one machine's traces convert
locally, and nothing is offered to the network.
"""

from __future__ import annotations

import argparse
import socket
import sys
from pathlib import Path

from coursekit.facts import records_dir

DEFAULT_PORT = 8791
HOST = "127.0.0.1"


def trace_folders(logdir: Path) -> list[Path]:
    """Every ``plugins/profile/<time>/`` under ``logdir`` that holds an ``.xplane.pb``."""
    return sorted({p.parent for p in Path(logdir).glob("**/plugins/profile/*/*.xplane.pb")})


def free_port(start: int) -> int:
    """``start`` when nothing listens there, else the next free port."""
    for port in range(start, start + 50):
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError:
                continue
            return port
    raise SystemExit(f"error: no free port in {start}-{start + 49} on {HOST}")


def make_app(logdir: Path):
    """XProf's WSGI application (its profile plugin on ``logdir``)."""
    try:
        from xprof import server
        from xprof.profile_plugin_loader import ProfilePluginLoader
    except ImportError as err:
        raise SystemExit(f"error: xprof is not installed ({err}): run `make setup` (it "
                         "installs the pinned xprof)") from None
    context = server.TBContext(str(logdir), server.DataProvider(str(logdir)),
                               server.TBContext.Flags(False))
    context.hide_capture_profile_button = True   # nothing to capture from: traces on disk
    context.enable_tab_name_label = False
    context.src_prefix = None
    return server.make_wsgi_app(ProfilePluginLoader().load(context))


def serve(logdir: Path, port: int) -> None:
    from cheroot import wsgi
    httpd = wsgi.Server((HOST, port), make_app(logdir))
    try:
        httpd.start()
    except KeyboardInterrupt:
        httpd.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.commands.xprof",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--logdir", type=Path, default=None,
                        help="folder to serve (default: the course records, build/learner)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT)
    args = parser.parse_args(argv)
    logdir = (args.logdir or records_dir()).resolve()
    if not logdir.is_dir() or not trace_folders(logdir):
        what = "no such folder" if not logdir.is_dir() else "no profiler trace in it yet"
        print(f"error: {logdir}: {what}. Write a trace first: run notebook 02 "
              "(notebooks/02_trace_reading.ipynb, in `make lab`), or any "
              "jax.profiler.trace(<folder>) under it, then `make xprof` again.")
        return 1
    port = free_port(args.port)
    folders = trace_folders(logdir)
    print(f"XProf on http://{HOST}:{port}/ (Ctrl-C stops it): {len(folders)} trace(s) "
          f"under {logdir}")
    print("open the Trace Viewer tool for the timeline; on CPU XProf's op-level tools "
          "(op_profile, hlo_stats, roofline_model) are empty: they read device planes")
    sys.stdout.flush()
    serve(logdir, port)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A check cell in a notebook whose kernel holds the accelerator.

One process at a time can hold a TPU, and a notebook kernel that ran a JAX cell holds it,
so a check cell's learner process could not open the chip. Instead the kernel serves the
learner side itself: ``serve_for_check(impl)`` starts a learner server
(``coursekit.checking.learner_server.Server``) on a thread of the kernel, importing the
learner's file afresh, and hands ``check.py`` the two pipe ends through
``ENV_ATTACH``; the checker's bridge takes them as its learner process
(``bridge.LearnerProcess.start``). The checker still runs in its own process on the CPU.

What this cannot do: a check that needs another process on the chip (a fresh-process
rerun, a fresh-process peak) cannot have it while the kernel holds it; such a check says
so (INCONCLUSIVE, naming the held chip), and the same check run from a terminal decides it.
This is the learner's own machine, not grading: the kernel is the learner's process.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from coursekit.checking.wire import protocol


def holds_accelerator_here() -> bool:
    """Whether this process has opened a JAX backend other than the CPU."""
    from coursekit.checking.learner_server import open_backend
    backend = open_backend()
    return backend is not None and backend != "cpu"


class Served:
    """The kernel's side of one check run: the server thread and the checker's pipe ends
    (to pass to check.py, then ``handed_over`` once it started)."""

    def __init__(self, impl: Path):
        from coursekit.checking.learner_server import Server
        to_server_r, self.to_server_w = os.pipe()
        self.from_server_r, from_server_w = os.pipe()
        self.server = Server(Path(impl), to_server_r, from_server_w)
        self._own = (to_server_r, from_server_w)
        self.thread = threading.Thread(target=self._serve, name="course-learner-server",
                                       daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        import jax

        from coursekit.checking.learner_server import MATMUL_PRECISION
        try:
            # the checks' float32 as in a learner process of its own (open_accelerator),
            # on this thread only: the kernel's own cells keep their setting
            with jax.default_matmul_precision(MATMUL_PRECISION):
                self.server.serve()
        except (OSError, EOFError):
            pass
        finally:
            for fd in self._own:
                try:
                    os.close(fd)
                except OSError:
                    pass

    @property
    def fds(self) -> tuple[int, int]:
        return self.to_server_w, self.from_server_r

    def env(self) -> dict:
        return {protocol.ENV_ATTACH: f"{self.to_server_w},{self.from_server_r}"}

    def handed_over(self) -> None:
        """check.py has its copies: close ours, so its exit ends the server's reads."""
        for fd in self.fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def finish(self, timeout: float = 10.0) -> None:
        self.thread.join(timeout)
        sys.stdout.flush()


def serve_for_check(impl: Path) -> Served:
    return Served(impl)

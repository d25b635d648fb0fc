"""A one-line progress bar with an ETA (a line per result when not on a terminal)."""

from __future__ import annotations

import sys
import time

from autograder.textsafe import line


def _clock(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else \
        f"{seconds // 60}m{seconds % 60:02d}s"


class Progress:
    def __init__(self, total: int, workers: int, stream=sys.stderr, width: int = 24):
        self.total, self.workers, self.stream, self.width = total, workers, stream, width
        self.done = 0
        self.start = time.monotonic()
        self.tty = getattr(stream, "isatty", lambda: False)()

    def update(self, record: dict) -> None:
        self.done += 1
        elapsed = time.monotonic() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        filled = int(self.width * self.done / max(self.total, 1))
        bar = "#" * filled + "." * (self.width - filled)
        text = (f"[{bar}] {self.done}/{self.total}  {_clock(elapsed)} elapsed, "
                f"ETA {_clock(eta)}  | {line(record['student'])} {record['item']}: "
                f"{record['status']} {record['points']:g}/{record['max_points']:g}")
        if self.tty:
            self.stream.write("\r\x1b[2K" + text[:200])
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

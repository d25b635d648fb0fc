"""Small matplotlib helpers the notebooks share: readable log axes and the CPU label."""

from __future__ import annotations

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter


def plain_log(ax, axis: str = "x") -> None:
    """Log scale with plain numbers (0.1, 1, 10) on the major ticks and no minor labels."""
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(LogLocator(base=10))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


def titled(ax, title: str, label: str) -> None:
    """A title with the honest CPU label under it, in small type."""
    ax.set_title(f"{title}\n{label}", fontsize=9)

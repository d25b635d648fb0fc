"""The corpus figure of a stage, as ``make mistakes`` prints it and ``make mutants`` shows
it beside its mutation score (apart from both, so neither imports the other)."""

from __future__ import annotations

import json
from pathlib import Path

from coursekit.facts import ROOT


def figure(t: dict) -> str:
    """One stage's corpus figure: ``9 of 10 learner mistakes caught (90%)``."""
    pct = "n/a" if t["rate"] is None else f"{100 * t['rate']:.0f}%"
    text = f"{t['caught']} of {t['total']} learner mistakes caught ({pct}"
    justified = len(t["missed"]) - t["unjustified"]
    return text + (f"; {justified} justified)" if justified else ")")


def corpus_figure(project: str, stage: int, root: Path = ROOT) -> str | None:
    """The stage's figure from the last corpus report, for ``make mutants``; None when
    there is none."""
    path = Path(root) / "build" / f"mistakes-{project}" / "report.json"
    try:
        t = json.loads(path.read_text())["stages"].get(str(stage))
    except (OSError, ValueError, KeyError):
        return None
    return figure(t) + f" [run {t['run_at']}]" if t else None

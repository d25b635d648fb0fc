"""The corpus figure of a stage, as ``make mistakes`` prints it and ``make mutants`` shows
it beside its mutation score (apart from both, so neither imports the other)."""

from __future__ import annotations

import json
from pathlib import Path

from coursekit.facts import ROOT


def percent(rate) -> str:
    return "n/a" if rate is None else f"{100 * rate:.0f}%"


def figure(t: dict) -> str:
    """One stage's corpus figure, the blind mistakes' beside the rest's: ``19 of 20
    learner mistakes caught (95%); blind 9 of 10 (90%), hints name 8 of 9, own 10 of 10
    (100%)``."""
    text = f"{t['caught']} of {t['total']} learner mistakes caught ({percent(t['rate'])}"
    justified = len(t["missed"]) - t["unjustified"]
    text += f"; {justified} justified)" if justified else ")"
    if "blind" not in t:  # a report from before the blind corpus
        return text
    blind, own = t["blind"], t["own"]
    blind_text = (f"blind {blind['caught']} of {blind['total']} ({percent(blind['rate'])}"
                  f"{new_files(blind)})" if blind["total"] else "blind: none judged")
    return (text + f"; {blind_text}{naming(blind)}, own {own['caught']} of {own['total']} "
            f"({percent(own['rate'])}){naming(own)}")


def new_files(part: dict) -> str:
    """``; 6 new files, 6 caught``: the blind mistakes that are not an earlier mistake's
    very file, and how many of those were caught; "" in a report from before the count or
    when every one is new."""
    if "new" not in part or part["new"] == part["total"]:
        return ""
    files = "file" if part["new"] == 1 else "files"
    return f"; {part['new']} new {files}, {part['new_caught']} caught"


def naming(part: dict) -> str:
    """``, hints name 8 of 9``: of the caught mistakes that declare the phrases naming
    them, how many the checks' words name; "" when none declares any."""
    judged = part.get("hints_judged")
    return f", hints name {part['hints_naming']} of {judged}" if judged else ""


def corpus_figure(project: str, stage: int, root: Path = ROOT) -> str | None:
    """The stage's figure from the last corpus report, for ``make mutants``; None when
    there is none."""
    path = Path(root) / "build" / f"mistakes-{project}" / "report.json"
    try:
        t = json.loads(path.read_text())["stages"].get(str(stage))
    except (OSError, ValueError, KeyError):
        return None
    return figure(t) + f" [run {t['run_at']}]" if t else None

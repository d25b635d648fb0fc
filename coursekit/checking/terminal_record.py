"""A learner's check run from a terminal counts like one from a notebook's check cell.

``check.py`` on the learner's own starter file writes its result, in the ``--json``
format the portfolio already reads, to ``<records>/checks/terminal-<project>-stage<N>.json``
(``coursekit.facts.records_dir``: ``$COURSE_RECORDS`` or build/learner). Not for other
files (a reference solution, a mutant, a planted bug: those are not the learner's
evidence), not under the grader (its guard's policy variables are set), and not for the
check cell's own child process (``COURSE_CHECK_FROM_CELL``: the cell keeps its record
itself). A folder that cannot be written changes nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from coursekit.checking.tally import counts
from coursekit.checking.wire import protocol
from coursekit.facts import ROOT, records_dir

FROM_CELL_ENV = "COURSE_CHECK_FROM_CELL"


def learners_own(project: str, impl: Path) -> bool:
    """Is ``impl`` the learner's starter file of ``project`` in this course folder?"""
    try:
        return Path(impl).resolve() == (ROOT / "projects" / project / "starter" /
                                        "model.py").resolve()
    except OSError:
        return False


def keep_terminal_record(project: str, impl: Path, stages: list[int], payload: dict) -> \
        Path | None:
    """Write ``payload`` (``write_json``'s content) per stage; returns the last path."""
    if (os.environ.get(FROM_CELL_ENV) or os.environ.get(protocol.ENV_POLICY)
            or os.environ.get(protocol.ENV_GUARD) or not learners_own(project, impl)):
        return None
    written = None
    for stage in stages:
        results = [r for r in payload["results"] if r["stage"] == stage]
        if not results:
            continue
        part = {**payload, "stages": [stage], "results": results, "source": "terminal",
                **counts(results)}
        path = records_dir() / "checks" / f"terminal-{project}-stage{stage}.json"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(part, indent=1, default=str))
            written = path
        except OSError:
            return None
    return written

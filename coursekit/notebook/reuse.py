"""Check cells answered from a run already made of exactly that check: the same checker
code, the same learner file, the same stage.

Two makers, one reader:

* the grader hands each notebook it grades the stages it has just graded for the same
  submission (``graded_payload``, written where the kernel may read and not write): a
  notebook's check cells are the project checks run again, and the grader has the
  sandboxed result already, so a class's notebooks no longer cost a second grading of
  every project;
* the test suite shares its one sandboxed grading of the reference and one run of each
  starter, ``make course`` its part-1 run of each project and ``make accelerator`` its
  projects part's run of each solution, its learner on the device
  (``share_reference_result``);
* a check cell finds either through ``$COURSE_CHECK_REUSE`` (``reusable_result``), after
  hashing the file it was asked to check itself: a learner file changed since it was
  graded, or another checker, finds nothing and the cell runs the checker.

Learners running their notebooks never have the variable set; ``make course`` and ``make
accelerator`` set it for their notebooks only, to the stages their own project part has
just passed.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path

from coursekit.checking.contract import CheckResult, print_result
from coursekit.checking.tally import counts, exit_status, summary_line
from coursekit.facts import ROOT, checker_fingerprint

REUSE_ENV = "COURSE_CHECK_REUSE"
# The line a reused answer ends with, after check.py's own summary line.
SHARED_SOURCE = "shared run of this test session"
GRADED_MARK = "the grader's own run of this file"
GRADED_SOURCE = GRADED_MARK + ", graded as stage {stage}"


# The checker fingerprints of the course copy a graded folder's records were keyed on,
# written beside them by the grader: a learner process cannot read every checker file
# (the instructor-only ones are the checker's alone), so it reads the grader's figure.
FINGERPRINTS = "fingerprints.json"


def reuse_key(project: str, stage: int | str, impl: Path, root: Path = ROOT,
              fingerprint: str | None = None) -> str:
    """Same checker code (under ``root``, or its ``fingerprint`` as the grader computed
    it), same learner file, same stage: the same run."""
    digest = hashlib.sha256(Path(impl).read_bytes()).hexdigest()[:16]
    fingerprint = fingerprint or checker_fingerprint(root, project)
    return f"{project}-stage{stage}-{digest}-{fingerprint[:16]}"


COURSE_SOURCE = "this make course run's project check of the same file, part 1"


def share_reference_result(folder: Path, project: str, impl: Path, payload: dict, *,
                           passed_only: bool = True, source: str = SHARED_SOURCE,
                           passing: tuple = ("pass",)) -> list:
    """Keep, per stage, a ``check.py --json`` result for ``reusable_result``: ``make
    course`` and ``make accelerator`` (their project part's stages that passed whole, for
    their notebooks) and the test suite: the reference's stages that passed completely
    (tests/helpers.reference_run; one that failed anywhere is never shared, so its check
    cell runs for real), and every stage of a starter (``passed_only=False``,
    tests/helpers.starter_run: its checks wait for unwritten functions). ``passing``: the
    statuses a kept stage may hold (``make accelerator`` adds "not-applicable": a check
    this machine cannot run says so in the cell exactly as it would running again).
    Returns the stages kept."""
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for stage in payload.get("stages", []):
        results = [r for r in payload["results"] if r["stage"] == stage]
        if results and (not passed_only or all(r["status"] in passing for r in results)) \
                and (not passed_only or any(r["status"] == "pass" for r in results)):
            part = {**payload, "stages": [stage], "results": results, **counts(results),
                    "source": source}
            (folder / f"{reuse_key(project, stage, impl)}.json").write_text(json.dumps(part))
            kept.append(stage)
    return kept


def graded_payload(record: dict) -> dict:
    """A grader's stage record as the ``check.py --json`` payload of that stage."""
    results = [{"stage": record["stage"], "check_id": c["id"], "status": c["status"],
                "points": c.get("points", 0.0), "max_points": c.get("max_points", 0.0),
                **{k: c.get(k) or "" for k in ("message", "yours", "expected", "hint",
                                                 "evidence")},
                "duration_s": c.get("duration_s", 0.0)} for c in record.get("checks", [])]
    return {"project": record["project"], "stages": [record["stage"]],
            "seed": "the grader's", "versions": record.get("versions", {}),
            "measured_on": record.get("measured_on"),
            **counts(results), "results": results,
            "source": GRADED_SOURCE.format(stage=record["stage"])}


def write_graded(folder: Path, root: Path, records: list[dict]) -> int:
    """Write each graded stage record (with checks) for the check cells of a kernel whose
    course copy is ``root``; the files are keyed on that copy's learner file and checker.
    Returns how many were written."""
    written, fingerprints = 0, {}
    for record in records:
        impl = root / "projects" / record["project"] / "starter" / "model.py"
        if not record.get("checks") or not impl.is_file():
            continue
        if record["project"] not in fingerprints:
            fingerprints[record["project"]] = checker_fingerprint(root, record["project"])
            (folder / FINGERPRINTS).write_text(json.dumps(fingerprints))
            (folder / FINGERPRINTS).chmod(0o644)
        path = folder / f"{reuse_key(record['project'], record['stage'], impl, root)}.json"
        path.write_text(json.dumps(graded_payload(record)))
        path.chmod(0o644)
        written += 1
    return written


def reusable_result(project: str, stage: int | str, impl: Path):
    """(text, returncode, payload) of a run already made of exactly this check, or None
    (``$COURSE_CHECK_REUSE`` unset, or nothing there for this file and checker). The text
    and return code are check.py's for those results, then where they come from."""
    folder = os.environ.get(REUSE_ENV)
    if not folder or not Path(impl).is_file():
        return None
    known = Path(folder) / FINGERPRINTS
    fingerprint = json.loads(known.read_text()).get(project) if known.is_file() else None
    path = Path(folder) / f"{reuse_key(project, stage, impl, fingerprint=fingerprint)}.json"
    if not path.is_file():
        return None
    payload = json.loads(path.read_text())
    out = io.StringIO()
    for r in payload["results"]:
        print_result(CheckResult(**{k: r[k] for k in CheckResult.__dataclass_fields__
                                    if k in r}), out=out)
    out.write(summary_line(payload["results"]) + "\n")
    out.write(f"({payload.get('source', SHARED_SOURCE)})\n")
    returncode = exit_status(payload["results"])
    return out.getvalue(), returncode, payload

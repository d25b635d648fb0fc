"""The temporary working copy one grading run sees, and the settings every run shares.

A copy holds the course's checkers and ``coursekit/`` (never a ``solution/`` folder,
never the gradebook or the secrets) plus the submission's own files, laid out like the
release so that relative paths in notebooks (``../projects/<p>/starter/model.py``) and
``sys.path`` tricks in ``check.py`` work unchanged. Of a submission only the starters'
Python files are copied, within bounds (``autograder.handed_in``); symbolic links are
dropped, never followed, wherever they are (a link to a solution, or a linked
``projects/<p>`` folder leading to another submission's, would otherwise be copied in).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder import answers, handed_in, sandbox


@dataclass
class Settings:
    """Picklable settings shared by every task of a batch (sent to worker processes)."""
    course_root: str
    projects: list[str]                 # every project whose checker goes in the copy
    hide: list[str]                     # course root, submissions, out dir
    limits: dict = field(default_factory=dict)
    cell_timeout: float = 120.0
    isolation: str | None = None        # probed once by the parent
    nb_sizes: str = "ci"                # "ci": notebook metadata course.ci_parameters

    def sandbox_limits(self) -> sandbox.Limits:
        return sandbox.Limits(**self.limits)

    def to_dict(self) -> dict:
        return asdict(self)


def prepare(box: sandbox.SandboxDir, settings: Settings, submission: Path, *,
            checker_group: int | None = None, learner_runs_it: bool = False) -> Path:
    """Fill ``box.course`` with the course copy and the submission. Returns it. The
    instructor-only modules no learner process loads (``autograder.answers``) become the
    ``checker_group``'s alone (a stage run as root, whose learner processes are other
    uids), or are left out when ``learner_runs_it`` (a notebook kernel: the learner's own
    code runs the whole run). In a stage run as root the sealed programs are the
    ``checker_group``'s alone too (``answers.fence_sealed``)."""
    sandbox.copy_course(Path(settings.course_root), box.course, settings.projects)
    if learner_runs_it or checker_group is not None:
        answers.fence(box.course / "coursekit", None if learner_runs_it else checker_group)
    if checker_group is not None and not learner_runs_it:
        answers.fence_sealed(box.course, checker_group)
    handed_in.copy_into(submission, box.course)
    return box.course


def submission_files_hash(submission: Path) -> str:
    """Content hash of everything a project stage reads from a submission (bounded:
    ``autograder.handed_in``; ``HandedInRefused`` past a bound)."""
    return handed_in.files_hash(submission)

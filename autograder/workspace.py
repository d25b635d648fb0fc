"""The temporary working copy one grading run sees, and the settings every run shares.

A copy holds the course's checkers and ``coursekit/`` (never a ``solution/`` folder,
never the gradebook or the secrets) plus the submission's own files, laid out like the
release so that relative paths in notebooks (``../projects/<p>/starter/model.py``) and
``sys.path`` tricks in ``check.py`` work unchanged. Symbolic links in a submission are
dropped, never followed, wherever they are (a link to a solution, or a linked
``projects/<p>`` folder leading to another submission's, would otherwise be copied in).
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from autograder import answers, sandbox
from autograder.submissions import plain_path


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


def _no_links(folder: str, names: list[str]) -> list[str]:
    base = Path(folder)
    return [n for n in names if (base / n).is_symlink() or n == "__pycache__"
            or n.endswith(".pyc")]


def starters(submission: Path) -> list[Path]:
    """Every ``projects/<p>/starter/`` folder of the submission reached without a link."""
    projects = plain_path(submission, "projects")
    if projects is None or not projects.is_dir():
        return []
    found = (plain_path(submission, Path("projects", p.name, "starter"))
             for p in sorted(projects.iterdir()))
    return [s for s in found if s is not None and s.is_dir()]


def copy_submission_projects(submission: Path, dest: Path) -> None:
    """Every ``projects/<p>/starter/`` of the submission into the copy."""
    for starter in starters(submission):
        target = dest / "projects" / starter.parent.name / "starter"
        shutil.copytree(starter, target, ignore=_no_links, dirs_exist_ok=True)


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
    copy_submission_projects(submission, box.course)
    return box.course


def submission_files_hash(submission: Path) -> str:
    """Content hash of everything a project stage reads from a submission."""
    from coursekit.facts import tree_hash
    return tree_hash(starters(submission), submission)

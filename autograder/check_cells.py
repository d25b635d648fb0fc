"""A notebook's check cells answered from the same submission's graded stages.

A course notebook's check cells run its project's ``check.py`` on the learner's file: in
a batch that grades projects and notebooks, every notebook stage was graded twice, once
as a stage and once inside the notebook (notebooks 00-08 hold 19 check cells, which rerun
every stage of every project). The cells score nothing; they show the learner's stage
results beside the notebook's own questions.

So a notebook waits until the stages of its project for that submission are graded in
this batch, and its learner process is handed those records (and any from earlier
batches in the gradebook) whose learner files and checker are the ones graded now
(``coursekit.notebook.reuse``): the check cells print the grader's own sandboxed result,
and a cell whose file has changed since, or that asks for a stage not graded, runs the
checker as before. ``record["check_cells"]`` says how each cell was answered.
"""

from __future__ import annotations

from collections import Counter

from coursekit.notebook.reuse import GRADED_MARK

# Stage records whose checks are the checker's verdicts; never one the grader scored for
# what else the run did (a write outside its folder, a crash, a timeout).
VERDICTS = ("pass", "fail", "inconclusive")


class HeldNotebooks:
    """Notebook tasks held back while stages of their project for the same student are
    still to be graded in this batch; the graded stage records to hand each one."""

    def __init__(self, units: list[dict], earlier: dict[tuple[str, str], dict]):
        """``units``: the batch's work (tasks, or units of several stage tasks);
        ``earlier``: the gradebook's latest rows before the batch ((student, item) ->
        row with its record)."""
        self.open: Counter = Counter()
        for unit in units:
            for task in unit.get("tasks", [unit]):
                if task["kind"] == "stage" and not task["error"]:
                    self.open[task["student"], task["stage"]["project"]] += 1
        self.records = {key: row["record"] for key, row in earlier.items()
                        if row["record"].get("kind") == "stage"}
        self.waiting: list[dict] = []

    def hold(self, unit: dict) -> bool:
        """True (and held) for a notebook whose project's stages are still to come."""
        if unit["kind"] != "notebook" or not unit.get("project") \
                or not self.open[unit["student"], unit["project"]]:
            return False
        self.waiting.append(unit)
        return True

    def graded(self, task: dict, record: dict) -> list[dict]:
        """Note a finished task; the notebooks it was the last one held for."""
        if task["kind"] != "stage":
            return []
        self.records[task["student"], task["item"]] = record
        key = (task["student"], task["stage"]["project"])
        self.open[key] -= 1
        if self.open[key] > 0:
            return []
        free = [t for t in self.waiting if (t["student"], t["project"]) == key]
        self.waiting = [t for t in self.waiting if (t["student"], t["project"]) != key]
        return free

    def release_all(self) -> list[dict]:
        """Whatever is still held (a batch never leaves one: each stage task ends in a
        record, even a grader error's)."""
        free, self.waiting = self.waiting, []
        return free

    def with_stages(self, task: dict) -> dict:
        """The task to run: a notebook gets ``graded_stages``, the records of its
        project's stages for this student graded on these learner files by this checker,
        with a checker's verdict."""
        if task["kind"] != "notebook" or not task.get("project"):
            return task
        stages = [r for (student, _), r in sorted(self.records.items())
                  if student == task["student"] and r.get("project") == task["project"]
                  and r.get("files_hash") == task["submission_files"]
                  and r.get("checker_fp") == task["project_fp"] and r.get("checks")
                  and r.get("status") in VERDICTS]
        return {**task, "graded_stages": stages}


def answered(cells: list) -> dict:
    """How the check cells of an executed notebook were answered: {"from_graded": n,
    "ran": m} (a check cell calls ``run_check``)."""
    counts = {"from_graded": 0, "ran": 0}
    for cell in cells:
        if cell.get("cell_type") != "code" or "run_check(" not in cell.get("source", ""):
            continue
        text = "".join(o.get("text", "") for o in cell.get("outputs", [])
                       if o.get("output_type") == "stream")
        counts["from_graded" if f"({GRADED_MARK}" in text else "ran"] += 1
    return counts

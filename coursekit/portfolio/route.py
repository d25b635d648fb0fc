"""The learner's route: milestones, and the checker stages that are their evidence.

One declarative table. ``coursekit.portfolio.report`` reads it to draw the route map and to say
what remains; nothing else decides what a milestone needs. A milestone is *met* when
every stage behind it passed in the learner's newest check record, *partly* when some
of them did (or passed before and fails now), *not yet* otherwise.

Required route practice versus optional extensions:

* Required: the five milestones an accelerator and performance engineer cannot skip:
  trustworthy numbers (a regression fit with checked gradients, a classifier that
  reruns bitwise), a measured before/after decision backed by a trace (on the learner's
  own optimisation: optimisation stage 4 writes the records it rests on), and a sharded
  run that survives being killed.
* Optional extension, the custom Pallas kernel: on these CPU machines Pallas only runs
  interpreted, so the kernel's timings describe the interpreter, not a kernel; the
  correctness half is worth doing, but nothing on the route depends on it.
* Optional extension, multi-process recovery (``jax.distributed``): it needs several
  processes, free ports and collective timeouts on a shared 2-core machine; the
  single-process fresh-restart recovery already shows that the full state (params,
  optimizer state, PRNG key, step, data position) comes back. The checks of
  sharded-training stage 3 whose id names multi-process work count for the extension,
  not for the required milestones.

A stage's ``checks``/``skip`` are regular expressions on check ids (``re.search``):
``checks`` keeps only matching ids, ``skip`` drops matching ids. Empty means all.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from coursekit.facts import NOTEBOOKS

REQUIRED = "required"
EXTENSION = "extension"

# Check ids of sharded-training stage 3 that belong to the multi-process extension
# (projects/sharded-training/tests/check.py; tests/test_portfolio.py keeps them in step).
MULTI_PROCESS = r"^(distributed_timeouts_set|two_processes_match_one)$|multi[_-]?process"


@dataclass(frozen=True)
class Stage:
    project: str
    stage: int
    title: str
    needs: str            # the evidence a pass stands for, in the learner's words
    checks: str = ""      # regex: only these check ids count here ("" = all)
    skip: str = ""        # regex: these check ids do not count here

    @property
    def label(self) -> str:
        part = " (multi-process checks only)" if self.checks else (
            " (single-process checks)" if self.skip else "")
        return f"{self.project} stage {self.stage}: {self.title}{part}"

    def counts(self, check_id: str) -> bool:
        if self.checks and not re.search(self.checks, check_id):
            return False
        return not (self.skip and re.search(self.skip, check_id))

    def command(self) -> str:
        return (f"python projects/{self.project}/tests/check.py --stage {self.stage} "
                f"--impl projects/{self.project}/starter/model.py")

    def check_cell_notebooks(self, folder: Path = NOTEBOOKS) -> list[str]:
        """The notebooks (by number) whose check cells run this stage, as each notebook's
        ``metadata.course`` declares (project and stages), not the milestone's list."""
        found = []
        for path in sorted(folder.glob("*.ipynb")):
            try:
                course = json.loads(path.read_text()).get("metadata", {}).get("course", {})
            except (OSError, ValueError):
                continue
            if course.get("project") == self.project and self.stage in course.get(
                    "stages", []):
                found.append(path.name.split("_", 1)[0])
        return found


@dataclass(frozen=True)
class Milestone:
    key: str
    title: str
    kind: str                   # REQUIRED or EXTENSION
    notebooks: tuple[str, ...]
    stages: tuple[Stage, ...]
    evidence: str               # what the portfolio shows once it is met
    projects: tuple[str, ...] = ()  # recorded runs of these projects are its evidence

    @property
    def required(self) -> bool:
        return self.kind == REQUIRED


# -- the stages, once each (titles as the checkers declare them) ----------------------

F1 = Stage("foundations", 1, "the edit-check loop",
           "mse agrees with the checker's float64 computation on random odd shapes")
F2 = Stage("foundations", 2, "a regression fit",
           "regression_grads equal the checker's independent gradients; fit_regression "
           "gives bitwise the same parameters again, in a fresh process")
F3 = Stage("foundations", 3, "a reproducible classifier",
           "train_classifier reaches the accuracy bar and reruns bitwise from its key")
PA1 = Stage("performance-audit", 1, "a comparable measurement",
            "time_fn syncs inside every boundary, reports the first call apart, keeps "
            "raw samples and catches a wrong output")
PA2 = Stage("performance-audit", 2, "explain the evidence",
            "a real jax.profiler trace with the annotated region found, FLOPs and bytes "
            "by hand and from the compiler, a roofline with the memory level named")
PA3 = Stage("performance-audit", 3, "test a trade-off",
            "equal gradients with and without remat, then saved residuals, compiler "
            "temp bytes and a fresh-process peak")
PA4 = Stage("performance-audit", 4, "decide what is ready",
            "decide accepts a real speedup and rejects noise, wrong outputs and "
            "incomparable runs")
OP1 = Stage("optimisation", 1, "find it",
            "the limiting phase of a slow training loop named from a real trace, with its "
            "share, the events that show it and Amdahl's ceiling for removing it")
OP2 = Stage("optimisation", 2, "fix it",
            "a faster version within the contract's tolerance on odd shapes, compiling "
            "nothing after its first call, clearly faster in the checker's interleaved "
            "rounds in a fresh process")
OP3 = Stage("optimisation", 3, "where it stops helping",
            "the gain measured over batch sizes, and where it falls below the threshold "
            "predicted before the sweep")
OP4 = Stage("optimisation", 4, "the report",
            "before and after run records with traces, which performance-audit's decide "
            "reads and whose speedup agrees with the checker's")
ST1 = Stage("sharded-training", 1, "mesh and placement",
            "arrays placed on a device mesh as the checker expects")
ST2 = Stage("sharded-training", 2, "count-weighted global updates",
            "a global update weighted by valid counts that matches a single-device "
            "reference")
ST3 = Stage("sharded-training", 3, "fresh-process recovery",
            "a run killed mid-way, restored in a fresh process with params, optimizer "
            "state, PRNG key, step and data position, ending equal to an uninterrupted "
            "run", skip=MULTI_PROCESS)
ST3_MP = Stage("sharded-training", 3, "fresh-process recovery",
               "the same recovery with several jax.distributed processes",
               checks=MULTI_PROCESS)
ST4 = Stage("sharded-training", 4, "trace and timing",
            "a synchronised, trace-backed run record of the sharded step")
PK1 = Stage("pallas-kernel", 1, "independent references",
            "references the checker confirms against its own")
PK2 = Stage("pallas-kernel", 2, "the kernel",
            "the kernel matches the references on odd shapes (interpreted on CPU)")
PK3 = Stage("pallas-kernel", 3, "measured",
            "synchronised timings of kernel and reference, declared interpreted on CPU")

MILESTONES: tuple[Milestone, ...] = (
    Milestone("regression-fit", "A reproducible regression fit with checked gradients",
              REQUIRED, ("00",), (F1, F2),
              "gradients checked against an independent reference; the same fit "
              "bitwise in a fresh process", ("foundations",)),
    Milestone("classifier", "A reproducible classifier", REQUIRED, ("00",), (F3,),
              "a classifier that trains to the bar and reruns bitwise from its key",
              ("foundations",)),
    Milestone("recovery", "An interrupted run restored with its full state", REQUIRED,
              ("05",), (ST3,),
              "a killed run resumed in a fresh process and ending where an "
              "uninterrupted run ends", ("sharded-training",)),
    Milestone("performance-report", "A trace-backed before-and-after performance report",
              REQUIRED, ("01", "02", "03", "04", "07", "08"),
              (PA1, PA2, PA3, PA4, OP1, OP2, OP3, OP4),
              "comparable synchronised measurements, a trace that explains them, a "
              "tested trade-off, the learner's own optimisation (limiting operation found, "
              "fixed within its contract, measured before and after) and a justified "
              "accept/reject", ("performance-audit", "optimisation")),
    Milestone("sharded-experiment", "A resilient sharded training experiment", REQUIRED,
              ("05",), (ST1, ST2, ST3, ST4),
              "a sharded run with correct count-weighted updates, recovery and a "
              "trace-and-timing record", ("sharded-training",)),
    Milestone("custom-kernel", "A measured custom kernel with correctness checks",
              EXTENSION, ("06",), (PK1, PK2, PK3),
              "a Pallas kernel checked against independent references, then measured "
              "(interpreted on CPU: correctness evidence, not kernel speed)",
              ("pallas-kernel",)),
    Milestone("multi-process", "Multi-process recovery with jax.distributed", EXTENSION,
              ("05",), (ST3_MP,),
              "the recovery run with several cooperating processes",
              ("sharded-training",)),
)


def milestone(key: str) -> Milestone:
    for m in MILESTONES:
        if m.key == key:
            return m
    raise KeyError(f"no milestone {key!r}; known: {[m.key for m in MILESTONES]}")


def stages() -> list[Stage]:
    """Every distinct stage the route refers to, in route order."""
    seen, out = set(), []
    for m in MILESTONES:
        for s in m.stages:
            if s not in seen:
                seen.add(s)
                out.append(s)
    return out

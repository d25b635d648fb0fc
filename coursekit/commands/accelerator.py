"""``make accelerator``: the whole course on an accelerator machine, and a report of what
ran, on which device, how it ended and how long it took.

    python3 -m coursekit.commands.accelerator [--part PART[,PART]] [--only TEXT]
        [--impl solution|starter|both] [--stage N] [--resume] [--budget S] [--fresh]
        [--dry-run] [--out DIR] [--notebooks DIR] [--site DIR] [roofline sizes] [time limits]

Runs with a plain ``python3`` from the course root, no venv and no ``make setup``: the
accelerator machine's own JAX (first on PYTHONPATH, kept first), the course root and the
packages of ``--part setup`` added after it. Parts, each run one item after another (one
process at a time can hold a TPU; this process never imports JAX):

  setup        pip-installs what the course needs and the machine lacks into ``--site``
               from the machine's own index (``--index-url``); not part of ``all``
  environment  a probe: backend, device kind, memory, JAX/jaxlib/Python, packages (run
               first whenever the report has none)
  projects     every project's ``check.py --stage all`` on its reference solution (every
               check must pass) and on its starter (every check must say "not yet")
  notebooks    every notebook headless at its CI sizes against the reference solution;
               a check cell of a stage the projects part passed on this file shows
               that run (its learner on the device) and says so (``--no-reuse``: every
               check cell runs its checker, on the CPU beside the kernel holding the chip);
               a notebook whose kernel stays on the CPU (``kernel_platform: cpu``: 05, 08)
               runs in the CPU lane once the projects part is done, its fresh processes
               that open the chip taking turns with the chip's items (``coursekit.chip_turn``)
  roofline     the device's plain-JAX ceilings, its spec, and the reference solution's
               ``measure_peak_flops`` / ``measure_bandwidth`` measured beside them
  report       nothing run: the report rewritten from what was recorded
  all          environment, projects, notebooks, roofline (the default)

Each item is recorded in ``OUT/items/`` as it ends and the report (``OUT/report.json``,
``OUT/report.md``) is rewritten after every item, so a run in parts, or one stopped
halfway, ends in one report; one item's failure is that item's status, never the end of
the run. ``--resume`` skips items already recorded; ``--budget S`` starts no item after
S seconds and cuts the one running then (it is run again by the next ``--resume``), so a
command fits a session of limited length; on the chip an item whose expected time
(``accelerator_estimates``: the last run's) would overrun the budget is not started but
left for the next ``--resume``, and the call goes on with the items that fit (the projects
longest first; a notebook waits with its project). ``--dry-run`` keeps every process on the CPU
with tiny roofline sizes and writes to ``build/accelerator-dry-run``: what ``make test``
runs (tests/test_accelerator_command.py).

Exit status: 0 when everything recorded is as expected (incomplete runs too: the report
lists what has not run), 1 when anything is not, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path

from coursekit import facts, protocol
from coursekit.chip_turn import CHIP_LOCK_ENV, holding_chip
from coursekit.commands import accelerator_estimates as estimates
from coursekit.commands import accelerator_report as report
from coursekit.commands import accelerator_runs as runs
from coursekit.commands.course import discover_notebooks, discover_projects
from coursekit.facts import NOTEBOOKS
from coursekit.notebook.reuse import REUSE_ENV

PARTS = ("setup", "environment", "projects", "notebooks", "roofline", "report", "all")
ALL = ("environment", "projects", "notebooks", "roofline")
IMPLS = ("solution", "starter")
# What the course imports and the accelerator machine's own index has (docs/tpu.md).
SETUP_PACKAGES = ("optax", "orbax-checkpoint", "matplotlib", "nbformat", "ipython",
                  "flatbuffers")
MACHINE_INDEX = "file:///opt/pypi/simple"
MIN_ITEM_S = 30  # with --budget: no item starts with less than this left


class Run:
    """One invocation: where items go, the children's environment, the time budget."""

    def __init__(self, args):
        self.args, self.out = args, Path(args.out).resolve()
        self.items = self.out / "items"
        self.started = time.perf_counter()
        self.deadline = None if args.budget is None else self.started + args.budget
        self.stopped = False
        self.skipped: set[str] = set()  # items left for the next call: would not finish
        self.recording = threading.RLock()
        # set by main: the chip's lock while a CPU lane runs beside the chip's items
        self.chip_lock: Path | None = None
        # the CPU lane's notebooks start once the chip's projects are done (their reuse)
        self.projects_done = threading.Event()
        self.env = runs.child_environment(dry_run=args.dry_run, site=Path(args.site),
                                          records=self.out / "records")

    def notebook_env(self, lane: str = "chip") -> dict:
        """The notebooks' environment: their check cells find the projects part's passed
        stages (``runs.share_with_notebooks``) unless ``--no-reuse``; in the CPU lane, the
        chip's lock for their fresh processes that open the chip."""
        env = dict(self.env)
        if not self.args.no_reuse:
            env[REUSE_ENV] = str(runs.reuse_folder(self.out))
        if lane == "cpu" and self.chip_lock is not None:
            env[CHIP_LOCK_ENV] = str(self.chip_lock)
        return env

    def item_path(self, key: str) -> Path:
        return self.items / f"{key}.json"

    def done(self, key: str) -> bool:
        return self.args.resume and self.item_path(key).exists()

    def time_left(self, limit: float) -> float | None:
        """The limit of the next item, or None when the budget has no room for one."""
        if self.deadline is None:
            return limit
        left = self.deadline - time.perf_counter()
        if left < MIN_ITEM_S and not self.stopped:
            self.stopped = True
            print(f"  --budget {self.args.budget:g} s reached: nothing more starts "
                  "(run again with --resume)", flush=True)
        return None if self.stopped else min(limit, left)

    def would_not_finish(self, key: str, title: str) -> bool:
        """Under ``--budget`` on the chip: whether ``key``'s expected time
        (``accelerator_estimates``) overruns what is left; if so it is left for the next
        ``--resume`` (never started and cut: lost work) and the call goes on."""
        expected = estimates.expected_s(key)
        if self.deadline is None or self.args.dry_run or expected is None:
            return False
        left = self.deadline - time.perf_counter()
        if expected * estimates.MARGIN <= left:
            return False
        self.skipped.add(key)
        print(f"  {title}: left for the next --resume (about {expected:.0f} s on a TPU v5e, "
              f"{left:.0f} s of the budget left)", flush=True)
        return True

    def item(self, key: str, title: str, limit: float, work, lane: str = "chip"
             ) -> dict | None:
        """Run ``work(limit)`` unless resumed or out of budget; record it and rewrite the
        report. An item the budget cut short is not recorded (``--resume`` runs it again).
        A "chip" item holds the chip whole while a CPU lane runs beside it
        (``holding_chip``); the record says which lane it ran in."""
        if self.done(key):
            print(f"  {title}: recorded before (--resume)", flush=True)
            return None
        allowed = self.time_left(limit)
        if allowed is None or self.would_not_finish(key, title):
            return None
        print(f"  {title} ...", flush=True)
        with holding_chip(self.chip_lock if lane == "chip" else None):
            result = runs.stamp({**work(allowed), "lane": lane})
        if result.get("status") == "timeout" and allowed < limit:
            print(f"    cut short by --budget after {result['wall_s']:.0f} s: not recorded",
                  flush=True)
            self.stopped = True
            return None
        with self.recording:  # two lanes may end an item at once
            self.items.mkdir(parents=True, exist_ok=True)
            tmp = self.item_path(key).with_suffix(".tmp")
            tmp.write_text(json.dumps(result, indent=1, default=str))
            tmp.replace(self.item_path(key))
            print(f"    {title}: {one_line(result)}", flush=True)
            self.write_report()
        return result

    def recorded(self) -> list[dict]:
        return [json.loads(p.read_text()) for p in sorted(self.items.glob("*.json"))]

    def write_report(self) -> dict:
        with self.recording:
            return self._write_report()

    def _write_report(self) -> dict:
        projects = [(p, which) for p in discover_projects() for which in IMPLS]
        notebooks = [p.name for p in discover_notebooks("", Path(self.args.notebooks))]
        built = report.build_report(self.recorded(), projects=projects, notebooks=notebooks,
                                    dry_run=self.args.dry_run, command=self.args.command)
        report.write(built, self.out)
        return built


def one_line(item: dict) -> str:
    """What an item came to, in a line."""
    took = f"{item.get('wall_s', 0):.1f} s"
    if item["kind"] == "checks":
        if item["error"]:
            return f"DID NOT RUN: {item['error']} ({took})"
        verdicts = ", ".join(f"stage {k}: {s['verdict']}" for k, s in item["stages"].items())
        return f"{verdicts} ({took}, {report.label_of(item['measured_on'])})"
    if item["kind"] == "notebook":
        stop = item.get("stopped_at")
        ended = "ran to its end" if item.get("ran_to_end") else \
            f"STOPPED at cell {stop['cell']}: {stop['error']}" if stop else "STOPPED"
        return f"{ended}{'; ' + item['error'] if item['error'] else ''} ({took})"
    if item["kind"] == "roofline":
        figures = ", ".join(f"{s['function']} {s['asked'].get('kind', '')} "
                            f"{report.percent(s['ratio'])}".replace("  ", " ")
                            for s in item["solution"])
        errors = "".join(f"; {e}" for e in item["errors"])
        return f"{figures or 'no figures'}{errors} ({took})"
    device = item.get("device")
    return f"{report.label_of(device) if device else item['error']} ({took})"


# -- the parts ---------------------------------------------------------------------------

def part_environment(run: Run, *, only_if_missing: bool) -> None:
    if only_if_missing and run.item_path("environment").exists():
        return
    run.item("environment", "environment probe", run.args.probe_timeout,
             lambda limit: runs.run_probe(run.out, limit, run.env))


def keeps_to_the_cpu(project: str) -> bool:
    """A project whose checker declares CPU devices for its learner processes
    (``LEARNER_CPU_DEVICES``, sharded-training's eight) never computes on the chip."""
    return protocol.declared_cpu_devices(facts.checker_path(project).read_text()) is not None


def lane_of(project: str, which: str) -> str:
    """"cpu" for a run that needs no chip: a project that keeps to the CPU, and every
    starter (its functions raise before computing anything; the checker's own work is on
    the CPU), so their time runs beside the chip's items; else "chip"."""
    return "cpu" if which == "starter" or keeps_to_the_cpu(project) else "chip"


def part_projects(run: Run, lane: str = "chip") -> None:
    """Each project's checks on its solution and starter. ``lane="chip"``: the solutions
    that compute on the device, one after another; ``lane="cpu"``: the runs that need no
    chip (``lane_of``), beside them (``cpu_lane``) with ``JAX_PLATFORMS=cpu`` so none of
    their processes can take the chip; ``lane="all"``: every run in turn (a dry run)."""
    impls = IMPLS if run.args.impl == "both" else (run.args.impl,)
    stage = str(run.args.stage)
    env = {**run.env, "JAX_PLATFORMS": "cpu"} if lane == "cpu" else run.env
    tag = "[cpu lane] " if lane == "cpu" else ""
    found = discover_projects(run.args.only)
    if run.deadline is not None and not run.args.dry_run:  # short ones fill the budget
        found = estimates.longest_first({p: f"checks-{p}-solution-{stage}" for p in found})
    for project in found:
        for which in impls:
            if lane != "all" and lane_of(project, which) != lane:
                continue
            run.item(f"checks-{project}-{which}-{stage}", f"{tag}checks {project} {which} "
                     f"--stage {stage}", run.args.check_timeout,
                     lambda limit, p=project, w=which: runs.run_checker(
                         p, w, stage, run.out, limit, env), lane)


def cpu_lane(run: Run, parts: list[str]) -> threading.Thread | None:
    """What needs no chip, in a thread beside the chip's items (the machine has cores to
    spare, the chip admits one process), so its time no longer adds to the run's: the
    checks of ``lane_of``, then, once the chip's projects are done (a notebook's check
    cells show their runs), the notebooks whose kernel stays on the CPU
    (``notebook_lane``). From here on the chip's items hold the chip's lock
    (``coursekit.chip_turn``). None on a dry run, where every item is on the CPU and the
    cores are few, or when neither part runs."""
    if run.args.dry_run or not {"projects", "notebooks"} & set(parts):
        return None

    def work():
        if "projects" in parts:
            part_projects(run, "cpu")
        if "notebooks" in parts:
            run.projects_done.wait()
            part_notebooks(run, "cpu")

    run.chip_lock = run.out / "chip.lock"
    lane = threading.Thread(target=work, name="cpu-lane", daemon=True)
    lane.start()
    return lane


def course_metadata(path: Path) -> dict:
    """The notebook's ``course`` metadata (its project, its kernel's platform)."""
    import nbformat
    return nbformat.read(path, as_version=4).metadata.get("course", {})


def notebook_lane(path: Path, meta: dict | None = None) -> str:
    """"cpu" for a notebook whose kernel stays on the CPU (its course metadata says
    ``kernel_platform: cpu``: it pins JAX_PLATFORMS before JAX starts and opens the chip
    only from fresh processes, which take their turn), else "chip"."""
    meta = course_metadata(path) if meta is None else meta
    return "cpu" if meta.get("kernel_platform") == "cpu" else "chip"


def part_notebooks(run: Run, lane: str = "chip") -> None:
    """The notebooks of ``lane`` ("all": every one, in turn: a dry run), one after
    another."""
    if not run.args.no_reuse:
        with run.recording:   # both lanes may rebuild the reuse at their start
            reshare_recorded(run)
    for path in discover_notebooks(run.args.only, Path(run.args.notebooks)):
        meta = course_metadata(path)
        if lane != "all" and notebook_lane(path, meta) != lane:
            continue
        project = meta.get("project")
        if f"checks-{project}-solution-{run.args.stage}" in run.skipped:
            print(f"  notebook {path.name}: left for the next --resume with {project}'s "
                  "checks (its check cells show their run)", flush=True)
            continue
        env = run.notebook_env(lane)
        run.item(f"notebook-{path.stem}", f"{'[cpu lane] ' if lane == 'cpu' else ''}"
                 f"notebook {path.name}", run.args.notebook_timeout,
                 lambda limit, p=path, e=env: runs.run_notebook(
                     p, run.out, limit, run.args.cell_timeout, e), lane)


def reshare_recorded(run: Run) -> list[str]:
    """The recorded solution runs' passed stages kept again for the check cells, from their
    results under ``checks/``: a run resumed on a fresh machine with only ``items/`` and
    ``checks/`` brought along keeps its reuse, but only where the solution and checker
    are byte for byte the ones that run checked (its ``reuse_basis``): a result of
    another checker is never shown as this one's. Returns "project:stage" for each."""
    kept = []
    for item in run.recorded():
        if item.get("kind") == "checks" and item.get("impl") == "solution" and \
                item.get("result") and (run.out / item["result"]).is_file():
            impl = facts.ROOT / "projects" / item["project"] / "solution" / "model.py"
            if item.get("reuse_basis") != runs.reuse_basis(item["project"], impl):
                continue
            data = json.loads((run.out / item["result"]).read_text())
            kept += [f"{item['project']}:{s}" for s in
                     runs.share_with_notebooks(run.out, item["project"], impl, data)]
    return kept


def part_roofline(run: Run) -> None:
    a = run.args
    options = ["--sizes", "tiny" if a.dry_run and a.roofline_sizes == "auto" else a.roofline_sizes,
               "--iters", str(a.iters or (3 if a.dry_run else 10)),
               "--rounds", str(a.rounds or (2 if a.dry_run else 3))]
    options += ["--matmul", a.matmul] if a.matmul else []
    options += ["--bytes", a.bytes] if a.bytes else []
    options += ["--fast-dtype", a.fast_dtype] if a.fast_dtype else []
    run.item("roofline", "roofline", a.roofline_timeout,
             lambda limit: runs.run_roofline(run.out, limit, run.env, options))


def installed_in(site: Path) -> set[str]:
    """Distribution names installed in ``site`` (normalised as pip writes them)."""
    from importlib import metadata
    return {d.metadata["Name"].lower().replace("_", "-")
            for d in metadata.distributions(path=[str(site)])} if site.is_dir() else set()


def part_setup(run: Run) -> int:
    """The course's packages from the machine's own index into ``--site`` (a folder: the
    machine's JAX stays first; children find the folder at the end of PYTHONPATH).
    Nothing to do when every one of them is there already."""
    site = Path(run.args.site).resolve()
    if set(SETUP_PACKAGES) <= installed_in(site):
        print(f"  setup: {' '.join(SETUP_PACKAGES)} already in {site}", flush=True)
        return 0
    cmd = [sys.executable, "-m", "pip", "install", "--isolated", "-q", "--upgrade",
           "--only-binary=:all:", "--index-url", run.args.index_url, "--target", str(site),
           *SETUP_PACKAGES]
    print(f"  setup: {' '.join(SETUP_PACKAGES)} into {site} ...", flush=True)
    done = runs.run_child(cmd, "setup", run.out / "logs", run.args.setup_timeout,
                          {**run.env, "PIP_CONFIG_FILE": "/dev/null"})
    print(f"    {done['status']} in {done['wall_s']:.0f} s (log: {run.out / done['log']})"
          + (f": {done['last_error']}" if done["status"] != "ok" else ""), flush=True)
    run.items.mkdir(parents=True, exist_ok=True)  # its time counts in the run's (report: Time)
    run.item_path("setup").write_text(json.dumps(runs.stamp(
        {"kind": "setup", "status": done["status"], "wall_s": done["wall_s"]})))
    run.env = runs.child_environment(dry_run=run.args.dry_run, site=site,
                                     records=run.out / "records")
    return 0 if done["status"] == "ok" else 1


def run_parts(run: Run, measuring: list[str]) -> None:
    """The measuring parts in order on the chip, the CPU lane beside them (``cpu_lane``)."""
    if "projects" not in measuring:
        run.projects_done.set()
    lane = cpu_lane(run, measuring)
    try:
        for part in measuring:
            if part == "projects":
                part_projects(run, "chip" if lane else "all")
                run.projects_done.set()
            elif part == "notebooks":
                part_notebooks(run, "chip" if lane else "all")
            elif part == "roofline":
                part_roofline(run)
    finally:
        run.projects_done.set()   # the CPU lane never waits on a part that stopped
    if lane is not None:
        lane.join()


# -- command line ------------------------------------------------------------------------

def parse(argv: list[str] | None):
    p = argparse.ArgumentParser(prog="python3 -m coursekit.commands.accelerator",
                                description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", default="all",
                   help=f"comma-separated, of {', '.join(PARTS)} (default all)")
    p.add_argument("--only", default="", help="only projects and notebooks whose name "
                   "contains this text")
    p.add_argument("--impl", choices=("solution", "starter", "both"), default="both")
    p.add_argument("--stage", default="all", help="the projects' stage to check (default all)")
    p.add_argument("--resume", action="store_true", help="skip items already recorded")
    p.add_argument("--budget", type=float, help="seconds: start nothing after them")
    p.add_argument("--fresh", action="store_true", help="forget every recorded item first")
    p.add_argument("--no-reuse", action="store_true", help="every notebook check cell runs "
                   "its checker (by default a stage the projects part passed whole on the "
                   "same file is shown from that run)")
    p.add_argument("--dry-run", action="store_true",
                   help="everything on the CPU, tiny roofline sizes (what make test runs)")
    p.add_argument("--out", help="default build/accelerator (build/accelerator-dry-run)")
    p.add_argument("--notebooks", default=str(NOTEBOOKS), help="folder of notebooks to run")
    p.add_argument("--site", default=str(facts.build_dir("accelerator-site")),
                   help="where --part setup installs packages (added to PYTHONPATH's end)")
    p.add_argument("--index-url", default=MACHINE_INDEX, help="the index --part setup uses")
    p.add_argument("--roofline-sizes", choices=("auto", "tiny"), default="auto")
    p.add_argument("--matmul", help="roofline matmul sizes N, comma-separated")
    p.add_argument("--bytes", help="roofline array sizes in bytes, comma-separated")
    p.add_argument("--iters", type=int, help="roofline samples per round (default 10)")
    p.add_argument("--rounds", type=int, help="roofline rounds (default 3)")
    p.add_argument("--fast-dtype", help="the roofline's compute dtype (default bfloat16 on an "
                   "accelerator, float32 on a CPU)")
    p.add_argument("--check-timeout", type=float, default=540, help="seconds per checker run")
    p.add_argument("--notebook-timeout", type=float, default=540, help="seconds per notebook")
    p.add_argument("--cell-timeout", type=float, default=300, help="seconds per notebook cell")
    p.add_argument("--roofline-timeout", type=float, default=300)
    p.add_argument("--probe-timeout", type=float, default=120)
    p.add_argument("--setup-timeout", type=float, default=300)
    args = p.parse_args(argv)
    parts = [x.strip() for x in args.part.split(",") if x.strip()]
    if not parts or set(parts) - set(PARTS):
        p.error(f"--part: one or more of {', '.join(PARTS)}")
    args.parts = [x for x in PARTS if x in parts] if "all" not in parts else \
        [x for x in ("setup", *ALL, "report") if x in parts or x in ALL]
    if args.stage != "all" and not args.stage.isdigit():
        p.error("--stage: a stage number or all")
    args.out = args.out or str(facts.build_dir("accelerator-dry-run" if args.dry_run
                                               else "accelerator"))
    args.command = f"{Path(sys.executable).name} -m coursekit.commands.accelerator " + shlex.join(
        sys.argv[1:] if argv is None else argv)
    return args


def same_mode(out: Path, dry_run: bool) -> str:
    """An error when ``out`` holds the other mode's items (a dry run's beside a real run's
    would make one report of both), else ""; records this run's mode."""
    mode = out / "mode.json"
    if mode.exists() and json.loads(mode.read_text()).get("dry_run") != dry_run \
            and any((out / "items").glob("*.json")):
        held = "a dry run" if not dry_run else "an accelerator run"
        return (f"{out} holds {held}'s items: use another --out, or --fresh to forget them")
    out.mkdir(parents=True, exist_ok=True)
    mode.write_text(json.dumps({"dry_run": dry_run}))
    return ""


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out).resolve()
    if args.fresh:
        for name in ("items", "checks", "executed", "records", "logs", "reuse"):
            shutil.rmtree(out / name, ignore_errors=True)
    problem = same_mode(out, args.dry_run)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    run = Run(args)
    print(f"make accelerator{' (DRY RUN on the CPU)' if args.dry_run else ''}: "
          f"{', '.join(args.parts)} -> {out}", flush=True)
    setup_failed = part_setup(run) if "setup" in args.parts else 0
    # after the setup: a first call on a fresh machine installs the site in this process's
    # own run (2026-12-07: its notebooks part then failed to import nbformat)
    site = Path(args.site)
    if site.is_dir() and str(site) not in sys.path:
        sys.path.append(str(site))  # nbformat, to read executed notebooks
        importlib.invalidate_caches()
    measuring = [p for p in args.parts if p in ALL]
    if measuring:
        part_environment(run, only_if_missing="environment" not in measuring)
    run_parts(run, measuring)
    built = run.write_report()
    s = built["summary"]
    print(f"\nreport: {out / 'report.md'} (and report.json)\n"
          f"  projects as expected {s['projects_as_expected']}; notebooks ran to their end "
          f"{s['notebooks_ran_to_end']}; roofs within 90% {s['roofs_within_90'] or '-'}")
    if not s["complete"]:
        print(f"  not run yet: {len(s['not_run'])} item(s) ({', '.join(s['not_run'][:6])}"
              f"{', ...' if len(s['not_run']) > 6 else ''}): run again with --resume")
    print("  everything recorded is as expected" if s["ok"] else
          "  NOT everything recorded is as expected: see the report")
    return 0 if s["ok"] and not setup_failed else 1


if __name__ == "__main__":
    sys.exit(main())

"""What the forbidden rules keep from a learner's file, kept out of reach while the
learner's code runs: the static scan (``coursekit.checking.forbidden``) reads names, and
a name built at run time (``importlib.import_module("coursekit.measure." + "timing")``)
is out of any reading's reach. In the learner process, before the learner's file is
imported (``install``, from ``coursekit.checking.learner_server``), for the project the
file belongs to (``project_of``):

* every course function a rule of any of the project's stages names (``time_synced``,
  ``inspect_pallas``, ...; of a module refused whole less what the contract gives, each
  public function but those: ``coursekit.measure.timing`` less ``count_compiles``) is
  replaced, in every loaded module that holds it, by a stand-in that raises
  ``ReachRefused``, so every route to the name (an import by any name, ``__import__``,
  ``sys.modules``, an allowed function's ``__globals__``, a course function that imports
  it lazily) ends at the stand-in;
* every course module a rule names whole (the instructor's code, every checker's
  ``remote_*`` modules, the sealed route's) is out of ``sys.modules`` and of its
  package's attributes;
* no file of either kind, nor any file of a checker's folder (``projects/*/tests/``: its
  modules, ``pallas_harness``, ``sharded_reference``, ..., none loaded here, and its stored
  outputs and inputs, ``expected/replays.npz``, ``expected/decisions.json``, ...: keyed
  by the checks' public inputs, a file read at run time would pass a check as a lookup
  table), is opened
  (an audit hook; the file itself, by any link or path to it): a fresh copy from its path
  (``importlib.util.spec_from_file_location``, ``runpy``, ``importlib.reload``,
  ``exec(open(...).read())``, ``sys.path`` and an import) is refused with the same error.

The checker's own code that needs them in this process (the inspectors and workloads a
check names) runs them inside ``course_turn()``: the learner process's main thread, while
it serves that request. A thread the learner's code started is refused even then, and so
is any opening of the checkers' stored outputs (no course code here reads them, and a
learner function an inspector calls runs inside the turn), and any opening of the others
while a frame of the learner's code is on the stack. A file is known by device and inode
with its size and mtime (a file another file system numbers alike is not it; moving a kept
file's times is refused).

The rules of every stage of the project hold at every stage: one learner process serves
every stage of a run, and a name used where a later stage forbids it would be kept for
that stage. A file that uses one is refused by the scan at that stage already.

What this does not stop: what needs no name (``gc.get_objects()`` walks to any object, the
stand-ins' own cells); a process the learner's code starts (it reads the course's files
as the learner may); learner code that an inspector calls during its turn; the course's
code copied into the learner's file; a file opened relative to a folder's descriptor
(``os.open(name, dir_fd=...)``: the audit event names no folder). Third-party names
(``jax.grad``, ``scipy.special``, ``jax.export``) stay the scan's: the course's own code
here uses them; the grader keeps sealed programs' files from every learner process
(``autograder/guard.py``).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import threading
from pathlib import Path

from coursekit.checking.errors import ReachRefused
from coursekit.checking.forbidden import (
    CHECKER_DATA,
    CHECKER_FOLDERS,
    DATA_HINT,
    SEALED_FOLDERS,
    STAGES,
    STORED,
    Rule,
    checker_modules,
    rules_for,
)
from coursekit.facts import ROOT

COURSE = "coursekit"


def project_of(impl_path: str | Path) -> str | None:
    """The project whose folder holds ``impl_path`` (``projects/<project>/...``, where the
    grader puts every submission's file), or None."""
    parts = Path(impl_path).resolve().parts
    found = [parts[i + 1] for i in range(len(parts) - 1)
             if parts[i] == "projects" and parts[i + 1] in STAGES]
    return found[-1] if found else None


def course_rules(project: str) -> tuple[Rule, ...]:
    """The project's whole-file rules on the course's own code and the checkers' files,
    of every stage."""
    return tuple(r for r in rules_for(project) if r.kind == "checker"
                 or r.module == COURSE or r.module.startswith(COURSE + "."))


class _Guard:
    def __init__(self, rules: tuple[Rule, ...]):
        self.named = {}     # qualified name -> (rule, the real object)
        self.whole = {}     # module name -> rule
        self.hidden = {}    # module name -> module, out of sys.modules
        # (device, inode) of each file of their code -> (rule, its size and mtime): a
        # hit must be that very file (a link to it has all three), never another file
        # a file system numbered alike (overlay layers, a reused inode)
        self.files: dict[tuple[int, int], tuple[Rule, int, int]] = {}
        self.stored: set[tuple[int, int]] = set()  # of them, the checkers' stored outputs
        self.turn = None    # the thread whose course turn it is
        self.main = threading.get_ident()
        for rule in rules:
            if rule.kind == "checker":  # a checker's file: never loaded here, not opened
                self._checker_files(rule)
            elif rule.kind == "checker-data":  # the rest of the checkers' folders
                self._checker_data(rule)
            elif rule.name == "*" and not rule.unless:
                self.whole[rule.module] = rule
                self._file_of(rule.module, rule, whole=True)
            else:
                module = importlib.import_module(rule.module)
                for name in self._names(module, rule):
                    real = getattr(module, name, None)
                    if callable(real) and f"{rule.module}.{name}" not in self.named:
                        self.named[f"{rule.module}.{name}"] = (rule, real)
                self._file_of(rule.module, rule, whole=False)
        self.prefixes = tuple(w + "." for w in self.whole)
        # id(real) -> (real, its stand-in)
        self.stand_ins = {id(real): (real, self._stand_in(name, rule, real))
                          for name, (rule, real) in self.named.items()}

    @staticmethod
    def _names(module, rule: Rule) -> list[str]:
        """The functions a rule names: its one, or a whole module's public functions less
        those the contract gives (``unless``). Its classes and private helpers stay (a
        stand-in in their place would break the allowed ones that use them: a compile
        listener, a record's type); the scan refuses them by name."""
        if rule.name != "*":
            return [rule.name]
        return [name for name, value in vars(module).items()
                if not name.startswith("_") and name not in rule.unless
                and inspect.isfunction(value) and value.__module__ == rule.module]

    def _checker_files(self, rule: Rule) -> None:
        for path in checker_modules().get(rule.module, ()):
            for file in (path, *(path.parent / "__pycache__").glob(f"{path.stem}.*.pyc")):
                try:
                    info = file.stat()
                except OSError:
                    continue
                self._keep(info, rule)

    def _keep(self, info: os.stat_result, rule: Rule, *, first: bool = False,
              stored: bool = False) -> None:
        key = (info.st_dev, info.st_ino)
        if not (first and key in self.files):
            self.files[key] = (rule, info.st_size, info.st_mtime_ns)
        if stored:
            self.stored.add(key)

    def _checker_data(self, rule: Rule) -> None:
        """Every other file under the checkers' folders: what a check reads as its
        reference in a learner's copy (stored outputs for the public inputs) and the
        inputs it hands over (it hands your code a copy of its own, never the file)."""
        sealed = {p.resolve() for folder in SEALED_FOLDERS for p in ROOT.glob(folder)}
        for folder in CHECKER_FOLDERS:
            for path in ROOT.glob(f"{folder}/**/*"):
                if sealed & set(path.resolve().parents):
                    continue  # the sealed programs: the sealed route's rules name them
                try:
                    info = path.stat()
                except OSError:
                    continue
                if path.is_file():
                    self._keep(info, rule, first=True, stored=STORED in path.relative_to(
                        ROOT).parts[3:4])

    # -- where a rule's code lives ------------------------------------------------------
    def _file_of(self, name: str, rule: Rule, *, whole: bool) -> None:
        """Every file of the module (a package's whole folder): the files themselves
        (device and inode), so a link by another name or path is the same file."""
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or not spec.origin or not os.path.exists(spec.origin):
            return
        origin = Path(spec.origin).resolve()
        if whole and spec.submodule_search_locations:  # a package: all of its folder
            files = [origin.parent, *origin.parent.rglob("*")]
        else:  # the module and its compiled copies
            files = [origin, *(origin.parent / "__pycache__").glob(f"{origin.stem}.*.pyc")]
        for file in files:
            try:
                info = file.stat()
            except OSError:
                continue
            self._keep(info, rule)

    def _file_rule(self, path, *, exact: bool = True) -> Rule | None:
        found = self._kept(path, exact=exact)
        return None if found is None else found[0]

    def _kept(self, path, *, exact: bool = True) -> tuple[Rule, bool] | None:
        """The rule of the file at ``path`` and whether it is a stored output;
        ``exact=False``: by device and inode alone (what may touch its size or mtime is
        refused by that, so none unmakes the match)."""
        if isinstance(path, int):
            return None  # a descriptor: its file was opened (and asked about) by path
        try:
            info = os.stat(path)  # (every open in the process comes here: one stat)
        except (OSError, TypeError, ValueError):
            return None  # a file being made, or not a path
        key = (info.st_dev, info.st_ino)
        kept = self.files.get(key)
        if kept is None or (exact and kept[1:] != (info.st_size, info.st_mtime_ns)):
            return None
        return kept[0], key in self.stored

    # -- the turn of the course's own code ------------------------------------------------
    def in_turn(self) -> bool:
        return self.turn is not None and self.turn == threading.get_ident()

    @contextlib.contextmanager
    def course_turn(self):
        if threading.get_ident() != self.main or self.in_turn():
            yield
            return
        self.turn = self.main
        self.show()
        try:
            yield
        finally:
            self.turn = None
            self.hide()

    def show(self) -> None:
        for name in [n for n in sys.modules if self._whole(n) and n not in self.hidden]:
            del sys.modules[name]  # planted meanwhile: the course's own is loaded again
        for name, module in self.hidden.items():
            sys.modules[name] = module
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, module)

    def hide(self) -> None:
        for name in list(sys.modules):
            if self._whole(name):
                module = sys.modules.pop(name)
                self.hidden[name] = module
                parent, _, child = name.rpartition(".")
                if parent in sys.modules and getattr(sys.modules[parent], child,
                                                     None) is module:
                    delattr(sys.modules[parent], child)

    def _whole(self, name: str) -> bool:
        """``name`` is a module a rule names whole, or one of its submodules."""
        return name.startswith(COURSE) and (name + ".").startswith(self.prefixes)

    # -- the refusals ---------------------------------------------------------------------
    def _stand_in(self, name: str, rule: Rule, real):
        guard = self

        def stand_in(*args, **kwargs):
            if not guard.in_turn():
                raise ReachRefused(name, rule.why, "called")
            return real(*args, **kwargs)
        for attr in ("__name__", "__qualname__", "__doc__", "__module__"):
            setattr(stand_in, attr, getattr(real, attr, None))
        return stand_in

    def replace(self) -> None:
        """Every binding of a named function, in every loaded module, to its stand-in."""
        for module in list(sys.modules.values()):
            space = getattr(module, "__dict__", None)
            if not isinstance(space, dict):
                continue
            for key, value in list(space.items()):
                found = self.stand_ins.get(id(value))
                if found is not None and found[0] is value:
                    space[key] = found[1]

    def audit(self, event: str, args) -> None:
        if event in ("os.utime", "os.truncate") and args:  # a kept file's size or mtime
            rule = self._file_rule(args[0], exact=False)
            if rule is not None:
                raise ReachRefused(rule.qualified, rule.why,
                                   f"its file's times or size changed: {args[0]!r}")
            return
        if event != "open" or not args:
            return
        found = self._kept(args[0])
        if found is None:
            return
        rule, stored = found
        # in the course's turn: the stored outputs still (no course code in this process
        # reads them), and any such file a learner function an inspector calls opens
        if self.in_turn() and not (stored or learner_on_stack()):
            return
        raise ReachRefused(rule.qualified, rule.why, f"its file read: {os.fsdecode(args[0])}",
                           hint=DATA_HINT if rule.kind == "checker-data" else None)


# the course's package and the environment's code (a TPU image's JAX on PYTHONPATH too)
_OURS = tuple(str(p) + os.sep for p in {
    Path(__file__).resolve().parents[1], Path(sys.prefix).resolve(),
    Path(sys.base_prefix).resolve(),
    *(Path(e).resolve() for e in sys.path if e.endswith(("site-packages", "dist-packages")))})


def learner_on_stack() -> bool:
    """Whether a frame of code that is neither the course's nor the environment's (the
    learner's file, or what it loaded) is on this thread's stack."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if not name.startswith("<"):
            try:
                name = os.path.realpath(name)
            except (OSError, ValueError):
                return True
            if not name.startswith(_OURS):
                return True
        frame = frame.f_back
    return False


def install(project: str | None) -> _Guard | None:
    """Keep the project's forbidden course code out of reach in this process from now on
    (it cannot be undone); the guard (its ``course_turn()``), or None where the file is
    no project's. The guard itself is out of ``sys.modules`` too: only its caller holds
    it."""
    rules = course_rules(project) if project else ()
    if not rules:
        return None
    itself = Rule(__name__, "*", 0, "learner-process")
    data = Rule(CHECKER_DATA, "*", 0, "checker-data")
    guard = _Guard((*rules, itself, data))
    guard.replace()
    guard.hide()
    sys.addaudithook(guard.audit)
    return guard

"""The checkers' sealed references are written from their sources, so the two never drift.

``projects/<p>/solution/sealed.py`` defines ``EXPORTS``: a name -> (function, a callable
returning its input types, symbolic sizes allowed, whether it runs with x64 on: float64
types need it, and the checker turns it on for the call), and optionally ``PLATFORMS``
(default the CPU only). Each becomes
``projects/<p>/tests/sealed/<name>.jaxexport``, exported for the CPU
(``coursekit.checking.sealed`` loads and runs it). The release leaves a project's
programs and ``solution/`` behind (its checks read the programs' stored outputs for public
inputs there). A course-level sealed source, ``coursekit/instructor/sealed_*.py``
(instructor-only; none at present: notebook 08's change under review is the learner's own
step now), would write into the folder its ``TARGET`` names, which a release must leave
out too (the release scan finds any program it ships).

The programs are written by the oldest JAX the course supports (``jaxapi.FLOOR``): jax.export
promises only that a newer JAX reads an older program, and 0.10.2 cannot read what 0.12
writes. Run under any other JAX, this command runs itself again under the floor
(``coursekit.authoring.jaxfloor``, installed into build/ when missing), so the bytes are the
same in every checkout whatever JAX the venv holds.

    python -m coursekit.authoring.sealed            # rewrite every sealed program
    python -m coursekit.authoring.sealed --check    # exit 1 when one is missing or stale
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

from coursekit.authoring import jaxfloor
from coursekit.checking import sealed
from coursekit.compat import jaxapi
from coursekit.facts import ROOT


def sources(root: Path) -> list[Path]:
    """Each project's ``solution/sealed.py``, and the course's own sealed sources
    (``coursekit/instructor/sealed_*.py``, each naming its ``TARGET`` folder)."""
    return sorted(root.glob("projects/*/solution/sealed.py")) + sorted(
        root.glob("coursekit/instructor/sealed_*.py"))


def target_folder(root: Path, source: Path, module) -> Path:
    """The folder whose ``sealed/`` holds the source's programs: the project's tests/, or
    the course folder the source names (``TARGET``)."""
    target = getattr(module, "TARGET", None)
    return root / target if target else source.parent.parent / "tests"


def load(source: Path):
    """A project's ``solution/sealed.py`` as a module (solution/ is no package)."""
    spec = importlib.util.spec_from_file_location(
        f"sealed_source_{source.parent.parent.name.replace('-', '_')}_{source.stem}", source)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serialised(fn, types, x64: bool, platforms: tuple = ("cpu",)) -> bytes:
    """The program's bytes, the same in every checkout and after any edit elsewhere: no
    source locations (they would name this checkout's paths and line numbers)."""
    import jax

    before = jax.config.jax_traceback_in_locations_limit
    jax.config.update("jax_traceback_in_locations_limit", 0)
    try:
        with jax.enable_x64(x64):
            exported = jax.export.export(jax.jit(fn), platforms=platforms)(*types())
        return bytes(exported.serialize())
    finally:
        jax.config.update("jax_traceback_in_locations_limit", before)


def programs(root: Path) -> dict[Path, bytes]:
    """Every sealed program's target path and bytes, from the sources under ``root``."""
    out = {}
    for source in sources(root):
        module = load(source)
        platforms = tuple(getattr(module, "PLATFORMS", ("cpu",)))
        for name, (fn, types, x64) in module.EXPORTS.items():
            out[sealed.path(target_folder(root, source, module), name)] = serialised(
                fn, types, x64, platforms)
    return out


def on_floor() -> bool:
    return jaxapi.version() == jaxapi.FLOOR


def stale_here(root: Path) -> dict[Path, bytes]:
    """Under the floor: the programs missing or not what their sources export now, with
    their bytes."""
    assert on_floor(), f"the sealed programs are written by JAX {jaxapi.FLOOR}"
    return {target: data for target, data in programs(root).items()
            if not target.is_file() or target.read_bytes() != data}


def stale(root: Path) -> list[Path]:
    """The programs missing or not what their sources export now (under any JAX: asks a
    process under the floor when this one runs another)."""
    if on_floor():
        return list(stale_here(root))
    done = jaxfloor.run_module("coursekit.authoring.sealed",
                               ["--check", "--json", "--root", str(root)],
                               capture_output=True, text=True)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode not in (0, 1) or not lines:
        raise RuntimeError(f"the sealed programs could not be checked under JAX "
                           f"{jaxapi.FLOOR} (exit {done.returncode}): {done.stderr[-800:]}")
    return [Path(p) for p in json.loads(lines[-1])["stale"]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale programs")
    parser.add_argument("--json", action="store_true",
                        help="with --check: one JSON line {\"stale\": [paths]}")
    parser.add_argument("--root", default=ROOT, type=Path)
    args = parser.parse_args(argv)
    if not on_floor():  # written by the floor, read by every JAX after it
        argv = sys.argv[1:] if argv is None else argv
        return jaxfloor.run_module("coursekit.authoring.sealed", argv).returncode
    root = args.root.resolve()
    todo = stale_here(root)
    if args.check and args.json:
        print(json.dumps({"stale": [str(t) for t in todo]}))
    for target, data in todo.items():
        if args.check:
            if not args.json:
                print(f"stale: {target.relative_to(root)} (run `make starters`)")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        print(f"wrote {target.relative_to(root)}")
    return 1 if args.check and todo else 0


if __name__ == "__main__":
    sys.exit(main())

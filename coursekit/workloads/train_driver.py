"""One training process for sharded-training's stage-3 checks (the checker starts it
through ``coursekit.workloads.trainruns``; so does notebook 05).

    python coursekit/workloads/train_driver.py --impl MODEL --config JSON --ckpt DIR --out FILE.json
                     [--devices N] [--block-after-step K] [--block-in-save STEP]
                     [--marker FILE] [--nproc N --pid I --port P]

Sets the fake device count *before* importing jax, loads the learner's file, joins a
multi-process run through the learner's ``initialize_distributed`` when ``--nproc`` > 1
(recording the timeouts it passed), runs ``train`` and writes what happened to ``--out``
(JSON) and the final state to ``--out`` with ``.npz`` (one array per leaf, keys as
``jax.tree_util.keystr``; the PRNG key as its key data). The report holds the steps
``on_step`` was given and, once ``train`` has returned, ``at_return``: the checkpoint
folder's finished steps and temporary folders at that moment, and how many of the Orbax
checkpoint managers the process opened are not closed.

Two ways to stop at a known point, so the checker can SIGKILL the process there:
  --block-after-step K   after step K is reported, write --marker and wait forever
  --block-in-save S      when Orbax is about to finalise the checkpoint of step S (its
                         files written to the temporary folder, the commit not made),
                         write --marker and wait forever: a kill then lands mid-save.
A learner exception ends the process at once with status 3 and a named error in --out
(never the distributed shutdown barrier, which would hold every process).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # run as a script: the course root


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--impl", required=True)
    p.add_argument("--config", required=True, help="training config as JSON text")
    p.add_argument("--ckpt", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--devices", type=int, default=8, help="fake CPU devices per process")
    p.add_argument("--block-after-step", type=int, default=None)
    p.add_argument("--block-in-save", type=int, default=None)
    p.add_argument("--marker", default=None)
    p.add_argument("--nproc", type=int, default=1)
    p.add_argument("--pid", type=int, default=0)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--init-timeout", type=int, default=None,
                   help="timeout_s given to initialize_distributed (default: its own)")
    return p.parse_args(argv)


def block_forever(marker: str | None, payload: dict) -> None:
    if marker:
        tmp = Path(marker + ".tmp")
        tmp.write_text(json.dumps(payload))
        tmp.rename(marker)  # appears whole or not at all
    while True:
        time.sleep(3600)


def patch_orbax_finalize(step: int, marker: str | None) -> None:
    """Block the finalisation (the commit) of checkpoint ``step``, after its files are
    written, so a SIGKILL from outside lands in the middle of that save."""
    from orbax.checkpoint._src.path import atomicity

    for cls in (atomicity.AtomicRenameTemporaryPath, atomicity.CommitFileTemporaryPath):
        original = cls.finalize

        async def finalize(self, *args, _original=original, **kwargs):
            final = self.get_final()
            if final.name == str(step) or re.fullmatch(rf"\D*0*{step}", final.name):
                block_forever(marker, {"blocked_in_save": step, "tmp": str(self.get())})
            return await _original(self, *args, **kwargs)

        cls.finalize = finalize


def watch_managers():
    """Counts the Orbax ``CheckpointManager``s this process opens and which of them are
    closed (the contract: train closes what it opens before it returns). Returns a
    function giving how many are open now; each opened manager is kept alive here, so
    one dropped without closing still counts."""
    from orbax.checkpoint import checkpoint_manager as module

    cls, opened, closed = module.CheckpointManager, [], set()
    init, close = cls.__init__, cls.close

    def counted_init(self, *args, **kwargs):
        opened.append(self)
        return init(self, *args, **kwargs)

    def counted_close(self, *args, **kwargs):
        closed.add(id(self))
        return close(self, *args, **kwargs)

    cls.__init__, cls.close = counted_init, counted_close
    return lambda: sum(id(m) not in closed for m in opened)


def to_host(leaf):
    import jax
    import numpy as np

    if isinstance(leaf, jax.Array) and jax.dtypes.issubdtype(leaf.dtype,
                                                             jax.dtypes.prng_key):
        leaf = jax.random.key_data(leaf)
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
        if leaf.is_fully_replicated:
            return np.asarray(leaf.addressable_data(0))
        from jax.experimental import multihost_utils
        return np.asarray(multihost_utils.process_allgather(leaf, tiled=True))
    return np.asarray(leaf)



def kind_of(value) -> str:
    """What on_step was given, by kind: "int" (any integer but a bool), "float" (a Python
    float or a subclass), else the type's qualified name (a device array, a string)."""
    import numbers
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return "int"
    if isinstance(value, float):
        return "float"
    return f"{type(value).__module__}.{type(value).__qualname__}"


def main(argv=None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from coursekit.facts import use_cpu_devices
    use_cpu_devices(args.devices)  # before jax is imported
    out = Path(args.out)
    report = {"ok": False, "pid": os.getpid(), "process_index": args.pid,
              "steps": [], "losses": [], "first_step": None, "init_kwargs": None}

    def write_report():
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        tmp.rename(out)

    from coursekit.checking.errors import LearnerCodeError
    from coursekit.checking.learner import explain_exception, load_impl

    impl_path = Path(args.impl).resolve()
    try:
        import jax
        import numpy as np

        if args.nproc > 1:
            original = jax.distributed.initialize

            def recording_initialize(*a, **kw):
                try:  # positional or keyword, as the signature names them
                    given = inspect.signature(original).bind(*a, **kw).arguments
                except TypeError:
                    given = kw
                report["init_kwargs"] = {k: v for k, v in given.items()
                                         if isinstance(v, (int, float, str, type(None)))}
                return original(*a, **kw)

            jax.distributed.initialize = recording_initialize
        open_managers = watch_managers()
        impl = load_impl(impl_path)
        if args.block_in_save is not None:
            patch_orbax_finalize(args.block_in_save, args.marker)
        if args.nproc > 1:
            timeout = {} if args.init_timeout is None else {"timeout_s": args.init_timeout}
            impl.initialize_distributed(f"127.0.0.1:{args.port}", args.nproc, args.pid,
                                        **timeout)
            if jax.process_count() != args.nproc:
                raise RuntimeError(f"initialize_distributed joined {jax.process_count()} "
                                   f"process(es), expected {args.nproc}")
            write_report()  # the timeouts it set, even if this process is killed later
        report.update(process_count=jax.process_count(), device_count=jax.device_count(),
                      local_device_count=jax.local_device_count())
        config = json.loads(args.config)

        def on_step(step, loss):
            if report["first_step"] is None:  # what it was given, before any conversion
                report["on_step_types"] = [kind_of(step), kind_of(loss)]
            step, loss = int(step), float(loss)
            if report["first_step"] is None:
                report["first_step"] = step
            report["steps"].append(step)
            report["losses"].append(loss)
            if args.block_after_step is not None and step == args.block_after_step:
                write_report()
                block_forever(args.marker, {"blocked_after_step": step})
            if args.nproc > 1:
                write_report()  # progress, for naming a process that stops responding

        mesh = impl.make_mesh()
        state = impl.train(config, args.ckpt, mesh, on_step=on_step)
        # what is on disk the moment train returns (the contract: every save finished
        # by then), before anything else runs: a save still in flight shows here
        from coursekit.workloads.trainruns import finalized_steps, tmp_folders
        report["at_return"] = {"finished": finalized_steps(args.ckpt),
                               "temporary": tmp_folders(args.ckpt),
                               "managers_open": open_managers()}
        write_report()
        if not isinstance(state, dict):
            raise TypeError(f"train returned {type(state).__name__}, expected the state dict")
        leaves = {jax.tree_util.keystr(path): to_host(leaf)
                  for path, leaf in jax.tree_util.tree_leaves_with_path(state)}
        np.savez(out.with_suffix(".npz"), **leaves)
        report.update(ok=True, final_step=int(to_host(state["step"])),
                      final_data_pos=int(to_host(state["data_pos"])),
                      leaves=sorted(leaves))
        write_report()
    except BaseException as err:  # noqa: BLE001 - report any learner failure by name
        named = err if isinstance(err, LearnerCodeError) else explain_exception(err, impl_path)
        report.update(ok=False, error=str(named), kind=named.kind, hint=named.hint)
        try:
            write_report()
        finally:
            print(f"driver: {named}", file=sys.stderr, flush=True)
            os._exit(3)  # skip jax.distributed's shutdown barrier
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

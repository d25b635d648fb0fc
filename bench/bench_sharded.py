"""sharded-training figures: the checker's wall time on the reference (target <= 180 s on
2 cores), and Orbax checkpoint save and restore times for the course's training state
on 8 fake CPU devices, side by side with ``np.savez``/``np.load`` of the same bytes.

The state is tiny (the classifier's params and momentum, a key, two counters: a few
KiB), so these times are Orbax's fixed cost per checkpoint (folders, metadata, commit),
not bandwidth. CPU figures on a shared 2-core machine; fake devices share the cores."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                           " --xla_force_host_platform_device_count=8").strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")  # the course's 8 CPU devices, GPU or not
from coursekit.facts import ROOT, checker_path

sys.path.insert(0, str(ROOT))
PROJECT = ROOT / "projects" / "sharded-training"


def checker_wall_time() -> tuple[float, int]:
    start = time.perf_counter()
    rc = subprocess.call([sys.executable, str(checker_path(PROJECT.name)), "--stage",
                          "all", "--impl", str(PROJECT / "solution" / "model.py")],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, rc


def checkpoint_times(rounds: int = 9) -> dict:
    """Synchronous save (save + wait_until_finished) and restore onto the mesh, first
    call apart, raw samples kept; np.savez/np.load of the same leaves interleaved."""
    import jax
    import numpy as np

    from coursekit.checking.learner import load_impl
    impl = load_impl(PROJECT / "solution" / "model.py")
    mesh = impl.make_mesh()
    config = dict(impl.DEFAULT_CONFIG)
    state = impl.init_state(config, mesh)
    jax.block_until_ready(state)
    leaves = {jax.tree_util.keystr(p): np.asarray(jax.random.key_data(v) if
                                                  jax.dtypes.issubdtype(
                                                      v.dtype, jax.dtypes.prng_key) else v)
              for p, v in jax.tree_util.tree_leaves_with_path(state)}
    nbytes = sum(a.nbytes for a in leaves.values())
    out = {"state_bytes": nbytes, "devices": jax.device_count(), "save_s": [],
           "restore_s": [], "npz_save_s": [], "npz_load_s": []}
    with tempfile.TemporaryDirectory() as tmp:
        manager = impl.make_checkpoint_manager(str(Path(tmp) / "ckpt"), max_to_keep=2)
        fresh = impl.init_state(config, mesh)
        for i in range(rounds + 1):
            s = dict(state, step=jax.numpy.int32(i + 1))
            start = time.perf_counter()
            impl.save_state(manager, s)
            manager.wait_until_finished()
            save = time.perf_counter() - start
            start = time.perf_counter()
            restored = impl.restore_latest(manager, fresh)
            jax.block_until_ready(restored)
            restore = time.perf_counter() - start
            path = Path(tmp) / f"state{i}.npz"
            start = time.perf_counter()
            np.savez(path, **leaves)
            npz_save = time.perf_counter() - start
            start = time.perf_counter()
            with np.load(path) as data:
                _ = {k: data[k] for k in data.files}
            npz_load = time.perf_counter() - start
            if i == 0:
                out.update(first_save_s=save, first_restore_s=restore)
                continue
            out["save_s"].append(save)
            out["restore_s"].append(restore)
            out["npz_save_s"].append(npz_save)
            out["npz_load_s"].append(npz_load)
        manager.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=str(ROOT / "build" / "bench"))
    args = parser.parse_args()
    wall, rc = checker_wall_time()
    print(f"check.py --stage all on the reference: {wall:.1f} s wall (target <= 180 s on "
          f"2 cores; exit {rc}) [CPU figure]")
    t = checkpoint_times()
    med = {k: statistics.median(t[k]) for k in ("save_s", "restore_s", "npz_save_s",
                                                "npz_load_s")}
    print(f"training state: {t['state_bytes']} bytes on {t['devices']} fake CPU devices")
    print(f"Orbax save (sync, committed): first {t['first_save_s'] * 1e3:.1f} ms, then median "
          f"{med['save_s'] * 1e3:.1f} ms vs np.savez {med['npz_save_s'] * 1e3:.2f} ms -> "
          f"{med['save_s'] / med['npz_save_s']:.0f}x [CPU figure]")
    print(f"Orbax restore onto the mesh: first {t['first_restore_s'] * 1e3:.1f} ms, then "
          f"median {med['restore_s'] * 1e3:.1f} ms vs np.load "
          f"{med['npz_load_s'] * 1e3:.2f} ms -> {med['restore_s'] / med['npz_load_s']:.0f}x "
          f"[CPU figure]")
    print("  (a state this small measures Orbax's fixed cost per checkpoint: folders, "
          "metadata, the commit rename; not disk bandwidth)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sharded_checkpoint.json").write_text(json.dumps(
        {"checker_wall_s": wall, "checker_rc": rc, **t}, indent=1))
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

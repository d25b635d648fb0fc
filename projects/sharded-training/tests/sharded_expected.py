"""Stored expected outputs of stage 1's training step for fixed public inputs: numbers,
not code, so that a learner's copy (which holds no reference step) checks the step's
values too. The grader adds hidden seeds and sizes with the instructor's step live.

    python projects/sharded-training/tests/sharded_expected.py   # rewrite the file

The instructor runs this from the course checkout (it needs ``coursekit.instructor``);
``tests/test_sharded_expected.py`` checks that the stored file equals a fresh generation.
What is stored: the public run config, the batches of each step (host arrays, a drawn
number of valid rows per device), and the single-device reference's loss of each step and
state after the last (params, momentum, key data)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __name__ == "__main__":  # the course root and this folder, as check.py sets them
    for _path in (Path(__file__).resolve().parents[3], Path(__file__).resolve().parent):
        sys.path.insert(0, str(_path))

import numpy as np  # noqa: E402
from sharded_reference import blobs, random_mask  # noqa: E402

from coursekit.checking.values import fail_unless  # noqa: E402

FILE = Path(__file__).resolve().parent / "expected" / "stage1_step.npz"
# The public case: a config and batches anyone can rebuild; 3 steps of 5 rows a device.
CONFIG = {"seed": 20261206, "data_seed": 7, "n_examples": 601, "batch": 64, "spread": 2.0,
          "lr": 0.05, "momentum": 0.9, "noise": 0.1, "steps": 3, "save_every": 7,
          "max_to_keep": 3}
ROWS, DEVICES, SEED = 5, 8, 51


def public_batches() -> list[dict]:
    rng = np.random.default_rng(SEED)
    out = []
    for _ in range(CONFIG["steps"]):
        x, y = blobs(rng, ROWS * DEVICES)
        mask = random_mask(rng, ROWS, rng.integers(1, ROWS + 1, DEVICES))
        out.append({"x": x, "y": y, "mask": mask})
    return out


def generate() -> dict:
    """The public case and its expected numbers, from the instructor's reference step."""
    from sharded_reference import ref_train
    from sharded_trees import flat
    batches = public_batches()
    final, losses = ref_train(CONFIG, CONFIG["steps"], batches)
    stored = {"config": np.array(json.dumps(CONFIG, sort_keys=True)),
              "losses": np.asarray(losses, np.float64)}
    for i, b in enumerate(batches):
        stored.update({f"batch{i}/{k}": v for k, v in b.items()})
    for field in ("params", "momentum"):
        stored.update({f"{field}{k}": v for k, v in flat(final[field]).items()})
    stored["key"] = flat({"k": final["key"]})["['k']"]
    return stored


def load() -> dict:
    """{config, batches, losses, params, momentum, key} from the stored file."""
    fail_unless(FILE.is_file(), "the stored expected outputs of stage 1 are missing",
                yours=str(FILE), expected="the file the course ships",
                hint="restore projects/sharded-training/tests/expected/ from your copy")
    with np.load(FILE, allow_pickle=False) as data:
        raw = {k: data[k] for k in data.files}
    config = json.loads(str(raw["config"]))
    return {"config": config,
            "batches": [{k: raw[f"batch{i}/{k}"] for k in ("x", "y", "mask")}
                        for i in range(config["steps"])],
            "losses": [float(v) for v in raw["losses"]],
            "params": {k[len("params"):]: v for k, v in raw.items() if k.startswith("params")},
            "momentum": {k[len("momentum"):]: v for k, v in raw.items()
                         if k.startswith("momentum")},
            "key": raw["key"]}


if __name__ == "__main__":
    FILE.parent.mkdir(parents=True, exist_ok=True)
    np.savez(FILE, **generate())
    print(f"wrote {FILE}")

"""Run by tests/test_jax_floor.py in a process under the floor JAX (as an accelerator image
runs it): what would break there, in one process, one JSON line on stdout.

* ``imports``: every coursekit and autograder module imports (the optional packages
  hidden: tests/image/sitecustomize.py);
* ``sealed``: each sealed program loads and runs, against the replay written the obvious
  way (tests/test_sealed.py) on the checker's own case;
* ``rebuilt``: a function exported as the learner process exports it (``export_call``,
  ``describe``) is rebuilt as the checker rebuilds it (``rebuild``) and runs.
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS.parent), str(TESTS)]
# run only inside the grader's sandbox, beside its copy of coursekit/protocol.py
SANDBOX_ONLY = {"autograder.runner"}


def imports() -> dict:
    failed = {}
    for package in ("coursekit", "autograder"):
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__,
                                          package + "."):
            if info.name in SANDBOX_ONLY or info.name.endswith("__main__"):
                continue
            try:
                importlib.import_module(info.name)
            except BaseException as err:  # noqa: BLE001 - every failure is the finding
                failed[info.name] = f"{type(err).__name__}: {err}"[:300]
    return failed


def sealed() -> dict:
    """Largest deviation of each program from the plain replay, as a share of the largest
    value (what test_sealed bounds)."""
    import jax
    import numpy as np
    import test_sealed as t

    from coursekit.checking import sealed as sealed_mod
    from coursekit.workloads import classifier

    key = jax.random.key(151 + 13)
    x, y = classifier.make_dataset(jax.random.key(7), 151, 7, 3)
    want = t.plain_replay(key, x, y, 3, 40, 13, 0.25)
    got = t.sealed_replay(key, x, y, 3, 40, 13, 0.25)
    out = {"train_replay": max(float(np.max(np.abs(got[k] - np.asarray(want[k])))
                                     / np.max(np.abs(np.asarray(want[k])))) for k in want)}
    rng = np.random.default_rng(156)
    xs = rng.standard_normal((151, 5)).astype(np.float32)
    ys = (xs @ rng.standard_normal(5) + 0.3).astype(np.float32)
    key = jax.random.key(151 * 5)
    want = t.plain_fit(key, xs, ys, 60, 9, 0.04)
    got = sealed_mod.call(sealed_mod.program(t.TESTS, "fit_replay"), jax.random.key_data(key),
                          xs, ys, np.int32(60), np.float64(0.04), np.bool_(False),
                          np.zeros(9, np.int8), np.int32(151), np.bool_(False),
                          np.zeros(1, np.int8), x64=True)  # maxval: n; no one draw
    out["fit_replay"] = max(float(np.max(np.abs(got[k] - want[k])) / np.max(np.abs(want[k])))
                            for k in want)
    return out


def rebuilt() -> float:
    """Largest difference between the rebuilt program's result and a direct call."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from coursekit.checking.programs import export_call, rebuild

    def loss(w, x, *, scale):
        return scale * jnp.mean(jnp.tanh(x @ w) ** 2)
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    x = np.linspace(0, 2, 20, dtype=np.float32).reshape(5, 4)
    desc = export_call(loss, (w, x), {"scale": 2.0}, transform="value_and_grad")
    value, grad = rebuild(desc, (w, x), out_example=(0.0, w)).call(w, x)
    want_value, want_grad = jax.value_and_grad(lambda a, b: loss(a, b, scale=2.0))(w, x)
    return max(float(abs(value - want_value)), float(np.max(np.abs(grad - want_grad))))


if __name__ == "__main__":
    import jax
    print(json.dumps({"jax": jax.__version__, "imports": imports(), "sealed": sealed(),
                      "rebuilt": rebuilt()}))

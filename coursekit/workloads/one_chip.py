"""Notebook 05 on a machine with one accelerator chip: the learner's mesh, placement and
jitted step on that chip, in a process of its own (the notebook's kernel keeps its eight
fake CPU devices, so it never opens the chip and leaves it to this process).

    python -m coursekit.workloads.one_chip --impl model.py --config '{"seed": 0, ...}'

Prints one JSON line: ``backend``, ``device_kind``, ``devices`` (what this process's JAX
found: on a CPU-only machine the backend is "cpu" and nothing else is done), and on an
accelerator ``mesh`` (axis sizes), ``placement`` (each leaf's devices), ``all_reduces``
(the all-reduce instructions in the compiled step: none, with one device to reduce over)
and ``loss`` of one step; ``not_yet`` when the learner's stage 1 is unfinished.
"""

from __future__ import annotations

import argparse
import json
import sys


def one_chip(impl_path: str, config: dict) -> dict:
    import jax

    from coursekit.measure.environment import device_facts
    facts = device_facts()
    out = {"backend": facts["backend"], "device_kind": facts["device_kind"],
           "devices": facts["device_count"], "label": facts["label"]}
    if facts["backend"] == "cpu":
        return out
    from coursekit.checking.errors import LearnerCodeError
    from coursekit.checking.learner import load_impl
    try:
        impl = load_impl(impl_path)
        mesh = impl.make_mesh()
        state = impl.init_state(config, mesh)
        host = impl.batch_at(impl.make_data(config), config, 0)
        batch = impl.place_batch(host, mesh)
        step = impl.make_train_step(impl.make_optimizer(config), config.get("noise", 0.0))
        hlo = step.lower(state, batch).compile().as_text()
        new_state, loss = step(state, batch)
        out.update(
            mesh={str(k): int(v) for k, v in dict(mesh.shape).items()},
            placement={name: sorted(d.id for d in leaf.sharding.device_set)
                       for name, leaf in (("params.w1", new_state["params"]["w1"]),
                                          ("batch.x", batch["x"]))},
            all_reduces=sum(" all-reduce(" in line for line in hlo.splitlines()),
            loss=float(jax.block_until_ready(loss)))
    except NotImplementedError as err:
        out["not_yet"] = str(err) or "an unfinished function"
    except LearnerCodeError as err:
        if err.kind != "not-implemented":
            raise
        out["not_yet"] = str(err)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m coursekit.workloads.one_chip",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--impl", required=True)
    parser.add_argument("--config", required=True, help="the training config, as JSON")
    args = parser.parse_args(argv)
    print(json.dumps(one_chip(args.impl, json.loads(args.config))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""One notebook of ``make accelerator``, in a process of its own:

    python -m coursekit.commands.accelerator_notebook FACTS.json IN.ipynb OUT.ipynb
        [headless options]

The notebook runs headless (``coursekit.notebook.headless``: no Jupyter kernel, no
sockets; the options are its own), then this process writes where the notebook's JAX
computed (backend, device kind, label) to FACTS.json, asked of the JAX the notebook
opened: the same process, so no second process reaches for the chip. A notebook that
never imported JAX is recorded as such.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from coursekit.notebook import headless


def device_of_this_process() -> dict:
    if "jax" not in sys.modules:
        return {"device": None, "error": "the notebook did not import JAX"}
    try:
        from coursekit.measure.environment import device_facts
        return {"device": device_facts(), "error": ""}
    except Exception as err:  # noqa: BLE001 - a backend that cannot open is the finding
        return {"device": None, "error": f"{type(err).__name__}: {str(err)[:300]}"}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 3:
        print("usage: python -m coursekit.commands.accelerator_notebook FACTS.json IN.ipynb "
              "OUT.ipynb [headless options]", file=sys.stderr)
        return 2
    facts_path, rest = Path(argv[0]), argv[1:]
    returncode = headless.main(rest)
    facts_path.write_text(json.dumps({"returncode": returncode, **device_of_this_process()},
                                     default=str))
    return returncode


if __name__ == "__main__":
    sys.exit(main())

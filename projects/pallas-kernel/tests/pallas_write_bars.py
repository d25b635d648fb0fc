"""Writes ``expected/tolerance_bars.json``: the checker's rounding bars for the public row
lengths, as numbers. The instructor runs it from the course checkout (it needs
``coursekit.instructor.pallas_kernel``, which a learner's copy does not hold):

    python projects/pallas-kernel/tests/pallas_write_bars.py

Every check that compares a softmax with the float64 one draws its row lengths from
``LENGTHS`` and reads its bar from the file, so a learner's copy gives the verdict the
course gives; tests/test_pallas_kernel.py holds the file to a fresh generation."""

from __future__ import annotations

import json
import sys
from pathlib import Path

BARS = Path(__file__).resolve().parent / "expected" / "tolerance_bars.json"

# The public row lengths: every length up to two blocks of 128 lanes' worth of short rows,
# then spread over each range a check draws from (hundreds, powers of two and their
# neighbours, thousands).
COLUMNS = ("rtol", "atol", "rtol_lo", "rtol_hi")
LENGTHS = sorted({*range(1, 130), *range(131, 702, 6), *range(128, 1025, 128),
                  1023, 1025, *range(2001, 5000, 52)})


def generate() -> dict:
    import jax.numpy as jnp

    from coursekit.instructor.pallas_kernel import budget, rtol_bracket
    bars = {}
    for name, dtype in (("float32", jnp.float32), ("bfloat16", jnp.bfloat16)):
        bars[name] = {str(n): [*budget(dtype, n), *rtol_bracket(dtype, n)] for n in LENGTHS}
    return {"what": "pallas-kernel's rounding bar of a float32 softmax rounded once to the "
                    "dtype, and the bracket a derived rtol must fall in, by row length",
            "columns": list(COLUMNS), "bars": bars}


def text(bars: dict) -> str:
    """The file's text: one row length a line."""
    lines = [f'{{"what": {json.dumps(bars["what"])},',
             f' "columns": {json.dumps(bars["columns"])},', ' "bars": {']
    for k, (name, rows) in enumerate(bars["bars"].items()):
        lines.append(f'  "{name}": {{')
        lines += [f'   "{n}": {json.dumps(row)}' + ("," if i < len(rows) - 1 else "")
                  for i, (n, row) in enumerate(rows.items())]
        lines.append("  }" + ("," if k < len(bars["bars"]) - 1 else ""))
    return "\n".join(lines) + "\n }\n}\n"


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    BARS.write_text(text(generate()))
    print(f"wrote {BARS}")

"""Notebook 05's table of per-shard gradient rules: each rule's gradient as a multiple of
the one-device gradient (equal counts) and its error with unequal counts, then what the
factors say. The factors are measured by the notebook with the harness it runs; this
module only prints them and says when they are not the ones its text explains.
"""

from __future__ import annotations

PLANTED = "grad(shard mean) + pmean (planted)"
RULES = ("grad(shard mean)", PLANTED, "grad(shard mean) + psum", "planted, check_vma=False")


def show_header() -> None:
    print(f"{'per-shard rule (8 fake CPU devices)':36s} {'factor':>8s} "
          f"{'rel. error, unequal':>20s}")


def show_rule(name: str, factor: float, err_unequal: float) -> None:
    print(f"{name:36s} {factor:7.3f}x {err_unequal:20.2g}")


def show_reading(factor: dict, err_unequal: dict, devices: int) -> None:
    """What the factors say: the planted pmean changes nothing, a psum adds a factor of
    ``devices``, and check_vma=False hides the factor only while the counts are equal."""
    f_mean, ratio_8x = factor[RULES[0]], factor[PLANTED]
    f_psum, f_off = factor[RULES[2]], factor[RULES[3]]
    print(f"grad of the shard means alone: {f_mean:.3f}x; adding pmean changes that by a "
          f"factor of {ratio_8x / f_mean:.4f}: the {ratio_8x:.1f}x is there before any "
          "collective")
    print(f"psum after grad: {f_psum:.3f}x ({f_psum / f_mean:.1f} times the rule without it)")
    print(f"the planted code with check_vma=False: {f_off:.3f}x with equal counts, but "
          f"relative error {err_unequal[RULES[3]]:.2g} with unequal ones")
    # The notebook's explanation rests on these measurements (with the course's harness,
    # or the learner's where it is right): if they change, say so.
    d = devices
    if not (abs(f_mean - d) < 1e-3 * d and abs(ratio_8x - d) < 1e-3 * d
            and abs(f_psum - d * d) < 1e-3 * d * d and abs(f_off - 1) < 1e-3):
        print(f"these are not the factors the text above explains ({d}, {d}, {d * d}, 1): "
              "check that shard_map_grads keeps the parameters whole, splits the rows and "
              "returns the one value")

"""What the foundations checker runs in the learner process (``coursekit.workloads.
inspectors``). Every answer is self-reported: the checker lists it in ``SELF_REPORTED``."""

from __future__ import annotations

# The two entry points every JAX autodiff transform goes through (jax 0.12:
# grad, value_and_grad, vjp, jacrev, hessian and linearize call ad.linearize; jvp and
# jacfwd call ad.jvp). Counting them counts autodiff wherever the learner's names for
# jax.grad came from (an alias, a closure, another module).
AD_ENTRY_POINTS = ("linearize", "jvp")


def autodiff_calls(fn, *args) -> dict:
    """Call ``fn(*args)`` with jax's caches cleared (a jitted function traces again) and
    count the autodiff transforms it runs. Returns {"calls": int, "value": fn's result}."""
    import jax
    from jax._src.interpreters import ad

    jax.clear_caches()
    count = [0]
    originals = {name: getattr(ad, name) for name in AD_ENTRY_POINTS}

    def counting(name):
        def wrapper(*a, **k):
            count[0] += 1
            return originals[name](*a, **k)
        return wrapper

    for name in AD_ENTRY_POINTS:
        setattr(ad, name, counting(name))
    try:
        value = jax.block_until_ready(fn(*args))
    finally:
        for name, original in originals.items():
            setattr(ad, name, original)
    return {"calls": count[0], "value": value}


INSPECTORS = {"foundations/autodiff_calls": autodiff_calls}

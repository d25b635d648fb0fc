"""Turning learner results into real values inside a check, or a named failure.

A learner's function may return anything: an object whose ``==`` always says True, a
JAX array where a float was promised, a dict without the promised keys. These helpers
convert first (``float``, ``np.asarray``) and raise ``CheckFailed`` naming what was
wrong, so a check compares real numbers and never trusts the learner's comparisons.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from coursekit.checking.errors import CheckFailed


def short(value: Any, limit: int = 300) -> str:
    """A one-line, bounded rendering of any value for yours:/expected: lines."""
    if isinstance(value, float):
        text = f"{value:.6g}"
    elif isinstance(value, np.ndarray):
        text = np.array2string(value, threshold=8, precision=5).replace("\n", " ")
        text = f"array{value.shape} {value.dtype}: {text}"
    else:
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001 - a hostile __repr__ must not crash the checker
            text = f"<{type(value).__name__} with a broken repr>"
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def fail_unless(cond: bool, message: str, **details) -> None:
    """``raise CheckFailed(message, **details)`` unless ``cond``."""
    if not cond:
        raise CheckFailed(message, **details)


def as_float(value, what: str) -> float:
    """A finite real number from learner output, or a failure naming ``what``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise CheckFailed(f"{what} is not a number", yours=value, expected="a float",
                          hint="return plain floats (float(...)), not arrays or objects")
    value = float(value)
    if not math.isfinite(value):
        raise CheckFailed(f"{what} is not finite", yours=value, expected="a finite float")
    return value


def require_keys(result, keys, what: str) -> dict:
    """``result`` if it is a dict holding every key in ``keys``, else a named failure."""
    if not isinstance(result, dict):
        raise CheckFailed(f"{what} must return a dict", yours=type(result).__name__,
                          expected=f"dict with keys {list(keys)}")
    missing = [k for k in keys if k not in result]
    fail_unless(not missing, f"{what} result lacks keys {missing}", yours=sorted(map(str, result)),
                expected=list(keys), hint="keep the key names of the docstring")
    return result


def as_array(value, what: str, shape=None, dtype=None, dtype_hint: str | None = None,
             shape_hint: str | None = None) -> np.ndarray:
    """``np.asarray(value)`` checked for shape and dtype (a dtype given as anything
    ``np.dtype`` or JAX understands, compared by name), or a named failure; a wrong
    dtype's hint is ``dtype_hint`` when given (the default one is for a function that
    returns its input's dtype), a wrong shape's ``shape_hint``."""
    if not hasattr(value, "shape") or not hasattr(value, "dtype"):
        raise CheckFailed(f"{what} is not an array", yours=type(value).__name__,
                          expected="a jax or numpy array")
    try:
        array = np.asarray(value)
    except Exception as err:  # noqa: BLE001 - a hostile __array__ must fail, not crash
        raise CheckFailed(f"{what} cannot be read as an array: {err}") from None
    if shape is not None:
        fail_unless(tuple(array.shape) == tuple(shape), f"{what} has the wrong shape",
                    yours=tuple(array.shape), expected=tuple(shape), hint=shape_hint or "")
    if dtype is not None:
        want = np.dtype(dtype).name
        fail_unless(array.dtype.name == want, f"{what} has the wrong dtype",
                    yours=array.dtype.name, expected=want,
                    hint=dtype_hint or "return the input's dtype: compute in float32, "
                    "cast once at the end")
    return array


def as_float64_array(value, what: str, shape: tuple | None = None) -> np.ndarray:
    """A finite float64 copy of numeric learner output (anything ``np.asarray`` reads
    as numbers: arrays, scalars, nested lists), checked for ``shape`` when given. An
    object that only pretends to be an array, or whose ``==`` always says True, fails
    here. Unlike ``as_array`` it converts, so float32 results compare in float64."""
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - a hostile object must not crash the checker
        array = None
    if array is None or array.dtype.kind not in "fiu":
        raise CheckFailed(f"{what} is not a numeric array", yours=type(value).__name__,
                          expected="a jax or numpy float array",
                          hint="return jnp arrays computed from the inputs")
    fail_unless(shape is None or array.shape == shape, f"{what} has the wrong shape",
                yours=array.shape, expected=shape)
    array = array.astype(np.float64)
    fail_unless(bool(np.all(np.isfinite(array))), f"{what} is not finite", yours=array)
    return array

"""Values that cross the bridge between the checker and the learner process, as data.

A value becomes a JSON tree plus raw array buffers, never a pickle:

* ``None``, ``bool``, ``int``, ``float``, ``str`` (exact types: a float subclass with its
  own ``__eq__`` is not a float), ``list``, ``tuple``, ``Path``, ``dict`` whose keys are
  those scalars or tuples of them (a pallas block index ``(0, 1)`` is a key);
* numpy arrays and scalars and JAX arrays (dtype name, shape, bytes; rebuilt as the same
  kind, bfloat16 included);
* ``Workload(name, **params)``: a reference the learner process resolves from
  ``coursekit.workloads.catalog`` (the checker sends a name, not code);
* typed PRNG keys (``jax.random.key``): their key data and implementation name, rebuilt
  with ``jax.random.wrap_key_data``;
* ``LearnerFunction(name)``: one of the learner module's own functions, by name, as an
  argument of an inspector (``coursekit.workloads.inspectors``);
* ``Handle``: anything else the learner code returned (an id, its type name, a short
  repr). The checker can only pass it back; the object never leaves the learner process.
"""

from __future__ import annotations

import functools
import itertools
import sys
from pathlib import Path

MAX_DEPTH = 64
_ids = itertools.count(1)


class Workload:
    """A catalog workload by name (``coursekit.workloads.catalog``). After a call that
    used it, ``facts`` holds what the learner process reported about it (its
    ``CallCounter.report()``): self-reported, so a check cross-checks it."""

    def __init__(self, name: str, **params):
        self.name, self.params, self.id = name, params, next(_ids)
        self.facts: dict = {"calls": 0, "compiled_at": [], "compiles": 0,
                            "unready_at_next_call": [], "began_at": [], "returned_at": []}

    def __repr__(self) -> str:
        return f"Workload({self.name!r})"


class LearnerFunction:
    """The learner module's function ``name``, sent by name (the learner process resolves
    it in its own module): how a check hands the learner's code to an inspector."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"LearnerFunction({self.name!r})"


class Handle:
    """An object that stayed in the learner process. It compares by identity only and has
    no number or array conversion, so a check reading it as a value fails by name."""

    def __init__(self, hid: int, type_name: str, text: str):
        self.id, self.type_name, self.text = hid, type_name, text

    def __repr__(self) -> str:
        return f"<{self.type_name} from the learner process: {self.text}>"


@functools.cache
def _handle_class(type_name: str) -> type:
    """A ``Handle`` class named after the learner's type, so a check's message reads "not
    AlwaysEqual" rather than "not Handle" (``Handle`` when the name is not an identifier)."""
    if not (type_name.isidentifier() and len(type_name) <= 60 and type_name.isascii()):
        return Handle
    return type(type_name, (Handle,), {"__module__": "learner process"})


class CodecError(TypeError):
    """A value that cannot be sent (a checker-side programming error)."""


def _plain_key(key) -> bool:
    """A dict key that crosses as data: None, bool, int, float, str, or a tuple of them
    (exact types, so a key with its own ``__hash__``/``__eq__`` stays behind)."""
    if type(key) is tuple:
        return all(_plain_key(k) for k in key)
    return key is None or type(key) in (bool, int, float, str)


def _dtype(name: str):
    import numpy as np
    try:
        dtype = np.dtype(name)
    except TypeError:
        import ml_dtypes  # bfloat16, float8_*: what JAX arrays may hold
        dtype = np.dtype(getattr(ml_dtypes, name))
    if dtype.kind in "OV" and dtype.name not in _ml_names():
        raise CodecError(f"dtype {name} cannot cross the bridge")
    return dtype


@functools.cache
def _ml_names() -> frozenset:
    import ml_dtypes
    return frozenset(n for n in dir(ml_dtypes)
                     if n.startswith(("bfloat", "float", "int", "uint")))


def _is_jax_array(value) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(value, jax.Array)


def _key_impl(value) -> str | None:
    """The implementation name of a typed PRNG key array, or None for any other value."""
    jax = sys.modules["jax"]
    if not jax.dtypes.issubdtype(value.dtype, jax.dtypes.prng_key):
        return None
    return str(jax.random.key_impl(value))


class Encoder:
    """One message's encoder. ``keep``: the learner side's handle table (objects that
    cannot be sent become handles); None on the checker side (such objects are errors).
    ``workloads``: Workloads seen while encoding (checker side)."""

    def __init__(self, keep: dict | None = None):
        self.buffers: list = []
        self.keep = keep
        self.workloads: list[Workload] = []

    def array(self, tag: str, array) -> dict:
        import numpy as np
        if not array.flags.c_contiguous:  # (ascontiguousarray would make 0-d into 1-d)
            array = array.copy(order="C")
        self.buffers.append(array.reshape(-1).view(np.uint8) if array.size else b"")
        return {"$": tag, "i": len(self.buffers), "dtype": array.dtype.name,
                "shape": list(array.shape)}

    def __call__(self, value, depth: int = 0):
        kind = type(value)
        if value is None or kind in (bool, int, float, str):
            return value
        if depth > MAX_DEPTH:
            return self.fallback(value, "nested too deep")
        if kind is list:
            return [self(v, depth + 1) for v in value]
        if kind is tuple:
            return {"$": "tuple", "v": [self(v, depth + 1) for v in value]}
        if kind is dict and all(type(k) is str for k in value):
            return {"$": "dict", "v": {k: self(v, depth + 1) for k, v in value.items()}}
        if kind is dict and all(_plain_key(k) for k in value):  # int, tuple, ... keys
            return {"$": "kdict", "v": [[self(k, depth + 1), self(v, depth + 1)]
                                        for k, v in value.items()]}
        if isinstance(value, Path):
            return {"$": "path", "v": str(value)}
        # numpy is imported only where a value could be one of its arrays (a process that
        # never imported it holds none): a notebook's plain values cross without it
        np = sys.modules.get("numpy")
        if np is not None and kind is np.ndarray and (
                value.dtype.kind not in "OV" or value.dtype.name in _ml_names()):
            return self.array("nd", value)
        if np is not None and isinstance(value, np.generic) \
                and type(value).__module__ in ("numpy", "ml_dtypes"):
            return self.array("np", np.asarray(value))
        if _is_jax_array(value):
            impl = _key_impl(value)
            import numpy as np
            if impl is not None:
                import jax
                data = self.array("nd", np.asarray(jax.random.key_data(value)))
                return {"$": "key", "impl": impl, "data": data}
            try:
                return self.array("jax", np.asarray(value))
            except Exception:  # noqa: BLE001 - typed keys and friends stay behind
                return self.fallback(value, "an array without a plain dtype")
        if kind is Workload:
            self.workloads.append(value)
            return {"$": "workload", "name": value.name, "id": value.id,
                    "params": self(value.params, depth + 1)}
        if isinstance(value, Handle):
            return {"$": "handle", "id": value.id}
        if kind is LearnerFunction:
            return {"$": "learner", "name": value.name}
        return self.fallback(value, "no data form")

    def fallback(self, value, why: str):
        if self.keep is None:
            raise CodecError(f"cannot send a {type(value).__name__} to the learner process "
                             f"({why}); send data or a Workload")
        hid = next(_ids)
        self.keep[hid] = value
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001 - a hostile __repr__ must not break the reply
            text = "<broken repr>"
        text = text if len(text) <= 120 else text[:117] + "..."
        return {"$": "handle", "id": hid, "type": type(value).__name__, "repr": text}


def decode(tree, buffers: list, *, handles: dict | None = None, resolve=None,
           learner=None):
    """Rebuild a value. Learner side: ``handles`` maps ids to kept objects, ``resolve``
    turns a workload reference into a callable and ``learner`` a function name into the
    learner module's function. Checker side: all None."""
    def walk(node):
        if isinstance(node, list):
            return [walk(v) for v in node]
        if not isinstance(node, dict):
            return node
        tag = node.get("$")
        if tag == "tuple":
            return tuple(walk(v) for v in node["v"])
        if tag == "dict":
            return {k: walk(v) for k, v in node["v"].items()}
        if tag == "kdict":
            pairs = [(walk(k), walk(v)) for k, v in node["v"]]
            if not all(_plain_key(k) for k, _ in pairs):
                raise CodecError("a dict key that is not plain data")
            return dict(pairs)
        if tag == "path":
            return Path(node["v"])
        if tag in ("nd", "np", "jax"):
            import numpy as np
            dtype = _dtype(node["dtype"])
            shape = tuple(int(d) for d in node["shape"])
            array = np.frombuffer(buffers[node["i"] - 1], dtype=np.uint8)
            array = array.view(dtype).reshape(shape) if array.size else np.zeros(shape, dtype)
            if tag == "np":
                return array[()]
            if tag == "jax":
                import jax.numpy as jnp
                return jnp.asarray(array)
            return array
        if tag == "handle":
            if handles is not None:
                if node["id"] not in handles:
                    raise CodecError(f"no object {node['id']} in the learner process")
                return handles[node["id"]]
            type_name = str(node.get("type", "?"))
            return _handle_class(type_name)(int(node["id"]), type_name,
                                            str(node.get("repr", "")))
        if tag == "key":
            import jax
            data = walk(node["data"])
            return jax.random.wrap_key_data(data, impl=str(node["impl"]))
        if tag == "learner":
            if learner is None:
                raise CodecError("a learner function reference came back from the learner "
                                 "process")
            return learner(str(node["name"]))
        if tag == "workload":
            if resolve is None:
                raise CodecError("a workload reference came back from the learner process")
            return resolve(node["name"], walk(node["params"]), node["id"])
        raise CodecError(f"unknown value tag {tag!r}")
    return walk(tree)

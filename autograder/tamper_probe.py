"""Kernel side of the notebook tamper probe (``autograder.tamper`` is the grader side).

The grader sends this file's text to a fresh kernel before any learner cell runs and
calls ``install(key_hex, modname, targets)``: it takes references to the originals of
everything a cell could use to forge a graded test cell (IPython's transformer lists, event
callbacks, custom exception handler, the shell/kernel/session classes and instances,
``sys`` hooks, trace/profile/monitoring, builtins, numpy/numpy.testing/math/unittest)
and records their identities. ``targets`` are the dotted names the notebook's test cells
call (``autograder.tamper.watch_targets``: ``jax.random.key_data``, ``numpy.asarray``,
``coursekit.notebook.cells.record_prediction``, ``jax.stages.Compiled``...): each is
imported now, before any learner cell, and every module and class on its path is watched
as well (the module's functions, classes and submodules; the class's attributes, its
bases' too), with the object the name resolves to. Before and after each graded cell the
grader evaluates ``sys.modules[modname].probe(nonce, names)`` as a user expression (not a
cell: no transformer or event sees it); the answer lists every change as a sentence,
signed with HMAC-SHA256 under a key only this closure and the grader hold, so a probe that
was replaced, silenced or answered by someone else is itself a finding.

Everything here is looked up once, at install time, and held in this closure; the probe
compares with ``is``, reads modules and classes through their own dicts (no attribute
hook a cell installs runs) and builds its answer with methods of built-in types, which no
cell can replace. Its own code is standard library and IPython only (the kernel has no
``autograder``); it imports the targets besides.
"""


def install(key_hex, modname, targets=()):  # noqa: C901 - one closure on purpose
    import builtins
    import hashlib
    import importlib
    import math
    import sys
    import threading
    import types
    import unittest

    from IPython import get_ipython

    try:
        import numpy
        import numpy.testing
    except ImportError:  # a kernel without numpy watches the rest
        numpy = None

    key = bytes.fromhex(key_hex)
    sha256, is_callable, len_, type_, tuple_, dict_, range_ = (
        hashlib.sha256, builtins.callable, len, type, tuple, dict, range)
    repr_, sorted_, str_, isinstance_, getattr_ = repr, sorted, str, isinstance, getattr
    static, classm, zip_, all_, any_, id_ = staticmethod, classmethod, zip, all, any, id
    prop = property
    join, encode, append = str.join, str.encode, list.append
    method_type, function_type, module_type = types.MethodType, types.FunctionType, \
        types.ModuleType
    class_dict = type.__dict__["__dict__"].__get__
    instance_dict = object.__getattribute__
    gettrace, getprofile = sys.gettrace, sys.getprofile
    th_gettrace, th_getprofile = threading.gettrace, threading.getprofile
    monitoring = sys.monitoring
    get_tool = monitoring.get_tool
    sys_dict, modules = instance_dict(sys, "__dict__"), sys.modules
    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    session = getattr(kernel, "session", None)
    missing = object()

    def same(a, b):
        if a is b:
            return True
        return (type_(a) is method_type and type_(b) is method_type
                and a.__func__ is b.__func__ and a.__self__ is b.__self__)

    prefixes = tuple_({sys.prefix, sys.base_prefix})
    trusted = ("matplotlib_inline.", "matplotlib.", "IPython.", "ipykernel.", "ipywidgets.")
    startswith, split = str.startswith, str.split

    def genuine(f):
        """An event callback that is the real function of an installed library (the
        inline plot backend registers ``flush_figures``), found where it says it lives."""
        target = f.__func__ if type_(f) is method_type else f
        if type_(target) is not function_type:
            return False
        name = target.__module__
        if not isinstance_(name, str_) or not startswith(name, trusted) \
                or not startswith(target.__code__.co_filename, prefixes):
            return False
        obj = modules.get(name)
        for part in split(target.__qualname__, "."):
            space = class_dict(obj) if isinstance_(obj, type) else own(obj)
            obj = space.get(part, missing)
            if type_(obj) in (static, classm):
                obj = obj.__func__
        return obj is target

    def own(obj):
        try:
            return instance_dict(obj, "__dict__")
        except (AttributeError, TypeError):
            return {}

    classes = []
    for obj in (shell, kernel, session, shell.compile, shell.input_transformer_manager,
                shell.events, shell.displayhook, shell.display_pub,
                shell.display_formatter, unittest.TestCase):
        cls = obj if isinstance_(obj, type) else type_(obj)
        for c in cls.__mro__:
            if c is not object and c not in classes:
                classes.append(c)

    # What the test cells call: imported now (before any learner cell); every module and
    # class on each name's path, and the object the whole name resolves to.
    def lookup(obj, part):
        """``getattr`` without running anything a cell could have installed: a module's
        own dict, or the dicts of a class's MRO (no __getattr__, no descriptors)."""
        if isinstance_(obj, type):
            for c in obj.__mro__:
                found = class_dict(c).get(part, missing)
                if found is not missing:
                    return found
            return missing
        return own(obj).get(part, missing)

    target_modules, target_names, target_classes, unresolved = {}, {}, [], []
    for target in targets:
        parts = split(target, ".")
        try:
            obj = importlib.import_module(parts[0])
        except Exception:  # noqa: BLE001 - reported to the instructor, not a finding
            append(unresolved, target)
            continue
        target_modules[parts[0]] = obj
        root, path = obj, []
        for i, part in enumerate(parts[1:], 1):
            nxt = lookup(obj, part)
            if nxt is missing and type_(obj) is module_type:
                try:  # a submodule not imported yet
                    nxt = importlib.import_module(join(".", parts[:i + 1]))
                except Exception:  # noqa: BLE001 - not a module: left unresolved
                    nxt = missing
            if nxt is missing:
                append(unresolved, target)
                break
            obj = nxt
            append(path, part)
            if type_(obj) is module_type:
                target_modules[join(".", parts[:i + 1])] = obj
            elif isinstance_(obj, type):
                for c in obj.__mro__:
                    if c is not object and c not in classes and c not in target_classes:
                        append(target_classes, c)
            elif i < len_(parts) - 1:
                break  # an attribute of a function or value: not a namespace of its own
        else:
            target_names[target] = (root, tuple_(path))

    def resolved(root, path):
        obj = root
        for part in path:
            obj = lookup(obj, part)
            if obj is missing:
                return missing
        return obj

    events = ("pre_execute", "pre_run_cell", "post_execute", "post_run_cell")
    watched_modules = ("builtins", "sys", "math", "unittest", "numpy", "numpy.testing",
                       "IPython.core.interactiveshell", "ipykernel.ipkernel")

    # label -> (kind, getter); kind "obj": identity, "seq": item identities, "map": the
    # identity of every value present at install (and, "map+", no new callables), "mod":
    # the identity of every callable or module present at install, "cls": "map" and no
    # new callables or descriptors
    watch = {
        "the IPython shell's class": ("obj", lambda: type_(shell)),
        "the notebook's namespace (user_ns)": ("obj", lambda: shell.user_ns),
        "the notebook's __builtins__": ("obj", lambda: shell.user_ns.get("__builtins__")),
        "IPython input transformers (input_transformers_cleanup)":
            ("seq", lambda: shell.input_transformer_manager.cleanup_transforms),
        "IPython line transformers": (
            "seq", lambda: shell.input_transformer_manager.line_transforms),
        "IPython token transformers": (
            "seq", lambda: shell.input_transformer_manager.token_transformers),
        "IPython input transformers (input_transformers_post)":
            ("seq", lambda: shell.input_transformers_post),
        "IPython AST transformers (ast_transformers)": ("seq", lambda: shell.ast_transformers),
        "IPython custom exception handler (set_custom_exc)":
            ("obj", lambda: shell.custom_exceptions),
        "the IPython shell's attributes": ("map+", lambda: own(shell)),
        "the kernel's attributes": ("map+", lambda: own(kernel)),
        "the kernel session's attributes": ("map+", lambda: own(session)),
        "the kernel's message handlers": ("map", lambda: getattr(kernel, "shell_handlers", {})),
        "sys.settrace (a trace function is set)": ("obj", gettrace),
        "sys.setprofile (a profile function is set)": ("obj", getprofile),
        "threading.settrace": ("obj", th_gettrace),
        "threading.setprofile": ("obj", th_getprofile),
        "sys.monitoring tools": ("seq", lambda: [get_tool(i) for i in range_(6)]),
        "builtins": ("map", lambda: instance_dict(builtins, "__dict__")),
        "math": ("map", lambda: instance_dict(math, "__dict__")),
    }
    for name in ("excepthook", "displayhook", "breakpointhook", "unraisablehook"):
        watch[f"sys.{name}"] = ("obj", lambda name=name: sys_dict.get(name, missing))
    events_labels = frozenset(f"IPython event callbacks on {e}" for e in events)
    for event in events:
        watch[f"IPython event callbacks on {event}"] = (
            "seq", lambda event=event: shell.events.callbacks.get(event, ()))
    for name in watched_modules:
        watch[f"sys.modules[{name!r}]"] = ("obj", lambda name=name: modules.get(name))
    if numpy is not None:
        watch["numpy"] = ("map", lambda: instance_dict(numpy, "__dict__"))
        watch["numpy.testing"] = ("map", lambda: instance_dict(numpy.testing, "__dict__"))
    for name, mod in target_modules.items():
        if name in watched_modules:
            continue
        # its functions, classes and submodules (data such as caches and flags may change)
        watch[f"module {name}"] = ("mod", lambda mod=mod: own(mod))
        watch[f"module {name}'s type"] = ("obj", lambda mod=mod: type_(mod))
        watch[f"sys.modules[{name!r}]"] = ("obj", lambda name=name: modules.get(name))
    for target, (root, path) in target_names.items():
        watch[f"{target} (what the test cells call)"] = (
            "obj", lambda root=root, path=path: resolved(root, path))
    for cls in classes:
        label = f"{cls.__module__}.{cls.__qualname__}"
        watch[label] = ("map+", lambda cls=cls: class_dict(cls))
    for cls in target_classes:  # every attribute: a property or a constant counts too
        label = f"{cls.__module__}.{cls.__qualname__}"
        watch[label] = ("cls", lambda cls=cls: class_dict(cls))
    classes += target_classes

    def snap(kind, value):
        if kind == "obj":
            return value
        if kind == "seq":
            return tuple_(value)
        return dict_(value)

    audited = {"n": 0, "what": []}
    loud = frozenset({"sys.settrace", "sys.setprofile", "sys.monitoring.register_callback",
                      "sys._setprofileallthreads", "sys._settraceallthreads"})
    watched_types = frozenset(id_(c) for c in classes)

    getframe = sys._getframe

    def hook(event, args):
        """While a graded cell runs (armed): a trace, profile or monitoring function set,
        or a watched class changed, by code that is not an installed library (jax's
        profiler sets a profile function). Audit hooks cannot be removed, so this sees
        changes that a cell makes and undoes before the next probe."""
        if not state["armed"]:
            return
        if event in loud and startswith(getframe(1).f_code.co_filename, prefixes):
            return
        if event in loud:
            if event.startswith("sys.monitoring") and args and args[-1] is None:
                return
            audited["n"] += 1
            if len_(audited["what"]) < 5:
                append(audited["what"], f"{event} was called")
        elif event in ("object.__setattr__", "object.__delattr__") and args \
                and id_(args[0]) in watched_types:
            audited["n"] += 1
            if len_(audited["what"]) < 5:
                append(audited["what"], f"{args[0].__qualname__}.{args[1]} was set")

    base: dict = {}
    state = {"started": False, "armed": False}

    def findings(names):
        found = []
        for label, (kind, get) in watch.items():
            try:
                now = snap(kind, get())
            except Exception as err:  # noqa: BLE001 - a watched thing that breaks is news
                append(found, f"{label}: cannot be read ({type_(err).__name__})")
                continue
            was = base[label]
            if kind == "obj":
                if not same(was, now):
                    append(found, f"{label} was replaced")
            elif kind == "seq":
                if label in events_labels:  # a library's own callback is no forgery
                    gone = [w for w in was if not any_(same(w, f) for f in now)]
                    added = [f for f in now if not any_(same(f, w) for w in was)
                             and not genuine(f)]
                    if gone or added:
                        names = join(", ", [str_(getattr_(f, "__qualname__", "?"))
                                            for f in added[:3]])
                        append(found, f"{label} changed ({len_(added)} added"
                                      + (f": {names}" if names else "")
                                      + f", {len_(gone)} removed)")
                    continue
                if len_(was) != len_(now) or not all_(same(a, b) for a, b in zip_(was, now)):
                    append(found, f"{label} changed ({len_(was)} -> {len_(now)} entries)")
            else:
                changed = [k for k, v in was.items()
                           if not same(v, now.get(k, missing))
                           and (kind in ("map", "cls") or is_callable(v)
                                or type_(v) is module_type)]
                if kind in ("map+", "cls"):
                    changed += [k for k, v in now.items() if k not in was
                                and (type_(v) in (function_type, method_type)
                                     or isinstance_(v, (static, classm))
                                     or (kind == "cls" and isinstance_(v, prop)))]
                if changed:
                    shown = join(", ", [str_(k) for k in sorted_(changed, key=str_)[:6]])
                    append(found, f"{label}: {shown} replaced")
        if audited["n"]:
            append(found, join("; ", audited["what"]) + f" ({audited['n']} time(s))")
        ns = shell.user_ns
        for name in names:  # builtins the graded cell uses, shadowed in the notebook
            if name in ns and name in base["builtins"] and not same(ns[name],
                                                                   base["builtins"][name]):
                append(found, f"{name} is redefined in the notebook (a builtin the "
                              "test cell uses)")
        return found

    def sign(nonce, text):
        inner = sha256(bytes(b ^ 0x36 for b in key.ljust(64, b"\0")) +
                       encode(nonce + "\n" + text)).digest()
        return sha256(bytes(b ^ 0x5C for b in key.ljust(64, b"\0")) + inner).hexdigest()

    def start(nonce):
        if state["started"]:
            return "again"
        state["started"] = True
        for label, (kind, get) in watch.items():
            base[label] = snap(kind, get())
        sys.addaudithook(hook)
        text = "started" + ("\nnot watched (not importable): " + join(", ", unresolved)
                            if unresolved else "")
        return sign(nonce, text) + "|" + text

    def probe(nonce, names=(), arm=False):
        """What changed since install; ``arm``: a graded cell runs next."""
        if not state["started"]:
            return "not started"
        text = join("\n", findings(names))
        audited["n"], audited["what"], state["armed"] = 0, [], arm is True
        return sign(nonce, text) + "|" + text

    module = types.ModuleType(modname)
    module.start, module.probe = start, probe
    modules[modname] = module
    return repr_(modname)

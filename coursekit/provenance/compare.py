"""Tell an image or runtime change from a model optimisation: compare two run records only
when their environment fingerprints agree.

Every run record carries ``fingerprint`` (``coursekit.measure.environment.environment_fingerprint``:
jax and jaxlib versions, backend, device count, XLA flags, CPU model and cores, Python,
numpy, platform). When two records differ there, a speedup between them may come from
the environment (a new image, other flags, another machine) rather than from the code,
so the comparison is refused (or, on request, made and flagged).

    diffs = fingerprint_diff(before, after)           # [] when the environments agree
    verdict = guarded_decide(before, after, impl.decide)
    verdict["decision"], verdict["refused"], verdict["environment_differs"]
    change_kind(before, after)["kind"]               # "environment" or "code"
"""

from __future__ import annotations

MODES = ("refuse", "flag")


class FingerprintMismatch(Exception):
    """Two runs were measured in different environments; the message names each field."""


def _fingerprint(run) -> dict:
    if isinstance(run, dict) and isinstance(run.get("fingerprint"), dict):
        return run["fingerprint"]
    if isinstance(run, dict) and "fingerprint" not in run:
        return run  # already a fingerprint
    raise FingerprintMismatch("a run record without a fingerprint dict cannot be compared: "
                              "write records with coursekit.provenance.records.make_run_record")


def fingerprint_diff(a, b, ignore: tuple = ()) -> list[str]:
    """One short sentence per fingerprint field that differs between ``a`` and ``b``
    (run records or fingerprint dicts), e.g. ``"devices: 8 vs 2"``; fields in ``ignore``
    are skipped; a field present on one side only counts as different."""
    fa, fb = _fingerprint(a), _fingerprint(b)
    missing = object()
    diffs = []
    for key in sorted(set(fa) | set(fb)):
        if key in ignore:
            continue
        va, vb = fa.get(key, missing), fb.get(key, missing)
        if va != vb:
            show = lambda v: "(absent)" if v is missing else repr(v)  # noqa: E731
            diffs.append(f"{key}: {show(va)} vs {show(vb)}")
    return diffs


def require_same_environment(a, b, *, what: str = "these two runs", ignore: tuple = ()) -> None:
    """Raise FingerprintMismatch naming every differing field, or return None."""
    diffs = fingerprint_diff(a, b, ignore)
    if diffs:
        raise FingerprintMismatch(f"{what} ran in different environments ("
                                  + "; ".join(diffs) + "): a difference in time may come "
                                  "from the environment, not the code; measure both in "
                                  "one environment")


def guarded_decide(before: dict, after: dict, decide, *, mode: str = "refuse",
                   ignore: tuple = (), **decide_kwargs) -> dict:
    """``decide(before, after)`` only when the fingerprints agree.

    mode "refuse": differing fingerprints give {"decision": "reject", "refused": True,
    "reasons": ["environment differs: ...", ...], "ratio": None, "ci": None} without
    calling ``decide``. mode "flag": ``decide`` runs, its result gets the differences
    added to its reasons, and an "accept" becomes "reject" (a speedup across
    environments is not evidence about the code). Every result carries
    "environment_differs" (the list, empty when they agree) and "refused"."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    diffs = fingerprint_diff(before, after, ignore)
    reasons = [f"environment differs: {d}" for d in diffs]
    if diffs and mode == "refuse":
        return {"decision": "reject", "refused": True, "reasons": reasons, "ratio": None,
                "ci": None, "environment_differs": diffs}
    result = dict(decide(before, after, **decide_kwargs))
    result["refused"] = False
    result["environment_differs"] = diffs
    if diffs:
        result["reasons"] = list(result.get("reasons", [])) + reasons
        if result.get("decision") == "accept":
            result["decision"] = "reject"
            result["reasons"].append("flagged: the speedup was measured across "
                                     "environments, so it is not evidence about the code")
    return result


# What an image or runtime change moves: the software stack, then where it ran.
STACK_FIELDS = ("jax", "jaxlib", "python", "numpy", "platform", "xla_flags")
PLACE_FIELDS = ("backend", "devices", "cpu", "cpu_cores")


def change_kind(before, after) -> dict:
    """How the course reads the difference between two run records, before any time is
    compared: ``{"kind", "stack", "place", "other", "sentence"}``.

    ``kind`` "environment" when the fingerprints differ at all (an image or runtime
    change: a new JAX, other flags, another backend or machine; the times are not compared
    as a model change), else "code" (one environment: a difference in time is the code's,
    for ``decide`` to judge). ``stack`` / ``place`` / ``other``: the differing fields of
    the software stack (``STACK_FIELDS``), of where it ran (``PLACE_FIELDS``) and any
    other, each as ``fingerprint_diff`` words them."""
    diffs = fingerprint_diff(before, after)
    field = {d.split(":", 1)[0]: d for d in diffs}
    stack = [field[k] for k in STACK_FIELDS if k in field]
    place = [field[k] for k in PLACE_FIELDS if k in field]
    other = [d for k, d in field.items() if k not in STACK_FIELDS + PLACE_FIELDS]
    if not diffs:
        return {"kind": "code", "stack": [], "place": [], "other": [],
                "sentence": "one environment (every fingerprint field equal): a difference in "
                            "time is the code's, and decide() judges it"}
    parts = ([f"software stack: {'; '.join(stack)}"] if stack else []) + \
        ([f"where it ran: {'; '.join(place)}"] if place else []) + \
        ([f"also: {'; '.join(other)}"] if other else [])
    return {"kind": "environment", "stack": stack, "place": place, "other": other,
            "sentence": "an image/runtime change (" + " | ".join(parts) + "): the two "
                        "are never compared as a model change; measure both variants in "
                        "one environment"}

"""Learner names as data: the one way a name becomes a path the grader writes.

A learner's name is whatever its submission folder or zip is called: any Unicode, in
either normal form (a folder made on macOS arrives decomposed, NFD), any case, with
spaces, dots, ``~``, separators or control characters. Turned into a folder name by
hand, names collided (``jane~doe`` and ``jane_doe`` both became ``jane_doe``: one
learner's feedback replaced the other's) or escaped (``" .."`` wrote feedback beside the
gradebook). So every per-learner path comes from ``folder``:

* an **injective** encoding of the name's exact characters: ``a-z``, ``0-9``, ``_``, and
  ``.``/``-`` (not first) stay as they are; an upper-case letter becomes ``+`` and the
  letter (Go's module cache escapes case the same way, with ``!``); every other
  character becomes ``%`` and the lower-case hex of its UTF-8 bytes. Two names that
  differ in any way, in normal form included (NFC and NFD ``josé``), get two folders.
* **normalised** for any file system: the result is plain lower-case ASCII, never
  ``.``/``..``, never starts with ``.`` or ``-``, holds no separator, ``~`` or control
  character, so a case-insensitive or normalising file system cannot make two folders
  one; longer than ``MAX_CHARS`` it is cut and ended with ``=`` and a hash of the whole
  name (``=`` appears in no uncut folder name).

``assign`` maps a whole class at once and refuses, by name and for that learner alone,
a name that cannot be a folder (empty) and any second name that lands on a folder
already taken (only a cut name's hash could do it); ``inside`` resolves a folder under
its parent and refuses one that would leave it.
"""

from __future__ import annotations

import hashlib
import string
import unicodedata
from collections.abc import Iterable
from pathlib import Path

MAX_CHARS = 120          # a folder name stays well under the 255 bytes a file system allows
CUT_AT, HASH_CHARS = 96, 20
KEPT = frozenset(string.ascii_lowercase + string.digits + "_.-")
NOT_FIRST = frozenset(".-")   # a leading dot hides a folder (and makes . or ..); a dash
#                               reads as an option in a shell command


class NameRefused(ValueError):
    """A learner name that gets no folder (the reason is for the instructor)."""


def _raw(name: str) -> bytes:
    # names read from the file system may carry undecodable bytes as surrogates
    return name.encode("utf-8", "surrogateescape")


def _escaped(ch: str) -> str:
    return "".join(f"%{b:02x}" for b in _raw(ch))


def _tokens(name: str) -> list[str]:
    """One piece of the folder name per character of ``name``."""
    out = []
    for i, ch in enumerate(name):
        if ch in KEPT and not (i == 0 and ch in NOT_FIRST):
            out.append(ch)
        elif "A" <= ch <= "Z":
            out.append("+" + ch.lower())
        else:
            out.append(_escaped(ch))
    return out


def encode(name: str) -> str:
    """The folder name of ``name`` (without the length cut)."""
    return "".join(_tokens(name))


def folder(name: str) -> str:
    """``encode(name)``, cut to ``MAX_CHARS`` with a hash of the name when longer."""
    if not isinstance(name, str) or not name:
        raise NameRefused("an empty name cannot be a folder")
    tokens = _tokens(name)
    if sum(map(len, tokens)) <= MAX_CHARS:
        return "".join(tokens)
    cut = ""
    for token in tokens:  # whole characters only, never half an escape
        if len(cut) + len(token) > CUT_AT:
            break
        cut += token
    return f"{cut}={hashlib.sha256(_raw(name)).hexdigest()[:HASH_CHARS]}"


def shown(name: str) -> str:
    """The name as a person reads it, with its folder name where two names could look
    the same (not NFC, or an unprintable character): ``josé [jose%cc%81]``."""
    if unicodedata.normalize("NFC", name) == name and name.isprintable():
        return name
    from autograder.textsafe import line  # one line, whatever the name holds
    return f"{line(name)} [{folder(name) if name else ''}]"


def assign(names: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(name -> folder name, refused name -> why) for a class. A name whose folder is
    already another name's is refused, the one seen first keeping it (names are taken
    in sorted order, so the outcome does not depend on the caller's order)."""
    taken: dict[str, str] = {}
    given: dict[str, str] = {}
    refused: dict[str, str] = {}
    for name in sorted(set(names)):
        try:
            path = folder(name)
        except NameRefused as err:
            refused[name] = str(err)
            continue
        key = path.casefold()
        if key in taken:
            refused[name] = (f"its folder name {path!r} is already {shown(taken[key])!r}'s; "
                             "rename one of the two submissions")
            continue
        taken[key] = name
        given[name] = path
    return given, refused


def inside(parent: Path, name: str, given: str | None = None) -> Path:
    """``parent / folder(name)`` (or ``parent / given``, the folder ``assign`` gave the
    name), refused (``NameRefused``) unless it stays directly under ``parent`` once
    links are resolved."""
    parent = Path(parent)
    target = parent / (folder(name) if given is None else given)
    real_parent = parent.resolve()
    if target.resolve().parent != real_parent or target.name in ("", ".", ".."):
        raise NameRefused(f"the folder for {shown(name)!r} would leave {parent}")
    return target

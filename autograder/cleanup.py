"""Removing a folder tree a submission could have built, whatever its shape.

``shutil.rmtree`` recurses once per level (a 3,000-level tree raised RecursionError inside
``rmtree(ignore_errors=True)``) and names entries by their full path (past PATH_MAX at a
few hundred levels). ``remove_tree`` walks with directory descriptors and a stack, never
holds more than ``MAX_OPEN`` of them (a folder that deep is moved up to the top and taken
apart from there), makes folders it owns writable on its way (a learner's chmod 000), and
returns what it could not remove instead of raising: the caller reports it and goes on.
"""

from __future__ import annotations

import os
import secrets
import stat

MAX_OPEN = 64
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _open_dir(name: str, parent: int) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except PermissionError:  # a folder its owner (us, without root) made unreadable
        os.chmod(name, 0o700, dir_fd=parent, follow_symlinks=False)
        return os.open(name, _DIR_FLAGS, dir_fd=parent)


def _empty(top: int, errors: list[str]) -> bool:
    """One pass over the tree under ``top``; True when it made it empty. Folders deeper
    than MAX_OPEN are moved into ``top`` for the next pass."""
    stack = [(top, os.listdir(top), None, None)]  # (fd, names left, parent fd, name)
    moved = False
    while stack:
        fd, names, parent, name = stack[-1]
        if not names:
            stack.pop()
            if parent is not None:
                os.close(fd)
                try:
                    os.rmdir(name, dir_fd=parent)
                except OSError as err:
                    errors.append(f"{name}: {err.strerror}")
            continue
        entry = names.pop()
        try:
            info = os.stat(entry, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(info.st_mode):
                os.unlink(entry, dir_fd=fd)
            elif len(stack) >= MAX_OPEN:
                os.rename(entry, f".deep-{secrets.token_hex(8)}", src_dir_fd=fd,
                          dst_dir_fd=top)
                moved = True
            else:
                os.chmod(entry, 0o700, dir_fd=fd, follow_symlinks=False) \
                    if info.st_uid == os.geteuid() and info.st_mode & 0o700 != 0o700 else None
                child = _open_dir(entry, fd)
                stack.append((child, os.listdir(child), fd, entry))
        except OSError as err:
            errors.append(f"{entry}: {err.strerror}")
    return not moved and not os.listdir(top)


def remove_tree(path) -> str:
    """Remove ``path`` (a folder tree, a file or a link); '' when it is gone, else why
    not (the first few errors)."""
    path = os.fspath(path)
    if not os.path.lexists(path):
        return ""
    errors: list[str] = []
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            top = os.open(path, _DIR_FLAGS)
            try:
                for _ in range(100_000):  # each pass takes MAX_OPEN levels at least
                    before = len(errors)
                    if _empty(top, errors) or len(errors) > before:
                        break
            finally:
                os.close(top)
            os.rmdir(path)
        else:
            os.unlink(path)
    except OSError as err:
        errors.append(f"{path}: {err.strerror}")
    return "" if not os.path.lexists(path) else "; ".join(errors[:5]) or "still there"

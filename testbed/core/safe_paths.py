"""Directories and files a root process can trust: made by itself, under parents no other user
can write, opened without following symlinks.

A root tool that writes into a directory another user controls, then reads or executes what it
wrote, hands that user root: between the write and the use they swap the file, or plant a
symlink where the file will be. Every run, calibration and state directory therefore is either
made here (``mkdir`` without ``exist_ok``, so a planted directory or symlink is refused) or is
one this user owns and no one else can write.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from testbed.core.errors import FabricLabError

# O_NOFOLLOW: the last component may not be a symlink; O_CLOEXEC: no child inherits it
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
APPEND_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC


def _trusted_owner(uid: int) -> bool:
    return uid in (0, os.geteuid())


def _unsafe_reason(st: os.stat_result) -> str | None:
    """Why another user could change what this directory entry holds (None: nobody can)."""
    if not _trusted_owner(st.st_uid):
        return f"belongs to uid {st.st_uid}"
    if stat.S_ISDIR(st.st_mode) and st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        return "is writable by other users"
    return None


def check_ancestors(path: Path | str) -> None:
    """Refuse ``path`` if an existing directory above it (on the path as written and on the
    path its symlinks lead to) could be changed by another user: owned by one, or writable by
    others without the sticky bit that /tmp has. A symlink on the way must be root's or ours."""
    path = Path(os.path.abspath(path))
    existing = path
    while not os.path.lexists(existing):
        existing = existing.parent
    for chain in (existing, Path(os.path.realpath(existing))):
        for part in (*reversed(chain.parents), chain):
            if part == path:
                continue  # the entry itself is judged by the caller
            st = os.lstat(part)
            if stat.S_ISLNK(st.st_mode) and not _trusted_owner(st.st_uid):
                _refuse(path, part, f"is a symlink of uid {st.st_uid}")
            if not stat.S_ISLNK(st.st_mode) and (why := _unsafe_reason(st)):
                _refuse(path, part, why)


def _refuse(path: Path, part: Path, why: str) -> None:
    raise FabricLabError(
        f"refusing {path}: {part} {why}, so another user could swap what fabriclab writes "
        "there and later reads or runs as root; choose a directory under one only you (or "
        "root) can write")


def make_dir(path: Path | str, mode: int = 0o755) -> Path:
    """Make the directory ``path`` (and missing parents) as this user, refusing one that
    exists already (a directory or a symlink someone planted) or a parent another user
    could change (:func:`check_ancestors`)."""
    path = Path(os.path.abspath(path))
    check_ancestors(path)
    missing = [p for p in (*reversed(path.parents), path) if not os.path.lexists(p)]
    if path not in missing:
        raise FabricLabError(
            f"{path} exists already: fabriclab writes a run only into a directory it makes "
            "itself; give a path that does not exist yet")
    for p in missing:
        try:
            os.mkdir(p, mode)
        except FileExistsError:
            raise FabricLabError(
                f"{p} appeared while fabriclab was making it: another process is racing "
                "for this path; choose another") from None
        except OSError as exc:
            raise FabricLabError(f"cannot make {p}: {exc.strerror or exc}") from None
    return path


def require_own_dir(path: Path | str) -> Path:
    """Accept an existing directory only if it is this user's (or root's), no other user can
    write it or a directory above it, and it is not a symlink."""
    path = Path(os.path.abspath(path))
    check_ancestors(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise FabricLabError(f"{path} does not exist") from None
    if stat.S_ISLNK(st.st_mode):
        raise FabricLabError(f"refusing {path}: it is a symlink; give the directory itself")
    if not stat.S_ISDIR(st.st_mode):
        raise FabricLabError(f"refusing {path}: it is not a directory")
    if why := _unsafe_reason(st):
        _refuse(path, path, why)
    return path


def own_or_new_dir(path: Path | str, mode: int = 0o755) -> Path:
    """:func:`require_own_dir` if ``path`` exists (a symlink counts), else :func:`make_dir`."""
    return require_own_dir(path) if os.path.lexists(path) else make_dir(path, mode)


def open_append(path: Path | str, mode: int = 0o644) -> int:
    """A descriptor appending to ``path`` (made if missing); a symlink there is refused."""
    try:
        return os.open(path, APPEND_FLAGS, mode)
    except OSError as exc:
        raise FabricLabError(f"cannot open {path}: {exc.strerror or exc} (a symlink is "
                             "refused)") from None


CODE_DIRS = ("testbed", "sdn_app", "workloads", "analysis", "bin", "scripts")


def checkout_problem(checkout: Path) -> str | None:
    """One sentence if a user other than this one (or root) could change the code root runs
    from ``checkout``: the checkout, a directory above it, or anything in its code
    directories (:data:`CODE_DIRS`) owned by them or writable by group or others; None when
    nobody could. The sentence names the command that fixes it."""
    fix = (f"run `chown -R root:root {checkout} && chmod -R go-w {checkout}` (or install "
           "from a copy only root can write)")
    try:
        check_ancestors(checkout / "x")  # the checkout itself and every directory above
    except FabricLabError as exc:
        return f"{str(exc).split(';')[0]}; {fix}"
    for name in CODE_DIRS:
        for top, dirs, files in os.walk(checkout / name):
            for entry in (top, *(os.path.join(top, n) for n in dirs + files)):
                st = os.lstat(entry)
                writable = st.st_mode & 0o022 and not stat.S_ISLNK(st.st_mode)
                if not _trusted_owner(st.st_uid) or writable:
                    who = (f"belongs to uid {st.st_uid}" if not _trusted_owner(st.st_uid)
                           else "is writable by other users")
                    return (f"refusing to run as root from {checkout}: {entry} {who}, so "
                            f"they could change what root runs; {fix}")
    return None

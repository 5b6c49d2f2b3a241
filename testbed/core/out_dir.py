"""The one check every command's ``--out`` goes through: an existing, non-empty directory (or
an existing file, for a command that writes one file) is refused in one sentence unless
``--force`` is given; with ``--force`` the directory is emptied first, so no file of an
earlier run is left beside the new ones.

Emptying never leaves the directory: its entries are unlinked (a symlink is removed, never
followed) and its subdirectories removed with :func:`shutil.rmtree`, which does not follow
symlinks either; a ``--out`` that is itself a symlink is refused. And ``--force`` empties only
a directory a fabriclab command made its output: each writes :data:`MARKER` into its ``--out``,
so a mistyped ``--out ~`` or ``--out .`` (fabriclab runs as root) is refused, never emptied.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from testbed.core.errors import FabricLabError

FORCE_HELP = ("with --out: empty an existing directory a fabriclab command wrote first (only "
              "what is inside it; symlinks in it are removed, never followed) instead of "
              "refusing it")
MARKER = ".fabriclab-out"  # in every --out a command wrote: what --force may empty


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def check_out_target(path: Path | str, flag: str = "--out") -> Path:
    """Refuse ``path`` if it is a symlink or a file; a directory or nothing passes."""
    path = Path(path)
    st = _lstat(path)
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise FabricLabError(f"{flag} {path} is a symlink; give the directory itself")
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise FabricLabError(f"{flag} {path} is a file; name a directory to write into")
    return path


def check_out_dir(path: Path | str, force: bool, flag: str = "--out") -> Path:
    """Refuse ``path`` if it is a symlink, a file, or a non-empty directory (unless ``force``
    and a fabriclab command wrote it); a missing or empty directory passes. Call it before the
    work starts, and :func:`clear_out_dir` just before writing."""
    path = check_out_target(path, flag)
    entries = sorted(os.listdir(path)) if path.is_dir() else []
    if entries and not force:
        shown = ", ".join(entries[:3]) + (", …" if len(entries) > 3 else "")
        raise FabricLabError(
            f"{flag} {path} exists and is not empty ({len(entries)} entries: {shown}); "
            "choose a new directory, or add --force to empty it first")
    if entries and not _marked(path):
        raise FabricLabError(
            f"{flag} {path} is not a directory a fabriclab command wrote (it has no {MARKER}), "
            "so --force will not empty it; choose a new directory, or clear it yourself")
    return path


def _marked(path: Path) -> bool:
    st = _lstat(path / MARKER)
    return st is not None and stat.S_ISREG(st.st_mode)


def mark_out_dir(path: Path | str) -> Path:
    """Make ``path`` (if missing) and mark it as a fabriclab command's output."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / MARKER).write_text("written by fabriclab; --force may empty this directory\n")
    except OSError as exc:
        raise FabricLabError(f"cannot write results to {path}: {exc.strerror or exc}") from None
    return path


def clear_out_dir(path: Path | str, flag: str = "--out") -> Path:
    """Make ``path`` an empty, marked directory: made if missing, emptied if it exists and a
    fabriclab command wrote it (only its own entries; nothing a symlink in it points at is
    touched)."""
    path = check_out_dir(path, force=True, flag=flag)
    try:
        path.mkdir(parents=True, exist_ok=True)
        with os.scandir(path) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)
                else:
                    os.unlink(entry.path)
    except OSError as exc:
        raise FabricLabError(f"cannot write results to {path}: {exc.strerror or exc}") from None
    return mark_out_dir(path)


def check_out_file(path: Path | str, force: bool, flag: str = "--out") -> Path:
    """Refuse an existing ``path`` unless ``force`` (then it is replaced); a directory or a
    symlink there is refused always."""
    path = Path(path)
    st = _lstat(path)
    if st is None:
        return path
    if stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode):
        what = "a symlink" if stat.S_ISLNK(st.st_mode) else "a directory"
        raise FabricLabError(f"{flag} {path} is {what}; name the file to write")
    if not force:
        raise FabricLabError(f"{flag} {path} exists; choose a new file, or add --force to "
                             "replace it")
    return path

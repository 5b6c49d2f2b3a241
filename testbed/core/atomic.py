"""Write files so that a crash never leaves a truncated file under the final name."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Write ``text`` to a new temporary file beside ``path`` (a unique name, made with
    ``O_EXCL``), ``fsync`` it, then rename it over ``path``. A symlink at ``path`` is replaced,
    never followed. A path that cannot be written (no such directory, a directory) is one
    sentence naming ``path``, and leaves no temporary file behind."""
    write_bytes(path, text.encode(), mode)


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Bytes, written as :func:`write_text` writes text (``mode`` 0o600 for private state)."""
    path = Path(path)
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
        _fsync_dir(path.parent)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise FabricLabError(f"cannot write {path}: {exc.strerror or exc}") from None


def _fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (the entry, not just the data)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: Path, data: Any, indent: int | None = 1, mode: int = 0o644) -> None:
    write_text(path, json.dumps(data, indent=indent, default=str), mode)


def csv_text(rows: Iterable[Mapping[str, Any]], columns: list[str]) -> str:
    """``rows`` as CSV text with a header of ``columns`` (one ``\n`` per line)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """``rows`` as CSV with a header of ``columns``, written as :func:`write_text` does."""
    write_text(path, csv_text(rows, columns))


def check_writable(path: Path) -> None:
    """Refuse up front, in :func:`write_text`'s words, a ``path`` it could not write: a
    directory, one whose directory is missing or is a file, or one in a read-only directory."""
    path = Path(path)
    parent = path.parent
    code = (errno.EISDIR if path.is_dir() else
            errno.ENOENT if not parent.exists() else
            errno.ENOTDIR if not parent.is_dir() else
            errno.EACCES if not os.access(parent, os.W_OK | os.X_OK) else None)
    if code is not None:
        raise FabricLabError(f"cannot write {path}: {os.strerror(code)}")

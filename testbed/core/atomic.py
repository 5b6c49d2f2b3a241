"""Write files so that a crash never leaves a truncated file under the final name."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path.partial``, then rename it over ``path``. A path that cannot
    be written (no such directory, a directory) is one sentence naming ``path``, and leaves
    no ``.partial`` file behind."""
    write_bytes(path, text.encode())


def write_bytes(path: Path, data: bytes) -> None:
    """Bytes, written as :func:`write_text` writes text."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        tmp.write_bytes(data)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise FabricLabError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    write_text(path, json.dumps(data, indent=indent, default=str))


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

"""Write files so that a crash never leaves a truncated file under the final name."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from testbed.core.errors import FabricLabError


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path.partial``, then rename it over ``path``. A path that cannot
    be written (no such directory, a directory) is one sentence naming ``path``, and leaves
    no ``.partial`` file behind."""
    path = Path(path)
    tmp = path.with_name(path.name + ".partial")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise FabricLabError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    write_text(path, json.dumps(data, indent=indent, default=str))

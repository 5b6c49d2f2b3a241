"""Write files so that a crash never leaves a truncated file under the final name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path.partial``, then rename it over ``path``."""
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(text)
    tmp.replace(path)


def write_json(path: Path, data: Any, indent: int | None = 1) -> None:
    write_text(path, json.dumps(data, indent=indent, default=str))

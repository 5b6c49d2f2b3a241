"""The paths a run's flows took (``paths.json``), as the report shows them: which jobs crossed
each leaf↔spine link direction in a leg."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_paths(run_dir: Path) -> dict[str, Any] | None:
    """``paths.json`` of a run directory, or None (a simulated or older run)."""
    path = Path(run_dir) / "paths.json"
    return json.loads(path.read_text()) if path.exists() else None


MIN_SHARE = 0.1  # a pair's spine carrying less of its bytes (a handshake, a control message)


def bytes_on_links(paths: dict[str, Any] | None, topology: dict[str, Any],
                   leg: str = "together") -> dict[str, dict[str, int]]:
    """Link direction (``leaf0→spine1``, ``spine1→leaf1``) → job → the bytes its host pairs
    sent across it in ``leg``, counting a pair's spine only where it carried
    :data:`MIN_SHARE` of the pair's bytes or more."""
    if not paths or leg not in (paths.get("legs") or {}):
        return {}
    leaf_of = {h["name"]: h.get("leaf") for h in topology.get("hosts") or []}
    found: dict[str, dict[str, int]] = {}
    for job, pairs in paths["legs"][leg].items():
        total: dict[tuple[str, str], int] = {}
        for p in pairs:
            total[(p["src"], p["dst"])] = total.get((p["src"], p["dst"]), 0) + p["bytes"]
        for p in pairs:
            a, b = leaf_of.get(p["src"]), leaf_of.get(p["dst"])
            if a is None or b is None or p["bytes"] < MIN_SHARE * total[(p["src"], p["dst"])]:
                continue
            for key in (f"leaf{a}→spine{p['spine']}", f"spine{p['spine']}→leaf{b}"):
                on = found.setdefault(key, {})
                on[job] = on.get(job, 0) + int(p["bytes"])
    return found


def jobs_on_links(paths: dict[str, Any] | None, topology: dict[str, Any],
                  leg: str = "together") -> dict[str, list[str]]:
    """Link direction → the jobs that crossed it in ``leg`` (:func:`bytes_on_links`), sorted."""
    return {k: sorted(v) for k, v in bytes_on_links(paths, topology, leg).items()}

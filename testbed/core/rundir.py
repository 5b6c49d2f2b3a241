"""What every run directory holds, whichever backend made it.

``results/<timestamp>-<name>/``: ``spec.yaml``, ``env.json`` (written from
:func:`base_environment` plus the backend's own fields), ``topology.json``, ``jobs.json``,
``jobs/<job>/`` (worker configs and parquet traces), ``fidelity.json`` and ``summary.json``;
the emulator adds ``controller.log``, ``link_samples.parquet`` and ``cpu_samples.parquet``.
"""

from __future__ import annotations

import os
import platform
from typing import Any


def base_environment() -> dict[str, Any]:
    """The machine and package versions a run ran with (each backend adds its own fields)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for pkg in ("fabriclab", "numpy", "pandas", "pyarrow", "pydantic", "grpcio"):
        try:
            versions[pkg] = version(pkg)
        except PackageNotFoundError:
            versions[pkg] = None
    return {"python": platform.python_version(), "kernel": platform.release(),
            "machine": platform.machine(), "cpus": os.cpu_count(), "packages": versions}

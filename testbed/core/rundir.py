"""What every run directory holds, whichever backend made it.

``results/<timestamp>-<name>/``: ``spec.yaml``, ``env.json`` (written from
:func:`base_environment` plus the backend's own fields), ``topology.json``, ``jobs.json``,
``jobs/<job>/`` (worker configs and parquet traces), ``fidelity.json``, ``summary.json`` and
its CSV tables in ``csv/`` (:mod:`testbed.core.summary_csv`);
the emulator adds ``controller.log``, ``link_samples.parquet`` and ``cpu_samples.parquet``.
docs/results.md describes every file, key and column, with its unit.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from testbed.core.atomic import write_json, write_text
from testbed.core.experiment import Experiment
from testbed.core.safe_paths import check_ancestors, make_dir
from testbed.core.summary_csv import write_tables


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


def new_run_dir(out_root: Path, name: str) -> Path:
    """Create and return ``out_root/<timestamp>-<name>``, with ``-2``, ``-3`` ... appended when
    a run of the same name started within the same second (or someone else made that name:
    a run never writes into a directory it did not make). ``out_root`` and every directory
    above it must be safe from other users (:func:`~testbed.core.safe_paths.check_ancestors`)."""
    base = Path(out_root) / f"{time.strftime('%Y%m%d-%H%M%S')}-{name}"
    if not os.path.lexists(out_root):
        make_dir(out_root)
    check_ancestors(base)
    path, k = base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            k += 1
            path = base.with_name(f"{base.name}-{k}")


def write_head(run_dir: Path, exp: Experiment, env: dict[str, Any]) -> None:
    """What a run writes before it starts: ``spec.yaml`` (the expanded experiment) and
    ``env.json`` (:func:`base_environment` plus the backend's fields)."""
    write_text(run_dir / "spec.yaml",
               yaml.safe_dump(exp.model_dump(mode="json"), sort_keys=False))
    write_json(run_dir / "env.json", env)


def write_results(run_dir: Path, records: list[dict[str, Any]], fidelity: dict[str, Any],
                  summarise: Callable[[], dict[str, Any]]) -> None:
    """What a run writes when it ends, each file atomically: ``jobs.json`` (one record per
    job and solo baseline), ``fidelity.json``, then ``summary.json`` from ``summarise()``
    (which may read the first two back, as :func:`analysis.metrics.summarise` does) and its
    CSV tables."""
    write_json(run_dir / "jobs.json", records)
    write_json(run_dir / "fidelity.json", fidelity)
    summary = summarise()
    write_json(run_dir / "summary.json", summary)
    write_tables(run_dir, summary)

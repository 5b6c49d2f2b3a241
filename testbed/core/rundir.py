"""What every run directory holds, whichever backend made it.

``results/<timestamp>-<name>/``: ``spec.yaml``, ``env.json`` (written from
:func:`base_environment` plus the backend's own fields), ``topology.json``, ``jobs.json``,
``jobs/<job>/`` (worker configs and parquet traces), ``fidelity.json``, ``run.json`` (how the
run went: its status, and what the backend says of itself), ``summary.json`` and its CSV
tables in ``csv/`` (:mod:`testbed.core.summary_csv`);
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
from testbed.core.jobs import JobRun
from testbed.core.safe_paths import check_ancestors, make_dir
from testbed.core.summary_csv import write_tables
from testbed.core.topology import FabricPlan

# The layout of the run directories this version writes, recorded in run.json's ``schema``;
# raise it when a file's keys change, and teach analysis.compat to read the one before.
# 2: jobs.json records carry their dimensions' kinds and host rates (dim_kinds,
# dim_host_rates_bps); 1 (no ``schema``): everything before.
RUN_SCHEMA = 2


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


class RunRecorder:
    """The one writer of a run directory, for every backend: it makes the directory and
    writes its head when the run starts (``spec.yaml``, ``env.json``, ``topology.json``),
    keeps the run's status, and writes the results when it ends (:meth:`finish`)."""

    def __init__(self, out_root: Path, exp: Experiment, plan: FabricPlan,
                 env: dict[str, Any]) -> None:
        self.run_dir = new_run_dir(out_root, exp.name)
        write_head(self.run_dir, exp, env)
        write_text(self.run_dir / "topology.json", plan.to_json())
        self.status = "ok"  # ok | failed | incomplete
        self.error: str | None = None

    def fail(self, status: str, error: str) -> None:
        """The run ended early: ``failed`` (an error) or ``incomplete`` (interrupted)."""
        self.status, self.error = status, error

    def finish(self, jobs: list[JobRun], fidelity: dict[str, Any],
               summarise: Callable[[Path], dict[str, Any]], **facts: Any) -> dict[str, Any]:
        """Write the results, each file atomically: ``jobs.json`` (every job and solo
        baseline), ``fidelity.json``, ``run.json`` (the status and the backend's ``facts``),
        then ``summary.json`` from ``summarise(run_dir)`` — which reads only these files and
        the traces, so a summary recomputed later is the same — and its CSV tables."""
        write_json(self.run_dir / "jobs.json", [j.record() for j in jobs])
        write_json(self.run_dir / "fidelity.json", fidelity)
        write_json(self.run_dir / "run.json",
                   {"schema": RUN_SCHEMA, "status": self.status, "error": self.error,
                    **facts})
        summary = summarise(self.run_dir)
        write_json(self.run_dir / "summary.json", summary)
        write_tables(self.run_dir, summary)
        return summary

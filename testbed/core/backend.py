"""The one interface both backends implement: the emulator (Mininet, real workers) and the
flow-level simulator are peers behind it, and write the same run-directory layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from testbed.core.experiment import Experiment


class Backend(Protocol):
    """Runs experiments; ``fabriclab run --backend NAME`` picks one by its ``name``."""

    name: str

    def check(self, experiment: Experiment) -> None:
        """Raise a FabricLabError (one sentence) if the experiment cannot run here; called
        for every variant before the first one runs."""

    def run(self, experiment: Experiment, out: Path, console: Any = None) -> Path:
        """Run the experiment under ``out``; return its run directory (``summary.json``,
        ``jobs.json`` ... as :mod:`testbed.core.rundir` describes). A failed or interrupted
        run still returns its directory, with the status in ``summary.json``."""
        ...

"""What the sweep benchmarks share (sim_scale, ocs_vs_vclos, sweep_speedup): their Dask and
output flags, the output directory, running specs as one sweep, and printing measured figures.

Each runs its simulations as `fabriclab sweep` does, in this process: a LocalCluster of
``--workers`` single-thread processes on 127.0.0.1 (:mod:`testbed.sim.sweep_cluster`), every
run written by this process into ``OUT/<set>/KEY/`` (:mod:`testbed.sim.sweep_run`).
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.sim.sweep_run import Outcome, run_sweep
from testbed.sim.sweep_spec import SweepSpec, expand_all

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

MIB = 1 << 20


def int_list(text: str) -> list[int]:
    """An argparse type: comma-separated integers."""
    return [int(x) for x in text.split(",") if x]


def word_list(text: str) -> list[str]:
    """An argparse type: comma-separated words."""
    return [x for x in text.split(",") if x]


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: must be at least 1")
    return value


def add_flags(p: argparse.ArgumentParser, workers: int) -> None:
    """``--workers`` (default ``workers``) and ``--out``."""
    p.add_argument("--workers", type=positive, default=workers,
                   help=f"worker processes of the local Dask cluster (default {workers})")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="keep every run and results table under DIR (default: a temporary "
                   "directory, removed at the end); runs already there are not run again")


@contextmanager
def output_dir(out: str | None) -> Iterator[Path]:
    """``out``, made if missing, or a temporary directory removed on exit."""
    if out:
        path = Path(out)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="fabriclab-bench-") as tmp:
        yield Path(tmp)


def run_specs(client: Client, specs: Sequence[SweepSpec], out: Path, title: str
              ) -> pd.DataFrame:
    """The runs of ``specs`` as one sweep into ``out``: its results table, one row per run.
    On a terminal, stderr counts the runs done."""
    points = expand_all(specs)

    def count(outcome: Outcome) -> None:
        done = len(outcome.ran) + len(outcome.skipped) + len(outcome.failed)
        print(f"\r{title}: {done}/{len(points)} runs", end="", file=sys.stderr, flush=True)

    tty = sys.stderr.isatty()
    df = run_sweep(client, points, out, title, count if tty else lambda _o: None)
    if tty:
        print(file=sys.stderr)
    return df


def workers_note(workers: int) -> str:
    """What a run's wall time means with ``workers`` processes on this machine."""
    if workers == 1:
        return "1 worker: runs take turns; a run's wall time is that of one process alone"
    return (f"{workers} workers: runs go {workers} at a time, so a run's wall time is its "
            "own but includes sharing the cores with the others (and anything else running)")


def spread(values: Sequence[float], digits: int = 1) -> str:
    """``median [min, max]``."""
    return (f"{statistics.median(values):.{digits}f} "
            f"[{min(values):.{digits}f}, {max(values):.{digits}f}]")


def mib(value: Any, digits: int = 0) -> str:
    """Bytes in MiB; ``-`` where not measured."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value / MIB:.{digits}f}"

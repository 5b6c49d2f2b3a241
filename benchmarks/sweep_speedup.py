"""Dask speed-up; BENCHMARKS.md "As sweeps on Dask: 2 workers against 1, and the growth fitted".

A sweep's wall time on 1 local Dask worker against 2 (or other counts), repeated.

    .venv/bin/python benchmarks/sweep_speedup.py [SWEEP.yaml] [--workers 1,2] [--repeats 3]
        [--out DIR]

Runs the sweep file (default ``experiments/sweeps/ocs-vs-vclos.yaml``) as ``fabriclab sweep
SWEEP.yaml --workers N`` does, in this process, once per worker count and repetition, in
turn (1, 2, 1, 2, ...: drift in the machine's load falls on both), each into a fresh
directory ``OUT/workers-N-repeat-I``. Timed per sweep:

* ``total s``: from asking for the LocalCluster to the cluster stopped, results written (what
  ``fabriclab sweep`` takes, less starting Python);
* ``sweep s``: from the cluster's workers answering to the results written;
* ``run s``: the sum of the runs' own wall times (``wall_s``, measured in the workers): the
  simulating itself, which grows when two runs share the cores.

The speedup of N workers is the median time of 1 worker over the median of N. Every sweep's
results table must equal the first's, the measured columns aside (checked).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path

import pandas as pd

from analysis.sweep import simulated_results
from testbed.core.errors import FabricLabError
from testbed.core.units import format_spread
from testbed.sim.sweep_cluster import dask_client
from testbed.sim.sweep_run import run_sweep
from testbed.sim.sweep_spec import Point, load_sweep

DEFAULT_SWEEP = Path(__file__).parent.parent / "experiments" / "sweeps" / "ocs-vs-vclos.yaml"
TIMES = ("total_s", "sweep_s", "run_s")


def timed_sweep(points: list[Point], title: str, workers: int, out: Path
                ) -> tuple[dict[str, float], pd.DataFrame]:
    """Run the points on a new LocalCluster of ``workers``; the three times and the table."""
    if out.exists() and any(out.iterdir()):
        raise FabricLabError(f"{out} already holds runs, which would not be run again; "
                             "give a new --out")
    started = time.perf_counter()
    with dask_client(workers) as client:
        client.wait_for_workers(workers)
        ready = time.perf_counter()
        df = run_sweep(client, points, out, title)
        written = time.perf_counter()
    total = time.perf_counter() - started
    return {"total_s": total, "sweep_s": written - ready,
            "run_s": float(df["wall_s"].sum())}, df


def ratio(times: dict[int, list[dict[str, float]]], ref: int, n: int, key: str) -> float:
    """Median ``key`` time with ``ref`` workers over the median with ``n``."""
    return (statistics.median(t[key] for t in times[ref])
            / statistics.median(t[key] for t in times[n]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sweep", nargs="?", default=str(DEFAULT_SWEEP), metavar="SWEEP.yaml")
    p.add_argument("--workers", type=lambda t: [int(x) for x in t.split(",") if x],
                   default=[1, 2],
                   help="worker counts to compare, comma-separated; the first is the "
                   "reference (default 1,2)")
    p.add_argument("--repeats", type=int, default=3, help="sweeps per worker count")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="keep every sweep under DIR/workers-N-repeat-I (default: a temporary "
                   "directory, removed at the end)")
    args = p.parse_args()
    counts = args.workers
    for flag, n in [("--repeats", args.repeats)] + [("--workers", n) for n in counts]:
        if n < 1:
            raise SystemExit(f"{flag} is {n}; it must be at least 1")
    try:
        spec, points = load_sweep(args.sweep)
        title = spec.name or Path(args.sweep).stem
        print(f"sweep {title}: {len(points)} runs; workers {', '.join(map(str, counts))}; "
              f"{args.repeats} repeats; {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.2f} at the start")
        times: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
        first: pd.DataFrame | None = None
        keep = nullcontext(args.out) if args.out else tempfile.TemporaryDirectory(
            prefix="fabriclab-bench-")
        with keep as where:
            out = Path(where)
            for i in range(1, args.repeats + 1):
                for n in counts:
                    timing, df = timed_sweep(points, title, n, out / f"workers-{n}-repeat-{i}")
                    times[n].append(timing)
                    print(f"repeat {i}, {n} worker{'s' if n > 1 else ''}: total "
                          f"{timing['total_s']:.2f} s, sweep {timing['sweep_s']:.2f} s, "
                          f"runs' own {timing['run_s']:.2f} s", flush=True)
                    table = simulated_results(df)
                    first = table if first is None else first
                    if not table.equals(first):
                        raise SystemExit(f"{n} workers, repeat {i}: the results differ from "
                                         "the first sweep's")
    except FabricLabError as exc:
        raise SystemExit(str(exc)) from None
    print(f"\n{'workers':>7} {'total s':>22} {'sweep s':>22} {'run s':>22}   "
          "(median [min, max])")
    for n in counts:
        print(f"{n:>7} " + " ".join(f"{format_spread([t[k] for t in times[n]], '.2f'):>22}"
                                    for k in TIMES))
    ref = counts[0]
    for n in counts[1:]:
        print(f"{n} workers against {ref}: speedup x{ratio(times, ref, n, 'total_s'):.2f} "
              f"in total, x{ratio(times, ref, n, 'sweep_s'):.2f} once the cluster is up "
              f"(median time with {ref} / median with {n}); the runs' own wall time, "
              f"summed: {1 / ratio(times, ref, n, 'run_s') - 1:+.0%}")
    print(f"results: all {args.repeats * len(counts)} sweeps' tables identical, measured "
          "columns (wall time, memory) aside")


if __name__ == "__main__":
    main()

"""`fabriclab sweep`: a grid of simulate-cluster runs on Dask (a LocalCluster or a scheduler).

Writes ``OUT/KEY/`` per run (what simulate-cluster writes, plus point.json: its key, label and
parameters), then ``OUT/results.parquet``, ``OUT/results.csv`` (a row per run) and
``OUT/report.md`` (means and 95% confidence intervals over seeds), each atomically. Run again
with the same ``--out``, it skips the runs already there.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from testbed.cli import progress as bars
from testbed.core.errors import FabricLabError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sweep",
        description="Expand SWEEP.yaml (name, base, grid of simulate-cluster parameters) into "
        "runs, run them on Dask and write every run, results.parquet/.csv and report.md.",
    )
    p.add_argument("sweep", metavar="SWEEP.yaml", help="the sweep file")
    p.add_argument("--out", required=True,
                   help="output directory, reused by design: a run of the grid already done "
                   "there is skipped, so a sweep run again finishes only what is missing; a "
                   "directory holding anything a sweep does not write is refused")
    p.add_argument("--force", action="store_true",
                   help="empty --out first and run every point again (symlinks in it are "
                   "removed, never followed)")
    where = p.add_mutually_exclusive_group()
    add_workers_flag(where, 2)
    where.add_argument("--scheduler", default=None, metavar="tls://HOST:8786",
                       help="run on an existing Dask cluster instead (trace files must be at "
                       "the same paths on its workers; TLS settings from Dask's config)")
    p.add_argument("--insecure", action="store_true",
                   help="allow a plaintext tcp:// --scheduler (its traffic can be read and "
                   "its results are unpickled here)")
    p.set_defaults(func=run)


def add_workers_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup, default: int) -> None:
    """``--workers``: the local Dask cluster's worker processes (a sweep here, a benchmark's
    sweeps)."""
    p.add_argument("--workers", type=int, default=default,
                   help="worker processes of the local Dask cluster, one thread each "
                   f"(default {default})")


def run(args: argparse.Namespace) -> int:
    from testbed.core.out_dir import check_out_dir, check_out_target, clear_out_dir, mark_out_dir
    from testbed.sim.sweep_cluster import dask_client
    from testbed.sim.sweep_run import Outcome, foreign_entry, is_done, run_points, sweep_results
    from testbed.sim.sweep_spec import load_sweep

    if not args.out.strip():
        raise FabricLabError("--out is empty; name the directory to write the results to")
    if args.scheduler is None and args.workers < 1:
        raise FabricLabError(f"--workers is {args.workers}; it must be at least 1")
    spec, points = load_sweep(args.sweep)
    # a symlink or a file: refused; with --force, a directory no fabriclab command wrote too
    out = check_out_dir(args.out, force=True) if args.force else check_out_target(args.out)
    if not args.force and (entry := foreign_entry(out)):
        raise FabricLabError(f"--out {out} holds {entry}, which no sweep writes: it is not a "
                             "sweep's directory; choose a new one, or add --force to empty it")
    if not args.force and all(is_done(out, p) for p in points):  # no cluster to start
        outcome = Outcome(skipped=[p.key for p in points])
    else:
        with dask_client(args.workers, args.scheduler, args.insecure) as client, \
                progress(len(points)) as update:
            # makes --out only once the cluster answers: a refused sweep leaves nothing
            clear_out_dir(out) if args.force else mark_out_dir(out)
            outcome = run_points(client, points, out, update)
    title = spec.name or Path(args.sweep).stem
    results = sweep_results(out, points, title, [k for k in spec.grid if k != "seed"])
    print(f"sweep {title}: {len(points)} runs, {len(outcome.ran)} run now, "
          f"{len(outcome.skipped)} already done, {len(outcome.failed)} failed -> {out}")
    for key, reason in outcome.failed.items():
        label = next(p.label for p in points if p.key == key)
        print(f"  failed {key} ({label}): {reason}")
    if results is not None:
        print(f"results: {out / 'results.csv'}, {out / 'results.parquet'}; "
              f"report: {out / 'report.md'}")
    return 1 if outcome.failed else 0


@contextmanager
def progress(total: int) -> Iterator[Callable[[Any], None]]:
    """Runs done of all and failures (:mod:`testbed.cli.progress`: a bar on a terminal, a
    line every few seconds elsewhere), updated from a sweep's Outcome."""
    with bars.progress("sweep", total, "runs, {failed} failed", failed=0) as bar:
        yield lambda o: bar(len(o.ran) + len(o.skipped) + len(o.failed), failed=len(o.failed))

"""Waiting under OCS; BENCHMARKS.md "Does OCS-vClos lower waiting time against static vClos?".

Does OCS-vClos lower waiting time against static vClos? One trace, several cluster models.

    .venv/bin/python benchmarks/ocs_vs_vclos.py [--jobs 3000] [--load 1.0] [--seeds 1,2,3]
        [--leaves 128 --spines 64 --hosts-per-leaf 64] [--placements joint,hosts-first]
        [--rewirings any,conservative,augment] [--spine-ports-per-ocs P] [--no-bound]
        [--workers 2] [--out DIR]

Every row of a seed replays the same synthetic trace (FIFO admission, flat-ring All-Reduce)
on the same cluster. The OCS layer has as many ports as the electrical fabric has links
(one leaf port per OCS, ``leaves / ocs`` spine ports per OCS, ``ocs = spines``), so it adds
no capacity, only the freedom to choose what a leaf port reaches. ``--spine-ports-per-ocs
4`` gives every spine twice that (spare spine ports, as a spine with more ports than leaves).
``--spines 32`` makes the fabric 2:1 oversubscribed (and the OCS layer 32 ports per leaf).

* ``placement``: ``joint`` chooses hosts and network together (the allocator walks leaf
  sets until the network fits); ``hosts-first`` picks the hosts network-obliviously and the
  network must join exactly those leaves.
* ``rewiring`` (ocs-vclos): ``any`` takes any idle ports; ``conservative`` uses the default
  wiring (the electrical fabric's) first and only spine ports no default circuit can use;
  ``augment`` uses the default wiring first, then gives each leaf a matching of the job's
  spines to its idle ports that moves default circuits only along augmenting paths.
* ``bound``: static vClos with four times the spines (every leaf has 4x its hosts in
  uplinks), so no job ever waits for links: the waiting time that host fragmentation and
  FIFO alone cause with this placement. No network design (OCS or other) with the same
  placement rule can remove more waiting than static vClos has above this row.

The rows are one sweep (a spec each for static vClos, OCS-vClos and the bound, their grids
over seeds, placements and rewirings), run as ``fabriclab sweep`` runs one: a local Dask
cluster of ``--workers`` processes (default 2), every run written under ``--out``. "wall s"
and "peak MiB" are measured per run in the worker that ran it (the simulation's wall time;
the worker's peak RSS during the run); with two workers on two cores runs share the machine.

"frag hosts" / "frag links": admission attempts refused because no m leaves had n free hosts
/ because the leaves existed but no free spine links (or circuits) joined them. "vs vclos":
the average wait against static vClos with the same placement and seed.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import nullcontext
from pathlib import Path

import pandas as pd

from testbed.cli.sweep import add_workers_flag, progress
from testbed.core.errors import FabricLabError
from testbed.core.units import format_mib
from testbed.sim.sweep_cluster import dask_client, workers_note
from testbed.sim.sweep_run import run_sweep
from testbed.sim.sweep_spec import SweepSpec, expand_all


def specs(args: argparse.Namespace) -> dict[str, SweepSpec]:
    """Each kind of row ("-": static vClos, "bound", or OCS-vClos by rewiring) as a sweep."""
    base = {"leaves": args.leaves, "hosts_per_leaf": args.hosts_per_leaf, "jobs": args.jobs,
            "load": args.load, "spine_ports_per_ocs": args.spine_ports_per_ocs}
    grid = {"seed": args.seeds, "placement": args.placements}
    static = {**base, "policy": "vclos", "rewiring": "any"}
    kinds = {"-": SweepSpec(base={**static, "spines": args.spines}, grid=grid)}
    if args.rewirings:
        kinds["ocs"] = SweepSpec(base={**base, "policy": "ocs-vclos", "spines": args.spines},
                                 grid={**grid, "rewiring": args.rewirings})
    if not args.no_bound:
        kinds["bound"] = SweepSpec(base={**static, "spines": 4 * args.hosts_per_leaf},
                                   grid=grid)
    return kinds


def _words(text: str) -> list[str]:
    """An argparse type: comma-separated words."""
    return [x for x in text.split(",") if x]


def pick(df: pd.DataFrame, **params: object) -> pd.Series:
    """The one run with these parameters."""
    match = df
    for name, value in params.items():
        match = match[match[name] == value]
    return match.iloc[0]


def rows(args: argparse.Namespace) -> list[tuple[str, str, dict[str, object]]]:
    """(policy, rewiring column, parameters that find the run) in the table's order."""
    out = [("vclos", "-", {"policy": "vclos", "spines": args.spines})]
    out += [("ocs-vclos", r, {"policy": "ocs-vclos", "rewiring": r}) for r in args.rewirings]
    if not args.no_bound:
        out.append(("vclos", "bound", {"policy": "vclos", "spines": 4 * args.hosts_per_leaf}))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--seeds", type=lambda t: [int(x) for x in t.split(",") if x], default=[1],
                   help="comma-separated, e.g. 1,2,3")
    p.add_argument("--leaves", type=int, default=128)
    p.add_argument("--spines", type=int, default=64)
    p.add_argument("--hosts-per-leaf", type=int, default=64)
    p.add_argument("--placements", type=_words, default=["joint", "hosts-first"])
    p.add_argument("--rewirings", type=_words, default=["any", "conservative", "augment"])
    p.add_argument("--spine-ports-per-ocs", type=int, default=0,
                   help="default: leaves / OCSes (the electrical fabric's port count)")
    p.add_argument("--no-bound", action="store_true", help="skip the no-link-limit row")
    add_workers_flag(p, 2)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="keep every run and results table under DIR (default: a temporary "
                   "directory, removed at the end); runs already there are not run again")
    args = p.parse_args()
    gpus = args.leaves * args.hosts_per_leaf
    print(f"{gpus} GPUs ({args.leaves} leaves x {args.hosts_per_leaf}, {args.spines} spines), "
          f"{args.jobs} synthetic jobs, load {args.load}")
    print(workers_note(args.workers))
    try:
        keep = nullcontext(args.out) if args.out else tempfile.TemporaryDirectory(
            prefix="fabriclab-bench-")
        with keep as where, dask_client(args.workers) as client:
            out = Path(where)
            points = expand_all(list(specs(args).values()))
            with progress(len(points)) as update:
                df = run_sweep(client, points, out, "ocs-vs-vclos", update)
    except FabricLabError as exc:
        raise SystemExit(str(exc)) from None
    print(f"{'seed':>4} {'placement':>11} {'policy':>9} {'rewiring':>12} {'wall s':>6} "
          f"{'peak MiB':>8} {'avg wait s':>10} {'vs vclos':>8} {'avg JCT s':>9} "
          f"{'GPU util':>8} {'frag hosts':>10} {'frag links':>10}")
    for seed in args.seeds:
        for placement in args.placements:
            static = None
            for policy, rewiring, params in rows(args):
                s = pick(df, seed=seed, placement=placement, **params)
                static = s["avg_wait_s"] if static is None else static
                change = (s["avg_wait_s"] / static - 1) * 100 if static else 0.0
                links = s["refused_fragmented_links"]
                print(f"{seed:>4} {placement:>11} {policy:>9} {rewiring:>12} "
                      f"{s['wall_s']:6.1f} {format_mib(s['peak_rss_bytes']):>8} "
                      f"{s['avg_wait_s']:10.1f} {change:+7.1f}% {s['avg_jct_s']:9.1f} "
                      f"{s['gpu_utilisation']:8.3f} {s['refused_fragmented'] - links:10d} "
                      f"{links:10d}")
    if args.out:
        print(f"runs and results tables: {out}")


if __name__ == "__main__":
    main()

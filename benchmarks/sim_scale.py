"""Simulator time, memory and JCT; BENCHMARKS.md "The simulator at cluster scale".

Simulated backend at cluster scale: run time, memory, and JCT / waiting per policy.

    .venv/bin/python benchmarks/sim_scale.py [--jobs 5000] [--load 0.8] [--seed 1]
        [--collective ring|rail-ring] [--policies ecmp,ecmp-l3,vclos,ocs-vclos] [--no-growth]
        [--cluster 128x64x64] [--repeats 3] [--growth-clusters 16x8x16,32x16x32,...]
        [--growth-jobs 500,1000,...] [--growth-policy ecmp] [--workers 1] [--out DIR]

Main runs: 8192 GPUs (128 leaves x 64 hosts, 64 spines; ocs-vclos with 64 OCSes, so a leaf
has 64 uplinks in both fabrics), one synthetic trace of ``--jobs`` jobs, once per policy
(ecmp, ecmp-l3, vclos, ocs-vclos, or any registered leaf-spine policy), ``--repeats`` times.
Growth runs (ecmp): every cluster of ``--growth-clusters`` with every job count of
``--growth-jobs``, then power laws fitted to their wall time and memory
(:mod:`analysis.growth`): ``time ∝ GPUs^a · jobs^b``.

Every set of runs is a sweep (one spec per cluster shape), run as ``fabriclab sweep`` runs
one: a local Dask cluster of ``--workers`` processes, each run written under ``--out``
(``main-1/``, ``main-2/``, ... per repeat, and ``growth/``). Each run's wall time (the
simulation proper: summary.json's ``wall_s``) and memory are measured in the worker that ran
it: ``peak MiB`` is that process's peak RSS during the run, ``added`` the part above what it
held when the run began (the fit uses that). With ``--workers 1`` (the default) runs take
turns, as the figures in BENCHMARKS.md were taken; with 2 they share the two cores.

What the papers report, and what to compare: vClos lowers the average JCT against ECMP under
heavy load (ECMP hash collisions slow jobs, vClos isolates them); OCS-vClos lowers waiting
time against static vClos (circuits are rewired per job, so less fragmentation).

Measured here (seed 1, 5000 jobs, load 0.8, 2026-11-23, one core of two, shared):
flat ring: ecmp 27 s wall, avg JCT 20782 s, avg wait 15046 s, slowdown 1.122 (max 3.1),
71% of cross-leaf flows collided; ecmp-l3 (2026-11-23) avg JCT 21911 s, slowdown 1.126, 69%
collided (seeds 2 and 3 with 2500 jobs: +1.6% and -1.7% JCT against ecmp); vclos 5.7 s,
avg JCT 5086 s (-75.5%), wait 7.5 s;
ocs-vclos 12 s, identical to vclos (all 51 refusals are host shape, which circuits do not
fix; see benchmarks/ocs_vs_vclos.py for heavier load). Rail All-Reduce (``--collective
rail-ring``, formerly ``hierarchical``): ecmp avg JCT
5091 s, slowdown 1.0009: rails carry 1/64 of the bytes across the fabric, so collisions
barely matter.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pandas as pd

from analysis.growth import fit_power_law
from analysis.sweep import simulated_results
from testbed.cli.sweep import add_workers_flag, progress
from testbed.core.errors import FabricLabError
from testbed.core.units import format_mib, format_spread
from testbed.sim.sweep_cluster import dask_client, workers_note
from testbed.sim.sweep_run import run_sweep
from testbed.sim.sweep_spec import SweepSpec, expand_all

MAIN = "128x64x64"  # leaves x spines x hosts per leaf
GROWTH_CLUSTERS = "16x8x16,32x16x32,64x32x64,128x64x64"  # 256 to 8192 GPUs
GROWTH_JOBS = "500,1000,2500,5000"


def _cluster(text: str) -> dict[str, int]:
    try:
        leaves, spines, hpl = (int(x) for x in text.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give LEAVESxSPINESxHOSTS_PER_LEAF, e.g. 128x64x64") from None
    return {"leaves": leaves, "spines": spines, "hosts_per_leaf": hpl}


def _clusters(text: str) -> list[dict[str, int]]:
    return [_cluster(c) for c in text.split(",") if c]


def _ints(text: str) -> list[int]:
    """An argparse type: comma-separated integers."""
    return [int(x) for x in text.split(",") if x]


def run_specs(client, specs: list[SweepSpec], out: Path, title: str) -> pd.DataFrame:
    """The runs of ``specs`` as one sweep into ``out`` (as ``fabriclab sweep`` runs one, its
    progress on a terminal): the results table, a row per run."""
    points = expand_all(specs)
    with progress(len(points)) as update:
        return run_sweep(client, points, out, title, update)




def main_spec(args: argparse.Namespace) -> SweepSpec:
    base = {**args.cluster, "jobs": args.jobs, "load": args.load, "seed": args.seed,
            "collective": args.collective}
    return SweepSpec(name="sim-scale", base=base, grid={"policy": args.policies})


def growth_specs(args: argparse.Namespace) -> list[SweepSpec]:
    base = {"policy": args.growth_policy, "load": args.load, "seed": args.seed,
            "collective": args.collective}
    return [SweepSpec(base={**base, **c}, grid={"jobs": args.growth_jobs})
            for c in args.growth_clusters]


def added_bytes(df: pd.DataFrame) -> pd.Series:
    """What each run added to its worker's memory: peak RSS less RSS at its start."""
    return (pd.to_numeric(df["peak_rss_bytes"], errors="coerce")
            - pd.to_numeric(df["rss_start_bytes"], errors="coerce"))


def print_main(repeats: list[pd.DataFrame]) -> dict[str, Any]:
    """The policy table (wall time and memory over the repeats); each policy's summary."""
    print(f"{'policy':>10} {'wall s':>20} {'peak MiB':>8} {'added':>6} {'avg JCT s':>10} "
          f"{'p99 JCT s':>10} {'avg wait s':>10} {'slowdown':>8} {'max sd':>7} "
          f"{'GPU util':>8} {'collided':>8} {'frag refusals':>13} {'dropped':>7}")
    results = {}
    for i, s in repeats[0].iterrows():
        walls = [float(r.loc[i, "wall_s"]) for r in repeats]
        peaks = pd.Series([r.loc[i, "peak_rss_bytes"] for r in repeats], dtype=float)
        added = pd.Series([added_bytes(r).loc[i] for r in repeats], dtype=float)
        results[s["policy"]] = s
        print(f"{s['policy']:>10} {format_spread(walls, '.1f'):>20} "
              f"{format_mib(peaks.median()):>8} {format_mib(added.median(), 1):>6} "
              f"{s['avg_jct_s']:10.1f} {s['p99_jct_s']:10.1f} "
              f"{s['avg_wait_s']:10.1f} {s['avg_slowdown']:8.4f} {s['max_slowdown']:7.3f} "
              f"{s['gpu_utilisation']:8.3f} {s['collided_flow_fraction']:8.3f} "
              f"{s['refused_fragmented']:6d} ({s['refused_fragmented_jobs']} jobs) "
              f"{s['refused_unshapeable'] + s['dropped_too_large']:7d}")
    for a, b in (("vclos", "ecmp"), ("ecmp-l3", "ecmp"), ("ocs-vclos", "vclos")):
        if a in results and b in results:
            x, y = results[a], results[b]
            print(f"{a} vs {b}: avg JCT {x['avg_jct_s'] / y['avg_jct_s'] - 1:+.2%}, "
                  f"avg run {x['avg_run_s'] / y['avg_run_s'] - 1:+.2%}, "
                  f"avg wait {x['avg_wait_s'] - y['avg_wait_s']:+.1f} s")
    return results


def print_growth(df: pd.DataFrame) -> None:
    """One row per growth run, then the fitted power laws of wall time and added memory."""
    df = df.assign(added_bytes=added_bytes(df)).sort_values(["gpus", "jobs"])
    print(f"{'GPUs':>6} {'jobs':>6} {'wall s':>7} {'peak MiB':>8} {'added':>6} "
          f"{'recomputes':>10} {'avg JCT s':>10}")
    for _, s in df.iterrows():
        print(f"{s['gpus']:6d} {s['jobs']:6d} {s['wall_s']:7.2f} "
              f"{format_mib(s['peak_rss_bytes']):>8} {format_mib(s['added_bytes'], 1):>6} "
              f"{s['rate_recomputes']:10d} {s['avg_jct_s']:10.1f}")
    factors = {"GPUs": df["gpus"], "jobs": df["jobs"]}
    for quantity, values in (("wall time", df["wall_s"]),
                             ("memory added", df["added_bytes"].astype(float))):
        try:
            print(fit_power_law(values, factors).describe(quantity))
        except ValueError as exc:
            print(f"{quantity}: no fit ({exc})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=5000)
    p.add_argument("--load", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--collective", default="ring",
                   help="ring (default), rail-ring (formerly hierarchical), or any collective "
                   "the cluster simulator runs")
    p.add_argument("--policies", type=lambda t: [x for x in t.split(",") if x],
                   default=["ecmp", "ecmp-l3", "vclos", "ocs-vclos"],
                   help="comma-separated leaf-spine policies (default: all four)")
    p.add_argument("--no-growth", action="store_true", help="skip the growth runs")
    p.add_argument("--cluster", type=_cluster, default=_cluster(MAIN),
                   help=f"main cluster as LEAVESxSPINESxHOSTS_PER_LEAF (default {MAIN}; "
                   "32768 GPUs: 256x128x128)")
    p.add_argument("--repeats", type=int, default=1,
                   help="main runs per policy; wall time as median [min, max]")
    p.add_argument("--growth-clusters", type=_clusters, default=_clusters(GROWTH_CLUSTERS),
                   help=f"growth clusters, comma-separated (default {GROWTH_CLUSTERS})")
    p.add_argument("--growth-jobs", type=_ints, default=_ints(GROWTH_JOBS),
                   help=f"growth job counts, comma-separated (default {GROWTH_JOBS})")
    p.add_argument("--growth-policy", default="ecmp")
    add_workers_flag(p, 1)
    p.add_argument("--out", default=None, metavar="DIR",
                   help="keep every run and results table under DIR (default: a temporary "
                   "directory, removed at the end); runs already there are not run again")
    args = p.parse_args()
    if args.repeats < 1:
        raise SystemExit(f"--repeats is {args.repeats}; it must be at least 1")
    c = args.cluster
    print(f"main: {c['leaves'] * c['hosts_per_leaf']} GPUs ({c['leaves']} leaves x "
          f"{c['hosts_per_leaf']} hosts, {c['spines']} spines), {args.jobs} synthetic jobs, "
          f"load {args.load}, seed {args.seed}, collective {args.collective}")
    print(workers_note(args.workers))
    keep = nullcontext(args.out) if args.out else tempfile.TemporaryDirectory(
        prefix="fabriclab-bench-")
    try:
        with keep as where, dask_client(args.workers) as client:
            out = Path(where)
            repeats = [run_specs(client, [main_spec(args)], out / f"main-{i + 1}", "sim-scale")
                       for i in range(args.repeats)]
            for r in repeats[1:]:
                if not simulated_results(r).equals(simulated_results(repeats[0])):
                    raise SystemExit("repeated runs disagree; the simulator is not "
                                     "deterministic")
            print_main(repeats)
            if not args.no_growth:
                print(f"\ngrowth ({args.growth_policy}): wall time and memory against "
                      "cluster size and job count")
                print_growth(run_specs(client, growth_specs(args), out / "growth",
                                       "sim-scale-growth"))
            if args.out:
                print(f"\nruns and results tables: {out}/main-*/, {out}/growth/")
    except FabricLabError as exc:
        raise SystemExit(str(exc)) from None


if __name__ == "__main__":
    main()

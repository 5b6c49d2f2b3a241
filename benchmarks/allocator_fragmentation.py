"""Refusals for fragmentation, placing time; BENCHMARKS.md "The vClos / OCS-vClos allocator".

How often static vClos and OCS-vClos refuse jobs as fragmented, and how long placing takes.

    .venv/bin/python benchmarks/allocator_fragmentation.py [--jobs 2000] [--seed 1]
        [--spines 16 8]

One seeded stream of jobs (arrival step, size, lifetime) is replayed on a 16-leaf /
8-host-per-leaf cluster under `vclos` (direct leaf-spine links) and on the same cluster
with 8 OCSes under `ocs-vclos`, once per spine count. The "excl" row builds the OCS
cluster with `exclusive_ocs_links=True` ((leaf, spine) pairs exclusive as in vclos; by
default only OCS ports are). A refused job is dropped; running jobs leave when their
lifetime ends. The load keeps the cluster often nearly full.

"fragmented" is split in two: "frag hosts" when no m x n shape even has m leaves with n
free hosts (no wiring could help), "frag links" when such leaves exist but no free
biclique (vclos) or no circuit wiring (ocs-vclos) was found: the part OCSes can fix.
With 16 spines a leaf has twice as many uplinks as hosts and static links did not run
out in our runs; with 8 spines (one uplink per host) they do.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import AllocationRefused

LEAVES, HOSTS_PER_LEAF, OCS_COUNT = 16, 8, 8
# (policy, ocs_count, exclusive_ocs_links)
RUNS = [("vclos", 0, False), ("ocs-vclos", OCS_COUNT, False), ("ocs-vclos", OCS_COUNT, True)]
SIZES = [1, 2, 4, 4, 8, 8, 8, 12, 16, 16, 24, 32, 48]


@dataclass(frozen=True)
class Arrival:
    step: int
    job_id: str
    size: int
    lifetime: int


def job_stream(count: int, seed: int) -> list[Arrival]:
    """One arrival per step; lifetimes long enough to keep the cluster busy."""
    rng = random.Random(seed)
    return [
        Arrival(step, f"job{step}", rng.choice(SIZES), rng.randint(5, 60)) for step in range(count)
    ]


def replay(stream: list[Arrival], cluster: Cluster, policy: str) -> tuple[Counter, list[float]]:
    """Run the stream; return outcome counts and per-request allocation times (seconds)."""
    outcomes: Counter[str] = Counter()
    times: list[float] = []
    ends: dict[str, int] = {}
    for arrival in stream:
        for job_id in [j for j, end in ends.items() if end <= arrival.step]:
            cluster.release(job_id)
            del ends[job_id]
        start = time.perf_counter()
        try:
            cluster.allocate(arrival.job_id, arrival.size, policy)
        except AllocationRefused as refused:
            reason = refused.reason
            if reason == "fragmented":
                reason = f"frag {refused.cause}"
            outcomes[reason] += 1
        else:
            outcomes["placed"] += 1
            ends[arrival.job_id] = arrival.step + arrival.lifetime
        times.append(time.perf_counter() - start)
    return outcomes, times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="number of arrivals")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the job stream")
    parser.add_argument(
        "--spines", type=int, nargs="+", default=[16, 8], help="spine counts to run"
    )
    args = parser.parse_args()
    stream = job_stream(args.jobs, args.seed)
    print(f"{args.jobs} jobs, seed {args.seed}, {LEAVES} leaves x {HOSTS_PER_LEAF} hosts/leaf")
    header = f"{'spines':>6}  {'policy':<24}{'placed':>7}{'frag hosts':>11}{'frag links':>11}"
    print(header + f"{'no hosts':>9}{'mean ms':>9}{'p99 ms':>8}{'max ms':>8}")
    for spines in args.spines:
        for policy, ocs_count, exclusive in RUNS:
            cluster = Cluster(
                LEAVES, spines, HOSTS_PER_LEAF, ocs_count, exclusive_ocs_links=exclusive
            )
            outcomes, times = replay(stream, cluster, policy)
            ms = sorted(t * 1e3 for t in times)
            p99 = ms[min(len(ms) - 1, int(0.99 * len(ms)))]
            label = f"{policy} (ocs={ocs_count}{', excl' if exclusive else ''})"
            print(
                f"{spines:>6}  {label:<24}{outcomes['placed']:>7}{outcomes['frag hosts']:>11}"
                f"{outcomes['frag links']:>11}{outcomes['no_hosts']:>9}"
                f"{statistics.fmean(ms):>9.3f}{p99:>8.3f}{ms[-1]:>8.3f}"
            )


if __name__ == "__main__":
    main()

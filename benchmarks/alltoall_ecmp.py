"""All-to-all throughput ECMP loses to vClos; BENCHMARKS.md "All-to-all under ECMP against vClos".

How much all-to-all throughput ECMP loses against vClos, in the cluster simulator.

    .venv/bin/python benchmarks/alltoall_ecmp.py [--sizes 128,256,512] [--seeds 1,2,3,4,5]
        [--leaves 128 --spines 64 --hosts-per-leaf 64] [--link-gbit-s 100]

One all-to-all job alone on an idle leaf-spine cluster (the vClos paper's electrical fabric
by default: 128 leaves of 64 GPUs, 64 spines, 100 Gbit/s), placed by each policy's
allocator on whole leaves, every ordered pair of ranks at once (as NCCL posts them; see
``testbed.sim.job_plans``). Under ECMP each flow's spine is a hash of a random
source port, so some leaf-spine links carry more flows than others and the lockstep
collective runs at the most loaded link's pace; vClos gives each source host its own spine.
Two schedules: ``all-pairs`` (the simulator's all-to-all: n(n-1) flows at once) and
``pairwise`` (n-1 steps, step k a permutation p -> p+k, as RapidNetSim's all-to-all runs).
Bandwidths as nccl-tests reports alltoall: algbw = S/t (S: bytes each rank holds),
busbw = algbw (n-1)/n. The paper (arXiv 2308.05692) reports ECMP losing about 60% of
all-to-all throughput (quoted from a secondary summary).
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import Counter

from sdn_app.allocation.cluster import Cluster
from sdn_app.policies import get as get_policy
from testbed.core.ports import SPORTS
from testbed.sim.job_plans import job_plan, rails_time, rank_order

SIZE_BYTES = 1 << 30  # per rank; the ratio does not depend on it


def _ints(text: str) -> list[int]:
    """An argparse type: comma-separated integers."""
    return [int(x) for x in text.split(",") if x]


def alltoall_s(policy: str, gpus: int, args: argparse.Namespace, seed: int) -> float:
    """Seconds of one all-to-all of SIZE_BYTES per rank, the job alone, placed by ``policy``."""
    cluster = Cluster(args.leaves, args.spines, args.hosts_per_leaf, 0)
    alloc = get_policy(policy).allocate(cluster, "a2a", gpus)
    link_bps = args.link_gbit_s * 1e9
    plan = job_plan(alloc, SIZE_BYTES, link_bps, args.spines, random.Random(seed),
                    collective="all-to-all")
    return plan.intra_s + rails_time(plan, link_bps)


def pairwise_s(policy: str, gpus: int, args: argparse.Namespace, seed: int) -> float:
    """Seconds of the same all-to-all as n-1 pairwise-exchange steps (step k: rank p sends
    S/n to rank p+k), each a lockstep bundle that ends with its slowest flow."""
    cluster = Cluster(args.leaves, args.spines, args.hosts_per_leaf, 0)
    alloc = get_policy(policy).allocate(cluster, "a2a", gpus)
    order = rank_order(alloc)
    path, rng = get_policy(policy).path, random.Random(seed)
    sports = {(a, b): rng.randrange(*SPORTS) for a in order for b in order if a != b}
    total = 0.0
    for k in range(1, gpus):
        crossings: Counter = Counter()
        for p, src in enumerate(order):
            dst = order[(p + k) % gpus]
            crossings.update(path(alloc, src, dst, args.spines, sports[(src, dst)]))
        total += SIZE_BYTES / gpus * 8 * max(crossings.values()) / (args.link_gbit_s * 1e9)
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=_ints, default=[128, 256, 512])
    p.add_argument("--seeds", type=_ints, default=[1, 2, 3, 4, 5])
    p.add_argument("--leaves", type=int, default=128)
    p.add_argument("--spines", type=int, default=64)
    p.add_argument("--hosts-per-leaf", type=int, default=64)
    p.add_argument("--link-gbit-s", type=float, default=100.0)
    args = p.parse_args()
    print(f"{args.leaves} leaves x {args.hosts_per_leaf} GPUs, {args.spines} spines, "
          f"{args.link_gbit_s:g} Gbit/s; one all-to-all alone; seeds {args.seeds}")
    print(f"{'schedule':>9} {'GPUs':>5} {'vclos busbw Gbit/s':>18} "
          f"{'ecmp busbw Gbit/s: median [min, max]':>38} {'ECMP loses: median [min, max]':>30}")
    for name, timer in (("all-pairs", alltoall_s), ("pairwise", pairwise_s)):
        for gpus in args.sizes:
            factor = (gpus - 1) / gpus
            vclos = factor * SIZE_BYTES * 8 / timer("vclos", gpus, args, 0) / 1e9
            ecmp = [factor * SIZE_BYTES * 8 / timer("ecmp", gpus, args, s) / 1e9
                    for s in args.seeds]
            loss = [100 * (1 - e / vclos) for e in ecmp]
            print(f"{name:>9} {gpus:>5} {vclos:>18.1f} {statistics.median(ecmp):>14.1f} "
                  f"[{min(ecmp):.1f}, {max(ecmp):.1f}]{'':>10} "
                  f"{statistics.median(loss):>10.1f}% [{min(loss):.1f}, {max(loss):.1f}]")


if __name__ == "__main__":
    main()

"""Does OCS-vClos lower waiting time against static vClos? One trace, several cluster models.

    .venv/bin/python benchmarks/ocs_vs_vclos.py [--jobs 3000] [--load 1.0] [--seed 1]
        [--leaves 128 --spines 64 --hosts-per-leaf 64] [--spine-ports-per-ocs P] [--ocs-only]

Every row replays the same synthetic trace (FIFO admission, flat-ring All-Reduce) on the
same 8192-GPU cluster. The OCS layer has as many ports as the electrical fabric has links
(one leaf port per OCS, ``leaves / ocs`` spine ports per OCS, ``ocs = spines``), so it adds
no capacity, only the freedom to choose which spine a leaf port reaches. ``--spine-ports-per-ocs
4`` gives every spine twice that (spare spine ports, as a spine with more ports than leaves).

* ``placement``: ``joint`` chooses hosts and network together (the allocator walks leaf
  sets until the network fits); ``hosts-first`` picks the hosts network-obliviously and the
  network must join exactly those leaves.
* ``rewiring`` (ocs-vclos): ``any`` takes any idle ports; ``conservative`` uses the default
  wiring (the electrical fabric's) first and only spine ports no default circuit can use.

"frag hosts" / "frag links": admission attempts refused because no m leaves had n free hosts
/ because the leaves existed but no free spine links (or circuits) joined them.
"""

from __future__ import annotations

import argparse
import time

from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.traces import synthetic

ROWS = [  # (placement, policy, rewiring)
    ("joint", "vclos", "any"),
    ("joint", "ocs-vclos", "any"),
    ("joint", "ocs-vclos", "conservative"),
    ("hosts-first", "vclos", "any"),
    ("hosts-first", "ocs-vclos", "any"),
    ("hosts-first", "ocs-vclos", "conservative"),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--leaves", type=int, default=128)
    p.add_argument("--spines", type=int, default=64)
    p.add_argument("--hosts-per-leaf", type=int, default=64)
    p.add_argument("--spine-ports-per-ocs", type=int, default=0,
                   help="default: leaves / OCSes (the electrical fabric's port count)")
    p.add_argument("--ocs-only", action="store_true", help="skip the static vclos rows")
    args = p.parse_args()
    gpus = args.leaves * args.hosts_per_leaf
    trace = synthetic(args.jobs, args.load, gpus, args.seed)
    print(f"{gpus} GPUs ({args.leaves} leaves x {args.hosts_per_leaf}, {args.spines} spines), "
          f"{args.jobs} synthetic jobs, load {args.load}, seed {args.seed}")
    print(f"{'placement':>11} {'policy':>9} {'rewiring':>12} {'wall s':>6} {'avg wait s':>10} "
          f"{'avg JCT s':>9} {'GPU util':>8} {'frag hosts':>10} {'frag links':>10} "
          f"{'jobs refused':>12}")
    for placement, policy, rewiring in ROWS:
        if args.ocs_only and policy != "ocs-vclos":
            continue
        config = ClusterConfig(
            args.leaves, args.spines, args.hosts_per_leaf, policy,
            ocs_count=args.spines if policy == "ocs-vclos" else 0, seed=args.seed,
            placement=placement, rewiring=rewiring, spine_ports_per_ocs=args.spine_ports_per_ocs,
        )
        started = time.perf_counter()
        s = simulate_cluster(trace, config).summary
        links = s["refused_fragmented_links"]
        print(f"{placement:>11} {policy:>9} {rewiring if policy == 'ocs-vclos' else '-':>12} "
              f"{time.perf_counter() - started:6.1f} {s['avg_wait']:10.1f} {s['avg_jct']:9.1f} "
              f"{s['gpu_utilisation']:8.3f} {s['refused_fragmented'] - links:10d} {links:10d} "
              f"{s['refused_fragmented_jobs']:12d}", flush=True)


if __name__ == "__main__":
    main()

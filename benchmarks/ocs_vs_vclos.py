"""Does OCS-vClos lower waiting time against static vClos? One trace, several cluster models.

    .venv/bin/python benchmarks/ocs_vs_vclos.py [--jobs 3000] [--load 1.0] [--seeds 1,2,3]
        [--leaves 128 --spines 64 --hosts-per-leaf 64] [--placements joint,hosts-first]
        [--rewirings any,conservative,augment] [--spine-ports-per-ocs P] [--no-bound]

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

"frag hosts" / "frag links": admission attempts refused because no m leaves had n free hosts
/ because the leaves existed but no free spine links (or circuits) joined them. "vs vclos":
the average wait against static vClos with the same placement and seed.
"""

from __future__ import annotations

import argparse
import time

from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.traces import synthetic


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _words(text: str) -> list[str]:
    return [x for x in text.split(",") if x]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=3000)
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--seeds", type=_ints, default=[1], help="comma-separated, e.g. 1,2,3")
    p.add_argument("--leaves", type=int, default=128)
    p.add_argument("--spines", type=int, default=64)
    p.add_argument("--hosts-per-leaf", type=int, default=64)
    p.add_argument("--placements", type=_words, default=["joint", "hosts-first"])
    p.add_argument("--rewirings", type=_words, default=["any", "conservative", "augment"])
    p.add_argument("--spine-ports-per-ocs", type=int, default=0,
                   help="default: leaves / OCSes (the electrical fabric's port count)")
    p.add_argument("--no-bound", action="store_true", help="skip the no-link-limit row")
    args = p.parse_args()
    gpus = args.leaves * args.hosts_per_leaf
    print(f"{gpus} GPUs ({args.leaves} leaves x {args.hosts_per_leaf}, {args.spines} spines), "
          f"{args.jobs} synthetic jobs, load {args.load}")
    print(f"{'seed':>4} {'placement':>11} {'policy':>9} {'rewiring':>12} {'wall s':>6} "
          f"{'avg wait s':>10} {'vs vclos':>8} {'avg JCT s':>9} {'GPU util':>8} "
          f"{'frag hosts':>10} {'frag links':>10}")
    for seed in args.seeds:
        trace = synthetic(args.jobs, args.load, gpus, seed)
        for placement in args.placements:
            rows = [("vclos", "-", args.spines)]
            rows += [("ocs-vclos", r, args.spines) for r in args.rewirings]
            if not args.no_bound:
                rows.append(("vclos", "bound", 4 * args.hosts_per_leaf))
            static = None
            for policy, rewiring, spines in rows:
                config = ClusterConfig(
                    args.leaves, spines, args.hosts_per_leaf, policy,
                    ocs_count=spines if policy == "ocs-vclos" else 0, seed=seed,
                    placement=placement, rewiring=rewiring if policy == "ocs-vclos" else "any",
                    spine_ports_per_ocs=args.spine_ports_per_ocs,
                )
                started = time.perf_counter()
                s = simulate_cluster(trace, config).summary
                wall = time.perf_counter() - started
                static = s["avg_wait_s"] if static is None else static
                change = (s["avg_wait_s"] / static - 1) * 100 if static else 0.0
                links = s["refused_fragmented_links"]
                print(f"{seed:>4} {placement:>11} {policy:>9} {rewiring:>12} {wall:6.1f} "
                      f"{s['avg_wait_s']:10.1f} {change:+7.1f}% {s['avg_jct_s']:9.1f} "
                      f"{s['gpu_utilisation']:8.3f} {s['refused_fragmented'] - links:10d} "
                      f"{links:10d}", flush=True)


if __name__ == "__main__":
    main()

"""Every policy on RapidNetSim's jobs; BENCHMARKS.md "The vClos paper reproduced honestly".

The vClos paper's experiment on RapidNetSim's own job list: waiting and completion times
of every policy, the gpu-count bound beside each, and how long the queue gets.

    nice -n 10 .venv/bin/python benchmarks/vclos_paper.py [--gaps 241,285,360,421,555]
        [--policies gpu-count,source-routing,source-routing-flat,vclos,ocs-vclos,ecmp]
        [--jobs 5000] [--trace rapidnetsim] [--rewiring augment] [--gpus-per-server 1]
        [--queues fifo,easy-backfill,...] [--queue-csv FILE]

``--trace rapidnetsim`` (default): run times are the jobs' own and never depend on placement
or sharing, as in RapidNetSim (its sharing reset, docs/vclos-paper.md); only admission differs
between policies. ``rapidnetsim-comm``: each job's communication share is bytes of its
collective, max-min shared, so placement and collisions cost time too.
``rapidnetsim-jittered``: the run times RapidNetSim's simulator draws for the same jobs
(``testbed.sim.traces.rapidnetsim_drawn_run_s``), still placement-independent.

Shapes: the paper's (``--preset vclos-paper``): 128 leaves x 64 GPUs and 64 spines for every
policy but ocs-vclos, which runs on 256 leaves x 32 GPUs, 128 spines and 32 OCSes.

Columns: JWT (average wait, arrival to start) and JCT (arrival to finish), seconds; wall and
CPU seconds of the run (CPU time: the process's own, steadier on a shared machine); "bound
JWT" is gpu-count's on the same trace; "cut vs X" is the largest share of X's JWT any policy
could remove, 1 - bound / X (X: source-routing, RapidNetSim's baseline); queue: time-average
and largest number of jobs waiting between the first arrival and the last start.

``--queues``: the queue disciplines to run (testbed.sim.queues; default fifo). Under each, the
"bound" column is gpu-count under that discipline: a proven bound for fifo only, a reference
for the others; "cut vs source-routing fifo" is 1 - JWT / source-routing's JWT under fifo,
the paper's baseline.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time

from testbed.sim.cluster import simulate_cluster
from testbed.sim.cluster_run import cluster_config
from testbed.sim.trace_loading import load_trace


def queue_steps(rows: list[dict]) -> list[tuple[float, int]]:
    """(time, jobs waiting after it) at every arrival and start."""
    events = sorted([(r["arrival_s"], 1) for r in rows] + [(r["start_s"], -1) for r in rows],
                    key=lambda e: (e[0], e[1]))
    waiting, out = 0, []
    for t, step in events:
        waiting += step
        out.append((t, waiting))
    return out


def queue_stats(steps: list[tuple[float, int]]) -> tuple[float, int]:
    """Time-average and largest queue length over the steps' span."""
    area = sum(n * (t2 - t1) for (t1, n), (t2, _) in itertools.pairwise(steps))
    span = steps[-1][0] - steps[0][0]
    return (area / span if span > 0 else 0.0), max(n for _, n in steps)


def run(policy: str, trace: str, gap: float, jobs: int, rewiring: str,
        gpus_per_server: int = 1, queue: str = "fifo") -> dict:
    config = cluster_config({"preset": "vclos-paper", "policy": policy, "rewiring": rewiring,
                             "gpus_per_server": gpus_per_server, "queue": queue})
    specs = load_trace(f"{trace}:{gap:g}", jobs, 0.8, 8192, 1)
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate_cluster(specs, config)
    steps = queue_steps(result.rows)
    mean_q, max_q = queue_stats(steps)
    s = result.summary
    return {"policy": policy, "queue": queue, "gap_s": gap, "jwt_s": s["avg_wait_s"],
            "jct_s": s["avg_jct_s"],
            "done": s["jobs_completed"], "refused_unshapeable": s["refused_unshapeable"],
            "refused_links": s["refused_fragmented_links"], "queue_mean": mean_q,
            "queue_max": max_q, "wall_s": time.perf_counter() - wall,
            "cpu_s": time.process_time() - cpu, "steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gaps", default="241,285,360,421,555")
    ap.add_argument("--policies",
                    default="gpu-count,source-routing,source-routing-flat,vclos,ocs-vclos,ecmp")
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--trace", default="rapidnetsim", choices=("rapidnetsim", "rapidnetsim-comm",
                                                                  "rapidnetsim-jittered"))
    ap.add_argument("--rewiring", default="augment")
    ap.add_argument("--gpus-per-server", type=int, default=1,
                    help="a job crossing leaves takes whole idle servers of this many GPUs "
                         "(RapidNetSim's: 4)")
    ap.add_argument("--queues", default="fifo",
                    help="queue disciplines, comma-separated (default fifo)")
    ap.add_argument("--queue-csv", default="", help="write every run's queue length steps here")
    args = ap.parse_args()
    policies = args.policies.split(",")
    if "gpu-count" not in policies:
        policies.insert(0, "gpu-count")
    queue_rows = []
    print(f"trace {args.trace}, {args.jobs} jobs; ocs-vclos rewiring {args.rewiring}")
    print(f"{'gap s':>6} {'queue':<20} {'policy':<20} {'JWT s':>9} {'JCT s':>9} "
          f"{'bound JWT':>9} {'queue avg':>9} {'max':>5} {'done':>5} {'links':>6} "
          f"{'wall s':>7} {'cpu s':>7}")
    for gap in (float(g) for g in args.gaps.split(",")):
        for queue in args.queues.split(","):
            bound = None
            results = []
            for policy in policies:
                r = run(policy, args.trace, gap, args.jobs, args.rewiring,
                        args.gpus_per_server, queue)
                bound = r["jwt_s"] if policy == "gpu-count" else bound
                results.append(r)
                queue_rows += [(queue, policy, gap, t, n) for t, n in r["steps"]]
                print(f"{gap:>6g} {queue:<20} {policy:<20} {r['jwt_s']:>9.0f} "
                      f"{r['jct_s']:>9.0f} {bound:>9.0f} {r['queue_mean']:>9.1f} "
                      f"{r['queue_max']:>5} {r['done']:>5} {r['refused_links']:>6} "
                      f"{r['wall_s']:>7.1f} {r['cpu_s']:>7.1f}", flush=True)
            base = next((r for r in results if r["policy"] == "source-routing"), None)
            if queue == "fifo" and base is not None and base["jwt_s"] > 0:
                print(f"{gap:>6g} largest JWT cut any placement could make against "
                      f"source-routing under fifo: {1 - bound / base['jwt_s']:.1%}", flush=True)
    if args.queue_csv:
        with open(args.queue_csv, "w", newline="", encoding="utf-8") as fh:
            out = csv.writer(fh)
            out.writerow(["queue", "policy", "gap_s", "time_s", "jobs_waiting"])
            out.writerows(queue_rows)


if __name__ == "__main__":
    main()

"""Fingerprints of a policy's allocations; BENCHMARKS.md "The vClos paper reproduced honestly".

Every decision of one policy run on the vClos paper's setup, as one line per gap: JWT, JCT,
admissions refused for circuits, and a SHA-256 over every committed allocation in order (its
hosts, spines, circuits and ports) and over every job's start and finish; with the run's CPU
seconds. Two versions of the allocator decide alike on a gap when its two hashes match.

    nice -n 10 .venv/bin/python benchmarks/exact_fingerprint.py [--gaps 241,285,360,421,555]
        [--policy ocs-vclos] [--rewiring milp] [--gpus-per-server 4]

The allocations are hashed after the run, so the CPU seconds are the run's own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time

from sdn_app.allocation.ledger import Allocation, Ledger
from testbed.sim.cluster import simulate_cluster
from testbed.sim.cluster_run import cluster_config
from testbed.sim.trace_loading import load_trace


def fingerprint(gap_s: float, policy: str, rewiring: str, gpus_per_server: int) -> dict:
    """One run's figures and hashes (see the module doc)."""
    committed: list[Allocation] = []
    real_commit = Ledger.commit

    def commit(ledger: Ledger, allocation: Allocation) -> None:
        committed.append(allocation)
        real_commit(ledger, allocation)

    config = cluster_config({"preset": "vclos-paper", "policy": policy, "rewiring": rewiring,
                             "gpus_per_server": gpus_per_server})
    specs = load_trace(f"rapidnetsim:{gap_s:g}", 5000, 0.8, 8192, 1)
    Ledger.commit = commit  # type: ignore[method-assign]
    try:
        cpu = time.process_time()
        result = simulate_cluster(specs, config)
        cpu = time.process_time() - cpu
    finally:
        Ledger.commit = real_commit  # type: ignore[method-assign]
    allocations = hashlib.sha256()
    for allocation in committed:
        allocations.update(json.dumps(allocation.to_dict(), sort_keys=True).encode())
    times = [(r["job_id"], r["start_s"], r["finish_s"]) for r in result.rows]
    s = result.summary
    return {"gap_s": gap_s, "jwt_s": s["avg_wait_s"], "jct_s": s["avg_jct_s"],
            "refused_links": s["refused_fragmented_links"], "cpu_s": cpu,
            "allocations_sha256": allocations.hexdigest(),
            "times_sha256": hashlib.sha256(json.dumps(times).encode()).hexdigest()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gaps", default="241,285,360,421,555")
    ap.add_argument("--policy", default="ocs-vclos")
    ap.add_argument("--rewiring", default="milp")
    ap.add_argument("--gpus-per-server", type=int, default=4)
    args = ap.parse_args()
    print(f"{'gap s':>6} {'JWT s':>12} {'JCT s':>12} {'links':>6} {'cpu s':>6}  "
          f"{'allocations sha256':<16}  {'times sha256':<16}")
    for gap in (float(g) for g in args.gaps.split(",")):
        r = fingerprint(gap, args.policy, args.rewiring, args.gpus_per_server)
        print(f"{gap:>6g} {r['jwt_s']:>12.3f} {r['jct_s']:>12.3f} {r['refused_links']:>6} "
              f"{r['cpu_s']:>6.1f}  {r['allocations_sha256'][:16]}  {r['times_sha256'][:16]}",
              flush=True)


if __name__ == "__main__":
    main()

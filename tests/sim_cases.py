"""Small cluster runs whose job records pin the simulator's results (tests/data/sim_cases.json).

``python tests/sim_cases.py > tests/data/sim_cases.json`` records them anew; do that only when
a change of results is intended, and say why in the commit.
"""

from __future__ import annotations

import json
from typing import Any

from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.traces import synthetic

# name: (policy, collective, seed, load); every case: 8 leaves x 8 hosts, 4 spines, 50 jobs.
CASES: dict[str, tuple[str, str, int, float]] = {
    "ecmp-ring": ("ecmp", "ring", 1, 1.0),
    "ecmp-hier": ("ecmp", "rail-ring", 2, 1.0),
    "vclos-ring": ("vclos", "ring", 3, 1.0),
    "ocs-ring": ("ocs-vclos", "ring", 4, 1.0),
}
LEAVES, HOSTS_PER_LEAF, SPINES, JOBS = 8, 8, 4, 50
SUMMARY_KEYS = ("jobs_completed", "refused_fragmented", "refused_unshapeable", "flows",
                "collided_flows")


def run_case(name: str, **network: Any) -> dict[str, Any]:
    """One case's summary counts and, per job, [job_id, start_s, finish_s, collided_flows]."""
    policy, collective, seed, load = CASES[name]
    config = ClusterConfig(LEAVES, SPINES, HOSTS_PER_LEAF, policy,
                           ocs_count=SPINES if policy == "ocs-vclos" else 0,
                           seed=seed, collective=collective, **network)
    result = simulate_cluster(synthetic(JOBS, load, LEAVES * HOSTS_PER_LEAF, seed), config)
    return {
        "summary": {k: result.summary[k] for k in SUMMARY_KEYS},
        "jobs": [[r["job_id"], float(f"{r['start_s']:.13g}"), float(f"{r['finish_s']:.13g}"),
                  r["collided_flows"]] for r in result.rows],
    }


if __name__ == "__main__":
    print(json.dumps({name: run_case(name) for name in CASES}, separators=(",", ":")))

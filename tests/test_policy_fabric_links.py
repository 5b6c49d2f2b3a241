"""A policy's ``fabric_links`` (what the simulator's aggregated steps route by: issue 44) are
its path's links other than host links, for every registered policy, on placed jobs of
every allocator (vClos, OCS-vClos with spine and direct leaf-leaf circuits, ECMP)."""

from __future__ import annotations

import random

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import AllocationRefused
from sdn_app.policies import applicable, get
from sdn_app.policies.base import HOST_LINKS


def placed_jobs(allocates_as: str, seed: int) -> list:
    """Jobs of random sizes placed by ``allocates_as`` on a small cluster."""
    rng = random.Random(seed)
    ocs = allocates_as == "ocs-vclos"
    cluster = Cluster(leaves=8, spines=4, hosts_per_leaf=4, ocs_count=4 if ocs else 0)
    jobs = []
    for job in range(12):
        try:
            jobs.append(cluster.allocate(f"j{job}", rng.choice((2, 4, 6, 8)), allocates_as))
        except AllocationRefused:  # the cluster is full or fragmented
            continue
    return jobs


@pytest.mark.parametrize("name", sorted({*applicable("leaf_spine", simulator=True),
                                          *applicable("ocs_leaf_spine", simulator=True)}))
def test_fabric_links_are_the_paths_links_without_host_links(name: str) -> None:
    policy = get(name)
    if policy.hashed:
        pytest.skip("paths drawn by a hash: the simulator does not ask for fabric links")
    checked = 0
    for seed in range(6):
        for alloc in placed_jobs(policy.allocates_as, seed):
            for src in alloc.hosts:
                for dst in alloc.hosts:
                    if src == dst:
                        continue
                    want = tuple(link for link in policy.path(alloc, src, dst, 4, 0)
                                 if link[0] not in HOST_LINKS)
                    assert policy.fabric_links(alloc, src, dst, 4) == want
                    checked += 1
    assert checked > 100

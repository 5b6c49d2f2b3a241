"""RapidNetSim's baseline placement (source-routing), the gpu-count reference, and the bound:
under strict FIFO with fixed run times, gpu-count starts every job no later than any policy."""

from __future__ import annotations

import random

import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import AllocationRefused
from sdn_app.policies import get
from testbed.core.errors import SpecError
from testbed.sim.cluster import ClusterConfig, simulate_cluster
from testbed.sim.traces import TraceJob


def cluster() -> Cluster:
    return Cluster(8, 4, 4)  # 8 leaves of 4 hosts: 4 pods of 2 leaves


def test_a_small_cluster_keeps_two_leaves_a_pod() -> None:
    c = Cluster(4, 2, 2)  # 2 pods of 2 leaves, not 4 of 1
    assert get("source-routing").allocate(c, "a", 4).leaves == (0, 1)
    assert get("source-routing").allocate(c, "b", 4).leaves == (2, 3)


def test_a_small_job_takes_the_best_fit_leaf_of_the_first_pod_that_holds_one() -> None:
    c, sr = cluster(), get("source-routing")
    assert sr.allocate(c, "a", 3).leaves == (0,)
    assert sr.allocate(c, "b", 1).leaves == (0,)  # leaf 0 has 1 free: the best fit
    assert sr.allocate(c, "c", 2).leaves == (1,)  # the idle leaf of pod 0
    assert sr.allocate(c, "d", 3).leaves == (2,)  # pod 0 has 2 free on leaf 1: next pod


def test_a_job_larger_than_a_leaf_takes_whole_idle_leaves_of_one_pod() -> None:
    c, sr = cluster(), get("source-routing")
    sr.allocate(c, "a", 1)  # leaf 0 is no longer idle: pod 0 has one idle leaf
    alloc = sr.allocate(c, "b", 6)
    assert alloc.leaves == (2, 3) and len(alloc.hosts) == 6
    # Flat (no pods): leaves 1 and 2 are idle ... the first two idle leaves anywhere.
    flat = Cluster(8, 4, 4)
    get("source-routing-flat").allocate(flat, "a", 1)
    assert get("source-routing-flat").allocate(flat, "b", 6).leaves == (1, 2)


def test_refused_as_fragmented_when_no_pod_has_the_idle_leaves() -> None:
    c, sr = cluster(), get("source-routing")
    for leaf in range(8):  # one host busy on every leaf: 24 free, no idle leaf
        c.claim(f"x{leaf}", [(leaf, 0)], "ecmp")
    with pytest.raises(AllocationRefused) as err:
        sr.allocate(c, "big", 8)
    assert err.value.reason == "fragmented" and err.value.cause == "hosts"
    assert get("gpu-count").allocate(c, "any", 24).size == 24  # counts GPUs only


def test_gpu_count_crosses_only_the_hosts_links_and_is_no_fabric_policy() -> None:
    c = cluster()
    alloc = get("gpu-count").allocate(c, "a", 8)
    path = get("gpu-count").path(alloc, (0, 0), (1, 0), 4)
    assert [link[0] for link in path] == ["hu", "hd"]
    with pytest.raises(SpecError, match="simulator"):
        get("gpu-count").base_program(None)  # type: ignore[arg-type]


def fixed_jobs(seed: int, n: int = 60) -> list[TraceJob]:
    """Jobs whose run time is all compute: it does not depend on placement or sharing."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(1 / 30)
        gpus = rng.choice((1, 2, 3, 4, 6, 8))  # a pod holds 8
        out.append(TraceJob(f"j{i}", t, gpus, "m", 1, rng.uniform(50, 400), 0))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_gpu_count_starts_every_job_no_later_than_any_policy(seed: int) -> None:
    jobs = fixed_jobs(seed)
    start = {}
    for policy in ("gpu-count", "source-routing", "source-routing-flat", "ecmp", "vclos",
                   "ocs-vclos"):
        ocs = 4 if policy == "ocs-vclos" else 0
        result = simulate_cluster(jobs, ClusterConfig(8, 4, 4, policy=policy, seed=seed,
                                                      ocs_count=ocs))
        assert result.summary["refused_unshapeable"] == 0
        start[policy] = {r["job_id"]: r["start_s"] for r in result.rows}
    bound = start.pop("gpu-count")
    for policy, starts in start.items():
        assert all(bound[j] <= s + 1e-9 for j, s in starts.items()), policy
    # ... and the bound is not vacuous: some policy waits longer somewhere.
    assert any(bound[j] < s - 1e-9 for starts in start.values() for j, s in starts.items())


def test_servers_of_several_gpus_make_a_job_crossing_leaves_take_whole_idle_servers() -> None:
    c = Cluster(4, 4, 8, gpus_per_server=4)  # 4 leaves of 2 servers of 4 GPUs
    c.claim("x", [(0, 0), (1, 4)], "ecmp")  # one GPU busy in a server of leaves 0 and 1
    alloc = get("ecmp").allocate(c, "a", 12)  # crosses leaves: whole idle servers only
    assert all(not (leaf == 0 and s < 4) and not (leaf == 1 and s >= 4)
               for leaf, s in alloc.hosts)
    assert alloc.size == 12
    assert get("ecmp").allocate(c, "one-leaf", 3).leaves == (0,)  # a leaf's free GPUs do
    # vclos: hosts per leaf are whole servers, so 6 = 3 x 2 is no shape, 8 = 2 x 4 is.
    v = Cluster(4, 4, 8, gpus_per_server=4)
    assert v.shapes(6, "vclos") == [] and (2, 4) in v.shapes(8, "vclos")


def test_gpus_per_server_must_divide_the_leaf() -> None:
    with pytest.raises(Exception, match="gpus_per_server"):
        Cluster(4, 4, 6, gpus_per_server=4)

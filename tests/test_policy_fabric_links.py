"""A policy's ``fabric_links`` (what the simulator's aggregated steps route by: issue 44) are
its path's links other than host links, for every registered policy, on placed jobs of
every allocator (vClos, OCS-vClos with spine and direct leaf-leaf circuits, ECMP)."""

from __future__ import annotations

import random
from fractions import Fraction

import numpy as np
import pytest

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import AllocationRefused
from sdn_app.policies import applicable, get
from sdn_app.policies.base import HOST_LINKS, RoutingPolicy
from sdn_app.policies.ocs_vclos import OcsVclos
from sdn_app.policies.vclos import Vclos
from testbed.sim.job_plans import Bundle, _Router, rank_order


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


# ``fabric_links_to_leaves``: the fabric links to a whole leaf at once (issue 44)

def by_host(policy: RoutingPolicy, alloc, src, leaves: list[int]) -> list[tuple]:
    """The straightforward answer: ``fabric_links`` to every host of each leaf, which must
    all agree."""
    rows = []
    for leaf in leaves:
        found = {policy.fabric_links(alloc, src, dst, 4) for dst in alloc.hosts
                 if dst[0] == leaf}
        assert len(found) == 1, (src, leaf, found)
        rows.append(found.pop())
    return rows


def mismatches(policy: RoutingPolicy) -> int:
    """Sources of placed jobs whose ``fabric_links_to_leaves`` differ from ``by_host``."""
    wrong = checked = 0
    for seed in range(6):
        for alloc in placed_jobs(policy.allocates_as, seed):
            for src in alloc.hosts:
                leaves = sorted({leaf for leaf, _ in alloc.hosts} - {src[0]})
                if leaves:
                    wrong += policy.fabric_links_to_leaves(alloc, src, leaves, 4) != by_host(
                        policy, alloc, src, leaves)
                    checked += 1
    assert checked > 50
    return wrong


@pytest.mark.parametrize("name", ["vclos", "ocs-vclos"])
def test_fabric_links_to_leaves_are_each_hosts_fabric_links(name: str) -> None:
    assert mismatches(get(name)) == 0


class DownByUp(OcsVclos):
    """Wrong on purpose: the way down taken on the source's OCS."""

    def fabric_links_to_leaves(self, alloc, src, leaves, spines):
        rows = super().fabric_links_to_leaves(alloc, src, leaves, spines)
        return [(r[0], ("cd", r[0][1], *r[1][2:])) if len(r) == 2 else r for r in rows]


def test_a_wrong_way_down_is_caught() -> None:
    assert mismatches(DownByUp()) > 0


def random_bundle(rng: random.Random, n: int) -> Bundle:
    """All-pairs-like flows among ``n`` positions: each sends to a random few."""
    pairs = [(a, b) for a in range(n) for b in rng.sample(range(n), rng.randint(1, n))
             if a != b]
    src, dst = (np.array(side, dtype=np.int64) for side in zip(*pairs, strict=True))
    return Bundle(Fraction(1), src, dst, True)


def aggregated(policy: RoutingPolicy, alloc, bundle: Bundle) -> tuple:
    router = _Router(alloc, 4, None, False, {})
    router.policy = policy
    return router.aggregated(rank_order(alloc), bundle)


class HostsOnly(Vclos):
    """vClos asked per destination host (the policy default)."""

    def fabric_links_to_leaves(self, alloc, src, leaves, spines):
        return None


class HostsOnlyOcs(OcsVclos):
    def fabric_links_to_leaves(self, alloc, src, leaves, spines):
        return None


@pytest.mark.parametrize(("fast", "slow"), [(Vclos, HostsOnly), (OcsVclos, HostsOnlyOcs)])
def test_aggregated_steps_are_the_same_by_leaf_as_by_host(fast, slow) -> None:
    rng = random.Random(7)
    compared = 0
    for seed in range(6):
        for alloc in placed_jobs(fast.allocates_as, seed):
            if len(alloc.hosts) < 2 or len(set(alloc.leaves)) < 2:
                continue
            bundle = random_bundle(rng, len(alloc.hosts))
            assert aggregated(fast(), alloc, bundle) == aggregated(slow(), alloc, bundle)
            compared += 1
    assert compared > 10


def test_aggregated_by_leaf_catches_a_wrong_way_down() -> None:
    rng = random.Random(7)
    differ = 0
    for seed in range(6):
        for alloc in placed_jobs("ocs-vclos", seed):
            if len(set(alloc.leaves)) >= 2:
                bundle = random_bundle(rng, len(alloc.hosts))
                differ += aggregated(DownByUp(), alloc, bundle) != aggregated(
                    HostsOnlyOcs(), alloc, bundle)
    assert differ > 0


# OCS-vClos's links worked out once per job (``CircuitLinks``, issue 44): the same links as
# walking the job's circuits for every flow, as the policy did before

def walked_fabric_links(alloc, src, dst) -> tuple:
    """The straightforward answer: ``src``'s circuit, then the job's first circuit from its
    spine down to ``dst``'s leaf (or the direct circuit), looked up in the circuits."""
    la, lb = src[0], dst[0]
    if la == lb:
        return ()
    up = alloc.circuits[alloc.circuit_of[src]]
    if up.end_b[0] == "leaf":
        return (("cl", up.ocs, la, lb),)
    _, spine, port = up.end_b
    down = next(c for c in alloc.circuits
                if c.end_a == ("leaf", lb) and c.end_b[:2] == ("spine", spine))
    return (("cu", up.ocs, la, spine, port), ("cd", down.ocs, spine, down.end_b[2], lb))


def walk_mismatches(policy: OcsVclos) -> tuple[int, int, int]:
    """Host pairs of placed OCS-vClos jobs whose fabric links differ from the walked ones;
    how many were checked, how many through a direct leaf-leaf circuit."""
    wrong = checked = direct = 0
    for seed in range(8):
        for alloc in placed_jobs("ocs-vclos", seed):
            for src in alloc.hosts:
                for dst in alloc.hosts:
                    want = walked_fabric_links(alloc, src, dst)
                    wrong += policy.fabric_links(alloc, src, dst, 4) != want
                    wrong += policy.path(alloc, src, dst, 4) != [("hu", *src), *want,
                                                                  ("hd", *dst)]
                    checked += 1
                    direct += len(want) == 1
    return wrong, checked, direct


def test_ocs_links_kept_per_job_are_the_walked_circuits() -> None:
    wrong, checked, direct = walk_mismatches(OcsVclos())
    assert wrong == 0
    assert checked > 500 and direct > 10


class DownOnAnotherSpine(OcsVclos):
    """Wrong on purpose: the way down taken from the next spine's circuit where it has one."""

    def fabric_links(self, alloc, src, dst, spines):
        links = super().fabric_links(alloc, src, dst, spines)
        if len(links) == 2:
            for other in alloc.circuits:
                if other.end_a == ("leaf", dst[0]) and other.end_b[0] == "spine" \
                        and other.end_b[1] != links[0][3]:
                    return (links[0], ("cd", other.ocs, *links[1][2:]))
        return links


def test_a_wrong_way_down_is_caught_against_the_walk() -> None:
    assert walk_mismatches(DownOnAnotherSpine())[0] > 0


def test_ocs_paths_of_pairs_are_each_flows_path() -> None:
    policy, rng = OcsVclos(), random.Random(3)
    checked = 0
    for seed in range(8):
        for alloc in placed_jobs("ocs-vclos", seed):
            hosts = list(alloc.hosts)
            rng.shuffle(hosts)
            pairs = [(a, b) for a in range(len(hosts)) for b in range(len(hosts))
                     if a != b and rng.random() < 0.6]
            assert policy.paths_of_pairs(alloc, hosts, pairs, 4) == [
                walked_path(alloc, hosts[a], hosts[b]) for a, b in pairs]
            checked += len(pairs)
    assert checked > 200


def walked_path(alloc, src, dst) -> list:
    return [("hu", *src), *walked_fabric_links(alloc, src, dst), ("hd", *dst)]


class UpByDown(OcsVclos):
    """Wrong on purpose: a flow between two leaves by the destination's own circuit up."""

    def paths_of_pairs(self, alloc, hosts, pairs, spines):
        found = super().paths_of_pairs(alloc, hosts, pairs, spines)
        for k, (a, b) in enumerate(pairs):
            if hosts[a][0] != hosts[b][0] and hosts[b] in alloc.circuit_of:
                up = alloc.circuits[alloc.circuit_of[hosts[b]]]
                if up.end_b[0] == "spine" and up.ocs != found[k][1][1]:
                    found[k] = [found[k][0], ("cu", up.ocs, *found[k][1][2:]), *found[k][2:]]
        return found


def test_a_wrong_way_up_in_paths_of_pairs_is_caught() -> None:
    policy = UpByDown()
    differ = 0
    for seed in range(8):
        for alloc in placed_jobs("ocs-vclos", seed):
            hosts = list(alloc.hosts)
            pairs = [(a, b) for a in range(len(hosts)) for b in range(len(hosts)) if a != b]
            differ += policy.paths_of_pairs(alloc, hosts, pairs, 4) != [
                walked_path(alloc, hosts[a], hosts[b]) for a, b in pairs]
    assert differ > 0


# ``own_fabric_paths``: a policy that says so routes each host's flows to a leaf over a
# fabric path no other host of the job takes there, and its aggregated steps skip the merge

class Merging(OcsVclos):
    """OCS-vClos with its aggregated paths merged (the default for a policy)."""

    own_fabric_paths = False


class SharedUpOcs(OcsVclos):
    """Wrong on purpose: every host of a leaf sent up its leaf's first host's circuit, yet
    still claiming paths of its own."""

    def fabric_links_to_leaves(self, alloc, src, leaves, spines):
        first = min(h for h in alloc.hosts if h[0] == src[0])
        return super().fabric_links_to_leaves(alloc, first, leaves, spines)


def shared_fabric_paths(policy: RoutingPolicy) -> tuple[int, int]:
    """Aggregated steps of placed jobs whose fabric paths repeat, and how many were checked."""
    rng = random.Random(11)
    repeated = checked = 0
    for seed in range(6):
        for alloc in placed_jobs(policy.allocates_as, seed):
            if len(alloc.leaves) < 2:
                continue
            paths, _ = aggregated(policy, alloc, random_bundle(rng, len(alloc.hosts)))
            fabric = [p for p in paths if p[0][0] not in HOST_LINKS]
            repeated += len(set(fabric)) < len(fabric)
            checked += 1
    return repeated, checked


@pytest.mark.parametrize("name", [n for n in sorted({*applicable("leaf_spine", simulator=True),
                                                      *applicable("ocs_leaf_spine",
                                                                  simulator=True)})
                                  if get(n).own_fabric_paths])
def test_own_fabric_paths_never_repeat(name: str) -> None:
    repeated, checked = shared_fabric_paths(get(name))
    assert repeated == 0 and checked > 10


def test_own_fabric_paths_are_the_merged_ones() -> None:
    rng = random.Random(5)
    compared = 0
    for seed in range(6):
        for alloc in placed_jobs("ocs-vclos", seed):
            if len(alloc.leaves) >= 2:
                bundle = random_bundle(rng, len(alloc.hosts))
                assert aggregated(OcsVclos(), alloc, bundle) == aggregated(Merging(), alloc,
                                                                           bundle)
                compared += 1
    assert compared > 10


def test_a_shared_path_claimed_as_own_is_caught() -> None:
    assert shared_fabric_paths(SharedUpOcs())[0] > 0

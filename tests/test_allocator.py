"""Tests for sdn_app.allocation: hand-checkable cases plus random arrival/release sequences."""

from __future__ import annotations

import json
from collections import Counter
from itertools import combinations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import (
    Allocation,
    AllocationRefused,
    AllocationRequestError,
    BlockCircuits,
    Circuit,
    clos_allocation,
    port_use,
)
from sdn_app.allocation.ocs import match_from_default
from testbed.core.errors import FabricLabError

# ------------------------------------------------------------------ helpers


def check_cross_leaf_shape(job: Allocation) -> None:
    """A cross-leaf vClos job: k = m*n, n hosts per leaf, one link per (leaf, spine)."""
    m, n = len(job.leaves), len(job.spines)
    assert len(job.hosts) == m * n
    assert Counter(leaf for leaf, _ in job.hosts) == dict.fromkeys(job.leaves, n)
    assert job.links == {(leaf, spine) for leaf in job.leaves for spine in job.spines}
    for leaf in job.leaves:
        slots = sorted(slot for l2, slot in job.hosts if l2 == leaf)
        assert [job.spine_of[(leaf, slot)] for slot in slots] == list(job.spines)


def check_circuits(job: Allocation, spine_ports_per_ocs: int = 2) -> None:
    """Circuits of an ocs-vclos job realise exactly its links, or its direct host pairs."""
    if not job.circuits:
        assert job.circuit_of == {}
        return
    assert job.policy == "ocs-vclos"
    assert set(job.circuit_of) == set(job.hosts)
    assert all(c.end_a == ("leaf", c.end_a[1]) for c in job.circuits)
    if job.spines:
        assert all(
            c.end_b[0] == "spine" and 0 <= c.end_b[2] < spine_ports_per_ocs for c in job.circuits
        )
        realised = Counter((c.end_a[1], c.end_b[1]) for c in job.circuits)
        assert realised == dict.fromkeys(job.links, 1)
        for host, index in job.circuit_of.items():
            assert job.circuits[index].end_a == ("leaf", host[0])
            assert job.circuits[index].end_b[1] == job.spine_of[host]
    else:  # direct leaf-leaf pair: host j of leaf a <-> host j of leaf b over circuit j
        a, b = job.leaves
        n = len(job.circuits)
        assert not job.links and not job.spine_of
        assert Counter(leaf for leaf, _ in job.hosts) == {a: n, b: n}
        assert all(c.end_a == ("leaf", a) and c.end_b == ("leaf", b) for c in job.circuits)
        for leaf in (a, b):
            slots = sorted(slot for l2, slot in job.hosts if l2 == leaf)
            assert [job.circuit_of[(leaf, slot)] for slot in slots] == list(range(n))


def check_cluster(cluster: Cluster) -> None:
    """Global invariants over all running jobs."""
    hosts = [h for job in cluster.jobs.values() for h in job.hosts]
    assert len(hosts) == len(set(hosts)), "a host was given to two jobs"
    assert cluster.free_hosts() == cluster.total_hosts - len(hosts)
    for leaf in range(cluster.leaves):
        assert cluster.free_count(leaf) == len(cluster.free_slots(leaf))
    exclusive = [
        job for job in cluster.jobs.values() if job.policy == "vclos" or cluster.exclusive_ocs_links
    ]
    links = [link for job in exclusive for link in job.links]
    assert len(links) == len(set(links)), "reserved links of two jobs overlap"
    leaf_ports: Counter[tuple[int, int]] = Counter()
    spine_ports: Counter[tuple[int, int]] = Counter()
    spine_port_ids: list[tuple[int, int, int]] = []
    for job in cluster.jobs.values():
        assert len(job.hosts) == len(set(job.hosts))
        assert all(
            0 <= leaf < cluster.leaves and 0 <= slot < cluster.hosts_per_leaf
            for leaf, slot in job.hosts
        )
        if len(job.leaves) == 1 or job.policy == "ecmp":
            assert not job.links and not job.spines and not job.circuits and not job.spine_of
        elif job.spines:
            check_cross_leaf_shape(job)
        else:
            assert job.policy == "ocs-vclos" and len(job.leaves) == 2 and job.circuits
        check_circuits(job, cluster.spine_ports_per_ocs)
        for c in job.circuits:
            assert 0 <= c.ocs < cluster.ocs_count
            for end in (c.end_a, c.end_b):
                if end[0] == "leaf":
                    leaf_ports[(c.ocs, end[1])] += 1
                else:
                    spine_ports[(c.ocs, end[1])] += 1
                    spine_port_ids.append((c.ocs, end[1], end[2]))
    assert all(count <= 1 for count in leaf_ports.values()), "a leaf uses two ports on one OCS"
    assert all(count <= cluster.spine_ports_per_ocs for count in spine_ports.values()), (
        "a spine uses more ports on one OCS than it has"
    )
    assert len(spine_port_ids) == len(set(spine_port_ids))


def fewest_leaves(free_per_leaf: list[int], size: int) -> int:
    """How many leaves a job of ``size`` hosts needs at least."""
    total = 0
    for count, free in enumerate(sorted(free_per_leaf, reverse=True), start=1):
        total += free
        if total >= size:
            return count
    raise AssertionError("not enough hosts")


def biclique_exists(cluster: Cluster, k: int) -> bool:
    """Brute force: is there any vClos placement of k hosts (oracle for small clusters)?"""
    reserved = {link for job in cluster.jobs.values() for link in job.links}
    free = [len(cluster.free_slots(leaf)) for leaf in range(cluster.leaves)]
    if k <= cluster.hosts_per_leaf and max(free) >= k:
        return True
    for m, n in cluster.shapes(k, "vclos"):
        leaves = [leaf for leaf in range(cluster.leaves) if free[leaf] >= n]
        for chosen in combinations(leaves, m):
            for spines in combinations(range(cluster.spines), n):
                if all((leaf, s) not in reserved for leaf in chosen for s in spines):
                    return True
    return False


# ----------------------------------------------------------- static vclos


def test_eight_hosts_get_two_leaves_by_four_spines() -> None:
    cluster = Cluster(leaves=4, spines=4, hosts_per_leaf=4)
    job = cluster.allocate("a", 8, "vclos")
    assert job.leaves == (0, 1)
    assert job.spines == (0, 1, 2, 3)
    assert job.hosts == tuple((leaf, slot) for leaf in (0, 1) for slot in range(4))
    assert len(job.links) == 8
    assert job.spine_of[(1, 2)] == 2
    assert job.circuits == () and job.circuit_of == {}
    check_cluster(cluster)


def test_small_job_stays_under_one_leaf_best_fit() -> None:
    cluster = Cluster(4, 4, 4)
    first = cluster.allocate("a", 3, "vclos")
    assert first.leaves == (0,) and not first.links and first.spine_of == {}
    second = cluster.allocate("b", 2, "vclos")  # leaf 0 has 1 free: does not fit
    assert second.leaves == (1,)
    third = cluster.allocate("c", 1, "vclos")  # best fit: leaf 0, the fewest free that fits
    assert third.hosts == ((0, 3),)
    assert cluster.free_hosts() == 10


def test_job_that_no_leaf_holds_is_split_with_half_leaves() -> None:
    cluster = Cluster(4, 4, 4)
    first = cluster.allocate("six", 6, "vclos")  # n=4 does not divide 6: 3 leaves x 2 hosts
    assert (first.leaves, first.spines) == ((0, 1, 2), (0, 1))
    assert cluster.allocate("two", 2, "vclos").leaves == (0,)  # best fit: fills leaf 0
    assert cluster.allocate("four", 4, "vclos").leaves == (3,)  # fills leaf 3
    job = cluster.allocate("a", 4, "vclos")  # leaves 1, 2 have 2 free: 2 leaves x 2 spines
    assert (job.leaves, job.spines) == ((1, 2), (2, 3))  # spines 0, 1 are taken there
    check_cross_leaf_shape(job)
    check_cluster(cluster)


def test_prime_job_larger_than_a_leaf_uses_one_host_per_leaf() -> None:
    cluster = Cluster(8, 4, 4)
    job = cluster.allocate("a", 5, "vclos")
    assert len(job.leaves) == 5 and len(job.spines) == 1
    check_cross_leaf_shape(job)


def test_unshapeable_size_is_refused_with_a_reason() -> None:
    cluster = Cluster(4, 4, 4)
    with pytest.raises(AllocationRefused, match="cannot be shaped") as refused:
        cluster.allocate("a", 5, "vclos")  # 5 = 5 leaves x 1 host, only 4 leaves
    assert refused.value.reason == "unshapeable"
    assert cluster.is_empty()


def test_not_enough_free_hosts() -> None:
    cluster = Cluster(4, 4, 4)
    cluster.allocate("a", 8, "vclos")
    cluster.allocate("b", 8, "vclos")
    for policy in ("vclos", "ecmp"):
        with pytest.raises(AllocationRefused, match="not enough free hosts") as refused:
            cluster.allocate("c", 1, policy)
        assert refused.value.reason == "no_hosts"
    with pytest.raises(AllocationRefused, match="not enough free hosts"):
        Cluster(2, 2, 2).allocate("big", 5, "vclos")


def fragmenting_sequence(cluster: Cluster, policy: str) -> None:
    """Leaves 0 and 3 end up with 2 free hosts each and no spine free to both (static)."""
    cluster.allocate("j0", 2, policy)  # leaf 0, slots 0-1
    cluster.allocate("j1", 6, policy)  # 3 leaves x 2 hosts
    cluster.allocate("j2", 6, policy)  # 3 leaves x 2 hosts
    cluster.release("j0")


def test_static_vclos_fragments() -> None:
    cluster = Cluster(4, 4, 4)
    fragmenting_sequence(cluster, "vclos")
    assert (cluster.jobs["j1"].leaves, cluster.jobs["j1"].spines) == ((0, 1, 2), (0, 1))
    assert (cluster.jobs["j2"].leaves, cluster.jobs["j2"].spines) == ((1, 2, 3), (2, 3))
    assert cluster.free_hosts() == 4
    with pytest.raises(AllocationRefused, match="fragmented") as refused:
        cluster.allocate("x", 4, "vclos")
    assert refused.value.reason == "fragmented"
    assert cluster.allocate("x", 4, "ecmp").leaves == (0, 3)  # ECMP does not care


def test_ocs_vclos_places_what_static_vclos_refuses() -> None:
    static = Cluster(4, 4, 4)
    fragmenting_sequence(static, "vclos")
    with pytest.raises(AllocationRefused, match="fragmented"):
        static.allocate("x", 4, "vclos")

    # Exclusive (leaf, spine) pairs as in static vclos, so j1 and j2 land exactly the same.
    ocs = Cluster(4, 4, 4, ocs_count=4, exclusive_ocs_links=True)
    fragmenting_sequence(ocs, "ocs-vclos")
    assert ocs.free_hosts() == 4
    for name in ("j1", "j2"):  # the same hosts and spines as on the static fabric
        assert ocs.jobs[name].leaves == static.jobs[name].leaves
        assert ocs.jobs[name].spines == static.jobs[name].spines
    job = ocs.allocate("x", 4, "ocs-vclos")
    # Leaves 0 and 3 still have idle ports on OCSes 2 and 3: two direct circuits.
    assert job.leaves == (0, 3) and job.hosts == ((0, 0), (0, 1), (3, 2), (3, 3))
    assert job.circuits == (
        Circuit(2, ("leaf", 0), ("leaf", 3)),
        Circuit(3, ("leaf", 0), ("leaf", 3)),
    )
    check_cluster(ocs)


def test_ocs_vclos_rewires_spines_where_static_vclos_is_fragmented() -> None:
    sequence = [("j1", 6), ("j2", 1), ("j3", 3), ("j4", 6)]
    static, ocs = Cluster(5, 4, 4), Cluster(5, 4, 4, ocs_count=4)
    for job_id, size in sequence:
        static.allocate(job_id, size, "vclos")
        ocs.allocate(job_id, size, "ocs-vclos")
    for cluster in (static, ocs):  # the same free hosts on both fabrics
        assert [cluster.free_slots(leaf) for leaf in range(5)] == [[3], [], [], [3], [2, 3]]
    # 3 hosts = 3 leaves x 1 host: leaf 0 can reach spines 2, 3 only (j1 holds 0, 1),
    # leaf 4 spines 0, 1 only (j4 holds 2, 3): no spine is free to leaves 0, 3 and 4.
    assert static.jobs["j4"].spines == (2, 3)
    with pytest.raises(AllocationRefused, match="fragmented"):
        static.allocate("x", 3, "vclos")
    job = ocs.allocate("x", 3, "ocs-vclos")
    assert job.leaves == (0, 3, 4) and len(job.spines) == 1 and len(job.circuits) == 3
    check_cluster(ocs)


def test_refusals_name_their_cause() -> None:
    static = Cluster(4, 4, 4)
    fragmenting_sequence(static, "vclos")
    with pytest.raises(AllocationRefused) as refused:
        static.allocate("x", 4, "vclos")
    assert refused.value.cause == "links"  # leaves 0 and 3 have the hosts, not the spines

    cluster = Cluster(4, 4, 4)
    for job_id, leaf, count in (("a", 0, 2), ("b", 1, 2), ("c", 2, 3), ("d", 3, 3)):
        cluster.claim(job_id, [(leaf, slot) for slot in range(count)], "vclos")
    assert cluster.free_hosts() == 6  # free per leaf: 2, 2, 1, 1
    with pytest.raises(AllocationRefused, match="no m leaves hold n free hosts") as refused:
        cluster.allocate("x", 6, "vclos")  # 3 x 2 needs three leaves with 2 free
    assert (refused.value.reason, refused.value.cause) == ("fragmented", "hosts")


def test_hosts_first_placement_refuses_what_joint_placement_finds() -> None:
    joint, first = Cluster(6, 4, 4), Cluster(6, 4, 4, placement="hosts-first")
    for cluster in (joint, first):
        fragmenting_sequence(cluster, "vclos")
        assert cluster.jobs["j2"].leaves == (1, 2, 3)
    # 6 hosts = 3 leaves x 2; best fit picks leaves 0, 3, 4, but 0 and 3 share no free spine.
    assert joint.allocate("x", 6, "vclos").leaves == (0, 4, 5)
    with pytest.raises(AllocationRefused) as refused:
        first.allocate("x", 6, "vclos")
    assert refused.value.cause == "links"


def test_conservative_rewiring_uses_the_default_wiring_first() -> None:
    cluster = Cluster(4, 4, 4, ocs_count=4, rewiring="conservative")
    job = cluster.allocate("a", 12, "ocs-vclos")
    assert job.spines == (0, 1, 2, 3)
    assert all(c.ocs == (c.end_a[1] + c.end_b[1]) % 4 for c in job.circuits)
    check_cluster(cluster)
    # Two leaves: default circuits to spines before direct leaf-leaf circuits
    # (rewiring="any" gives this job four direct circuits instead).
    pair = Cluster(4, 4, 4, ocs_count=4, rewiring="conservative").allocate("b", 8, "ocs-vclos")
    assert pair.leaves == (0, 1) and pair.spines == (0, 1, 2, 3)
    assert all(c.end_b[0] == "spine" for c in pair.circuits)


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(st.tuples(st.booleans(), st.integers(1, 12)), min_size=1, max_size=25),
    leaves=st.integers(3, 6),
    placement=st.sampled_from(["joint", "hosts-first"]),
    rewiring=st.sampled_from(["conservative", "augment"]),
)
def test_default_first_ocs_places_whatever_static_vclos_places_from_the_same_state(
    ops: list[tuple[bool, int]], leaves: int, placement: str, rewiring: str
) -> None:
    """With the fabric's own port count, conservative and augment rewiring mirror static
    vClos (default circuits = links) until static vClos refuses a job the OCS places."""
    static = Cluster(leaves, 4, 4, placement=placement)
    ocs = Cluster(leaves, 4, 4, ocs_count=4, spine_ports_per_ocs=-(-leaves // 4),
                  placement=placement, rewiring=rewiring)
    for i, (arrive, size) in enumerate(ops):
        if not arrive and static.jobs:
            victim = sorted(static.jobs)[size % len(static.jobs)]
            static.release(victim)
            ocs.release(victim)
            continue
        try:
            placed = static.allocate(f"j{i}", size, "vclos")
        except AllocationRefused:
            return  # from here on the OCS may do more, so the states may part
        mirrored = ocs.allocate(f"j{i}", size, "ocs-vclos")
        assert (mirrored.hosts, mirrored.spines) == (placed.hosts, placed.spines)
        assert all(c.ocs == (c.end_a[1] + c.end_b[1]) % 4 for c in mirrored.circuits)
        check_cluster(ocs)


def test_augment_rewiring_joins_the_leaves_static_vclos_cannot() -> None:
    static = Cluster(6, 4, 4, placement="hosts-first")
    ocs = Cluster(6, 4, 4, ocs_count=4, placement="hosts-first", rewiring="augment")
    for cluster, policy in ((static, "vclos"), (ocs, "ocs-vclos")):
        fragmenting_sequence(cluster, policy)
    assert [ocs.jobs[j].spines for j in ("j1", "j2")] == [static.jobs[j].spines
                                                          for j in ("j1", "j2")]
    with pytest.raises(AllocationRefused) as refused:
        static.allocate("x", 6, "vclos")  # best fit: leaves 0, 3, 4 share no free spine
    assert refused.value.cause == "links"
    job = ocs.allocate("x", 6, "ocs-vclos")
    assert job.leaves == (0, 3, 4) and len(job.spines) == 2
    rewired = [c for c in job.circuits if c.ocs != (c.end_a[1] + c.end_b[1]) % 4]
    assert rewired and len(rewired) < len(job.circuits)  # default circuits kept where possible
    check_cluster(ocs)


def testmatch_from_default_keeps_defaults_and_augments() -> None:
    everywhere = lambda ocs, spine: True  # noqa: E731
    # Both spines' default circuit is on OCS 0: spine 0 keeps it, spine 1 moves to OCS 1.
    assert match_from_default([0, 1], [0, 1], lambda s: 0, everywhere) == {0: 0, 1: 1}
    # Spine 1 has no idle port on OCS 1: spine 0 leaves its default along an augmenting path.
    only_zero = lambda ocs, spine: not (ocs == 1 and spine == 1)  # noqa: E731
    assert match_from_default([0, 1], [0, 1], lambda s: 0, only_zero) == {0: 1, 1: 0}
    assert match_from_default([0, 1], [0], lambda s: 0, everywhere) is None


def test_bad_placement_or_rewiring_is_one_sentence() -> None:
    with pytest.raises(AllocationRequestError, match="placement must be one of"):
        Cluster(2, 2, 2, placement="random")
    with pytest.raises(AllocationRequestError, match="rewiring must be one of"):
        Cluster(2, 2, 2, rewiring="magic")
    with pytest.raises(AllocationRequestError, match="spine_ports_per_ocs"):
        Cluster(2, 2, 2, spine_ports_per_ocs=0)


# ---------------------------------------------------------------- ocs-vclos


def test_ocs_two_leaves_use_direct_leaf_to_leaf_circuits() -> None:
    cluster = Cluster(4, 4, 4, ocs_count=4)
    job = cluster.allocate("a", 8, "ocs-vclos")
    assert job.leaves == (0, 1) and job.spines == () and job.links == frozenset()
    assert job.circuits == tuple(Circuit(o, ("leaf", 0), ("leaf", 1)) for o in range(4))
    assert job.circuit_of[(0, 2)] == job.circuit_of[(1, 2)] == 2
    check_cluster(cluster)


def test_ocs_three_leaves_get_circuits_to_four_spines() -> None:
    cluster = Cluster(4, 4, 4, ocs_count=4)
    job = cluster.allocate("a", 12, "ocs-vclos")
    assert job.leaves == (0, 1, 2) and job.spines == (0, 1, 2, 3)
    assert len(job.circuits) == 12
    check_cluster(cluster)
    cluster.release("a")
    assert cluster.is_empty()


def test_ocs_circuits_through_spines_are_the_ports_given() -> None:
    """clos_allocation's circuits (a BlockCircuits, built when read) are one per host, leaf
    by leaf then host j, on the (ocs, port) given for (leaf, j); they book the ports those
    circuits hold, and two circuits on one port are caught."""
    slots = {3: [1, 2], 0: [0, 3]}
    ports = {(0, 0): (1, 0), (0, 1): (2, 1), (3, 0): (0, 1), (3, 1): (2, 0)}
    job = clos_allocation("j", "ocs-vclos", slots, [5, 4], ports)
    want = (Circuit(1, ("leaf", 0), ("spine", 5, 0)), Circuit(2, ("leaf", 0), ("spine", 4, 1)),
            Circuit(0, ("leaf", 3), ("spine", 5, 1)), Circuit(2, ("leaf", 3), ("spine", 4, 0)))
    assert isinstance(job.circuits, BlockCircuits) and tuple(job.circuits) == want
    assert job.circuits.ports == port_use(want)
    assert job.circuit_of == {(0, 0): 0, (0, 3): 1, (3, 1): 2, (3, 2): 3}
    assert job.spine_of == {(0, 0): 5, (0, 3): 4, (3, 1): 5, (3, 2): 4}
    assert job.hosts == ((0, 0), (0, 3), (3, 1), (3, 2))
    with pytest.raises(AssertionError):  # spine 5's port 0 on OCS 1, twice
        clos_allocation("k", "ocs-vclos", slots, [5, 4], {**ports, (3, 0): (1, 0)})
    with pytest.raises(AssertionError):  # leaf 0's port on OCS 1, twice
        clos_allocation("k", "ocs-vclos", slots, [5, 4], {**ports, (0, 1): (1, 1)})


def test_ocs_spines_run_out_of_ports() -> None:
    # 1 OCS: each spine has 2 ports, each leaf 1 port; a 3 x 1 job needs 3 ports on one spine.
    cluster = Cluster(4, 2, 1, ocs_count=1)
    with pytest.raises(AllocationRefused, match="fragmented"):
        cluster.allocate("a", 3, "ocs-vclos")
    job = cluster.allocate("b", 2, "ocs-vclos")  # direct pair over the single OCS
    assert len(job.circuits) == 1 and job.circuits[0].end_b[0] == "leaf"


# ------------------------------------------------------------ ecmp and api


def test_ecmp_uses_fewest_leaves_and_reserves_nothing() -> None:
    cluster = Cluster(4, 4, 4)
    cluster.allocate("a", 3, "ecmp")  # leaf 0
    cluster.allocate("b", 1, "ecmp")  # best fit: leaf 0
    job = cluster.allocate("c", 6, "ecmp")  # one whole leaf + 2 on another
    assert len(job.leaves) == 2 and not job.links and not job.spine_of
    assert cluster.allocate("d", 6, "ecmp").size == 6
    with pytest.raises(AllocationRefused, match="not enough free hosts"):
        cluster.allocate("e", 1, "ecmp")
    check_cluster(cluster)


@pytest.mark.parametrize(
    ("cluster", "job_id", "hosts", "policy", "message"),
    [
        (Cluster(2, 2, 2), "a", 1, "random", "unknown policy"),
        (Cluster(2, 2, 2), "a", 0, "vclos", "hosts_wanted"),
        (Cluster(2, 2, 2), "", 1, "vclos", "job id"),
        (Cluster(2, 2, 2), "a", 1, "ocs-vclos", "ocs_count"),
        (Cluster(2, 2, 2, ocs_count=2), "a", 1, "vclos", "ocs_count"),
    ],
)
def test_bad_requests(cluster: Cluster, job_id: str, hosts: int, policy: str, message: str) -> None:
    with pytest.raises(AllocationRequestError, match=message) as error:
        cluster.allocate(job_id, hosts, policy)
    assert isinstance(error.value, FabricLabError) and isinstance(error.value, ValueError)


def test_duplicate_and_unknown_job_ids() -> None:
    cluster = Cluster(2, 2, 2)
    cluster.allocate("a", 1, "ecmp")
    with pytest.raises(AllocationRequestError, match="already running"):
        cluster.allocate("a", 1, "ecmp")
    with pytest.raises(AllocationRequestError, match="no running job"):
        cluster.release("b")
    with pytest.raises(AllocationRequestError, match="leaves"):
        Cluster(0, 2, 2)


def test_to_dict_is_json() -> None:
    cluster = Cluster(4, 4, 4, ocs_count=4)
    job = cluster.allocate("a", 12, "ocs-vclos")
    data = json.loads(json.dumps(job.to_dict()))
    assert data["job_id"] == "a" and data["policy"] == "ocs-vclos"
    assert len(data["hosts"]) == 12 and len(data["circuits"]) == 12 and len(data["links"]) == 12
    assert data["circuits"][0]["a"] == {"kind": "leaf", "leaf": 0}
    assert data["circuits"][0]["b"]["kind"] == "spine"
    assert {"leaf", "slot", "spine"} == set(data["spine_of"][0])
    assert {"leaf", "slot", "circuit"} == set(data["circuit_of"][0])


# ------------------------------------------------- random arrival / release


class AllocatorMachine(RuleBasedStateMachine):
    """Random arrivals and releases on a small random cluster; invariants after each step."""

    jobs = Bundle("jobs")

    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster(1, 1, 1)
        self.policies: tuple[str, ...] = ("ecmp",)
        self.counter = 0

    @initialize(
        leaves=st.integers(2, 5),
        spines=st.integers(1, 4),
        hosts_per_leaf=st.integers(1, 4),
        ocs_count=st.sampled_from([0, 0, 1, 2, 3, 4]),
        exclusive=st.booleans(),
        spine_ports=st.integers(1, 3),
        placement=st.sampled_from(["joint", "hosts-first"]),
        rewiring=st.sampled_from(["any", "conservative", "augment"]),
    )
    def make_cluster(
        self,
        leaves: int,
        spines: int,
        hosts_per_leaf: int,
        ocs_count: int,
        exclusive: bool,
        spine_ports: int,
        placement: str,
        rewiring: str,
    ) -> None:
        self.cluster = Cluster(
            leaves, spines, hosts_per_leaf, ocs_count, exclusive_ocs_links=exclusive,
            spine_ports_per_ocs=spine_ports, placement=placement, rewiring=rewiring,
        )
        self.policies = ("ecmp", "ocs-vclos" if ocs_count else "vclos")

    @rule(target=jobs, size=st.integers(1, 10), pick=st.integers(0, 9))
    def arrive(self, size: int, pick: int) -> str:
        policy = self.policies[0] if pick < 3 else self.policies[1]
        job_id = f"job{self.counter}"
        self.counter += 1
        free_before = self.cluster.free_hosts()
        free_per_leaf = [len(self.cluster.free_slots(x)) for x in range(self.cluster.leaves)]
        try:
            job = self.cluster.allocate(job_id, size, policy)
        except AllocationRefused as refused:
            assert self.cluster.free_hosts() == free_before and job_id not in self.cluster.jobs
            if refused.reason == "no_hosts":
                assert size > free_before
            elif refused.reason == "fragmented":
                assert policy != "ecmp" and size <= free_before
                # "hosts": no shape finds m leaves with n free hosts; "links": one does.
                shape_fits = any(
                    sum(free >= n for free in free_per_leaf) >= m
                    for m, n in self.cluster.shapes(size, policy)
                )
                assert refused.cause == ("links" if shape_fits else "hosts")
            else:
                assert refused.reason == "unshapeable" and policy != "ecmp"
                assert not self.cluster.shapes(size, policy)
            if (
                refused.reason == "fragmented"
                and policy == "vclos"
                and self.cluster.placement == "joint"
            ):
                assert not biclique_exists(self.cluster, size), "vclos missed a free biclique"
            return job_id  # released later: releasing an unknown id must fail cleanly
        assert job.size == size and job.policy == policy
        if policy == "ecmp":
            assert len(job.leaves) == fewest_leaves(free_per_leaf, size)
        elif size <= max(free_per_leaf) and size <= self.cluster.hosts_per_leaf:
            assert len(job.leaves) == 1, "a job that fits under one leaf must stay there"
        return job_id

    @rule(job_id=consumes(jobs))
    def leave(self, job_id: str) -> None:
        if job_id in self.cluster.jobs:
            free_before = self.cluster.free_hosts()
            job = self.cluster.release(job_id)
            assert self.cluster.free_hosts() == free_before + job.size
        else:
            with pytest.raises(AllocationRequestError):
                self.cluster.release(job_id)

    @invariant()
    def consistent(self) -> None:
        check_cluster(self.cluster)

    def teardown(self) -> None:
        for job_id in list(self.cluster.jobs):
            self.cluster.release(job_id)
        assert self.cluster.is_empty()
        assert self.cluster.free_hosts() == self.cluster.total_hosts


AllocatorMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAllocatorMachine = AllocatorMachine.TestCase

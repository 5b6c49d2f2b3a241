"""The ``milp`` OCS rewiring (formerly ``exact``; RapidNetSim's GPUPlacemeter3, its MILPs
solved by HiGHS): the MILP helper,
the placement steps, its invariants, that it admits whatever ``augment`` admits on the demo
and contention fabrics, and that on the paper's geometry (scaled down) it refuses a job for
circuits only when an exhaustive search finds no wiring either."""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from itertools import combinations, product
from pathlib import Path

import pytest

from sdn_app.allocation import milp
from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import (
    Allocation,
    AllocationRefused,
    BlockCircuits,
    allocation_from_dict,
    port_use,
)
from sdn_app.allocation.milp import Milp
from sdn_app.allocation.ocs_exact import (
    Snapshot,
    best_pair,
    block_allocation,
    pack_blocks,
    split_evenly,
    whole_leaves_allocation,
)
from testbed.core.experiment import load_experiments

REPO = Path(__file__).resolve().parents[1]


def clone(cluster: Cluster, rewiring: str) -> Cluster:
    """The same running jobs on a fresh cluster of the same shape."""
    other = Cluster(cluster.leaves, cluster.spines, cluster.hosts_per_leaf, cluster.ocs_count,
                    spine_ports_per_ocs=cluster.spine_ports_per_ocs, rewiring=rewiring,
                    gpus_per_server=cluster.gpus_per_server)
    for job in cluster.jobs.values():
        other.adopt(job)
    return other


def check_job(cluster: Cluster, job: Allocation) -> None:
    """A cross-leaf exact job: one circuit per host from its own leaf; every leaf holds whole
    blocks, each block one circuit to each of the job's spines (or a direct pair)."""
    if len(job.leaves) == 1:
        assert not job.circuits
        return
    assert set(job.circuit_of) == set(job.hosts)
    per_leaf = Counter(leaf for leaf, _ in job.hosts)
    if not job.spines:
        a, b = job.leaves
        assert per_leaf[a] == per_leaf[b] == len(job.circuits)
        assert all(c.end_b == ("leaf", b) and c.end_a == ("leaf", a) for c in job.circuits)
        return
    n = len(job.spines)
    realised = Counter((c.end_a[1], c.end_b[1]) for c in job.circuits)
    for leaf, count in per_leaf.items():
        assert count % n == 0
        for spine in job.spines:
            assert realised[(leaf, spine)] == count // n
    for host, index in job.circuit_of.items():
        circuit = job.circuits[index]
        assert circuit.end_a == ("leaf", host[0])
        assert circuit.end_b[1] == job.spine_of[host]
    g = cluster.gpus_per_server
    for leaf in per_leaf:
        slots = sorted(s for lf, s in job.hosts if lf == leaf)
        servers = Counter(s // g for s in slots)
        assert all(v == g for v in servers.values()), "a cross-leaf job takes whole servers"


def check_ports(cluster: Cluster) -> None:
    leaf_ports: Counter = Counter()
    spine_ports: Counter = Counter()
    for job in cluster.jobs.values():
        for c in job.circuits:
            leaf_ports[(c.ocs, c.end_a[1])] += 1
            if c.end_b[0] == "leaf":
                leaf_ports[(c.ocs, c.end_b[1])] += 1
            else:
                spine_ports[(c.ocs, c.end_b[1], c.end_b[2])] += 1
    assert max(leaf_ports.values(), default=0) <= 1, "a leaf port carries two circuits"
    assert max(spine_ports.values(), default=0) <= 1, "a spine port carries two circuits"


# ------------------------------------------------------------------ the solver helper


def test_milp_finds_the_optimum_and_says_when_there_is_none(
        capfd: pytest.CaptureFixture[str]) -> None:
    milp.SOLVED.clear()  # solved by HiGHS here, not remembered
    model = Milp()
    x, y = model.var(10, cost=-1), model.var(10, cost=-2)
    model.row({x: 1, y: 1}, upper=5.5)
    model.row({x: 1, y: -1}, lower=1)
    assert model.solve() == [3, 2]
    model.row({x: 1}, lower=20)
    assert model.solve() is None
    assert "HiGHS" not in capfd.readouterr().out  # no banner in the middle of a report


def test_milp_answers_a_model_met_again_from_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same model (the FIFO head placed again) is not solved again; another model is."""
    runs = []
    real_run = Milp._run
    monkeypatch.setattr(Milp, "_run", lambda self, *a: runs.append(1) or real_run(self, *a))

    def model(bound: float) -> Milp:
        m = Milp()
        x, y = m.var(10, cost=-1), m.var(10, cost=-2)
        m.row({x: 1, y: 1}, upper=bound)
        return m

    monkeypatch.setattr(milp, "SOLVED", {})
    assert model(5.5).solve() == [0, 5]
    assert model(5.5).solve() == [0, 5]
    assert len(runs) == 1
    assert model(7.5).solve() == [0, 7]
    infeasible = model(5.5)
    infeasible.row({0: 1}, lower=20)
    assert infeasible.solve() is None and infeasible.solve() is None
    assert len(runs) == 3


def test_split_evenly_deals_every_edge_within_the_caps() -> None:
    edges = [(leaf, ocs) for leaf in range(4) for ocs in range(4)]  # 4 leaves x 4 OCSes
    parts = split_evenly(edges, 2, dict.fromkeys(range(4), 2), lambda _ocs: 2)
    assert sorted(e for part in parts for e in part) == sorted(edges)
    for part in parts:
        assert Counter(a for a, _ in part) == dict.fromkeys(range(4), 2)
        assert max(Counter(b for _, b in part).values()) <= 2


# ------------------------------------------------------------------ the placement steps


def paper_like(leaves: int = 8, gpus_per_server: int = 2) -> Cluster:
    """The paper's geometry scaled down: a leaf has one port per OCS and as many hosts as
    OCSes, a spine two ports per OCS, as many spine ports as leaf ports."""
    return Cluster(leaves, leaves // 2, 4, 4, spine_ports_per_ocs=2, rewiring="milp",
                   gpus_per_server=gpus_per_server)


def test_one_leaf_job_takes_the_fullest_leaf_that_fits() -> None:
    c = paper_like()
    c.allocate("a", 2, "ocs-vclos")
    job = c.allocate("b", 2, "ocs-vclos")
    assert job.leaves == (0,) and not job.circuits


def half_full(c: Cluster, leaves: range) -> None:
    """Hold the first server (2 hosts) of each of ``leaves`` by a one-leaf ecmp job."""
    for leaf in leaves:
        c.claim(f"hold{leaf}", [(leaf, 0), (leaf, 1)], "ecmp")


def test_two_leaf_job_gets_a_direct_pair_on_the_fullest_leaves() -> None:
    c = paper_like(gpus_per_server=1)
    c.claim("one0", [(0, 0)], "ecmp")  # leaves 0, 1: 3 free hosts
    c.claim("one1", [(1, 0)], "ecmp")
    half_full(c, range(2, 8))  # leaves 2-7: 2 free hosts (the fullest)
    assert best_pair(c, 2) == (2, 3)
    job = c.allocate("d", 4, "ocs-vclos")
    check_job(c, job)
    assert job.leaves == (2, 3) and not job.spines and len(job.circuits) == 2


def test_star_puts_every_host_on_one_spine_over_the_fewest_leaves() -> None:
    c = paper_like()
    half_full(c, range(8))  # no leaf holds 6 hosts, no pair 3 + 3
    job = c.allocate("star", 6, "ocs-vclos")
    check_job(c, job)
    assert len(job.spines) == 1 and len(job.leaves) == 3
    check_ports(c)


def test_power_of_two_job_takes_whole_idle_leaves_and_spines() -> None:
    c = paper_like(leaves=8, gpus_per_server=1)
    job = c.allocate("big", 16, "ocs-vclos")  # 4 leaves, 2 whole spines (8 ports each)
    check_job(c, job)
    assert job.leaves == (0, 1, 2, 3) and job.spines == (0, 1)
    check_ports(c)


def test_block_circuits_are_built_when_read_and_book_the_ports_they_hold() -> None:
    """A block job's circuits are a BlockCircuits: equal to the circuits it stands for,
    holding exactly the ports those circuits hold, and a port booked twice is caught."""
    c = paper_like(leaves=8, gpus_per_server=1)
    job = c.allocate("big", 16, "ocs-vclos")
    assert isinstance(job.circuits, BlockCircuits) and len(job.circuits) == 16
    explicit = tuple(job.circuits)
    assert job.circuits == explicit and explicit == job.circuits
    assert port_use(explicit) == job.circuits.ports
    assert [job.circuits[i] for i in range(16)] == list(explicit)
    copy = allocation_from_dict(job.to_dict())
    assert copy == job and isinstance(copy.circuits, tuple)
    c.release("big")
    c.adopt(copy)  # booked from its explicit circuits
    with pytest.raises(AssertionError):
        c.commit(Allocation("again", "ocs-vclos", (), (), circuits=explicit))
    with pytest.raises(AssertionError):
        port_use(explicit + explicit[:1])  # one port, two circuits
    c.release("big")
    assert c.is_empty()


@pytest.mark.parametrize("spines", [[0, 2, 5, 7], [6, 1, 3, 4]])
def test_whole_leaves_allocation_is_the_block_allocation_of_its_wiring(spines: list[int]) -> None:
    """The whole-leaves shortcut builds what block_allocation builds from the even wiring
    (leaf r's circuit on OCS t to spine (r + t) mod S), ports included."""
    c = Cluster(16, 8, 8, 8, spine_ports_per_ocs=2, rewiring="milp")
    leaves = [1, 2, 4, 7, 8, 11, 12, 15]  # 8 leaves, 4 spines of 8 OCSes x 2 ports: even
    ocs_of = {(lf, s): list(range((q - r) % 4, 8, 4))
              for r, lf in enumerate(leaves) for q, s in enumerate(spines)}
    fast = whole_leaves_allocation(c, "w", leaves, spines)
    built = block_allocation(c, "w", dict.fromkeys(leaves, 2), 4, spines, ocs_of)
    assert fast == built and fast.circuits.ports == built.circuits.ports
    assert fast.spine_of == built.spine_of and fast.circuit_of == built.circuit_of
    c.commit(fast)
    check_ports(c)
    c.release("w")
    assert c.is_empty()


def test_blocks_pack_best_fit_and_never_move_running_circuits() -> None:
    c = paper_like(leaves=8, gpus_per_server=1)
    c.allocate("w", 16, "ocs-vclos")
    before = dict(c.jobs["w"].circuit_of), c.jobs["w"].circuits
    job = c.allocate("odd", 12, "ocs-vclos")  # 3 x 4 blocks
    check_job(c, job)
    assert (dict(c.jobs["w"].circuit_of), c.jobs["w"].circuits) == before
    check_ports(c)


def test_pack_blocks_minimises_idle_servers_of_the_leaves_used() -> None:
    c = paper_like(leaves=4, gpus_per_server=1)
    c.allocate("a", 2, "ocs-vclos")  # leaf 0: 2 idle
    c.allocate("b", 1, "ocs-vclos")  # leaf 0: 1 idle (best fit)
    c.allocate("c", 2, "ocs-vclos")  # leaf 1: 2 idle
    blocks = pack_blocks(c, Snapshot.of(c), 3, 1)
    assert blocks == {0: 1, 1: 2}


# ------------------------------------------------------------------ against augment


@pytest.mark.parametrize("shape", [(4, 4, 2, 4), (4, 4, 4, 4)], ids=["demo", "contention"])
def test_exact_admits_every_job_augment_admits(shape: tuple[int, int, int, int]) -> None:
    """From many reachable states of the demo (experiments/fabrics/ocs-4x4.yaml) and contention
    (experiments/contention.yaml) OCS fabrics, every size augment places, exact places."""
    leaves, spines, hosts, ocses = shape
    rng = random.Random(7)
    for trial in range(40):
        c = Cluster(leaves, spines, hosts, ocses, rewiring="milp")
        for i in range(rng.randrange(1, 6)):
            with contextlib.suppress(AllocationRefused):
                c.allocate(f"t{trial}j{i}", rng.randrange(1, leaves * hosts // 2), "ocs-vclos")
        for k in range(1, c.free_hosts() + 1):
            try:
                clone(c, "augment").allocate("probe", k, "ocs-vclos")
            except AllocationRefused:
                continue
            exact = clone(c, "milp")
            check_job(exact, exact.allocate("probe", k, "ocs-vclos"))
            check_ports(exact)


# ------------------------------------------------------------------ refusals are real


def wiring_exists(c: Cluster, k: int) -> bool:
    """Exhaustively: a direct pair, or m blocks of n hosts (the shapes exact tries) with n
    spines and an OCS for every circuit (a leaf port once, a spine port once)."""
    snap = Snapshot.of(c)
    g, hosts, ocses = c.gpus_per_server, c.hosts_per_leaf, c.ocs_count
    if k % 2 == 0 and k // 2 <= min(hosts, ocses):
        for a, b in combinations(range(c.leaves), 2):
            if min(snap.spread[a], snap.spread[b]) >= k // 2 and \
                    (snap.leaf_mask[a] & snap.leaf_mask[b]).bit_count() >= k // 2:
                return True
    shapes = [(k, 1)] if k <= ocses * c.spine_ports_per_ocs and k % g == 0 else []
    m = max(k >> ((k & -k).bit_length() - 1), k // hosts)
    while m <= min(c.leaves, k):
        if k % m == 0 and k // m <= ocses:
            shapes.append((m, k // m))
        m *= 2
    for m, n in shapes:
        caps = [min(snap.spread[lf], snap.leaf_mask[lf].bit_count()) // n for lf in range(c.leaves)]
        for counts in product(*(range(cap + 1) for cap in caps)):
            if sum(counts) != m or any(b * n % g for b in counts):
                continue
            blocks = {lf: b for lf, b in enumerate(counts) if b}
            for spines in combinations(range(c.spines), n):
                if assignable(snap, blocks, spines):
                    return True
    return False


def assignable(snap: Snapshot, blocks: dict[int, int], spines: tuple[int, ...]) -> bool:
    """Backtracking over the circuits (leaf, spine) x blocks, each onto an OCS."""
    todo = [(leaf, spine) for leaf, b in blocks.items() for spine in spines for _ in range(b)]
    leaf_free = dict(enumerate(snap.leaf_mask))
    spine_free = {s: list(snap.spine_idle[s]) for s in spines}

    def go(i: int) -> bool:
        if i == len(todo):
            return True
        leaf, spine = todo[i]
        for ocs in range(len(spine_free[spine])):
            if leaf_free[leaf] >> ocs & 1 and spine_free[spine][ocs]:
                leaf_free[leaf] &= ~(1 << ocs)
                spine_free[spine][ocs] -= 1
                if go(i + 1):
                    return True
                leaf_free[leaf] |= 1 << ocs
                spine_free[spine][ocs] += 1
        return False

    return go(0)


@pytest.mark.parametrize("gpus_per_server", [1, 2])
def test_refused_for_circuits_only_when_no_wiring_exists(gpus_per_server: int) -> None:
    rng = random.Random(gpus_per_server)
    refusals = 0
    for trial in range(25):
        c = paper_like(leaves=4, gpus_per_server=gpus_per_server)  # 4 leaves, 2 spines
        for i in range(rng.randrange(2, 7)):
            with contextlib.suppress(AllocationRefused):
                c.allocate(f"t{trial}j{i}", rng.choice([1, 2, 3, 4, 6, 8]), "ocs-vclos")
        check_ports(c)
        for k in range(1, c.free_hosts() + 1):
            probe = clone(c, "milp")
            try:
                check_job(probe, probe.allocate("probe", k, "ocs-vclos"))
            except AllocationRefused as refused:
                if refused.reason == "fragmented":
                    refusals += 1
                    assert not wiring_exists(c, k), (k, c.jobs)
    assert refusals > 0  # the states do reach refusals, so the check is exercised


def test_contention_ocs_variant_places_its_jobs_with_exact() -> None:
    """experiments/contention.yaml's ocs-vclos variant sets ``ocs_rewiring: milp``: the
    controller's cluster (Cluster.for_fabric) places the variant's jobs with it, big on a
    direct leaf pair (4 leaf-leaf circuits)."""
    (exp,) = [e for e in load_experiments(REPO / "experiments" / "contention.yaml")
              if e.fabric.kind == "ocs_leaf_spine"]
    c = Cluster.for_fabric(exp.fabric)
    assert c.rewiring == "milp"
    for job in exp.jobs:
        check_job(c, c.allocate(job.name, job.hosts_wanted, "ocs-vclos"))
    check_ports(c)
    assert len(c.jobs["big"].leaves) == 2 and len(c.jobs["big"].circuits) == 4

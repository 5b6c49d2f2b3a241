"""The exact wiring decision (:mod:`sdn_app.allocation.ocs_feasibility`), the auditor of the
``exact`` rewiring's refusals: on the paper's geometry scaled down it finds a wiring (checked
port by port) exactly where test_ocs_exact's exhaustive search finds one, proves none
elsewhere, and its MILP decides cases the counting bounds cannot."""

from __future__ import annotations

import contextlib
import dataclasses
import random
from collections import Counter

from test_ocs_exact import assignable, paper_like, wiring_exists

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation, AllocationRefused, Circuit
from sdn_app.allocation.ocs_exact import Snapshot
from sdn_app.allocation.ocs_feasibility import check_wiring, decide


def random_state(rng: random.Random, gpus_per_server: int, trial: int) -> Cluster:
    c = paper_like(leaves=4, gpus_per_server=gpus_per_server)  # 4 leaves, 2 spines, 4 OCSes
    for i in range(rng.randrange(2, 7)):
        with contextlib.suppress(AllocationRefused):
            c.allocate(f"t{trial}j{i}", rng.choice([1, 2, 3, 4, 6, 8]), "ocs-vclos")
    return c


def hold_ports(c: Cluster, circuits: list[tuple[int, int, int, int]]) -> None:
    """Busy OCS ports without hosts: circuits (ocs, leaf, spine, spine port) of one job."""
    c.commit(Allocation("ports", "ocs-vclos", (), (), circuits=tuple(
        Circuit(o, ("leaf", leaf), ("spine", s, p)) for o, leaf, s, p in circuits)))


def random_port_state(rng: random.Random, gpus_per_server: int) -> Cluster:
    """Random busy hosts and random busy circuits, leaf port to spine port (richer states
    than jobs placed by exact leave)."""
    c = paper_like(leaves=4, gpus_per_server=gpus_per_server)
    for leaf in range(c.leaves):
        busy = rng.sample(range(c.hosts_per_leaf), rng.choice([0, 0, 1, 2]))
        if busy:
            c.claim(f"h{leaf}", [(leaf, slot) for slot in busy], "ecmp")
    spine_ports = [(o, s, p) for o in range(4) for s in range(2) for p in range(2)]
    circuits = []
    for o, leaf in rng.sample([(o, leaf) for o in range(4) for leaf in range(4)],
                              rng.randrange(8)):
        free = [port for port in spine_ports if port[0] == o]
        if free:
            port = rng.choice(free)
            spine_ports.remove(port)
            circuits.append((o, leaf, port[1], port[2]))
    hold_ports(c, circuits)
    return c


def test_decision_matches_the_exhaustive_search() -> None:
    """Every cross-leaf size on random states (jobs placed by exact, and random busy hosts
    and ports): 'wiring' exactly when an exhaustive search over the same shapes finds one,
    never 'unknown'; both answers also come from the MILP. (k = 16, the whole cluster, is
    left out: the exhaustive search does not know the whole-leaves shape.)"""
    seen: Counter = Counter()
    states = []
    for gpus_per_server in (1, 2):
        rng = random.Random(10 + gpus_per_server)
        states += [random_state(rng, gpus_per_server, trial) for trial in range(30)]
        states += [random_port_state(rng, gpus_per_server) for _ in range(40)]
    for c in states:
        most = max(c.free_count(leaf) for leaf in range(c.leaves))
        for k in range(most + 1, min(c.free_hosts() + 1, 16)):
            decision = decide(c, k)
            expected = "wiring" if wiring_exists(c, k) else "none"
            assert decision.answer == expected, (k, c.jobs, decision)
            seen.update((v.answer, v.how.startswith("MILP")) for v in decision.verdicts)
            if decision.answer == "wiring":
                assert check_wiring(c, k, decision.verdicts[-1].wiring) == ""
    # Not vacuous: both answers occur, the MILP finds wirings the counts cannot.
    assert seen[("wiring", True)] and seen[("none", False)], seen


def test_milp_proves_a_star_impossible_that_the_counts_allow() -> None:
    """4 leaves x 4 hosts, servers of 2, 2 spines, 4 OCSes (2 ports each): a 6-host star
    needs leaves 1, 2, 3 with 2 circuits each to one spine; spine 0 lacks OCS 3 and leaf 1
    has only OCSes 2, 3; on spine 1, leaves 1 and 3 both need its one idle port on OCS 2.
    The counts pass; the MILP proves it, the exhaustive search agrees, and blocks 3 x 2
    are wired instead."""
    c = paper_like(leaves=4, gpus_per_server=2)
    c.claim("h0", [(0, 0)], "ecmp")
    c.claim("h2", [(2, 0)], "ecmp")
    hold_ports(c, [(0, 1, 0, 0), (0, 3, 1, 0), (1, 0, 0, 0), (1, 1, 0, 1), (2, 0, 1, 0),
                   (3, 0, 0, 0), (3, 3, 0, 1)])
    snap = Snapshot.of(c)
    assert snap.spread == [2, 4, 2, 4]
    assert snap.leaf_mask == [0b0001, 0b1100, 0b1111, 0b0110]
    assert snap.spine_idle == [[1, 0, 2, 0], [1, 2, 1, 2]]
    decision = decide(c, 6)
    star = next(v for v in decision.verdicts if v.shape.kind == "star")
    assert (star.answer, star.how) == ("none", "MILP infeasible")
    assert not any(assignable(snap, {1: 2, 2: 2, 3: 2}, (s,)) for s in range(2))
    assert decision.answer == "wiring" and str(decision.verdicts[-1].shape) == "blocks 3x2"
    assert wiring_exists(c, 6)


def test_check_wiring_rejects_a_port_taken_twice_or_busy() -> None:
    c = Cluster(4, 2, 4, 4, spine_ports_per_ocs=2, rewiring="milp")
    c.allocate("held", 8, "ocs-vclos")  # a direct pair on leaves 0, 1: their 4 ports busy
    decision = decide(c, 8)
    assert decision.answer == "wiring"
    wiring = decision.verdicts[-1].wiring
    assert check_wiring(c, 8, wiring) == ""
    first = wiring.circuits[0]
    twice = dataclasses.replace(wiring, circuits=(first, *wiring.circuits[1:-1], first))
    assert "taken twice" in check_wiring(c, 8, twice)
    busy = Circuit(first.ocs, ("leaf", 0), first.end_b)
    moved = dataclasses.replace(wiring, circuits=(busy, *wiring.circuits[1:]))
    assert check_wiring(c, 8, moved)
    assert "hosts" in check_wiring(c, 7, wiring)

"""The conservative rewiring's index of idle spine ports (issue 44): kept between admissions
and brought up to date, it must list for every leaf set exactly the ports a fresh index
lists, and those its definition names (an idle spine port whose idle default owners all
lie in the set)."""

from __future__ import annotations

import random

import pytest

from sdn_app.allocation.ledger import Allocation, Circuit, Ledger
from sdn_app.allocation.ocs import _owner_table, kept_rewire_index, rewire_index


def allowed_ports(ledger: Ledger, leaves: set[int]) -> dict[int, list[tuple[int, int]]]:
    """Per spine, by definition: its idle ``(ocs, port)`` s whose default owners with an idle
    port on that OCS are all in ``leaves``, lowest first."""
    table = _owner_table(ledger.leaves, ledger.ocs_count, ledger.spine_ports_per_ocs,
                         ledger.spines)
    return {spine: [(ocs, port) for ocs, port in ledger.idle_spine_ports(spine)
                    if all(owner in leaves for owner in table[spine][ocs][port]
                           if ledger.leaf_port_idle(ocs, owner))]
            for spine in range(ledger.spines)}


def random_circuits(ledger: Ledger, rng: random.Random, count: int) -> tuple[Circuit, ...]:
    """Up to ``count`` circuits on idle ports, leaf to spine, picked at random."""
    circuits: list[Circuit] = []
    leaf_used: set[tuple[int, int]] = set()
    spine_used: set[tuple[int, int, int]] = set()
    for _ in range(count):
        ocs, leaf = rng.randrange(ledger.ocs_count), rng.randrange(ledger.leaves)
        spine, port = rng.randrange(ledger.spines), rng.randrange(ledger.spine_ports_per_ocs)
        if (not ledger.leaf_port_idle(ocs, leaf) or not ledger.spine_port_idle(ocs, spine, port)
                or (ocs, leaf) in leaf_used or (ocs, spine, port) in spine_used):
            continue
        leaf_used.add((ocs, leaf))
        spine_used.add((ocs, spine, port))
        circuits.append(Circuit(ocs, ("leaf", leaf), ("spine", spine, port)))
    return tuple(circuits)


# leaves, spines, OCSes, ports per spine and OCS: one default owner per spine port, several
# (as on the vClos paper's preset: four), some with none
GEOMETRIES = [(8, 4, 4, 2), (16, 4, 2, 2), (10, 3, 2, 2), (6, 8, 8, 1)]


@pytest.mark.parametrize("seed", range(8))
def test_kept_index_lists_what_a_fresh_one_and_the_definition_list(seed: int) -> None:
    rng = random.Random(seed)
    leaves, spines, ocs_count, ports = GEOMETRIES[seed % len(GEOMETRIES)]
    ledger = Ledger(leaves, spines, 4, ocs_count, spine_ports_per_ocs=ports)
    running: list[str] = []
    for step in range(60):
        if running and rng.random() < 0.4:
            ledger.release(running.pop(rng.randrange(len(running))))
        else:
            job = f"j{step}"
            circuits = random_circuits(ledger, rng, rng.randint(1, 10))
            ledger.commit(Allocation(job, "ocs-vclos", (), (), circuits=circuits))
            running.append(job)
        if rng.random() < 0.3:
            continue  # several changes between two reads of the kept index
        kept, fresh = kept_rewire_index(ledger), rewire_index(ledger)
        for _ in range(4):
            leaf_set = set(rng.sample(range(leaves), rng.randint(1, leaves)))
            want = allowed_ports(ledger, leaf_set)
            for index in (kept, fresh):
                got = index.ports_for(leaf_set)
                assert got.counts == [len(want[s]) for s in range(spines)]
                assert {s: got.ports(s) for s in range(spines)} == want


def test_each_ledger_keeps_its_own_index() -> None:
    a, b = Ledger(4, 2, 2, 2), Ledger(4, 2, 2, 2)
    a.commit(Allocation("x", "ocs-vclos", (), (), circuits=(
        Circuit(0, ("leaf", 0), ("spine", 0, 0)),)))
    assert kept_rewire_index(a) is kept_rewire_index(a)
    assert kept_rewire_index(a) is not kept_rewire_index(b)
    assert kept_rewire_index(b).ports_for({0}).counts == rewire_index(b).ports_for({0}).counts

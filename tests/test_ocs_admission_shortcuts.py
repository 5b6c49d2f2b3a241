"""The default-first rewirings' admissions (issue 44, seventh sitting) give what the plain
search gives, state by state, while jobs come and go:

* the spines ordered once per admission (:func:`spine_order`): the spines
  :func:`try_ocs_spines` tries for m leaves are the tail of that order, those the plain sort
  keeps;
* the default search skipped when no leaf set was found, or when no leaf changed since its
  last miss; the conservative rewiring's refusals (too few spines, too few leaves) made
  before its index catches up, which then catches up with several admissions' changes;
* checked through ``place_job`` of both rewirings against the plain steps (whole leaf search,
  fresh default masks and rewire index, the spines sorted anew), on random ledgers; and a
  deliberately wrong order of spines is caught."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable

import pytest

from sdn_app.allocation import ocs
from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation, AllocationRefused, Ledger
from sdn_app.allocation.vclos import find_free_leaves


def sorted_spines(ledger: Ledger, m: int) -> list[int]:
    """The plain order: the spines with at least m idle OCS ports, fewest first, then lowest."""
    busy = ledger.busy_spine_ports()
    total = ledger.ocs_count * ledger.spine_ports_per_ocs
    return sorted((s for s in range(ledger.spines) if total - busy[s] >= m),
                  key=lambda s: (total - busy[s], s))


REWIRED: list[str] = []  # job ids plain_place placed by rewiring


def plain_place(ledger: Ledger, job_id: str, shapes: list[tuple[int, int]],
                rewiring: str) -> Allocation | None:
    """A default-first rewiring's admission by the plain steps, nothing kept or skipped."""
    for m, n in shapes:
        masks = ocs.DefaultMasks(ledger)
        leaves = find_free_leaves(ledger, m, n, masks.__getitem__)
        order = ocs.spine_order(ledger)
        found = ocs.try_ocs_spines(ledger, job_id, m, n, [] if leaves is None else [leaves],
                                   passes=("default",), masks=masks, by_idle=order)
        if found is None and m == 2:
            found = ocs.try_direct_pair(ledger, job_id, n, None)
        if found is None:
            REWIRED.append(job_id)
        if found is None and rewiring == "conservative":
            found = ocs.try_ocs_spines(ledger, job_id, m, n, None, passes=("default", "match"),
                                       orphans_only=True, index=ocs.rewire_index(ledger),
                                       masks=masks, by_idle=order)
        if found is None and rewiring == "augment":
            found = ocs.try_augment(ledger, job_id, m, n, None)
        if found is not None:
            return found
        if REWIRED and REWIRED[-1] == job_id:
            REWIRED.pop()
    return None


def admissions(rewiring: str, seed: int,
               order: Callable[[Ledger], ocs.SpineOrder] | None = None) -> tuple[int, int, int]:
    """Admissions on a small OCS cluster as jobs come and go (refused jobs retried after
    ends): how many differ from :func:`plain_place`, how many placed, how many refused."""
    rng = random.Random(seed)
    leaves, spines, ocs_count, ports = rng.choice(
        [(8, 8, 4, 1), (6, 2, 4, 2), (8, 4, 4, 1), (12, 4, 4, 1), (10, 4, 2, 2), (8, 6, 6, 2)])
    cluster = Cluster(leaves, spines, 4, ocs_count, rewiring=rewiring,
                      spine_ports_per_ocs=ports)
    plain = ocs.spine_order
    wrong = placed = refused = 0
    running: list[str] = []
    for step in range(60):
        if running and rng.random() < 0.35:
            cluster.release(running.pop(rng.randrange(len(running))))
        k = rng.choice((2, 3, 4, 6, 8, 12))
        shapes = cluster.shapes(k, "ocs-vclos")
        if not shapes or cluster.best_fit_leaf(k) is not None or k > cluster.free_hosts():
            continue
        want = plain_place(cluster, f"j{step}", shapes, rewiring)
        if order is not None:
            ocs.spine_order = order
        try:
            got = ocs.REWIRINGS[rewiring].place_job(cluster, f"j{step}", k, shapes)
        finally:
            ocs.spine_order = plain
        wrong += got != want
        if got is None:
            refused += 1
            continue
        cluster.commit(got)
        running.append(got.job_id)
        placed += 1
    return wrong, placed, refused


@pytest.mark.parametrize("rewiring", ["conservative", "augment"])
@pytest.mark.parametrize("seed", range(10))
def test_admissions_place_what_the_plain_steps_place(rewiring: str, seed: int) -> None:
    wrong, placed, refused = admissions(rewiring, seed)
    assert wrong == 0
    assert placed + refused > 5


@pytest.mark.parametrize("rewiring", ["conservative", "augment"])
def test_admissions_place_by_default_and_by_rewiring_and_refuse(rewiring: str) -> None:
    REWIRED.clear()
    totals = [admissions(rewiring, s)[1:] for s in range(10)]
    assert sum(p for p, _ in totals) > 50 and sum(r for _, r in totals) > 20
    assert len(REWIRED) > 5


def most_idle_first(ledger: Ledger) -> ocs.SpineOrder:
    """Wrong on purpose: the spines with the most idle ports first."""
    total = ledger.ocs_count * ledger.spine_ports_per_ocs
    idle = [total - busy for busy in ledger.busy_spine_ports()]
    order = sorted(range(ledger.spines), key=lambda s: (-idle[s], s))
    return order, sorted(idle[s] for s in order)


def test_a_wrong_spine_order_is_caught() -> None:
    assert sum(admissions("conservative", s, most_idle_first)[0] for s in range(10)) > 0


@pytest.mark.parametrize("seed", range(6))
def test_the_spine_order_tail_is_the_plain_sort(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster(8, 6, 4, 4, spine_ports_per_ocs=2)
    for step in range(30):
        with contextlib.suppress(AllocationRefused):
            cluster.allocate(f"j{step}", rng.choice((2, 4, 6, 8)), "ocs-vclos")
        order, idle = ocs.spine_order(cluster)
        assert idle == sorted(idle)
        for m in range(0, 10):
            assert order[sum(c < m for c in idle):] == sorted_spines(cluster, m)


def plain_default_ports(ledger: Ledger, leaves: list[int], spine: int,
                        used: set[tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """:func:`default_ports` as a list of ports per leaf: its default port, then the other
    idle ones lowest first, the first that is idle and not yet taken by an earlier leaf."""
    out: dict[int, tuple[int, int]] = {}
    for leaf in leaves:
        found = ocs.default_circuit(ledger, leaf, spine)
        if found is None or not ledger.leaf_port_idle(found[0], leaf) or (found[0], leaf) in used:
            return {}
        o, first = found
        idle = ledger.idle_ports_of(o, spine)
        ports = [first, *(p for p in idle if p != first)]
        port = next((p for p in ports if p in idle and (o, p) not in out.values()), None)
        if port is None:
            return {}
        out[leaf] = (o, port)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_default_ports_are_the_plain_ones(seed: int) -> None:
    rng = random.Random(seed)
    served = checked = 0
    for _ in range(6):
        cluster = Cluster(*rng.choice([(8, 4, 4, 4), (12, 4, 4, 4), (8, 8, 4, 4)]),
                          spine_ports_per_ocs=rng.choice([1, 2, 3]))
        for step in range(25):
            with contextlib.suppress(AllocationRefused):
                cluster.allocate(f"j{step}", rng.choice((2, 4, 6, 8)), "ocs-vclos")
            for _ in range(8):
                leaves = sorted(rng.sample(range(cluster.leaves), rng.randint(1, 5)))
                spine = rng.randrange(cluster.spines)
                used = {(rng.randrange(cluster.ocs_count), rng.randrange(cluster.leaves))
                        for _ in range(rng.randint(0, 3))}
                want = plain_default_ports(cluster, leaves, spine, used)
                held: dict[int, int] = {}  # the same pairs as masks, as the search keeps them
                for o, leaf in used:
                    held[leaf] = held.get(leaf, 0) | 1 << o
                assert ocs.default_ports(cluster, leaves, spine, held) == want
                served += bool(want)
                checked += 1
    assert served > checked // 20


def full_read_changes(before: tuple[list[int], list[list[int]]], ledger: Ledger
                      ) -> tuple[list[tuple], list[tuple]]:
    """What changed between two whole reads of the ledger's idle ports."""
    leaves, rows = before
    idle, now = ledger.idle_ocs_masks(), ledger.idle_port_masks()
    return ([(leaf, a, b) for leaf, (a, b) in enumerate(zip(leaves, idle, strict=True))
             if a != b],
            [(spine, ocs, a, b) for spine in range(ledger.spines)
             for ocs, (a, b) in enumerate(zip(rows[spine], now[spine], strict=True))
             if a != b])


@pytest.mark.parametrize("seed", range(4))
def test_ports_seen_reads_again_only_changed_spines_and_misses_nothing(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster(8, 6, 4, 4, spine_ports_per_ocs=2)
    seen = ocs.PortsSeen(cluster.leaves, cluster.spines)
    before = ([0] * cluster.leaves, [[0] * cluster.ocs_count for _ in range(cluster.spines)])
    running: list[str] = []
    changed = 0
    for step in range(60):
        if running and rng.random() < 0.4:
            cluster.release(running.pop(rng.randrange(len(running))))
        else:
            with contextlib.suppress(AllocationRefused):
                running.append(cluster.allocate(f"j{step}", rng.choice((2, 4, 8)),
                                                "ocs-vclos").job_id)
        if rng.random() < 0.4:
            continue  # several changes between two reads
        assert seen.update(cluster) == full_read_changes(before, cluster)
        assert seen.port_rows.tolist() == cluster.idle_port_masks()
        before = (cluster.idle_ocs_masks(), cluster.idle_port_masks())
        assert seen.update(cluster) == ([], [])  # read again at once: nothing changed
        changed += 1
    assert changed > 10

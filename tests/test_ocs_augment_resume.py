"""The augment rewiring's shortcuts must not change a single answer (issue 44):
:func:`augment_wiring` with one view shared by an admission's leaf sets (each set's matchings
resumed after the leaves it shares with the set before, a set beginning with a failed set's
leaves refused at once, a set refused when the OCSes cannot carry its circuits, the spines
chosen with numpy, matchings remembered) gives, set by set, what the plain
search below gives: the code as it was before the shortcuts, every set searched from its
first leaf."""

from __future__ import annotations

import random
from itertools import combinations, islice

import pytest
from test_ocs_kept_searches import random_circuits

from sdn_app.allocation.ledger import Allocation, Ledger
from sdn_app.allocation.ocs import (
    _AugmentView,
    _default_row,
    augment_wiring,
    default_spine_mask,
    idle_default_owners,
    kept_state,
    match_from_default_masks,
)


def plain_augment_wiring(
    ledger: Ledger, leaves: list[int], n: int
) -> tuple[list[int], dict[tuple[int, int], tuple[int, int]]] | None:
    """:func:`augment_wiring` as it was before the shortcuts: everything read anew, the
    spines sorted in Python, every leaf matched from the first."""
    counts = ledger.idle_spine_counts()
    total = list(map(sum, counts))
    held = ledger.spines_with_held_links()
    m = len(leaves)
    candidates = [s for s in range(ledger.spines) if total[s] >= m and (
        s not in held or all(ledger.link_free(leaf, s) for leaf in leaves))]
    if len(candidates) < n:
        return None
    reach = [0] * ledger.spines
    for leaf in leaves:
        mask = default_spine_mask(ledger, leaf)
        for s in range(ledger.spines):
            reach[s] += mask >> s & 1
    candidates.sort(key=lambda s: (-reach[s], -total[s], s))
    spines = sorted(candidates[:n])
    usable = [sum(1 << o for o, c in enumerate(row) if c) for row in counts]
    left: dict[tuple[int, int], int] = {}
    matches = []
    for leaf in leaves:
        row = _default_row(leaf, ledger.spines, ledger.ocs_count, ledger.spine_ports_per_ocs)
        match = match_from_default_masks(
            spines, ledger.idle_ocs_mask(leaf), [row[s][0] for s in spines], usable)
        if match is None:
            return None
        matches.append((leaf, row, match))
        for spine in spines:
            ocs = match[spine]
            count = left[(ocs, spine)] = left.get(
                (ocs, spine), ledger.idle_port_count(ocs, spine)) - 1
            if not count:
                usable[spine] &= ~(1 << ocs)
    free = {}
    ports = {}
    for leaf, row, match in matches:
        for j, spine in enumerate(spines):
            ocs = match[spine]
            idle = free.setdefault((ocs, spine), ledger.idle_ports_of(ocs, spine))
            default_ocs, default_port = row[spine]
            own = default_port if ocs == default_ocs else None
            port = own if own in idle else min(idle, key=lambda p, o=ocs, s=spine: (
                len(idle_default_owners(ledger, o, s, p)), p))
            idle.remove(port)
            ports[(leaf, j)] = (ocs, port)
    return spines, ports


def random_ledger(rng: random.Random, geometry: tuple[int, int, int, int]) -> Ledger:
    """A ledger of ``geometry`` (leaves, spines, OCSes, ports per spine and OCS) with random
    circuits busy and, now and then, a (leaf, spine) link held by a job without circuits."""
    leaves, spines, ocs_count, ports = geometry
    ledger = Ledger(leaves, spines, 4, ocs_count, spine_ports_per_ocs=ports)
    busy = rng.randint(0, leaves * ocs_count * 3 // 4)
    ledger.commit(Allocation("busy", "ocs-vclos", (), (),
                             circuits=random_circuits(ledger, rng, busy)))
    if rng.random() < 0.3:
        leaf, spine = rng.randrange(leaves), rng.randrange(spines)
        ledger.commit(Allocation("held", "vclos", (), (leaf,), (spine,),
                                 links=frozenset({(leaf, spine)})))
    return ledger


# leaves, spines, OCSes, ports per spine and OCS: the preset's proportions (a leaf's default
# circuits reach a quarter of the spines, four default owners per spine port), and others
GEOMETRIES = [(16, 8, 4, 2), (12, 6, 6, 1), (10, 4, 4, 2), (20, 16, 8, 2)]


@pytest.mark.parametrize("seed", range(24))
def test_an_admissions_leaf_sets_are_wired_as_each_alone(seed: int) -> None:
    rng = random.Random(seed)
    geometry = GEOMETRIES[seed % len(GEOMETRIES)]
    wired = refused = 0
    for _ in range(6):
        ledger = random_ledger(rng, geometry)
        view = _AugmentView(ledger)  # one admission: its shapes' sets share the view
        for _shape in range(3):
            m = rng.randint(2, min(8, ledger.leaves))
            n = rng.randint(1, ledger.ocs_count)
            order = rng.sample(range(ledger.leaves), ledger.leaves)
            for leaf_set in islice(combinations(order, m), 40):
                leaves = sorted(leaf_set)
                want = plain_augment_wiring(ledger, leaves, n)
                assert augment_wiring(ledger, leaves, n, view) == want
                assert augment_wiring(ledger, leaves, n) == want  # a view of its own
                wired += want is not None
                refused += want is None
    assert wired and refused  # both ways met


@pytest.mark.parametrize("seed", range(12))
def test_a_set_the_ocses_cannot_carry_is_never_wired(seed: int) -> None:
    """The count that refuses a set before its matchings (:meth:`KeptState.ocs_room`) only
    refuses sets the plain search refuses; and it does refuse some."""
    rng = random.Random(200 + seed)
    counted = 0
    for _ in range(30):
        ledger = random_ledger(rng, GEOMETRIES[seed % len(GEOMETRIES)])
        room = kept_state(ledger).ocs_room
        for _ in range(20):
            leaves = sorted(rng.sample(range(ledger.leaves), rng.randint(1, 8)))
            n = rng.randint(1, ledger.ocs_count)
            wired = plain_augment_wiring(ledger, leaves, n)
            if wired is not None:
                assert room(leaves, wired[0]) >= len(leaves) * n
            elif (spines := _AugmentView(ledger).spines_for(leaves, n)) is not None:
                counted += room(leaves, spines) < len(leaves) * n
    assert counted


@pytest.mark.parametrize("seed", range(8))
def test_sets_in_any_order_are_wired_as_each_alone(seed: int) -> None:
    """Sets sharing more or fewer first leaves, on the same spines or not, repeated: what a
    set before left behind never shows."""
    rng = random.Random(100 + seed)
    ledger = random_ledger(rng, GEOMETRIES[seed % len(GEOMETRIES)])
    view = _AugmentView(ledger)
    tried = []
    for _ in range(150):
        if tried and rng.random() < 0.3:
            leaves, n = rng.choice(tried)
        else:
            m = rng.randint(1, min(8, ledger.leaves))
            leaves, n = sorted(rng.sample(range(ledger.leaves), m)), rng.randint(1, 4)
            tried.append((leaves, n))
        assert augment_wiring(ledger, leaves, n, view) == plain_augment_wiring(ledger, leaves, n)

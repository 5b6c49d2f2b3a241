"""The conservative rewiring's cuts (issue 44) refuse only leaf sets its passes refuse:
:func:`wire_spines` gives up on a set when fewer than n of its spines could be taken by any
pass (``_servable``), and :func:`try_ocs_spines` on a whole batch of sets when a bound from
the leaves they share and the others says so for every set (``_sets_hopeless``). Both are
checked against the same search with the cuts off, on random ledgers, and shown to catch a
deliberately wrong cut."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import combinations, islice

import pytest
from test_ocs_kept_searches import GEOMETRIES, random_circuits

from sdn_app.allocation import ocs
from sdn_app.allocation.ledger import Allocation, Ledger

# passes, orphans only: the conservative rewiring's, the default wiring's, the any rewiring's
SEARCHES = [(("default", "match"), True), (("default",), False), (("match",), False)]


def random_ledger(rng: random.Random, geometry: tuple[int, int, int, int]) -> Ledger:
    """A ledger of ``geometry`` after random jobs of circuits (and a few hosts) came and went."""
    leaves, spines, ocs_count, ports = geometry
    ledger = Ledger(leaves, spines, 4, ocs_count, spine_ports_per_ocs=ports)
    running: list[str] = []
    for step in range(rng.randint(0, 40)):
        if running and rng.random() < 0.35:
            ledger.release(running.pop(rng.randrange(len(running))))
            continue
        free = [(leaf, slot) for leaf in range(leaves) for slot in ledger.free_slots(leaf)]
        hosts = tuple(sorted(rng.sample(free, min(len(free), rng.randint(0, 2)))))
        circuits = random_circuits(ledger, rng, rng.randint(1, 12))
        ledger.commit(Allocation(f"j{step}", "ocs-vclos", hosts, (), circuits=circuits))
        running.append(f"j{step}")
    return ledger


@contextmanager
def cuts(servable: Callable | None, hopeless: Callable | None) -> Iterator[None]:
    """Run with ``_servable`` and ``_sets_hopeless`` replaced (None: left as they are)."""
    saved = ocs._servable, ocs._sets_hopeless
    ocs._servable = servable or saved[0]
    ocs._sets_hopeless = hopeless or saved[1]
    try:
        yield
    finally:
        ocs._servable, ocs._sets_hopeless = saved


def no_servable_cut(spines: list[int], *_args: object) -> int:
    return sum(1 << s for s in spines)  # every spine might serve


def no_batch_cut(*_args: object) -> bool:
    return False


def searches(ledger: Ledger, rng: random.Random) -> list[tuple]:
    """Every answer of the searches above on ``ledger``: try_ocs_spines over the first sets,
    and wire_spines set by set, for a few shapes."""
    answers: list[tuple] = []
    for m, n in [(2, 1), (2, 2), (3, 1), (3, 2), (4, 1), (2, 3), (4, 2), (3, 3)]:
        for passes, orphans in SEARCHES:
            found = ocs.try_ocs_spines(ledger, "x", m, n, None, passes=passes,
                                       orphans_only=orphans)
            answers.append((m, n, passes, found))
            spines = list(range(ledger.spines))
            rng.shuffle(spines)
            index = ocs.rewire_index(ledger) if orphans else None
            for leaves in islice(combinations(range(ledger.leaves), m), 20):
                answers.append(ocs.wire_spines(ledger, list(leaves), n, spines, passes, index,
                                               orphans))
    return answers


def differences(servable: Callable | None, hopeless: Callable | None, seeds: range) -> int:
    """How many answers differ between the search with the given cuts and with none."""
    wrong = 0
    for seed in seeds:
        rng = random.Random(seed)
        ledger = random_ledger(rng, GEOMETRIES[seed % len(GEOMETRIES)])
        with cuts(servable, hopeless):
            got = searches(ledger, random.Random(seed))
        with cuts(no_servable_cut, no_batch_cut):
            want = searches(ledger, random.Random(seed))
        wrong += sum(a != b for a, b in zip(got, want, strict=True))
    return wrong


@pytest.mark.parametrize("seeds", [range(0, 20), range(20, 40)])
def test_the_cuts_refuse_only_what_the_passes_refuse(seeds: range) -> None:
    fired = {"servable": 0, "hopeless": 0}
    real_servable, real_hopeless = ocs._servable, ocs._sets_hopeless

    def servable(spines, passes, by_default, candidates, m):  # type: ignore[no-untyped-def]
        found = real_servable(spines, passes, by_default, candidates, m)
        fired["servable"] += found.bit_count() < len(spines)  # some spine ruled out
        return found

    def hopeless(*args):  # type: ignore[no-untyped-def]
        found = real_hopeless(*args)
        fired["hopeless"] += found
        return found

    assert differences(servable, hopeless, seeds) == 0
    assert fired["servable"] > 50 and fired["hopeless"] > 2  # the cuts were tried and fired
    # both outcomes: some of these searches wire their sets
    assert any(ocs.try_ocs_spines(random_ledger(random.Random(s), GEOMETRIES[s % 4]), "x", 2, 1,
                                  None, passes=SEARCHES[0][0], orphans_only=True)
               for s in seeds)


def batch_errors(seeds: range) -> tuple[int, int]:
    """Over random batches of leaf sets (some leaves in every set, the rest drawn from a few
    others), how many ``_sets_hopeless`` calls ruled a batch out, and how many of those
    held a set that the conservative passes wire."""
    ruled_out = wrong = 0
    passes = SEARCHES[0][0]
    for seed in seeds:
        rng = random.Random(seed)
        ledger = random_ledger(rng, GEOMETRIES[seed % len(GEOMETRIES)])
        index, masks = ocs.rewire_index(ledger), ocs.DefaultMasks(ledger)
        for _ in range(30):
            m, n = rng.randint(2, 4), rng.randint(1, 3)
            spines = rng.sample(range(ledger.spines), rng.randint(n, ledger.spines))
            pool = rng.sample(range(ledger.leaves), rng.randint(m, min(ledger.leaves, m + 3)))
            shared = pool[:rng.randint(0, m - 1)]
            sets = [sorted(shared + list(more))
                    for more in combinations(pool[len(shared):], m - len(shared))]
            if not ocs._sets_hopeless(sets, n, spines, passes, index, masks):
                continue
            ruled_out += 1
            wrong += any(ocs.wire_spines(ledger, leaves, n, spines, passes, index, True)
                         is not None for leaves in sets)
    return ruled_out, wrong


def test_a_batch_ruled_out_holds_no_set_the_passes_wire() -> None:
    ruled_out, wrong = batch_errors(range(40))
    assert ruled_out > 50 and wrong == 0


def test_a_wrong_cut_is_caught() -> None:
    real_servable = ocs._servable

    def default_only(spines, passes, by_default, candidates, m):  # type: ignore[no-untyped-def]
        return real_servable(spines, ("default",), by_default, candidates, m) if (
            "default" in passes) else no_servable_cut(spines)

    real_bound = ocs.RewireIndex.count_bound

    def shared_only(self, shared, others, picks):  # type: ignore[no-untyped-def]
        return real_bound(self, shared, [], 0)  # the other leaves' ports forgotten

    assert differences(default_only, None, range(20)) > 0
    ocs.RewireIndex.count_bound = shared_only  # type: ignore[method-assign]
    try:
        assert batch_errors(range(40))[1] > 0
    finally:
        ocs.RewireIndex.count_bound = real_bound  # type: ignore[method-assign]

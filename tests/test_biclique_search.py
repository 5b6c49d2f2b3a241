"""Static vClos's biclique search (:func:`sdn_app.allocation.vclos.find_free_biclique`) cuts
branches that cannot hold a hit and still returns the first hit in best-fit order: the first
m-combination of the candidate leaves (in order) whose masks share at least n spines."""

from __future__ import annotations

import random
import signal
from collections.abc import Callable
from functools import reduce
from itertools import combinations, islice
from operator import and_

from sdn_app.allocation.vclos import find_free_biclique, peel, search_leaves


class _Ledger:
    """What the search reads: the leaves with room, in best-fit order, the spines, and each
    leaf's free links (``masks``)."""

    def __init__(self, order: list[int], spines: int, masks: dict[int, int]) -> None:
        self.order, self.spines, self.masks = order, spines, masks

    def leaves_with(self, n: int) -> list[int]:
        return self.order

    def link_free(self, leaf: int, spine: int) -> bool:
        return bool(self.masks[leaf] >> spine & 1)

    def free_links_of_spine(self, spine: int) -> int:
        return sum(self.link_free(leaf, spine) for leaf in self.masks)


def first_hit(order: list[int], masks: dict[int, int], m: int, n: int) -> list[int] | None:
    """The reference: every m-combination in order, the first that shares n spines."""
    usable = [leaf for leaf in order if masks[leaf].bit_count() >= n]
    for leaves in islice(combinations(usable, m), 200000):
        if reduce(and_, (masks[leaf] for leaf in leaves)).bit_count() >= n:
            return sorted(leaves)
    return None


def test_the_search_finds_the_first_hit_in_order() -> None:
    rng = random.Random(7)
    found = 0
    for _ in range(400):
        leaves, spines = rng.randint(2, 12), rng.randint(2, 10)
        density = rng.choice((0.5, 0.7, 0.9))
        masks = {leaf: sum(1 << s for s in range(spines) if rng.random() < density)
                 for leaf in range(leaves)}
        order = rng.sample(range(leaves), leaves)
        m, n = rng.randint(1, min(6, leaves)), rng.randint(1, spines)
        got = find_free_biclique(_Ledger(order, spines, masks), m, n, masks.__getitem__)
        want = first_hit(order, masks, m, n)
        assert (got and got[0]) == want, (masks, order, m, n)
        found += got is not None
    assert 50 < found < 350  # both outcomes are exercised


def test_a_hopeless_search_over_many_leaves_ends_at_once() -> None:
    """Default circuits as the OCS preset's (256 leaves; leaf 2q + r reaches the 32 spines q to
    q + 31, here without wrapping round): leaves share 16 spines only within 17 consecutive q,
    34 leaves, so 35 never do. Without the cut the search walks every subset of each window
    (2^33 branches from leaf 0 alone); with it, no branch is entered."""
    spines = 160
    masks = {leaf: sum(1 << (leaf // 2 + o) for o in range(32)) for leaf in range(256)}
    ledger = _Ledger(list(range(256)), spines, masks)
    signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(20)
    try:
        assert find_free_biclique(ledger, 35, 16, masks.__getitem__) is None
        assert find_free_biclique(ledger, 34, 16, masks.__getitem__) is not None
    finally:
        signal.alarm(0)


def _too_slow(*_: object) -> None:
    raise AssertionError("the search walked hopeless branches for 20 s")


def _peel_dropping_one_leaf_too_many(masks: dict[int, int], m: int, n: int,
                                     spines: int) -> dict[int, int]:
    """A deliberately wrong cut (spines need m + 1 leaves), for the test below."""
    return peel(masks, m + 1, n, spines) if len(masks) > m else masks


def _peel_checked(cut: Callable[[dict[int, int], int, int, int], dict[int, int]]) -> int:
    """How many random searches over ``cut`` masks miss the first hit (0 for a sound cut)."""
    rng = random.Random(11)
    wrong = found = 0
    for _ in range(500):
        leaves, spines = rng.randint(2, 14), rng.randint(2, 12)
        density = rng.choice((0.4, 0.6, 0.8, 0.95))
        masks = {leaf: sum(1 << s for s in range(spines) if rng.random() < density)
                 for leaf in rng.sample(range(leaves), leaves)}
        m, n = rng.randint(1, min(6, leaves)), rng.randint(1, spines)
        cut_masks = cut(masks, m, n, spines)
        # the same order, each mask within its own
        assert list(cut_masks) == [leaf for leaf in masks if leaf in cut_masks]
        assert all(mask & ~masks[leaf] == 0 for leaf, mask in cut_masks.items())
        got = search_leaves(cut_masks, m, n, spines)
        want = first_hit(list(masks), masks, m, n)
        wrong += got != want
        found += want is not None
    assert 50 < found < 450  # both outcomes are exercised
    return wrong


def test_peeled_masks_give_the_first_hit_and_a_wrong_cut_does_not() -> None:
    assert _peel_checked(peel) == 0
    assert _peel_checked(_peel_dropping_one_leaf_too_many) > 0

"""paced_collections raises the young and full collections' thresholds inside the block only,
also when blocks overlap (runs in threads of one process), and restores the process's own."""

from __future__ import annotations

import gc

from testbed.sim.gc_pace import FULL_COLLECTION_EVERY, YOUNG_COLLECTION_AFTER, paced_collections


def test_thresholds_are_raised_inside_and_restored_after() -> None:
    before = gc.get_threshold()
    with paced_collections():
        assert gc.get_threshold() == (max(before[0], YOUNG_COLLECTION_AFTER), before[1],
                                      max(before[2], FULL_COLLECTION_EVERY))
        with paced_collections():  # a second run at once
            assert gc.get_threshold()[2] == max(before[2], FULL_COLLECTION_EVERY)
        assert gc.get_threshold()[2] == max(before[2], FULL_COLLECTION_EVERY)
    assert gc.get_threshold() == before


def test_thresholds_are_restored_after_an_error() -> None:
    before = gc.get_threshold()
    try:
        with paced_collections():
            raise RuntimeError
    except RuntimeError:
        pass
    assert gc.get_threshold() == before

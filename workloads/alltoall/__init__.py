"""All-to-All algorithms, one module each (``pairwise``, ``all_pairs``), found by name through
:data:`testbed.core.registry.ALLTOALLS`; :mod:`.base` holds what they share."""

from workloads.alltoall.base import (
    PATTERN_PERIOD,
    AllToAll,
    block_bounds,
    expected_block,
    fill_blocks,
    received_correctly,
    sizes_error,
)

__all__ = ["PATTERN_PERIOD", "AllToAll", "block_bounds", "expected_block", "fill_blocks",
           "received_correctly", "sizes_error"]

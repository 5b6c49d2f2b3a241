"""All-to-All algorithms, one module each (``pairwise``, ``all_pairs``), found by name through
:data:`testbed.core.registry.ALLTOALLS`; :mod:`.base` holds what they share."""

from testbed.core.algorithms import alltoall_sizes_error as sizes_error
from workloads.alltoall.base import (
    PATTERN_PERIOD,
    AllToAll,
    block_bounds,
    expected_block,
    fill_blocks,
    received_correctly,
)

__all__ = ["PATTERN_PERIOD", "AllToAll", "block_bounds", "expected_block", "fill_blocks",
           "received_correctly", "sizes_error"]

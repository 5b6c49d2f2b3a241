"""Collective algorithms, one module each (``ring``, ``halving_doubling``), found by name through
:data:`testbed.core.registry.COLLECTIVES`; :mod:`.base` holds what they share."""

from workloads.collectives.base import (
    OPS,
    Collective,
    Group,
    Transfer,
    shard_bounds,
)

__all__ = ["OPS", "Collective", "Group", "Transfer", "shard_bounds"]

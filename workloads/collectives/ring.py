"""Ring Reduce-Scatter and All-Gather within one group, on float32 buffers.

The group forms a ring in position order: position ``p`` sends to ``p+1`` and receives from
``p-1`` over its one link. Reductions are in place (``np.add(x, y, out=x)``); the incoming
shard lands in the link's preallocated scratch region first. Each phase takes ``n-1`` steps.
"""

from __future__ import annotations

import numpy as np

from workloads.collectives.base import Collective, Group, Transfer, shard_bounds
from workloads.transport import Tag


class Ring(Collective):
    """Ring All-Reduce: ``n-1`` Reduce-Scatter steps, then ``n-1`` All-Gather steps."""

    name = "ring"

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        return [] if n < 2 else [((pos + 1) % n, (pos - 1) % n)]

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        """Step ``s`` sends shard ``pos-s-1`` and receives shard ``pos-s-2`` (mod n), adding
        it in; after ``n-1`` steps shard ``pos`` is fully reduced here."""
        n, p = group.size, group.pos
        bounds = shard_bounds(buf.size, n)
        if n == 1:
            return bounds[0]
        (link,) = group.links
        for s in range(n - 1):
            slo, shi = bounds[(p - s - 1) % n]
            rlo, rhi = bounds[(p - s - 2) % n]
            incoming = link.scratch(rhi - rlo)
            link.exchange(Tag(coll, chunk, phase, first_step + s), buf[slo:shi], incoming)
            np.add(buf[rlo:rhi], incoming, out=buf[rlo:rhi])
        return bounds[p]

    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        """Step ``s`` sends shard ``pos-s`` and receives shard ``pos-s-1`` (mod n) into place."""
        n, p = group.size, group.pos
        if n == 1:
            return
        (link,) = group.links
        bounds = shard_bounds(buf.size, n)
        for s in range(n - 1):
            slo, shi = bounds[(p - s) % n]
            rlo, rhi = bounds[(p - s - 1) % n]
            link.exchange(Tag(coll, chunk, phase, first_step + s), buf[slo:shi], buf[rlo:rhi])

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        step = [(i, (i + 1) % n, size_bytes / n) for i in range(n)]
        return [list(step) for _ in range(n - 1)]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        step = [(i, (i + 1) % n, shard_bytes) for i in range(n)]
        return [list(step) for _ in range(n - 1)]

    def step_count(self, op: str, n: int) -> int:
        return 0 if n < 2 else (2 if op == "AR" else 1) * (n - 1)


COLLECTIVE = Ring()

"""A collective from outside fabriclab, as a researcher would write one: ``star`` All-Reduces
through position 0. Reduce-Scatter: every other position sends its whole buffer to the root,
which adds them up and sends shard ``q`` back to position ``q``; All-Gather: every position
sends its shard to the root, which sends the whole buffer back. Not bandwidth-optimal (the
root's links carry ``n-1`` times what a ring's do), which is the point of measuring it.
The tests register it through the registry's API and through an entry point."""

from __future__ import annotations

import numpy as np

from workloads.collectives.base import Collective, Group, Transfer, shard_bounds
from workloads.transports import Tag


class Star(Collective):
    name = "star"

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        if n < 2:
            return []
        return [(k, k) for k in range(1, n)] if pos == 0 else [(0, 0)]

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        n, p = group.size, group.pos
        bounds = shard_bounds(buf.size, n)
        if n == 1:
            return bounds[0]
        gather, scatter = Tag(coll, chunk, phase, first_step), Tag(coll, chunk, phase,
                                                                    first_step + 1)
        if p == 0:
            for link in group.links:
                incoming = link.scratch(buf.size)
                link.receive(gather, incoming)
                np.add(buf, incoming, out=buf)
            for k, link in enumerate(group.links, start=1):
                link.start_send(scatter, buf[slice(*bounds[k])])
            for link in group.links:
                link.finish_send(scatter)
        else:
            (link,) = group.links
            link.start_send(gather, buf)
            link.finish_send(gather)
            link.receive(scatter, buf[slice(*bounds[p])])
        return bounds[p]

    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        n, p = group.size, group.pos
        if n == 1:
            return
        bounds = shard_bounds(buf.size, n)
        gather, spread = Tag(coll, chunk, phase, first_step), Tag(coll, chunk, phase,
                                                                   first_step + 1)
        if p == 0:
            for k, link in enumerate(group.links, start=1):
                link.receive(gather, buf[slice(*bounds[k])])
            for link in group.links:
                link.start_send(spread, buf)
            for link in group.links:
                link.finish_send(spread)
        else:
            (link,) = group.links
            link.start_send(gather, buf[slice(*bounds[p])])
            link.finish_send(gather)
            link.receive(spread, buf)

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        return [[(p, 0, size_bytes) for p in range(1, n)],
                [(0, q, size_bytes / n) for q in range(1, n)]]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        return [[(p, 0, shard_bytes) for p in range(1, n)],
                [(0, q, shard_bytes * n) for q in range(1, n)]]

    def sent_bytes(self, op: str, n: int, size_bytes: float) -> float:
        """What the root sends (the most any position does)."""
        steps = self.transfers(op, n, size_bytes)
        return sum(b for step in steps for a, _, b in step if a == 0)


COLLECTIVE = Star()

"""A collective from outside fabriclab, as a researcher would write one: ``star`` All-Reduces
through position 0. Reduce-Scatter: every other position sends its whole buffer to the root,
which adds them up and sends shard ``q`` back to position ``q``; All-Gather: every position
sends its shard to the root, which sends the whole buffer back. Not bandwidth-optimal (the
root's links carry ``n-1`` times what a ring's do), which is the point of measuring it.
The tests register it through the registry's API and through an entry point."""

from __future__ import annotations

import numpy as np

from workloads.collectives.base import Collective, Group, Transfer, shard_bounds
from workloads.transports import PeerLink, Tag


class Star(Collective):
    name = "star"

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        """Every position holds the same links (a worker opens as many per position): link
        ``k-1`` sends to ``pos+k`` and receives from ``pos-k``; star uses those to and from
        the root (the root all of them)."""
        return [((pos + k) % n, (pos - k) % n) for k in range(1, n)]

    @staticmethod
    def _to(group: Group, q: int) -> PeerLink:
        return group.links[(q - group.pos) % group.size - 1]

    @staticmethod
    def _from(group: Group, q: int) -> PeerLink:
        return group.links[(group.pos - q) % group.size - 1]

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        n, p = group.size, group.pos
        bounds = shard_bounds(buf.size, n)
        if n == 1:
            return bounds[0]
        gather = Tag(coll, chunk, phase, first_step)
        scatter = gather._replace(step=first_step + 1)
        if p == 0:
            for q in range(1, n):
                incoming = self._from(group, q).scratch(buf.size)
                self._from(group, q).receive(gather, incoming)
                np.add(buf, incoming, out=buf)
            for q in range(1, n):
                self._to(group, q).start_send(scatter, buf[slice(*bounds[q])])
            for q in range(1, n):
                self._to(group, q).finish_send(scatter)
        else:
            self._to(group, 0).start_send(gather, buf)
            self._to(group, 0).finish_send(gather)
            self._from(group, 0).receive(scatter, buf[slice(*bounds[p])])
        return bounds[p]

    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        n, p = group.size, group.pos
        if n == 1:
            return
        bounds = shard_bounds(buf.size, n)
        gather = Tag(coll, chunk, phase, first_step)
        spread = gather._replace(step=first_step + 1)
        if p == 0:
            for q in range(1, n):
                self._from(group, q).receive(gather, buf[slice(*bounds[q])])
            for q in range(1, n):
                self._to(group, q).start_send(spread, buf)
            for q in range(1, n):
                self._to(group, q).finish_send(spread)
        else:
            self._to(group, 0).start_send(gather, buf[slice(*bounds[p])])
            self._to(group, 0).finish_send(gather)
            self._from(group, 0).receive(spread, buf)

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

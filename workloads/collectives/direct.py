"""Direct All-Reduce (ASTRA-sim's ``direct``) within one group, on float32 buffers.

Every position talks to every other one at once, over a link per peer: link ``k-1`` of
position ``p`` (``k = 1 .. n-1``) sends to ``p+k`` and receives from ``p-k`` (mod n).
Reduce-Scatter is one step: ``p`` sends shard ``q`` to position ``q`` for every ``q != p``
(all links at once, each on its own sender thread) and adds the ``n-1`` copies of shard
``p`` it receives. All-Gather is one step too: ``p`` sends its shard to every peer and
receives every other shard in place. A rank sends what it sends in a ring, ``(n-1)·S/n``
per phase, spread evenly over ``n-1`` links: on a ``fully_connected`` dimension that uses
all of the host's links, as ASTRA-sim runs that dimension.
"""

from __future__ import annotations

import numpy as np

from workloads.collectives.base import (
    Collective,
    Group,
    Transfer,
    all_pairs_roles,
    shard_bounds,
)
from workloads.transports import PeerLink, Tag


def exchange(sends: list[tuple[PeerLink, Tag, np.ndarray]],
             receives: list[tuple[PeerLink, Tag, np.ndarray, bool]]) -> None:
    """Start every send ``(link, tag, array)``, then receive each ``(link, tag, target, add)``
    in turn (into the link's scratch and added into ``target`` when ``add``, else straight
    into ``target``), then wait for the sends; on failure, wait for the started ones quietly."""
    started: list[tuple[PeerLink, Tag]] = []
    try:
        for link, tag, arr in sends:
            link.start_send(tag, arr)
            started.append((link, tag))
        for link, tag, target, add in receives:
            if add:
                incoming = link.scratch(target.size)
                link.receive(tag, incoming)
                np.add(target, incoming, out=target)
            else:
                link.receive(tag, target)
    except BaseException:
        for link, tag in started:
            link.finish_send(tag, quiet=True)
        raise
    for link, tag in started:
        link.finish_send(tag)


class Direct(Collective):
    """One Reduce-Scatter step and one All-Gather step, every peer over its own link."""

    name = "direct"

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        return all_pairs_roles(pos, n)

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        n, p = group.size, group.pos
        bounds = shard_bounds(buf.size, n)
        if n == 1:
            return bounds[0]
        lo, hi = bounds[p]
        sends = [buf[slice(*bounds[(p + k) % n])] for k in range(1, n)]
        mine = buf[lo:hi]
        tag = Tag(coll, chunk, phase, first_step)
        exchange([(link, tag, arr) for link, arr in zip(group.links, sends, strict=True)],
                 [(link, tag, mine, True) for link in group.links])
        return bounds[p]

    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        n, p = group.size, group.pos
        if n == 1:
            return
        bounds = shard_bounds(buf.size, n)
        mine = buf[slice(*bounds[p])]
        outs = [buf[slice(*bounds[(p - k) % n])] for k in range(1, n)]
        tag = Tag(coll, chunk, phase, first_step)
        exchange([(link, tag, mine) for link in group.links],
                 [(link, tag, out, False) for link, out in zip(group.links, outs, strict=True)])

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        return [[(i, j, size_bytes / n) for i in range(n) for j in range(n) if i != j]]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        return [[(i, j, shard_bytes) for i in range(n) for j in range(n) if i != j]]


COLLECTIVE = Direct()

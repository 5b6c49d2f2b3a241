"""Ring Reduce-Scatter, All-Gather and All-Reduce within one group, on float32 buffers.

A group of ``n`` ranks forms a ring; this rank sits at position ``pos`` and talks to the next
and previous positions through a :class:`~workloads.transport.Link`. A buffer of any length
is split into ``n`` shards by an even split with remainder (:func:`shard_bounds`). After a
Reduce-Scatter the rank at position ``p`` holds the reduced shard ``p``; an All-Gather starts
from that state. Reductions are in place (``np.add(x, y, out=x)``), the incoming shard lands
in the link's preallocated scratch region first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.transport import Link, Tag


def shard_bounds(count: int, parts: int) -> list[tuple[int, int]]:
    """Split ``count`` elements into ``parts`` contiguous ranges; the first ones get one more."""
    base, extra = divmod(count, parts)
    bounds = []
    lo = 0
    for i in range(parts):
        hi = lo + base + (1 if i < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


@dataclass(frozen=True)
class RingGroup:
    """This rank's place in a ring: its position, the group size and its link (None if n=1)."""

    pos: int
    size: int
    link: Link | None


def reduce_scatter(group: RingGroup, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> tuple[int, int]:
    """Ring Reduce-Scatter of ``buf`` in place; returns the range of the shard this rank owns.

    Step ``s`` sends shard ``pos-s-1`` and receives shard ``pos-s-2`` (mod n), adding it in;
    after ``n-1`` steps shard ``pos`` is fully reduced here.
    """
    n, p = group.size, group.pos
    bounds = shard_bounds(buf.size, n)
    if n == 1:
        return bounds[0]
    link = group.link
    assert link is not None
    for s in range(n - 1):
        slo, shi = bounds[(p - s - 1) % n]
        rlo, rhi = bounds[(p - s - 2) % n]
        incoming = link.scratch(rhi - rlo)
        link.exchange(Tag(coll, chunk, phase, first_step + s), buf[slo:shi], incoming)
        np.add(buf[rlo:rhi], incoming, out=buf[rlo:rhi])
    return bounds[p]


def all_gather(group: RingGroup, buf: np.ndarray, coll: int, chunk: int = 0,
               phase: int = 0, first_step: int = 0) -> None:
    """Ring All-Gather in place: position ``p`` starts owning shard ``p`` of ``buf``.

    Step ``s`` sends shard ``pos-s`` and receives shard ``pos-s-1`` (mod n) into place.
    """
    n, p = group.size, group.pos
    if n == 1:
        return
    link = group.link
    assert link is not None
    bounds = shard_bounds(buf.size, n)
    for s in range(n - 1):
        slo, shi = bounds[(p - s) % n]
        rlo, rhi = bounds[(p - s - 1) % n]
        link.exchange(Tag(coll, chunk, phase, first_step + s), buf[slo:shi], buf[rlo:rhi])


def all_reduce(group: RingGroup, buf: np.ndarray, coll: int, chunk: int = 0,
               phase: int = 0) -> None:
    """Ring All-Reduce in place: Reduce-Scatter then All-Gather (steps numbered on)."""
    reduce_scatter(group, buf, coll, chunk, phase)
    all_gather(group, buf, coll, chunk, phase, first_step=max(group.size - 1, 0))

"""Ring Reduce-Scatter and All-Gather within one group, on float32 buffers, pipelined.

The group forms a ring in position order: position ``p`` sends to ``p+1`` and receives from
``p-1`` over its one link. Each phase takes ``n-1`` steps, and what a step receives is what the
next step sends on. So that the link never idles between steps, every shard travels in slices
(as NCCL's slices and steps do): slice ``j`` of step ``s+1`` leaves as soon as slice ``j`` of
step ``s`` has arrived (and, in a Reduce-Scatter, been added in), while the later slices of
step ``s`` are still on the wire. Reductions are in place (``np.add(x, y, out=x)``); an
incoming slice lands in the link's preallocated scratch region first.
"""

from __future__ import annotations

import numpy as np

from workloads.collectives.base import Collective, Group, Transfer, shard_bounds
from workloads.transports import PeerLink, Tag

SLICE_BYTES = 256 * 1024  # a slice's target size: well above a TCP window's worth of segments
MAX_SLICES = 16  # per shard: each slice costs a queue hand-off and a header


def slice_count(shard_elems: int) -> int:
    """Slices a shard of ``shard_elems`` float32 elements travels in (1 to MAX_SLICES)."""
    return max(1, min(MAX_SLICES, round(shard_elems * 4 / SLICE_BYTES)))


def pipelined_steps(link: PeerLink, buf: np.ndarray, bounds: list[tuple[int, int]],
                    shards: list[int], tag: Tag, reduce: bool) -> None:
    """Ring steps ``s = 0 .. len(shards)-2`` over ``link``: step ``s`` sends shard
    ``shards[s]`` of ``buf`` and receives shard ``shards[s+1]`` (the one step ``s+1`` sends),
    adding it in if ``reduce``, else writing it in place. Slices of consecutive steps overlap.

    Every rank cuts shard ``q`` into the same slices, so sender and receiver agree on each
    slice's bytes; ``tag`` carries the first step's number and each slice its index.
    """
    k = slice_count(max(hi - lo for lo, hi in bounds))
    pieces = [[(lo + a, lo + b) for a, b in shard_bounds(hi - lo, k)] for lo, hi in bounds]
    queued = 0

    def send(step: int, j: int) -> None:
        nonlocal queued
        lo, hi = pieces[shards[step]][j]
        link.start_send(tag._replace(step=tag.step + step, slice=j), buf[lo:hi])
        queued += 1

    for j in range(k):
        send(0, j)
    for s in range(len(shards) - 1):
        for j, (lo, hi) in enumerate(pieces[shards[s + 1]]):
            this = tag._replace(step=tag.step + s, slice=j)
            if reduce:
                incoming = link.scratch(hi - lo)
                link.receive(this, incoming)
                np.add(buf[lo:hi], incoming, out=buf[lo:hi])
            else:
                link.receive(this, buf[lo:hi])
            if s + 2 < len(shards):
                send(s + 1, j)
    for _ in range(queued):
        link.finish_send(tag)


class Ring(Collective):
    """Ring All-Reduce: ``n-1`` Reduce-Scatter steps, then ``n-1`` All-Gather steps."""

    name = "ring"
    reference = True  # what comparisons of flat collectives measure the others against

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
        pipelined_steps(link, buf, bounds, [(p - s - 1) % n for s in range(n)],
                        Tag(coll, chunk, phase, first_step), reduce=True)
        return bounds[p]

    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        """Step ``s`` sends shard ``pos-s`` and receives shard ``pos-s-1`` (mod n) into place."""
        n, p = group.size, group.pos
        if n == 1:
            return
        (link,) = group.links
        pipelined_steps(link, buf, shard_bounds(buf.size, n), [(p - s) % n for s in range(n)],
                        Tag(coll, chunk, phase, first_step), reduce=False)

    def sim_slices(self, n: int, size_bytes: float) -> int | None:
        """The slices :func:`pipelined_steps` cuts each shard of a float32 buffer into."""
        elems = int(size_bytes) // 4
        return slice_count(-(-elems // n)) if n > 1 else 1

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        step = [(i, (i + 1) % n, size_bytes / n) for i in range(n)]
        return [list(step) for _ in range(n - 1)]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        step = [(i, (i + 1) % n, shard_bytes) for i in range(n)]
        return [list(step) for _ in range(n - 1)]

    def step_count(self, op: str, n: int) -> int:
        return 0 if n < 2 else (2 if op == "AR" else 1) * (n - 1)


COLLECTIVE = Ring()

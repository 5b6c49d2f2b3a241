"""Halving-doubling (Rabenseifner) within one group of a power-of-two size, on float32 buffers.

Reduce-Scatter by recursive halving: in round ``r`` (distances ``n/2, n/4, ..., 1``) position
``p`` exchanges with ``p XOR d``: both hold the same range of shards, each keeps the half its
bit ``d`` picks (upper if set) and sends the other half, then adds what it received into the
half it kept. After ``log2 n`` rounds ``p`` owns shard ``p``, as after a ring Reduce-Scatter.
All-Gather by recursive doubling mirrors it: distances ``1, 2, ..., n/2``, each round the
partners swap the ranges they hold, which doubles them. Every partner is a link of its own
(``log2 n`` links per position), and every step sends ``S·d/n`` bytes (RS of ``S``) or
``shard·d`` bytes (AG), so a rank sends the same bytes as in a ring, in ``log2 n`` steps.
"""

from __future__ import annotations

import numpy as np

from workloads.collectives.base import Collective, Group, Transfer, shard_bounds
from workloads.transports import Tag


def _distances(n: int) -> list[int]:
    """Partner distances of the Reduce-Scatter rounds: n/2, n/4, ..., 1."""
    out, d = [], n // 2
    while d >= 1:
        out.append(d)
        d //= 2
    return out


class HalvingDoubling(Collective):
    """Recursive halving Reduce-Scatter, recursive doubling All-Gather."""

    name = "halving-doubling"

    def group_size_error(self, n: int) -> str | None:
        if n < 1 or n & (n - 1):
            return f"halving-doubling needs a power-of-two number of ranks per group, not {n}"
        return None

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        """One link per partner, in Reduce-Scatter order (distance n/2 first)."""
        return [(pos ^ d, pos ^ d) for d in _distances(n)]

    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        n, p = group.size, group.pos
        bounds = shard_bounds(buf.size, n)
        lo, hi = 0, n  # the shards this rank still reduces
        for s, d in enumerate(_distances(n)):
            mid = (lo + hi) // 2
            keep, give = ((mid, hi), (lo, mid)) if p & d else ((lo, mid), (mid, hi))
            klo, khi = bounds[keep[0]][0], bounds[keep[1] - 1][1]
            glo, ghi = bounds[give[0]][0], bounds[give[1] - 1][1]
            link = group.links[s]
            incoming = link.scratch(khi - klo)
            link.exchange(Tag(coll, chunk, phase, first_step + s), buf[glo:ghi], incoming)
            np.add(buf[klo:khi], incoming, out=buf[klo:khi])
            lo, hi = keep
        return bounds[p]

    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        n, p = group.size, group.pos
        bounds = shard_bounds(buf.size, n)
        distances = _distances(n)
        lo, hi = p, p + 1  # the shards this rank holds
        for s, d in enumerate(reversed(distances)):
            other = (lo - d, lo) if p & d else (hi, hi + d)
            mlo, mhi = bounds[lo][0], bounds[hi - 1][1]
            olo, ohi = bounds[other[0]][0], bounds[other[1] - 1][1]
            link = group.links[len(distances) - 1 - s]
            link.exchange(Tag(coll, chunk, phase, first_step + s), buf[mlo:mhi], buf[olo:ohi])
            lo, hi = min(lo, other[0]), max(hi, other[1])

    def sim_slices(self, n: int, size_bytes: float) -> int | None:
        """Whole transfers: a round's exchange follows the rank's own receive of the last."""
        return 1

    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        return [[(i, i ^ d, size_bytes * d / n) for i in range(n)] for d in _distances(n)]

    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        return [[(i, i ^ d, shard_bytes * d) for i in range(n)]
                for d in reversed(_distances(n))]

    def step_count(self, op: str, n: int) -> int:
        rounds = len(_distances(n))
        return 2 * rounds if op == "AR" else rounds


COLLECTIVE = HalvingDoubling()

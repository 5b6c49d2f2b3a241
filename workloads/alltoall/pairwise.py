"""Pairwise-exchange all-to-all (NCCL's and RapidNetSim's): ``n-1`` steps; at step ``s``
position ``p`` sends block ``p+s`` to position ``p+s`` and receives block ``p-s`` from
position ``p-s`` (mod n), so every step is a permutation and no receiver has two senders.
Step ``s`` runs on link ``s-1`` (a connection per peer, as an all-to-all over TCP has).
"""

from __future__ import annotations

import numpy as np

from workloads.alltoall.base import AllToAll
from workloads.collectives.base import Group, Transfer
from workloads.transports import Tag


class Pairwise(AllToAll):
    """``n-1`` steps, each sending one block to one peer and receiving one from another."""

    name = "pairwise"

    def run(self, group: Group, send: np.ndarray, recv: np.ndarray, coll: int) -> None:
        n, p = group.size, group.pos
        bounds = self.keep_own_block(group, send, recv)
        for s, link in enumerate(group.links, start=1):
            link.exchange(Tag(coll, 0, 0, s), send[slice(*bounds[(p + s) % n])],
                          recv[slice(*bounds[(p - s) % n])])

    def transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        return [[(i, (i + s) % n, size_bytes / n) for i in range(n)] for s in range(1, n)]


ALLTOALL = Pairwise()

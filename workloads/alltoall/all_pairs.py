"""All-pairs all-to-all: one step in which every position sends every other one its block at
once, over a link per peer (as NCCL posts all its sends and receives in one group, and as the
cluster simulator's all-to-all runs). Link ``k-1`` of position ``p`` sends to ``p+k`` and
receives from ``p-k`` (mod n); every send has its link's sender thread and every receive a
thread of its own, so all ``n-1`` flows in each direction are in flight together and compete
for the fabric as they would on a GPU cluster.
"""

from __future__ import annotations

import concurrent.futures as cf

import numpy as np

from workloads.alltoall.base import AllToAll
from workloads.collectives.base import Group, Transfer
from workloads.transports import Tag


class AllPairs(AllToAll):
    """One step: ``n(n-1)`` flows at once, one per ordered pair of positions."""

    name = "all-pairs"

    def run(self, group: Group, send: np.ndarray, recv: np.ndarray, coll: int) -> None:
        n, p = group.size, group.pos
        bounds = self.keep_own_block(group, send, recv)
        if n == 1:
            return
        tag = Tag(coll, 0, 0, 0)
        started = 0
        pool = cf.ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="a2a-recv")
        try:
            for k, link in enumerate(group.links, start=1):
                link.start_send(tag, send[slice(*bounds[(p + k) % n])])
                started += 1
            futures = [pool.submit(link.receive, tag, recv[slice(*bounds[(p - k) % n])])
                       for k, link in enumerate(group.links, start=1)]
            done, _ = cf.wait(futures, return_when=cf.FIRST_EXCEPTION)
            for f in done:
                f.result()  # the first failure, raised here; the others wake on abort
        except BaseException:
            for link in group.links[:started]:
                link.finish_send(tag, quiet=True)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        for link in group.links:
            link.finish_send(tag)

    def transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        return [[(i, j, size_bytes / n) for i in range(n) for j in range(n) if i != j]]


ALLTOALL = AllPairs()

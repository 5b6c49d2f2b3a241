"""What every all-to-all algorithm shares: the block layout, the data that proves every block
reached its place, and the :class:`AllToAll` interface each algorithm module fills in (as
``ALLTOALL``, registered in :data:`testbed.core.registry.ALLTOALLS`).

An all-to-all is not an All-Reduce: nothing is reduced. Each of ``n`` ranks holds a send
buffer of ``n`` equal blocks, block ``j`` destined for rank ``j``, and ends with a receive
buffer whose block ``j`` is the block rank ``j`` sent it (its own block ``i`` copied locally).
The per-rank buffer size ``S`` is what nccl-tests' ``alltoall_perf`` calls the size: each rank
sends ``S·(n-1)/n`` bytes over the network, so busbw = algbw·(n-1)/n
(:func:`testbed.core.formulas.busbw_factor`).

Blocks are equal, so a buffer must split into ``n`` whole float32 blocks
(:func:`testbed.core.algorithms.alltoall_sizes_error`); a remainder is refused, never
silently dropped.

Each algorithm says, for every layer:

* workers: :meth:`AllToAll.link_roles` (whom a position sends to and receives from, one link
  each) and :meth:`AllToAll.run` over a :class:`~workloads.collectives.Group` holding those
  links in role order;
* simulator: :meth:`AllToAll.transfers`, the synchronous steps as data, each a list of
  ``(src position, dst position, bytes)``.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from workloads.collectives.base import Group, LinkPattern, Transfer, all_pairs_roles

# The period of every data pattern the workers check (their All-Reduce inputs too).
# Element k of block j of rank i is (i·n + j)·PATTERN_PERIOD + k mod PATTERN_PERIOD: it names
# its sender, its destination and its place in the block, and stays exact in float32 while
# n²·PATTERN_PERIOD < 2^24.
PATTERN_PERIOD = 251
MAX_EXACT_RANKS = 258  # the largest n with n²·PATTERN_PERIOD below 2^24


def block_bounds(count: int, n: int) -> list[tuple[int, int]]:
    """The element range of each of the ``n`` blocks of a ``count``-element buffer."""
    if count % n:
        raise ValueError(f"{count} elements do not split into {n} equal blocks")
    b = count // n
    return [(j * b, (j + 1) * b) for j in range(n)]


def _pattern(block_elems: int) -> np.ndarray:
    return (np.arange(block_elems) % PATTERN_PERIOD).astype(np.float32)


def expected_block(sender: int, dest: int, n: int, block_elems: int) -> np.ndarray:
    """The block ``sender`` sends ``dest`` (both ranks of ``n``)."""
    return _pattern(block_elems) + np.float32((sender * n + dest) * PATTERN_PERIOD)


def fill_blocks(send: np.ndarray, rank: int, n: int) -> None:
    """Rank ``rank``'s send buffer: block ``j`` is :func:`expected_block` (rank, j)."""
    pattern = _pattern(send.size // n)
    for j, (lo, hi) in enumerate(block_bounds(send.size, n)):
        np.add(pattern, np.float32((rank * n + j) * PATTERN_PERIOD), out=send[lo:hi])


def received_correctly(recv: np.ndarray, rank: int, n: int) -> bool:
    """Whether block ``j`` of rank ``rank``'s receive buffer is what rank ``j`` sent it, for
    every ``j``."""
    bounds = block_bounds(recv.size, n)
    pattern = _pattern(recv.size // n)
    return all(np.array_equal(recv[lo:hi] - np.float32((j * n + rank) * PATTERN_PERIOD),
                              pattern) for j, (lo, hi) in enumerate(bounds))


class AllToAll(LinkPattern):
    """One all-to-all algorithm over a group of ``n`` ranks (positions ``0..n-1``)."""

    name: ClassVar[str]

    def group_size_error(self, n: int) -> str | None:
        """Why ``n`` ranks cannot run this algorithm (None: they can)."""
        if n > MAX_EXACT_RANKS:
            return (f"{n} ranks are more than the {MAX_EXACT_RANKS} whose blocks the "
                    "correctness check can tell apart exactly")
        return None

    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        """A link per peer (:func:`~workloads.collectives.base.all_pairs_roles`): link ``k-1``
        sends to ``pos+k`` and receives from ``pos-k`` (mod n)."""
        return all_pairs_roles(pos, n)

    @staticmethod
    def keep_own_block(group: Group, send: np.ndarray, recv: np.ndarray
                       ) -> list[tuple[int, int]]:
        """Copy this rank's own block from ``send`` to ``recv`` (it never crosses the
        network); the element range of every block."""
        bounds = block_bounds(send.size, group.size)
        np.copyto(recv[slice(*bounds[group.pos])], send[slice(*bounds[group.pos])])
        return bounds

    @abstractmethod
    def run(self, group: Group, send: np.ndarray, recv: np.ndarray, coll: int) -> None:
        """Send block ``j`` of ``send`` to position ``j`` and put the block position ``j``
        sends here in block ``j`` of ``recv`` (both buffers of ``n`` equal blocks; ``send``
        is left untouched)."""

    @abstractmethod
    def transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        """An all-to-all of ``size_bytes`` per rank as synchronous steps of network transfers
        (the local block is not one)."""

    def step_count(self, n: int) -> int:
        """Synchronous steps on ``n`` ranks."""
        return len(self.transfers(n, 1.0)) if n > 1 else 0

    def sent_bytes(self, n: int, size_bytes: float) -> float:
        """Bytes each rank sends: every block but its own, ``S·(n-1)/n``."""
        return size_bytes * (n - 1) / n

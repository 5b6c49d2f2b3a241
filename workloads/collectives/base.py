"""What every collective algorithm shares: shards, a rank's group, and the :class:`Collective`
interface each algorithm module fills in (as ``COLLECTIVE``, registered in
:data:`testbed.core.registry.COLLECTIVES`).

A collective runs over one *group* of ``n`` ranks at positions ``0..n-1`` (a flat job is one
group of all ranks; a hierarchical job runs one group per dimension). A buffer of any length
is split into ``n`` shards by :func:`shard_bounds`; after a Reduce-Scatter the rank at position
``p`` holds the reduced shard ``p``, and an All-Gather starts from that state. Each algorithm
says, for every layer:

* workers: :meth:`Collective.link_roles` (whom a position sends to and receives from, one
  link each) and the in-place :meth:`~Collective.reduce_scatter` / :meth:`~Collective.all_gather`
  over a :class:`Group` holding those links in role order;
* simulator: :meth:`~Collective.transfers`, the synchronous steps as pure data, each a list of
  ``(src position, dst position, bytes)``;
* model: :meth:`~Collective.sent_bytes` and :meth:`~Collective.step_count` per phase.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from testbed.core.formulas import phase_sent_bytes
from workloads.transports import PeerLink

OPS = ("RS", "AR", "AG")
Transfer = tuple[int, int, float]  # (src position, dst position, bytes); bytes may be Fraction


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
class Group:
    """This rank's place in one group: its position, the group size and its links, in the
    order of :meth:`Collective.link_roles` (none when the group is this rank alone)."""

    pos: int
    size: int
    links: tuple[PeerLink, ...] = ()


def all_pairs_roles(pos: int, n: int) -> list[tuple[int, int]]:
    """A link to and from every other position: link ``k-1`` sends to ``pos+k`` and receives
    from ``pos-k`` (mod n)."""
    return [((pos + k) % n, (pos - k) % n) for k in range(1, n)]


class LinkPattern(ABC):
    """What a group algorithm needs of its links: the peers each position sends to and
    receives from (the launcher opens exactly these connections)."""

    @abstractmethod
    def link_roles(self, pos: int, n: int) -> list[tuple[int, int]]:
        """Per link position ``pos`` needs: (position it sends to, position it receives from)."""

    def link_count(self, n: int) -> int:
        """Links each position of a group of ``n`` holds."""
        return len(self.link_roles(0, n))


class Collective(LinkPattern):
    """One All-Reduce algorithm (Reduce-Scatter then All-Gather) over a group of ranks."""

    name: ClassVar[str]
    is_flat: ClassVar[bool] = True  # runs over a job as one group (a schedule is not flat)
    # can be a chunk schedule's dim_algorithm (has Reduce-Scatter and All-Gather of shards)
    per_dimension: ClassVar[bool] = True

    def group_size_error(self, n: int) -> str | None:
        """Why ``n`` ranks cannot form a group of this algorithm (None: they can)."""
        return None

    @abstractmethod
    def reduce_scatter(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                       phase: int = 0, first_step: int = 0) -> tuple[int, int]:
        """Reduce-Scatter ``buf`` in place; return the element range of the shard now owned."""

    @abstractmethod
    def all_gather(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0, first_step: int = 0) -> None:
        """All-Gather in place: position ``p`` starts owning shard ``p`` of ``buf``."""

    def all_reduce(self, group: Group, buf: np.ndarray, coll: int, chunk: int = 0,
                   phase: int = 0) -> None:
        """Reduce-Scatter then All-Gather in place (transfer steps numbered on)."""
        self.reduce_scatter(group, buf, coll, chunk, phase)
        self.all_gather(group, buf, coll, chunk, phase,
                        first_step=self.step_count("RS", group.size))

    def all_reduce_variables(self, group: Group, buf: np.ndarray, coll: int,
                             variables: list[tuple[int, int, int]]) -> None:
        """All-Reduce ``buf``, which holds the model variables ``variables`` (global index,
        first, end element), as a DNN job's bucket does; only an algorithm that places
        variables (``ps``) reads them, every other one reduces the buffer as a whole."""
        self.all_reduce(group, buf, coll)

    def variable_transfers(self, n: int, variables: list[tuple[int, float]]
                           ) -> list[list[Transfer]]:
        """The simulator's steps of :meth:`all_reduce_variables`: ``variables`` are (global
        index, bytes) of one bucket; every algorithm but one that places variables (``ps``)
        moves the bucket as a whole."""
        return self.transfers("AR", n, sum(nbytes for _, nbytes in variables))

    def sim_slices(self, n: int, size_bytes: float) -> int | None:
        """How the simulator runs an All-Reduce of ``size_bytes`` per rank on ``n`` ranks: in
        this many slices per transfer, rank by rank as the workers do (each rank sends a step
        once its own inputs have arrived: :mod:`testbed.sim.rank_steps`); None: in lock step
        (each step starts when the last flow of the one before has arrived). An algorithm
        whose workers start each step after their own receives of the step before, sending
        whole transfers, returns 1."""
        return None

    @abstractmethod
    def rs_transfers(self, n: int, size_bytes: float) -> list[list[Transfer]]:
        """Reduce-Scatter of ``size_bytes`` per rank, as synchronous steps of transfers."""

    @abstractmethod
    def ag_transfers(self, n: int, shard_bytes: float) -> list[list[Transfer]]:
        """All-Gather from a ``shard_bytes`` shard per rank, as synchronous steps."""

    def transfers(self, op: str, n: int, size_bytes: float) -> list[list[Transfer]]:
        """The steps of phase ``op`` (RS, AR or AG) on ``n`` ranks; ``size_bytes`` is the input
        per rank (for AG the shard each holds). No steps for a group of one."""
        if n < 2:
            return []
        if op == "RS":
            return self.rs_transfers(n, size_bytes)
        if op == "AG":
            return self.ag_transfers(n, size_bytes)
        if op == "AR":
            return self.rs_transfers(n, size_bytes) + self.ag_transfers(n, size_bytes / n)
        raise ValueError(f"phase op {op!r} is not one of {', '.join(OPS)}")

    def step_count(self, op: str, n: int) -> int:
        """Synchronous steps of phase ``op`` on ``n`` ranks."""
        return len(self.transfers(op, n, 1.0))

    def links_at_once(self, n: int) -> int:
        """Peers a position sends to within one step (ring, halving-doubling: 1; direct:
        ``n-1``), from the transfers: on a ``fully_connected`` dimension it uses that many of
        its ``n-1`` links at once."""
        steps = self.transfers("AR", n, 1.0)
        return max((len({b for a, b, _ in step if a == 0}) for step in steps), default=0)

    def sent_bytes(self, op: str, n: int, size_bytes: float) -> float:
        """Bytes each rank sends in phase ``op`` (both built-ins are bandwidth optimal)."""
        return phase_sent_bytes(op, size_bytes, n)

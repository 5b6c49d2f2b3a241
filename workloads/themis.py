"""Themis chunk planner for hierarchical All-Reduce over a multi-dimensional network.

The network has ``D`` dimensions; dimension ``d`` groups ``dim_sizes[d]`` hosts and gives
each host ``dim_bandwidths[d]`` of bandwidth (any unit, only ratios matter here). An
All-Reduce of ``total_bytes`` is split into ``chunks`` chunks. Each chunk Reduce-Scatters
through the dimensions in its ``rs_order`` (the data shrinks by each dimension's size),
All-Reduces on the last dimension of that order and All-Gathers back in ``ag_order``, the
exact reverse of the Reduce-Scatter order without that last dimension.

Schedules (registered in :data:`testbed.core.registry.SCHEDULES`, as :data:`BASELINE` and
:data:`THEMIS`):

``baseline``
    every chunk uses the fixed order 0, 1, ..., D-1.
``themis``
    the greedy of ASTRA-sim's OfflineGreedy (:class:`workloads.offline_greedy.OfflineGreedy`,
    here with real-valued sizes): per collective a load per dimension starts at 0; each chunk
    in turn is given the dimensions sorted by ascending load, so its largest phase (the whole
    chunk) lands on the least-loaded dimension, and then charges the loads along that order.
    When the loads are already balanced (the gap between the most and least loaded dimension
    is worth less than chunk/16 bytes on the least-loaded dimension), the chunk uses the
    baseline order instead. Chunk 0 therefore always gets the baseline order.

A schedule also says how a training job's replay orders its chunks
(:meth:`ChunkSchedule.replay_orderer`; the protocol is in ``docs/extending.md``).

The *semantics* (``astra-sim-1.0``, the default, or ``fabriclab``; see
``docs/themis-semantics.md``) changes two things here. Ties between equally loaded dimensions:
``fabriclab`` puts the lower index first; ``astra-sim-1.0`` keeps them in the order the
previous chunk's sort left them (the reference sorts one list in place, stably, and resets it
to index order whenever a chunk falls back to the baseline order). And the phases of a
``themis`` chunk: under ``astra-sim-1.0`` its plan has ``split_last``, so the last dimension
of its order runs a Reduce-Scatter and, as a separate phase, an All-Gather instead of one
All-Reduce (the reference builds a balanced chunk that way; a baseline chunk keeps the
All-Reduce).

Dimensions of size 1 connect a host to nobody, so they never appear in an order.
The model is bandwidth only (no latency).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from testbed.core.errors import FabricLabError
from testbed.core.formulas import phase_sent_bytes
from testbed.core.registry import SCHEDULES
from workloads.offline_greedy import OfflineGreedy
from workloads.schedule_engine import ASTRA_SIM_1_0, DEFAULT_SEMANTICS, check_semantics


@dataclass(frozen=True)
class ChunkPlan:
    """One chunk of the collective: its position, size in bytes and dimension order.
    ``split_last``: Reduce-Scatter and All-Gather on the last dimension of ``rs_order`` as two
    phases instead of one All-Reduce (ASTRA-sim 1.0's balanced chunks)."""

    index: int
    size: int
    rs_order: tuple[int, ...]
    split_last: bool = False

    @property
    def ag_order(self) -> tuple[int, ...]:
        """All-Gather order: the Reduce-Scatter order reversed, without the last dimension.

        The last dimension of ``rs_order`` runs an All-Reduce, which is its own way back;
        with ``split_last`` it runs an All-Gather of its own, so the order is the full reverse.
        """
        if self.split_last:
            return tuple(reversed(self.rs_order))
        return tuple(reversed(self.rs_order[:-1]))


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FabricLabError(f"{name} must be an integer, not {value!r}")
    if value < minimum:
        raise FabricLabError(f"{name} is {value} but must be at least {minimum}")
    return value


def validate_shape(
    dim_sizes: Sequence[int], dim_bandwidths: Sequence[float]
) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Check a network shape and return it as tuples; FabricLabError names the bad argument."""
    sizes = tuple(dim_sizes)
    bandwidths = tuple(dim_bandwidths)
    if not sizes:
        raise FabricLabError("dim_sizes must list at least one dimension")
    if len(bandwidths) != len(sizes):
        raise FabricLabError(
            f"dim_bandwidths has {len(bandwidths)} values but dim_sizes has "
            f"{len(sizes)} dimensions"
        )
    for d, n in enumerate(sizes):
        _check_int(f"dim_sizes[{d}]", n, 1)
    for d, b in enumerate(bandwidths):
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) or b <= 0:
            raise FabricLabError(f"dim_bandwidths[{d}] is {b!r} but must be a positive number")
    return sizes, bandwidths


def split_sizes(total_bytes: int, chunks: int, align: int = 1) -> list[int]:
    """Split ``total_bytes`` into ``chunks`` sizes that sum exactly to ``total_bytes``.

    The bytes are counted in units of ``align`` and the units are spread as evenly as
    possible (the first chunks get one unit more). If ``total_bytes`` is not a multiple of
    ``align``, the leftover ``total_bytes % align`` bytes go to the last chunk: every chunk
    then still starts at an offset that is a multiple of ``align`` and only the last chunk's
    size is not one. Every chunk holds at least one unit, except that a single chunk may be
    smaller than ``align``.
    """
    total_bytes = _check_int("total_bytes", total_bytes, 1)
    chunks = _check_int("chunks", chunks, 1)
    align = _check_int("align", align, 1)
    units, leftover = divmod(total_bytes, align)
    if chunks > max(units, 1):
        if align == 1:
            raise FabricLabError(
                f"chunks is {chunks} but total_bytes has only {total_bytes} bytes to split"
            )
        raise FabricLabError(
            f"chunks is {chunks} but total_bytes has only {units} aligned units of {align} "
            f"bytes to split"
        )
    base, extra = divmod(units, chunks)
    sizes = [(base + (1 if i < extra else 0)) * align for i in range(chunks)]
    sizes[-1] += leftover
    return sizes


@dataclass(frozen=True)
class ChunkSchedule:
    """A hierarchical All-Reduce schedule: how each chunk orders the dimensions. ``balance``:
    Themis's greedy (else the fixed baseline order). Each dimension then runs a collective."""

    name: str
    balance: bool
    reference: bool = False  # what comparisons measure other schedules against
    is_flat: ClassVar[bool] = False  # a schedule runs per dimension, never as one flat group
    takes_semantics: ClassVar[bool] = True  # plan() accepts ``semantics=``

    def plan(self, dim_sizes: Sequence[int], dim_bandwidths: Sequence[float],
             total_bytes: int, chunks: int, align: int = 1,
             semantics: str = DEFAULT_SEMANTICS) -> list[ChunkPlan]:
        """The chunks of one All-Reduce of ``total_bytes`` (see :func:`plan`)."""
        sizes, bandwidths = validate_shape(dim_sizes, dim_bandwidths)
        check_semantics(semantics)
        astra = semantics == ASTRA_SIM_1_0
        active = tuple(d for d, n in enumerate(sizes) if n > 1)
        greedy = OfflineGreedy(sizes, bandwidths, semantics=semantics) if self.balance else None
        plans = []
        for index, size in enumerate(split_sizes(total_bytes, chunks, align)):
            order = tuple(greedy.order(size)) if greedy is not None else active
            plans.append(ChunkPlan(index=index, size=size, rs_order=order,
                                   split_last=astra and self.balance and len(order) > 0))
        return plans

    def replay_orderer(self, dim_sizes: Sequence[int],
                       dim_bandwidths: Sequence[float]) -> OfflineGreedy | None:
        """How the training replay orders chunks (see ``docs/extending.md``): ``themis`` the
        greedy in ASTRA-sim 1.0's whole-byte arithmetic, ``baseline`` None (the fixed order)."""
        if not self.balance:
            return None
        return OfflineGreedy(dim_sizes, dim_bandwidths, whole_bytes=True)


BASELINE = ChunkSchedule("baseline", balance=False, reference=True)
THEMIS = ChunkSchedule("themis", balance=True)


def plan(
    dim_sizes: Sequence[int],
    dim_bandwidths: Sequence[float],
    total_bytes: int,
    chunks: int,
    policy: str = "themis",
    align: int = 1,
    semantics: str = DEFAULT_SEMANTICS,
) -> list[ChunkPlan]:
    """Plan the chunks of one All-Reduce of ``total_bytes`` over the given network.

    ``dim_bandwidths`` is per host per dimension, in any unit (only ratios matter).
    ``policy`` names a schedule of :data:`~testbed.core.registry.SCHEDULES`.
    ``align``: chunk sizes are multiples of it, see :func:`split_sizes`.
    ``semantics``: ``astra-sim-1.0`` or ``fabriclab`` (see the module docstring); a
    registered schedule that does not take it plans the same under both.
    Returns one :class:`ChunkPlan` per chunk, in index order.
    """
    validate_shape(dim_sizes, dim_bandwidths)
    check_semantics(semantics)
    if policy not in SCHEDULES.names():
        raise FabricLabError(f"policy {policy!r} is unknown; use one of "
                             f"{', '.join(SCHEDULES.names())}")
    return plan_with(SCHEDULES.get(policy), dim_sizes, dim_bandwidths, total_bytes, chunks,
                     align, semantics)


def plan_with(schedule: object, dim_sizes: Sequence[int], dim_bandwidths: Sequence[float],
              total_bytes: int, chunks: int, align: int = 1,
              semantics: str = DEFAULT_SEMANTICS) -> list[ChunkPlan]:
    """Plan with a schedule object, passing ``semantics`` only to schedules that take it."""
    if getattr(schedule, "takes_semantics", False):
        return schedule.plan(dim_sizes, dim_bandwidths, total_bytes, chunks,  # type: ignore[attr-defined]
                             align, semantics=semantics)
    return schedule.plan(dim_sizes, dim_bandwidths, total_bytes, chunks, align)  # type: ignore[attr-defined]


def chunk_offsets(plans: Sequence[ChunkPlan]) -> list[int]:
    """Byte offset of each chunk in the buffer (chunks are laid out in index order)."""
    offsets = []
    at = 0
    for p in plans:
        offsets.append(at)
        at += p.size
    return offsets


def bytes_sent_per_dim(
    plans: Sequence[ChunkPlan], dim_sizes: Sequence[int]
) -> list[float]:
    """Bytes each host sends on each dimension over the whole collective (RS + AR + AG).

    A ring Reduce-Scatter of s bytes sends s(n-1)/n per host, the All-Gather back the same,
    and the All-Reduce on the last dimension both together.
    """
    sent = [0.0] * len(dim_sizes)
    for p in plans:
        s = float(p.size)
        for d in p.rs_order:
            n = dim_sizes[d]
            sent[d] += phase_sent_bytes("AR", s, n)
            s /= n
    return sent

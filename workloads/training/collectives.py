"""The chunks of one collective as ASTRA-sim 1.0 cuts and orders them, as phases for the chunk
schedule engine (:mod:`workloads.schedule_engine`).

A collective of ``S`` bytes is cut into chunks of ``S // splits`` bytes (the last may be
smaller). Each chunk runs one phase per involved dimension of more than one NPU:

* Reduce-Scatter, All-Gather, All-to-All: that collective on each dimension in turn, dimensions
  ascending (All-Gather: descending);
* All-Reduce under ``localBWAware``: Reduce-Scatter down all but the last dimension of its
  order, All-Reduce on the last, All-Gather back; when the order's ``split_last`` says so
  (Themis's), Reduce-Scatter on every dimension and All-Gather back on every one.

The order comes from the job's chunk schedule (``ReplaySystem.inter``, a name in
:data:`~testbed.core.registry.SCHEDULES`): its ``replay_orderer`` gives an orderer
(:class:`ChunkOrderer`) that the replay asks for every chunk but an All-to-All's, a fresh one
whenever a collective is made at a later time than the previous one; None (``baseline``) keeps
the fixed order above. ``themis``'s is :class:`~workloads.offline_greedy.OfflineGreedy` in
ASTRA-sim 1.0's arithmetic (sizes in whole bytes, divided down as ASTRA-sim divides them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from testbed.core.algorithms import replay_error
from testbed.core.astra_units import ASTRA_GBYTE_BYTES
from testbed.core.errors import FabricLabError
from testbed.core.registry import COLLECTIVES
from workloads import astra1_clock
from workloads.schedule_engine import Phase
from workloads.training.model import ALLGATHER, ALLREDUCE, ALLTOALL, REDUCESCATTER
from workloads.training.platform import LogicalDim, ReplaySystem

OP_OF_KIND = {REDUCESCATTER: "RS", ALLGATHER: "AG", ALLTOALL: "A2A", ALLREDUCE: "AR"}


class ChunkOrderer(Protocol):
    """What a chunk schedule's ``replay_orderer`` returns (docs/extending.md): the order of
    each chunk the replay cuts, asked chunk by chunk. An optional ``split_last`` attribute
    (default False) runs its All-Reduce chunks as Reduce-Scatters and All-Gathers only."""

    def order(self, size_bytes: int, involved: Sequence[bool], gather: bool) -> Sequence[int]:
        ...


def replay_orderer(schedule: Any, name: str, dims: Sequence[LogicalDim]) -> ChunkOrderer | None:
    """A fresh orderer of ``schedule`` (registered as ``name``) for ``dims``, at their sizes and
    bandwidths; None: every chunk in the fixed order. A schedule without ``replay_orderer``
    is refused in one sentence."""
    if problem := replay_error(schedule, name):
        raise FabricLabError(problem)
    return schedule.replay_orderer([d.size for d in dims], [d.gbyte_s for d in dims])


@dataclass(frozen=True)
class ChunkSpec:
    """One chunk before it gets a global index: ``(op, logical dim, input bytes)`` per phase."""

    size: int
    steps: tuple[tuple[str, int, int], ...]


def chunk_specs(kind: str, size_bytes: int, involved: Sequence[bool],
                dims: Sequence[LogicalDim], system: ReplaySystem,
                orderer: ChunkOrderer | None) -> list[ChunkSpec]:
    """The chunks of a ``kind`` collective of ``size_bytes`` on the ``involved`` logical
    dimensions (none when no involved dimension has more than one NPU), each in the order
    ``orderer`` gives it (None, and always for an All-to-All: ascending, an All-Gather
    descending)."""
    n_dims = len(dims)
    recommended = max(1, size_bytes // system.splits)
    left = size_bytes
    ordered = orderer is not None and kind != ALLTOALL
    split_last = ordered and bool(getattr(orderer, "split_last", False))
    gather = kind == ALLGATHER
    out = []
    while left > 0:
        chunk = min(recommended, left)
        order = list(range(n_dims))
        if gather:
            order.reverse()
        if ordered:
            order = list(orderer.order(recommended, involved, gather))
        left -= chunk
        live = [d for d in order if involved[d] and dims[d].size > 1]
        if not live:
            return []
        out.append(ChunkSpec(chunk, tuple(_steps(kind, chunk, live, dims, system,
                                                 split_last))))
    return out


def _steps(kind: str, chunk: int, live: list[int], dims: Sequence[LogicalDim],
           system: ReplaySystem, split_last: bool) -> list[tuple[str, int, int]]:
    steps = []
    size = chunk
    if kind != ALLREDUCE or not system.localbw:
        op = OP_OF_KIND[kind]
        for d in live:
            steps.append((op, d, size))
            size = _after(op, size, dims[d].size)
        return steps
    down = live if split_last else live[:-1]
    for d in down:
        steps.append(("RS", d, size))
        size //= dims[d].size
    if not split_last:
        steps.append(("AR", live[-1], size))
    for d in reversed(down):
        steps.append(("AG", d, size))
        size *= dims[d].size
    return steps


def _after(op: str, size: int, n: int) -> int:
    if op == "RS":
        return size // n
    if op == "AG":
        return size * n
    return size


def phases(spec: ChunkSpec, chunk_index: int, kind: str, dims: Sequence[LogicalDim],
           system: ReplaySystem) -> list[Phase]:
    """The engine's phases of one chunk; ``sent`` is chosen so that ``sent`` over the dimension's
    :func:`phase_rate` is the phase's transfer time."""
    impl = system.implementations or {}
    out = []
    for index, (op, d, size) in enumerate(spec.steps):
        dim = dims[d]
        n = dim.size
        if op == "A2A":
            sent, steps = _all_to_all(impl.get(kind, ("direct",) * 99)[dim.physical], dim, size)
        else:
            collective = COLLECTIVES.get(impl.get(kind, ("ring",) * 99)[dim.physical])
            sent = Fraction(collective.sent_bytes(op, n, Fraction(size)))
            steps = collective.step_count(op, n)
        out.append(Phase(chunk_index, index, d, op, Fraction(size), sent, steps))
    return out


def _all_to_all(implementation: str, dim: LogicalDim, size: int) -> tuple[Fraction, int]:
    """(bytes at the NPU's rate, steps) of an All-to-All phase of ``size`` bytes. ``direct``
    sends its ``n-1`` messages of ``size/n`` at once and the analytical network lets each run at
    one link's full rate: one message's time (on a fully connected dimension a link has
    ``1/(n-1)`` of the NPU's bandwidth). ``ring`` sends ``n(n-1)/2`` such messages one after the
    other."""
    n = dim.size
    message = Fraction(size, n) * dim.links  # at the NPU's rate: a link has 1/links of it
    if implementation == "ring":
        return message * n * (n - 1) / 2, n * (n - 1) // 2
    return message, 1


def astra1_reduction_ns(op: str, size: Fraction, kind: str, dim: LogicalDim,
                        system: ReplaySystem) -> int:
    """ASTRA-sim 1.0's local reduction time of one Reduce-Scatter or All-Reduce phase of
    ``size`` bytes per NPU (:func:`workloads.astra1_clock.reduction_ns`)."""
    impl = (system.implementations or {}).get(kind, ("ring",) * 99)[dim.physical]
    return astra1_clock.reduction_ns(op, size, dim.size, impl)


def astra1_transfer_ns(op: str, size: Fraction, kind: str, dim: LogicalDim,
                       system: ReplaySystem, rate: Fraction) -> int:
    """ASTRA-sim 1.0's time on the wire of one Reduce-Scatter, All-Gather or All-Reduce phase
    at ``rate`` bytes per ns, latencies and reduction left out
    (:func:`workloads.astra1_clock.wire_ns`)."""
    impl = (system.implementations or {}).get(kind, ("ring",) * 99)[dim.physical]
    steps = astra1_clock.step_bytes(COLLECTIVES.get(impl), op, dim.size, size)
    return astra1_clock.wire_ns(steps, rate)


def local_reduction_ns(op: str, size: Fraction, kind: str, dim: LogicalDim,
                       system: ReplaySystem) -> int:
    """ASTRA-sim 2.x's local-memory time of one Reduce-Scatter or All-Reduce phase on a ring:
    each of its ``n-1`` reducing messages (``size // n`` bytes) is written once and read twice
    at ``local-mem-bw``, each pass rounded down to whole ns. 0 without ``local-mem-bw``, for
    other phases and on other implementations (not charged there)."""
    gbyte_s = system.local_mem_gbyte_s
    impl = (system.implementations or {}).get(kind, ("ring",) * 99)[dim.physical]
    if gbyte_s is None or op not in ("RS", "AR") or impl != "ring" or dim.size < 2:
        return 0
    message = int(size) // dim.size
    one_pass = int(message / (gbyte_s * 1e9) * 1e9)  # as 2.x computes it, in doubles
    return (dim.size - 1) * 3 * one_pass


def phase_rate(dim: LogicalDim, kind: str, op: str, system: ReplaySystem) -> Fraction:
    """Bytes per ns a phase of ``op`` moves in ``dim`` (the NPU's bandwidth there, times the
    share of it the dimension's collective can use)."""
    rate = Fraction(dim.gbyte_s) * ASTRA_GBYTE_BYTES / 10**9
    if op == "A2A":
        return rate
    impl = system.implementations or {}
    collective = COLLECTIVES.get(impl.get(kind, ("ring",) * 99)[dim.physical])
    if dim.links == 1:
        return rate
    # a fully connected dimension: the collective uses some of the NPU's links at once
    return rate * Fraction(min(collective.links_at_once(dim.size), dim.links), dim.links)

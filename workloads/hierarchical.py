"""Chunked hierarchical All-Reduce over a multi-dimensional network (baseline or Themis plans).

Ranks are numbered mixed-radix over ``dims`` with dimension 0 fastest: rank ``r`` has
coordinate ``c_d = (r // prod(dims[:d])) % dims[d]``. A dimension-``d`` group is the ``dims[d]``
ranks that differ only in ``c_d``, at positions ``c_d``; each phase runs the dimension's
collective (:mod:`workloads.collectives`, ring by default) over that group.

Each chunk (from :func:`workloads.themis.plan`) Reduce-Scatters through its ``rs_order``
(after RS on ``d`` the rank keeps the shard matching ``c_d``), All-Reduces on the last
dimension of that order and All-Gathers back in ``ag_order``. Dimensions run concurrently,
each on its own links; a dimension serves at most ``max_active`` chunk phases at a time.

Deadlock freedom: every member of a group must serve the dimension's phases in the *same*
order. :func:`schedule` derives that order from the plan alone, by running the chunk-schedule
engine (:mod:`workloads.schedule_engine`) exactly (Fractions) on the bandwidth model with
deterministic tie-breaks, so every rank computes the identical per-``(dimension, slot)``
sequence. The executor runs each sequence in order on
its own thread, waiting only for the phase's predecessor within its chunk. Because the
simulated schedule is feasible (a phase starts after its predecessor ends), the phase with the
earliest simulated start among the unfinished ones can always proceed, so execution never
deadlocks, whatever the real timing.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from testbed.core.errors import FabricLabError
from testbed.core.topology import coords_of, index_of
from workloads.astra1_clock import tie_ns
from workloads.collectives import Collective, Group, shard_bounds
from workloads.collectives.ring import COLLECTIVE as RING
from workloads.schedule_engine import (
    ASTRA_SIM_1_0,
    DEFAULT_SEMANTICS,
    ORDERS,
    ChunkEngine,
    Phase,
    check_order,
    chunk_phases,
    run_analytic,
)
from workloads.transports import CollectiveError, CollectiveTimeout, PeerLink

__all__ = ["ORDERS", "Phase", "Schedule", "Topology", "chunk_phases", "run_hierarchical",
           "schedule"]


@dataclass(frozen=True)
class Topology:
    """The mixed-radix host numbering over ``dims`` (dimension 0 fastest)."""

    dims: tuple[int, ...]

    @property
    def world(self) -> int:
        return math.prod(self.dims)

    def coords(self, rank: int) -> tuple[int, ...]:
        return coords_of(rank, self.dims)

    def rank_of(self, coords: Sequence[int]) -> int:
        return index_of(coords, self.dims)

    def neighbour(self, rank: int, dim: int, delta: int) -> int:
        """The rank ``delta`` positions along the dimension-``dim`` ring from ``rank``."""
        return self.member(rank, dim, self.coords(rank)[dim] + delta)

    def member(self, rank: int, dim: int, pos: int) -> int:
        """The rank at position ``pos`` (mod the size) of ``rank``'s dimension-``dim`` group."""
        c = list(self.coords(rank))
        c[dim] = pos % self.dims[dim]
        return self.rank_of(c)


@dataclass(frozen=True)
class Schedule:
    """The per-chunk phases and, per ``(dimension, slot)``, the order every rank serves them."""

    chunks: tuple[tuple[Phase, ...], ...]
    sequences: dict[tuple[int, int], tuple[Phase, ...]]


def schedule(
    plans: Sequence, dims: Sequence[int], bandwidths: Sequence[float] | None = None,
    order: str = "fifo", max_active: int = 1, collective: Collective | None = None,
    semantics: str = DEFAULT_SEMANTICS,
) -> Schedule:
    """Run the plan through the chunk-schedule engine (exactly) and return the service orders.

    A phase of ``collective`` (default ring) on a dimension with per-host bandwidth ``B``
    lasts ``sent/B`` (slots of one dimension are modelled as independent, for ordering only).
    Only the plan, ``dims``, ``bandwidths``, ``order``, ``max_active`` and the collective
    matter, so every rank gets the same result.
    """
    try:
        check_order(order)
    except FabricLabError as exc:
        raise CollectiveError(str(exc)) from None
    bw = [Fraction(b) for b in (bandwidths or [1.0] * len(dims))]
    chunks = tuple(tuple(chunk_phases(p, dims, collective)) for p in plans)
    engine = ChunkEngine(chunks, len(dims), order, max_active, semantics=semantics)
    sequences: dict[tuple[int, int], list[Phase]] = defaultdict(list)
    tie = (tie_ns([collective or RING] * len(dims), dims, [b / 8 for b in bw])
           if semantics == ASTRA_SIM_1_0 else None)  # the model's tie order (bit/s to bytes/s)
    for run in run_analytic(engine, lambda ph: ph.sent / bw[ph.dim], tie):
        sequences[(run.phase.dim, run.slot)].append(run.phase)
    return Schedule(chunks, {k: tuple(v) for k, v in sequences.items()})


@dataclass(frozen=True)
class PhaseRecord:
    """What one rank did in one chunk phase (for traces): ``nbytes`` is the larger of its
    input and output, ``group`` the ranks it ran among, ``sent_bytes`` what this rank sent
    (the collective's own count, :meth:`~workloads.collectives.Collective.sent_bytes`)."""

    coll: int
    chunk: int
    phase: int
    dim: int
    op: str
    nbytes: int
    start: float
    end: float
    group: int
    sent_bytes: int


def trace_sent_bytes(collective: Collective, op: str, n: int, nbytes: int) -> int:
    """Bytes one rank sends in phase ``op`` over ``n`` ranks whose larger side (an
    All-Gather's output, else its input) is ``nbytes``: a traced phase's ``sent_bytes``."""
    return round(collective.sent_bytes(op, n, nbytes / n if op == "AG" else nbytes))


def phase_segments(
    phases: Sequence[Phase], offset: int, count: int, coords: Sequence[int], dims: Sequence[int]
) -> list[tuple[int, int]]:
    """Element range of the buffer each phase of one chunk works on, for this rank."""
    seg = (offset, offset + count)
    stack: list[tuple[int, int]] = []
    out = []
    for ph in phases:
        if ph.op == "RS":
            out.append(seg)
            stack.append(seg)
            lo, hi = shard_bounds(seg[1] - seg[0], dims[ph.dim])[coords[ph.dim]]
            seg = (seg[0] + lo, seg[0] + hi)
        elif ph.op == "AR":
            out.append(seg)
        else:
            seg = stack.pop()
            out.append(seg)
    return out


def run_hierarchical(
    buf: np.ndarray,
    coll: int,
    plans: Sequence,
    sched: Schedule,
    topo: Topology,
    rank: int,
    links: dict[tuple[int, int], PeerLink],
    deadline: float,
    abort: Callable[[], None] = lambda: None,
    record: Callable[[PhaseRecord], None] | None = None,
    collective: Collective | None = None,
    ready: Mapping[int, threading.Event] | None = None,
) -> None:
    """All-Reduce ``buf`` in place following ``plans`` and ``sched``; raise on any failure.

    Every phase runs ``collective`` (default ring) in its dimension's group; ``links`` holds,
    per ``(dimension, slot)``, its :meth:`~Collective.link_roles` links at link slots
    ``slot·k .. slot·k+k-1`` (:func:`group_links`).
    ``plans`` sizes are bytes and must be multiples of the element size. ``deadline`` is a
    ``time.monotonic()`` instant; ``abort`` wakes the transport's blocked transfers when one
    executor fails so the others stop at once. ``ready``: per chunk, an event its first
    phase waits for (a chunk of a collective not issued yet; the deadline applies).
    """
    collective = collective or RING
    coords = topo.coords(rank)
    item = buf.itemsize
    segments: dict[int, list[tuple[int, int]]] = {}
    offset = 0
    for p, phases in zip(plans, sched.chunks, strict=True):
        if p.size % item:
            raise CollectiveError(f"chunk {p.index} has {p.size} bytes, not whole elements")
        segments[p.index] = phase_segments(phases, offset, p.size // item, coords, topo.dims)
        offset += p.size // item
    if offset != buf.size:
        raise CollectiveError(f"the plan covers {offset} elements but the buffer has {buf.size}")
    done = {(ph.chunk, ph.index): threading.Event() for phases in sched.chunks for ph in phases}
    failed = threading.Event()
    errors: list[BaseException] = []

    def wait_for(ph: Phase) -> None:
        if ph.index == 0:
            if ready is None or ph.chunk not in ready:
                return
            ev = ready[ph.chunk]
        else:
            ev = done[(ph.chunk, ph.index - 1)]
        while not ev.wait(0.05):
            if failed.is_set():
                raise _Aborted
            if time.monotonic() > deadline:
                raise CollectiveTimeout(
                    f"rank {rank}: collective {coll} did not finish before its deadline "
                    f"(chunk {ph.chunk} phase {ph.index} still waiting); a peer is stalled"
                )

    def serve(key: tuple[int, int], seq: Sequence[Phase]) -> None:
        d, slot = key
        n = topo.dims[d]
        group = Group(coords[d], n, group_links(links, d, slot, collective.link_count(n)))
        run = {"RS": collective.reduce_scatter, "AR": collective.all_reduce,
               "AG": collective.all_gather}
        try:
            for ph in seq:
                wait_for(ph)
                lo, hi = segments[ph.chunk][ph.index]
                view = buf[lo:hi]
                start = time.monotonic()
                run[ph.op](group, view, coll, ph.chunk, ph.index)
                end = time.monotonic()
                if record is not None:
                    record(PhaseRecord(coll, ph.chunk, ph.index, d, ph.op, view.nbytes,
                                       start, end, n,
                                       trace_sent_bytes(collective, ph.op, n, view.nbytes)))
                done[(ph.chunk, ph.index)].set()
        except _Aborted:
            return
        except BaseException as exc:
            errors.append(exc)
            failed.set()
            abort()

    threads = [
        threading.Thread(target=serve, args=(key, seq), name=f"dim{key[0]}slot{key[1]}")
        for key, seq in sorted(sched.sequences.items())
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        primary = [e for e in errors if getattr(e, "kind", "") != "peer_lost"] or errors
        raise primary[0]


def group_links(links: dict[tuple[int, int], PeerLink], channel: int, slot: int,
                k: int) -> tuple[PeerLink, ...]:
    """The ``k`` links of one group slot: link slots ``slot·k .. slot·k+k-1`` of ``channel``."""
    return tuple(links[(channel, slot * k + i)] for i in range(k))


class _Aborted(Exception):
    """Another executor failed; this one just stops."""

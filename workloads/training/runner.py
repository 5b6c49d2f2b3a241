"""The clock and the network side of a replay: collectives issued at the current time, cut into
chunks (:mod:`.collectives`) whose phases share each logical dimension's queue in the chunk
schedule engine (``astra-sim-1.0`` semantics, one phase per dimension at a time, ordered by the
system's intra-dimension policy and, between collectives, by priority). A collective finishes
when its last chunk does and counts as done ``update_ns`` later.

Subclasses drive it: they issue collectives, schedule wake-ups (:meth:`CollectiveRunner.at`
with :data:`WAKE`) and hear of done collectives (:meth:`CollectiveRunner.collective_done`).
Times are exact (:class:`fractions.Fraction` ns).
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from workloads.schedule_engine import ASTRA_SIM_1_0, ChunkEngine, Phase
from workloads.training.collectives import (
    ChunkOrderer,
    astra1_reduction_ns,
    astra1_transfer_ns,
    chunk_specs,
    local_reduction_ns,
    phase_rate,
    phases,
    replay_orderer,
)
from workloads.training.platform import LogicalDim, ReplaySystem

PHASE_DONE, COLLECTIVE_DONE, WAKE = 0, 1, 2  # event kinds, in the order one instant runs them
HIGHEST = 100_000_000  # ASTRA-sim's priority for its HIGHEST policy


@dataclass
class CollectiveRecord:
    """One collective as it ran (ns)."""

    layer: str
    stage: str  # fwd | ig | wg (a workload file), or the trace node's kind
    kind: str
    size_bytes: int
    dims: tuple[int, ...]
    issued_ns: Fraction
    chunks: int
    finished_ns: Fraction | None = None
    done_ns: Fraction | None = None  # finished + the update time


@dataclass
class ScheduleLog:
    """What a run did, for replaying it in real time: per chunk id its collective and phases,
    and every phase in the order it started."""

    chunks: dict[int, tuple[int, tuple[Phase, ...]]] = field(default_factory=dict)
    started: list[Phase] = field(default_factory=list)


class CollectiveRunner:
    """Collectives on ``dims`` under ``system``, and the event clock. Reducing phases take
    ASTRA-sim 1.0's local reduction time
    (:func:`~workloads.training.collectives.astra1_reduction_ns`); a subclass that sets
    :attr:`charges_local_memory` takes ASTRA-sim 2.x's instead
    (:func:`~workloads.training.collectives.local_reduction_ns`)."""

    charges_local_memory = False

    def __init__(self, dims: Sequence[LogicalDim], system: ReplaySystem) -> None:
        self.dims = tuple(dims)
        self.system = system
        self.engine = ChunkEngine([], len(self.dims), order=system.intra,
                                  semantics=ASTRA_SIM_1_0)
        self.schedule = system.chunk_schedule()
        # the schedule's orderer for the collectives made at ``orderer_made_at`` (a fresh one
        # for every later time, as ASTRA-sim resets its greedy's loads)
        self.orderer: ChunkOrderer | None = None
        self.orderer_made_at: Fraction | None = None
        self.rates: dict[tuple[int, str, str], Fraction] = {}
        self.now = Fraction(0)
        self.events: list = []
        self.seq = itertools.count()
        self.chunk_ids = itertools.count()
        self.priority_counter = 0
        self.chunk_owner: dict[int, int] = {}
        self.chunks_left: dict[int, int] = {}
        self.update_ns: dict[int, Fraction] = {}
        self.records: list[CollectiveRecord] = []
        self.busy = [Fraction(0)] * len(self.dims)
        self.spans: list[list[tuple[Fraction, Fraction]]] = [[] for _ in self.dims]
        # with ``log``: every chunk's phases (by chunk id) and the phases in the order they
        # started, what a real-time replay executes (workloads.training.emulated)
        self.log: ScheduleLog | None = None

    def at(self, when: Fraction, kind: int, payload: object) -> None:
        """Schedule an event; events of one instant run by kind (:data:`PHASE_DONE` first),
        then in the order they were scheduled, so phases that finish together are handled in
        the order they started (as ASTRA-sim's event queue does)."""
        heapq.heappush(self.events, (when, kind, next(self.seq), payload))

    def run_events(self) -> None:
        while self.events:
            when, kind, _, payload = heapq.heappop(self.events)
            self.now = when
            if kind == PHASE_DONE:
                self._phase_done(*payload)
            elif kind == COLLECTIVE_DONE:
                self.records[payload].done_ns = self.now
                self.collective_done(payload)
            else:
                self.wake(payload)

    def wake(self, payload: object) -> None:
        """A :data:`WAKE` event the subclass scheduled."""

    def collective_done(self, key: int) -> None:
        """Collective ``key`` (an index into :attr:`records`) is done."""

    def priority(self, policy: str) -> int:
        """ASTRA-sim's priority of a collective issued with ``policy`` (LIFO, FIFO, HIGHEST or
        None for the system's ``scheduling-policy``): a counter LIFO takes and increments,
        FIFO takes and decrements."""
        if policy == "HIGHEST":
            return HIGHEST
        lifo = policy == "LIFO" or (policy == "None" and self.system.lifo)
        value = self.priority_counter
        self.priority_counter += 1 if lifo else -1
        return value

    def issue_collective(self, kind: str, size_bytes: int, involved: Sequence[bool],
                         priority: int, update_ns: Fraction, layer: str, stage: str
                         ) -> int | None:
        """Issue a ``kind`` collective of ``size_bytes`` on the ``involved`` logical
        dimensions now; its record's index, or None when no involved dimension has more than
        one NPU (nothing to run)."""
        if self.schedule is not None and self.orderer_made_at != self.now:
            self.orderer = replay_orderer(self.schedule, str(self.system.inter), self.dims)
            self.orderer_made_at = self.now
        specs = chunk_specs(kind, size_bytes, involved, self.dims, self.system, self.orderer)
        if not specs:
            return None
        dims = tuple(d for d, on in enumerate(involved) if on and self.dims[d].size > 1)
        self.records.append(CollectiveRecord(layer, stage, kind, size_bytes, dims, self.now,
                                             len(specs)))
        key = len(self.records) - 1
        self.chunks_left[key] = len(specs)
        self.update_ns[key] = update_ns
        for cs in specs:
            cid = next(self.chunk_ids)
            self.chunk_owner[cid] = key
            chunk = phases(cs, cid, kind, self.dims, self.system)
            if self.log is not None:
                self.log.chunks[cid] = (key, tuple(chunk))
            self.engine.add(chunk, self.now, priority)
            self._start(self.engine.dispatch())
        return key

    def _duration(self, phase: Phase, kind: str) -> Fraction:
        key = (phase.dim, kind, phase.op)
        rate = self.rates.get(key)
        if rate is None:
            rate = self.rates[key] = phase_rate(self.dims[phase.dim], kind, phase.op,
                                                self.system)
        dim = self.dims[phase.dim]
        latency = dim.message_latency_ns(self.system.endpoint_delay_ns)
        if self.charges_local_memory:  # ASTRA-sim 2.x
            return phase.sent / rate + phase.steps * Fraction(latency) + local_reduction_ns(
                phase.op, phase.size, kind, dim, self.system)
        if phase.op == "A2A":  # ``steps`` messages of equal time, one after another
            wire = phase.steps * math.floor(phase.sent / phase.steps / rate) + 1
        else:
            wire = astra1_transfer_ns(phase.op, phase.size, kind, dim, self.system, rate)
        return wire + phase.steps * Fraction(latency) + astra1_reduction_ns(
            phase.op, phase.size, kind, dim, self.system)

    def _start(self, started: list[tuple[Phase, int]]) -> None:
        for phase, slot in started:
            if self.log is not None:
                self.log.started.append(phase)
            d = self._duration(phase, self.records[self.chunk_owner[phase.chunk]].kind)
            self.busy[phase.dim] += d
            self.spans[phase.dim].append((self.now, self.now + d))
            self.at(self.now + d, PHASE_DONE, (phase, slot))

    def _phase_done(self, phase: Phase, slot: int) -> None:
        self.engine.finish(phase, slot, self.now)
        self._start(self.engine.dispatch())
        if phase.index + 1 < len(self.engine.chunks[phase.chunk]):
            return
        key = self.chunk_owner.pop(phase.chunk)
        del self.engine.chunks[phase.chunk]
        self.chunks_left[key] -= 1
        if self.chunks_left[key] == 0:
            self.records[key].finished_ns = self.now
            self.at(self.now + self.update_ns.pop(key), COLLECTIVE_DONE, key)

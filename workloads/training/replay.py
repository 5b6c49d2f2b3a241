"""Replay a training workload with ASTRA-sim 1.0's semantics, event-driven and pure.

One NPU stands for all (ASTRA-sim's NPUs are identical and move in lock step). The workload
runs as a process (:func:`process`) that computes, issues collectives and waits for them, as
``Workload.cc`` / ``Layer.cc`` of ASTRA-sim 1.0 do for each workload type
(``docs/workload-replay.md`` says what each does). Collectives are cut into chunks
(:mod:`.collectives`) and the chunk phases share each logical dimension's queue in the one
chunk schedule engine (:class:`~workloads.schedule_engine.ChunkEngine`, ``astra-sim-1.0``
semantics, one phase per dimension at a time), ordered by the system file's
intra-dimension policy and, between collectives, by their priority. A collective finishes
when its last chunk does; the layer's update time later it counts as done.

Times are exact (:class:`fractions.Fraction` ns); compute is ASTRA-sim cycles at 1 GHz, and
every step of the workload's loop costs one more cycle, as in ASTRA-sim.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from testbed.core.astra_formats import AstraDim
from workloads.training.model import (
    ALLTOALL,
    DATA,
    DLRM_TYPES,
    HYBRID_DLRM,
    HYBRID_TRANSFORMER_FWD_IN_BCKWD,
    MICRO,
    TRANSFORMER_TYPES,
    Comm,
    Workload,
)
from workloads.training.platform import LogicalDim, ReplaySystem, logical_dims
from workloads.training.runner import WAKE, CollectiveRecord, CollectiveRunner

__all__ = ["CollectiveRecord", "Driver", "LayerStats", "ReplayResult", "process", "replay"]

FWD, IG, WG = "fwd", "ig", "wg"
LIFO, FIFO, NONE = "LIFO", "FIFO", "None"


@dataclass
class LayerStats:
    """Per layer: compute and time spent waiting for communication (ns), per stage."""

    name: str
    compute_ns: dict[str, Fraction] = field(default_factory=lambda: {FWD: Fraction(0),
                                                                      IG: Fraction(0),
                                                                      WG: Fraction(0)})
    waiting_ns: dict[str, Fraction] = field(default_factory=lambda: {FWD: Fraction(0),
                                                                      IG: Fraction(0),
                                                                      WG: Fraction(0)})


@dataclass
class ReplayResult:
    """What a replay found: ``finish_ns`` is ASTRA-sim's ``all passes finished at time``."""

    finish_ns: Fraction
    pass_end_ns: list[Fraction]
    layers: list[LayerStats]
    collectives: list[CollectiveRecord]
    dims: tuple[LogicalDim, ...]
    dim_busy_ns: list[Fraction]
    # when the workload waited for communication, when each logical dimension carried a
    # phase, and the compute done by the end of each pass (ns)
    waits: list[tuple[Fraction, Fraction]] = field(default_factory=list)
    dim_spans: list[list[tuple[Fraction, Fraction]]] = field(default_factory=list)
    pass_compute_ns: list[Fraction] = field(default_factory=list)

    @property
    def compute_ns(self) -> Fraction:
        return sum((sum(s.compute_ns.values(), Fraction(0)) for s in self.layers), Fraction(0))

    @property
    def exposed_ns(self) -> Fraction:
        """The layers' waits for communication inside the passes (ASTRA-sim's per-layer
        statistic); without the wait after the last pass: :attr:`exposed_total_ns`."""
        return sum((sum(s.waiting_ns.values(), Fraction(0)) for s in self.layers), Fraction(0))

    @property
    def drain_ns(self) -> Fraction:
        """From the end of the last pass's compute until its last collective is done: where
        a single data-parallel pass waits for all of its All-Reduces."""
        return self.finish_ns - self.pass_end_ns[-1] if self.pass_end_ns else Fraction(0)

    @property
    def exposed_total_ns(self) -> Fraction:
        """Every wait for communication: the layers' waits plus the drain after the last
        pass."""
        return self.exposed_ns + self.drain_ns


class _Replay(CollectiveRunner):
    def __init__(self, workload: Workload, network: Sequence[AstraDim], system: ReplaySystem,
                 passes: int) -> None:
        group = workload.model_parallel_group if workload.kind in TRANSFORMER_TYPES else None
        dims, boundary = logical_dims(network, group)
        super().__init__(dims, system)
        self.w = workload
        self.passes = passes
        n = len(self.dims)
        everything, nothing = (True,) * n, (False,) * n
        if workload.kind in TRANSFORMER_TYPES:
            model = tuple(d <= boundary for d in range(n))
            data = tuple(d > boundary for d in range(n))
            self.involved = {FWD: model, IG: model, WG: data}
        else:
            self.involved = {FWD: nothing, IG: nothing, WG: everything}
        self.first_layer_all = workload.kind in DLRM_TYPES
        self.owner: dict[int, tuple[int, str]] = {}
        self.in_flight = [{FWD: set(), IG: set(), WG: set()} for _ in workload.layers]
        self.stats = [LayerStats(layer.name) for layer in workload.layers]
        self.waiter: tuple[int, str] | None = None
        self.all_done_waiter = False
        self.pass_end: list[Fraction] = []
        self.pass_compute: list[Fraction] = []
        self.compute_total = Fraction(0)
        self.waits: list[tuple[Fraction, Fraction]] = []
        self.finish: Fraction | None = None
        self.issued: list[tuple[int, str, int | None]] = []  # every issue call, in order
        self.proc = process(self)
        self.wait_started = Fraction(0)

    def run(self) -> ReplayResult:
        self.wake(None)
        self.run_events()
        if self.finish is None:
            raise RuntimeError("the replay ended before the workload finished")
        return ReplayResult(self.finish, self.pass_end, self.stats, self.records, self.dims,
                            self.busy, self.waits, self.spans, self.pass_compute)

    def wake(self, _: object) -> None:
        try:
            command = next(self.proc)
        except StopIteration:
            return
        what, arg = command
        if what == "sleep":
            self.at(self.now + arg, WAKE, None)
        elif what == "wait":
            self.waiter = arg
            self.wait_started = self.now
            self.check_waiter()
        elif what == "end":
            self.all_done_waiter = True
            self.wait_started = self.now
            self.check_end()

    def check_waiter(self) -> None:
        if self.waiter is None:
            return
        layer, stage = self.waiter
        if self.in_flight[layer][stage]:
            return
        self.waiter = None
        if self.now > self.wait_started:
            self.stats[layer].waiting_ns[stage] += self.now - self.wait_started
            self.waits.append((self.wait_started, self.now))
        self.at(self.now, WAKE, None)

    def check_end(self) -> None:
        if self.all_done_waiter and not any(
                s for flights in self.in_flight for s in flights.values()):
            self.all_done_waiter = False
            self.finish = self.now
            if self.now > self.wait_started:
                self.waits.append((self.wait_started, self.now))

    def issue(self, layer: int, stage: str, policy: str) -> bool:
        """Issue the layer's ``stage`` collective; False when it has none to run."""
        spec = self.w.layers[layer]
        comm: Comm = {FWD: spec.fwd_comm, IG: spec.ig_comm, WG: spec.wg_comm}[stage]
        if not comm.active:
            self.issued.append((layer, stage, None))
            return False
        pri = self.priority(policy)
        involved = (True,) * len(self.dims) if (self.first_layer_all and layer == 0) \
            else self.involved[stage]
        key = self.issue_collective(comm.kind, comm.size_bytes, involved, pri,
                                    Fraction(spec.update_cycles), spec.name, stage)
        self.issued.append((layer, stage, key))
        if key is None:
            return False
        self.owner[key] = (layer, stage)
        self.in_flight[layer][stage].add(key)
        return True

    def collective_done(self, key: int) -> None:
        layer, stage = self.owner.pop(key)
        self.in_flight[layer][stage].discard(key)
        self.check_waiter()
        self.check_end()


Command = tuple[str, object]


class Driver(Protocol):
    """What :func:`process` drives: the event-driven :class:`_Replay` here, or a real-time
    runner (:mod:`workloads.training.realtime`)."""

    w: Workload
    passes: int
    stats: list[LayerStats]
    pass_end: list[Fraction]
    pass_compute: list[Fraction]
    compute_total: Fraction
    now: Fraction

    def issue(self, layer: int, stage: str, policy: str) -> bool: ...


def process(r: Driver) -> Generator[Command, None, None]:
    """The workload's loop, one generator per type; it yields ``("sleep", ns)``,
    ``("wait", (layer, stage))`` (until the layer's collectives of that stage are done) and
    finally ``("end", None)`` (until every collective is done)."""
    w = r.w
    kind = w.kind
    if kind == MICRO:
        for _ in range(r.passes):
            r.issue(0, WG, NONE)
        yield ("end", None)
        return
    body = {DATA: _data_pass, HYBRID_DLRM: _dlrm_pass}.get(kind)
    if kind in DLRM_TYPES:
        body = _dlrm_pass
    elif kind in TRANSFORMER_TYPES:
        body = _transformer_pass
    for _ in range(r.passes):
        yield from body(r)
        r.pass_end.append(r.now)
        r.pass_compute.append(r.compute_total)
    yield ("sleep", Fraction(1))
    yield ("end", None)


def _compute(r: Driver, layer: int, stage: str) -> Generator[Command, None, None]:
    spec = r.w.layers[layer]
    cycles = {FWD: spec.fwd_cycles, IG: spec.ig_cycles, WG: spec.wg_cycles}[stage]
    r.stats[layer].compute_ns[stage] += cycles
    r.compute_total += cycles
    if cycles > 0:
        yield ("sleep", Fraction(cycles))


TICK: Command = ("sleep", Fraction(1))


def _data_pass(r: Driver) -> Generator[Command, None, None]:
    n = len(r.w.layers)
    for i in range(n):
        yield ("wait", (i, WG))
        yield from _compute(r, i, FWD)
        yield TICK
    for i in reversed(range(n)):
        yield from _compute(r, i, WG)
        r.issue(i, WG, NONE)
        if i == 0:
            return
        yield TICK
        yield from _compute(r, i, IG)
        yield TICK


def _dlrm_pass(r: Driver) -> Generator[Command, None, None]:
    w = r.w
    n = len(w.layers)
    for i in range(n):
        yield ("wait", (i, WG))
        yield from _compute(r, i, FWD)
        if w.layers[i].fwd_comm.kind == ALLTOALL:
            r.issue(i, FWD, "HIGHEST")
        elif i == w.last_bottom_layer:
            yield ("wait", (0, FWD))
        yield TICK
    for i in reversed(range(n)):
        yield from _compute(r, i, WG)
        r.issue(i, WG, NONE)
        if w.kind == HYBRID_DLRM:
            yield ("wait", (i, IG))
        if i == 0:
            return
        yield TICK
        yield from _compute(r, i, IG)
        if i == w.last_bottom_layer + 1:
            r.issue(0, IG, "HIGHEST")
        yield TICK


def _forward(r: Driver, i: int) -> Generator[Command, None, None]:
    yield ("wait", (i, WG))
    yield from _compute(r, i, FWD)
    if r.issue(i, FWD, NONE):
        yield ("wait", (i, FWD))
    yield TICK


def _transformer_pass(r: Driver) -> Generator[Command, None, None]:
    w = r.w
    n = len(w.layers)
    for i in range(n):
        yield from _forward(r, i)
    recompute = w.kind == HYBRID_TRANSFORMER_FWD_IN_BCKWD
    for i in reversed(range(n)):
        if recompute and i in w.recompute_from:
            j = max(c for c in w.checkpoints if c <= i)
            yield TICK
            while True:  # recompute the forward pass from the checkpoint up to layer i
                yield from _forward(r, j)
                j += 1
                if j in w.recompute_from:
                    break
        yield from _compute(r, i, IG)
        r.issue(i, IG, LIFO)
        yield TICK
        yield from _compute(r, i, WG)
        r.issue(i, WG, FIFO)
        yield ("wait", (i, IG))
        if i > 0:
            yield TICK


def replay(workload: Workload, network: Sequence[AstraDim], system: ReplaySystem,
           passes: int = 1) -> ReplayResult:
    """Replay ``passes`` training passes of ``workload`` on ``network`` under ``system``."""
    return _Replay(workload, network, system, passes).run()

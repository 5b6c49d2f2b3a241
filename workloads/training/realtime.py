"""One pass of a training workload in real time: the replay's own workload loop
(:func:`workloads.training.replay.process`) driven by the wall clock.

``("sleep", ns)`` spends the compute (:class:`Compute`: sleep, or spin on small numpy work);
``issue`` hands the model's next collective (:class:`~workloads.training.emulated.PassPlan`:
the k-th issue call is the model's k-th) to the communication engine, which runs every
collective's chunk phases in the model's per-dimension order; ``("wait", (layer, stage))``
blocks until that layer's collectives of that stage are done, and ``("end", None)`` until
every collective is. A collective is done its layer's update time after its last chunk
finished (the waiter sleeps the rest). Time spent blocked counts as the layer's waiting time,
as in the model.

A Chakra trace's pass (:class:`TraceRealTime`) walks the trace's nodes in the order the
model issued them (``PassPlan.issued``): before a node is issued, every node it depends on and
the node last issued on its unit (GPU, CPU, communication) must have ended; a compute node
then ends ``duration_ns`` after that (the loop sleeps or spins only when something waits for
it), a collective node is handed to the communication engine and ends when its last chunk
finishes. Compute ends are counted from when the node could start, not from when the loop got
there, so a wait's overshoot is not added to the next step. The pass ends when every node
has; as in the simulator's row of a trace, its compute is its compute nodes' durations and
the rest of the pass is exposed communication.

The clock and the engine are parameters, so the loop runs against a fake clock in tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

import numpy as np

from workloads.hierarchical import PhaseRecord
from workloads.training.chakra import TraceNode, node_unit
from workloads.training.emulated import PassPlan
from workloads.training.model import Workload
from workloads.training.replay import LayerStats, process
from workloads.transports import CollectiveTimeout

NS = 1e9


class Compute:
    """Spends compute time by sleeping or busy-working; a wait's overshoot is taken off the
    next one (short sleeps overshoot, and it would pile up over many steps)."""

    def __init__(self, mode: str, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.mode = mode
        self.clock, self.sleep = clock, sleep
        self.debt = 0.0
        self.spent = 0.0
        self._a = np.ones((32, 32), dtype=np.float32)
        self._out = np.empty_like(self._a)

    def spend(self, seconds: float) -> None:
        if seconds <= 0:
            return
        begin = self.clock()
        target = seconds - self.debt
        if target > 0:
            self._to(begin + target, begin)
        took = self.clock() - begin
        self.debt = took - target
        self.spent += took

    def until(self, deadline: float) -> None:
        """Spend compute until the clock reads ``deadline`` (no overshoot carried: the caller
        counts from deadlines)."""
        begin = self.clock()
        if deadline > begin:
            self._to(deadline, begin)
            self.spent += self.clock() - begin

    def _to(self, end: float, now: float) -> None:
        if self.mode == "sleep":
            self.sleep(end - now)
        else:
            while self.clock() < end:
                np.dot(self._a, self._a, out=self._out)


class Engine(Protocol):
    """Runs the pass's collectives: :meth:`release` says collective ``key`` was issued; the
    engine calls the runner's :meth:`PassLoop.finished` when its last chunk is done."""

    def release(self, key: int) -> None: ...


@dataclass
class CollectiveTimes:
    """When one collective was issued and finished (clock seconds)."""

    issued: float | None = None
    finished: float | None = None


@dataclass
class PassResult:
    """One pass as it ran: clock seconds from its start, the compute spent, per layer the
    compute and waiting (ns) and per collective its times."""

    start: float
    compute_end: float
    end: float
    compute_s: float
    stats: list[LayerStats]
    collectives: list[CollectiveTimes] = field(default_factory=list)

    @property
    def time_s(self) -> float:
        return self.end - self.start

    waited_s: float = 0.0  # waiting outside any layer's waits (a Chakra trace's pass)
    # when the loop blocked for communication (clock seconds; a Chakra trace's pass: none)
    waits: list[tuple[float, float]] = field(default_factory=list)

    @property
    def waiting_s(self) -> float:
        """Blocked in the loop's waits (the model's waiting time)."""
        return float(sum((sum(s.waiting_ns.values(), Fraction(0)) for s in self.stats),
                         Fraction(0))) / NS + self.waited_s

    @property
    def exposed_s(self) -> float:
        """Exposed communication: the waits, and the end of the pass after its compute."""
        return self.waiting_s + self.end - self.compute_end


class PassLoop:
    """What both real-time loops share: the pass's collectives handed to ``engine``, when each
    was issued and finished, and blocking until some are done."""

    def __init__(self, plan: PassPlan, engine: Engine, compute: Compute,
                 clock: Callable[[], float], timeout_s: float) -> None:
        self.plan = plan
        self.engine = engine
        self.compute = compute
        self.clock = clock
        self.timeout_s = timeout_s
        self.times = [CollectiveTimes() for _ in plan.collectives]
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.start = 0.0

    def release(self, key: int) -> None:
        """Hand collective ``key`` to the engine now."""
        self.times[key].issued = self.clock()
        self.engine.release(key)

    def fail(self, exc: BaseException) -> None:
        """The engine failed (any thread): every wait raises ``exc``."""
        with self.cond:
            self.error = exc
            self.cond.notify_all()

    def finished(self, key: int, when: float) -> None:
        """Collective ``key``'s last chunk finished at ``when`` (any thread)."""
        with self.cond:
            self.times[key].finished = when
            self.cond.notify_all()

    def _wait(self, keys: list[int]) -> None:
        """Block until every collective of ``keys`` finished, then until its update time
        after that has passed."""
        deadline = self.clock() + self.timeout_s
        with self.cond:
            while any(self.times[k].finished is None for k in keys):
                if self.error is not None:
                    raise self.error
                if self.clock() > deadline:
                    raise CollectiveTimeout(f"a collective of the pass did not finish "
                                            f"within {self.timeout_s:g} s")
                self.cond.wait(0.05)
        done = max((self.done_at(k) for k in keys), default=0.0)  # type: ignore[type-var]
        if (left := done - self.clock()) > 0:
            self.compute.sleep(left)

    def run(self) -> PassResult:
        """Run the pass."""
        raise NotImplementedError

    def done_at(self, key: int) -> float | None:
        """When collective ``key`` is done (its update time after it finished), if it has."""
        t = self.times[key].finished
        return None if t is None else t + self.plan.collectives[key].update_ns / NS

    def last_done(self, floor: float) -> float:
        """The latest of ``floor`` and every finished collective's done time."""
        return max([floor, *(t for k in range(len(self.times))
                             if (t := self.done_at(k)) is not None)])


class RealTime(PassLoop):
    """Drives :func:`~workloads.training.replay.process` for one pass of ``workload`` (scaled
    as the plan was made) in real time (module doc); :meth:`run` returns the pass."""

    def __init__(self, workload: Workload, plan: PassPlan, engine: Engine, compute: Compute,
                 clock: Callable[[], float] = time.monotonic, timeout_s: float = 600.0) -> None:
        super().__init__(plan, engine, compute, clock, timeout_s)
        self.w = workload
        self.passes = 1
        self.stats = [LayerStats(layer.name) for layer in workload.layers]
        self.pass_end: list[Fraction] = []
        self.pass_compute: list[Fraction] = []
        self.compute_total = Fraction(0)
        self.calls = 0

    @property
    def now(self) -> Fraction:
        """ns since the pass started."""
        return Fraction(round((self.clock() - self.start) * NS))

    def issue(self, layer: int, stage: str, policy: str) -> bool:
        planned = self.plan.issued[self.calls]
        if planned[:2] != (layer, stage):
            raise RuntimeError(f"the pass issued layer {layer} {stage} where the model issued "
                               f"layer {planned[0]} {planned[1]}")
        self.calls += 1
        key = planned[2]
        if key is None:
            return False
        self.release(key)
        return True

    def _keys(self, layer: int | None, stage: str | None) -> list[int]:
        """The issued collectives of ``layer``'s ``stage`` (every issued one for None)."""
        return [k for k, c in enumerate(self.plan.collectives)
                if self.times[k].issued is not None
                and (layer is None or (c.layer, c.stage) == (layer, stage))]

    def run(self) -> PassResult:
        self.start = self.clock()
        compute_end = self.start
        waits: list[tuple[float, float]] = []
        for what, arg in process(self):
            if what == "sleep":
                self.compute.spend(float(arg) / NS)  # type: ignore[arg-type]
            elif what == "wait":
                layer, stage = arg  # type: ignore[misc]
                began = self.clock()
                self._wait(self._keys(layer, stage))
                ended = self.clock()
                if ended > began:
                    self.stats[layer].waiting_ns[stage] += Fraction(round((ended - began) * NS))
                    waits.append((began, ended))
            elif what == "end":
                compute_end = self.clock()
                self._wait(self._keys(None, None))
        end = self.last_done(compute_end)
        if end > compute_end:  # the pass's drain: waiting for its last collectives
            waits.append((compute_end, end))
        return PassResult(self.start, compute_end, end, self.compute.spent, self.stats,
                          self.times, waits=waits)


class TraceRealTime(PassLoop):
    """Walks one pass of a Chakra trace's ``nodes`` (scaled as the plan was made) in real
    time (module doc); :meth:`run` returns the pass."""

    def __init__(self, nodes: Sequence[TraceNode], plan: PassPlan, engine: Engine,
                 compute: Compute, clock: Callable[[], float] = time.monotonic,
                 timeout_s: float = 600.0) -> None:
        super().__init__(plan, engine, compute, clock, timeout_s)
        self.nodes = {n.id: n for n in nodes}
        self.key = {nid: key for nid, _, key in plan.issued}
        self.ends: dict[int, float] = {}  # a node not handed to the engine: when it ends
        self.compute_s = 0.0

    def _settle(self, ids: Sequence[int]) -> float:
        """Spend compute until the compute nodes of ``ids`` ended, then block until their
        collectives are done; when the last of them ended."""
        ahead = [self.ends[i] for i in ids if i in self.ends]
        self.compute.until(max(ahead, default=0.0))
        keys = [k for i in ids if i not in self.ends and (k := self.key[i]) is not None]
        self._wait(keys)
        return max([*ahead, *(self.done_at(k) for k in keys)],  # type: ignore[list-item]
                   default=self.start)

    def run(self) -> PassResult:
        self.start = self.clock()
        at = self.start  # when the node being issued could start (never before the last one)
        last_on: dict[str, int] = {}  # unit -> the node last issued on it
        for nid, _, key in self.plan.issued:
            node = self.nodes[nid]
            unit = node_unit(node)
            at = max(at, self._settle([*node.deps, *([last_on[unit]] if unit in last_on
                                                     else [])]))
            if unit is not None:
                last_on[unit] = nid
            if key is not None:
                self.release(key)
                continue
            seconds = node.duration_ns / NS if node.kind == "COMP_NODE" else 0.0
            self.ends[nid] = at + seconds
            self.compute_s += seconds
        end = self._settle(list(self.key))
        # as the simulator's row of a trace: the compute its nodes ran, the rest exposed
        return PassResult(self.start, end, end, self.compute_s, [], self.times,
                          waited_s=max(0.0, end - self.start - self.compute_s))


class ThreadEngine:
    """The real engine: ``execute(ready=, record=)`` runs every chunk of the pass (e.g.
    :func:`workloads.hierarchical.run_hierarchical` on the pass's buffer and links), each
    chunk's first phase waiting for its event in ``ready`` and every finished phase reported
    to ``record``; this runs it on a thread, sets a collective's chunk events when it is
    issued, and tells the runner when its last chunk finished (or that the pass failed)."""

    def __init__(self, plan: PassPlan,
                 execute: Callable[..., None]) -> None:
        self.plan = plan
        self.execute = execute
        self.ready = {cid: threading.Event() for c in plan.collectives for cid in c.chunk_ids}
        self.owner = {cid: key for key, c in enumerate(plan.collectives) for cid in c.chunk_ids}
        self.left = [len(c.chunk_ids) for c in plan.collectives]
        self.phases: list[list[PhaseRecord]] = [[] for _ in plan.collectives]
        self.lock = threading.Lock()
        self.runner: PassLoop | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="training-comm")

    def start(self, runner: PassLoop) -> None:
        self.runner = runner
        self.thread.start()

    def release(self, key: int) -> None:
        for cid in self.plan.collectives[key].chunk_ids:
            self.ready[cid].set()

    def _record(self, p: PhaseRecord) -> None:
        key = self.owner[p.chunk]
        with self.lock:
            self.phases[key].append(p)
            last = p.phase == len(self.plan.chunks[p.chunk]) - 1
            if last:
                self.left[key] -= 1
            finished = last and self.left[key] == 0
        if finished and self.runner is not None:
            self.runner.finished(key, p.end)

    def _run(self) -> None:
        try:
            self.execute(ready=self.ready, record=self._record)
        except BaseException as exc:
            self.error = exc
            if self.runner is not None:
                self.runner.fail(exc)

    def join(self, timeout_s: float) -> None:
        """Wait for the thread (raise its error)."""
        self.thread.join(timeout_s)
        if self.error is not None:
            raise self.error

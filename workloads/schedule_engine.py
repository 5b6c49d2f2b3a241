"""The one chunk-schedule engine of a hierarchical All-Reduce: which chunk phase each dimension
serves next. The model, the workers and the simulator all use it.

A chunk (a :class:`~workloads.themis.ChunkPlan`) runs its :class:`Phase` s one after the other:
Reduce-Scatter on ``rs_order[:-1]``, All-Reduce on ``rs_order[-1]``, All-Gather back in reverse
(or, for a plan with ``split_last``, Reduce-Scatter on every dimension of ``rs_order`` and
All-Gather back on every one: the last dimension then serves two separate phases). A phase
becomes *ready* when its predecessor in the chunk finishes. Every dimension has ``max_active``
slots (ASTRA-sim's ``active-chunks-per-dimension``). How a dimension queues its ready phases
depends on the *semantics* (:data:`SEMANTICS`, see ``docs/themis-semantics.md``):

``astra-sim-1.0`` (the default; the reference simulator's stream queues)
    each dimension keeps one ordered queue. A phase that becomes ready is *inserted*:

    * ``fifo``: at the back;
    * ``scf``: in front of the first waiting phase whose size (the larger of the bytes per
      host entering and leaving the phase) is at least its own, so the smallest is served
      first and a newcomer goes ahead of equal ones; but a phase with exactly one phase of its
      chunk after it, and every All-Reduce phase, goes to the back.

    A slot that frees is refilled at once from the head of its queue, before any other event
    of the same instant is handled (:attr:`ChunkEngine.eager`): a phase that becomes ready at
    the same instant can no longer take it. Simultaneous completions are handled in
    dimension order (lower index first), then in the order they started.
``fabriclab`` (this project's earlier model)
    every completion of an instant is handled before any slot is refilled; a free slot then
    takes the ready phase with the smallest key: ``fifo`` earliest ready, ``scf`` fewest bytes
    sent (on one dimension proportional to the duration); ties (exact, or within a tolerance
    for float clocks) go to the lower chunk index.

The engine keeps no clock of its own: the caller says when phases finish
(:meth:`ChunkEngine.finish`) and when to fill free slots (:meth:`ChunkEngine.dispatch`), so
"when does this phase finish" is pluggable. :func:`run_analytic` drives it with a duration
per phase (exact with Fractions: the model's times, the workers' per-dimension orders); the
simulator drives it from flow events.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from testbed.core.errors import FabricLabError
from workloads.collectives import Collective

ORDERS = ("fifo", "scf")
ASTRA_SIM_1_0 = "astra-sim-1.0"
FABRICLAB = "fabriclab"
SEMANTICS = (ASTRA_SIM_1_0, FABRICLAB)
DEFAULT_SEMANTICS = ASTRA_SIM_1_0
# run_analytic, eager engine: completions this close (relative) to the earliest are simultaneous
TIE_REL = Fraction(1, 10**9)


@dataclass(frozen=True)
class Phase:
    """Phase ``index`` of chunk ``chunk``: ``op`` (RS/AR/AG, or A2A) on ``dim``. ``size`` is
    the input bytes per host (for AG the shard each holds), ``sent`` what each host sends in it and
    ``steps`` the synchronous steps of the dimension's collective."""

    chunk: int
    index: int
    dim: int
    op: str
    size: Fraction
    sent: Fraction
    steps: int


def chunk_phases(plan: Any, dims: Sequence[int],
                 collective: Collective | None = None) -> list[Phase]:
    """The sequential phases of one chunk plan (RS..., AR, AG...; or RS..., AG... when the plan
    says ``split_last``), sizes exact, with the bytes sent and steps of ``collective``
    (default ring) on each dimension."""
    if collective is None:
        from workloads.collectives.ring import COLLECTIVE as collective
    order = tuple(plan.rs_order)
    if not order:
        return []
    if getattr(plan, "split_last", False):
        ops = [(d, "RS") for d in order] + [(d, "AG") for d in reversed(order)]
    else:
        ops = [(d, "RS") for d in order[:-1]] + [(order[-1], "AR")]
        ops += [(d, "AG") for d in reversed(order[:-1])]
    phases = []
    s = Fraction(plan.size)
    for index, (d, op) in enumerate(ops):
        n = dims[d]
        phases.append(Phase(plan.index, index, d, op, s, collective.sent_bytes(op, n, s),
                            collective.step_count(op, n)))
        if op == "RS":
            s /= n
        elif op == "AG":
            s *= n
    return phases


def check_order(order: str) -> None:
    if order not in ORDERS:
        raise FabricLabError(f"order {order!r} is unknown; use one of {', '.join(ORDERS)}")


def check_semantics(semantics: str) -> None:
    if semantics not in SEMANTICS:
        raise FabricLabError(f"semantics {semantics!r} is unknown; use one of "
                             f"{', '.join(SEMANTICS)}")


def larger_size(phase: Phase) -> Fraction:
    """The larger of a phase's input and output per host, ASTRA-sim 1.0's SCF size
    (``max(initial_data_size, final_data_size)``): an All-Gather's output is its input times the
    group, i.e. its input plus what it sends."""
    return phase.size + phase.sent if phase.op == "AG" else phase.size


def input_size(phase: Phase) -> Fraction:
    """A phase's input per host (for an All-Gather the shard it starts from)."""
    return phase.size


SCF_SIZES = {"input": input_size, "larger": larger_size}


def insert_position(waiting: Sequence[Phase], phase: Phase, order: str, remaining: int,
                    priority: Callable[[Phase], int] | None = None,
                    size: Callable[[Phase], Fraction] = input_size) -> int:
    """Where ASTRA-sim 1.0 puts a newly ready ``phase`` in a dimension's queue of ``waiting``
    phases (running ones excluded), ``remaining`` being how many phases of its chunk follow it.

    ``fifo`` (and any All-Reduce or All-to-All phase): behind every waiting phase of at least
    its collective's ``priority`` (all equal when None: the back). ``scf``: a phase with exactly
    one phase after it goes to the back, any other in front of the first waiting phase of at
    least its ``size`` (priorities play no part).
    """
    if order == "fifo" or phase.op in ("AR", "A2A"):
        if priority is None:
            return len(waiting)
        own = priority(phase)
        return next((at for at, other in enumerate(waiting) if priority(other) < own),
                    len(waiting))
    if remaining == 1:
        return len(waiting)
    own = size(phase)
    for at, other in enumerate(waiting):
        if size(other) >= own:
            return at
    return len(waiting)


class ChunkEngine:
    """Per-dimension dispatch of chunk phases (see the module docstring).

    ``scf_size``: the size ``scf`` compares under ``astra-sim-1.0``: ``larger`` (the default:
    the larger of input and output, as ASTRA-sim 1.0's code does) or ``input`` (the phase's
    input; the model's rule until 2026-11-29, kept to compare against).
    ``tolerance`` = ``(relative, absolute)`` makes keys floats that tie when that close (for
    a float clock such as the simulator's); None compares them exactly (``fabriclab`` only:
    ``astra-sim-1.0`` queues by insertion and keeps no keys).
    """

    def __init__(self, chunks: Sequence[Sequence[Phase]], n_dims: int, order: str = "fifo",
                 max_active: int = 1, tolerance: tuple[float, float] | None = None,
                 semantics: str = DEFAULT_SEMANTICS, scf_size: str = "larger") -> None:
        check_order(order)
        if scf_size not in SCF_SIZES:
            raise FabricLabError(f"scf_size {scf_size!r} is unknown; use one of "
                                 f"{', '.join(SCF_SIZES)}")
        self.scf_size = SCF_SIZES[scf_size]
        check_semantics(semantics)
        if isinstance(max_active, bool) or not isinstance(max_active, int) or max_active < 1:
            raise FabricLabError(f"max_active is {max_active!r} but must be an integer >= 1")
        self.chunks = {phases[0].chunk: list(phases) for phases in chunks if phases}
        self.order = order
        self.semantics = semantics
        self.eager = semantics == ASTRA_SIM_1_0
        self.tolerance = tolerance
        self.waiting: list[list[tuple[Any, int, Phase]]] = [[] for _ in range(n_dims)]
        self.queues: list[list[Phase]] = [[] for _ in range(n_dims)]
        self.busy = [[False] * max_active for _ in range(n_dims)]
        self.left = sum(len(phases) for phases in self.chunks.values())
        self._started: list[tuple[Phase, int]] = []
        self.priorities: dict[int, int] = {}

    @property
    def done(self) -> bool:
        """Whether every phase of every chunk has finished."""
        return self.left == 0

    def begin(self, now: Any) -> None:
        """Make every chunk's first phase ready at ``now`` (in chunk order)."""
        for phases in self.chunks.values():
            self._ready(phases[0], now)

    def add(self, phases: Sequence[Phase], now: Any, priority: int = 0) -> None:
        """Add one more chunk while the engine runs (``astra-sim-1.0`` only) and ready its
        first phase at ``now``; among waiting All-Reduce and All-to-All phases (and every
        phase under ``fifo``) a higher ``priority`` goes first (ASTRA-sim's stream priority).
        Its chunk index must be new."""
        if not self.eager:
            raise FabricLabError("chunks can be added while running only under astra-sim-1.0")
        chunk = phases[0].chunk
        if chunk in self.chunks:
            raise FabricLabError(f"chunk {chunk} is already in the engine")
        self.chunks[chunk] = list(phases)
        self.priorities[chunk] = priority
        self.left += len(phases)
        self._ready(phases[0], now)

    def finish(self, phase: Phase, slot: int, now: Any) -> None:
        """``phase`` (started in ``slot``) finished at ``now``: free the slot, ready the
        chunk's next phase (under ``astra-sim-1.0`` the freed slot is refilled at once)."""
        self.busy[phase.dim][slot] = False
        self.left -= 1
        phases = self.chunks[phase.chunk]
        if phase.index + 1 < len(phases):
            self._ready(phases[phase.index + 1], now)
        if self.eager:
            self._fill(phase.dim)

    def dispatch(self) -> list[tuple[Phase, int]]:
        """Fill every free slot from its dimension's ready phases; return ``(phase, slot)``
        for each phase to start now (under ``astra-sim-1.0`` also those already started by
        :meth:`begin` / :meth:`finish`, in the order they started)."""
        for d in range(len(self.busy)):
            self._fill(d)
        started, self._started = self._started, []
        return started

    def _fill(self, d: int) -> None:
        slots = self.busy[d]
        while not all(slots):
            if self.eager:
                if not self.queues[d]:
                    return
                phase = self.queues[d].pop(0)
            else:
                if not self.waiting[d]:
                    return
                phase = self._pick(self.waiting[d])
            slot = slots.index(False)
            slots[slot] = True
            self._started.append((phase, slot))

    def _ready(self, phase: Phase, now: Any) -> None:
        if self.eager:
            queue = self.queues[phase.dim]
            remaining = len(self.chunks[phase.chunk]) - phase.index - 1
            priority = (lambda ph: self.priorities.get(ph.chunk, 0)) if self.priorities else None
            queue.insert(insert_position(queue, phase, self.order, remaining, priority,
                                         self.scf_size), phase)
            self._fill(phase.dim)
            return
        key = now if self.order == "fifo" else phase.sent
        queue = self.waiting[phase.dim]
        if self.tolerance is None:  # a heap: (key, chunk) is unique within a dimension
            heapq.heappush(queue, (key, phase.chunk, phase))
        else:
            queue.append((float(key), phase.chunk, phase))

    def _pick(self, queue: list[tuple[Any, int, Phase]]) -> Phase:
        if self.tolerance is None:
            return heapq.heappop(queue)[2]
        rel, absolute = self.tolerance
        low = min(item[0] for item in queue)
        top = low + rel * abs(low) + absolute
        best = min((item for item in queue if item[0] <= top), key=lambda item: item[1])
        queue.remove(best)
        return best[2]


@dataclass(frozen=True)
class EngineRun:
    """One phase as :func:`run_analytic` ran it: in ``slot`` of its dimension, ``start`` to
    ``end`` (the duration callback's unit)."""

    phase: Phase
    slot: int
    start: Fraction
    end: Fraction


def run_analytic(engine: ChunkEngine, duration: Callable[[Phase], Fraction],
                 tie: Callable[[Phase], Fraction] | None = None) -> list[EngineRun]:
    """Drive ``engine`` from time 0 with a known ``duration`` per phase (exact for
    Fractions); return every phase run in the order they started.

    An eager engine (``astra-sim-1.0``) handles simultaneous completions one at a time;
    completions within :data:`TIE_REL` (relative) of the earliest count as simultaneous, so a
    bandwidth given as a rounded float decides nothing. Of those it takes first the one whose
    ``tie`` clock is earliest, then the lowest dimension, then the earliest started. ``tie``
    gives each phase a second duration, summed along the schedule as the times are: what the
    reference simulator adds to ``duration`` (:func:`workloads.astra1_clock.tie_ns`), small
    enough to decide only ties. Otherwise all completions of an instant are handled before the
    free slots are filled."""
    now = (Fraction(0), Fraction(0))  # (time, tie clock)
    engine.begin(now[0])
    running: list[tuple[tuple[Fraction, Fraction], int, int, Phase, int]] = []
    seq = itertools.count()
    runs = []
    while True:
        for phase, slot in engine.dispatch():
            end = (now[0] + duration(phase), now[1] + (tie(phase) if tie else 0))
            runs.append(EngineRun(phase, slot, now[0], end[0]))
            heapq.heappush(running, (end, phase.dim if engine.eager else 0, next(seq), phase,
                                     slot))
        if not running:
            return runs
        if engine.eager:  # one completion: the earliest tie clock among those (almost) now
            horizon = running[0][0][0] * (1 + TIE_REL)
            pick = min((e for e in running if e[0][0] <= horizon),
                       key=lambda e: (e[0][1], e[1], e[2]))
            running.remove(pick)
            heapq.heapify(running)
            now = max(now, pick[0])
            engine.finish(pick[3], pick[4], now[0])
            continue
        now = running[0][0]
        while running and running[0][0] == now:
            _, _, _, phase, slot = heapq.heappop(running)
            engine.finish(phase, slot, now[0])

"""The one chunk-schedule engine of a hierarchical All-Reduce: which chunk phase each dimension
serves next. The model, the workers and the simulator all use it.

A chunk (a :class:`~workloads.themis.ChunkPlan`) runs its :class:`Phase` s one after the other:
Reduce-Scatter on ``rs_order[:-1]``, All-Reduce on ``rs_order[-1]``, All-Gather back in reverse.
A phase becomes *ready* when its predecessor in the chunk finishes. Every dimension has
``max_active`` slots; whenever a slot is free (lowest first, dimensions in index order) it
starts a ready phase of its dimension, picked by the order:

* ``fifo``: earliest ready first;
* ``scf``: fewest bytes sent first (on one dimension proportional to the duration);

ties (exact, or within a tolerance for float clocks) go to the lower chunk index.

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


@dataclass(frozen=True)
class Phase:
    """Phase ``index`` of chunk ``chunk``: ``op`` (RS/AR/AG) on ``dim``. ``size`` is the input
    bytes per host (for AG the shard each holds), ``sent`` what each host sends in it and
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
    """The sequential phases of one chunk plan (RS..., AR, AG...), sizes exact, with the
    bytes sent and steps of ``collective`` (default ring) on each dimension."""
    if collective is None:
        from workloads.collectives.ring import COLLECTIVE as collective
    order = tuple(plan.rs_order)
    if not order:
        return []
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


class ChunkEngine:
    """Per-dimension dispatch of chunk phases (see the module docstring).

    ``tolerance`` = ``(relative, absolute)`` makes keys floats that tie when that close (for
    a float clock such as the simulator's); None compares them exactly.
    """

    def __init__(self, chunks: Sequence[Sequence[Phase]], n_dims: int, order: str = "fifo",
                 max_active: int = 1, tolerance: tuple[float, float] | None = None) -> None:
        check_order(order)
        self.chunks = {phases[0].chunk: list(phases) for phases in chunks if phases}
        self.order = order
        self.tolerance = tolerance
        self.waiting: list[list[tuple[Any, int, Phase]]] = [[] for _ in range(n_dims)]
        self.busy = [[False] * max_active for _ in range(n_dims)]
        self.left = sum(len(phases) for phases in self.chunks.values())

    @property
    def done(self) -> bool:
        """Whether every phase of every chunk has finished."""
        return self.left == 0

    def begin(self, now: Any) -> None:
        """Make every chunk's first phase ready at ``now``."""
        for phases in self.chunks.values():
            self._ready(phases[0], now)

    def finish(self, phase: Phase, slot: int, now: Any) -> None:
        """``phase`` (started in ``slot``) finished at ``now``: free the slot, ready the
        chunk's next phase."""
        self.busy[phase.dim][slot] = False
        self.left -= 1
        phases = self.chunks[phase.chunk]
        if phase.index + 1 < len(phases):
            self._ready(phases[phase.index + 1], now)

    def dispatch(self) -> list[tuple[Phase, int]]:
        """Fill every free slot from its dimension's ready phases; return ``(phase, slot)``
        for each phase to start now, dimensions in index order."""
        started = []
        for d, queue in enumerate(self.waiting):
            slots = self.busy[d]
            while queue and not all(slots):
                phase = self._pick(queue)
                slot = slots.index(False)
                slots[slot] = True
                started.append((phase, slot))
        return started

    def _ready(self, phase: Phase, now: Any) -> None:
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
class PhaseRun:
    """One phase as :func:`run_analytic` ran it: in ``slot`` of its dimension, ``start`` to
    ``end`` (the duration callback's unit)."""

    phase: Phase
    slot: int
    start: Fraction
    end: Fraction


def run_analytic(engine: ChunkEngine, duration: Callable[[Phase], Fraction]) -> list[PhaseRun]:
    """Drive ``engine`` from time 0 with a known ``duration`` per phase (exact for
    Fractions); return every phase run in the order they started."""
    now = Fraction(0)
    engine.begin(now)
    running: list[tuple[Fraction, int, Phase, int]] = []
    seq = itertools.count()
    runs = []
    while True:
        for phase, slot in engine.dispatch():
            end = now + duration(phase)
            runs.append(PhaseRun(phase, slot, now, end))
            heapq.heappush(running, (end, next(seq), phase, slot))
        if not running:
            return runs
        now = running[0][0]
        while running and running[0][0] == now:
            _, _, phase, slot = heapq.heappop(running)
            engine.finish(phase, slot, now)

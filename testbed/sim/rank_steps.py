"""A flat collective run rank by rank, as the workers run it: each rank sends a step's data as
soon as its own inputs for it have arrived, not when the slowest rank has finished the step
before (the lock step of :func:`testbed.sim.collectives.run_steps`).

The collective is given as phases (a Reduce-Scatter, then an All-Gather), each a list of
synchronous steps of ``(src, dst, bytes)`` transfers (:meth:`Collective.transfers`). Every
transfer travels in ``slices`` equal slices, as a ring's shards do in the workers
(:mod:`workloads.collectives.ring`). Within a phase, rank ``a`` sends slice ``j`` of step
``s + 1`` once every slice ``j`` sent to it in step ``s`` has arrived; it starts a phase once
every slice sent to it in the phase before has arrived. Each ordered pair of ranks has one
connection that sends its slices one after the other (:class:`Connection`), so a rank that
gets ahead queues behind its own earlier data, as on a TCP connection.

On paths of equal rate without delay this takes the lock step's time: every link carries the
same bytes, back to back. Where paths differ it is what the workers see: a ring pays the delay
of the hops each slice's chain crosses, not every step's slowest path, a ring cut in several
slices hides delay behind the slices in flight, and a rank on a fast path does not wait for
a slow path it does not depend on.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field

from testbed.sim.flows import Flow, LinkId, Network

Transfer = tuple[int, int, float]  # (src rank, dst rank, bytes)
Phase = Sequence[Sequence[Transfer]]  # synchronous steps of transfers


@dataclass
class Connection:
    """One sender-to-receiver connection: its messages leave one after the other."""

    net: Network
    path: Sequence[LinkId]
    owner: Hashable = None
    tag: object = None
    _queue: deque[tuple[float, Callable[[], None]]] = field(default_factory=deque)
    _sending: bool = False

    def send(self, nbytes: float, on_arrival: Callable[[], None]) -> None:
        """Queue ``nbytes``; ``on_arrival()`` once their last byte has crossed the path."""
        self._queue.append((nbytes, on_arrival))
        if not self._sending:
            self._next()

    def _next(self) -> None:
        if not self._queue:
            self._sending = False
            return
        nbytes, on_arrival = self._queue.popleft()
        self._sending = True
        self.net.add_flow(self.path, nbytes, tag=self.tag, owner=self.owner,
                          on_done=lambda _f: on_arrival(), on_sent=self._sent)

    def _sent(self, _flow: Flow) -> None:
        self._next()


def run_rank_steps(
    net: Network,
    phases: Sequence[Phase],
    connection: Callable[[int, int], Connection],
    slices: int,
    on_done: Callable[[float], None],
    latency_s: float = 0.0,
) -> None:
    """Start ``phases`` now on ``net``, rank by rank (module doc); ``on_done(time)`` when the
    last slice has arrived. ``connection(a, b)`` gives the (one, reused) connection from rank
    ``a`` to ``b``; ``latency_s`` is added before each slice is sent (a per-message software
    cost). Zero-byte transfers are skipped."""
    if slices < 1:
        raise ValueError(f"slices is {slices}; it must be >= 1")
    steps = [[[(a, b, nbytes) for a, b, nbytes in step if nbytes > 0] for step in phase]
             for phase in phases if phase]
    ranks = sorted({r for phase in steps for step in phase for a, b, _ in step for r in (a, b)})
    # (phase, step, rank, slice) -> slices still to arrive at that rank
    pending: dict[tuple[int, int, int, int], int] = {}
    for p, phase in enumerate(steps):
        for s, step in enumerate(phase):
            for _, b, _ in step:
                for j in range(slices):
                    key = (p, s, b, j)
                    pending[key] = pending.get(key, 0) + 1
    # (phase, step) -> rank -> what it sends then: (destination, bytes)
    sends: list[list[dict[int, list[tuple[int, float]]]]] = [
        [{} for _ in phase] for phase in steps]
    for p, phase in enumerate(steps):
        for s, step in enumerate(phase):
            for a, b, nbytes in step:
                sends[p][s].setdefault(a, []).append((b, nbytes))
    started: set[tuple[int, int, int, int]] = set()  # (phase, step, rank, slice) begun
    left = [sum(pending.values())]
    # (phase, rank) -> slices of the phase's last step not yet done at that rank
    phase_left = {(p, r): slices for p in range(len(steps)) for r in ranks}
    if left[0] == 0:
        on_done(net.now)
        return

    def send(p: int, s: int, a: int, j: int) -> None:
        for dst, nbytes in sends[p][s].get(a, ()):
            connection(a, dst).send(nbytes / slices, lambda dst=dst: arrived(p, s, dst, j))

    def begin(p: int, s: int, a: int, j: int) -> None:
        """Rank ``a`` has every input for slice ``j`` of step ``s``: it sends, and the slice
        counts as done here once whatever it awaits has arrived."""
        started.add((p, s, a, j))
        if latency_s > 0:
            net.at(net.now + latency_s, lambda: send(p, s, a, j))
        else:
            send(p, s, a, j)
        if (p, s, a, j) not in pending:
            complete(p, s, a, j)

    def arrived(p: int, s: int, b: int, j: int) -> None:
        left[0] -= 1
        pending[(p, s, b, j)] -= 1
        if pending[(p, s, b, j)] == 0:
            del pending[(p, s, b, j)]
            if (p, s, b, j) in started:
                complete(p, s, b, j)
        if left[0] == 0:
            on_done(net.now)

    def complete(p: int, s: int, a: int, j: int) -> None:
        if s + 1 < len(steps[p]):
            begin(p, s + 1, a, j)
            return
        phase_left[(p, a)] -= 1
        if phase_left[(p, a)] == 0 and p + 1 < len(steps):
            for k in range(slices):
                begin(p + 1, 0, a, k)

    for r in ranks:
        for j in range(slices):
            begin(0, 0, r, j)

"""Event-driven flow-level network simulator with max-min fair sharing.

Pure Python, no I/O. Units: sizes in bytes, capacities and rates in bit/s, time in seconds.

Model
-----
A network is a set of directed links with capacities. A :class:`Flow` crosses a multiset of
links. A plain flow (:meth:`Network.add_flow`) crosses each link of its path once. A *bundle*
(:meth:`Network.add_bundle`) is ``k`` sub-flows that move in lockstep: they all get the same
rate, so a link crossed by ``j`` of them carries ``j`` times that rate. A bundle models a
synchronous collective step, which ends when its slowest flow ends: the faster sub-flows
would only sit idle at the barrier, so their share is left to other flows.

Rates are the max-min fair allocation, computed by progressive filling (water-filling): all
unfrozen flows rise together; when a link saturates, the flows crossing it freeze. Rates are
recomputed whenever the set of active flows changes (arrival or departure), never on a fixed
time step. Only the connected component touched by a change is recomputed (flows are
connected when they share a link), and a link used by a single flow is folded into that
flow's own rate cap, so isolated flows cost nothing to re-share.

Events at (almost) the same time form one batch: every event with a time within ``TIME_TOL``
(relative) of the earliest is processed at that time, then callbacks queued with
:meth:`Network.defer` run, then rates are recomputed once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from testbed.core.errors import FabricLabError

LinkId = Hashable

# Events closer than this (relative to the current time, plus TIME_ABS absolute) are simultaneous.
TIME_TOL = 1e-9
TIME_ABS = 1e-12
# Relative slack when deciding which links saturate at the current water level.
RATE_TOL = 1e-12


@dataclass(eq=False)
class Flow:
    """An active (or finished) flow. ``size`` and ``remaining`` are bytes per sub-flow.

    ``links`` maps each link to how many of the flow's lockstep sub-flows cross it (1 for a
    plain flow). ``rate`` is bit/s per sub-flow. ``shared`` collects the links on which the
    flow was ever active together with a flow of a different ``owner``.
    """

    id: int
    links: dict[LinkId, int]
    size: float
    tag: Any = None
    owner: Hashable = None
    on_done: Callable[[Flow], None] | None = None
    start: float = 0.0
    end: float | None = None
    remaining: float = 0.0
    rate: float = 0.0
    cap: float = float("inf")
    shared: set[LinkId] = field(default_factory=set)
    _busy: set[LinkId] = field(default_factory=set)  # links it shares with active flows now
    _updated: float = 0.0
    _version: int = 0

    @property
    def done(self) -> bool:
        return self.end is not None


class Network:
    """Links with capacities and the flows crossing them; an event loop with timers.

    ``capacities`` maps link id -> bit/s; links not listed get ``default_capacity`` (if
    given), otherwise adding a flow over them is an error.
    """

    def __init__(
        self,
        capacities: Mapping[LinkId, float] | None = None,
        default_capacity: float | None = None,
    ) -> None:
        self.capacities: dict[LinkId, float] = dict(capacities or {})
        for link, cap in self.capacities.items():
            if not cap > 0:
                raise FabricLabError(f"link {link!r} has capacity {cap!r}; it must be > 0")
        if default_capacity is not None and not default_capacity > 0:
            raise FabricLabError(f"default_capacity is {default_capacity!r}; it must be > 0")
        self.default_capacity = default_capacity
        self.now = 0.0
        self.active: set[Flow] = set()
        self._on_link: dict[LinkId, set[Flow]] = {}
        self._events: list[tuple[float, int, str, Any, int]] = []
        self._seq = itertools.count()
        self._ids = itertools.count()
        self._deferred: list[Callable[[], None]] = []
        self._dirty: set[Flow] = set()
        self.recomputes = 0
        self.events = 0

    # ------------------------------------------------------------------ public API

    def capacity(self, link: LinkId) -> float:
        cap = self.capacities.get(link)
        if cap is None:
            if self.default_capacity is None:
                raise FabricLabError(f"link {link!r} is not in the network")
            cap = self.default_capacity
        return cap

    def add_flow(
        self,
        path: Sequence[LinkId],
        size: float,
        start: float | None = None,
        tag: Any = None,
        on_done: Callable[[Flow], None] | None = None,
        owner: Hashable = None,
    ) -> Flow:
        """Start a flow of ``size`` bytes over ``path`` (directed link ids) at ``start``."""
        return self.add_bundle([path], size, start, tag, on_done, owner)

    def add_bundle(
        self,
        paths: Iterable[Sequence[LinkId]],
        size: float,
        start: float | None = None,
        tag: Any = None,
        on_done: Callable[[Flow], None] | None = None,
        owner: Hashable = None,
    ) -> Flow:
        """Start lockstep sub-flows, one per path, each carrying ``size`` bytes."""
        links: dict[LinkId, int] = {}
        for path in paths:
            for link in path:
                links[link] = links.get(link, 0) + 1
        if not size >= 0:
            raise FabricLabError(f"flow size is {size!r}; it must be >= 0 bytes")
        cap = min((self.capacity(link) / k for link, k in links.items()), default=float("inf"))
        flow = Flow(next(self._ids), links, float(size), tag, owner, on_done, cap=cap)
        when = self.now if start is None else float(start)
        if when < self.now:
            raise FabricLabError(f"flow start {when} is before the current time {self.now}")
        if when > self.now:
            self.at(when, lambda: self._activate(flow))
        else:
            self._activate(flow)
        return flow

    def at(self, time: float, callback: Callable[[], None]) -> None:
        """Call ``callback()`` at ``time`` (seconds, not before now)."""
        if time < self.now:
            raise FabricLabError(f"timer at {time} is before the current time {self.now}")
        heapq.heappush(self._events, (float(time), next(self._seq), "timer", callback, 0))

    def defer(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` after every event of the current batch has been processed."""
        self._deferred.append(callback)

    def step(self) -> bool:
        """Process the next batch of simultaneous events; False when nothing is left."""
        self.settle()
        while self._events:
            t, _, kind, obj, version = self._events[0]
            if kind == "done" and obj._version != version:
                heapq.heappop(self._events)
                continue
            break
        else:
            return False
        self.now = max(self.now, t)
        horizon = t + TIME_TOL * abs(t) + TIME_ABS
        while self._events and self._events[0][0] <= horizon:
            _, _, kind, obj, version = heapq.heappop(self._events)
            if kind == "done":
                if obj._version == version and not obj.done:
                    self._finish(obj)
            else:
                self.events += 1
                obj()
        self._run_deferred()
        return True

    def run(self, until: float | None = None) -> float:
        """Process events (only those due by ``until`` if given); return the current time."""
        while True:
            self.settle()
            if until is not None:
                live = [e for e in self._events[:1] if e[0] <= until]
                if not live:
                    self.now = max(self.now, until)
                    return self.now
            if not self.step():
                return self.now

    # ------------------------------------------------------------------ internals

    def _run_deferred(self) -> None:
        while self._deferred:
            pending, self._deferred = self._deferred, []
            for callback in pending:
                callback()

    def _activate(self, flow: Flow) -> None:
        flow.start = flow._updated = self.now
        flow.remaining = flow.size
        if flow.size == 0 or not flow.links:
            flow._version += 1
            heapq.heappush(self._events, (self.now, next(self._seq), "done", flow, flow._version))
            return
        self.active.add(flow)
        owner = flow.owner if flow.owner is not None else flow
        on_link = self._on_link
        for link in flow.links:
            others = on_link.get(link)
            if others is None:
                on_link[link] = {flow}
                continue
            flow._busy.add(link)
            for other in others:
                other._busy.add(link)
                if (other.owner if other.owner is not None else other) != owner:
                    other.shared.add(link)
                    flow.shared.add(link)
            others.add(flow)
        self._dirty.add(flow)

    def _finish(self, flow: Flow) -> None:
        self.events += 1
        flow.end = self.now
        flow.remaining = 0.0
        flow.rate = 0.0
        if flow in self.active:
            self.active.discard(flow)
            self._dirty.discard(flow)
            for link in flow._busy:
                others = self._on_link[link]
                others.discard(flow)
                self._dirty.update(others)
                if len(others) == 1:
                    next(iter(others))._busy.discard(link)
            for link in flow.links:
                if link not in flow._busy:
                    del self._on_link[link]
            flow._busy.clear()
        if flow.on_done is not None:
            flow.on_done(flow)

    def settle(self) -> None:
        """Recompute now the rates of every component touched since the last settle.

        :meth:`step` and :meth:`run` do this themselves; call it to read ``Flow.rate``."""
        while self._dirty:
            seed = self._dirty.pop()
            component = self._component(seed)
            self._dirty.difference_update(component)
            self._share(component)

    def _component(self, seed: Flow) -> list[Flow]:
        seen = {seed}
        expanded: set[LinkId] = set()
        todo = [seed]
        while todo:
            flow = todo.pop()
            for link in flow._busy:
                if link in expanded:
                    continue
                expanded.add(link)
                for other in self._on_link[link]:
                    if other not in seen:
                        seen.add(other)
                        todo.append(other)
        return list(seen)

    def _share(self, flows: list[Flow]) -> None:
        """Max-min fair rates for one component (progressive filling), then reschedule."""
        self.recomputes += 1
        rates = max_min_rates(
            flows,
            {link: self.capacity(link) for flow in flows for link in flow._busy},
            lambda flow: flow._busy,
        )
        now = self.now
        for flow in flows:
            rate = rates[flow]
            if rate == flow.rate:
                continue  # same rate: its pending completion event is still right
            flow.remaining = max(0.0, flow.remaining - flow.rate * (now - flow._updated) / 8)
            flow._updated = now
            flow.rate = rate
            flow._version += 1
            finish = now + flow.remaining * 8 / flow.rate
            heapq.heappush(self._events, (finish, next(self._seq), "done", flow, flow._version))
        if len(self._events) > 4 * len(self.active) + 1024:
            # Drop superseded completion events so the heap stays O(active flows + timers).
            self._events = [
                e for e in self._events if e[2] != "done" or e[3]._version == e[4]
            ]
            heapq.heapify(self._events)


def max_min_rates(
    flows: Sequence[Flow],
    shared: Mapping[LinkId, float],
    links_of: Callable[[Flow], Iterable[LinkId]] | None = None,
) -> dict[Flow, float]:
    """Progressive filling over ``flows``.

    ``links_of(flow)`` lists the flow's links among ``shared`` (default: all its links,
    filtered); the network passes the links it knows to be shared, to skip the others.

    Each flow is limited by its own ``cap`` (its rate when alone) and by the ``shared``
    links (link -> capacity), on which the sum of multiplicity x rate may not exceed the
    capacity. All unfrozen flows share one water level; at each round the level rises to
    the next saturation point (a flow cap or a shared link) and the flows there freeze.
    """
    rates: dict[Flow, float] = {}
    frozen_load = dict.fromkeys(shared, 0.0)
    weight = dict.fromkeys(shared, 0)
    on_link: dict[LinkId, list[Flow]] = {link: [] for link in shared}
    shared_links = {
        flow: [link for link in (flow.links if links_of is None else links_of(flow))
               if link in shared]
        for flow in flows
    }
    for flow, links in shared_links.items():
        for link in links:
            weight[link] += flow.links[link]
            on_link[link].append(flow)
    by_cap = sorted(flows, key=lambda f: f.cap)
    next_cap = 0
    unfrozen = len(flows)
    while unfrozen:
        while by_cap[next_cap] in rates:
            next_cap += 1
        level = by_cap[next_cap].cap
        for link, w in weight.items():
            if w:
                level = min(level, (shared[link] - frozen_load[link]) / w)
        level = max(level, 0.0)
        limit = level * (1 + RATE_TOL) + 1e-300
        freeze = [f for f in by_cap[next_cap:] if f not in rates and f.cap <= limit]
        for link, w in weight.items():
            if w and (shared[link] - frozen_load[link]) / w <= limit:
                freeze.extend(f for f in on_link[link] if f not in rates)
        if level == 0.0:
            # Defensive: a saturated link leaves nothing; give a tiny rate to make progress.
            level = 1e-9
        for flow in freeze:
            if flow in rates:
                continue
            rates[flow] = min(level, flow.cap)
            unfrozen -= 1
            for link in shared_links[flow]:
                k = flow.links[link]
                weight[link] -= k
                frozen_load[link] += k * rates[flow]
    return rates

"""Event-driven flow-level network simulator with max-min fair sharing.

Pure computation, no I/O. Units: sizes in bytes, capacities and rates in bit/s, time in
seconds.

Model
-----
A network is a set of directed links with capacities. A :class:`Flow` crosses a multiset of
links. A plain flow (:meth:`Network.add_flow`) crosses each link of its path once. A *bundle*
(:meth:`Network.add_bundle`) is ``k`` sub-flows that move in lockstep: they all get the same
rate, so a link crossed by ``j`` of them carries ``j`` times that rate. A bundle models a
synchronous collective step, which ends when its slowest flow ends: the faster sub-flows
would only sit idle at the barrier, so their share is left to other flows.

Rates are the max-min fair allocation, computed by progressive filling (water-filling): all
unfrozen flows rise together; when a link saturates, the flows crossing it freeze
(:mod:`testbed.sim.maxmin`). Rates are recomputed whenever the set of active flows changes
(arrival or departure), never on a fixed time step. Only the connected components touched by
a change are recomputed (flows are connected when they share a link), and a link used by a
single flow is folded into that flow's own rate cap, so isolated flows cost nothing to
re-share.

Events at (almost) the same time form one batch: every event with a time within ``TIME_TOL``
(relative) of the earliest is processed at that time, then callbacks queued with
:meth:`Network.defer` run, then rates are recomputed once.

Links may also delay and lose (``delays_s``, ``losses``: link -> seconds one way, fraction of
packets; :mod:`testbed.core.link_model`). A flow then holds its links while it sends, as
before, but is done (``end``, ``on_done``) its path's one-way delay later, when its last byte
has arrived (a bundle: its slowest path's); and a lossy path caps its rate at the Mathis et
al. TCP bound for that path's loss and round trip. A network without either behaves as before,
and so does a flow over a pre-resolved :class:`Route` (the cluster simulator adds its paths'
delays per step itself: :class:`testbed.sim.job_plans.LinkDelays`). Jitter is not simulated:
a link's delay is its mean.

Bookkeeping (:mod:`testbed.sim.occupancy`) counts active flows per link in numpy arrays, so
starting or ending a flow costs Python work only on the links it shares; components are
tracked as they merge and split only when recomputed; a large component is filled by the
numpy version of progressive filling. A :class:`Route` (a bundle's links, resolved once) can
be reused by flows that take the same paths.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from testbed.core.errors import FabricLabError
from testbed.core.link_model import lossy_rate_bit_s, path_delay_s, path_loss
from testbed.sim.maxmin import RATE_TOL, fill_rates, max_min_rates_reference
from testbed.sim.occupancy import Component, Incidence, Occupancy, Route

__all__ = ["RATE_TOL", "TIME_ABS", "TIME_TOL", "Flow", "LinkId", "Network", "Route"]

LinkId = Hashable

# Events closer than this (relative to the current time, plus TIME_ABS absolute) are simultaneous.
TIME_TOL = 1e-9
TIME_ABS = 1e-12
# Drop superseded completion events from the heap once this many (and half the heap) are stale.
STALE_EVENTS_MIN = 1024


@dataclass(eq=False)
class Flow:
    """An active (or finished) flow. ``size`` and ``remaining`` are bytes per sub-flow.

    ``links`` maps each link to how many of the flow's lockstep sub-flows cross it (1 for a
    plain flow; read-only: flows of one :class:`Route` share it). ``rate`` is bit/s per
    sub-flow. ``shared`` collects the links on which the flow was ever active together with a
    flow of a different ``owner`` (kept as the links' indices, ``shared_idx``). ``route`` is
    its links as the network resolved them.
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
    # the link indices (the network's occupancy's) of ``shared``: what the bookkeeping keeps
    shared_idx: set[int] = field(default_factory=set, repr=False)
    route: Route | None = None
    delay_s: float = 0.0  # one-way propagation delay of its (slowest) path
    # called when its last byte has left (``delay_s`` before ``on_done``): a sender's next
    # message on the same connection may go then
    on_sent: Callable[[Flow], None] | None = None
    # Owner, or the flow itself: whose flows count as another party's on a shared link.
    _party: Hashable = field(default=None, repr=False)
    _busy: set[int] = field(default_factory=set, repr=False)  # link indices shared now
    _busy_idx: np.ndarray | None = field(default=None, repr=False)
    _busy_mult: np.ndarray | None = field(default=None, repr=False)
    _component: Component | None = field(default=None, repr=False)
    _row: int = field(default=-1, repr=False)  # its row in the occupancy's pool
    _updated: float = 0.0
    _version: int = 0
    _queued: bool = False  # its current version has a completion event in the heap

    def __post_init__(self) -> None:
        self._party = self.owner if self.owner is not None else self

    @property
    def shared(self) -> set[LinkId]:
        """The links on which the flow was ever active together with another owner's flow."""
        if self.route is None:
            return set()
        link_ids = self.route.occupancy.link_ids
        return {link_ids[i] for i in self.shared_idx}

    @property
    def done(self) -> bool:
        return self.end is not None


class Network:
    """Links with capacities and the flows crossing them; an event loop with timers.

    ``capacities`` maps link id -> bit/s; links not listed get ``default_capacity`` (if
    given), otherwise adding a flow over them is an error. ``sharing`` picks the filler of
    components that share links: ``"fast"`` (the reference for small ones, numpy for large
    ones), ``"numpy"`` (numpy for all) or ``"reference"`` (the pure-Python reference for all;
    slow, for tests). All give the same rates to float rounding.
    """

    def __init__(
        self,
        capacities: Mapping[LinkId, float] | None = None,
        default_capacity: float | None = None,
        sharing: str = "fast",
    ) -> None:
        self.capacities: dict[LinkId, float] = dict(capacities or {})
        for link, cap in self.capacities.items():
            if not cap > 0:
                raise FabricLabError(f"link {link!r} has capacity {cap!r}; it must be > 0")
        if default_capacity is not None and not default_capacity > 0:
            raise FabricLabError(f"default_capacity is {default_capacity!r}; it must be > 0")
        if sharing not in SHARING:
            raise FabricLabError(f"sharing {sharing!r} is unknown; use one of "
                                 f"{', '.join(SHARING)}")
        self.default_capacity = default_capacity
        # link -> one-way propagation delay (s) and fraction of packets lost; absent: 0
        self.delays_s: dict[LinkId, float] = {}
        self.losses: dict[LinkId, float] = {}
        self.sharing = sharing
        # Components sharing more (flow, link) pairs than this get arrays (numpy filling).
        self._arrays_over = {"fast": SMALL_ENTRIES, "numpy": 0, "reference": 1 << 62}[sharing]
        self.now = 0.0
        self.active: set[Flow] = set()
        self.occupancy = Occupancy(self.capacity)
        self._events: list[tuple[float, int, str, Any, int]] = []
        self._seq = itertools.count()
        self._ids = itertools.count()
        self._deferred: list[Callable[[], None]] = []
        self._dirty: set[Flow] = set()
        self._stale_events = 0
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

    def route(self, paths: Iterable[Sequence[LinkId]],
              weights: Sequence[int] | None = None) -> Route:
        """The links of lockstep sub-flows, one per path (or ``weights[i]`` on path i),
        resolved once for reuse."""
        return self.occupancy.route(paths, weights)

    def add_flow(
        self,
        path: Sequence[LinkId],
        size: float,
        start: float | None = None,
        tag: Any = None,
        on_done: Callable[[Flow], None] | None = None,
        owner: Hashable = None,
        on_sent: Callable[[Flow], None] | None = None,
    ) -> Flow:
        """Start a flow of ``size`` bytes over ``path`` (directed link ids) at ``start``;
        ``on_sent(flow)`` when its last byte has left, ``on_done(flow)`` when it has arrived."""
        flow = self.add_bundle([path], size, start, tag, on_done, owner)
        flow.on_sent = on_sent
        return flow

    def add_bundle(
        self,
        paths: Iterable[Sequence[LinkId]] | Route,
        size: float,
        start: float | None = None,
        tag: Any = None,
        on_done: Callable[[Flow], None] | None = None,
        owner: Hashable = None,
    ) -> Flow:
        """Start lockstep sub-flows, one per path (or a :meth:`route` of them), each carrying
        ``size`` bytes."""
        route = paths if isinstance(paths, Route) else self.route(paths)
        if route.occupancy is not self.occupancy:
            raise FabricLabError("the route was resolved by another network")
        if not size >= 0:
            raise FabricLabError(f"flow size is {size!r}; it must be >= 0 bytes")
        flow = Flow(next(self._ids), route.links, float(size), tag, owner, on_done,
                    cap=route.cap_bit_s, route=route)
        if (self.delays_s or self.losses) and not isinstance(paths, Route):
            self._impair(flow, paths)
        when = self.now if start is None else float(start)
        if when < self.now:
            raise FabricLabError(f"flow start {when} is before the current time {self.now}")
        if when > self.now:
            self.at(when, lambda: self._activate(flow))
        else:
            self._activate(flow)
        return flow

    def path_delay_s(self, path: Sequence[LinkId]) -> float:
        """The one-way propagation delay of ``path`` (seconds)."""
        return path_delay_s(self.delays_s.get(link, 0.0) for link in path)

    def _impair(self, flow: Flow, paths: Iterable[Sequence[LinkId]]) -> None:
        """Give ``flow`` its slowest path's delay, and cap its rate at the TCP rate its
        lossiest path allows (:func:`~testbed.core.link_model.lossy_rate_bit_s`)."""
        for path in paths:
            delay = self.path_delay_s(path)
            flow.delay_s = max(flow.delay_s, delay)
            loss = path_loss(self.losses.get(link, 0.0) for link in path)
            flow.cap = lossy_rate_bit_s(flow.cap, delay, loss)

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
        events = self._events
        while events:
            t, _, kind, obj, version = events[0]
            if kind == "done" and obj._version != version:
                heapq.heappop(events)
                self._stale_events -= 1
                continue
            break
        else:
            return False
        self.now = max(self.now, t)
        horizon = t + TIME_TOL * abs(t) + TIME_ABS
        while events and events[0][0] <= horizon:
            _, _, kind, obj, version = heapq.heappop(events)
            if kind == "done":
                if obj._version != version:
                    self._stale_events -= 1
                elif not obj.done:
                    obj._queued = False
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

    def settle(self) -> None:
        """Recompute now the rates of every component touched since the last settle.

        :meth:`step` and :meth:`run` do this themselves; call it to read ``Flow.rate``."""
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        done: set[Flow] = set()
        for seed in sorted(dirty, key=_id_of):
            if seed in done:
                continue
            for _part, flows, incidence in self.occupancy.split(seed._component,
                                                                 self._arrays_over):
                done.update(flows)
                if not dirty.isdisjoint(flows):
                    self._share(flows, incidence)

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
            self._schedule(flow, self.now)
            return
        self.active.add(flow)
        self.occupancy.enter(flow)
        self._dirty.add(flow)

    def _finish(self, flow: Flow) -> None:
        """``flow`` has sent its last byte: it leaves its links now and is done once that
        byte has crossed its path (``delay_s`` later)."""
        self.events += 1
        flow.end = self.now + flow.delay_s
        flow.remaining = 0.0
        flow.rate = 0.0
        if flow in self.active:
            self.active.discard(flow)
            self._dirty.discard(flow)
            self._dirty.update(self.occupancy.leave(flow))
        if flow.on_sent is not None:
            flow.on_sent(flow)
        if flow.on_done is not None:
            if flow.delay_s > 0:
                done = flow.on_done
                self.at(flow.end, lambda: done(flow))
            else:
                flow.on_done(flow)

    def _schedule(self, flow: Flow, finish: float) -> None:
        """Replace ``flow``'s completion event by one at ``finish``."""
        flow._version += 1
        if flow._queued:
            self._stale_events += 1
        flow._queued = True
        heapq.heappush(self._events, (finish, next(self._seq), "done", flow, flow._version))

    def _share(self, flows: list[Flow], incidence: Incidence | None) -> None:
        """Max-min fair rates for one component (progressive filling), then reschedule."""
        self.recomputes += 1
        rates = self._rates(flows, incidence)
        now = self.now
        for flow, rate in zip(flows, rates, strict=True):
            if rate == flow.rate:
                continue  # same rate: its pending completion event is still right
            flow.remaining = max(0.0, flow.remaining - flow.rate * (now - flow._updated) / 8)
            flow._updated = now
            flow.rate = rate
            self._schedule(flow, now + flow.remaining * 8 / flow.rate)
        if (self._stale_events > STALE_EVENTS_MIN
                and 2 * self._stale_events > len(self._events)):
            # Drop superseded completion events so the heap stays O(active flows + timers).
            self._events = [e for e in self._events if e[2] != "done" or e[3]._version == e[4]]
            heapq.heapify(self._events)
            self._stale_events = 0

    def _rates(self, flows: list[Flow], incidence: Incidence | None) -> list[float]:
        """Rates of a component's flows (by id): numpy over its ``incidence`` if it has one
        and the network is not set to the reference, else the reference."""
        if len(flows) == 1 and not flows[0]._busy:
            return [flows[0].cap]
        if incidence is None or self.sharing == "reference":
            ids, caps = self.occupancy.link_ids, self.occupancy.caps
            shims = [_Shim(f.cap, {link: f.links[ids[link]] for link in f._busy})
                     for f in flows]
            shared = {link: caps[link] for shim in shims for link in shim.links}
            rates = max_min_rates_reference(shims, shared)
            return [rates[shim] for shim in shims]
        caps = np.fromiter(map(_cap_of, flows), dtype=float, count=len(flows))
        return fill_rates(caps, incidence.flow, incidence.link, incidence.mult,
                          incidence.link_cap).tolist()


class _Shim:
    """A flow as the reference filler reads it: its cap and its busy links (indices)."""

    __slots__ = ("cap", "links")

    def __init__(self, cap: float, links: dict[int, int]) -> None:
        self.cap = cap
        self.links = links


SHARING = ("fast", "numpy", "reference")
_cap_of = operator.attrgetter("cap")
_id_of = operator.attrgetter("id")
# Components with at most this many (flow, shared link) pairs are filled in plain Python.
SMALL_ENTRIES = 64

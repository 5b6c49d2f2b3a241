"""Which active flows are on which links, and which flows form connected components.

Pure bookkeeping for :class:`testbed.sim.flows.Network`, no I/O. Links are interned as dense
integer indices; per link, numpy arrays hold its capacity (bit/s), how many active flows cross
it and, while it is one, which. Only links with two or more active flows (*busy* links) get a
Python set of their flows, so a flow that shares nothing costs a few array operations to start
and end, whatever its path length.

Components (flows connected through busy links) are merged as flows start and marked *stale*
when a flow that shared links ends (the rest may have come apart); a stale component is split
into its true components only when its rates are next recomputed.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from testbed.sim import compiled

LinkId = Hashable

def link_loads(paths: Iterable[Sequence[LinkId]],
               weights: Sequence[int] | None = None) -> dict[LinkId, int]:
    """Sub-flows on each link of ``paths`` (``weights[i]`` on path i, default one each),
    links in the order first crossed."""
    if weights is None:
        return dict(Counter(itertools.chain.from_iterable(paths)))
    paths = list(paths)
    flat = list(itertools.chain.from_iterable(paths))
    at = dict.fromkeys(flat)  # in the order first crossed, then each one's position
    for k, link in enumerate(at):
        at[link] = k
    lengths = np.fromiter(map(len, paths), dtype=np.intp, count=len(weights))
    per_link = np.repeat(np.asarray(weights, dtype=np.float64), lengths)
    pos = np.fromiter(map(at.__getitem__, flat), dtype=np.intp, count=len(flat))
    # float sums of integers below 2^53: exact
    loads = np.bincount(pos, weights=per_link, minlength=len(at)).astype(np.int64)
    return dict(zip(at, loads.tolist(), strict=True))


class Occupant(Protocol):
    """What the bookkeeping reads and keeps on a flow."""

    id: int
    route: Route | None
    shared_idx: set[int]  # links (indices) it shared with another party's flow
    _party: Hashable  # flows of one party never count as sharing with each other
    _busy: set[int]
    _busy_idx: np.ndarray | None  # its busy links as (idx, mult) arrays; None: out of date
    _busy_mult: np.ndarray | None
    _component: Component | None
    _row: int  # its row in the occupancy's pool while active


@dataclass(eq=False, frozen=True)
class Route:
    """Links of lockstep sub-flows: ``links`` (link id -> sub-flows crossing it), the same as
    dense indices ``idx`` with multiplicities ``mult``, and ``cap_bit_s``, the rate each
    sub-flow gets alone (min over its links of capacity / multiplicity)."""

    occupancy: Occupancy
    links: dict[LinkId, int]
    idx: np.ndarray
    mult: np.ndarray
    cap_bit_s: float


class Component:
    """Flows connected through busy links (a superset of a true component while ``stale``)."""

    __slots__ = ("flows", "stale")

    def __init__(self, flows: set[Any], stale: bool = False) -> None:
        self.flows = flows
        self.stale = stale


class Occupancy:
    """Active flows per link, busy links' flows, and components. ``capacity(link)`` gives a
    link's bit/s (or raises) the first time the link is seen."""

    def __init__(self, capacity: Callable[[LinkId], float]) -> None:
        self._capacity = capacity
        self.index: dict[LinkId, int] = {}
        self.link_ids: list[LinkId] = []
        self.caps: list[float] = []
        self._synced = 0  # links whose capacity is in ``cap``
        self.cap = np.zeros(0)
        self.count = np.zeros(0, dtype=np.int64)
        self.sole = np.zeros(0, dtype=np.int64)  # the flow id on a link with count 1
        # and that flow's row in the pool and its multiplicity there (when pooled)
        self._sole_row = np.zeros(0, dtype=np.int64)
        self._sole_mult = np.zeros(0)
        self._slot = np.zeros(0, dtype=np.intp)  # scratch: a link's local index
        self.on_link: dict[int, set[Any]] = {}  # busy link -> its flows
        self.by_id: dict[int, Any] = {}  # active flows
        # The pool (kept only when the kernels are there): each active flow's route (links,
        # multiplicities) at ``_row_start[row]`` (``_row_length[row]`` entries), then room
        # for as many busy links, the first ``_row_busy[row]`` of them its busy links now (in
        # no particular order: patched as links become busy or free). The compiled incidence
        # reads it.
        self._pooled = compiled.AVAILABLE
        self._pool_idx = np.zeros(1 << 12, dtype=np.int64)
        self._pool_mult = np.zeros(1 << 12)
        self._pool_used = 0
        self._row_start = np.zeros(64, dtype=np.int64)
        self._row_length = np.zeros(64, dtype=np.int64)
        self._row_busy = np.zeros(64, dtype=np.int64)
        self._free_rows: list[int] = list(range(63, -1, -1))

    # ------------------------------------------------------------------ links

    def route(self, paths: Iterable[Sequence[LinkId]],
              weights: Sequence[int] | None = None) -> Route:
        """``weights[i]``: how many sub-flows take path i (default one each)."""
        links = link_loads(paths, weights)
        index = self.index
        ids = list(map(index.get, links))
        if None in ids:  # links seen for the first time: interned in order
            for k, link in enumerate(links):
                if ids[k] is None:
                    cap = self._capacity(link)
                    ids[k] = index[link] = len(self.link_ids)
                    self.link_ids.append(link)
                    self.caps.append(cap)
        self._sync()  # also after a capacity error left some links interned, unsynced
        idx = np.array(ids, dtype=np.intp)
        mult = np.fromiter(links.values(), dtype=float, count=len(links))
        cap = float((self.cap[idx] / mult).min()) if len(links) else float("inf")
        return Route(self, links, idx, mult, cap)

    def _sync(self) -> None:
        """Room in the per-link arrays for every interned link (doubling), capacities set."""
        n, synced = len(self.caps), self._synced
        if n == synced:
            return
        if n > len(self.cap):
            pad = max(n, 2 * len(self.cap), 64) - len(self.cap)
            self.cap = np.concatenate([self.cap, np.zeros(pad)])
            self.count = np.concatenate([self.count, np.zeros(pad, dtype=np.int64)])
            self.sole = np.concatenate([self.sole, np.zeros(pad, dtype=np.int64)])
            self._sole_row = np.concatenate([self._sole_row, np.zeros(pad, dtype=np.int64)])
            self._sole_mult = np.concatenate([self._sole_mult, np.zeros(pad)])
            self._slot = np.concatenate([self._slot, np.zeros(pad, dtype=np.intp)])
        self.cap[synced:n] = self.caps[synced:]
        self._synced = n

    # ------------------------------------------------------------------ flows

    def enter(self, flow: Occupant) -> None:
        """Count ``flow`` on its links; mark sharing and merge components where it meets
        other flows."""
        comp = flow._component = Component({flow})
        if self._pooled:
            met_links, n_before, soles = self._enter_pooled(flow)
        else:
            met_links, n_before, soles = self._enter_counts(flow)
        self.by_id[flow.id] = flow
        if not met_links:
            return
        party, on_link, by_id = flow._party, self.on_link, self.by_id
        flow._busy_idx = None
        flow._busy.update(met_links)
        shared: list[int] = []
        # Where ``flow`` meets another flow on a link: the link is noted as shared between
        # different parties, and their components are joined (inline: this loop is hot).
        for link, n, sole in zip(met_links, n_before, soles, strict=True):
            if n == 1:  # the link's sole flow until now gains it as a busy link
                other = by_id[sole]
                on_link[link] = {other, flow}
                other._busy.add(link)
                other._busy_idx = None
                others = (other,)
            else:
                others = on_link[link]
            for other in others:
                if other._party != party:
                    other.shared_idx.add(link)
                    shared.append(link)
                if other._component is not comp:
                    comp = _merge(comp, other._component)
            if n != 1:
                others.add(flow)
        flow.shared_idx.update(shared)

    def leave(self, flow: Occupant) -> list[Any]:
        """Uncount ``flow``; return the flows it shared links with (their rates may rise)."""
        del self.by_id[flow.id]
        comp = flow._component
        flow._component = None
        comp.flows.discard(flow)
        neighbours: list[Any] = []
        shrunk: list[int] = []  # rows of flows that lose a busy link, and the link
        shrunk_links: list[int] = []
        if flow._busy:
            if len(comp.flows) > 1:
                comp.stale = True
            on_link = self.on_link
            for link in flow._busy:
                members = on_link[link]
                members.discard(flow)
                neighbours.extend(members)
                if len(members) == 1:
                    (last,) = members
                    last._busy.discard(link)
                    last._busy_idx = None
                    shrunk.append(last._row)
                    shrunk_links.append(link)
                    self.sole[link] = last.id
                    del on_link[link]
            flow._busy.clear()
        if self._pooled:
            self._free_rows.append(flow._row)
            compiled.pooled_leave(flow.route.idx, self.count, np.array(shrunk, dtype=np.int64),
                                  np.array(shrunk_links, dtype=np.int64), self._row_start,
                                  self._row_length, self._row_busy, self._pool_idx,
                                  self._pool_mult, self._sole_row, self._sole_mult)
        else:
            self.count[flow.route.idx] -= 1
        return neighbours

    def _enter_counts(self, flow: Occupant) -> tuple[list[int], list[int], list[int]]:
        """Count ``flow`` on its links and make it the sole flow of those it finds free;
        return the links it met, how many flows each had, and each one's sole flow."""
        idx = flow.route.idx
        before = self.count[idx]
        self.count[idx] = before + 1
        met = before > 0
        self.sole[idx[~met]] = flow.id
        links = idx[met]
        return links.tolist(), before[met].tolist(), self.sole[links].tolist()

    def _enter_pooled(self, flow: Occupant) -> tuple[list[int], list[int], list[int]]:
        """:meth:`_enter_counts`, and ``flow`` given a row in the pool: its route, and its
        busy links; the links' sole flows until now gain them as busy links (one kernel:
        ``compiled.pooled_enter``)."""
        if not self._free_rows:
            n = len(self._row_start)
            self._row_start = np.concatenate([self._row_start, np.zeros(n, dtype=np.int64)])
            self._row_length = np.concatenate([self._row_length, np.zeros(n, dtype=np.int64)])
            self._row_busy = np.concatenate([self._row_busy, np.zeros(n, dtype=np.int64)])
            self._free_rows = list(range(2 * n - 1, n - 1, -1))
        row = flow._row = self._free_rows.pop()
        route = flow.route
        n = len(route.idx)
        if self._pool_used + 2 * n > len(self._pool_idx):
            self._compact(2 * n)
        at = self._pool_used
        self._pool_used = at + 2 * n
        met, before, soles = compiled.pooled_enter(
            route.idx, route.mult, flow.id, row, at, self.count, self.sole, self._sole_row,
            self._sole_mult, self._row_start, self._row_length, self._row_busy,
            self._pool_idx, self._pool_mult)
        return met.tolist(), before.tolist(), soles.tolist()

    def _compact(self, room: int) -> None:
        """Move the active flows' rows to the front of a pool with ``room`` to spare (and as
        much again as they hold, so that compactions stay rare)."""
        live = [f._row for f in self.by_id.values()]
        held = 2 * int(self._row_length[live].sum()) if live else 0
        size = max(len(self._pool_idx), 2 * (held + room))
        idx, mult = np.zeros(size, dtype=np.int64), np.zeros(size)
        at = 0
        for row in live:
            old, n = int(self._row_start[row]), 2 * int(self._row_length[row])
            idx[at:at + n] = self._pool_idx[old:old + n]
            mult[at:at + n] = self._pool_mult[old:old + n]
            self._row_start[row] = at
            at += n
        self._pool_idx, self._pool_mult, self._pool_used = idx, mult, at

    # ------------------------------------------------------------------ components

    def split(self, comp: Component, arrays_over: int
              ) -> list[tuple[Component, list[Any], Incidence | None]]:
        """The true components of ``comp`` (itself if it is not stale), each flow relinked:
        each with its flows by id and, when they share more than ``arrays_over`` (flow,
        link) pairs, their :class:`Incidence` (else None)."""
        flows = sorted(comp.flows, key=_by_id)
        entries = sum(map(len, map(_busy_of, flows)))
        incidence = self.incidence(flows) if entries > arrays_over else None
        if not comp.stale or len(flows) == 1:
            comp.stale = False
            return [(comp, flows, incidence)]
        if incidence is None:
            labels = _labels_python(flows, self.on_link)
        else:
            label_array = incidence.labels(len(flows))
            labels = label_array.tolist()
        groups: dict[int, list[Any]] = {}
        for flow, label in zip(flows, labels, strict=True):
            groups.setdefault(label, []).append(flow)
        if len(groups) == 1:
            comp.stale = False
            return [(comp, flows, incidence)]
        out = []
        for label, members in groups.items():
            part = Component(set(members))
            for flow in members:
                flow._component = part
            sub = None if incidence is None else incidence.subset(label_array == label)
            out.append((part, members, sub))
        return out

    def incidence(self, flows: Sequence[Occupant]) -> Incidence:
        """The busy links of ``flows`` (in that order) as arrays."""
        if COMPILED and self._pooled:
            rows = np.fromiter(map(_row_of, flows), dtype=np.int64, count=len(flows))
            return Incidence(*compiled.pooled_incidence(
                rows, self._row_start, self._row_length, self._row_busy, self._pool_idx,
                self._pool_mult, self.cap, self._slot))
        count = self.count
        for f in flows:
            if f._busy_idx is None:
                shared = count[f.route.idx] >= 2
                f._busy_idx, f._busy_mult = f.route.idx[shared], f.route.mult[shared]
        busy = [f._busy_idx for f in flows]
        idx = np.concatenate(busy)
        mult = np.concatenate([f._busy_mult for f in flows])
        owner = np.repeat(np.arange(len(flows)),
                          np.fromiter(map(len, busy), dtype=np.intp, count=len(busy)))
        links, local = self._localize(idx)
        return Incidence(owner, local, mult, self.cap[links])

    def _localize(self, e_link: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The distinct links of ``e_link`` and each entry's index among them (no sort)."""
        slot, n = self._slot, len(e_link)
        order = np.arange(n)
        slot[e_link] = order  # the last entry of each link wins
        links = e_link[slot[e_link] == order]
        slot[links] = np.arange(len(links))
        return links, slot[e_link]


@dataclass(frozen=True)
class Incidence:
    """Flows' busy links as arrays: per (flow, link) pair the flow's position (ascending),
    the link's local index and the multiplicity; and each local link's capacity (bit/s)."""

    flow: np.ndarray
    link: np.ndarray
    mult: np.ndarray
    link_cap: np.ndarray

    def labels(self, n_flows: int) -> np.ndarray:
        """Each flow's component: its smallest member's position (min-label propagation, or
        union-find compiled when ``COMPILED``: the same labels)."""
        if COMPILED:
            return compiled.component_labels(self.flow, self.link, n_flows, len(self.link_cap))
        label = np.arange(n_flows)
        while True:
            on_link = np.full(len(self.link_cap), n_flows)
            np.minimum.at(on_link, self.link, label[self.flow])
            new = label.copy()
            np.minimum.at(new, self.flow, on_link[self.link])
            new = new[new]  # jump to the label's own label
            if np.array_equal(new, label):
                return label
            label = new

    def subset(self, keep: np.ndarray) -> Incidence:
        """The incidence of the flows where ``keep`` (a mask over positions) is true, with
        positions and links renumbered."""
        entries = keep[self.flow]
        position = np.cumsum(keep) - 1
        links = self.link[entries]
        used = np.zeros(len(self.link_cap), dtype=bool)
        used[links] = True
        local = np.cumsum(used) - 1
        return Incidence(position[self.flow[entries]], local[links], self.mult[entries],
                         self.link_cap[used])


# Whether components' labels are found by the compiled kernel (numba installed; tests turn
# it off).
COMPILED = compiled.AVAILABLE
_by_id = operator.attrgetter("id")
_busy_of = operator.attrgetter("_busy")
_row_of = operator.attrgetter("_row")


def _merge(a: Component, b: Component) -> Component:
    """One component of both (the larger absorbs the smaller)."""
    if len(a.flows) < len(b.flows):
        a, b = b, a
    for flow in b.flows:
        flow._component = a
    a.flows |= b.flows
    a.stale = a.stale or b.stale
    return a


def _labels_python(flows: Sequence[Occupant], on_link: dict[int, set[Any]]) -> list[int]:
    """Component label of each flow by search over busy links (small components)."""
    label: dict[Any, int] = {}
    for n, seed in enumerate(flows):
        if seed in label:
            continue
        label[seed] = n
        todo, seen_links = [seed], set()
        while todo:
            flow = todo.pop()
            for link in flow._busy:
                if link in seen_links:
                    continue
                seen_links.add(link)
                for other in on_link[link]:
                    if other not in label:
                        label[other] = n
                        todo.append(other)
    return [label[f] for f in flows]


"""Max-min fair rates by progressive filling: a pure-Python reference and a numpy version.

Pure functions, no I/O. Rates and capacities in bit/s.

Both solve the same problem. Flows share links; a flow crosses each of its links ``k`` times
(``k`` lockstep sub-flows of a bundle), so on a link the sum of ``k x rate`` may not exceed
the capacity; each flow is also limited by its own ``cap``. All unfrozen flows share one water
level; each round the level rises to the next saturation point (a flow's cap or a link) and
the flows there freeze. Saturation is decided with a relative slack of ``RATE_TOL``, so flows
whose limits tie (to that slack) freeze in the same round at the same rate.

:func:`max_min_rates_reference` works on flow objects and dicts, one link at a time: the
slow, obviously-correct statement of the algorithm. :func:`fill_rates` works on a link-flow
incidence in numpy arrays, a round at a time (working on the links of the flows that freeze,
or on all the entries when the component is very large); the network uses it for large
components.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Protocol

import numpy as np

from testbed.sim import compiled

LinkId = Hashable

# Relative slack when deciding which links saturate at the current water level.
RATE_TOL = 1e-12
# Defensive: a round whose level is 0 (a link already full) gives this rate, to make progress.
STALL_RATE_BIT_S = 1e-9


class Capped(Protocol):
    """What progressive filling reads of a flow."""

    cap: float
    links: dict


def max_min_rates_reference(
    flows: Sequence[Capped],
    shared: Mapping[LinkId, float],
    links_of: Callable[[Capped], Iterable[LinkId]] | None = None,
) -> dict[Capped, float]:
    """Progressive filling over ``flows``, one link at a time (the exact reference).

    ``links_of(flow)`` lists the flow's links among ``shared`` (default: all its links,
    filtered); the network passes the links it knows to be shared, to skip the others.

    Each flow is limited by its own ``cap`` (its rate when alone) and by the ``shared``
    links (link -> capacity), on which the sum of multiplicity x rate may not exceed the
    capacity. All unfrozen flows share one water level; at each round the level rises to
    the next saturation point (a flow cap or a shared link) and the flows there freeze.
    """
    rates: dict[Capped, float] = {}
    frozen_load = dict.fromkeys(shared, 0.0)
    weight = dict.fromkeys(shared, 0)
    on_link: dict[LinkId, list[Capped]] = {link: [] for link in shared}
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
            level = STALL_RATE_BIT_S
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


def fill_rates(
    flow_cap: np.ndarray,
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_mult: np.ndarray,
    link_cap: np.ndarray,
) -> np.ndarray:
    """Progressive filling over an incidence in arrays; the rate of every flow (bit/s).

    Flow ``f`` has cap ``flow_cap[f]``; entry ``e`` says that flow ``entry_flow[e]`` crosses
    link ``entry_link[e]`` (of capacity ``link_cap[link]``) ``entry_mult[e]`` times. Indices
    are 0-based and dense; a (flow, link) pair appears at most once. Same rounds, slack and
    rates as :func:`max_min_rates_reference` (to float rounding in the link loads): through
    :func:`fill_rates_rounds` (or its compiled twin when ``COMPILED``), or
    :func:`fill_rates_sparse` when a flows x links matrix would pass ``DENSE_CELLS_MAX``.
    """
    if len(flow_cap) * len(link_cap) <= DENSE_CELLS_MAX:
        if COMPILED:
            return fill_rates_compiled(flow_cap, entry_flow, entry_link, entry_mult, link_cap)
        return fill_rates_rounds(flow_cap, entry_flow, entry_link, entry_mult, link_cap)
    return fill_rates_sparse(flow_cap, entry_flow, entry_link, entry_mult, link_cap)


# Whether :func:`fill_rates` uses the compiled filler (numba installed; tests turn it off).
COMPILED = compiled.AVAILABLE

# Components up to this many flows x links cells are filled by rounds (the bound of the dense
# matrix filler those rounds replaced), larger ones by the sparse filler.
DENSE_CELLS_MAX = 1 << 21


def fill_rates_rounds(
    flow_cap: np.ndarray,
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_mult: np.ndarray,
    link_cap: np.ndarray,
) -> np.ndarray:
    """:func:`fill_rates` a round at a time, each round working only on the links of the
    flows that freeze in it, plus one pass over the links for the level.

    Every flow frozen in a round gets the round's level (the level is at most any unfrozen
    cap), so a link's load rises by the level times the integer count of frozen crossings,
    rounded once: the correctly rounded sum. (The flows x links matrix product this replaced
    summed in BLAS's order: on the 32 768-GPU benchmark it rounded 2 832 of 228 million such
    sums otherwise, and no job's start or finish changed; see BENCHMARKS.md, "The simulator
    at cluster scale".) A link that could carry all its flows
    at their caps with room to spare (``ROOMY``) never holds the level and never freezes a
    flow, so it is left out.
    """
    flow_cap = np.asarray(flow_cap, dtype=float)
    link_cap = np.asarray(link_cap, dtype=float)
    e_flow = np.asarray(entry_flow, dtype=np.intp)
    e_link = np.asarray(entry_link, dtype=np.intp)
    mult = np.asarray(entry_mult, dtype=float)
    n_flows = len(flow_cap)
    weight = np.bincount(e_link, weights=mult, minlength=len(link_cap))  # integer-valued
    tight = link_cap < np.bincount(e_link, weights=mult * flow_cap[e_flow],
                                   minlength=len(link_cap)) * ROOMY
    # Only the tight links, renumbered 0..n_links-1 (the others never bind).
    keep = tight[e_link]
    renumber = np.cumsum(tight) - 1
    e_flow, e_link, mult = e_flow[keep], renumber[e_link[keep]], mult[keep]
    link_cap, weight = link_cap[tight], weight[tight]
    n_links = len(link_cap)
    if len(e_flow) and not (e_flow[1:] >= e_flow[:-1]).all():
        by_flow = np.argsort(e_flow, kind="stable")
        e_flow, e_link, mult = e_flow[by_flow], e_link[by_flow], mult[by_flow]
    bounds = np.searchsorted(e_flow, np.arange(n_flows + 1)).tolist()
    by_link = np.argsort(e_link, kind="stable")
    link_bounds = np.searchsorted(e_link[by_link], np.arange(n_links + 1)).tolist()
    flows_on = e_flow[by_link].tolist()
    e_cap = link_cap[e_link]

    load = np.zeros(n_links)
    headroom = link_cap / weight  # every tight link has a crossing
    rates = [0.0] * n_flows
    caps = flow_cap.tolist()
    by_cap = sorted(range(n_flows), key=caps.__getitem__)
    is_frozen = [False] * n_flows
    next_cap = 0
    left = n_flows
    while left:
        while is_frozen[by_cap[next_cap]]:
            next_cap += 1
        level = caps[by_cap[next_cap]]
        lowest = float(headroom.min()) if n_links else math.inf
        level = max(min(level, lowest), 0.0)
        limit = level * (1 + RATE_TOL) + 1e-300
        frozen = []
        for f in itertools.islice(by_cap, next_cap, None):
            if caps[f] > limit:
                break
            if not is_frozen[f]:
                frozen.append(f)
        if lowest <= limit:
            for link in np.flatnonzero(headroom <= limit).tolist():
                frozen.extend(f for f in flows_on[link_bounds[link]:link_bounds[link + 1]]
                              if not is_frozen[f])
        if len(frozen) > 1:
            frozen = sorted(set(frozen))
        if level == 0.0:
            level = STALL_RATE_BIT_S
        rate, below = level, False  # below: a cap under a stalled level
        for f in frozen:
            is_frozen[f] = True
            if caps[f] < level:
                rates[f] = caps[f]
                below = True
            else:
                rates[f] = level
        mixed = False
        if below:
            distinct = {rates[f] for f in frozen}
            mixed = len(distinct) > 1
            rate = distinct.pop()
        left -= len(frozen)
        if len(frozen) == 1:
            lo, hi = bounds[frozen[0]], bounds[frozen[0] + 1]
            if lo == hi:
                continue
            links, count, cap = e_link[lo:hi], mult[lo:hi], e_cap[lo:hi]
        else:  # a link may be crossed by several: count them all per link
            entries = [slice(bounds[f], bounds[f + 1]) for f in frozen]
            crossed = np.concatenate([e_link[e] for e in entries])
            if not len(crossed):
                continue
            crossings = np.bincount(crossed, weights=np.concatenate([mult[e] for e in entries]),
                                    minlength=n_links)  # integer-valued, exact
            links = np.flatnonzero(crossings)
            count, cap = crossings[links], link_cap[links]
        if not mixed:
            now = load[links] + rate * count
            load[links] = now
        else:  # a cap below the level, within the slack: add each flow's load in turn
            for f in frozen:
                lo, hi = bounds[f], bounds[f + 1]
                load[e_link[lo:hi]] += rates[f] * mult[lo:hi]
            now = load[links]
        w = weight[links] - count
        weight[links] = w
        room = np.full(len(links), np.inf)
        np.divide(cap - now, w, out=room, where=w > 0)
        headroom[links] = room
    return np.asarray(rates)


def fill_rates_compiled(
    flow_cap: np.ndarray,
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_mult: np.ndarray,
    link_cap: np.ndarray,
) -> np.ndarray:
    """:func:`fill_rates_rounds` compiled by numba (:mod:`testbed.sim.compiled`): the same
    rounds and the same floating-point operations in the same order, so the same rates to the
    last bit, without a numpy call per step. Needs numba (``compiled.AVAILABLE``)."""
    if not compiled.AVAILABLE:
        raise RuntimeError("the compiled filler needs numba: pip install -e '.[sim-fast]'")
    as_float = np.ascontiguousarray
    return compiled.fill_rounds(
        as_float(flow_cap, dtype=np.float64), as_float(entry_flow, dtype=np.int64),
        as_float(entry_link, dtype=np.int64), as_float(entry_mult, dtype=np.float64),
        as_float(link_cap, dtype=np.float64), ROOMY, 1 + RATE_TOL, STALL_RATE_BIT_S)


# A link whose capacity is at least this times what its flows would send at their caps is
# never the bottleneck, with room to spare for the rounding of its load.
ROOMY = 1 + 1e-6


def fill_rates_sparse(
    flow_cap: np.ndarray,
    entry_flow: np.ndarray,
    entry_link: np.ndarray,
    entry_mult: np.ndarray,
    link_cap: np.ndarray,
) -> np.ndarray:
    """:func:`fill_rates` on the entries themselves, for incidences too large to hold densely.

    A round costs two passes over the links plus work on the entries of the flows that
    freeze: each link's headroom (capacity left per unfrozen crossing) is kept and redone
    only where a flow froze.
    """
    flow_cap = np.asarray(flow_cap, dtype=float)
    link_cap = np.asarray(link_cap, dtype=float)
    e_flow = np.asarray(entry_flow, dtype=np.intp)
    n_flows, n_links = len(flow_cap), len(link_cap)
    e_link = np.asarray(entry_link, dtype=np.intp)
    mult = np.asarray(entry_mult, dtype=float)
    if len(e_flow) and not (e_flow[1:] >= e_flow[:-1]).all():
        by_flow = np.argsort(e_flow, kind="stable")
        e_flow, e_link, mult = e_flow[by_flow], e_link[by_flow], mult[by_flow]
    flow_start = np.searchsorted(e_flow, np.arange(n_flows + 1))
    by_link = np.argsort(e_link)
    link_start = np.searchsorted(e_link[by_link], np.arange(n_links + 1))

    weight = np.bincount(e_link, weights=mult, minlength=n_links)  # integer-valued, exact
    load = np.zeros(n_links)
    headroom = np.full(n_links, np.inf)
    live = weight > 0
    headroom[live] = link_cap[live] / weight[live]
    rates = np.zeros(n_flows)
    unfrozen = np.ones(n_flows, dtype=bool)
    cap_order = np.argsort(flow_cap, kind="stable")
    next_cap = 0
    left = n_flows
    while left:
        while not unfrozen[cap_order[next_cap]]:
            next_cap += 1
        level = min(float(flow_cap[cap_order[next_cap]]), float(headroom.min(initial=np.inf)))
        level = max(level, 0.0)
        limit = level * (1 + RATE_TOL) + 1e-300
        freeze = np.zeros(n_flows, dtype=bool)
        capped = cap_order[next_cap:][flow_cap[cap_order[next_cap:]] <= limit]
        freeze[capped] = True
        full = np.flatnonzero(headroom <= limit)
        if len(full):
            freeze[e_flow[by_link[_ranges(link_start[full], link_start[full + 1])]]] = True
        freeze &= unfrozen
        if level == 0.0:
            level = STALL_RATE_BIT_S
        frozen = np.flatnonzero(freeze)
        rates[frozen] = np.minimum(level, flow_cap[frozen])
        unfrozen[frozen] = False
        left -= len(frozen)
        entries = _ranges(flow_start[frozen], flow_start[frozen + 1])
        if len(entries):
            links, k = e_link[entries], mult[entries]
            np.subtract.at(weight, links, k)
            np.add.at(load, links, k * rates[e_flow[entries]])
            # Redo the headroom of their links (a link met twice gets the same value twice).
            w = weight[links]
            live = w > 0
            redo = np.full(len(links), np.inf)
            on = links[live]
            redo[live] = (link_cap[on] - load[on]) / w[live]
            headroom[links] = redo
    return rates


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The concatenation of ``range(s, e)`` for each pair."""
    lengths = ends - starts
    total = int(lengths.sum())
    if not total:
        return np.zeros(0, dtype=np.intp)
    shift = np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    return shift + np.arange(total)

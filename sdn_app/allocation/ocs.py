"""OCS-vClos: each job's (leaf, spine) pairs become circuits set up on idle OCS ports.

How circuits are chosen is a *rewiring* strategy (:data:`REWIRINGS`, by name):

* ``any``: direct leaf-leaf circuits for two leaves, else circuits on any idle ports.
* ``conservative``: first the exact search static vClos does, over the *default wiring*
  (:func:`default_circuit`: what static vClos would do on the same leaves), then direct
  circuits, then default circuits topped up with circuits on orphaned spine ports (see
  :func:`orphaned`).
* ``augment``: default and direct circuits as ``conservative``, then :func:`try_augment`.
* ``milp``: RapidNetSim's ``GPUPlacemeter3`` (direct pair, star, whole leaves, blocks), its
  two assignment problems as MILPs that HiGHS solves under time caps, a greedy wiring tried
  first (:mod:`.ocs_exact`); no default wiring. Not an exact search: packing and wiring are
  two stages, at most a few packings are tried, and running circuits never move. Formerly
  called ``exact``, a name still accepted (:data:`RENAMED_REWIRINGS`).

Measured at cluster scale (BENCHMARKS.md), ``any`` scatters spine ports so that later jobs
(whole leaves above all) can no longer be wired and refuses jobs that static vClos places;
``conservative`` rarely rewires at all; ``augment`` removes nearly every refusal for links.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cached_property, lru_cache
from itertools import combinations, islice
from typing import NamedTuple
from weakref import WeakKeyDictionary

import numpy as np

from sdn_app.allocation.ledger import (
    Allocation,
    Circuit,
    Ledger,
    SpinePort,
    bits,
    clos_allocation,
)
from sdn_app.allocation.ocs_exact import (
    Snapshot,
    best_pair,
    block_allocation,
    place_blocks,
    place_exact,
    wire_blocks,
)
from sdn_app.allocation.vclos import bit_mask, bit_rows, peel, search_leaves
from testbed.core import topology

# How many leaf sets ocs-vclos tries (best fit first) before calling a job fragmented.
MAX_OCS_LEAF_SETS = 64

LeafSets = Iterable[Iterable[int]]


# ------------------------------------------------------------ rewiring strategies


class Rewiring(ABC):
    """One way of wiring a cross-leaf job's circuits."""

    name: str

    @abstractmethod
    def place(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaves: list[int] | None
    ) -> Allocation | None:
        """Circuits for m leaves x n hosts, or None; ``leaves`` fixes the leaves."""

    def place_job(
        self, ledger: Ledger, job_id: str, k: int, shapes: list[tuple[int, int]]
    ) -> Allocation | None:
        """A cross-leaf job of k hosts placed jointly (hosts and circuits together): the
        first of ``shapes`` (m leaves x n hosts, in order) that :meth:`place` wires."""
        for m, n in shapes:
            found = self.place(ledger, job_id, m, n, None)
            if found is not None:
                return found
        return None


class AnyRewiring(Rewiring):
    """Direct circuits for two leaves, else circuits on any idle ports."""

    name = "any"

    def place(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaves: list[int] | None
    ) -> Allocation | None:
        found = None
        if m == 2:
            found = try_direct_pair(ledger, job_id, n, None if leaves is None else [tuple(leaves)])
        if found is None:
            leaf_sets = None if leaves is None else [leaves]
            found = try_ocs_spines(ledger, job_id, m, n, leaf_sets, passes=("match",))
        return found


class _DefaultFirst(Rewiring):
    """Default circuits only, then direct circuits, then :meth:`rewire`."""

    def place(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaves: list[int] | None
    ) -> Allocation | None:
        return self._place(ledger, job_id, m, n, leaves, AdmissionView(ledger))

    def place_job(
        self, ledger: Ledger, job_id: str, k: int, shapes: list[tuple[int, int]]
    ) -> Allocation | None:
        """:meth:`Rewiring.place_job`, the ledger read once for all the shapes (a shape that
        fails changes nothing)."""
        view = AdmissionView(ledger)
        for m, n in shapes:
            found = self._place(ledger, job_id, m, n, None, view)
            if found is not None:
                return found
        return None

    def _place(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaves: list[int] | None,
        view: AdmissionView,
    ) -> Allocation | None:
        leaf_sets = None if leaves is None else [leaves]
        found = try_default(ledger, job_id, m, n, leaf_sets, view.masks, view.spine_order)
        if found is None and m == 2:
            found = try_direct_pair(ledger, job_id, n, None if leaves is None else [tuple(leaves)])
        if found is None:
            found = self.rewire(ledger, job_id, m, n, leaf_sets, view)
        return found

    @abstractmethod
    def rewire(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaf_sets: LeafSets | None,
        view: AdmissionView | None = None,
    ) -> Allocation | None:
        """Circuits beyond the default wiring, when it could not serve the job; ``view``:
        the ledger as read for this admission."""


class ConservativeRewiring(_DefaultFirst):
    """Default circuits topped up with circuits on orphaned spine ports only."""

    name = "conservative"

    def rewire(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaf_sets: LeafSets | None,
        view: AdmissionView | None = None,
    ) -> Allocation | None:
        view = AdmissionView(ledger) if view is None else view
        # try_ocs_spines' own refusals without a leaf set to try (too few spines with m idle
        # ports, too few leaves), made before the rewire index is brought up to date: the
        # changes it owes are kept for the next catch-up (each port filed once however often
        # it changed)
        order, idle = view.spine_order
        if len(order) - bisect_left(idle, m) < n:
            return None
        if leaf_sets is None:
            leaves = ocs_leaves_with(ledger, n)
            if len(leaves) < m:
                return None
            leaf_sets = islice(combinations(leaves, m), MAX_OCS_LEAF_SETS)
        return try_ocs_spines(
            ledger, job_id, m, n, leaf_sets, passes=("default", "match"), orphans_only=True,
            index=view.rewire_index(), masks=view.masks, by_idle=view.spine_order)


class AugmentRewiring(_DefaultFirst):
    """Per leaf, default circuits moved along augmenting paths where needed."""

    name = "augment"

    def rewire(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaf_sets: LeafSets | None,
        view: AdmissionView | None = None,
    ) -> Allocation | None:
        return try_augment(ledger, job_id, m, n, leaf_sets,
                           None if view is None else view.augment())


class MilpRewiring(Rewiring):
    """RapidNetSim's ``GPUPlacemeter3``, its assignment problems as time-capped MILPs
    (:mod:`.ocs_exact`); every OCS port starts unconnected."""

    name = "milp"

    def place(
        self, ledger: Ledger, job_id: str, m: int, n: int, leaves: list[int] | None
    ) -> Allocation | None:
        snap = Snapshot.of(ledger)
        if leaves is None:
            return place_blocks(ledger, job_id, snap, m, n)
        blocks = dict.fromkeys(leaves, 1)
        wiring = wire_blocks(ledger, snap, blocks, n)
        return None if wiring is None else block_allocation(ledger, job_id, blocks, n, *wiring)

    def place_job(
        self, ledger: Ledger, job_id: str, k: int, shapes: list[tuple[int, int]]
    ) -> Allocation | None:
        h = k // 2
        snap = Snapshot.of(ledger)
        if k % 2 == 0 and h <= min(ledger.hosts_per_leaf, ledger.ocs_count):
            pair = best_pair(ledger, h, snap)
            if pair is not None:
                return try_direct_pair(ledger, job_id, h, [pair])
        return place_exact(ledger, job_id, k, snap)


REWIRINGS: dict[str, Rewiring] = {
    r.name: r
    for r in (AnyRewiring(), ConservativeRewiring(), AugmentRewiring(), MilpRewiring())
}
# Older names of rewirings -> their names now ("exact" was never an exact search).
RENAMED_REWIRINGS = {"exact": "milp"}
_warned: set[str] = set()


def rewiring_name(name: str) -> str:
    """``name``, or the name an older one has now, with one warning per process on stderr.
    An unknown name is returned as it is, for the caller's own check."""
    new = RENAMED_REWIRINGS.get(name)
    if new is None:
        return name
    if name not in _warned:
        _warned.add(name)
        print(f"warning: rewiring {name!r} is deprecated and now called {new!r} (the same "
              "placement: time-capped MILPs, not an exact search)", file=sys.stderr)
    return new


# ------------------------------------------------------------ placement steps


class AdmissionView:
    """What the shapes of one admission read of the ledger, kept while they are tried (the
    ledger must not change meanwhile: a shape that fails changes nothing): the ledger's
    :class:`KeptState`, brought up to date once, its masks as :class:`DefaultMasks`, the
    conservative :class:`RewireIndex` and augment's :class:`_AugmentView` when first asked
    for."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.kept = kept_state(ledger)
        self.masks = DefaultMasks(ledger, self.kept.masks)
        self._augment: _AugmentView | None = None

    def rewire_index(self) -> RewireIndex:
        return self.kept.rewire_index()

    @cached_property
    def spine_order(self) -> SpineOrder:
        """:func:`spine_order` of the ledger."""
        return spine_order(self.ledger)

    def augment(self) -> _AugmentView:
        if self._augment is None:
            self._augment = _AugmentView(self.ledger, self.kept)
        return self._augment


def try_default(
    ledger: Ledger, job_id: str, m: int, n: int, leaf_sets: LeafSets | None,
    masks: DefaultMasks | None = None, by_idle: SpineOrder | None = None,
) -> Allocation | None:
    """The exact search static vClos does, over the links the default wiring offers.
    ``masks``, ``by_idle``: :class:`DefaultMasks` and :func:`spine_order` of this ledger,
    if already made."""
    masks = DefaultMasks(ledger) if masks is None else masks
    if leaf_sets is None:
        # the leaves only: the default pass below picks its own spines
        leaves = default_leaves(ledger, m, n, masks)
        if leaves is None:
            return None  # no leaf set to wire
        leaf_sets = [leaves]
    return try_ocs_spines(ledger, job_id, m, n, leaf_sets, passes=("default",), masks=masks,
                          by_idle=by_idle)


def default_leaves(ledger: Ledger, m: int, n: int, masks: DefaultMasks) -> list[int] | None:
    """:func:`~sdn_app.allocation.vclos.find_free_leaves` over ``masks`` (this ledger's
    :class:`DefaultMasks`), the same answer, searching only what changed since the last
    search of m x n on this ledger that found nothing.

    That search's masks are kept (``KeptState.misses``). A set of m leaves sharing n
    spines now, each of whose leaves was searched then with a mask holding its mask now,
    would have shared them then: so every such set now holds a leaf that was not searched
    then or whose mask gained a spine, and the search looks only among sets holding one
    (the first in the same order, so the same set as a whole search). Each of its leaves
    shares those n spines with the changed leaf it holds, so only leaves sharing n spines
    with the changed leaves' masks together are searched (most often fewer than m are left,
    and the search ends there). A refused queue head is searched again after every job's
    end; most ends change few leaves' masks."""
    now = {leaf: masks[leaf] for leaf in ledger.leaves_with(n)}
    misses = _kept_of(ledger).misses
    before = misses.get((m, n))
    changed, searched = None, now
    if before is not None:
        changed = {leaf for leaf, mask in now.items() if mask & ~before.get(leaf, 0)}
        reach = 0  # the spines of the changed leaves
        for leaf in changed:
            reach |= now[leaf]
        searched = {leaf: mask for leaf, mask in now.items() if (mask & reach).bit_count() >= n}
    if len(searched) < m:
        leaves = None  # too few leaves could join a set holding a changed one (or none changed)
    else:
        leaves = search_leaves(peel(searched, m, n, ledger.spines), m, n, ledger.spines,
                               changed)
    if leaves is None:
        misses[(m, n)] = now
    else:
        misses.pop((m, n), None)
    return leaves


def ocs_leaves_with(ledger: Ledger, n: int) -> list[int]:
    """Leaves with >= n free hosts and >= n idle OCS ports, best fit first."""
    return [leaf for leaf in ledger.leaves_with(n) if ledger.idle_ocs_mask(leaf).bit_count() >= n]


def try_direct_pair(
    ledger: Ledger, job_id: str, n: int, pairs: Iterable[tuple[int, ...]] | None = None
) -> Allocation | None:
    """Two leaves, n hosts each; host j of leaf a <-> host j of leaf b over circuit j.

    Circuit j is a leaf-leaf circuit on the j-th lowest OCS where both leaves'
    ports are idle. The first pair (best fit order, or of ``pairs``) with n such OCSes
    wins. No spine and no (leaf, spine) link is used.
    """
    if pairs is None:
        pairs = combinations(ocs_leaves_with(ledger, n), 2)
    for a, b in pairs:
        shared = sorted(set(ledger.idle_ocses(a)) & set(ledger.idle_ocses(b)))
        if len(shared) < n:
            continue
        a, b = min(a, b), max(a, b)
        slots = ledger.take_slots((a, b), n)
        circuits = tuple(Circuit(o, ("leaf", a), ("leaf", b)) for o in shared[:n])
        circuit_of = {(leaf, slots[leaf][j]): j for leaf in (a, b) for j in range(n)}
        hosts = tuple((leaf, s) for leaf in (a, b) for s in slots[leaf])
        return Allocation(
            job_id, "ocs-vclos", hosts, (a, b), circuits=circuits, circuit_of=circuit_of
        )
    return None


def try_ocs_spines(
    ledger: Ledger,
    job_id: str,
    m: int,
    n: int,
    leaf_sets: LeafSets | None = None,
    *,
    passes: tuple[str, ...] = ("match",),
    orphans_only: bool = False,
    index: RewireIndex | None = None,
    masks: DefaultMasks | None = None,
    by_idle: SpineOrder | None = None,
) -> Allocation | None:
    """m leaves x n spines; each (leaf, spine) pair realised by one new circuit.

    Leaf sets are tried best fit first (at most MAX_OCS_LEAF_SETS of them), or
    only those of ``leaf_sets``. ``passes`` and ``orphans_only``: see :func:`wire_spines`.
    Only spines with >= m idle ports can serve m leaves; they are tried with
    the fewest idle ports first (keep idle spines for big jobs). ``index``, ``masks`` and
    ``by_idle``: :func:`rewire_index`, :class:`DefaultMasks` and :func:`spine_order` of this
    ledger, if already made.
    """
    order, idle = spine_order(ledger) if by_idle is None else by_idle
    # idle ports rise along the order: the spines with >= m of them are its tail
    spines = order[bisect_left(idle, m):]
    if len(spines) < n:
        return None
    if leaf_sets is None:
        leaf_sets = islice(combinations(ocs_leaves_with(ledger, n), m), MAX_OCS_LEAF_SETS)
    if "match" in passes and orphans_only:
        index = rewire_index(ledger) if index is None else index
    else:
        index = None
    # the ledger does not change while leaf sets are tried
    masks = DefaultMasks(ledger) if masks is None else masks
    if index is not None:
        leaf_sets = [sorted(leaves) for leaves in leaf_sets]
        if _sets_hopeless(leaf_sets, n, spines, passes, index, masks):
            return None
    for leaves in leaf_sets:
        wiring = wire_spines(ledger, sorted(leaves), n, spines, passes, index, orphans_only,
                             masks)
        if wiring is not None:
            spines = sorted(wiring)
            ports = {
                (leaf, j): wiring[s][leaf] for j, s in enumerate(spines) for leaf in leaves
            }
            return clos_allocation(
                job_id, "ocs-vclos", ledger.take_slots(sorted(leaves), n), spines, ports
            )
    return None


SpineOrder = tuple[list[int], list[int]]


def spine_order(ledger: Ledger) -> SpineOrder:
    """Every spine, fewest idle OCS ports first (then lowest), and those counts in that
    order: the order :func:`try_ocs_spines` tries spines in."""
    total = ledger.ocs_count * ledger.spine_ports_per_ocs
    idle = [total - busy for busy in ledger.busy_spine_ports()]
    order = sorted(range(ledger.spines), key=lambda s: (idle[s], s))
    return order, [idle[s] for s in order]


def wire_spines(
    ledger: Ledger,
    leaves: list[int],
    n: int,
    spines: list[int],
    passes: tuple[str, ...] = ("match",),
    index: RewireIndex | None = None,
    orphans_only: bool = False,
    masks: DefaultMasks | None = None,
) -> dict[int, dict[int, tuple[int, int]]] | None:
    """Pick n of ``spines`` (in order) and, for each, one circuit from every leaf.

    Returns ``{spine: {leaf: (ocs, spine_port)}}`` or None.

    Assigning an OCS to every (leaf, spine) pair at once is a 3-index
    assignment problem (NP-hard in general), so this goes spine by spine: for
    each candidate spine, a maximum bipartite matching (Hopcroft-Karp:
    :func:`hopcroft_karp`) between the leaves and the spine's idle ports, where leaf
    ``l`` may take port ``(o, p)`` when its own port on OCS ``o`` is idle and
    not yet used by this job. A spine that cannot serve every leaf is skipped.
    With ``exclusive_ocs_links`` a (leaf, spine) pair held by another job is skipped.

    ``passes`` run in order over the spines not yet taken: ``"default"`` takes spines
    that every leaf reaches by its default circuit (:func:`default_ports`),
    ``"match"`` uses the matching above (with ``orphans_only``, on orphaned spine ports
    only: see :func:`match_leaves_to_spine`). ``index`` (conservative rewiring): only the
    spine ports it leaves open to these leaves are matched (see :func:`rewire_index`).
    ``masks``: :func:`default_spine_mask` of the leaves, if already read of this ledger.
    """
    m = len(leaves)
    candidates = None if index is None else index.ports_for(leaves)
    counts = None if candidates is None else candidates.counts
    # Spines every leaf reaches by an idle default circuit: default_ports serves no other.
    by_default = -1
    if "default" in passes:
        masks = DefaultMasks(ledger) if masks is None else masks
        by_default = masks.shared(leaves)
    if _servable(spines, passes, by_default, candidates, m).bit_count() < n:
        return None  # fewer than n spines any pass could take
    held = ledger.spines_with_held_links()  # only these need their links checked
    used_ocses: dict[int, int] = {}  # leaf -> bit o: its port on OCS o is this job's already
    wiring: dict[int, dict[int, tuple[int, int]]] = {}
    if "default" in passes:  # read once for every spine
        rows, leaf_idle = _default_rows(ledger, leaves), ledger.idle_ocs_masks()
    for kind in passes:
        for spine in spines:
            if spine in wiring or (spine in held and any(
                    not ledger.link_free(leaf, spine) for leaf in leaves)):
                continue
            if kind == "default" and not by_default >> spine & 1:
                continue  # a leaf's default circuit to it cannot be set up: {} below
            if kind == "match" and counts is not None and counts[spine] < m:
                continue  # fewer open ports than leaves: no matching can serve them all
            if kind == "match" and candidates is None and not orphans_only and not can_match(
                    ledger, leaves, spine, used_ocses):
                continue  # a leaf with no port to it, or fewer ports than leaves: no matching
            if kind == "match":
                match = match_leaves_to_spine(
                    ledger, leaves, spine, used_ocses,
                    None if candidates is None else candidates.ports(spine), orphans_only)
            else:
                match = _default_ports(leaves, rows, leaf_idle, ledger.idle_port_row(spine),
                                       spine, used_ocses)
            if len(match) < m:
                continue
            wiring[spine] = match
            for leaf, (ocs, _port) in match.items():
                used_ocses[leaf] = used_ocses.get(leaf, 0) | 1 << ocs
            if len(wiring) == n:
                return wiring
    return None


def _sets_hopeless(leaf_sets: list[list[int]], n: int, spines: list[int],
                   passes: tuple[str, ...], index: RewireIndex, masks: DefaultMasks) -> bool:
    """True when no set of ``leaf_sets`` (each of m leaves) has n spines that
    :func:`wire_spines` could take (:func:`_servable`), bounded for all the sets at once
    from the leaves all of them hold and the others: the default pass can take only spines
    that the shared leaves all reach by default, the match pass only spines with m ports
    open to the set, at most those open to any leaf, those only the shared leaves need, the
    most that m - (shared) other leaves need alone, and those several leaves need, all of
    them among the sets' leaves."""
    if not leaf_sets:
        return True
    m = len(leaf_sets[0])
    shared = set(leaf_sets[0]).intersection(*leaf_sets[1:])
    others = sorted(set().union(*leaf_sets) - shared)
    possible = masks.shared(shared) if "default" in passes else 0
    if "match" in passes:
        bound = index.count_bound(sorted(shared), others, m - len(shared))
        possible |= bit_mask(bound >= m)
    return (possible & _spine_mask(tuple(spines))).bit_count() < n


def _servable(spines: list[int], passes: tuple[str, ...], by_default: int,
              candidates: LeafSetPorts | None, m: int) -> int:
    """Bit s for each of ``spines`` that some pass of :func:`wire_spines` could take: the
    default pass only spines every leaf reaches by default (``by_default``), the match pass
    with ``candidates`` only spines with at least m of them (a port per leaf), without any
    of ``spines``. A necessary condition: the passes check more."""
    possible = 0
    if "default" in passes:
        possible |= by_default
    if "match" in passes:
        possible |= -1 if candidates is None else candidates.spines_with(m)
    return possible & _spine_mask(tuple(spines)) if possible else 0


@lru_cache(maxsize=256)
def _spine_mask(spines: tuple[int, ...]) -> int:
    """Bit s for each of ``spines`` (remembered: one admission's leaf sets share them)."""
    return sum(1 << s for s in spines)


def can_match(ledger: Ledger, leaves: list[int], spine: int, used_ocses: dict[int, int]) -> bool:
    """False when :func:`match_leaves_to_spine` (any port, no candidates) cannot serve every
    leaf: a leaf has no OCS where its port is idle and unused and ``spine`` has an idle port,
    or those OCSes hold fewer idle ports of ``spine`` than there are leaves (Hall's
    condition, necessary only: True does not promise a matching). Cheaper than the matching
    it saves."""
    counts = [ledger.idle_port_count(ocs, spine) for ocs in range(ledger.ocs_count)]
    spine_mask = sum(1 << ocs for ocs, c in enumerate(counts) if c)
    union = 0
    for leaf in leaves:
        usable = ledger.idle_ocs_mask(leaf) & spine_mask & ~used_ocses.get(leaf, 0)
        if not usable:
            return False
        union |= usable
    return sum(counts[ocs] for ocs in bits(union)) >= len(leaves)


def match_leaves_to_spine(
    ledger: Ledger,
    leaves: list[int],
    spine: int,
    used_ocses: dict[int, int],
    candidates: list[tuple[int, int]] | None = None,
    orphans_only: bool = False,
) -> dict[int, tuple[int, int]]:
    """Maximum matching leaf -> idle spine port (ocs, port) on an OCS the leaf can use.

    With ``orphans_only`` (conservative rewiring) a leaf may only take a spine port that no
    other leaf could use by default (see :func:`orphaned`), so rewiring never takes a port
    that a later job needs for a default circuit; without it, it may.

    The matching is :func:`hopcroft_karp`'s, the one networkx's ``hopcroft_karp_matching``
    returns on the graph this function used to build (leaf ints left, ``(ocs, port)`` right,
    edges port by port): ints throughout, so the same state gives the same answer whatever
    PYTHONHASHSEED is. ``used_ocses``: leaf -> bit o when the job holds the leaf's port on
    OCS o already.
    """
    idle = {leaf: ledger.idle_ocs_mask(leaf) for leaf in leaves}
    index = {leaf: i for i, leaf in enumerate(leaves)}
    ports = ledger.idle_spine_ports(spine) if candidates is None else candidates
    adjacency: list[list[int]]  # per leaf, its ports' indices, lowest first
    usable = {leaf: idle[leaf] & ~used_ocses.get(leaf, 0) for leaf in leaves}
    if not orphans_only:
        port_ocs = [ocs for ocs, _port in ports]
        adjacency = [[right for right, ocs in enumerate(port_ocs) if usable[leaf] >> ocs & 1]
                     for leaf in leaves]
    else:
        adjacency = [[] for _ in leaves]
        for right, (ocs, port) in enumerate(ports):
            for leaf in leaves:
                if usable[leaf] >> ocs & 1 and orphaned(ledger, ocs, spine, port, leaf,
                                                        used_ocses):
                    adjacency[index[leaf]].append(right)
    # The leaves in the order networkx's bipartite matching visits them (a set of them).
    order = [index[leaf] for leaf in set(leaves)]
    found = hopcroft_karp(order, adjacency, len(ports))
    matching = {leaf: ports[found[index[leaf]]] for leaf in leaves if found[index[leaf]] >= 0}
    return {leaf: matching[leaf] for leaf in leaves if leaf in matching}


def hopcroft_karp(order: list[int], adjacency: list[list[int]], right_count: int) -> list[int]:
    """A maximum bipartite matching by Hopcroft and Karp: per left node, its right node or -1.

    Left nodes are ``0 .. len(adjacency) - 1``, visited in ``order`` (every one once);
    ``adjacency[v]``: v's right nodes (``0 .. right_count - 1``) in the order tried. The
    steps (breadth-first layers, then depth-first augmenting paths, both in these orders)
    are networkx 3's ``hopcroft_karp_matching``'s, so on the same orders it returns the same
    matching, without a graph of Python objects."""
    inf = float("inf")
    nil = len(adjacency)  # the "unmatched" node: dist[nil] is the shortest augmenting path
    left_match = [-1] * nil
    right_match = [nil] * right_count
    dist: list[float] = [inf] * (nil + 1)

    def layers() -> bool:
        queue: deque[int] = deque()
        for v in order:
            if left_match[v] < 0:
                dist[v] = 0
                queue.append(v)
            else:
                dist[v] = inf
        dist[nil] = inf
        while queue:
            v = queue.popleft()
            if dist[v] < dist[nil]:
                for u in adjacency[v]:
                    w = right_match[u]
                    if dist[w] == inf:
                        dist[w] = dist[v] + 1
                        queue.append(w)
        return dist[nil] != inf

    def path(v: int) -> bool:
        if v == nil:
            return True
        for u in adjacency[v]:
            w = right_match[u]
            if dist[w] == dist[v] + 1 and path(w):
                right_match[u] = v
                left_match[v] = u
                return True
        dist[v] = inf
        return False

    while layers():
        for v in order:
            if left_match[v] < 0:
                path(v)
    return left_match


def try_augment(
    ledger: Ledger, job_id: str, m: int, n: int, leaf_sets: LeafSets | None,
    view: _AugmentView | None = None,
) -> Allocation | None:
    """Circuits for m leaves x n spines, rewired where the default wiring falls short.

    Leaf sets are tried best fit first (at most MAX_OCS_LEAF_SETS), or only those of
    ``leaf_sets``; see :func:`augment_wiring` for the wiring of one set. What every set
    reads of the ledger (which does not change between them) is read once
    (:class:`_AugmentView`; ``view``, if already made of this ledger).
    """
    if leaf_sets is None:
        leaf_sets = islice(combinations(ocs_leaves_with(ledger, n), m), MAX_OCS_LEAF_SETS)
    view = _AugmentView(ledger) if view is None else view
    for leaf_set in leaf_sets:
        leaves = sorted(leaf_set)
        wiring = augment_wiring(ledger, leaves, n, view)
        if wiring is not None:
            spines, ports = wiring
            return clos_allocation(
                job_id, "ocs-vclos", ledger.take_slots(leaves, n), spines, ports)
    return None


def augment_wiring(
    ledger: Ledger, leaves: list[int], n: int, view: _AugmentView | None = None
) -> tuple[list[int], dict[tuple[int, int], tuple[int, int]]] | None:
    """n spines for ``leaves`` and, per leaf, one circuit to each on a distinct OCS.

    The spines are the n that most of the leaves reach by their default circuit (then
    those with the most idle ports: :meth:`_AugmentView.spines_for`). Each leaf in turn gets
    a perfect matching of those spines to OCSes where its own port and a spine port are idle
    (:func:`match_from_default_masks`): its default circuits where possible, rewired along
    augmenting paths where not. Spine ports are shared by the leaves of the job, so a
    leaf only takes what the leaves before it left (:class:`_LeafByLeaf`). Returns
    ``(spines, {(leaf, j): (ocs, port)})`` or None. ``view``: the ledger as read for this
    admission (the ledger must not have changed since it was made).
    """
    view = _AugmentView(ledger) if view is None else view
    spines = view.spines_for(leaves, n)
    if spines is None:
        return None
    matches = view.leaf_by_leaf.match(leaves, spines)
    if matches is None:
        return None
    return spines, pick_ports(ledger, leaves, spines, matches, view)


def pick_ports(
    ledger: Ledger, leaves: list[int], spines: list[int], matches: list[dict[int, int]],
    view: _AugmentView,
) -> dict[tuple[int, int], tuple[int, int]]:
    """``{(leaf, j): (ocs, port)}``: a spine port for each leaf's circuit to ``spines[j]`` on
    the OCS its matching (``matches``, per leaf: spine -> OCS) chose: the leaf's own default
    port if idle, else the one fewest idle leaves need by default, lowest first."""
    idle = _IdlePorts(ledger)  # (ocs, spine) -> its idle ports, lowest first, when first read
    ports: dict[tuple[int, int], tuple[int, int]] = {}
    for leaf, match in zip(leaves, matches, strict=True):
        row = _default_row(leaf, ledger.spines, ledger.ocs_count, ledger.spine_ports_per_ocs)
        for j, spine in enumerate(spines):
            ocs = match[spine]
            free = idle[(ocs, spine)]
            default_ocs, default_port = row[spine]
            own = default_port if ocs == default_ocs else None
            port = own if own in free else free[0] if len(free) == 1 else min(
                free, key=lambda p, o=ocs, s=spine: (view.owner_count(o, s, p), p))
            free.remove(port)
            ports[(leaf, j)] = (ocs, port)
    return ports


class _AugmentView:
    """What :func:`augment_wiring` reads of the ledger, shared by the leaf sets one admission
    tries: its :class:`KeptState` (idle ports per spine and OCS, each leaf's default spines),
    the spines with links held exclusively, each spine port's idle default owners (when first
    asked for) and the last leaf set's matchings (:class:`_LeafByLeaf`)."""

    def __init__(self, ledger: Ledger, kept: KeptState | None = None) -> None:
        self.ledger = ledger
        self.kept = kept_state(ledger) if kept is None else kept
        self.held = ledger.spines_with_held_links()
        self.leaf_by_leaf = _LeafByLeaf(ledger, self.kept)
        self._owners: dict[tuple[int, int, int], int] = {}
        self._spines_with: dict[int, np.ndarray] = {}  # m -> spines with >= m idle ports
        self.total = self.kept.total()  # [spine]: idle ports
        self._key_scale = int(self.total.max(initial=0)) + 1  # above any idle ports

    def spines_for(self, leaves: list[int], n: int) -> list[int] | None:
        """The n spines for ``leaves``, in order, or None (fewer than n can serve them):
        among the spines with at least one idle port per leaf and no link of the leaves held,
        those most leaves reach by default, then those with the most idle ports, then the
        lowest."""
        m, total = len(leaves), self.total
        candidates = self._spines_with.get(m)
        if candidates is None:
            candidates = self._spines_with[m] = np.flatnonzero(total >= m)
        if self.held:
            link_free = self.ledger.link_free
            candidates = candidates[[s not in self.held or all(link_free(lf, s) for lf in leaves)
                                     for s in candidates.tolist()]]
        if len(candidates) < n:
            return None
        reach = self.kept.reach_rows(leaves).sum(axis=0)  # [spine]: leaves reaching it
        # (reach, idle ports) as one key, highest first; equal keys stay lowest spine first
        key = reach[candidates] * self._key_scale + total[candidates]
        best = candidates[np.argsort(-key, kind="stable")[:n]]
        return sorted(best.tolist())

    def owner_count(self, ocs: int, spine: int, port: int) -> int:
        """``len(idle_default_owners(ledger, ocs, spine, port))``."""
        key = (ocs, spine, port)
        count = self._owners.get(key)
        if count is None:
            count = self._owners[key] = len(idle_default_owners(self.ledger, ocs, spine, port))
        return count


class _LeafByLeaf:
    """The leaf-by-leaf matchings (:func:`match_from_default_masks`) of the last leaf set
    :func:`augment_wiring` tried, kept so that the next set on the same spines resumes after
    the leaves both sets begin with instead of matching them again (leaf sets come in
    :func:`itertools.combinations` order, so consecutive sets mostly share their first
    leaves; a failing set matched about ten leaves before one failed).

    A leaf's matching reads only the spines, the leaf (its idle ports, its default circuits)
    and the spine ports the leaves before it took; so the matchings of a set's first leaves
    are those of any set on the same spines that begins with the same leaves, and a set
    that begins with the leaves of a failed set, the one that failed included, fails too.

    A set that would match leaves anew is first counted (:meth:`KeptState.ocs_room`): when
    the OCSes cannot carry its m x n circuits, some leaf would find no matching."""

    def __init__(self, ledger: Ledger, kept: KeptState) -> None:
        self.ledger, self.kept = ledger, kept
        self.counts = kept.counts  # [spine][ocs]: idle ports
        usable = self.initial_usable = kept.usable  # [spine]: bit o when it has a port on o
        self.spines: list[int] = []
        self.leaves: list[int] = []  # matched, in order
        self.matches: list[dict[int, int]] = []  # per matched leaf: spine -> OCS
        self.failed: int | None = None  # the leaf after them that found no matching
        self.usable = usable[:]  # [spine]: bit o when a port on o is left after the leaves
        self.left: dict[int, list[int]] = {}  # spine of the set -> [ocs]: idle ports left

    def match(self, leaves: list[int], spines: list[int]) -> list[dict[int, int]] | None:
        """Per leaf of ``leaves`` in order, its matching of ``spines`` to OCSes, each leaf
        taking a port of each spine that the leaves before it left; None when a leaf has
        none."""
        if spines != self.spines:
            self._restart(spines)
        same = 0  # how many first leaves the two sets share
        for old, new in zip(self.leaves, leaves, strict=False):
            if old != new:
                break
            same += 1
        if (same == len(self.leaves) < len(leaves) and self.failed is not None
                and leaves[same] == self.failed):
            return None
        if len(leaves) - same > 1 and self.kept.ocs_room(leaves, spines) < len(leaves) * len(
                spines):
            return None  # no wiring at all: a leaf would find no matching
        self._rewind(same)
        self.failed = None
        geometry = (self.ledger.spines, self.ledger.ocs_count, self.ledger.spine_ports_per_ocs)
        spines_key, usable = tuple(spines), self.usable
        for leaf in leaves[same:]:
            found = _leaf_matching(geometry, leaf, spines_key, self.ledger.idle_ocs_mask(leaf),
                                   tuple([usable[s] for s in spines]))
            if found is None:
                self.failed = leaf
                return None
            self._take(leaf, found)
        return list(self.matches)

    def _restart(self, spines: list[int]) -> None:
        """Forget every matching: the next set is on other ``spines``."""
        self.spines, self.leaves, self.matches, self.failed = spines, [], [], None
        self.usable = self.initial_usable[:]
        self.left = {spine: self.counts[spine][:] for spine in spines}

    def _take(self, leaf: int, match: dict[int, int]) -> None:
        """Keep ``leaf``'s matching, its ports taken (the last of a spine's on an OCS
        leaves the OCS unusable for the spine)."""
        self.leaves.append(leaf)
        self.matches.append(match)
        left, usable = self.left, self.usable
        for spine, ocs in match.items():
            row = left[spine]
            row[ocs] -= 1
            if not row[ocs]:
                usable[spine] &= ~(1 << ocs)

    def _rewind(self, keep: int) -> None:
        """Forget the matchings after the first ``keep`` leaves, their ports given back."""
        while len(self.leaves) > keep:
            self.leaves.pop()
            for spine, ocs in self.matches.pop().items():
                self.left[spine][ocs] += 1
                self.usable[spine] |= 1 << ocs


@lru_cache(maxsize=4096)
def _default_row(leaf: int, spines: int, ocs_count: int, ports: int
                 ) -> tuple[tuple[int, int], ...]:
    """Per spine, the ``(ocs, spine port)`` of ``leaf``'s default circuit to it, ``(-1, -1)``
    where there is none (:func:`testbed.core.topology.default_circuit`): geometry only."""
    return tuple(topology.default_circuit(leaf, s, ocs_count, ports, spines) or (-1, -1)
                 for s in range(spines))


class _IdlePorts(dict):
    """``(ocs, spine)`` -> a list of the spine's idle ports on that OCS, lowest first, read
    from the ledger when first asked for (a job reads a few of the OCSes x spines)."""

    def __init__(self, ledger: Ledger) -> None:
        super().__init__()
        self.ledger = ledger

    def __missing__(self, key: tuple[int, int]) -> list[int]:
        ports = self[key] = self.ledger.idle_ports_of(*key)
        return ports


def match_from_default(
    spines: list[int],
    ocses: list[int],
    default: Callable[[int], int],
    usable: Callable[[int, int], bool],
) -> dict[int, int] | None:
    """A perfect matching spine -> OCS (one leaf's circuits), or None if there is none.

    ``ocses``: the OCSes where the leaf's port is idle; ``usable(ocs, spine)``: the spine has
    an idle port there. Starts from the default circuits (``default(spine)``) and adds every
    other spine by an augmenting path (Kuhn's algorithm), so default circuits are only moved
    when a spine cannot be reached otherwise.
    """
    open_ocses = set(ocses)
    spine_of: dict[int, int] = {}  # ocs -> spine
    ocs_of: dict[int, int] = {}  # spine -> ocs
    for spine in spines:
        ocs = default(spine)
        if ocs in open_ocses and ocs not in spine_of and usable(ocs, spine):
            spine_of[ocs], ocs_of[spine] = spine, ocs

    def augment(spine: int, seen: set[int]) -> bool:
        options = [o for o in ocses if o not in seen and usable(o, spine)]
        taken = [o for o in options if o in spine_of]
        for ocs in [o for o in options if o not in spine_of] + taken:  # free OCSes first
            if ocs in seen:
                continue
            seen.add(ocs)
            if ocs not in spine_of or augment(spine_of[ocs], seen):
                spine_of[ocs], ocs_of[spine] = spine, ocs
                return True
        return False

    for spine in spines:
        if spine not in ocs_of and not augment(spine, set()):
            return None
    return ocs_of


@lru_cache(maxsize=1 << 14)
def _leaf_matching(geometry: tuple[int, int, int], leaf: int, spines: tuple[int, ...],
                   ocs_mask: int, usable: tuple[int, ...]) -> dict[int, int] | None:
    """:func:`match_from_default_masks` of ``leaf`` (its default circuits of ``geometry``:
    spines, OCSes, ports per spine and OCS), ``usable[j]`` the OCSes where ``spines[j]`` has
    a port left. Remembered: a refused queue head's leaf sets are matched again after every
    job's end, mostly on ports that did not change (the caller must not change the answer).
    """
    row = _default_row(leaf, *geometry)
    return match_from_default_masks(list(spines), ocs_mask, [row[s][0] for s in spines],
                                    dict(zip(spines, usable, strict=True)))


def match_from_default_masks(
    spines: list[int], ocs_mask: int, default_ocses: list[int],
    usable: Sequence[int] | Mapping[int, int],
) -> dict[int, int] | None:
    """:func:`match_from_default` on bit masks, with the same answer: ``ocs_mask``, bit o
    when the leaf's port on OCS o is idle; ``default_ocses[j]``, the OCS of the default
    circuit to ``spines[j]`` (-1: none); ``usable[spine]``, bit o when the spine has an idle
    port on OCS o. OCSes are tried lowest first, unmatched ones before matched ones."""
    spine_of: dict[int, int] = {}  # ocs -> spine
    ocs_of: dict[int, int] = {}  # spine -> ocs
    matched = 0
    for spine, ocs in zip(spines, default_ocses, strict=True):
        if ocs >= 0 and (ocs_mask & usable[spine] & ~matched) >> ocs & 1:
            spine_of[ocs], ocs_of[spine] = spine, ocs
            matched |= 1 << ocs
    seen = 0

    def augment(spine: int) -> bool:
        nonlocal seen, matched
        options = ocs_mask & usable[spine] & ~seen
        free = options & ~matched
        if free:
            low = free & -free
            seen |= low
            matched |= low
            ocs = low.bit_length() - 1
            spine_of[ocs], ocs_of[spine] = spine, ocs
            return True
        for ocs in bits(options):
            if seen >> ocs & 1:
                continue
            seen |= 1 << ocs
            if augment(spine_of[ocs]):
                spine_of[ocs], ocs_of[spine] = spine, ocs
                return True
        return False

    for spine in spines:
        if spine not in ocs_of:
            seen = 0
            if not augment(spine):
                return None
    return ocs_of


# ------------------------------------------------------------ the default wiring


def default_circuit(ledger: Ledger, leaf: int, spine: int) -> tuple[int, int] | None:
    """``(ocs, spine port)`` of the default circuit from ``leaf`` to ``spine`` on this cluster
    (:func:`testbed.core.topology.default_circuit`). Jobs that only use default circuits
    leave the OCS as static vClos would."""
    return topology.default_circuit(
        leaf, spine, ledger.ocs_count, ledger.spine_ports_per_ocs, ledger.spines)


def default_spine_mask(ledger: Ledger, leaf: int) -> int:
    """Bit s is set when ``leaf``'s default circuit to spine s could be set up now
    (its port on that OCS and a port of s on that OCS are idle)."""
    mask = 0
    idle = ledger.idle_ocs_mask(leaf)
    for spine, ocs in _default_ocses(ledger.spines, ledger.ocs_count,
                                     ledger.spine_ports_per_ocs)[leaf]:
        if idle >> ocs & 1 and ledger.idle_port_count(ocs, spine):
            mask |= 1 << spine
    return mask


class DefaultMasks(dict):
    """``leaf`` -> :func:`default_spine_mask` of ``leaf``, read from the ledger (or from
    ``rows``, every leaf's, if given) when first asked for: valid while the ledger does not
    change (one admission's leaf sets)."""

    def __init__(self, ledger: Ledger, rows: list[int] | None = None) -> None:
        super().__init__()
        self.ledger = ledger
        self.rows = rows

    def __missing__(self, leaf: int) -> int:
        mask = self[leaf] = (default_spine_mask(self.ledger, leaf) if self.rows is None
                             else self.rows[leaf])
        return mask

    def shared(self, leaves: Iterable[int]) -> int:
        """The spines every one of ``leaves`` reaches by default (all bits for none)."""
        mask = -1
        for leaf in leaves:
            mask &= self[leaf]
        return mask


@lru_cache(maxsize=16)
def _default_ocses(spines: int, ocs_count: int, ports: int) -> _LeafTable:
    """Per leaf, the ``(spine, ocs)`` of its default circuits (:func:`default_circuit`),
    spines in order: a fabric's geometry, worked out once, not on every admission."""
    return _LeafTable(spines, ocs_count, ports)


class _LeafTable:
    """``table[leaf]``: the ``(spine, ocs)`` of ``leaf``'s default circuits, built per leaf
    when first read."""

    def __init__(self, spines: int, ocs_count: int, ports: int) -> None:
        self.spines, self.ocs_count, self.ports = spines, ocs_count, ports
        self.rows: dict[int, list[tuple[int, int]]] = {}

    def __getitem__(self, leaf: int) -> list[tuple[int, int]]:
        row = self.rows.get(leaf)
        if row is None:
            row = self.rows[leaf] = [
                (spine, found[0]) for spine in range(self.spines)
                if (found := topology.default_circuit(
                    leaf, spine, self.ocs_count, self.ports, self.spines)) is not None]
        return row


def default_ports(
    ledger: Ledger, leaves: list[int], spine: int, used_ocses: dict[int, int]
) -> dict[int, tuple[int, int]]:
    """Each leaf's default circuit to ``spine`` (:func:`default_circuit`; another port of
    the spine on the same OCS if that one is busy), or {} when one of them is busy or the
    job holds it already (``used_ocses``: leaf -> bit o for its port on OCS o)."""
    return _default_ports(leaves, _default_rows(ledger, leaves), ledger.idle_ocs_masks(),
                          ledger.idle_port_row(spine), spine, used_ocses)


def _default_rows(ledger: Ledger, leaves: list[int]) -> list[tuple[tuple[int, int], ...]]:
    """:func:`_default_row` of each of ``leaves`` on this ledger's geometry."""
    geometry = (ledger.spines, ledger.ocs_count, ledger.spine_ports_per_ocs)
    return [_default_row(leaf, *geometry) for leaf in leaves]


def _default_ports(leaves: list[int], rows: list[tuple[tuple[int, int], ...]],
                   leaf_idle: list[int], port_row: list[int], spine: int,
                   used_ocses: dict[int, int]) -> dict[int, tuple[int, int]]:
    """:func:`default_ports` from what the caller read once: the leaves' default rows, every
    leaf's idle OCS mask, ``spine``'s idle port mask per OCS, and per leaf the OCSes whose
    port the job holds already (bit o)."""
    out: dict[int, tuple[int, int]] = {}
    taken: dict[int, int] = {}  # ocs -> bit p for each port (ocs, p) among out's values
    for leaf, row in zip(leaves, rows, strict=True):
        ocs, first = row[spine]
        if ocs < 0 or not (leaf_idle[leaf] & ~used_ocses.get(leaf, 0)) >> ocs & 1:
            return {}
        # The default port, else the lowest other idle one not yet this job's (the default
        # port, when not open, is not among those).
        open_ports = port_row[ocs] & ~taken.get(ocs, 0)
        if not open_ports:
            return {}
        port = first if open_ports >> first & 1 else (open_ports & -open_ports).bit_length() - 1
        out[leaf] = (ocs, port)
        taken[ocs] = taken.get(ocs, 0) | 1 << port
    return out


def orphaned(
    ledger: Ledger, ocs: int, spine: int, port: int, leaf: int, used_ocses: dict[int, int]
) -> bool:
    """True when every leaf other than ``leaf`` whose default circuit to ``spine`` ends
    on spine port ``(ocs, port)`` has its own port on ``ocs`` busy (or there is none); the
    ports the job holds already (``used_ocses``: leaf -> bit o) count as busy."""
    return all(
        owner == leaf or used_ocses.get(owner, 0) >> ocs & 1
        for owner in idle_default_owners(ledger, ocs, spine, port)
    )


def idle_default_owners(ledger: Ledger, ocs: int, spine: int, port: int) -> list[int]:
    """Leaves whose default circuit to ``spine`` ends on its port ``(ocs, port)`` and whose
    own port on ``ocs`` is idle (see :func:`default_circuit`)."""
    owners = _default_owners(ocs, spine, port, ledger.leaves, ledger.ocs_count,
                             ledger.spine_ports_per_ocs, ledger.spines)
    return [owner for owner in owners if ledger.leaf_port_idle(ocs, owner)]


@lru_cache(maxsize=1 << 16)
def _default_owners(ocs: int, spine: int, port: int, leaves: int, ocs_count: int,
                    ports: int, spines: int) -> tuple[int, ...]:
    """:func:`testbed.core.topology.default_circuit_leaves`, remembered: geometry only."""
    return tuple(topology.default_circuit_leaves(ocs, spine, port, leaves, ocs_count, ports,
                                                 spines))


class PortChanges(NamedTuple):
    """Spine and OCS pairs whose idle port masks changed: ``spine[i]``, ``ocs[i]``, the mask
    before (``old[i]``) and now (``new[i]``), as numpy arrays."""

    spine: np.ndarray
    ocs: np.ndarray
    old: np.ndarray
    new: np.ndarray

    def as_tuples(self) -> list[tuple[int, int, int, int]]:
        return list(zip(self.spine.tolist(), self.ocs.tolist(), self.old.tolist(),
                        self.new.tolist(), strict=True))


class PortsSeen:
    """A ledger's idle OCS ports as last read (none before the first read), to tell what
    changed since: ``leaf_masks[leaf]``, :meth:`Ledger.idle_ocs_mask`; ``port_rows[spine,
    ocs]``, :meth:`Ledger.idle_port_mask`, as a numpy array (only the spines whose masks
    changed since, by :meth:`Ledger.port_row_changes`, are read again)."""

    def __init__(self, leaves: int, spines: int, ocs_count: int = 0) -> None:
        self.leaf_masks = [0] * leaves
        self.port_rows = np.zeros((spines, ocs_count), dtype=np.int64)
        self.row_changes: list[int] | None = None  # port_row_changes() when last read

    def update(self, ledger: Ledger
               ) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int, int]]]:
        """Read ``ledger`` again; returns ``(leaf, old mask, new mask)`` of every leaf whose
        idle OCS ports changed since, and ``(spine, ocs, old mask, new mask)`` of every spine
        and OCS whose idle ports did."""
        leaf_changes, port_changes = self.changes(ledger)
        return leaf_changes, port_changes.as_tuples()

    def changes(self, ledger: Ledger) -> tuple[list[tuple[int, int, int]], PortChanges]:
        """:meth:`update`, the port changes as :class:`PortChanges`."""
        idle, row_changes = ledger.idle_ocs_masks(), ledger.port_row_changes()
        leaf_changes = [(leaf, old, new) for leaf, (old, new)
                        in enumerate(zip(self.leaf_masks, idle, strict=True)) if old != new]
        seen = self.row_changes
        spines = (list(range(len(row_changes))) if seen is None else
                  [s for s, (a, b) in enumerate(zip(seen, row_changes, strict=True)) if a != b])
        self.leaf_masks, self.row_changes = idle, row_changes
        if not spines:
            empty = np.zeros(0, dtype=np.int64)
            return leaf_changes, PortChanges(empty, empty, empty, empty)
        rows = [ledger.idle_port_row(spine) for spine in spines]
        dtype = _mask_dtype(ledger.spine_ports_per_ocs)
        if self.port_rows.shape[1] != len(rows[0]) or self.port_rows.dtype != dtype:
            self.port_rows = np.zeros((len(self.port_rows), len(rows[0])), dtype=dtype)
        read = np.asarray(spines)
        new = np.array(rows, dtype=dtype)
        old = self.port_rows[read]
        at, ocs = np.nonzero(old != new)
        self.port_rows[read] = new
        return leaf_changes, PortChanges(read[at], ocs, old[at, ocs], new[at, ocs])


def _mask_dtype(bits: int) -> type:
    """The numpy type that holds masks of ``bits`` bits: int64, or Python ints (object)
    past 62 (a spine with more ports on one OCS)."""
    return np.int64 if bits <= 62 else object


def _popcount(masks: np.ndarray) -> np.ndarray:
    """Set bits of each of ``masks`` (non-negative)."""
    if masks.dtype == object:
        return np.array([int(mask).bit_count() for mask in masks.ravel().tolist()],
                        dtype=np.int64).reshape(masks.shape)
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(masks).astype(np.int64)
    count = np.zeros(masks.shape, dtype=np.int64)
    left = masks.copy()
    while left.any():
        count += left & 1
        left >>= 1
    return count


class KeptState:
    """What OCS-vClos keeps of one ledger between admissions (a queue's head refused for
    links is searched again after every job's end), brought up to date by :meth:`refresh`
    from one read of the ledger (:class:`PortsSeen`) rather than read anew:

    * ``masks[leaf]``: :func:`default_spine_mask` (also as 0/1 rows: :meth:`reach_rows`);
    * ``counts[spine][ocs]``: idle ports (also as numpy rows: :meth:`total`,
      :meth:`ocs_room`); ``usable[spine]``: bit o when ``counts[spine][o]``;
    * the default leaf search's misses (:func:`default_leaves`);
    * the conservative rewiring's :class:`RewireIndex`, made when first asked for
      (:meth:`rewire_index`).

    Readers must not change what they are given."""

    def __init__(self, ledger: Ledger) -> None:
        leaves, spines, ocs_count = ledger.leaves, ledger.spines, ledger.ocs_count
        self.geometry = (leaves, ocs_count, ledger.spine_ports_per_ocs, spines)
        self.seen = PortsSeen(leaves, spines, ocs_count)
        self.masks = [0] * leaves
        # (m, n) -> the default masks of the leaves with n free hosts when the last search
        # for m x n found nothing
        self.misses: dict[tuple[int, int], dict[int, int]] = {}
        # the same, as numpy: an extra leaf row and OCS column never idle (padding)
        self._leaf_idle = np.zeros((leaves + 1, ocs_count + 1), dtype=bool)
        self._on = np.zeros((spines, ocs_count + 1), dtype=bool)  # [spine, ocs]: a port idle
        self._reach = np.zeros((leaves, spines), dtype=np.int64)  # masks[leaf] as 0/1 rows
        self._count_rows = np.zeros((spines, ocs_count), dtype=np.int64)  # counts, as numpy
        self._counts = [[0] * ocs_count for _ in range(spines)]
        self._usable = [0] * spines
        self._lists_stale: set[int] = set()  # spines whose counts and usable lag the rows
        self._index: RewireIndex | None = None

    def refresh(self, ledger: Ledger) -> KeptState:
        """Bring everything up to ``ledger`` now; returns self. A leaf's mask is read again
        only where its own idle ports changed, or where a spine and OCS of one of its
        default circuits turned all busy or no longer all busy (a default circuit needs the
        leaf's port and a spine port on that OCS idle)."""
        leaf_changes, ports = self.seen.changes(ledger)
        tables = _index_tables(*self.geometry)
        stale = [leaf for leaf, _old, _new in leaf_changes]
        if stale:
            self._leaf_idle[stale, :-1] = bit_rows([new for _l, _o, new in leaf_changes],
                                                    self.geometry[1])
        if len(ports.spine):
            self._count_rows[ports.spine, ports.ocs] = _popcount(ports.new)
            self._lists_stale.update(ports.spine.tolist())
            flipped = (ports.old == 0) != (ports.new == 0)
            if flipped.any():
                spine, ocs = ports.spine[flipped], ports.ocs[flipped]
                self._on[spine, ocs] = ports.new[flipped] != 0
                stale += tables.default_users[spine, ocs].ravel().tolist()
        if stale:
            leaves = np.unique(np.asarray(stale))
            leaves = leaves[leaves < len(self.masks)]  # padding dropped
            # default_spine_mask, of the ports kept: the leaf's own port and a port of the
            # spine idle on the OCS of its default circuit to the spine
            ocs = tables.default_ocs[leaves]
            reach = (self._leaf_idle[leaves[:, None], ocs]
                     & self._on[np.arange(self.geometry[3]), ocs])
            self._reach[leaves] = reach
            packed = np.packbits(reach, axis=1, bitorder="little")
            masks = self.masks
            for leaf, row in zip(leaves.tolist(), packed, strict=True):
                masks[leaf] = int.from_bytes(row.tobytes(), "little")
        if self._index is not None:
            self._index.note(leaf_changes, ports)
        return self

    @property
    def counts(self) -> list[list[int]]:
        """``[spine][ocs]``: idle ports."""
        self._write_lists()
        return self._counts

    @property
    def usable(self) -> list[int]:
        """``[spine]``: bit o when the spine has an idle port on OCS o."""
        self._write_lists()
        return self._usable

    def _write_lists(self) -> None:
        """Write ``counts`` and ``usable`` of the spines whose ports changed since."""
        for spine in self._lists_stale:
            row = self._counts[spine] = self._count_rows[spine].tolist()
            self._usable[spine] = sum(1 << ocs for ocs, count in enumerate(row) if count)
        self._lists_stale.clear()

    def reach_rows(self, leaves: list[int]) -> np.ndarray:
        """``[i, spine]``: 1 where ``leaves[i]`` reaches the spine by its default circuit
        now (``masks``, as rows)."""
        return self._reach[leaves]

    def total(self) -> np.ndarray:
        """``[spine]``: its idle ports (a new array)."""
        return self._count_rows.sum(axis=1)

    def ocs_room(self, leaves: list[int], spines: list[int]) -> int:
        """At most how many circuits ``leaves`` and ``spines`` can have: per OCS, the fewer
        of the leaves with an idle port there and the spines' idle ports there (a leaf's port
        carries one circuit, a spine port one)."""
        on_leaves = self._leaf_idle[leaves, :-1].sum(axis=0)
        on_spines = self._count_rows[spines].sum(axis=0)
        return int(np.minimum(on_leaves, on_spines).sum())

    def rewire_index(self) -> RewireIndex:
        """The :class:`RewireIndex` of the ledger as last refreshed."""
        if self._index is None:
            self._index = RewireIndex(self.geometry)
            rows = self.seen.port_rows
            spine, ocs = np.nonzero(rows)
            self._index.note([(leaf, 0, mask) for leaf, mask in enumerate(self.seen.leaf_masks)
                              if mask],
                             PortChanges(spine, ocs, np.zeros_like(spine), rows[spine, ocs]))
        self._index.catch_up()
        return self._index


def kept_state(ledger: Ledger) -> KeptState:
    """The :class:`KeptState` of ``ledger``, brought up to it now (one per ledger)."""
    return _kept_of(ledger).refresh(ledger)


def _kept_of(ledger: Ledger) -> KeptState:
    """The :class:`KeptState` of ``ledger`` (made if none), as last refreshed."""
    kept = _KEPT.get(ledger)
    if kept is None:
        kept = _KEPT[ledger] = KeptState(ledger)
    return kept


_KEPT: WeakKeyDictionary[Ledger, KeptState] = WeakKeyDictionary()


def rewire_index(ledger: Ledger) -> RewireIndex:
    """Idle spine ports by the leaves whose idle default circuits would need them, read anew
    (:meth:`KeptState.rewire_index` keeps one up to date instead).

    A port whose default owners all have their own port on that OCS busy is open to any
    leaf; one that an idle owner still needs is open only to a job holding that owner.
    """
    index = RewireIndex((ledger.leaves, ledger.ocs_count, ledger.spine_ports_per_ocs,
                         ledger.spines))
    seen = PortsSeen(ledger.leaves, ledger.spines, ledger.ocs_count)
    index.note(*seen.changes(ledger))
    index.catch_up()
    return index


@lru_cache(maxsize=16)
def _owner_table(leaves: int, ocs_count: int, ports: int, spines: int
                 ) -> list[list[list[tuple[int, ...]]]]:
    """``[spine][ocs][port]``: the leaves whose default circuit to the spine ends on that port
    (:func:`_default_owners`): a fabric's geometry, worked out once."""
    return [[[_default_owners(ocs, spine, port, leaves, ocs_count, ports, spines)
              for port in range(ports)] for ocs in range(ocs_count)] for spine in range(spines)]


class _IndexTables:
    """A fabric's geometry as numpy tables for :class:`KeptState` and :class:`RewireIndex`,
    worked out once. A spine port ``(ocs, spine, port)`` is numbered ``(ocs * spines + spine)
    * ports + port``; ``owners[f]``: its default owners (:func:`_owner_table`), padded with
    the leaf count (a leaf that is never idle); ``owned[leaf, ocs]``: the ports of which the
    leaf is a default owner on that OCS, padded with the port count (a port no spine has);
    ``default_ocs[leaf, spine]``: the OCS of the leaf's default circuit to the spine (the OCS
    count for none); ``default_users[spine, ocs]``: the leaves whose default circuit to the
    spine is on that OCS (padded with the leaf count)."""

    def __init__(self, leaves: int, ocs_count: int, ports: int, spines: int) -> None:
        table = _owner_table(leaves, ocs_count, ports, spines)
        count = ocs_count * spines * ports
        flat = np.arange(count)
        self.port_ocs, rest = np.divmod(flat, spines * ports)
        self.port_spine, self.port_port = np.divmod(rest, ports)
        width = max(1, max((len(owners) for row in table for per_port in row
                            for owners in per_port), default=1))
        self.owners = np.full((count, width), leaves, dtype=np.int64)
        owned: list[list[list[int]]] = [[[] for _ in range(ocs_count)] for _ in range(leaves)]
        for ocs in range(ocs_count):
            for spine in range(spines):
                for port, owners in enumerate(table[spine][ocs]):
                    f = (ocs * spines + spine) * ports + port
                    self.owners[f, :len(owners)] = owners
                    for owner in owners:
                        owned[owner][ocs].append(f)
        depth = max(1, max((len(fs) for row in owned for fs in row), default=1))
        self.owned = np.full((leaves, ocs_count, depth), count, dtype=np.int64)
        for leaf, row in enumerate(owned):
            for ocs, fs in enumerate(row):
                self.owned[leaf, ocs, :len(fs)] = fs
        # [spine]: its ports, OCS then port (the order :meth:`LeafSetPorts.ports` lists them)
        self.of_spine = (np.arange(ocs_count)[:, None] * spines * ports
                         + np.arange(ports)[None, :]).ravel()
        self.default_ocs = np.full((leaves, spines), ocs_count, dtype=np.int64)
        by_leaf = _default_ocses(spines, ocs_count, ports)
        for leaf in range(leaves):
            for spine, ocs in by_leaf[leaf]:
                self.default_ocs[leaf, spine] = ocs
        users = [[sorted({owner for owners in table[spine][ocs] for owner in owners})
                  for ocs in range(ocs_count)] for spine in range(spines)]
        wide = max(1, max((len(u) for row in users for u in row), default=1))
        self.default_users = np.full((spines, ocs_count, wide), leaves, dtype=np.int64)
        for spine, row in enumerate(users):
            for ocs, found in enumerate(row):
                self.default_users[spine, ocs, :len(found)] = found


@lru_cache(maxsize=16)
def _index_tables(leaves: int, ocs_count: int, ports: int, spines: int) -> _IndexTables:
    return _IndexTables(leaves, ocs_count, ports, spines)


_BUSY, _OPEN, _ONE, _SEVERAL = -1, 0, 1, 2  # how a port is filed: RewireIndex.kind


class RewireIndex:
    """Idle spine ports grouped by the set of idle default owners ("blockers") they have, as
    of the ledger changes it was last told of (:meth:`note`) and caught up with
    (:meth:`catch_up`): per port its ``kind`` (busy, open to any leaf, one blocker, several)
    and ``blocker`` (the one, or the lowest), counted per spine (``open_count``) and per leaf
    and spine (``blocker_count``); ports with several blockers listed by their lowest."""

    def __init__(self, geometry: tuple[int, int, int, int]) -> None:
        leaves, ocs_count, ports, spines = geometry
        self.geometry = geometry  # leaves, OCSes, ports per spine and OCS, spines
        self.tables = _index_tables(*geometry)
        count = ocs_count * spines * ports
        self.leaf_idle = np.zeros((leaves + 1, ocs_count), dtype=bool)  # as told by note
        self.port_idle = np.zeros(count + 1, dtype=bool)
        self.kind = np.full(count + 1, _BUSY, dtype=np.int8)  # as filed
        self.blocker = np.full(count + 1, -1, dtype=np.int64)
        self.open_count = np.zeros(spines, dtype=np.int64)  # [spine]: ports open to any leaf
        # [leaf, spine]: ports that only that leaf needs
        self.blocker_count = np.zeros((leaves, spines), dtype=np.int64)
        # ports several leaves need, by their lowest blocker (a job holds them all only if it
        # holds that one): leaf -> port -> its blockers
        self.shared_by_least: dict[int, dict[SpinePort, frozenset[int]]] = {}
        self._owed: list[np.ndarray] = []  # ports to file again (:meth:`catch_up`)

    def note(self, leaf_changes: list[tuple[int, int, int]], port_changes: PortChanges) -> None:
        """Note what changed in the ledger (as :meth:`PortsSeen.update` tells it): the spine
        ports that turned idle or busy, and those of which a leaf whose own port on that OCS
        turned idle or busy is a default owner, are to be filed again."""
        _leaves, ocs_count, ports, spines = self.geometry
        if leaf_changes:
            leaves, old, new = zip(*leaf_changes, strict=True)
            rows = list(leaves)
            self.leaf_idle[rows] = bit_rows(list(new), ocs_count)
            flipped = bit_rows([a ^ b for a, b in zip(old, new, strict=True)], ocs_count)
            at, ocses = np.nonzero(flipped)
            self._owed.append(self.tables.owned[np.asarray(rows)[at], ocses].ravel())
        if len(port_changes.spine):
            flat = ((port_changes.ocs * spines + port_changes.spine) * ports)[:, None] \
                + np.arange(ports)
            bit = np.array([1 << port for port in range(ports)], dtype=_mask_dtype(ports))
            self.port_idle[flat] = port_changes.new[:, None] & bit != 0
            self._owed.append(flat[(port_changes.old ^ port_changes.new)[:, None] & bit != 0])

    def catch_up(self) -> None:
        """File again every port noted since, as of the changes noted."""
        if not self._owed:
            return
        tables, count = self.tables, len(self.kind) - 1
        owed = np.unique(np.concatenate(self._owed))
        self._owed.clear()
        owed = owed[owed < count]
        if not len(owed):
            return
        spine = tables.port_spine[owed]
        self._count(owed, spine, -1)
        owners = tables.owners[owed]
        idle = self.leaf_idle[owners, tables.port_ocs[owed][:, None]]  # the blockers
        blockers = idle.sum(axis=1)
        padding = self.leaf_idle.shape[0] - 1  # above every leaf: out of the lowest's way
        # 0, 1 or more blockers: _OPEN, _ONE, _SEVERAL
        self.kind[owed] = np.where(self.port_idle[owed], np.minimum(blockers, _SEVERAL), _BUSY)
        self.blocker[owed] = np.where(blockers > 0, np.where(idle, owners, padding).min(axis=1),
                                      -1)
        self._count(owed, spine, 1)
        for f, row, row_idle in zip(owed[self.kind[owed] == _SEVERAL].tolist(),
                                    owners[self.kind[owed] == _SEVERAL],
                                    idle[self.kind[owed] == _SEVERAL], strict=True):
            shared = frozenset(row[row_idle].tolist())
            self.shared_by_least.setdefault(min(shared), {})[self._port(f)] = shared

    def _count(self, ports: np.ndarray, spine: np.ndarray, sign: int) -> None:
        """Add ``sign`` for each of ``ports`` (of ``spine``) as now filed to the counts
        (taking out those with several blockers when ``sign`` is -1)."""
        kind, blocker = self.kind[ports], self.blocker[ports]
        self.open_count += sign * np.bincount(spine[kind == _OPEN],
                                              minlength=len(self.open_count))
        one = kind == _ONE
        np.add.at(self.blocker_count, (blocker[one], spine[one]), sign)
        if sign < 0:
            for f, least in zip(ports[kind == _SEVERAL].tolist(),
                                blocker[kind == _SEVERAL].tolist(), strict=True):
                del self.shared_by_least[least][self._port(f)]

    def _port(self, f: int) -> SpinePort:
        """Port number ``f`` as ``(ocs, spine, port)``."""
        tables = self.tables
        return (int(tables.port_ocs[f]), int(tables.port_spine[f]), int(tables.port_port[f]))

    def count_bound(self, shared: list[int], others: list[int], picks: int) -> np.ndarray:
        """``[spine]``: no fewer than :meth:`ports_for` ``(...).counts`` of any set of the
        ``shared`` leaves and ``picks`` of ``others``: its ports open to any leaf, those only
        one leaf of ``shared`` needs, the most that ``picks`` of ``others`` need alone, and
        those several leaves all among them need."""
        bound = self.open_count + self.blocker_count[shared].sum(axis=0)
        if picks > 0 and others:
            rows = self.blocker_count[others]
            if picks == 1:  # the first leaf sets tried differ in their last leaf alone
                bound = bound + rows.max(axis=0)
            elif picks < len(others):
                bound = bound + (-np.partition(-rows, picks - 1, axis=0)[:picks]).sum(axis=0)
            else:
                bound = bound + rows.sum(axis=0)
        among = {*shared, *others}
        for leaf in among:
            for (_ocs, spine, _port), blockers in self.shared_by_least.get(leaf, {}).items():
                if blockers <= among:
                    bound[spine] += 1
        return bound

    def ports_for(self, leaves: Iterable[int]) -> LeafSetPorts:
        """The (ocs, port)s of each spine a job on ``leaves`` may take (blockers all its
        own): counted per spine at once, listed per spine when first asked for."""
        leaf_set = set(leaves)
        counts = self.open_count + self.blocker_count[sorted(leaf_set)].sum(axis=0)
        shared: dict[int, list[tuple[int, int]]] = {}
        for leaf in leaf_set:
            for (ocs, spine, port), blockers in self.shared_by_least.get(leaf, {}).items():
                if blockers <= leaf_set:
                    shared.setdefault(spine, []).append((ocs, port))
                    counts[spine] += 1
        return LeafSetPorts(self, leaf_set, shared, counts)


class LeafSetPorts:
    """Per spine, the ports a job on some leaves may take (:meth:`RewireIndex.ports_for`):
    the ports open to any leaf and those only its leaves need, merged when first read."""

    def __init__(self, index: RewireIndex, leaves: set[int],
                 shared: dict[int, list[tuple[int, int]]], counts: np.ndarray) -> None:
        self.index, self.leaves, self.shared = index, leaves, shared
        self._counts = counts  # [spine]: how many ports of it the job may take
        self.merged: dict[int, list[tuple[int, int]]] = {}

    @cached_property
    def counts(self) -> list[int]:
        """``[spine]``: how many ports of it the job may take."""
        return self._counts.tolist()

    def spines_with(self, m: int) -> int:
        """Bit s when the job may take at least m ports of spine s."""
        return bit_mask(self._counts >= m)

    def ports(self, spine: int) -> list[tuple[int, int]]:
        """Those ports, ``(ocs, port)`` lowest first (not to be changed by the caller)."""
        ports = self.merged.get(spine)
        if ports is None:
            index = self.index
            tables = index.tables
            flat = tables.of_spine + spine * index.geometry[2]
            kind, blocker = index.kind[flat], index.blocker[flat]
            mine = (kind == _OPEN) | ((kind == _ONE) & np.isin(blocker, list(self.leaves)))
            taken = flat[mine]
            ports = list(zip(tables.port_ocs[taken].tolist(), tables.port_port[taken].tolist(),
                             strict=True))
            if spine in self.shared:
                ports = sorted([*ports, *self.shared[spine]])
            self.merged[spine] = ports
        return ports

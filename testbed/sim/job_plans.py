"""How a placed job of the cluster simulator communicates: a :class:`JobPlan` built from the
collective's own steps and the routing policy's paths.

Any collective of :data:`~testbed.core.registry.COLLECTIVES` (an All-Reduce) or
:data:`~testbed.core.registry.ALLTOALLS` (an all-to-all), built in or a plug-in, runs here
without edits: its ``transfers`` give the synchronous steps as ``(src position, dst position,
bytes)`` over the job's hosts in :func:`rank_order`, and the job's policy
(:meth:`~sdn_app.policies.base.RoutingPolicy.path`) routes every transfer. One more name is the
cluster simulator's own, :data:`RAIL_RING` (see :func:`job_plan`).

Abstraction for scale: steps that use the same flows (the same (src, dst) pairs) are one
lockstep *bundle* carrying their summed bytes (a ring's 2(n-1) steps are one bundle;
halving-doubling's Reduce-Scatter and All-Gather rounds of one distance are one), in the order
the flows are first used; the bundles of one such group of steps that carry different bytes
run side by side. A bundle whose hosts send to several peers at once (all-pairs) is
aggregated: each host link once, weighted by its flows, and each distinct fabric path weighted
by the flows taking it (a hashed policy draws each flow's spine uniformly, as a hash of a
random source port does).
"""

from __future__ import annotations

import functools
import itertools
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from sdn_app.allocation.ledger import Allocation, LeafSlot
from sdn_app.policies import RoutingPolicy, applicable
from sdn_app.policies import get as get_policy
from sdn_app.policies.base import HOST_LINKS, via_spine
from testbed.core.errors import FabricLabError
from testbed.core.ports import SPORTS
from testbed.core.registry import ALLTOALLS, COLLECTIVES
from testbed.sim.flows import LinkId, Network
from testbed.sim.occupancy import link_loads
from workloads.collectives import Collective

Pair = tuple[int, int]  # (src position, dst position)
Path = Sequence[LinkId]  # a flow's links in order (a list, or an aggregated step's tuple)

# The rail All-Reduce vClos is built for (see job_plan): the cluster simulator's own collective.
RAIL_RING = "rail-ring"
# Older spellings still accepted (a run's --collective, a sweep's or a trace's collective).
ALIASES = {"hierarchical": RAIL_RING, "all-to-all": "all-pairs"}


def cluster_policy(name: str) -> RoutingPolicy:
    """The registered policy ``name``, if it routes a leaf-spine or an OCS fabric."""
    known = [n for kind in ("leaf_spine", "ocs_leaf_spine")
             for n in applicable(kind, simulator=True)]
    if name not in known:
        raise FabricLabError(f"--policy {name!r} is not a leaf-spine routing policy; use one "
                             f"of {', '.join(known)}")
    return get_policy(name)


def host_path(
    alloc: Allocation, src: LeafSlot, dst: LeafSlot, spines: int, sport: int = 0
) -> list[LinkId]:
    """Directed links from ``src`` to ``dst`` for a job placed by ``alloc``: its policy's."""
    return get_policy(alloc.policy).path(alloc, src, dst, spines, sport)


def cluster_collectives() -> list[str]:
    """Every collective a cluster run or one of its jobs may name (aliases aside)."""
    return [RAIL_RING, *COLLECTIVES.names(), *ALLTOALLS.names()]


def cluster_collective(name: str) -> str:
    """``name``, or the name an older spelling now has; one sentence if it is unknown."""
    name = ALIASES.get(name, name)
    if name != RAIL_RING and name not in COLLECTIVES.names() and name not in ALLTOALLS.names():
        raise FabricLabError(f"collective {name!r} is unknown; use one of "
                             f"{', '.join(cluster_collectives())}")
    return name


@dataclass(frozen=True, eq=False)
class Bundle:
    """Flows of one collective that move in lockstep: position pairs ``src[i] -> dst[i]``,
    each carrying ``share`` of the input per rank; ``fans_out``: a position sends to several
    peers at once (the bundle is then aggregated, see the module docstring)."""

    share: Fraction
    src: np.ndarray
    dst: np.ndarray
    fans_out: bool

    @functools.cached_property
    def pairs(self) -> list[Pair]:
        return list(zip(self.src.tolist(), self.dst.tolist(), strict=True))


@dataclass(frozen=True)
class Shape:
    """A collective on ``n`` ranks as the cluster simulator runs it: phases one after the
    other, each of bundles side by side; ``host_share``: the most any position sends or
    receives, as a share of the input per rank (a one-leaf job's bound)."""

    phases: list[list[Bundle]]
    host_share: Fraction


def collective_shape(name: str, n: int) -> Shape:
    """The :class:`Shape` of collective ``name`` (canonical) on ``n`` ranks, from its steps:
    the All-Reduce of :data:`COLLECTIVES`, else the all-to-all of :data:`ALLTOALLS` (whose
    group limit is its data check's, which the simulator does not run)."""
    if name in COLLECTIVES.names():
        algorithm = COLLECTIVES.get(name)
        if reason := algorithm.group_size_error(n):
            raise FabricLabError(f"collective {name}: {reason}")
    else:
        algorithm = ALLTOALLS.get(name)
    return _shape(algorithm, n)


@functools.lru_cache(maxsize=256)
def _shape(algorithm: Any, n: int) -> Shape:
    if n < 2:
        return Shape([], Fraction(0))
    steps = (algorithm.transfers("AR", n, Fraction(1)) if isinstance(algorithm, Collective)
             else algorithm.transfers(n, Fraction(1)))
    runs: list[list[Any]] = []  # equal consecutive steps (a ring's are), counted once
    previous = None
    for step in steps:
        # against the step before, not the run's first: copies of one step share their
        # transfers, so comparing them takes no arithmetic
        if runs and step == previous:
            runs[-1][1] += 1
        else:
            runs.append([step, 1])
        previous = step
    groups: dict[frozenset[Pair], dict[Pair, Fraction]] = {}
    sent, got = [Fraction(0)] * n, [Fraction(0)] * n
    for step, k in runs:
        pairs: dict[Pair, Fraction] = {}
        for a, b, nbytes in step:
            if nbytes and a != b:
                pairs[(a, b)] = pairs.get((a, b), Fraction(0)) + Fraction(nbytes) * k
        group = groups.setdefault(frozenset(pairs), {})
        for (a, b), f in pairs.items():
            group[(a, b)] = group.get((a, b), Fraction(0)) + f
            sent[a] += f
            got[b] += f
    phases = []
    for group in groups.values():
        by_share: dict[Fraction, list[Pair]] = {}
        for pair, f in group.items():
            by_share.setdefault(f, []).append(pair)
        phases.append([Bundle(f, np.array([a for a, _ in p], dtype=np.int64),
                              np.array([b for _, b in p], dtype=np.int64),
                              len({a for a, _ in p}) < len(p))
                       for f, p in by_share.items() if p])
    return Shape([p for p in phases if p], max(*sent, *got))


StepRuns = tuple[tuple[int, np.ndarray, np.ndarray], ...]


@functools.lru_cache(maxsize=16)  # a pairwise all-to-all's steps hold n² pairs: few kept
def step_runs(name: str, n: int) -> StepRuns:
    """Collective ``name``'s synchronous steps on ``n`` ranks as runs of equal ones: (how
    many, src positions, dst positions), the pairs that move bytes (what delays are paid on)."""
    algorithm = COLLECTIVES.get(name) if name in COLLECTIVES.names() else ALLTOALLS.get(name)
    steps = (algorithm.transfers("AR", n, Fraction(1)) if isinstance(algorithm, Collective)
             else algorithm.transfers(n, Fraction(1)))
    runs: list[list[Any]] = []
    for step in steps:
        pairs = [(a, b) for a, b, nbytes in step if nbytes and a != b]
        if not pairs:
            continue
        if runs and pairs == runs[-1][0]:
            runs[-1][1] += 1
        else:
            runs.append([pairs, 1])
    return tuple((k, np.array([a for a, _ in p], dtype=np.int64),
                  np.array([b for _, b in p], dtype=np.int64)) for p, k in runs)


@dataclass(frozen=True)
class JobPlan:
    """How one placed job communicates, per iteration.

    ``intra_s``: time of the intra-leaf Reduce-Scatter plus All-Gather (or of the whole
    collective of a one-leaf job), never contended (host links belong to the job).
    ``rails``: the cross-leaf bundles, each a list of flow paths; ``rail_bytes``: bytes each
    flow of a bundle carries per iteration.
    """

    intra_s: float
    rails: list[list[Path]]
    rail_bytes: list[float]
    phases: list[list[int]] | None = None  # rails run in these groups, one after the other
    weights: list[list[int] | None] | None = None  # per rail: sub-flows on each of its paths
    # per iteration, the propagation delay its steps pay: each step its longest path's
    # one-way delay (LinkDelays), added to the iteration's time (0: perfect wires)
    latency_s: float = 0.0

    @property
    def flows(self) -> int:
        """Cross-leaf flows; a weighted (aggregated) rail's fabric paths count one each."""
        return sum(len(r) if self.rail_weights(j) is None
                   else sum(1 for p in r if p[0][0] not in HOST_LINKS)
                   for j, r in enumerate(self.rails))

    def rail_weights(self, j: int) -> list[int] | None:
        return self.weights[j] if self.weights is not None else None

    @property
    def phase_rails(self) -> list[list[int]]:
        """Indices of the rails of each phase; by default all rails at once."""
        return self.phases if self.phases is not None else [list(range(len(self.rails)))]


@dataclass(frozen=True)
class LinkDelays:
    """One-way delays (s) of the cluster's links: every host link, and every link above the
    leaves (leaf-spine or circuit). A path within a leaf crosses two host links; across
    leaves, two host links and two uplinks."""

    host_link_s: float = 0.0
    uplink_s: float = 0.0

    def path_s(self, cross_leaf: bool) -> float:
        return 2 * self.host_link_s + (2 * self.uplink_s if cross_leaf else 0.0)

    def steps_s(self, name: str, leaf_of: np.ndarray) -> float:
        """What collective ``name``'s steps over ranks on leaves ``leaf_of`` (by position)
        pay: each step its longest path's delay, once."""
        if not (self.host_link_s or self.uplink_s) or len(leaf_of) < 2:
            return 0.0
        return sum(k * self.path_s(bool((leaf_of[src] != leaf_of[dst]).any()))
                   for k, src, dst in step_runs(name, len(leaf_of)))


NO_DELAYS = LinkDelays()


def rails_of(alloc: Allocation, wrap: bool = True) -> list[list[LeafSlot]]:
    """Rail j: the j-th host of every leaf of the job. A leaf with only k hosts serves rail j
    with host j mod k (``wrap``) or is left out of it (``wrap=False``)."""
    by_leaf: dict[int, list[int]] = {}
    for leaf, slot in sorted(alloc.hosts):
        by_leaf.setdefault(leaf, []).append(slot)
    leaves = sorted(by_leaf.items())
    n_max = max(len(v) for v in by_leaf.values())
    return [
        [(leaf, slots[j % len(slots)]) for leaf, slots in leaves if wrap or j < len(slots)]
        for j in range(n_max)
    ]


def rank_order(alloc: Allocation) -> list[LeafSlot]:
    """Rank order: host j of every leaf in turn (rail-major), so every hop of a cross-leaf
    ring crosses the fabric, as with a topology-oblivious rank order."""
    return [h for rail in rails_of(alloc, wrap=False) for h in rail]


def skip_sports(rng: random.Random, count: int) -> None:
    """Advance ``rng`` exactly as ``count`` calls of ``rng.randrange(*SPORTS)`` would, without
    making them: each call takes 32-bit words of the generator until one's top bits fall in
    the range (``random.Random._randbelow``), and ``getrandbits(32 * w)`` takes ``w`` words,
    lowest first. Words are taken ``count`` minus the accepted ones at a time, so the last
    batch ends on the ``count``-th accepted word (``tests/test_job_plans.py`` compares the
    generator's state with the calls')."""
    width = SPORTS[1] - SPORTS[0]
    shift = 32 - width.bit_length()
    while count > 0:
        words = np.frombuffer(rng.getrandbits(32 * count).to_bytes(4 * count, "little"),
                              dtype="<u4")
        count -= int(np.count_nonzero((words >> shift) < width))


class _Router:
    """Paths for one job's flows: its policy's (ECMP source ports drawn from ``rng``), or,
    ``ideal``, the flow leaving host j of a leaf through spine j mod spines, or the least used
    spine where that collides (the isolated reference)."""

    def __init__(self, alloc: Allocation, spines: int, rng: random.Random | None,
                 ideal: bool, index: dict[LeafSlot, int]) -> None:
        self.alloc, self.spines, self.rng, self.ideal = alloc, spines, rng, ideal
        self.policy = get_policy(alloc.policy)
        self.index = index  # host -> its rail
        self.up: dict[int, list[int]] = {}  # per leaf: flows each spine carries up / down
        self.down: dict[int, list[int]] = {}
        # A policy without per-flow paths ignores the source port: its flows are routed with
        # port 0 and the ports they would draw are skipped at once (skip_sports).
        self.ports_ignored = not ideal and not self.policy.per_flow_paths

    def _ideal_spine(self, src: LeafSlot, dst: LeafSlot) -> int:
        """Spine j for host j when its links are still unused, else the least used spine
        (the lowest numbered of those)."""
        u = self.up.setdefault(src[0], [0] * self.spines)
        d = self.down.setdefault(dst[0], [0] * self.spines)
        s = self.index[src] % self.spines
        if u[s] + d[s]:
            loads = [a + b for a, b in zip(u, d, strict=True)]
            s = loads.index(min(loads))
        u[s] += 1
        d[s] += 1
        return s

    def path(self, src: LeafSlot, dst: LeafSlot) -> list[LinkId]:
        if self.ideal:
            return via_spine(src, dst, 0 if src[0] == dst[0] else self._ideal_spine(src, dst))
        sport = self.rng.randrange(*SPORTS) if self.rng is not None else 0
        return self.policy.path(self.alloc, src, dst, self.spines, sport)

    def paths(self, order: list[LeafSlot], pairs: list[Pair]) -> list[list[LinkId]]:
        """The paths of the flows ``order[a] -> order[b]`` of ``pairs``, in order, as
        :meth:`path` routes them one by one, leaving ``rng`` where those calls leave it."""
        if not self.ports_ignored:
            return [self.path(order[a], order[b]) for a, b in pairs]
        if self.rng is not None:
            skip_sports(self.rng, len(pairs))
        path, alloc, spines = self.policy.path, self.alloc, self.spines
        found = self.policy.paths_of_pairs(alloc, order, pairs, spines)
        if found is not None:
            return found
        return [path(alloc, order[a], order[b], spines, 0) for a, b in pairs]

    def aggregated(self, order: list[LeafSlot], bundle: Bundle
                   ) -> tuple[list[Path], list[int]]:
        """The flows of ``bundle`` (many per host) over the hosts of ``order`` as weighted
        paths: see the module docstring. A deterministic policy routes the flows from one
        host to one leaf as it routes the first of them (vClos and OCS-vClos choose the spine
        by the source host)."""
        n = len(order)
        leaf_of = np.array([h[0] for h in order], dtype=np.int64)
        out = np.bincount(bundle.src, minlength=n)
        into = np.bincount(bundle.dst, minlength=n)
        srcs, dsts = np.flatnonzero(out).tolist(), np.flatnonzero(into).tolist()
        paths: list[Path] = ([[("hu", *order[i])] for i in srcs]
                                     + [[("hd", *order[i])] for i in dsts])
        weights = out[srcs].tolist() + into[dsts].tolist()
        leaves = list(dict.fromkeys(leaf_of[dsts].tolist()))  # in rank order
        cross = leaf_of[bundle.src] != leaf_of[bundle.dst]
        a, b = bundle.src[cross], bundle.dst[cross]
        col = np.zeros(int(leaf_of.max()) + 1, dtype=np.int64)
        col[leaves] = np.arange(len(leaves))
        key = a * len(leaves) + col[leaf_of[b]]
        count = np.bincount(key, minlength=n * len(leaves)).reshape(n, len(leaves))
        # (source position, destination leaf's column, flows), sources in order, then columns
        # (a source with cross-leaf flows is one of srcs)
        rows, cols = np.nonzero(count)
        flows = count[rows, cols].tolist()
        fabric: dict[tuple[LinkId, ...], int] = Counter()  # fabric path -> flows on it
        if self.policy.hashed:
            groups = list(zip(rows.tolist(), cols.tolist(), flows, strict=True))
            gen = np.random.default_rng(self.rng.getrandbits(64) if self.rng is not None else 0)
            counts = gen.multinomial([c for _, _, c in groups], [1 / self.spines] * self.spines)
            leaf_pairs = sorted({(order[i][0], leaves[j]) for i, j, _ in groups})
            at = {pair: k for k, pair in enumerate(leaf_pairs)}
            per_pair = np.zeros((len(leaf_pairs), self.spines), dtype=np.int64)
            np.add.at(per_pair, [at[(order[i][0], leaves[j])] for i, j, _ in groups], counts)
            for (la, lb), row in zip(leaf_pairs, per_pair, strict=True):
                for s in np.flatnonzero(row):
                    fabric[(("ls", la, int(s)), ("sl", int(s), lb))] += int(row[s])
        else:
            crossings = (self._crossings_by_leaf(order, leaves, rows, cols)
                         or self._crossings_by_host(order, leaves, rows, cols, key, b))
            if self.policy.own_fabric_paths:  # every group's path its own: nothing to merge
                paths.extend(crossings)
                weights.extend(flows)
                return paths, weights
            fabric = merged_paths(crossings, flows)
        paths.extend(fabric)
        weights.extend(fabric.values())
        return paths, weights

    def _crossings_by_leaf(self, order: list[LeafSlot], leaves: list[int], rows: np.ndarray,
                           cols: np.ndarray) -> list[tuple[LinkId, ...]]:
        """Each group's fabric links by the policy's ``fabric_links_to_leaves``, a source's
        groups at once (group k: source position ``rows[k]``, destination leaf
        ``leaves[cols[k]]``, sources in order); empty if the policy may route by the
        destination host (or no group)."""
        if not len(rows):
            return []
        crossings: list[tuple[LinkId, ...]] = []
        to_leaves, alloc, spines = self.policy.fabric_links_to_leaves, self.alloc, self.spines
        bounds = [0, *(np.flatnonzero(np.diff(rows)) + 1).tolist(), len(rows)]
        sources = rows[bounds[:-1]].tolist()
        dst_leaves = np.asarray(leaves, dtype=np.int64)[cols].tolist()
        for i, start, end in zip(sources, bounds[:-1], bounds[1:], strict=True):
            links = to_leaves(alloc, order[i], dst_leaves[start:end], spines)
            if links is None:
                return []
            crossings += links
        return crossings

    def _crossings_by_host(self, order: list[LeafSlot], leaves: list[int], rows: np.ndarray,
                           cols: np.ndarray, key: np.ndarray, dst: np.ndarray
                           ) -> list[tuple[LinkId, ...]]:
        """Each group's fabric links (as :meth:`_crossings_by_leaf`) as the policy routes its
        first flow (the group of source ``i`` and destination leaf column ``j`` holds the
        flows of ``key == i * width + j``, to the positions ``dst``)."""
        n, width = len(order), len(leaves)
        first_of = np.full(n * width, n, dtype=np.int64)
        np.minimum.at(first_of, key, dst)
        first = first_of.tolist()
        fabric_links, alloc, spines = self.policy.fabric_links, self.alloc, self.spines
        return [fabric_links(alloc, order[i], order[first[i * width + j]], spines)
                for i, j in zip(rows.tolist(), cols.tolist(), strict=True)]


def merged_paths(crossings: list[tuple[LinkId, ...]], flows: list[int]
                 ) -> dict[tuple[LinkId, ...], int]:
    """Flows on each distinct fabric path of ``crossings`` (``flows[i]`` take path i), in
    the order first seen; an empty path (host links alone, as gpu-count routes) left out."""
    merged = dict(zip(crossings, flows, strict=True))
    if len(merged) == len(crossings) and () not in merged:
        return merged  # every path once (as vClos and OCS-vClos route)
    merged = {}
    for crossing, c in zip(crossings, flows, strict=True):
        if crossing:
            merged[crossing] = merged.get(crossing, 0) + c
    return merged


def job_plan(
    alloc: Allocation, grad_bytes: float, link_bps: float, spines: int,
    rng: random.Random | None, ideal: bool = False, collective: str = "ring",
    delays: LinkDelays = NO_DELAYS,
) -> JobPlan:
    """How a placed job runs ``collective`` on ``grad_bytes`` per rank: see the module docstring.

    A registered collective runs its steps over all hosts in :func:`rank_order`.
    :data:`RAIL_RING` (formerly ``hierarchical``) is the rail All-Reduce vClos is built for: a
    ring Reduce-Scatter inside every leaf, then for each rail j (:func:`rails_of`) a ring
    All-Reduce of S/n_max across the leaves (all rails at once), then the All-Gather inside
    every leaf; the intra-leaf phases take their contention-free time (the slowest leaf's).
    A one-leaf job's time is bound by its host links, computed, not simulated.
    ``ideal``: route as the isolated reference does (:class:`_Router`); an aggregated
    (all-pairs) step is then bound by its host links. ``delays``: the links' one-way delays,
    which every step pays once (``latency_s``).
    """
    name = cluster_collective(collective)
    by_leaf = Counter(leaf for leaf, _slot in alloc.hosts)
    if name == RAIL_RING:
        return _rail_ring(alloc, grad_bytes, link_bps, spines, rng, ideal, by_leaf, delays)
    shape = collective_shape(name, len(alloc.hosts))
    by_rail = rails_of(alloc, wrap=False)
    order = [h for rail in by_rail for h in rail]  # rank_order(alloc)
    latency = delays.steps_s(name, np.array([leaf for leaf, _ in order], dtype=np.int64))
    if len(by_leaf) == 1 or (ideal and any(b.fans_out for p in shape.phases for b in p)):
        return JobPlan(float(shape.host_share) * grad_bytes * 8 / link_bps, [], [],
                       latency_s=latency)
    router = _Router(alloc, spines, rng, ideal, _rail_index(by_rail))
    rails: list[list[Path]] = []
    weights: list[list[int] | None] = []
    for phase in shape.phases:
        for bundle in phase:
            if bundle.fans_out:
                paths, w = router.aggregated(order, bundle)
            else:
                paths, w = router.paths(order, bundle.pairs), None
            rails.append(paths)
            weights.append(w)
    sizes = [float(b.share) * grad_bytes for p in shape.phases for b in p]
    ends = list(itertools.accumulate(len(p) for p in shape.phases))
    phases = [list(range(end - len(p), end)) for p, end in zip(shape.phases, ends, strict=True)]
    return JobPlan(0.0, rails, sizes, phases if len(phases) > 1 else None,
                   weights if any(w is not None for w in weights) else None, latency)


def _rail_index(by_rail: list[list[LeafSlot]]) -> dict[LeafSlot, int]:
    """Each host's rail (its place among its leaf's hosts), from ``rails_of(alloc, False)``."""
    return {h: j for j, rail in enumerate(by_rail) for h in rail}


def _rail_ring(alloc: Allocation, grad_bytes: float, link_bps: float, spines: int,
               rng: random.Random | None, ideal: bool, by_leaf: Counter[int],
               delays: LinkDelays = NO_DELAYS) -> JobPlan:
    """:data:`RAIL_RING`: see :func:`job_plan`; every ring is the registry's ``ring``."""
    intra = max(float(collective_shape("ring", k).host_share) for k in by_leaf.values())
    intra_s = intra * grad_bytes * 8 / link_bps
    # the intra-leaf Reduce-Scatter and All-Gather of the largest leaf (n-1 steps each),
    # then the rails' ring All-Reduce across the leaves (2(m-1) steps)
    latency = 2 * (max(by_leaf.values()) - 1) * delays.path_s(False)
    if len(by_leaf) == 1:
        return JobPlan(intra_s, [], [], latency_s=latency)
    router = _Router(alloc, spines, rng, ideal, _rail_index(rails_of(alloc, wrap=False)))
    rails = rails_of(alloc)
    shard = grad_bytes / len(rails)
    paths, sizes = [], []
    for members in rails:
        ((bundle,),) = collective_shape("ring", len(members)).phases
        paths.append(router.paths(members, bundle.pairs))
        sizes.append(float(bundle.share) * shard)
    latency += 2 * (len(by_leaf) - 1) * delays.path_s(True)
    return JobPlan(intra_s, paths, sizes, latency_s=latency)


def rails_time(plan: JobPlan, link_bps: float) -> float:
    """Time of one iteration's rails alone on an idle network (max-min among the rails)."""
    if not plan.rails:
        return 0.0
    if plan.phases is not None:  # phases one after the other, each alone
        return sum(rails_time(JobPlan(0.0, [plan.rails[j] for j in group],
                                      [plan.rail_bytes[j] for j in group],
                                      weights=[plan.rail_weights(j) for j in group]), link_bps)
                   for group in plan.phases)
    if len(plan.rails) == 1:
        # One bundle alone: its rate is the link rate over its most crossed link's count.
        size = plan.rail_bytes[0]
        if not size:
            return 0.0
        loads = link_loads(plan.rails[0], plan.rail_weights(0))
        return size * 8 / (link_bps / max(loads.values()))
    net = Network(default_capacity=link_bps)
    flows = [net.add_bundle(net.route(r, plan.rail_weights(j)), b)
             for j, (r, b) in enumerate(zip(plan.rails, plan.rail_bytes, strict=True))]
    net.run()
    return max(f.end or 0.0 for f in flows)


def placement_shape(alloc: Allocation) -> tuple[int, ...]:
    """How many hosts the job has on each of its leaves, leaf by leaf in order."""
    by_leaf = Counter(leaf for leaf, _slot in alloc.hosts)
    return tuple(by_leaf[leaf] for leaf in sorted(by_leaf))


class IsolatedTimes:
    """The isolated reference's time per iteration of placed jobs, in parts (s): intra-leaf,
    latency and rails (``job_plan(..., ideal=True)`` and :func:`rails_time`), worked out once
    per :func:`placement_shape`.

    The ideal routing reads a job's hosts only through which leaf each is on (leaves compared,
    never ordered but by sorting) and its rank among its leaf's hosts, so placements of one
    shape are the same network up to names: same flows, same link crossings, same times."""

    def __init__(self) -> None:
        self._known: dict[tuple[Any, ...], tuple[float, float, float]] = {}

    def __call__(self, alloc: Allocation, grad_bytes: float, link_bps: float, spines: int,
                 collective: str, delays: LinkDelays) -> tuple[float, float, float]:
        key = (placement_shape(alloc), alloc.policy, grad_bytes, link_bps, spines, collective,
               delays)
        times = self._known.get(key)
        if times is None:
            ideal = job_plan(alloc, grad_bytes, link_bps, spines, None, ideal=True,
                             collective=collective, delays=delays)
            times = self._known[key] = (ideal.intra_s, ideal.latency_s,
                                        rails_time(ideal, link_bps))
        return times

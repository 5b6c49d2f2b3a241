"""Multi-tenant leaf-spine cluster simulation: FIFO admission, allocator, flow-level network.

Pure algorithms, no I/O (the CLI in :mod:`testbed.cli.simulate_cluster` writes the files).

Cluster
    ``leaves`` x ``hosts_per_leaf`` hosts, ``spines`` spines; one host is one GPU. Every
    host NIC, leaf-spine link and OCS circuit runs at ``link_bps`` in each direction.
    ``ecmp`` and ``vclos`` use a static leaf-spine fabric; ``ocs-vclos`` connects leaves and
    spines (or leaf pairs) only through circuits that the allocator sets up per job.

Admission
    Strict FIFO: jobs queue in arrival order and only the head may be placed
    (:meth:`sdn_app.allocation.cluster.Cluster.allocate`); while the head is refused (no free hosts,
    or no isolated virtual Clos: ``fragmented``), every job behind it waits too, even one
    that would fit. That head-of-line blocking is FIFO's nature and is kept on purpose: it is
    how fragmentation turns into waiting time. The head is retried when a job ends. Jobs no
    policy could ever place (larger than the cluster, or ``unshapeable``) are dropped and
    counted as ``refused_unshapeable`` (a job refused while no other job runs is one of them).
    ``refused_fragmented`` counts refused admission attempts, ``refused_fragmented_links``
    those of them where leaves with the free hosts existed but no links or circuits joined
    them. ``placement``, ``rewiring`` and ``spine_ports_per_ocs`` are passed to the allocator
    (``spine_ports_per_ocs`` 0: leaves / OCSes, a spine port per leaf as in the electrical
    fabric).

Trace placement (``placement="trace"``)
    A trace that records where its jobs ran (``lingjun:DIR``:
    :class:`~testbed.sim.trace_formats.TracePlacement`) is replayed on those hosts: each trace
    host is a block of slots on the leaf of its leaf switch
    (:meth:`~testbed.sim.trace_formats.TracePlacement.fabric_slots`), and a job takes, on each
    of its hosts, as many free slots of that block as it used GPUs there, through the policy's
    ``claim`` instead of its allocator. While those slots are busy (the simulated jobs need
    not keep production's times) the job waits at the queue's head. ``vclos`` also needs the
    same GPUs on every leaf of a job: a trace placement of another shape is refused as
    ``unshapeable``; ``ocs-vclos`` wires circuits only for hosts it picks and is refused with
    this placement. Jobs the trace gives no hosts for are placed by the allocator (``joint``).

Routing (host -> leaf -> spine -> leaf -> host)
    ``ecmp``: the spine is a CRC32 hash of the flow's 5-tuple (src, dst, a source port drawn
    from the run's seeded RNG, a fixed destination port, TCP) modulo the spines; connections
    are opened once per job and kept, so a collision lasts for the job's life, as with
    persistent NCCL connections. ``vclos``: host j of a leaf goes through the job's spine
    ``spine_of[host]``. ``ocs-vclos``: up the source host's circuit ``circuit_of[host]`` to its
    spine and down the job's circuit from that spine to the destination leaf, or across the
    direct leaf-leaf circuit of a two-leaf job.

Collective and abstraction for scale
    A job runs ``iterations`` of (compute, All-Reduce of its gradients S). A one-leaf job
    runs a ring over its hosts; its traffic never leaves its own host links, so its time is
    computed, not simulated. A cross-leaf job runs, with ``collective="ring"`` (default),
    one flat ring over its hosts in rail-major rank order (:func:`rank_order`: every hop
    crosses the fabric, as a rank order that ignores the topology does), or with
    ``"hierarchical"`` the rail All-Reduce vClos is built for: a ring Reduce-Scatter inside
    every leaf, then for each rail j (the j-th host of every leaf; on a leaf with fewer
    hosts, host j mod k) a ring All-Reduce of S/n_max across the leaves, then the All-Gather
    inside every leaf. Only rings crossing leaves are simulated by the flow simulator;
    intra-leaf phases take their contention-free time (for uneven ECMP placements, the
    slowest leaf's). With n hosts per leaf the hierarchical rails carry only ~1/n of the
    bytes across the fabric, so collisions matter much less there.
    The 2(m-1) steps of a ring (flat or rail) all use the same m flows, so its All-Reduce
    is one lockstep *bundle* (:meth:`testbed.sim.flows.Network.add_bundle`) of m sub-flows
    carrying 2(m-1)/m of the ring's bytes each: a step ends with its slowest flow, so all
    sub-flows move at the bottleneck rate, and bundles are max-min shared with everything
    else active; rates change only when a bundle starts or ends. Iterations are batched: a
    job's iterations are split into at most ``rounds`` rounds, each being its iterations'
    compute and intra-leaf time around one bundle per ring carrying their total bytes. That
    keeps each job's duty cycle and bytes exact while bounding the events per job.
    ``isolated`` (the slowdown's reference) is the job's run time alone on an idle cluster
    with the same placement and collision-free routing (the flow leaving host j of a leaf
    through spine j, or, where that link already carries one of the job's flows, through the
    least used spine: an uneven ECMP placement can make spine j collide with itself).

``collided_flow_fraction``
    A job's flows are its cross-leaf ring connections (fixed for its life). A flow is
    *collided* when, while it was active, a leaf-spine link or circuit on its path also
    carried another active flow (of another job, or of the same job: an ECMP hash
    collision). The fraction is over all cross-leaf ring flows.
"""

from __future__ import annotations

import itertools
import math
import random
import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sdn_app.allocation.cluster import PLACEMENTS, Cluster
from sdn_app.allocation.ledger import Allocation, AllocationRefused
from sdn_app.allocation.ocs import REWIRINGS
from sdn_app.policies import RoutingPolicy, applicable
from sdn_app.policies import get as get_policy
from sdn_app.policies.ecmp import SPORTS
from testbed.core.errors import FabricLabError
from testbed.core.formulas import ALLREDUCE, ALLTOALL, busbw_factor
from testbed.sim.flows import Flow, LinkId, Network, Route
from testbed.sim.trace_formats import TracePlacement
from testbed.sim.traces import JobSpec, job_set_sha256

Host = tuple[int, int]
# The allocator's placements, and "trace": the hosts a trace recorded (see the docstring).
SIM_PLACEMENTS = (*PLACEMENTS, "trace")


def cluster_policy(name: str) -> RoutingPolicy:
    """The registered policy ``name``, if it routes a leaf-spine or an OCS fabric."""
    known = [n for kind in ("leaf_spine", "ocs_leaf_spine") for n in applicable(kind)]
    if name not in known:
        raise FabricLabError(f"--policy {name!r} is not a leaf-spine routing policy; use one "
                             f"of {', '.join(known)}")
    return get_policy(name)

def host_path(
    alloc: Allocation, src: Host, dst: Host, spines: int, sport: int = 0
) -> list[LinkId]:
    """Directed links from ``src`` to ``dst`` for a job placed by ``alloc``: its policy's."""
    return get_policy(alloc.policy).path(alloc, src, dst, spines, sport)


@dataclass(frozen=True)
class JobPlan:
    """How one placed job communicates, per iteration.

    ``intra_s``: time of the intra-leaf Reduce-Scatter plus All-Gather (or of the whole ring
    All-Reduce of a one-leaf job), never contended (host links belong to the job).
    ``rails``: the cross-leaf rings, each a list of flow paths; ``rail_bytes``: bytes each
    rail flow carries per iteration (the rail's ring All-Reduce, 2(m-1)/m x S/n_max).
    """

    intra_s: float
    rails: list[list[list[LinkId]]]
    rail_bytes: list[float]
    phases: list[list[int]] | None = None  # rails run in these groups, one after the other
    weights: list[list[int]] | None = None  # per rail: sub-flows on each of its paths

    @property
    def flows(self) -> int:
        """Cross-leaf flows; a weighted (all-to-all) rail's fabric paths count one each."""
        if self.weights is not None:
            return sum(sum(1 for p in r if p[0][0] not in HOST_LINKS) for r in self.rails)
        return sum(len(r) for r in self.rails)

    def rail_weights(self, j: int) -> list[int] | None:
        return self.weights[j] if self.weights is not None else None

    @property
    def phase_rails(self) -> list[list[int]]:
        """Indices of the rails of each phase; by default all rails at once."""
        return self.phases if self.phases is not None else [list(range(len(self.rails)))]


def rails_of(alloc: Allocation, wrap: bool = True) -> list[list[Host]]:
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


COLLECTIVES = ("ring", "hierarchical")
# What a job of a trace may name for itself (JobSpec.collective), besides COLLECTIVES.
JOB_COLLECTIVES = (*COLLECTIVES, "halving-doubling", "all-to-all")


def bytes_factor(collective: str, n: int) -> float:
    """What each of ``n`` ranks sends, as a multiple of its input: 2(n-1)/n for an
    All-Reduce, (n-1)/n for an all-to-all."""
    return busbw_factor(n, ALLTOALL if collective == "all-to-all" else ALLREDUCE)


def rank_order(alloc: Allocation) -> list[Host]:
    """Flat-ring rank order: host j of every leaf in turn (rail-major), so every hop of a
    cross-leaf ring crosses the fabric, as with a topology-oblivious rank order."""
    return [h for rail in rails_of(alloc, wrap=False) for h in rail]


def job_plan(
    alloc: Allocation, grad_bytes: float, link_bps: float, spines: int,
    rng: random.Random | None, ideal: bool = False, collective: str = "ring",
) -> JobPlan:
    """How a placed job All-Reduces ``grad_bytes``: see the module docstring.

    ``ring``: one flat ring over all hosts in :func:`rank_order`; ``hierarchical``: RS in
    each leaf, a ring per rail, AG in each leaf; ``halving-doubling``: one phase per
    distance, in :func:`rank_order`; ``all-to-all``: every ordered pair at once.
    ``ideal``: route the flow leaving host j of a leaf through spine j mod spines, or the
    least used spine where that collides (the isolated reference), else route as the job's
    policy does (ECMP source ports drawn from ``rng``).
    """
    by_leaf: dict[int, int] = {}
    for leaf, _slot in alloc.hosts:
        by_leaf[leaf] = by_leaf.get(leaf, 0) + 1
    if collective not in JOB_COLLECTIVES:
        raise FabricLabError(f"collective {collective!r} is unknown; use one of "
                             f"{', '.join(JOB_COLLECTIVES)}")
    n = len(alloc.hosts)
    if len(by_leaf) == 1 or (ideal and collective == "all-to-all"):
        # Alone on one leaf (or an all-to-all with ideal routing, whose every host link
        # carries its n-1 flows and no fabric link more): bound by the host links.
        return JobPlan(bytes_factor(collective, n) * grad_bytes * 8 / link_bps, [], [])
    by_rail = rails_of(alloc, wrap=False)
    index = {h: j for j, rail in enumerate(by_rail) for h in rail}
    # Ideal routing: per leaf, how many flows each spine already carries up / down.
    up: dict[int, list[int]] = {}
    down: dict[int, list[int]] = {}

    def ideal_spine(src: Host, dst: Host) -> int:
        """Spine j for host j when its links are still unused, else the least used spine
        (the lowest numbered of those)."""
        u = up.setdefault(src[0], [0] * spines)
        d = down.setdefault(dst[0], [0] * spines)
        s = index[src] % spines
        if u[s] + d[s]:
            loads = [a + b for a, b in zip(u, d, strict=True)]
            s = loads.index(min(loads))
        u[s] += 1
        d[s] += 1
        return s

    path = get_policy(alloc.policy).path

    def ring(members: list[Host]) -> list[list[LinkId]]:
        m = len(members)
        out = []
        for i in range(m):
            src, dst = members[i], members[(i + 1) % m]
            if ideal:
                s = ideal_spine(src, dst)
                out.append([("hu", *src), ("ls", src[0], s), ("sl", s, dst[0]), ("hd", *dst)])
            else:
                sport = rng.randrange(*SPORTS) if rng is not None else 0
                out.append(path(alloc, src, dst, spines, sport))
        return out

    order = [h for rail in by_rail for h in rail]  # rank_order(alloc)

    def flow_path(src: Host, dst: Host) -> list[LinkId]:
        if ideal and src[0] == dst[0]:
            return [("hu", *src), ("hd", *dst)]
        if ideal:
            s = ideal_spine(src, dst)
            return [("hu", *src), ("ls", src[0], s), ("sl", s, dst[0]), ("hd", *dst)]
        sport = rng.randrange(*SPORTS) if rng is not None else 0
        return path(alloc, src, dst, spines, sport)

    if collective == "ring":
        return JobPlan(0.0, [ring(order)], [busbw_factor(n) * grad_bytes])
    if collective == "halving-doubling":
        # Round at distance d: position p exchanges S*d/n with p XOR d in the Reduce-Scatter
        # and again in the All-Gather; the two rounds of one distance are one phase here.
        if n & (n - 1):
            raise FabricLabError(f"halving-doubling needs a power-of-two job; this one has "
                                 f"{n} hosts")
        rails, sizes = [], []
        d = n // 2
        while d >= 1:
            rails.append([flow_path(order[p], order[p ^ d]) for p in range(n)])
            sizes.append(2 * grad_bytes * d / n)
            d //= 2
        return JobPlan(0.0, rails, sizes, [[i] for i in range(len(rails))])
    if collective == "all-to-all":
        paths, weights = alltoall_links(alloc, order, spines, rng)
        return JobPlan(0.0, [paths], [grad_bytes / n], weights=[weights])
    intra = max(busbw_factor(k) for k in by_leaf.values()) * grad_bytes * 8 / link_bps
    rails = rails_of(alloc)
    shard = grad_bytes / len(rails)
    return JobPlan(intra, [ring(r) for r in rails],
                   [busbw_factor(len(r)) * shard for r in rails])


HOST_LINKS = ("hu", "hd")


def alltoall_links(alloc: Allocation, order: list[Host], spines: int,
                   rng: random.Random | None) -> tuple[list[list[LinkId]], list[int]]:
    """An all-to-all's n(n-1) flows (every ordered pair at once, as NCCL posts them) as one
    lockstep bundle, aggregated: each host link once, weighted by its n-1 flows, and each
    distinct fabric path weighted by the flows taking it. A deterministic policy routes the
    flows from one host to one leaf as its policy routes one of them (vClos and OCS-vClos
    choose the spine by the source host); a hashed policy (ECMP) sends each flow through a
    spine drawn uniformly from the run's RNG, as a hash of a random source port does."""
    n = len(order)
    paths: list[list[LinkId]] = [[("hu", *h)] for h in order] + [[("hd", *h)] for h in order]
    weights = [n - 1] * (2 * n)
    by_leaf: dict[int, list[Host]] = {}
    for h in order:
        by_leaf.setdefault(h[0], []).append(h)
    policy = get_policy(alloc.policy)
    groups = [(src, leaf, len(dsts)) for src in order for leaf, dsts in by_leaf.items()
              if leaf != src[0]]
    fabric: Counter[tuple[LinkId, ...]] = Counter()  # fabric path -> flows on it
    if policy.hashed:
        gen = np.random.default_rng(rng.getrandbits(64) if rng is not None else 0)
        counts = gen.multinomial([c for _, _, c in groups], [1 / spines] * spines)
        pairs = sorted({(src[0], leaf) for src, leaf, _ in groups})
        at = {pair: i for i, pair in enumerate(pairs)}
        per_pair = np.zeros((len(pairs), spines), dtype=np.int64)
        np.add.at(per_pair, [at[(src[0], leaf)] for src, leaf, _ in groups], counts)
        for (la, lb), row in zip(pairs, per_pair, strict=True):
            for s in np.flatnonzero(row):
                fabric[(("ls", la, int(s)), ("sl", int(s), lb))] += int(row[s])
    else:
        for src, leaf, c in groups:
            links = policy.path(alloc, src, by_leaf[leaf][0], spines, 0)
            fabric[tuple(link for link in links if link[0] not in HOST_LINKS)] += c
    paths.extend(list(p) for p in fabric)
    weights.extend(fabric.values())
    return paths, weights


def rails_time(plan: JobPlan, link_bps: float) -> float:
    """Time of one iteration's rails alone on an idle network (max-min among the rails)."""
    if not plan.rails:
        return 0.0
    if plan.phases is not None:  # phases one after the other, each alone
        return sum(rails_time(JobPlan(0.0, [plan.rails[j] for j in group],
                                      [plan.rail_bytes[j] for j in group]), link_bps)
                   for group in plan.phases)
    if len(plan.rails) == 1:
        # One bundle alone: its rate is the link rate over its most crossed link's count.
        size = plan.rail_bytes[0]
        if not size:
            return 0.0
        weights = plan.rail_weights(0) or [1] * len(plan.rails[0])
        crossings: Counter[LinkId] = Counter()
        for path, w in zip(plan.rails[0], weights, strict=True):
            for link in path:
                crossings[link] += w
        return size * 8 / (link_bps / max(crossings.values()))
    net = Network(default_capacity=link_bps)
    flows = [net.add_bundle(net.route(r, plan.rail_weights(j)), b)
             for j, (r, b) in enumerate(zip(plan.rails, plan.rail_bytes, strict=True))]
    net.run()
    return max(f.end or 0.0 for f in flows)


FABRIC_LINKS = ("ls", "sl", "cu", "cd", "cl")


class RailCollisions:
    """Marks a job's collided cross-leaf flows (positions over all its rails) in ``collided``.

    A rail's flows collide on the fabric links its bundle shared with another owner's flow
    (``Flow.shared``) and on those two of its own sub-flows cross. Which flows cross which
    fabric link is worked out once per rail, the first time it is needed.
    """

    def __init__(self, rails: list[list[list[LinkId]]], routes: list[Route],
                 collided: set[int]) -> None:
        self.rails, self.routes, self.collided = rails, routes, collided
        self.offsets = list(itertools.accumulate((len(r) for r in rails), initial=0))
        self._own: dict[int, list[LinkId]] = {}
        self._on_link: dict[int, dict[LinkId, list[int]]] = {}
        self._noted: dict[int, set[LinkId]] = {}  # per rail: links already counted

    def note(self, rail: int, shared: set[LinkId]) -> None:
        """Rail ``rail``'s bundle ended having shared ``shared`` with other owners."""
        if len(self.collided) == self.offsets[-1]:
            return  # every flow already counts as collided
        noted = self._noted.setdefault(rail, set())
        links = [link for link in shared - noted if link[0] in FABRIC_LINKS]
        links.extend(link for link in self._self_shared(rail) if link not in noted)
        if not links:
            return
        noted.update(links)
        on_link = self._on_link.get(rail)
        if on_link is None:
            on_link = self._on_link[rail] = {}
            for i, path in enumerate(self.rails[rail], start=self.offsets[rail]):
                for link in path:
                    if link[0] in FABRIC_LINKS:
                        on_link.setdefault(link, []).append(i)
        for link in links:
            self.collided.update(on_link[link])

    def _self_shared(self, rail: int) -> list[LinkId]:
        own = self._own.get(rail)
        if own is None:
            route = self.routes[rail]
            own = [] if not (route.mult > 1).any() else [
                link for link, k in route.links.items() if k > 1 and link[0] in FABRIC_LINKS]
            self._own[rail] = own
        return own


@dataclass(frozen=True)
class ClusterConfig:
    leaves: int
    spines: int
    hosts_per_leaf: int
    policy: str
    ocs_count: int = 0
    spine_ports_per_ocs: int = 0  # 0: ceil(leaves / ocs_count), a spine port per leaf
    placement: str = "joint"  # or "hosts-first" (see sdn_app.allocation), or "trace"
    rewiring: str = "augment"  # ocs-vclos: or "any", "conservative" (see sdn_app.allocation.ocs)
    link_bps: float = 100e9
    rounds: int = 8
    seed: int = 1
    collective: str = "ring"
    sharing: str = "fast"  # the network's max-min filler (testbed.sim.flows.SHARING)

    def check(self) -> None:
        cluster_policy(self.policy)
        for name in ("leaves", "spines", "hosts_per_leaf", "rounds"):
            if getattr(self, name) < 1:
                flag = name.replace("_", "-")
                raise FabricLabError(f"--{flag} is {getattr(self, name)}; it must be at least 1")
        if self.collective not in COLLECTIVES:
            raise FabricLabError(
                f"--collective {self.collective!r} is unknown; use one of {', '.join(COLLECTIVES)}"
            )
        if self.uses_ocs and self.ocs_count < 1:
            raise FabricLabError("--policy ocs-vclos needs --ocs-count of at least 1")
        if self.placement not in SIM_PLACEMENTS:
            raise FabricLabError(f"--placement {self.placement!r} is unknown; use one of "
                                 f"{', '.join(SIM_PLACEMENTS)}")
        if self.placement == "trace" and self.uses_ocs:
            raise FabricLabError(f"--placement trace puts jobs on the trace's own hosts, and "
                                 f"--policy {self.policy} wires circuits only for hosts its "
                                 "allocator picks; use ecmp, ecmp-l3 or vclos")
        if self.rewiring not in REWIRINGS:
            raise FabricLabError(
                f"--rewiring {self.rewiring!r} is unknown; use one of {', '.join(REWIRINGS)}"
            )
        if self.spine_ports_per_ocs < 0:
            raise FabricLabError(
                f"--spine-ports-per-ocs is {self.spine_ports_per_ocs}; it must be at least 1 "
                "(or 0 for one spine port per leaf)"
            )
        if not self.link_bps > 0:
            raise FabricLabError(f"--link-gbit-s gives {self.link_bps} bit/s; it must be > 0")

    @property
    def uses_ocs(self) -> bool:
        return cluster_policy(self.policy).allocates_as == "ocs-vclos"

    @property
    def total_gpus(self) -> int:
        return self.leaves * self.hosts_per_leaf

    @property
    def spine_ports(self) -> int:
        """Ports per spine per OCS: as set, or enough for one port per leaf."""
        if self.spine_ports_per_ocs:
            return self.spine_ports_per_ocs
        return max(1, math.ceil(self.leaves / max(1, self.ocs_count)))


@dataclass
class JobRecord:
    spec: JobSpec
    start: float = float("nan")
    finish: float = float("nan")
    leaves: int = 0
    flows: int = 0
    collided: set[int] = field(default_factory=set)
    isolated: float = 0.0

    def row(self) -> dict[str, Any]:
        run = self.finish - self.start
        return {
            "job_id": self.spec.job_id,
            "model": self.spec.model,
            "gpus": self.spec.gpus,
            "leaves": self.leaves,
            "iterations": self.spec.iterations,
            "arrival_s": self.spec.arrival,
            "start_s": self.start,
            "finish_s": self.finish,
            "jct_s": self.finish - self.spec.arrival,
            "wait_s": self.start - self.spec.arrival,
            "run_s": run,
            "isolated_s": self.isolated,
            "slowdown": run / self.isolated if self.isolated > 0 else 1.0,
            "flows": self.flows,
            "collided_flows": len(self.collided),
        }


@dataclass
class ClusterResult:
    rows: list[dict[str, Any]]
    summary: dict[str, Any]


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of sorted values."""
    if not sorted_values:
        return float("nan")
    pos = (len(sorted_values) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


class ClusterSimulation:
    """One run: feed :class:`JobSpec` s through FIFO admission onto the simulated fabric."""

    def __init__(self, jobs: Sequence[JobSpec], config: ClusterConfig,
                 progress: Callable[[int, int, float], None] | None = None,
                 placement: TracePlacement | None = None) -> None:
        """``progress(done, total, now)`` is called whenever a job finishes; ``placement``:
        where the trace's jobs ran, required by ``config.placement == "trace"``."""
        config.check()
        if config.placement == "trace" and placement is None:
            raise FabricLabError("--placement trace needs a trace that records where its jobs "
                                 "ran (lingjun:DIR); this one does not")
        self.placement = placement if config.placement == "trace" else None
        self.trace_slots = (self.placement.fabric_slots(config.leaves, config.hosts_per_leaf)
                            if self.placement is not None else {})
        self.trace_placed = 0  # jobs started on the hosts the trace gave them
        self.progress = progress
        self.config = config
        self.jobs = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
        ocs = config.ocs_count if config.uses_ocs else 0
        self.cluster = Cluster(config.leaves, config.spines, config.hosts_per_leaf, ocs,
                               spine_ports_per_ocs=config.spine_ports,
                               placement="joint" if self.placement else config.placement,
                               rewiring=config.rewiring)
        self.net = Network(default_capacity=config.link_bps, sharing=config.sharing)
        self.rng = random.Random(config.seed)
        self.queue: deque[JobRecord] = deque()
        self.records: list[JobRecord] = []
        self.dropped_too_large = 0
        self.refused_unshapeable = 0
        self.refused_fragmented = 0  # admission attempts refused as fragmented
        self.refused_fragmented_links = 0  # ... of which hosts fitted but links did not
        self.fragmented_jobs: set[str] = set()

    def run(self) -> ClusterResult:
        wall = time.perf_counter()
        for spec in self.jobs:
            self.net.at(spec.arrival, lambda spec=spec: self._arrive(spec))
        self.net.run()
        if self.queue:  # cannot happen with finite jobs unless a job can never be placed
            raise FabricLabError(f"{len(self.queue)} jobs were never placed")
        self.records.sort(key=lambda r: (r.spec.arrival, r.spec.job_id))
        return ClusterResult([r.row() for r in self.records], self._summary(wall))

    # ------------------------------------------------------------------ admission

    def _arrive(self, spec: JobSpec) -> None:
        if spec.gpus > self.config.total_gpus:
            self.dropped_too_large += 1
            return
        self.queue.append(JobRecord(spec))
        if len(self.queue) == 1:
            self._admit()

    def _admit(self) -> None:
        while self.queue:
            record = self.queue[0]
            try:
                alloc = self._place(record.spec)
            except AllocationRefused as exc:
                if exc.reason == "unshapeable" or not self.cluster.jobs:
                    # Refused on an empty cluster: no amount of waiting will place it.
                    self.queue.popleft()
                    self.refused_unshapeable += 1
                    continue
                if exc.reason == "fragmented":
                    self.refused_fragmented += 1
                    self.refused_fragmented_links += exc.cause == "links"
                    self.fragmented_jobs.add(record.spec.job_id)
                return
            self.queue.popleft()
            self._start(record, alloc)

    def _place(self, spec: JobSpec) -> Allocation:
        """The job's trace hosts through the policy's ``claim`` where the trace gives them,
        else the policy's allocator; raises :class:`AllocationRefused`."""
        policy = get_policy(self.config.policy)
        if self.placement is None or spec.job_id not in self.placement.gpus_of:
            return policy.allocate(self.cluster, spec.job_id, spec.gpus)
        hosts = trace_hosts(self.cluster.free_slots, self.trace_slots,
                            self.placement.gpus_of[spec.job_id], self.placement.gpus_per_host)
        alloc = policy.claim(self.cluster, spec.job_id, hosts)
        self.trace_placed += 1
        return alloc

    # ------------------------------------------------------------------ running

    def _start(self, record: JobRecord, alloc: Allocation) -> None:
        spec, c = record.spec, self.config
        record.start = self.net.now
        record.leaves = len(alloc.leaves)
        collective = spec.collective or c.collective
        plan = job_plan(alloc, spec.grad_bytes, c.link_bps, c.spines, self.rng,
                        collective=collective)
        ideal = plan if not get_policy(alloc.policy).hashed else job_plan(
            alloc, spec.grad_bytes, c.link_bps, c.spines, None, ideal=True,
            collective=collective)
        record.isolated = spec.iterations * (
            spec.compute_s + ideal.intra_s + rails_time(ideal, c.link_bps))
        record.flows = plan.flows
        rounds = _split(spec.iterations, min(spec.iterations, c.rounds))
        routes = [self.net.route(rail, plan.rail_weights(j))  # every round takes them
                  for j, rail in enumerate(plan.rails)]
        half_intra = plan.intra_s / 2 if plan.rails else plan.intra_s
        pending = [0]

        def start_round() -> None:
            if not rounds:
                self._finish(record)
                return
            k = rounds[0]
            # Compute, then the intra-leaf Reduce-Scatter (or the whole one-leaf ring).
            self.net.at(self.net.now + k * (spec.compute_s + half_intra), cross_leaf)

        phases = plan.phase_rails
        phase = [0]

        def cross_leaf() -> None:
            if not plan.rails:
                end_round()
                return
            phase[0] = 0
            start_phase()

        def start_phase() -> None:
            k = rounds[0]
            rails = phases[phase[0]]
            pending[0] = len(rails)
            for j in rails:
                self.net.add_bundle(routes[j], k * plan.rail_bytes[j], owner=(spec.job_id, j),
                                    tag=j, on_done=rail_done)

        collisions = RailCollisions(plan.rails, routes, record.collided)

        def rail_done(flow: Flow) -> None:
            collisions.note(flow.tag, flow.shared)
            pending[0] -= 1
            if pending[0] == 0:
                phase[0] += 1
                if phase[0] < len(phases):
                    start_phase()
                    return
                # The intra-leaf All-Gather, then the next round.
                self.net.at(self.net.now + rounds[0] * half_intra, end_round)

        def end_round() -> None:
            rounds.pop(0)
            start_round()

        start_round()

    def _finish(self, record: JobRecord) -> None:
        record.finish = self.net.now
        self.cluster.release(record.spec.job_id)
        self.records.append(record)
        if self.progress is not None:
            self.progress(len(self.records), len(self.jobs), self.net.now)
        self._admit()

    # ------------------------------------------------------------------ metrics

    def _utilisation(self) -> float:
        """Time-average busy GPU fraction between the first and the last arrival (the
        trace's offered window; the drain after the last arrival is left out), or over the
        whole run when all jobs arrive at once."""
        if not self.records:
            return 0.0
        t0 = min(j.arrival for j in self.jobs)
        t1 = max(j.arrival for j in self.jobs)
        if t1 <= t0:
            t1 = max(r.finish for r in self.records)
        if t1 <= t0:
            return 0.0
        busy = sum(
            r.spec.gpus * max(0.0, min(r.finish, t1) - max(r.start, t0)) for r in self.records
        )
        return busy / (self.config.total_gpus * (t1 - t0))

    def _summary(self, wall_start: float) -> dict[str, Any]:
        c = self.config
        rows = [r.row() for r in self.records]
        jcts = sorted(r["jct_s"] for r in rows)
        first = min((j.arrival for j in self.jobs), default=0.0)
        last = max((r["finish_s"] for r in rows), default=first)
        span = last - first
        flows = sum(r.flows for r in self.records)
        collided = sum(len(r.collided) for r in self.records)

        def mean(key: str) -> float:
            return statistics.fmean(r[key] for r in rows) if rows else float("nan")

        return {
            "policy": c.policy,
            "leaves": c.leaves,
            "spines": c.spines,
            "hosts_per_leaf": c.hosts_per_leaf,
            "gpus": c.total_gpus,
            "ocs_count": c.ocs_count if c.uses_ocs else 0,
            "spine_ports_per_ocs": c.spine_ports if c.uses_ocs else 0,
            "link_gbit_s": c.link_bps / 1e9,
            "rounds": c.rounds,
            "collective": c.collective,
            # How hosts and network were chosen together; moot where any free hosts do.
            "placement": c.placement if (c.placement == "trace" or cluster_policy(
                c.policy).allocates_as != "ecmp") else "",
            "jobs_trace_placed": self.trace_placed,
            "rewiring": c.rewiring if c.uses_ocs else "",
            "seed": c.seed,
            "jobs_in_trace": len(self.jobs),
            "job_set_sha256": job_set_sha256(self.jobs),
            "jobs_completed": len(rows),
            "dropped_too_large": self.dropped_too_large,
            "refused_unshapeable": self.refused_unshapeable,
            "refused_fragmented": self.refused_fragmented,
            "refused_fragmented_jobs": len(self.fragmented_jobs),
            "refused_fragmented_links": self.refused_fragmented_links,
            "avg_jct_s": mean("jct_s"),
            "p50_jct_s": _percentile(jcts, 50),
            "p95_jct_s": _percentile(jcts, 95),
            "p99_jct_s": _percentile(jcts, 99),
            "avg_wait_s": mean("wait_s"),
            "avg_run_s": mean("run_s"),
            "avg_isolated_s": mean("isolated_s"),
            "avg_slowdown": mean("slowdown"),
            "max_slowdown": max((r["slowdown"] for r in rows), default=float("nan")),
            "gpu_utilisation": self._utilisation(),
            "makespan_s": span,
            "flows": flows,
            "collided_flows": collided,
            "collided_flow_fraction": collided / flows if flows else 0.0,
            "rate_recomputes": self.net.recomputes,
            "wall_s": time.perf_counter() - wall_start,
        }


def trace_hosts(free_slots: Callable[[int], list[int]], slots: dict[str, tuple[int, int]],
                used: dict[str, int], gpus_per_host: int) -> list[Host]:
    """The fabric hosts for a job that used ``used[host]`` GPUs on each trace host: the first
    free slots of each host's block (``slots[host]``: its leaf and first slot), or
    :class:`AllocationRefused` (``no_hosts``) while a block has too few free."""
    hosts: list[Host] = []
    for host, gpus in sorted(used.items()):
        leaf, first = slots[host]
        free = [s for s in free_slots(leaf) if first <= s < first + gpus_per_host]
        if len(free) < gpus:
            raise AllocationRefused("no_hosts", f"not enough free hosts: trace host {host} has "
                                    f"{len(free)} free GPUs, the job wants {gpus}")
        hosts += [(leaf, s) for s in free[:gpus]]
    return hosts


def simulate_cluster(jobs: Sequence[JobSpec], config: ClusterConfig,
                     progress: Callable[[int, int, float], None] | None = None,
                     placement: TracePlacement | None = None) -> ClusterResult:
    """Run ``jobs`` on the cluster of ``config``; per-job rows and a summary dict.
    ``placement``: where the trace's jobs ran (used with ``config.placement == "trace"``)."""
    return ClusterSimulation(jobs, config, progress, placement).run()

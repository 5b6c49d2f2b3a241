"""OCS-vClos placement after RapidNetSim's ``GPUPlacemeter3`` (the ``exact`` rewiring).

Semantics learnt from nothepeople/RapidNetSim ``rapidnetsim/scheduler/locality_scheduler/``
(``gpu_placementer.py``, ``connection_manager.py``, ``spine_resource_manager.py``); the code
here is fabriclab's own. Every OCS port starts unconnected: no default wiring is kept or
preferred, and the circuits of running jobs never move. A job that crosses leaves takes
whole idle servers (the ledger's ``gpus_per_server``) and, in this order:

1. **Direct pair**: ``k/2`` hosts on each of two leaves joined by ``k/2`` leaf-leaf circuits
   on OCSes where both leaves' ports are idle; the pair with the fewest idle servers between
   them (exact, by enumeration).
2. **Star** (``k`` <= a spine's ports, whole servers): every host gets its own circuit to
   one spine; the fewest leaves, then the fewest idle servers on them.
3. **Whole leaves** (``k`` a power of two needing several whole spines): ``k / hosts_per_leaf``
   idle leaves wired evenly to ``k / spine ports`` idle spines (lowest indices).
4. **Blocks**: ``m x n`` blocks of ``n`` hosts, ``m`` from ``max(odd part of k, k /
   hosts_per_leaf)`` doubling; two assignment problems, each a MILP solved to optimality by
   HiGHS: :func:`pack_blocks` puts the blocks on leaves (best fit: fewest idle servers on the
   leaves used), :func:`wire_blocks` gives each block one circuit to each of ``n`` spines
   (a leaf port carries at most one circuit, a spine at most ``spine_ports_per_ocs`` per
   OCS; best fit: the spines with the fewest idle ports).

Departures from RapidNetSim, each a fix of what the issue found: a star that cannot be wired
falls back to the later shapes (RapidNetSim refuses the job); the direct pair's port
constraints are enforced (RapidNetSim builds them but never adds them); spines are any with
enough idle ports (not RapidNetSim's power-of-two port groups); both problems are solved to
optimality (RapidNetSim stops Gurobi at a 0.8 MIP gap). When a packing cannot be wired,
other packings are tried (:data:`MAX_PACKINGS` in all, each cutting off the leaf sets before
it), then the joint packing-and-wiring MILP of :mod:`~sdn_app.allocation.ocs_feasibility`
decides the shape: a shape is given up only when no wiring of it exists (or that MILP runs
out of :data:`LAST_RESORT_TIME_LIMIT_S`), where RapidNetSim refuses the job.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from itertools import chain, product, repeat

from sdn_app.allocation.ledger import Allocation, BlockCircuits, LeafSlot, Ledger, PortUse, bits
from sdn_app.allocation.milp import STATS, Milp
from sdn_app.allocation.ocs_feasibility import (
    Shape,
    State,
    block_shapes,
    decide_blocks,
    whole_leaves_counts,
)

# Packings tried per shape (the best first) before the last resort.
MAX_PACKINGS = 4
# How long the wiring MILP may run before its best answer is taken (or the shape given up).
WIRE_TIME_LIMIT_S = 2.0
# How many wiring MILPs ran, and how many hit the time limit (answer not proven optimal).
SOLVER_STATS = {"wire_milps": 0, "wire_unproven": 0, "last_resorts": 0, "last_resort_wirings": 0}
# How long the last resort's joint MILP may run on one shape before it is given up.
LAST_RESORT_TIME_LIMIT_S = 10.0


def solver_counts() -> dict[str, float]:
    """So far in this process: every MILP's (:data:`~sdn_app.allocation.milp.STATS`: solved,
    unproven, reused, solver_s) and this placement's (:data:`SOLVER_STATS`). A run reports
    the difference between its end and its start."""
    return {**asdict(STATS), **SOLVER_STATS}


@dataclass(frozen=True)
class Snapshot:
    """What a placement reads of the ledger, once per job."""

    spread: list[int]  # hosts in whole idle servers, per leaf
    idle_servers: list[int]  # whole idle servers, per leaf
    leaf_mask: list[int]  # bit o: the leaf's port on OCS o is idle
    spine_idle: list[list[int]]  # [spine][ocs]: idle spine ports

    @classmethod
    def of(cls, ledger: Ledger) -> Snapshot:
        idle = ledger.idle_servers()
        g = ledger.gpus_per_server
        return cls([servers * g for servers in idle], idle,
                   ledger.idle_ocs_masks(), ledger.idle_spine_counts())


def place_exact(ledger: Ledger, job_id: str, k: int, snap: Snapshot) -> Allocation | None:
    """Place a cross-leaf job of k hosts (steps 2-4 of the module doc; the direct pair is
    the caller's, which owns leaf-leaf allocations), or None."""
    g = ledger.gpus_per_server
    if k <= ledger.ocs_count * ledger.spine_ports_per_ocs and k % g == 0:
        found = place_blocks(ledger, job_id, snap, k, 1, fewest_leaves=True)
        if found is not None:
            return found
    found = place_whole_leaves(ledger, job_id, snap, k)
    if found is not None:
        return found
    for m, n in block_shapes(k, ledger.leaves, ledger.hosts_per_leaf, ledger.ocs_count):
        found = place_blocks(ledger, job_id, snap, m, n)
        if found is not None:
            return found
    return None


def best_pair(ledger: Ledger, h: int, snap: Snapshot | None = None) -> tuple[int, int] | None:
    """Two leaves with h hosts in idle servers and h OCSes where both ports are idle, the
    fewest idle servers between them (lowest indices on ties); exact by enumeration."""
    snap = snap or Snapshot.of(ledger)
    cands = sorted(
        (snap.idle_servers[leaf], leaf) for leaf in range(ledger.leaves)
        if snap.spread[leaf] >= h and snap.leaf_mask[leaf].bit_count() >= h)
    best: tuple[int, int, int] | None = None
    for i, (cost_a, a) in enumerate(cands):
        if best is not None and cost_a + cost_a >= best[0]:
            break
        for cost_b, b in cands[i + 1:]:
            if best is not None and cost_a + cost_b >= best[0]:
                break
            if (snap.leaf_mask[a] & snap.leaf_mask[b]).bit_count() >= h:
                best = (cost_a + cost_b, a, b)
                break
    return None if best is None else (min(best[1:]), max(best[1:]))


def place_blocks(ledger: Ledger, job_id: str, snap: Snapshot, m: int, n: int,
                 fewest_leaves: bool = False) -> Allocation | None:
    """m blocks of n hosts: packed (:func:`pack_blocks`), then wired (:func:`wire_blocks`);
    up to MAX_PACKINGS packings, then :func:`_last_resort`."""
    if sum(sum(idle) >= m for idle in snap.spine_idle) < n:
        return None  # fewer than n spines with m idle ports: no packing can be wired
    excluded: list[frozenset[int]] = []
    for tried in range(MAX_PACKINGS):
        blocks = pack_blocks(ledger, snap, m, n, fewest_leaves, excluded)
        if blocks is None:
            if not tried:
                return None  # no room for m blocks at all
            break
        wiring = wire_blocks(ledger, snap, blocks, n)
        if wiring is not None:
            return block_allocation(ledger, job_id, blocks, n, *wiring)
        excluded.append(frozenset(blocks))
    return _last_resort(ledger, job_id, m, n, fewest_leaves)


def _last_resort(ledger: Ledger, job_id: str, m: int, n: int,
                 fewest_leaves: bool) -> Allocation | None:
    """The shape decided whole when the packings tried could not be wired: the joint
    packing-and-wiring MILP of :func:`~sdn_app.allocation.ocs_feasibility.decide_blocks`
    finds a wiring wherever one exists (None: none exists, or it ran out of time). The cuts
    of :func:`place_blocks` forbid whole leaf sets, and with them wirings on larger sets."""
    shape = Shape("star" if fewest_leaves else "blocks", m, n)
    wiring = decide_blocks(ledger, State.of(ledger), shape, LAST_RESORT_TIME_LIMIT_S).wiring
    SOLVER_STATS["last_resorts"] += 1
    if wiring is None:
        return None
    SOLVER_STATS["last_resort_wirings"] += 1
    ocs_of: dict[tuple[int, int], list[int]] = {}
    for c in wiring.circuits:
        ocs_of.setdefault((c.end_a[1], c.end_b[1]), []).append(c.ocs)
    blocks = {leaf: hosts // n for leaf, hosts in wiring.hosts.items()}
    return block_allocation(ledger, job_id, blocks, n, list(wiring.spines), ocs_of)


def pack_blocks(ledger: Ledger, snap: Snapshot, m: int, n: int, fewest_leaves: bool = False,
                excluded: list[frozenset[int]] | None = None) -> dict[int, int] | None:
    """``{leaf: blocks}`` for m blocks of n hosts, or None: a leaf holds blocks in its whole
    idle servers and idle OCS ports, whole servers only; minimises the idle servers of the
    leaves used (``fewest_leaves``: the number of leaves first). ``excluded``: leaf sets
    that may not all be used together."""
    g = ledger.gpus_per_server
    step = g // math.gcd(n, g)  # blocks per whole number of servers
    cap = {}
    for leaf in range(ledger.leaves):
        hosts = min(snap.spread[leaf], snap.leaf_mask[leaf].bit_count())
        units = hosts // (n * step)
        if units:
            cap[leaf] = units
    if sum(cap.values()) * step < m or m % step:
        return None
    big = ledger.leaves * ledger.hosts_per_leaf + 1 if fewest_leaves else 0
    model = Milp()
    units_var, used_var = {}, {}
    for leaf, units in cap.items():
        units_var[leaf] = model.var(units)
        used_var[leaf] = model.var(1, cost=big + snap.idle_servers[leaf])
        model.row({units_var[leaf]: 1, used_var[leaf]: -units}, upper=0)
    model.row({v: step for v in units_var.values()}, lower=m, upper=m)
    for leaf_set in excluded or []:
        if leaf_set <= cap.keys():
            model.row({used_var[leaf]: 1 for leaf in leaf_set}, upper=len(leaf_set) - 1)
    x = model.solve()
    if x is None:
        return None
    return {leaf: x[v] * step for leaf, v in units_var.items() if x[v]}


def wire_blocks(
    ledger: Ledger, snap: Snapshot, blocks: dict[int, int], n: int
) -> tuple[list[int], dict[tuple[int, int], list[int]]] | None:
    """n spines and, for every (leaf, spine), the OCSes of its ``blocks[leaf]`` circuits, or
    None: a leaf port carries at most one circuit, a spine on an OCS at most its idle ports;
    minimises the idle ports of the spines used (best fit).

    Spines with the same idle ports are interchangeable, and so are leaves with the same idle
    ports and blocks: the MILP (:func:`_wire_kinds`) counts circuits between *kinds*, so it
    has no symmetric solutions to wade through, and :func:`split_evenly` deals them out to
    the leaves and spines of each kind afterwards. That always succeeds: a bipartite
    multigraph has an equitable edge colouring (de Werra), each of y colours taking
    ``floor(d / y)`` or ``ceil(d / y)`` of a vertex's d edges.
    """
    m = sum(blocks.values())
    spine_kinds: dict[tuple, list[int]] = {}
    for spine in range(ledger.spines):
        idle = snap.spine_idle[spine]
        mask = sum(1 << o for o, c in enumerate(idle) if c)
        if sum(idle) >= m and all(
            (snap.leaf_mask[leaf] & mask).bit_count() >= b and ledger.link_free(leaf, spine)
            for leaf, b in blocks.items()
        ):
            spine_kinds.setdefault(tuple(idle), []).append(spine)
    if sum(len(v) for v in spine_kinds.values()) < n:
        return None
    greedy = _wire_greedy(snap, blocks, n, spine_kinds, cheapest_only=True)
    if greedy is not None:
        return greedy[1]  # it took the n cheapest spines: the lower bound, so optimal
    leaf_kinds: dict[tuple[int, int], list[int]] = {}
    for leaf, b in sorted(blocks.items()):
        leaf_kinds.setdefault((snap.leaf_mask[leaf], b), []).append(leaf)
    found, proven = _wire_kinds(n, leaf_kinds, spine_kinds)
    if found is None:
        if proven:
            return None  # no wiring exists
        greedy = _wire_greedy(snap, blocks, n, spine_kinds)  # the MILP ran out of time
        return None if greedy is None else greedy[1]
    taken, flows = found
    # Each leaf kind's circuits (spine kind, ocs) to its leaves: b * y of every spine kind
    # to each leaf, one per OCS.
    per_spine_kind: dict[tuple, list[tuple[int, int]]] = {idle: [] for idle in taken}
    for (mask, b), leaves in leaf_kinds.items():
        edges = [(idle, ocs) for (lk, idle, ocs), c in flows.items() if lk == (mask, b)
                 for _ in range(c)]
        parts = split_evenly(edges, len(leaves), {idle: b * y for idle, y in taken.items()},
                             lambda _ocs: 1)
        for leaf, part in zip(leaves, parts, strict=True):
            per_spine_kind_edges = [(idle, (leaf, ocs)) for idle, ocs in part]
            for idle, edge in per_spine_kind_edges:
                per_spine_kind[idle].append(edge)
    spines: list[int] = []
    ocs_of: dict[tuple[int, int], list[int]] = {}
    for idle, y in taken.items():
        parts = split_evenly(per_spine_kind[idle], y, blocks, lambda ocs, i=idle: i[ocs])
        for spine, part in zip(spine_kinds[idle], parts, strict=False):
            spines.append(spine)
            for leaf, ocs in part:
                ocs_of.setdefault((leaf, spine), []).append(ocs)
    for ocses in ocs_of.values():
        ocses.sort()
    return sorted(spines), ocs_of


def _wire_greedy(
    snap: Snapshot, blocks: dict[int, int], n: int, kinds: dict[tuple, list[int]],
    cheapest_only: bool = False,
) -> tuple[bool, tuple[list[int], dict[tuple[int, int], list[int]]]] | None:
    """Spines cheapest first (fewest idle ports, then index), each wired by a maximum flow
    (leaf -> OCS -> spine) over the leaf ports still idle: ``(took the n cheapest,
    wiring)`` once n spines are wired, or None. Fast; optimal when it took the n cheapest.
    ``cheapest_only``: None at the first spine it cannot wire (no proof of optimality can
    follow; in a run at the paper's scale that is most calls, and the rest of the spines
    would cost more than the MILP)."""
    order = sorted((sum(idle), spine, idle) for idle, sp in kinds.items() for spine in sp)
    free = {leaf: snap.leaf_mask[leaf] for leaf in blocks}
    spines: list[int] = []
    ocs_of: dict[tuple[int, int], list[int]] = {}
    skipped = False
    for _cost, spine, idle in order:
        flow = _spine_flow(free, blocks, idle)
        if flow is None:
            if cheapest_only:
                return None
            skipped = True
            continue
        spines.append(spine)
        for leaf, ocses in flow.items():
            ocs_of[(leaf, spine)] = ocses
            for ocs in ocses:
                free[leaf] &= ~(1 << ocs)
        if len(spines) == n:
            return not skipped, (sorted(spines), ocs_of)
    return None


def _spine_flow(free: dict[int, int], blocks: dict[int, int],
                idle: tuple) -> dict[int, list[int]] | None:
    """``{leaf: OCSes}``: ``blocks[leaf]`` circuits from every leaf to one spine, on OCSes
    where the leaf's port is free, at most ``idle[ocs]`` on an OCS (augmenting paths)."""
    load = [0] * len(idle)
    users: dict[int, list[int]] = {}  # ocs -> leaves on it
    got: dict[int, set[int]] = {leaf: set() for leaf in blocks}

    def augment(leaf: int, seen: set[int]) -> bool:
        held = got[leaf]
        options = [o for o in bits(free[leaf]) if idle[o] and o not in seen and o not in held]
        open_first = [o for o in options if load[o] < idle[o]]
        open_first += [o for o in options if load[o] >= idle[o]]
        for ocs in open_first:
            seen.add(ocs)
            if load[ocs] < idle[ocs]:
                load[ocs] += 1
            else:
                other = next((u for u in users[ocs] if _moved(u, ocs, seen)), None)
                if other is None:
                    continue
                users[ocs].remove(other)
            users.setdefault(ocs, []).append(leaf)
            got[leaf].add(ocs)
            return True
        return False

    def _moved(leaf: int, ocs: int, seen: set[int]) -> bool:
        got[leaf].discard(ocs)
        if augment(leaf, seen):
            return True
        got[leaf].add(ocs)
        return False

    for leaf, b in blocks.items():
        for _ in range(b):
            if not augment(leaf, set()):
                return None
    return {leaf: sorted(ocses) for leaf, ocses in got.items()}


def _wire_kinds(
    n: int, leaf_kinds: dict[tuple[int, int], list[int]], spine_kinds: dict[tuple, list[int]]
) -> tuple[tuple[dict[tuple, int], dict[tuple[tuple[int, int], tuple, int], int]] | None,
           bool]:
    """The wiring MILP over kinds: ``({spine kind: spines taken}, {(leaf kind, spine kind,
    ocs): circuits})`` or None (no wiring found), and whether that answer is proven (an
    optimum, or that no wiring exists; not when the MILP ran out of time).

    Per leaf kind (N leaves, b blocks each) and spine kind (y taken): b * N * y circuits;
    per leaf kind and OCS at most N (one port each); per spine kind and OCS at most
    y * idle ports."""
    model = Milp()
    take = {idle: model.var(min(n, len(sp)), cost=sum(idle)) for idle, sp in spine_kinds.items()}
    flow: dict[tuple[tuple[int, int], tuple, int], int] = {}
    by_spine_ocs: dict[tuple[tuple, int], dict[int, float]] = {}
    for (mask, b), leaves in leaf_kinds.items():
        count = len(leaves)
        by_ocs: dict[int, dict[int, float]] = {}
        for idle in spine_kinds:
            pair: dict[int, float] = {take[idle]: -b * count}
            for ocs in bits(mask):
                if idle[ocs]:
                    v = model.var(count)
                    flow[((mask, b), idle, ocs)] = v
                    pair[v] = 1
                    by_ocs.setdefault(ocs, {})[v] = 1
                    by_spine_ocs.setdefault((idle, ocs), {})[v] = 1
            model.row(pair, lower=0, upper=0)
        for terms in by_ocs.values():
            if sum(1 for _ in terms) * count > count:
                model.row(terms, upper=count)
    for (idle, ocs), terms in by_spine_ocs.items():
        model.row({**terms, take[idle]: -idle[ocs]}, upper=0)
    model.row(dict.fromkeys(take.values(), 1), lower=n, upper=n)
    x = model.solve(WIRE_TIME_LIMIT_S)
    SOLVER_STATS["wire_milps"] += 1
    SOLVER_STATS["wire_unproven"] += not model.proven
    if x is None:
        return None, model.proven
    return ({idle: x[v] for idle, v in take.items() if x[v]},
            {key: x[v] for key, v in flow.items() if x[v]}), model.proven


def split_evenly(edges: list[tuple], count: int, exact: dict, cap) -> list[list[tuple]]:
    """Deal the edges ``(a, b)`` (repeats allowed) out to ``count`` parts: each part gets
    exactly ``exact[a]`` edges at every a present and at most ``cap(b)`` at every b. One part
    at a time (:func:`one_part`), leaving every b at most ``cap(b)`` per part still to come:
    de Werra's equitable colouring of a bipartite multigraph says such a part exists
    whenever the totals allow it."""
    parts: list[list[tuple]] = []
    left = Counter(edges)
    for remaining in range(count, 0, -1):
        keys = sorted(left)
        if remaining == 1:
            parts.append([e for e in keys for _ in range(left[e])])
            break
        degree: Counter = Counter()
        for (_a, b), c in left.items():
            degree[b] += c
        low = {b: max(0, d - cap(b) * (remaining - 1)) for b, d in degree.items()}
        part = one_part(keys, left, exact, low, {b: cap(b) for b in degree})
        assert part is not None, "an equitable split always exists"
        parts.append(part)
        left.subtract(part)
        left = +left
    return parts


def one_part(keys: list[tuple], left: Counter, exact: dict, low: dict,
             high: dict) -> list[tuple] | None:
    """Edges (a multiset of ``keys``, at most ``left[e]`` of each) with exactly ``exact[a]``
    at every a and between ``low[b]`` and ``high[b]`` at every b, or None if there are none.

    A feasible flow with lower bounds, by augmenting paths (a -> b, back from b to another a
    that holds one of b's edges, ...): first every b is filled up to ``low[b]``, then up to
    ``high[b]``. A path never takes an edge away from its last b, so b's count only grows
    and the lower bounds met in the first pass stay met; each pass is a maximum flow (an a
    that finds no path finds none later), so a part exists exactly when both passes fill."""
    by_a: dict = {}  # a -> [(b, edge, copies of the edge left)]
    for a, b in keys:
        by_a.setdefault(a, []).append((b, (a, b), left[(a, b)]))
    by_b: dict = {}  # b -> {a: None} of the a's that have held one of b's edges
    taken = dict.fromkeys(keys, 0)  # edge -> copies in the part
    at_b = dict.fromkeys((b for _a, b in keys), 0)
    need = dict.fromkeys(by_a, 0)

    def augment(a, limit: dict, seen: set) -> bool:
        for b, edge, copies in by_a[a]:
            if b in seen or taken[edge] >= copies:
                continue
            seen.add(b)
            if at_b[b] < limit.get(b, 0):
                at_b[b] += 1
            else:
                for other in by_b.get(b, ()):
                    if taken[(other, b)] and augment(other, limit, seen):
                        taken[(other, b)] -= 1
                        break
                else:
                    continue
            taken[edge] += 1
            by_b.setdefault(b, {})[a] = None
            return True
        return False

    for limit in (low, high):
        for a in by_a:
            while need[a] < exact[a] and augment(a, limit, set()):
                need[a] += 1
    if any(need[a] < exact[a] for a in by_a) or any(at_b[b] < lo for b, lo in low.items()):
        return None
    return [e for e in keys for _ in range(taken[e])]


def place_whole_leaves(ledger: Ledger, job_id: str, snap: Snapshot, k: int) -> Allocation | None:
    """A power-of-two job on whole idle leaves wired evenly to whole idle spines (lowest
    indices), where the fabric's counts allow an even wiring; else None."""
    hosts, ocses, ports = ledger.hosts_per_leaf, ledger.ocs_count, ledger.spine_ports_per_ocs
    counts = whole_leaves_counts(k, hosts, ocses, ports)
    if counts is None:
        return None
    leaves_wanted, spines_wanted = counts
    spine_ports = ocses * ports
    full = (1 << ocses) - 1
    leaves = [lf for lf in range(ledger.leaves)
              if snap.spread[lf] == hosts and snap.leaf_mask[lf] == full][:leaves_wanted]
    spines = [s for s, idle in enumerate(map(sum, snap.spine_idle))
              if idle == spine_ports][:spines_wanted]
    if len(leaves) < leaves_wanted or len(spines) < spines_wanted:
        return None
    if any(not ledger.link_free(lf, s) for lf in leaves for s in spines):
        return None
    return whole_leaves_allocation(ledger, job_id, leaves, spines)


def whole_leaves_allocation(ledger: Ledger, job_id: str, leaves: list[int],
                            spines: list[int]) -> Allocation:
    """Whole idle leaves (ascending) wired evenly to whole idle spines: leaf r's circuit on
    OCS t goes to spine (r + t) mod S (S spines), so every spine gets leaves / S = ports
    circuits on every OCS, and every leaf hosts / S to each. Host a * S + j of leaf r reaches
    ``spines[j]`` over OCS (j - r) mod S + a * S.

    What :func:`block_allocation` builds from those OCSes (a test holds the two equal),
    without counting circuits one by one: every port of every OCS of those leaves and spines
    is taken (ocs_count = hosts_per_leaf)."""
    hosts, count = ledger.hosts_per_leaf, len(spines)
    rows: dict[int, list[int]] = {}  # r mod S -> the OCS of each host of leaf r
    host_list: list[LeafSlot] = []
    host_ocses: list[int] = []
    for r, leaf in enumerate(leaves):
        row = rows.get(r % count)
        if row is None:
            row = rows[r % count] = [(j - r) % count + a * count
                                     for a in range(hosts // count) for j in range(count)]
        host_list.extend(zip(repeat(leaf), range(hosts)))  # every slot: the leaf is idle
        host_ocses.extend(row)
    host_spines = spines * (hosts // count * len(leaves))
    # Every port (the ledger's booking checks that each is idle).
    ports = PortUse(dict.fromkeys(leaves, (1 << hosts) - 1), dict.fromkeys(
        product(range(hosts), spines), (1 << ledger.spine_ports_per_ocs) - 1))
    return _block_job(job_id, leaves, spines, host_list, host_ocses, host_spines, ports)


def block_allocation(
    ledger: Ledger, job_id: str, blocks: dict[int, int], n: int, spines: list[int],
    ocs_of: dict[tuple[int, int], list[int]],
) -> Allocation:
    """The allocation of blocks: host ``a * n + j`` of a leaf (its a-th block) reaches
    ``spines[j]`` over the a-th circuit of that (leaf, spine), on the lowest idle port.

    Its circuits are a :class:`~sdn_app.allocation.ledger.BlockCircuits`, booked by the
    ports they hold and built only when read: a run at the paper's scale holds over a
    million, so the per-host work here stays in C (zip, map, chain, Counter)."""
    hosts: list[LeafSlot] = []
    host_ocses: list[int] = []
    host_spines: list[int] = []
    leaf_ports: dict[int, int] = {}
    for leaf in sorted(blocks):
        count = blocks[leaf] * n
        slots = ledger.take_slots([leaf], count)[leaf]
        # Host a * n + j's OCS: row a of the columns ocs_of[(leaf, spines[j])].
        ocses = list(chain.from_iterable(zip(*(ocs_of[(leaf, s)] for s in spines),
                                             strict=True)))
        assert len(slots) == len(ocses) == len(set(ocses)) == count, (leaf, count)
        leaf_ports[leaf] = sum(map((1).__lshift__, ocses))
        hosts.extend(zip(repeat(leaf), slots))
        host_ocses.extend(ocses)
        host_spines.extend(spines * blocks[leaf])
    spine_ports = ledger.lowest_idle_ports(Counter(zip(host_ocses, host_spines, strict=True)))
    return _block_job(job_id, sorted(blocks), spines, hosts, host_ocses, host_spines,
                      PortUse(leaf_ports, spine_ports))


def _block_job(job_id: str, leaves: list[int], spines: list[int], hosts: list[LeafSlot],
               host_ocses: list[int], host_spines: list[int], ports: PortUse) -> Allocation:
    """The allocation of a block job: host i (leaf, then slot) reaches ``host_spines[i]``
    over OCS ``host_ocses[i]``, the circuits holding ``ports``."""
    return Allocation(
        job_id=job_id, policy="ocs-vclos", hosts=tuple(hosts), leaves=tuple(leaves),
        spines=tuple(spines), links=frozenset(product(leaves, spines)),
        circuits=BlockCircuits(hosts, host_ocses, host_spines, ports),
        spine_of=dict(zip(hosts, host_spines, strict=True)),
        circuit_of=dict(zip(hosts, range(len(hosts)), strict=True)))

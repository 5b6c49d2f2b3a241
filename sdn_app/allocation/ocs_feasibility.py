"""Can a cross-leaf OCS-vClos job be wired at all? An exact decision, with evidence either way,
over the shapes the ``exact`` rewiring knows (:mod:`.ocs_exact`): the auditor of its refusals
(``benchmarks/ocs_refusals.py``).

Shapes of a job of k hosts, as ``exact`` tries them: one leaf; a direct leaf pair (k/2 hosts on
each of two leaves, k/2 leaf-leaf circuits); the star (k blocks of one host, one spine); whole
leaves; and every ``m x n`` block shape of :func:`shapes` (m blocks of n hosts, any number of
blocks on a leaf, whole servers per leaf, each block one circuit to each of n spines). A leaf
port carries at most one circuit, a spine at most its idle ports on an OCS; circuits of running
jobs stay.

Per block shape, cheap counts first (:func:`decide_blocks`: units of whole servers, spines that
can take m circuits, circuits the OCSes can carry), then one MILP (HiGHS) that chooses the
packing, the n spines and every circuit's OCS together. It counts leaves by *kind* (idle ports,
blocks they can hold) and *class* (kind and blocks taken), spines by kind (idle ports per OCS),
and circuits per (class, spine kind, OCS); the product "leaves of a class x spines of a kind"
is linearised exactly (binary digits of the spines taken). Counting by kind loses nothing: a
bipartite multigraph has an equitable edge colouring (de Werra), so the circuits of a class can
be dealt to its leaves (each b per spine taken, at most one per OCS) and those of a spine kind
to its spines (b from each leaf, at most the idle ports per OCS). So the MILP is infeasible
exactly when no wiring exists. A feasible answer is made explicit (:func:`explicit_wiring`:
per leaf, spine, OCS and spine port) and checked port by port against the ledger
(:func:`check_wiring`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from itertools import combinations

from sdn_app.allocation.ledger import Circuit, Ledger
from sdn_app.allocation.milp import Milp


@dataclass(frozen=True)
class State:
    """What the decision reads of the ledger."""

    free: tuple[int, ...]  # free hosts per leaf
    spread: tuple[int, ...]  # hosts in whole idle servers per leaf
    leaf_mask: tuple[int, ...]  # bit o: the leaf's port on OCS o is idle
    spine_idle: tuple[tuple[int, ...], ...]  # [spine][ocs]: idle ports
    hosts_per_leaf: int
    gpus_per_server: int
    ocs_count: int
    spine_ports_per_ocs: int

    @classmethod
    def of(cls, ledger: Ledger) -> State:
        leaves = range(ledger.leaves)
        if any(not ledger.link_free(lf, s) for lf in leaves for s in range(ledger.spines)):
            raise ValueError("the decision models OCS clusters without exclusive links only")
        return cls(tuple(ledger.free_count(lf) for lf in leaves),
                   tuple(ledger.spread_count(lf) for lf in leaves),
                   tuple(ledger.idle_ocs_masks()),
                   tuple(map(tuple, ledger.idle_spine_counts())), ledger.hosts_per_leaf,
                   ledger.gpus_per_server, ledger.ocs_count, ledger.spine_ports_per_ocs)


@dataclass(frozen=True)
class Shape:
    kind: str  # "one leaf", "pair", "star", "whole leaves", "blocks"
    m: int  # leaves (one leaf, pair) or blocks
    n: int  # hosts per leaf (one leaf, pair) or per block (= spines)

    def __str__(self) -> str:
        return f"{self.kind} {self.m}x{self.n}"


@dataclass(frozen=True)
class Wiring:
    """An explicit placement: hosts per leaf, the spines, every circuit with its ports."""

    shape: Shape
    hosts: dict[int, int]  # leaf -> hosts
    spines: tuple[int, ...] = ()
    circuits: tuple[Circuit, ...] = ()


@dataclass
class Verdict:
    """One shape's answer: ``none`` (proven), ``wiring`` (``wiring`` set) or ``unknown``."""

    shape: Shape
    answer: str
    how: str
    seconds: float = 0.0
    wiring: Wiring | None = None


@dataclass
class Decision:
    k: int
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def answer(self) -> str:
        """``wiring`` if a shape has one, else ``unknown`` if a shape is undecided, else
        ``none``."""
        answers = {v.answer for v in self.verdicts}
        return "wiring" if "wiring" in answers else "unknown" if "unknown" in answers else "none"


def block_shapes(k: int, leaves: int, hosts_per_leaf: int, ocs_count: int
                 ) -> list[tuple[int, int]]:
    """``(m, n)`` of the m x n block shapes ``exact`` tries for k hosts, in its order: m from
    max(odd part of k, k / hosts per leaf), doubling up to min(leaves, k), where n = k / m is
    whole and at most the OCSes (a block's circuits, one per OCS)."""
    out = []
    m = max(k >> ((k & -k).bit_length() - 1), k // hosts_per_leaf)
    while m <= min(leaves, k):
        if k % m == 0 and k // m <= ocs_count:
            out.append((m, k // m))
        m *= 2
    return out


def whole_leaves_counts(k: int, hosts_per_leaf: int, ocs_count: int,
                        spine_ports_per_ocs: int) -> tuple[int, int] | None:
    """``(leaves, spines)`` of ``exact``'s whole-leaves step for k hosts (a power of two
    needing several whole spines, wired evenly: each leaf hosts / spines circuits to each),
    or None where the fabric's counts allow no even wiring."""
    hosts, spine_ports = hosts_per_leaf, ocs_count * spine_ports_per_ocs
    if k & (k - 1) or k <= spine_ports or k % hosts or k % spine_ports or ocs_count != hosts:
        return None
    leaves, spines = k // hosts, k // spine_ports
    return None if hosts % spines else (leaves, spines)


def shapes(k: int, st: State) -> list[Shape]:
    """The cross-leaf shapes ``exact`` tries for k hosts, in its order (see the module doc);
    whole leaves (as m blocks x n hosts) only where no block shape of the same m x n is
    tried."""
    g, hosts, ocses = st.gpus_per_server, st.hosts_per_leaf, st.ocs_count
    out = []
    if k % 2 == 0 and k // 2 <= min(hosts, ocses):
        out.append(Shape("pair", 2, k // 2))
    if k <= ocses * st.spine_ports_per_ocs and k % g == 0:
        out.append(Shape("star", k, 1))
    blocks = block_shapes(k, len(st.spread), hosts, ocses)
    whole = whole_leaves_counts(k, hosts, ocses, st.spine_ports_per_ocs)
    if whole is not None:
        leaves, n = whole
        if (leaves * (hosts // n), n) not in blocks:
            out.append(Shape("whole leaves", leaves * (hosts // n), n))
    return out + [Shape("blocks", m, n) for m, n in blocks]


def decide(ledger: Ledger, k: int, time_limit_s: float = 60.0) -> Decision:
    """Every shape of a cross-leaf job of k hosts on ``ledger`` now, in order, until one has
    a wiring (checked by :func:`check_wiring`)."""
    st = State.of(ledger)
    decision = Decision(k)
    fits = [lf for lf, free in enumerate(st.free) if free >= k]
    if fits:
        wiring = Wiring(Shape("one leaf", 1, k), {fits[0]: k})
        decision.verdicts.append(Verdict(wiring.shape, "wiring", f"leaf {fits[0]} holds it",
                                         0.0, wiring))
        return decision
    decision.verdicts.append(Verdict(Shape("one leaf", 1, k), "none",
                                     f"at most {max(st.free)} free hosts on a leaf"))
    for shape in shapes(k, st):
        start = time.perf_counter()
        if shape.kind == "pair":
            verdict = decide_pair(ledger, st, shape)
        elif shape.kind == "whole leaves":
            verdict = decide_whole_leaves(ledger, st, shape, time_limit_s)
        else:
            verdict = decide_blocks(ledger, st, shape, time_limit_s)
        verdict.seconds = time.perf_counter() - start
        if verdict.wiring is not None:
            problem = check_wiring(ledger, k, verdict.wiring)
            if problem:
                verdict.answer, verdict.how = "unknown", f"wiring failed its check: {problem}"
        decision.verdicts.append(verdict)
        if verdict.answer == "wiring":
            break
    return decision


def decide_pair(ledger: Ledger, st: State, shape: Shape) -> Verdict:
    """Every pair of leaves (exact by enumeration)."""
    h = shape.n
    cands = [lf for lf, spread in enumerate(st.spread)
             if spread >= h and st.leaf_mask[lf].bit_count() >= h]
    for a, b in combinations(cands, 2):
        common = st.leaf_mask[a] & st.leaf_mask[b]
        if common.bit_count() >= h:
            ocses = [o for o in range(st.ocs_count) if common >> o & 1][:h]
            circuits = tuple(Circuit(o, ("leaf", a), ("leaf", b)) for o in ocses)
            return Verdict(shape, "wiring", f"leaves {a} and {b}", 0.0,
                           Wiring(shape, {a: h, b: h}, (), circuits))
    return Verdict(shape, "none", f"{len(cands)} leaves have {h} hosts and ports, "
                                  f"no two share {h} idle OCSes")


def decide_whole_leaves(ledger: Ledger, st: State, shape: Shape,
                        time_limit_s: float) -> Verdict:
    """Enough wholly idle leaves and spines (where no block shape covers this step)."""
    full = (1 << st.ocs_count) - 1
    spine_ports = st.ocs_count * st.spine_ports_per_ocs
    leaves = [lf for lf, (spread, mask) in enumerate(zip(st.spread, st.leaf_mask, strict=True))
              if spread == st.hosts_per_leaf and mask == full]
    spines = [s for s, idle in enumerate(st.spine_idle) if sum(idle) == spine_ports]
    wanted = shape.m * shape.n // st.hosts_per_leaf
    if len(leaves) < wanted or len(spines) < shape.n:
        return Verdict(shape, "none", f"{len(leaves)} idle leaves ({wanted} wanted), "
                                      f"{len(spines)} idle spines ({shape.n} wanted)")
    blocks = dict.fromkeys(leaves[:wanted], st.hosts_per_leaf // shape.n)
    wiring = explicit_wiring(ledger, st, shape, blocks, spines[:shape.n], time_limit_s)
    if wiring is None:
        return Verdict(shape, "unknown", "idle leaves and spines, wiring not found in time")
    return Verdict(shape, "wiring", "idle leaves and spines", 0.0, wiring)


def decide_blocks(ledger: Ledger, st: State, shape: Shape, time_limit_s: float) -> Verdict:
    """m blocks of n hosts: the counting bounds, then the joint MILP (module doc)."""
    m, n = shape.m, shape.n
    g = st.gpus_per_server
    step = g // math.gcd(n, g)  # blocks per whole number of servers
    if m % step:
        return Verdict(shape, "none", f"{m} blocks of {n} are not whole servers of {g}")
    unit = n * step  # hosts per unit (step blocks)
    cap = [min(spread, mask.bit_count()) // unit
           for spread, mask in zip(st.spread, st.leaf_mask, strict=True)]
    if sum(cap) * step < m:
        return Verdict(shape, "none", f"hosts: room for {sum(cap) * step} blocks, {m} needed")
    leaves_on = [sum(1 for lf, c in enumerate(cap) if c and st.leaf_mask[lf] >> o & 1)
                 for o in range(st.ocs_count)]
    takes = [sum(min(c, lo) for c, lo in zip(idle, leaves_on, strict=True))
             for idle in st.spine_idle]
    eligible = [s for s, t in enumerate(takes) if t >= m]
    if len(eligible) < n:
        return Verdict(shape, "none", f"spines: {len(eligible)} can take {m} circuits, "
                                      f"{n} needed")
    carry = sum(min(lo, sum(sorted(st.spine_idle[s][o] for s in eligible)[-n:]))
                for o, lo in enumerate(leaves_on))
    if carry < m * n:
        return Verdict(shape, "none", f"ports: the OCSes carry at most {carry} of the "
                                      f"{m * n} circuits")
    found = _joint_milp(st, m, n, step, cap, eligible, time_limit_s)
    if isinstance(found, str):
        return Verdict(shape, "unknown" if found != "infeasible" else "none",
                       f"MILP {found}")
    blocks, spines, size = found
    wiring = explicit_wiring(ledger, st, shape, blocks, spines, time_limit_s)
    if wiring is None:
        return Verdict(shape, "unknown", f"MILP ({size}) found a count, not realised in time")
    return Verdict(shape, "wiring", f"MILP ({size})", 0.0, wiring)


def _joint_milp(st: State, m: int, n: int, step: int, cap: list[int], eligible: list[int],
                time_limit_s: float) -> tuple[dict[int, int], list[int], str] | str:
    """``(blocks per leaf, spines, model size)``, or why not: ``"infeasible"`` (proven) or
    ``"timed out after T s"``."""
    leaf_kinds: dict[tuple[int, int], list[int]] = {}
    for lf, c in enumerate(cap):
        if c:
            leaf_kinds.setdefault((st.leaf_mask[lf], c), []).append(lf)
    spine_kinds: dict[tuple[int, ...], list[int]] = {}
    for s in eligible:
        spine_kinds.setdefault(st.spine_idle[s], []).append(s)
    model = Milp()
    u: dict[tuple[tuple[int, int], int], int] = {}  # (leaf kind, units) -> leaves
    for kind, leaves in leaf_kinds.items():
        for j in range(1, kind[1] + 1):
            u[(kind, j)] = model.var(len(leaves))
        model.row({u[(kind, j)]: 1 for j in range(1, kind[1] + 1)}, upper=len(leaves))
    model.row({v: j * step for (_kind, j), v in u.items()}, lower=m, upper=m)
    y: dict[tuple[int, ...], int] = {}  # spine kind -> spines taken
    digits: dict[tuple[int, ...], list[int]] = {}
    for idle, spines in spine_kinds.items():
        most = min(n, len(spines))
        y[idle] = model.var(most)
        digits[idle] = [model.var(1) for _ in range(most.bit_length())]
        model.row({y[idle]: 1, **{d: -(1 << i) for i, d in enumerate(digits[idle])}},
                  lower=0, upper=0)
    model.row(dict.fromkeys(y.values(), 1), lower=n, upper=n)
    per_class_ocs: dict[tuple, dict[int, float]] = {}
    per_spine_ocs: dict[tuple, dict[int, float]] = {}
    per_class: dict[tuple, dict[int, float]] = {c: {v: -n} for c, v in u.items()}
    per_spine: dict[tuple, dict[int, float]] = {idle: {v: -m} for idle, v in y.items()}
    for (kind, j), uv in u.items():
        mask, count = kind[0], len(leaf_kinds[kind])
        b = j * step
        for idle, ds in digits.items():
            supp = sum(1 << o for o, c in enumerate(idle) if c)
            if (mask & supp).bit_count() < b:
                for d in ds:  # this class and this spine kind cannot both be used
                    model.row({uv: 1, d: count}, upper=count)
                continue
            product: dict[int, float] = {}  # leaves of the class x spines of the kind
            for i, d in enumerate(ds):
                v = model.var(count)
                model.row({v: 1, d: -count}, upper=0)
                model.row({v: 1, uv: -1}, upper=0)
                model.row({uv: 1, v: -1, d: count}, upper=count)
                product[v] = 1 << i
            row = {pv: -b * c for pv, c in product.items()}
            for o in range(st.ocs_count):
                if mask >> o & 1 and idle[o]:
                    f = model.var(min(count, idle[o] * min(n, len(spine_kinds[idle]))))
                    row[f] = 1
                    per_class_ocs.setdefault(((kind, j), o), {uv: -1})[f] = 1
                    per_spine_ocs.setdefault((idle, o), {y[idle]: -idle[o]})[f] = 1
            model.row(row, lower=0, upper=0)
            for pv, c in product.items():
                per_class[(kind, j)][pv] = per_class[(kind, j)].get(pv, 0) + c
                per_spine[idle][pv] = per_spine[idle].get(pv, 0) + b * c
    for terms in (*per_class_ocs.values(), *per_spine_ocs.values()):
        model.row(terms, upper=0)
    for terms in (*per_class.values(), *per_spine.values()):  # implied: tighten the LP
        model.row(terms, lower=0, upper=0)
    size = f"{len(model.cost)} vars, {len(model.row_lower)} rows"
    start = time.perf_counter()
    x = model.solve(time_limit_s)
    if x is None:
        if model.infeasible:
            return "infeasible"
        return f"undecided after {time.perf_counter() - start:.0f} s ({size})"
    blocks: dict[int, int] = {}
    for kind, leaves in leaf_kinds.items():
        pool = iter(leaves)
        for j in range(1, kind[1] + 1):
            for _ in range(x[u[(kind, j)]]):
                blocks[next(pool)] = j * step
    spines = [s for idle, v in y.items() for s in spine_kinds[idle][:x[v]]]
    return blocks, spines, size


def explicit_wiring(ledger: Ledger, st: State, shape: Shape, blocks: dict[int, int],
                    spines: list[int], time_limit_s: float) -> Wiring | None:
    """Every circuit of ``blocks`` (leaf -> blocks) to ``spines``: a feasibility MILP over
    (leaf, spine, OCS), then the lowest idle spine ports; None if none found in time."""
    model = Milp()
    x: dict[tuple[int, int, int], int] = {}
    by_leaf_ocs: dict[tuple[int, int], dict[int, float]] = {}
    by_spine_ocs: dict[tuple[int, int], dict[int, float]] = {}
    for lf, b in blocks.items():
        for s in spines:
            pair = {}
            for o in range(st.ocs_count):
                if st.leaf_mask[lf] >> o & 1 and st.spine_idle[s][o]:
                    v = x[(lf, s, o)] = model.var(1)
                    pair[v] = 1
                    by_leaf_ocs.setdefault((lf, o), {})[v] = 1
                    by_spine_ocs.setdefault((s, o), {})[v] = 1
            model.row(pair, lower=b, upper=b)
    for terms in by_leaf_ocs.values():
        model.row(terms, upper=1)
    for (s, o), terms in by_spine_ocs.items():
        model.row(terms, upper=st.spine_idle[s][o])
    sol = model.solve(time_limit_s)
    if sol is None:
        return None
    circuits = []
    free = {}
    for (lf, s, o), v in sorted(x.items()):
        if sol[v]:
            ports = free.setdefault((o, s), ledger.idle_ports_of(o, s))
            circuits.append(Circuit(o, ("leaf", lf), ("spine", s, ports.pop(0))))
    return Wiring(shape, {lf: b * shape.n for lf, b in blocks.items()}, tuple(sorted(spines)),
                  tuple(circuits))


def check_wiring(ledger: Ledger, k: int, wiring: Wiring) -> str:
    """'' when ``wiring`` is a valid placement of k hosts on the ledger now, checked port by
    port; else the first problem found."""
    hosts, shape = wiring.hosts, wiring.shape
    if sum(hosts.values()) != k:
        return f"{sum(hosts.values())} hosts, not {k}"
    if shape.kind == "one leaf":
        (leaf, count), = hosts.items()
        return "" if ledger.free_count(leaf) >= count else f"leaf {leaf} is too full"
    g = ledger.gpus_per_server
    for leaf, count in hosts.items():
        if count > ledger.spread_count(leaf):
            return f"leaf {leaf}: {count} hosts, {ledger.spread_count(leaf)} in idle servers"
        if shape.kind != "pair" and count % g:
            return f"leaf {leaf}: {count} hosts are not whole servers of {g}"
    leaf_ports, spine_ports = set(), set()
    per_pair: dict[tuple[int, int], int] = {}
    for c in wiring.circuits:
        ends = [c.end_a, c.end_b]
        for end in ends:
            if end[0] == "leaf":
                port = (c.ocs, end[1])
                if port in leaf_ports or not ledger.leaf_port_idle(*port):
                    return f"leaf port {port} is busy or taken twice"
                leaf_ports.add(port)
            else:
                port = (c.ocs, end[1], end[2])
                if port in spine_ports or not (0 <= end[2] < ledger.spine_ports_per_ocs
                                               and ledger.spine_port_idle(*port)):
                    return f"spine port {port} is busy, absent or taken twice"
                spine_ports.add(port)
        pair = (c.end_a[1], c.end_b[1])
        per_pair[pair] = per_pair.get(pair, 0) + 1
    if shape.kind == "pair":
        a, b = sorted(hosts)
        ok = len(hosts) == 2 and hosts[a] == hosts[b] and per_pair == {(a, b): hosts[a]}
        return "" if ok else "a direct pair needs k/2 hosts and circuits on each of 2 leaves"
    n = len(wiring.spines)
    if n != shape.n or len(set(wiring.spines)) != n:
        return f"{n} spines, {shape.n} wanted"
    for leaf, count in hosts.items():
        for s in wiring.spines:
            if per_pair.get((leaf, s), 0) != count // n or not ledger.link_free(leaf, s):
                return f"leaf {leaf} -> spine {s}: not one circuit per block"
    if sum(per_pair.values()) != k:
        return "circuits outside the job's leaves and spines"
    return ""

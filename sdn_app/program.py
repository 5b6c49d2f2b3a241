"""What every switch must hold under a routing policy and a set of running jobs (pure).

The controller turns this program into OpenFlow 1.3 messages; the tests check it with the
``static_routes.trace`` tracer. Rules belonging to a job carry the job's cookie so they can be
listed and deleted together.

Policies
- ``ecmp``: a leaf sends traffic for another leaf to a SELECT group over its uplinks (OVS
  hashes each flow's headers, so two elephant flows can land on one uplink).
- ``vclos``: each job host's cross-leaf traffic is pinned to the job's spine for that host;
  traffic outside any job falls back to ECMP.
- ``ocs-vclos``: OCS switches hold only the circuits of running jobs; job hosts are pinned to
  their circuit (through a spine, or direct leaf to leaf).
- ``shortest``: multidim fabrics; each dimension switch forwards by destination.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from sdn_app.allocation.ledger import Allocation
from sdn_app.static_routes import (
    PRIO_ROUTE,
    Circuit,
    FlowRule,
    circuit_rules,
    delivery_rules,
    leaf_spine_view,
    static_rules,
)
from testbed.core.topology import FabricPlan, leaf_uplink_port, ocs_leaf_port, ocs_spine_port

PRIO_JOB = 150  # above the ECMP default route, below local delivery
ECMP_GROUP = 1  # group ids: 1 + destination leaf index


@dataclass(frozen=True)
class GroupRule:
    """An OpenFlow SELECT group: one bucket per output port, equal weights."""

    switch: str
    group_id: int
    ports: tuple[int, ...]


@dataclass
class Program:
    flows: list[FlowRule] = field(default_factory=list)
    groups: list[GroupRule] = field(default_factory=list)

    def for_switch(self, name: str) -> Program:
        return Program([f for f in self.flows if f.switch == name],
                       [g for g in self.groups if g.switch == name])

    def cookies(self) -> set[int]:
        return {f.cookie for f in self.flows}


def job_cookie(job_id: str) -> int:
    """A stable non-zero 32-bit cookie per job id (0 marks the base program)."""
    return zlib.crc32(job_id.encode()) or 1


Uplink = tuple[int, int]  # (leaf, spine) of a leaf-spine uplink


def base_program(plan: FabricPlan, policy: str, down: frozenset[Uplink] = frozenset()) -> Program:
    """Rules that hold whatever jobs run; ECMP leaves out spines behind ``down`` uplinks."""
    if policy == "shortest":
        return Program(static_rules(plan))
    if policy == "ocs-vclos":
        return Program(delivery_rules(plan, []))
    return _ecmp_program(plan, down)


def job_program(plan: FabricPlan, alloc: Allocation) -> Program:
    """Rules one job adds (all with the job's cookie); empty for ecmp and one-leaf jobs."""
    cookie = job_cookie(alloc.job_id)
    if alloc.policy == "vclos":
        return Program(_pinned_rules(plan, alloc, cookie, _vclos_up_port(plan)))
    if alloc.policy == "ocs-vclos":
        circuits = ocs_circuits(plan, alloc)
        prog = Program(circuit_rules(circuits, cookie))
        prog.flows += _pinned_rules(plan, alloc, cookie, _ocs_up_port(plan, alloc))
        prog.flows += _spine_rules_for_circuits(plan, alloc, circuits, cookie)
        return prog
    return Program()


def full_program(plan: FabricPlan, policy: str, jobs: Iterable[Allocation],
                 down: frozenset[Uplink] = frozenset()) -> Program:
    prog = base_program(plan, policy, down)
    for alloc in jobs:
        extra = job_program(plan, alloc)
        prog.flows += extra.flows
        prog.groups += extra.groups
    return prog


def ocs_circuits(plan: FabricPlan, alloc: Allocation) -> list[Circuit]:
    """The allocator's circuits as OCS port pairs (see testbed.core.topology for the numbering)."""
    L = plan.spec.leaves
    out = []
    for c in alloc.circuits:
        a = ocs_leaf_port(c.end_a[1])
        b = (ocs_leaf_port(c.end_b[1]) if c.end_b[0] == "leaf"
             else ocs_spine_port(L, c.end_b[1], c.end_b[2]))
        out.append(Circuit(f"ocs{c.ocs}", a, b))
    return out


# -- internals --------------------------------------------------------------------------------


def uplink_ports(plan: FabricPlan) -> dict[tuple[str, int], Uplink]:
    """(switch, port) -> the (leaf, spine) uplink it belongs to, from either end."""
    if plan.kind != "leaf_spine":
        return {}
    view = leaf_spine_view(plan, [])
    ports = {(f"leaf{leaf}", p): (leaf, spine) for (leaf, spine), p in view.up_port.items()}
    ports |= {(f"spine{spine}", p): (leaf, spine)
              for (leaf, spine), p in view.down_port.items()}
    return ports


def broken_paths(alloc: Allocation, down: frozenset[Uplink]) -> str | None:
    """One sentence if a vClos job is pinned to an uplink that is down, else None. (vClos
    forbids every other path, so such a job cannot make progress.)"""
    if alloc.policy != "vclos":
        return None
    leaves = sorted({leaf for leaf, _slot in alloc.hosts})
    if len(leaves) < 2:
        return None
    for leaf, slot in sorted(alloc.hosts):
        spine = alloc.spine_of.get((leaf, slot))
        if spine is not None and (leaf, spine) in down:
            return (f"job {alloc.job_id}: link leaf{leaf}-spine{spine} is down and the job's "
                    f"vClos path for host slot {slot} of leaf {leaf} runs over it (vClos "
                    "allows the job no other path)")
    return None


def _ecmp_program(plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
    view = leaf_spine_view(plan, [])
    prog = Program(delivery_rules(plan, []))
    L = plan.spec.leaves
    for src_leaf in range(L):
        for dst_leaf in range(L):
            if src_leaf == dst_leaf:
                continue
            spines = sorted(s for s in view.spines_of(src_leaf) & view.spines_of(dst_leaf)
                            if (src_leaf, s) not in down and (dst_leaf, s) not in down)
            gid = ECMP_GROUP + dst_leaf
            prog.groups.append(GroupRule(f"leaf{src_leaf}", gid,
                                         tuple(view.up_port[(src_leaf, s)] for s in spines)))
            for dst in plan.hosts:
                if dst.leaf == dst_leaf:
                    prog.flows.append(FlowRule(f"leaf{src_leaf}", PRIO_ROUTE, 0,
                                               eth_dst=dst.nics[0].mac, group=gid))
    return prog


def _vclos_up_port(plan: FabricPlan):
    H = plan.spec.hosts_per_leaf

    def up(leaf: int, slot: int, alloc: Allocation) -> int | None:
        spine = alloc.spine_of.get((leaf, slot))
        return None if spine is None else leaf_uplink_port(H, spine)

    return up


def _ocs_up_port(plan: FabricPlan, alloc: Allocation):
    H = plan.spec.hosts_per_leaf

    def up(leaf: int, slot: int, alloc: Allocation) -> int | None:
        index = alloc.circuit_of.get((leaf, slot))
        return None if index is None else leaf_uplink_port(H, alloc.circuits[index].ocs)

    return up


def _pinned_rules(plan: FabricPlan, alloc: Allocation, cookie: int, up_port) -> list[FlowRule]:
    """Each job host sends traffic for job hosts on other leaves out of its own uplink."""
    rules = []
    for leaf, slot in alloc.hosts:
        port = up_port(leaf, slot, alloc)
        if port is None:
            continue
        for dleaf, dslot in alloc.hosts:
            if dleaf != leaf:
                mac = plan.host_at(dleaf, dslot).nics[0].mac
                rules.append(FlowRule(f"leaf{leaf}", PRIO_JOB, port, in_port=1 + slot,
                                      eth_dst=mac, cookie=cookie))
    return rules


def _spine_rules_for_circuits(plan: FabricPlan, alloc: Allocation, circuits: list[Circuit],
                              cookie: int) -> list[FlowRule]:
    """On an OCS fabric a spine reaches a leaf only through the job's circuit to it."""
    view = leaf_spine_view(plan, circuits)
    rules = []
    for leaf, slot in alloc.hosts:
        mac = plan.host_at(leaf, slot).nics[0].mac
        for spine in alloc.spines:
            port = view.down_port.get((leaf, spine))
            if port is not None:
                rules.append(FlowRule(f"spine{spine}", PRIO_JOB, port, eth_dst=mac,
                                      cookie=cookie))
    return rules

"""What every switch must hold under a routing policy and a set of running jobs (pure).

The controller turns this program into OpenFlow 1.3 messages; the tests check it with the
``static_routes.trace`` tracer. Rules belonging to a job carry the job's cookie so they can be
listed and deleted together.

Each routing policy (``sdn_app.policies``, one module each) says what its program holds;
this module composes them and keeps the pieces several policies share.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from sdn_app.allocation.ledger import Allocation
from sdn_app.static_routes import (
    CrossConnect,
    FlowRule,
    leaf_spine_view,
)
from testbed.core.registry import POLICIES
from testbed.core.topology import FabricPlan, leaf_host_port, ocs_leaf_port, ocs_spine_port

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
    """Rules that hold whatever jobs run under ``policy``; ``down``: leaf-spine links down."""
    return POLICIES.get(policy).base_program(plan, down)


def job_program(plan: FabricPlan, alloc: Allocation) -> Program:
    """Rules one job adds (all with the job's cookie): its policy's (none for ecmp), and on
    an electrical leaf-spine fabric the path counters that show which spine each pair of its
    hosts crossed (:mod:`sdn_app.path_counters`)."""
    from sdn_app.path_counters import counter_rules

    prog = POLICIES.get(alloc.policy).job_program(plan, alloc)
    own = {f.switch for f in prog.flows}
    prog.flows += counter_rules(plan, alloc, job_cookie(alloc.job_id), taken=own)
    return prog


def full_program(plan: FabricPlan, policy: str, jobs: Iterable[Allocation],
                 down: frozenset[Uplink] = frozenset()) -> Program:
    prog = base_program(plan, policy, down)
    for alloc in jobs:
        extra = job_program(plan, alloc)
        prog.flows += extra.flows
        prog.groups += extra.groups
    return prog


def broken_paths(alloc: Allocation, down: frozenset[Uplink]) -> str | None:
    """One sentence if the job's policy leaves it no path with ``down`` links down."""
    return POLICIES.get(alloc.policy).broken(alloc, down)


def ocs_circuits(plan: FabricPlan, alloc: Allocation) -> list[CrossConnect]:
    """The allocator's circuits as OCS port pairs (see testbed.core.topology for the numbering)."""
    L = plan.spec.leaves
    out = []
    for c in alloc.circuits:
        a = ocs_leaf_port(c.end_a[1])
        b = (ocs_leaf_port(c.end_b[1]) if c.end_b[0] == "leaf"
             else ocs_spine_port(L, c.end_b[1], c.end_b[2]))
        out.append(CrossConnect(f"ocs{c.ocs}", a, b))
    return out


def uplink_ports(plan: FabricPlan) -> dict[tuple[str, int], Uplink]:
    """(switch, port) -> the (leaf, spine) uplink it belongs to, from either end."""
    if plan.kind != "leaf_spine":
        return {}
    view = leaf_spine_view(plan, [])
    ports = {(f"leaf{leaf}", p): (leaf, spine) for (leaf, spine), p in view.up_port.items()}
    ports |= {(f"spine{spine}", p): (leaf, spine)
              for (leaf, spine), p in view.down_port.items()}
    return ports


def pinned_rules(plan: FabricPlan, alloc: Allocation, cookie: int,
                 up_port: Callable[[int, int], int | None]) -> list[FlowRule]:
    """Each job host sends traffic for job hosts on other leaves out of its own uplink
    (``up_port(leaf, slot)``; None leaves the host on the fabric's base routes)."""
    rules = []
    for leaf, slot in alloc.hosts:
        port = up_port(leaf, slot)
        if port is None:
            continue
        for dleaf, dslot in alloc.hosts:
            if dleaf != leaf:
                mac = plan.host_at(dleaf, dslot).nics[0].mac
                rules.append(FlowRule(f"leaf{leaf}", PRIO_JOB, port, in_port=leaf_host_port(slot),
                                      eth_dst=mac, cookie=cookie))
    return rules

"""``ecmp``: each leaf sends traffic for another leaf to an OpenFlow SELECT group over its
uplinks; Open vSwitch hashes each flow's 5-tuple to a bucket, so two elephant flows can land
on one uplink while another idles. The simulator hashes the same way (CRC32 of the 5-tuple)."""

from __future__ import annotations

import struct
import zlib

from sdn_app.policies.base import LeafSlot, LinkId, RoutingPolicy, via_spine
from sdn_app.program import ECMP_GROUP, GroupRule, Program, Uplink
from sdn_app.static_routes import (
    PRIO_ROUTE,
    FlowRule,
    LeafSpineView,
    delivery_rules,
    leaf_spine_view,
)
from testbed.core.topology import FabricPlan

DPORT = 29500  # the workers' first listening port


def ecmp_spine(src: LeafSlot, dst: LeafSlot, sport: int, spines: int, dport: int = DPORT) -> int:
    """Deterministic ECMP choice: CRC32 of the 5-tuple modulo the number of spines."""
    key = struct.pack(">IIIIHHB", src[0], src[1], dst[0], dst[1], sport, dport, 6)
    return zlib.crc32(key) % spines


def spines_up(view: LeafSpineView, a: int, b: int, down: frozenset[Uplink]) -> list[int]:
    """The spines leaves ``a`` and ``b`` both reach over links that are up, sorted."""
    return sorted(s for s in view.spines_of(a) & view.spines_of(b)
                  if (a, s) not in down and (b, s) not in down)


def ecmp_program(plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
    """Delivery rules, plus per (leaf, destination leaf) a SELECT group over the spines both
    reach, leaving out spines behind a link that is down."""
    view = leaf_spine_view(plan, [])
    prog = Program(delivery_rules(plan, []))
    L = plan.spec.leaves
    for src_leaf in range(L):
        for dst_leaf in range(L):
            if src_leaf == dst_leaf:
                continue
            spines = spines_up(view, src_leaf, dst_leaf, down)
            gid = ECMP_GROUP + dst_leaf
            prog.groups.append(GroupRule(f"leaf{src_leaf}", gid,
                                         tuple(view.up_port[(src_leaf, s)] for s in spines)))
            for dst in plan.hosts:
                if dst.leaf == dst_leaf:
                    prog.flows.append(FlowRule(f"leaf{src_leaf}", PRIO_ROUTE, 0,
                                               eth_dst=dst.nics[0].mac, group=gid))
    return prog


class Ecmp(RoutingPolicy):
    name = "ecmp"
    per_flow_paths = True
    hashed = True
    reference = True
    isolates_jobs = False  # any job's flow may hash onto any uplink

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        return ecmp_program(plan, down)

    def path(self, alloc, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        return via_spine(src, dst, ecmp_spine(src, dst, sport, spines))


POLICY = Ecmp()


class _TooMany(Exception):
    pass


def collision_chance(flows: list[tuple[str, int, int]], spines: int,
                     budget: int = 200_000) -> float | None:
    """The chance that a uniform hash puts connections of two different jobs on one
    leaf-spine link, for ``flows`` of ``(job, source leaf, destination leaf)`` (cross-leaf
    connections, each hashed on its own over ``spines`` spines): exact, by counting the
    draws without such a link (backtracking over the flows); None when that takes more than
    ``budget`` steps."""
    users: dict[tuple[str, int, int], str] = {}
    steps = [0]

    def free(k: int) -> int:
        steps[0] += 1
        if steps[0] > budget:
            raise _TooMany
        if k == len(flows):
            return 1
        job, a, b = flows[k]
        count = 0
        for s in range(spines):
            links = (("up", a, s), ("down", s, b))
            if any(users.get(link, job) != job for link in links):
                continue
            added = [link for link in links if link not in users]
            users.update(dict.fromkeys(added, job))
            count += free(k + 1)
            for link in added:
                del users[link]
        return count

    try:
        return 1.0 - free(0) / spines ** len(flows)
    except _TooMany:
        return None

"""``ecmp-l3``: multipath on addresses only, the Linux kernel's default multipath hash
(``fib_multipath_hash_policy=0``). Every flow between two hosts takes one path, so a pair's
parallel connections cannot spread, and pairs collide where their hashes meet.

The controller computes the hash (:func:`l3_spine`) itself and installs one rule per (source
host, destination host) on each leaf, so the emulator and the simulator choose the same spine
for every pair. A spine that lost a link to either leaf is left out of the choice.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Sequence

from sdn_app.policies.base import LeafSlot, LinkId, RoutingPolicy, via_spine
from sdn_app.policies.ecmp import spines_up
from sdn_app.program import Program, Uplink
from sdn_app.static_routes import PRIO_ROUTE, FlowRule, delivery_rules, leaf_spine_view
from testbed.core.topology import FabricPlan, leaf_host_port


def l3_spine(src: LeafSlot, dst: LeafSlot, spines: Sequence[int]) -> int:
    """The spine of every flow from ``src`` to ``dst``: a hash of the two addresses.

    BLAKE2b stands in for the kernel's keyed SipHash: both spread structured addresses
    evenly. (CRC32 would not: it is linear, so the ring hops (l, j) -> (l+1, j) of a job
    crowd onto 8 of a leaf's 64 uplinks, a collision pattern no real kernel shows.)"""
    key = struct.pack(">IIII", src[0], src[1], dst[0], dst[1])
    digest = hashlib.blake2b(key, digest_size=8, person=b"fabriclab-l3").digest()
    return spines[int.from_bytes(digest, "big") % len(spines)]


class EcmpL3(RoutingPolicy):
    name = "ecmp-l3"
    hashed = True
    reference = True
    isolates_jobs = False  # any host pair may hash onto any uplink

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        view = leaf_spine_view(plan, [])
        prog = Program(delivery_rules(plan, []))
        leaves = {h.leaf for h in plan.hosts}
        common = {(a, b): spines_up(view, a, b, down) for a in leaves for b in leaves if a != b}
        for src in plan.hosts:
            for dst in plan.hosts:
                spines = common.get((src.leaf, dst.leaf))
                if not spines:  # the same leaf, or no spine left between the two
                    continue
                spine = l3_spine((src.leaf, src.slot), (dst.leaf, dst.slot), spines)
                prog.flows.append(FlowRule(f"leaf{src.leaf}", PRIO_ROUTE,
                                           view.up_port[(src.leaf, spine)],
                                           in_port=leaf_host_port(src.slot),
                                           eth_dst=dst.nics[0].mac))
        return prog

    def path(self, alloc, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        return via_spine(src, dst, l3_spine(src, dst, range(spines)))


POLICY = EcmpL3()

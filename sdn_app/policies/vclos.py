"""``vclos``: each job gets spines of its own (a virtual Clos); each job host's cross-leaf
traffic is pinned to its spine, so jobs never share a fabric link. Traffic outside any job
falls back to ECMP."""

from __future__ import annotations

from collections.abc import Sequence

from sdn_app.allocation.ledger import Allocation
from sdn_app.policies.base import LeafSlot, LinkId, RoutingPolicy, spine_links, via_spine
from sdn_app.policies.ecmp import ecmp_program
from sdn_app.program import Program, Uplink, job_cookie, pinned_rules
from testbed.core.topology import FabricPlan, leaf_uplink_port


class Vclos(RoutingPolicy):
    name = "vclos"
    allocates_as = "vclos"
    job_policies = ("vclos", "ecmp")
    isolates_jobs = True  # its own spines; its hosts' cross-leaf traffic pinned to them

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        return ecmp_program(plan, down)

    def job_program(self, plan: FabricPlan, alloc: Allocation) -> Program:
        H = plan.spec.hosts_per_leaf

        def up(leaf: int, slot: int) -> int | None:
            spine = alloc.spine_of.get((leaf, slot))
            return None if spine is None else leaf_uplink_port(H, spine)

        return Program(pinned_rules(plan, alloc, job_cookie(alloc.job_id), up))

    def broken(self, alloc: Allocation, down: frozenset[Uplink]) -> str | None:
        """vClos forbids every other path, so a job pinned to a dead uplink cannot progress."""
        if len({leaf for leaf, _slot in alloc.hosts}) < 2:
            return None
        for leaf, slot in sorted(alloc.hosts):
            spine = alloc.spine_of.get((leaf, slot))
            if spine is not None and (leaf, spine) in down:
                return (f"job {alloc.job_id}: link leaf{leaf}-spine{spine} is down and the "
                        f"job's vClos path for host slot {slot} of leaf {leaf} runs over it "
                        "(vClos allows the job no other path)")
        return None

    def path(self, alloc: Allocation, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        return via_spine(src, dst, alloc.spine_of.get(src, 0))

    def fabric_links(self, alloc: Allocation, src: LeafSlot, dst: LeafSlot,
                     spines: int) -> tuple[LinkId, ...]:
        """:meth:`path`'s leaf-spine links alone."""
        return spine_links(src[0], dst[0], alloc.spine_of.get(src, 0))

    def fabric_links_to_leaves(self, alloc: Allocation, src: LeafSlot, leaves: Sequence[int],
                               spines: int) -> list[tuple[LinkId, ...]]:
        """Up from ``src``'s leaf to its spine (one link for all), down to each leaf."""
        spine = alloc.spine_of.get(src, 0)
        up = ("ls", src[0], spine)
        return [(up, ("sl", spine, leaf)) for leaf in leaves]


POLICY = Vclos()

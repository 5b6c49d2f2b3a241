"""``ocs-vclos``: leaves and spines meet through optical circuit switches, which hold only the
circuits of running jobs. The allocator picks a job's circuits (through a spine, or direct
leaf to leaf) and the job's hosts are pinned to them."""

from __future__ import annotations

from collections.abc import Sequence

from sdn_app.allocation.ledger import Allocation
from sdn_app.policies.base import LeafSlot, LinkId, RoutingPolicy
from sdn_app.program import PRIO_JOB, Program, Uplink, job_cookie, ocs_circuits, pinned_rules
from sdn_app.static_routes import FlowRule, circuit_rules, delivery_rules, leaf_spine_view
from testbed.core.topology import FabricPlan, leaf_uplink_port


class OcsVclos(RoutingPolicy):
    name = "ocs-vclos"
    fabric_kinds = ("ocs_leaf_spine",)
    allocates_as = "ocs-vclos"
    job_policies = ("ocs-vclos", "ecmp")
    isolates_jobs = True  # its own circuits; a spine reaches its hosts only through them

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        return Program(delivery_rules(plan, []))

    def job_program(self, plan: FabricPlan, alloc: Allocation) -> Program:
        cookie = job_cookie(alloc.job_id)
        circuits = ocs_circuits(plan, alloc)
        H = plan.spec.hosts_per_leaf

        def up(leaf: int, slot: int) -> int | None:
            index = alloc.circuit_of.get((leaf, slot))
            return None if index is None else leaf_uplink_port(H, alloc.circuits[index].ocs)

        prog = Program(circuit_rules(circuits, cookie))
        prog.flows += pinned_rules(plan, alloc, cookie, up)
        # A spine reaches a leaf only through the job's circuit to it.
        view = leaf_spine_view(plan, circuits)
        for leaf, slot in alloc.hosts:
            mac = plan.host_at(leaf, slot).nics[0].mac
            for spine in alloc.spines:
                port = view.down_port.get((leaf, spine))
                if port is not None:
                    prog.flows.append(FlowRule(f"spine{spine}", PRIO_JOB, port, eth_dst=mac,
                                               cookie=cookie))
        return prog

    def path(self, alloc: Allocation, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        return [("hu", *src), *self.fabric_links(alloc, src, dst, spines), ("hd", *dst)]

    def fabric_links(self, alloc: Allocation, src: LeafSlot, dst: LeafSlot,
                     spines: int) -> tuple[LinkId, ...]:
        """The job's circuits between the two leaves: a direct leaf-leaf circuit, or up to
        a spine and down (none within one leaf)."""
        la, lb = src[0], dst[0]
        if la == lb:
            return ()
        up = alloc.circuits[alloc.circuit_of[src]]
        if up.end_b[0] == "leaf":
            return (("cl", up.ocs, la, lb),)
        _, s, port = up.end_b
        down = alloc.spine_circuit(lb, s)
        return (("cu", up.ocs, la, s, port), ("cd", down.ocs, s, down.end_b[2], lb))

    def fabric_links_to_leaves(self, alloc: Allocation, src: LeafSlot, leaves: Sequence[int],
                               spines: int) -> list[tuple[LinkId, ...]]:
        """:meth:`fabric_links` to each leaf: ``src``'s circuit (one link for all), then
        the job's circuit from its spine down to the leaf (or the direct circuit)."""
        la = src[0]
        up = alloc.circuits[alloc.circuit_of[src]]
        if up.end_b[0] == "leaf":
            return [(("cl", up.ocs, la, lb),) for lb in leaves]
        _, s, port = up.end_b
        first = ("cu", up.ocs, la, s, port)
        downs = [alloc.spine_circuit(lb, s) for lb in leaves]
        return [(first, ("cd", down.ocs, s, down.end_b[2], lb))
                for lb, down in zip(leaves, downs, strict=True)]

POLICY = OcsVclos()

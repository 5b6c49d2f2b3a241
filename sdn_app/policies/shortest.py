"""``shortest``: multi-dimensional fabrics; each dimension's switch (or ring link) forwards by
destination, so a transfer along dimension d crosses only dimension d's links. Jobs span the
whole fabric and add no rules; the simulator routes multidim fabrics per dimension itself."""

from __future__ import annotations

from sdn_app.policies.base import LeafSlot, LinkId, RoutingPolicy
from sdn_app.program import Program, Uplink
from sdn_app.static_routes import static_rules
from testbed.core.topology import FabricPlan


class Shortest(RoutingPolicy):
    name = "shortest"
    fabric_kinds = ("multidim",)
    kernel_bridges_ok = True
    # each dimension's traffic keeps to that dimension's links, but every job spans every
    # host, so jobs running at once share them all
    isolates_jobs = False

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        return Program(static_rules(plan))

    def path(self, alloc, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        raise NotImplementedError("multidim paths are per dimension (testbed.sim.collectives)")


POLICY = Shortest()

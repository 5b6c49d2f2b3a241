"""A routing policy from outside fabriclab, as a researcher would write one: ``single-spine``
sends all cross-leaf traffic through spine 0 (the worst case every other policy improves on).
The tests register it through the registry's API and through an entry point."""

from __future__ import annotations

from sdn_app.policies.base import RoutingPolicy, via_spine
from sdn_app.program import Program
from sdn_app.static_routes import PRIO_ROUTE, FlowRule, delivery_rules, leaf_spine_view


class SingleSpine(RoutingPolicy):
    name = "single-spine"

    def base_program(self, plan, down=frozenset()):
        view = leaf_spine_view(plan, [])
        prog = Program(delivery_rules(plan, []))
        for leaf in range(plan.spec.leaves):
            for dst in plan.hosts:
                if dst.leaf != leaf:
                    prog.flows.append(FlowRule(f"leaf{leaf}", PRIO_ROUTE, view.up_port[(leaf, 0)],
                                               eth_dst=dst.nics[0].mac))
        return prog

    def path(self, alloc, src, dst, spines, sport=0):
        return via_spine(src, dst, 0)


POLICY = SingleSpine()

"""What the fabric's switches are made of: Open vSwitch bridges (OpenFlow: the controller or
the static rules program them) or kernel Linux bridges (:class:`~testbed.emulator.mn_nodes.
KernelBridge`), which only forward by destination but cost far less CPU per packet: the
userspace datapath forwards every packet of every bridge on one thread (BENCHMARKS.md,
"Where the CPU goes").

Kernel bridges can stand in only where no switch needs more than destination forwarding on a
loop-free fabric: a multidim fabric (each dimension's switch is a star of hosts) or a
leaf-spine fabric whose switches form a tree (one leaf, or any number of leaves under one
spine), routed statically or by a policy that says its rules are just that
(``kernel_bridges_ok``). ``auto`` takes them wherever they can stand in.
"""

from __future__ import annotations

from typing import Literal

import networkx as nx

from testbed.core.errors import SpecError
from testbed.core.registry import POLICIES
from testbed.core.topology import FabricPlan

SwitchChoice = Literal["auto", "ovs", "kernel"]
SWITCH_CHOICES: tuple[str, ...] = ("auto", "ovs", "kernel")


def kernel_bridge_error(plan: FabricPlan, policy: str | None) -> str | None:
    """Why kernel bridges cannot stand in for this fabric's switches (None: they can)."""
    if policy is not None and not getattr(POLICIES.get(policy), "kernel_bridges_ok", False):
        return (f"policy {policy} programs its switches with OpenFlow rules, which kernel "
                "bridges cannot hold")
    if plan.kind == "multidim":
        return None
    if plan.kind != "leaf_spine" or not plan.loop_free():
        return (f"a {plan.kind} fabric of more than one leaf and one spine has loops that only "
                "OpenFlow rules route")
    return None


def resolve(choice: str, plan: FabricPlan, policy: str | None) -> str:
    """``ovs`` or ``kernel`` for ``choice``; a SpecError naming the field if ``kernel`` was
    asked for where it cannot stand in."""
    if choice not in SWITCH_CHOICES:
        raise SpecError(f"switches: {choice!r} is not one of {', '.join(SWITCH_CHOICES)}")
    why = kernel_bridge_error(plan, policy)
    if choice == "kernel" and why:
        raise SpecError(f"switches: kernel bridges cannot be used here: {why}; "
                        "use switches: ovs (or auto)")
    return "ovs" if choice == "ovs" or why else "kernel"


def bridge_fdb(plan: FabricPlan, switch: str) -> list[tuple[str, str]]:
    """(port interface, MAC) for every host NIC ``switch`` reaches: the NIC's own port where
    it hangs off ``switch``, else the port of the first link on the way through the other
    switches to the one it hangs off (the only way, on the loop-free fabrics kernel bridges
    stand in for)."""
    g = plan.switch_graph()
    ways = nx.single_source_shortest_path(g, switch)  # switch -> the switches on the way
    out = []
    for lk in plan.links:
        for host, port, sw, sw_intf in ((lk.a, lk.a_port, lk.b, lk.b_intf),
                                        (lk.b, lk.b_port, lk.a, lk.a_intf)):
            if not plan.is_host(host) or plan.is_host(sw):
                continue
            mac = plan.node(host).nic_on_port(port).mac
            if sw == switch:
                out.append((sw_intf, mac))
            elif sw in ways:
                link = next(iter(g.get_edge_data(switch, ways[sw][1]).values()))["link"]
                out.append((link.a_intf if link.a == switch else link.b_intf, mac))
    return out

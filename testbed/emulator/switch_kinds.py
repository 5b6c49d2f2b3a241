"""What the fabric's switches are made of: Open vSwitch bridges (OpenFlow: the controller or
the static rules program them) or kernel Linux bridges (:class:`~testbed.emulator.mn_nodes.
KernelBridge`), which only forward by destination but cost far less CPU per packet: the
userspace datapath forwards every packet of every bridge on one thread (BENCHMARKS.md,
"Where the CPU goes").

Kernel bridges can stand in only where no switch needs more than destination forwarding on a
loop-free fabric: a multidim fabric (each dimension's switch is a star of hosts) or a single
leaf, routed statically or by a policy that says its rules are just that
(``kernel_bridges_ok``). ``auto`` takes them wherever they can stand in.
"""

from __future__ import annotations

from typing import Literal

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
    single_leaf = plan.kind == "leaf_spine" and getattr(plan.spec, "leaves", 0) == 1
    if plan.kind != "multidim" and not single_leaf:
        return (f"a {plan.kind} fabric with more than one leaf has loops that only OpenFlow "
                "rules route")
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
    """(port interface, MAC of the host behind it) for every host port of ``switch``."""
    out = []
    for lk in plan.links:
        for me, my_intf, other, other_port in ((lk.a, lk.a_intf, lk.b, lk.b_port),
                                               (lk.b, lk.b_intf, lk.a, lk.a_port)):
            if me == switch and plan.is_host(other):
                out.append((my_intf, plan.node(other).nic_on_port(other_port).mac))
    return out

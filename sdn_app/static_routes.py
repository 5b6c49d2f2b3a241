"""Proactive forwarding rules computed from the fabric plan, and a tracer that follows them.

Pure Python: the testbed installs these rules with ``ovs-ofctl`` when it runs without a
controller, and the controller app installs the same rules as OpenFlow messages.

Routing used here (``static``): a leaf sends traffic for another leaf up to one spine reachable
from both leaves, chosen deterministically per (source host, destination host) pair — the same
spreading ECMP does, without the hash. OCS switches hold the default wiring
(:func:`testbed.core.topology.default_wiring`: leaf l meets spine s on OCS (l + s) mod ocs_count).
Multidim switches forward by destination MAC.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from testbed.core.spec import OcsLeafSpineSpec
from testbed.core.topology import (
    FabricPlan,
    Host,
    Link,
    default_wiring,
    leaf_host_port,
    ocs_leaf_port,
    ocs_spine_port,
)

PRIO_LOCAL = 200  # a leaf/dim switch delivering to a host it owns
PRIO_ROUTE = 100  # a leaf sending a remote destination up, a spine sending down
PRIO_CIRCUIT = 300  # OCS port-to-port circuit


@dataclass(frozen=True)
class FlowRule:
    switch: str
    priority: int
    out_port: int
    in_port: int | None = None
    eth_dst: str | None = None
    cookie: int = 0
    group: int | None = None  # send to this SELECT group instead of out_port
    eth_src: str | None = None  # a path counter's source (sdn_app.path_counters)

    def to_ofctl(self) -> str:
        """The rule in ``ovs-ofctl add-flows`` syntax."""
        match = [f"cookie={self.cookie:#x}", f"priority={self.priority}"]
        if self.in_port is not None:
            match.append(f"in_port={self.in_port}")
        if self.eth_src is not None:
            match.append(f"dl_src={self.eth_src}")
        if self.eth_dst is not None:
            match.append(f"dl_dst={self.eth_dst}")
        action = f"group:{self.group}" if self.group is not None else f"output:{self.out_port}"
        return ",".join(match) + f",actions={action}"


@dataclass(frozen=True)
class CrossConnect:
    """A port-to-port connection inside one OCS switch: how an allocated
    :class:`~sdn_app.allocation.ledger.Circuit` is programmed."""

    ocs: str
    port_a: int
    port_b: int


@dataclass
class LeafSpineView:
    """Which spines each leaf reaches, and on which ports (directly or through OCS circuits)."""

    up_port: dict[tuple[int, int], int] = field(default_factory=dict)  # (leaf, spine) -> leaf port
    # (leaf, spine) -> spine port
    down_port: dict[tuple[int, int], int] = field(default_factory=dict)

    def spines_of(self, leaf: int) -> set[int]:
        return {s for (lf, s) in self.up_port if lf == leaf}


def default_circuits(plan: FabricPlan) -> list[CrossConnect]:
    """Static OCS wiring: the fabric's :func:`~testbed.core.topology.default_wiring`."""
    spec = plan.spec
    if not isinstance(spec, OcsLeafSpineSpec):
        return []
    return [
        CrossConnect(f"ocs{o}", ocs_leaf_port(leaf), ocs_spine_port(spec.leaves, spine, p))
        for o, leaf, spine, p in default_wiring(spec.leaves, spec.spines, spec.ocs_count)
    ]


def leaf_spine_view(plan: FabricPlan, circuits: list[CrossConnect]) -> LeafSpineView:
    """Resolve direct uplinks and OCS circuits into leaf<->spine adjacencies."""
    view = LeafSpineView()
    far_end: dict[tuple[str, int], tuple[str, int]] = {}
    for lk in plan.links:
        far_end[(lk.a, lk.a_port)] = (lk.b, lk.b_port)
        far_end[(lk.b, lk.b_port)] = (lk.a, lk.a_port)
    for lk in plan.links:
        if lk.kind == "uplink":
            leaf, spine = plan.node(lk.a).index, plan.node(lk.b).index
            view.up_port[(leaf, spine)] = lk.a_port
            view.down_port[(leaf, spine)] = lk.b_port
    for c in circuits:
        a, b = far_end[(c.ocs, c.port_a)], far_end[(c.ocs, c.port_b)]
        ends = {plan.node(a[0]).role: a, plan.node(b[0]).role: b}
        if set(ends) == {"leaf", "spine"}:
            leaf, spine = plan.node(ends["leaf"][0]).index, plan.node(ends["spine"][0]).index
            view.up_port.setdefault((leaf, spine), ends["leaf"][1])
            view.down_port.setdefault((leaf, spine), ends["spine"][1])
    return view


def pick_spine(src: Host, dst: Host, view: LeafSpineView) -> int | None:
    """The spine carrying src -> dst: spread over the spines both leaves reach."""
    common = sorted(view.spines_of(src.leaf) & view.spines_of(dst.leaf))
    if not common:
        return None
    return common[(src.index + dst.index) % len(common)]


def static_rules(plan: FabricPlan, circuits: list[CrossConnect] | None = None) -> list[FlowRule]:
    """Every rule the fabric needs to forward all reachable host pairs."""
    if plan.kind == "multidim":
        return _dim_rules(plan)
    if circuits is None:
        circuits = default_circuits(plan)
    return _leaf_spine_rules(plan, circuits) + circuit_rules(circuits)


def circuit_rules(circuits: list[CrossConnect], cookie: int = 0) -> list[FlowRule]:
    rules = []
    for c in circuits:
        rules.append(FlowRule(c.ocs, PRIO_CIRCUIT, c.port_b, in_port=c.port_a, cookie=cookie))
        rules.append(FlowRule(c.ocs, PRIO_CIRCUIT, c.port_a, in_port=c.port_b, cookie=cookie))
    return rules


def delivery_rules(plan: FabricPlan, circuits: list[CrossConnect]) -> list[FlowRule]:
    """Leaf delivery to its own hosts, and spine delivery down to each destination's leaf."""
    view = leaf_spine_view(plan, circuits)
    rules = []
    for dst in plan.hosts:
        mac = dst.nics[0].mac
        rules.append(FlowRule(f"leaf{dst.leaf}", PRIO_LOCAL, leaf_host_port(dst.slot), eth_dst=mac))
        for (leaf, spine), port in sorted(view.down_port.items()):
            if leaf == dst.leaf:
                rules.append(FlowRule(f"spine{spine}", PRIO_ROUTE, port, eth_dst=mac))
    return rules


def _leaf_spine_rules(plan: FabricPlan, circuits: list[CrossConnect]) -> list[FlowRule]:
    """Delivery rules plus, on each leaf, one pinned uplink per (source, remote destination)."""
    view = leaf_spine_view(plan, circuits)
    rules = delivery_rules(plan, circuits)
    for dst in plan.hosts:
        for src in plan.hosts:
            if src.leaf == dst.leaf:
                continue
            spine = pick_spine(src, dst, view)
            if spine is not None:
                rules.append(FlowRule(
                    f"leaf{src.leaf}", PRIO_ROUTE, view.up_port[(src.leaf, spine)],
                    in_port=leaf_host_port(src.slot), eth_dst=dst.nics[0].mac,
                ))
    return rules


def _dim_rules(plan: FabricPlan) -> list[FlowRule]:
    rules = []
    for lk in plan.links:
        if lk.kind == "dim":
            mac = plan.node(lk.a).nic(lk.dim).mac
            rules.append(FlowRule(lk.b, PRIO_LOCAL, lk.b_port, eth_dst=mac))
    return rules


class Unreachable(Exception):
    pass


def trace(plan: FabricPlan, rules: list[FlowRule], src: str, dst: str,
          dim: int | None = None, groups: dict[tuple[str, int], tuple[int, ...]] | None = None,
          bucket: int = 0) -> list[tuple[Link, bool]]:
    """Follow the rules from ``src`` to ``dst``; return the links crossed, each with
    ``True`` when crossed from its ``a`` end to its ``b`` end. Raises Unreachable.

    ``groups`` maps (switch, group id) to a SELECT group's ports; a flow takes bucket
    ``bucket`` modulo the group size (standing in for the switch's hash)."""
    src_h, dst_h = plan.node(src), plan.node(dst)
    assert isinstance(src_h, Host) and isinstance(dst_h, Host)
    ends: dict[tuple[str, int], tuple[Link, bool]] = {}
    for lk in plan.links:
        ends[(lk.a, lk.a_port)] = (lk, True)
        ends[(lk.b, lk.b_port)] = (lk, False)
    table: dict[str, list[FlowRule]] = {}
    for r in sorted(rules, key=lambda r: -r.priority):
        table.setdefault(r.switch, []).append(r)
    if _is_ring_nic(src_h, dim):  # a ring or mesh NIC reaches only the peer at its other end
        for nic in src_h.nics:
            if nic.dim == dim and nic.side != "host":
                lk, fwd = ends[(src, nic.port)]
                if (lk.b if fwd else lk.a) == dst:
                    return [(lk, fwd)]
        raise Unreachable(f"{dst} is not {src}'s neighbour in dimension {dim}")
    node, port = src, src_h.nic(dim).port
    path: list[tuple[Link, bool]] = []
    for _ in range(len(plan.switches) + 2):
        lk, fwd = ends[(node, port)]
        path.append((lk, fwd))
        node, in_port = (lk.b, lk.b_port) if fwd else (lk.a, lk.a_port)
        if plan.is_host(node):
            if node != dst:
                raise Unreachable(f"{src} -> {dst} arrives at {node}")
            return path
        mac, src_mac = dst_h.nic(dim).mac, src_h.nic(dim).mac
        rule = next((r for r in table.get(node, []) if _matches(r, in_port, mac, src_mac)),
                    None)
        if rule is None:
            raise Unreachable(f"{src} -> {dst}: no rule on {node} for in_port {in_port}")
        port = rule.out_port
        if rule.group is not None:
            ports = (groups or {}).get((node, rule.group))
            if not ports:
                raise Unreachable(f"{src} -> {dst}: group {rule.group} on {node} is empty")
            port = ports[bucket % len(ports)]
    raise Unreachable(f"{src} -> {dst}: forwarding loop")


def _is_ring_nic(h: Host, dim: int | None) -> bool:
    return any(n.dim == dim and n.side != "host" for n in h.nics)


def _matches(rule: FlowRule, in_port: int, mac: str, src_mac: str) -> bool:
    return (rule.in_port in (None, in_port) and rule.eth_dst in (None, mac)
            and rule.eth_src in (None, src_mac))

"""Mininet ``Topo`` subclasses for the three fabric kinds, built from the pure plan.

Every link is shaped with ``bw``; Mininet's own delay, loss, jitter and queue options are never
set (they would put netem at the root, before the shaping). A link's delay, jitter and loss go
in as ``netem`` (:mod:`testbed.emulator.impairments`), on kernels that have netem, and
``link_queue: fair`` as ``fair_quantum``, its buckets' quantum (:mod:`testbed.emulator.fair_queue`).
"""

from __future__ import annotations

from mininet.topo import Topo

from testbed.core.spec import LeafSpineSpec, MultidimSpec, OcsLeafSpineSpec
from testbed.core.topology import FabricPlan, build_plan
from testbed.emulator.fair_queue import quantum_bytes
from testbed.emulator.impairments import link_netem
from testbed.emulator.segmentation import largest_segment_bytes


class FabricTopo(Topo):
    """Any fabric plan as a Mininet topology: names, ports, dpids, IPs and MACs from the plan."""

    def build(self, plan: FabricPlan, netem: bool = False) -> None:  # type: ignore[override]
        """``netem``: give impaired links their delay, jitter and loss through netem."""
        self.plan = plan
        fair = ({"fair_quantum": quantum_bytes(largest_segment_bytes(plan))}
                if plan.spec.link_queue == "fair" else {})
        for s in plan.switches:
            self.addSwitch(s.name, dpid=s.dpid_hex)
        for h in plan.hosts:
            first = h.nics[0] if h.nics else None
            params = {"ip": f"{first.ip}/{first.prefix}", "mac": first.mac} if first else {}
            self.addHost(h.name, **params)
        for lk in plan.links:
            macs = {k: mac for k, mac in (("addr1", self._mac(lk.a, lk.a_port)),
                                          ("addr2", self._mac(lk.b, lk.b_port))) if mac}
            impair = {"netem": link_netem(lk)} if netem and lk.impaired else {}
            self.addLink(
                lk.a, lk.b, port1=lk.a_port, port2=lk.b_port, bw=lk.mbit_s,
                params1=self._ip(lk.a, lk.a_port), params2=self._ip(lk.b, lk.b_port), **macs,
                **impair, **fair,
            )

    def _nic(self, node: str, port: int):
        if not self.plan.is_host(node):
            return None
        return self.plan.node(node).nic_on_port(port)

    def _mac(self, node: str, port: int) -> str | None:
        nic = self._nic(node, port)
        return nic.mac if nic else None

    def _ip(self, node: str, port: int) -> dict:
        nic = self._nic(node, port)
        return {"ip": f"{nic.ip}/{nic.prefix}"} if nic else {}


class LeafSpineTopo(FabricTopo):
    def build(self, spec: LeafSpineSpec) -> None:  # type: ignore[override]
        super().build(build_plan(spec))


class OcsLeafSpineTopo(FabricTopo):
    def build(self, spec: OcsLeafSpineSpec) -> None:  # type: ignore[override]
        super().build(build_plan(spec))


class MultidimTopo(FabricTopo):
    def build(self, spec: MultidimSpec) -> None:  # type: ignore[override]
        super().build(build_plan(spec))

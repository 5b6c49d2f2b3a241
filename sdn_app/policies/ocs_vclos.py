"""``ocs-vclos``: leaves and spines meet through optical circuit switches, which hold only the
circuits of running jobs. The allocator picks a job's circuits (through a spine, or direct
leaf to leaf) and the job's hosts are pinned to them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import repeat
from typing import Any

from sdn_app.allocation.ledger import Allocation, BlockCircuits
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
    own_fabric_paths = True  # host j's circuit, then the job's circuit down to the leaf

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
        links = circuit_links(alloc)
        up, spine = links.up[src]
        if spine is None:
            return (("cl", up, la, lb),)
        return (up, links.down[spine][lb])

    def paths_of_pairs(self, alloc: Allocation, hosts: Sequence[LeafSlot],
                       pairs: Iterable[tuple[int, int]], spines: int) -> list[list[LinkId]]:
        """:meth:`path` of each pair's flow, the job's links read from its
        :class:`CircuitLinks` in one loop."""
        links = circuit_links(alloc)
        down = links.down
        at = list(map(links.by_host.__getitem__, hosts))  # by position
        found = []
        append = found.append
        for a, b in pairs:
            src, dst = at[a], at[b]
            lb = dst[2]
            if src[2] == lb:
                append([src[0], dst[3]])
                continue
            first, spine = src[1]
            if spine is None:
                append([src[0], ("cl", first, src[2], lb), dst[3]])
            else:
                append([src[0], first, down[spine][lb], dst[3]])
        return found

    def fabric_links_to_leaves(self, alloc: Allocation, src: LeafSlot, leaves: Sequence[int],
                               spines: int) -> list[tuple[LinkId, ...]]:
        """:meth:`fabric_links` to each leaf: ``src``'s circuit (one link for all), then
        the job's circuit from its spine down to the leaf (or the direct circuit)."""
        links = circuit_links(alloc)
        up, spine = links.up[src]
        if spine is None:
            la = src[0]
            return [(("cl", up, la, lb),) for lb in leaves]
        return list(zip(repeat(up), map(links.down[spine].__getitem__, leaves)))


class CircuitLinks:
    """An OCS-vClos job's circuit links, worked out once per job (its paths ask for them
    per flow): ``up[host]``, the link up the host's circuit and the spine it reaches, or the
    OCS and None for a direct leaf-leaf circuit (whose link names the destination leaf);
    ``down[spine][leaf]``, the link down the job's first circuit from the spine to the
    leaf (:meth:`Allocation.spine_circuit`); ``by_host[host]``, what its flows read: its
    host link up, its ``up`` entry, its leaf and its host link down (made once, for all its
    flows)."""

    def __init__(self, alloc: Allocation) -> None:
        circuits = alloc.circuits
        if isinstance(circuits, BlockCircuits):
            self._from_ends(*circuits.ends())
        else:
            self.up: dict[LeafSlot, tuple[Any, int | None]] = {}
            for host, index in alloc.circuit_of.items():
                ocs, _end_a, end_b = circuits[index]
                if end_b[0] == "leaf":
                    self.up[host] = (ocs, None)
                else:
                    _, spine, port = end_b
                    self.up[host] = (("cu", ocs, host[0], spine, port), spine)
            self.down: dict[int, dict[int, LinkId]] = {}
            for (leaf, spine), (ocs, _end_a, end_b) in alloc.spine_circuits().items():
                self.down.setdefault(spine, {})[leaf] = ("cd", ocs, spine, end_b[2], leaf)
        hosts = alloc.hosts
        leaves, slots = zip(*hosts, strict=True)
        self.by_host: dict[LeafSlot, tuple[LinkId, Any, int, LinkId]] = dict(zip(
            hosts, zip(zip(repeat("hu"), leaves, slots), map(self.up.get, hosts), leaves,
                       zip(repeat("hd"), leaves, slots), strict=True), strict=True))

    def _from_ends(self, hosts: Sequence[LeafSlot], ocses: list[int], spines: list[int],
                   ports: list[int]) -> None:
        """From a :class:`BlockCircuits`' ends (host i's circuit is circuit i), without
        building its circuits: the links are made by ``zip``, the first circuit of each
        (leaf, spine) kept as the way down."""
        leaves = [leaf for leaf, _slot in hosts]
        ups = zip(repeat("cu"), ocses, leaves, spines, ports)
        self.up = dict(zip(hosts, zip(ups, spines, strict=True), strict=True))
        self.down = {}
        for link in reversed(list(zip(repeat("cd"), ocses, spines, ports, leaves))):
            self.down.setdefault(link[2], {})[link[4]] = link


def circuit_links(alloc: Allocation) -> CircuitLinks:
    """The :class:`CircuitLinks` of ``alloc``, kept with it."""
    links = alloc.kept.get("ocs-vclos links")
    if links is None:
        links = alloc.kept["ocs-vclos links"] = CircuitLinks(alloc)
    return links


POLICY = OcsVclos()

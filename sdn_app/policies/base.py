"""The interface every routing policy implements, for the controller and for the simulator.

A policy is one object (conventionally ``POLICY`` in its own module) registered in
:data:`testbed.core.registry.POLICIES`. It answers five questions:

- which fabrics it routes (``fabric_kinds``) and how the allocator places a job for it
  (``allocates_as``: the allocator policy whose placement it uses: ``ecmp`` any free hosts,
  ``vclos`` a vClos shape, ``ocs-vclos`` an OCS shape);
- what every switch holds whatever jobs run (:meth:`base_program`) and what one placed job adds
  (:meth:`job_program`): the controller turns both into OpenFlow, the tests trace them;
- which directed links a flow from host ``src`` to host ``dst`` of a placed job crosses
  (:meth:`path`): the simulator routes its flows with it, so both backends route alike;
- whether a link failure leaves a job without a path (:meth:`broken`);
- whether it keeps jobs off each other's links (``isolates_jobs``), which decides whether
  the job invariant judges a job it routed.

Hosts are ``(leaf, slot)`` pairs. Directed links are tuples: ``("hu", leaf, slot)`` host up,
``("hd", leaf, slot)`` host down, ``("ls", leaf, spine)``, ``("sl", spine, leaf)``, and on OCS
fabrics ``("cu", ocs, leaf, spine, port)``, ``("cd", ocs, spine, port, leaf)``,
``("cl", ocs, leaf_a, leaf_b)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from sdn_app.allocation.cluster import Cluster
from sdn_app.allocation.ledger import Allocation, LeafSlot
from sdn_app.program import Program, Uplink
from testbed.core.topology import FabricPlan

LinkId = tuple
# The kinds of directed link ids (the first element): a host's own links, and the fabric's.
HOST_LINKS = ("hu", "hd")
FABRIC_LINKS = ("ls", "sl", "cu", "cd", "cl")


class RoutingPolicy:
    """Base class: ECMP-style placement (any free hosts), no per-job rules, never broken."""

    name: ClassVar[str]
    fabric_kinds: ClassVar[tuple[str, ...]] = ("leaf_spine",)
    allocates_as: ClassVar[str] = "ecmp"
    # The policies a job may ask for on a fabric that runs this one (the fabric's own first).
    job_policies: ClassVar[tuple[str, ...]] = ()
    # Flows of one host pair can take different paths (the simulator draws source ports).
    per_flow_paths: ClassVar[bool] = False
    # The path depends on a hash, so two flows can collide where an isolated fabric would not.
    hashed: ClassVar[bool] = False
    # What comparisons measure other policies against (the routing fabrics run today).
    reference: ClassVar[bool] = False
    # Its rules only forward by destination on a loop-free fabric, so kernel bridges with
    # static FDB entries can stand in for its OpenFlow switches (testbed.emulator.switch_kinds).
    kernel_bridges_ok: ClassVar[bool] = False
    # A reference for the cluster simulator only (its paths exist on no real fabric).
    simulator_only: ClassVar[bool] = False
    # No link a placed job's traffic may cross carries another job's: nothing but its own
    # links should set its pace, so the job invariant (analysis.job_invariant) judges it.
    isolates_jobs: ClassVar[bool] = False
    # Each host of a job reaches another leaf over fabric links no other host of the job
    # takes to that leaf (one spine or circuit per host): the simulator's aggregated steps
    # then take each host's path to a leaf as it is, with nothing to merge.
    own_fabric_paths: ClassVar[bool] = False

    def allowed_for_jobs(self) -> tuple[str, ...]:
        return self.job_policies or (self.name,)

    # -- the controller ---------------------------------------------------------------------

    def base_program(self, plan: FabricPlan, down: frozenset[Uplink] = frozenset()) -> Program:
        """Rules that hold whatever jobs run; ``down`` lists leaf-spine links that are down."""
        raise NotImplementedError

    def job_program(self, plan: FabricPlan, alloc: Allocation) -> Program:
        """Rules one placed job adds (all carrying the job's cookie)."""
        return Program()

    def allocate(self, cluster: Cluster, job_id: str, hosts_wanted: int) -> Allocation:
        return cluster.allocate(job_id, hosts_wanted, self.allocates_as, label=self.name)

    def claim(self, cluster: Cluster, job_id: str, hosts: list[LeafSlot]) -> Allocation:
        return cluster.claim(job_id, hosts, self.allocates_as, label=self.name)

    def broken(self, alloc: Allocation, down: frozenset[Uplink]) -> str | None:
        """One sentence if the job has no path left with ``down`` links down, else None."""
        return None

    # -- the simulator ----------------------------------------------------------------------

    def path(self, alloc: Allocation, src: LeafSlot, dst: LeafSlot, spines: int,
             sport: int = 0) -> list[LinkId]:
        """Directed links of a flow from ``src`` to ``dst`` (``sport``: its source port)."""
        raise NotImplementedError

    def fabric_links(self, alloc: Allocation, src: LeafSlot, dst: LeafSlot,
                     spines: int) -> tuple[LinkId, ...]:
        """The links of :meth:`path` (source port 0) that are not host links, in order (a
        policy may work them out without the host links)."""
        return tuple([link for link in self.path(alloc, src, dst, spines, 0)
                      if link[0] not in HOST_LINKS])

    def paths_of_pairs(self, alloc: Allocation, hosts: Sequence[LeafSlot],
                       pairs: Iterable[tuple[int, int]], spines: int
                       ) -> list[list[LinkId]] | None:
        """:meth:`path` (source port 0) of each flow ``hosts[a] -> hosts[b]`` of ``pairs``,
        in order, worked out at once; None (the default): ask :meth:`path` flow by flow."""
        return None

    def fabric_links_to_leaves(self, alloc: Allocation, src: LeafSlot, leaves: Sequence[int],
                               spines: int) -> list[tuple[LinkId, ...]] | None:
        """:meth:`fabric_links` from ``src`` to a host of each of ``leaves`` (none of them
        ``src``'s leaf), for a policy whose fabric links depend on the destination's leaf
        alone; None (the default) when they may depend on the destination host."""
        return None


def via_spine(src: LeafSlot, dst: LeafSlot, spine: int) -> list[LinkId]:
    """The links of a leaf-spine path through ``spine`` (or within one leaf)."""
    return [("hu", *src), *spine_links(src[0], dst[0], spine), ("hd", *dst)]


def spine_links(la: int, lb: int, spine: int) -> tuple[LinkId, ...]:
    """The leaf-spine links from leaf ``la`` up to ``spine`` and down to leaf ``lb`` (none
    within one leaf)."""
    return () if la == lb else (("ls", la, spine), ("sl", spine, lb))
